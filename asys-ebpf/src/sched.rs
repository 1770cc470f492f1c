//! CPU scheduling (`--cpuctxsw`): every context switch of traced threads, or
//! of the whole machine, while recording.
use asys_common::{DropSource, EventKind, SCHED_NONE, SCHED_SYSTEM_WIDE, SchedEvent};
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

// Field offsets come from the running kernel's format file (`layout`):
// current is still the thread switched out.

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    if let Err(source) = try_sched_switch(&ctx, false) {
        count_drop(source);
    }
    0
}

/// `sched_switch` with the Python stacks of threads leaving to wait, loaded
/// in its place when they are asked for. A program of its own: where a
/// kernel's verifier refuses it (Linux 6.1's passes its million
/// instructions on it), userspace loads the plain one and says so.
#[tracepoint]
pub fn sched_switch_python(ctx: TracePointContext) -> u32 {
    if let Err(source) = try_sched_switch(&ctx, true) {
        count_drop(source);
    }
    0
}

#[inline(always)]
fn try_sched_switch(ctx: &TracePointContext, python: bool) -> Result<(), DropSource> {
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let state = state().ok_or(DropSource::ConfigUnreadable)?;
    let mode = settings.sched;
    if mode == SCHED_NONE || state.recording == 0 {
        return Ok(());
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let layout = layout();
    // SAFETY: an offset inside the tracepoint's record (its format file).
    let next_tid = unsafe { ctx.read_at::<i32>(layout.switch_next_pid as usize) }
        .map_err(|_| DropSource::SchedUnreadable)? as u32;
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
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let ts = unsafe { aya_ebpf::helpers::generated::bpf_ktime_get_ns() };
    // SAFETY: the reserved record is ours until submitted; filled in place.
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = crate::maps::header_at(EventKind::SchedSwitch, pid_tgid, ts);
    // SAFETY: an offset inside the tracepoint's record; the read is checked.
    let prev_state = unsafe { ctx.read_at::<i64>(layout.switch_prev_state as usize) }.unwrap_or(0);
    ev.prev_state = prev_state;
    ev.next_tid = next_tid;
    ev._pad = 0;
    ev.prev_comm = bpf_get_current_comm().unwrap_or([0; 16]);
    ev.next_comm = next_comm(ctx, &layout);
    let leaving_traced = (pid_tgid >> 32) != 0 && is_traced(settings, (pid_tgid >> 32) as u32);
    slot.submit(batched_wakeup(settings));
    // With samples and stacks on (`-s`, `-b fp|dwarf`), where the thread left the CPU in the kernel
    // (the futex wait, the read): one kernel stack per switch-out of a
    // traced thread.
    if settings.sample != SCHED_NONE && settings.sample_stack != 0 && leaving_traced {
        crate::kernel_stack::send(
            ctx.as_ptr(),
            settings,
            pid_tgid,
            ts,
            asys_common::KSTACK_SWITCH,
            DropSource::SchedRingFull,
        )?;
    }
    // With Python stacks on (`--python-sampling`, which needs `-s`), the
    // Python frames of a thread of a CPython process leaving to wait:
    // sleeping (S, 1) or uninterruptible (D, 2), bits that are the same in
    // every kernel's `prev_state` (a preempted thread has only the
    // "preempted" bit above the states, or 0, and is not waiting on
    // anything its Python code did).
    if python
        && crate::layout::python_walks() & asys_common::PYTHON_WALK_WAITS != 0
        && settings.sample != SCHED_NONE
        && leaving_traced
        && prev_state & 3 != 0
    {
        crate::python::send(settings, pid_tgid, ts, EventKind::PythonSwitchStack)?;
    }
    Ok(())
}

/// The comm of the thread switched in: inline `char[16]`, or where a kernel
/// made it a `__data_loc` string, at the offset its location word gives.
#[inline(always)]
fn next_comm(ctx: &TracePointContext, layout: &asys_common::TracepointLayout) -> [u8; 16] {
    let mut at = layout.switch_next_comm as usize;
    if layout.switch_next_comm_data_loc != 0 {
        // SAFETY: the location word's offset inside the record; checked.
        let Ok(loc) = (unsafe { ctx.read_at::<u32>(at) }) else {
            return [0; 16];
        };
        // Low 16 bits: the string's offset from the start of the record.
        at = (loc & 0xffff) as usize;
    }
    // SAFETY: an offset inside the record (a comm is at most 16 bytes with
    // its NUL, and the record holds it); the read is checked.
    unsafe { ctx.read_at::<[u8; 16]>(at) }.unwrap_or([0; 16])
}
