//! CPU scheduling (`--cpuctxsw`): every context switch of traced threads, or
//! of the whole machine, while recording.
use asys_common::{DropSource, EventKind, SCHED_NONE, SCHED_SYSTEM_WIDE, SchedEvent};
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
    macros::tracepoint,
    programs::TracePointContext,
};

use crate::maps::{EVENTS, TRACED, batched_wakeup, count_drop, is_traced, settings, state};

// Offsets from /sys/kernel/tracing/events/sched/sched_switch/format (stable
// since 4.x): current is still the thread switched out.
const PREV_STATE: usize = 32;
const NEXT_COMM: usize = 40;
const NEXT_PID: usize = 56;

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    if let Err(source) = try_sched_switch(&ctx) {
        count_drop(source);
    }
    0
}

fn try_sched_switch(ctx: &TracePointContext) -> Result<(), DropSource> {
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let state = state().ok_or(DropSource::ConfigUnreadable)?;
    let mode = settings.sched;
    if mode == SCHED_NONE || state.recording == 0 {
        return Ok(());
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: an offset inside the tracepoint's record (its format file).
    let next_tid =
        unsafe { ctx.read_at::<i32>(NEXT_PID) }.map_err(|_| DropSource::SchedUnreadable)? as u32;
    // Threads of the traced tree: the one leaving by its process, the one
    // coming by its own id (forks of traced processes are in TRACED too).
    if mode != SCHED_SYSTEM_WIDE
        && !is_traced(settings, (pid_tgid >> 32) as u32)
        // SAFETY: only whether the key is there is looked at.
        && unsafe { TRACED.get(next_tid).is_none() }
    {
        return Ok(());
    }
    let mut slot = EVENTS
        .reserve::<SchedEvent>(0)
        .ok_or(DropSource::SchedRingFull)?;
    // SAFETY: the reserved record is ours until submitted; filled in place.
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = crate::maps::header(EventKind::SchedSwitch, pid_tgid);
    ev.prev_state =
        // SAFETY: an offset inside the tracepoint's record; the read is checked.
        unsafe { ctx.read_at::<i64>(PREV_STATE) }.unwrap_or(0);
    ev.next_tid = next_tid;
    ev._pad = 0;
    ev.prev_comm = bpf_get_current_comm().unwrap_or([0; 16]);
    // SAFETY: as above.
    ev.next_comm = unsafe { ctx.read_at::<[u8; 16]>(NEXT_COMM) }.unwrap_or([0; 16]);
    slot.submit(batched_wakeup(settings));
    Ok(())
}
