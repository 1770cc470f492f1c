//! Wake-ups (`sched_waking`, recorded with `--cpuctxsw`): which thread woke
//! which, from which CPU to which. `sched_waking` runs in the waker's own
//! context on every kernel (`sched_wakeup` may run on the target CPU, where
//! the current thread is not the waker), so the current thread is the waker.
use asys_common::{DropSource, EventKind, SCHED_NONE, SCHED_SYSTEM_WIDE, WakingEvent};
use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
    macros::tracepoint,
    programs::TracePointContext,
};

use crate::{
    layout::layout,
    maps::{EVENTS, TRACED, batched_wakeup, count_drop, is_traced, settings, state},
};

#[tracepoint]
pub fn sched_waking(ctx: TracePointContext) -> u32 {
    if let Err(source) = try_sched_waking(&ctx) {
        count_drop(source);
    }
    0
}

fn try_sched_waking(ctx: &TracePointContext) -> Result<(), DropSource> {
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let state = state().ok_or(DropSource::ConfigUnreadable)?;
    let mode = settings.sched;
    if mode == SCHED_NONE || state.recording == 0 {
        return Ok(());
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let layout = layout();
    // SAFETY: an offset inside the tracepoint's record (its format file).
    let wakee = unsafe { ctx.read_at::<i32>(layout.waking_pid as usize) }
        .map_err(|_| DropSource::SchedUnreadable)? as u32;
    // As for switches: a traced waker, or a traced thread woken (TRACED
    // holds the threads of traced processes too).
    if mode != SCHED_SYSTEM_WIDE
        && !is_traced(settings, (pid_tgid >> 32) as u32)
        // SAFETY: only whether the key is there is looked at.
        && unsafe { TRACED.get(wakee).is_none() }
    {
        return Ok(());
    }
    let mut slot = EVENTS
        .reserve::<WakingEvent>(0)
        .ok_or(DropSource::SchedRingFull)?;
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let ts = unsafe { aya_ebpf::helpers::generated::bpf_ktime_get_ns() };
    // SAFETY: the reserved record is ours until submitted; filled in place.
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = crate::maps::header_at(EventKind::SchedWaking, pid_tgid, ts);
    ev.wakee_tid = wakee;
    ev.target_cpu =
        // SAFETY: an offset inside the tracepoint's record; the read is checked.
        unsafe { ctx.read_at::<i32>(layout.waking_target_cpu as usize) }.unwrap_or(-1) as u32;
    ev.waker_comm = bpf_get_current_comm().unwrap_or([0; 16]);
    slot.submit(batched_wakeup(settings));
    // With samples and stacks on (`-s`, `-b fp|dwarf`): where the waker was (a futex wake, a pipe
    // write, or an interrupt's timer or I/O completion).
    if settings.sample != SCHED_NONE && settings.sample_stack != 0 {
        crate::kernel_stack::send(
            ctx.as_ptr(),
            settings,
            pid_tgid,
            ts,
            asys_common::KSTACK_WAKING,
            DropSource::SchedRingFull,
        )?;
    }
    Ok(())
}
