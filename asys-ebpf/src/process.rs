//! Process lifecycle: forks of traced processes become traced, and fork, exec
//! and exit are reported so userspace can follow the tree and know when the
//! workload is done.
use asys_common::{DropSource, EventKind, ProcessEvent, TracedProcess};
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
    macros::tracepoint,
    programs::TracePointContext,
};
use aya_log_ebpf::error;

use crate::maps::{EVENTS, THREADS, TRACED, count_drop};

// Offsets from /sys/kernel/tracing/events/sched/*/format; stable since 4.x.
const FORK_CHILD_PID: usize = 20;
const EXIT_GROUP_DEAD: usize = 32;

fn emit(kind: EventKind, child_pid: u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(mut slot) = EVENTS.reserve::<ProcessEvent>(0) else {
        count_drop(DropSource::ProcRingFull);
        return;
    };
    slot.write(ProcessEvent {
        header: crate::maps::header(kind, pid_tgid),
        child_pid,
        _pad: 0,
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
    });
    slot.submit(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP as u64);
}

#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: the value is copied out at once.
    let Some(parent) = (unsafe { TRACED.get(tgid).copied() }) else {
        return 0;
    };
    // SAFETY: an offset inside the tracepoint's record (its format file).
    let Ok(child) = (unsafe { ctx.read_at::<i32>(FORK_CHILD_PID) }) else {
        count_drop(DropSource::SchedUnreadable);
        error!(
            &ctx,
            "sched_process_fork: no child pid; a fork of {} goes untraced", tgid
        );
        return 0;
    };
    let child = child as u32;
    // New threads pass through here too; their id in TRACED is harmless (it is
    // only ever looked up as a tgid) and is removed when the thread exits.
    if TRACED.insert(child, TracedProcess { ..parent }, 0).is_err() {
        count_drop(DropSource::TracedMapFull);
        error!(
            &ctx,
            "TRACED is full: child {} of {} goes untraced", child, tgid
        );
    }
    // The child maps what its parent maps: its vendor libraries' ranges
    // hold until its exec (a thread's copy goes at its exit).
    if let Some(ranges) = crate::caller_filter::CALLER_RANGES.get_ptr(tgid) {
        // Not a lost event if it fails: the child falls back to recording
        // the outermost call of each family.
        // By reference: a copy (1.5 KiB) would not fit the BPF stack.
        // SAFETY: the map's own value, copied by the map update.
        #[allow(clippy::needless_borrows_for_generic_args)]
        let _ = crate::caller_filter::CALLER_RANGES.insert(child, unsafe { &*ranges }, 0);
    }
    emit(EventKind::ProcessFork, child);
    0
}

#[tracepoint]
pub fn sched_process_exec(_ctx: TracePointContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: only whether the key is there is looked at.
    if unsafe { TRACED.get(tgid).is_some() } {
        // A new image: userspace writes its ranges once it has seen them.
        let _ = crate::caller_filter::CALLER_RANGES.remove(tgid);
        emit(EventKind::ProcessExec, tgid);
    }
    0
}

#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    // Most exiting threads never made a call: a missing key is not a failure.
    let _ = THREADS.remove(tid);
    if tid != tgid {
        // A thread's copy of its process's ranges (see the fork).
        let _ = crate::caller_filter::CALLER_RANGES.remove(tid);
    }
    // SAFETY: only whether the key is there is looked at.
    if unsafe { TRACED.get(tgid).is_none() } {
        return 0;
    }
    if tid != tgid {
        // Only forks that were threads have their own key.
        let _ = TRACED.remove(tid);
    }
    // SAFETY: an offset inside the tracepoint's record (its format file).
    let group_dead = unsafe { ctx.read_at::<u8>(EXIT_GROUP_DEAD) }.unwrap_or(0) != 0;
    if group_dead {
        emit(EventKind::ProcessExit, tgid);
        let _ = crate::caller_filter::CALLER_RANGES.remove(tgid);
        // Present: looked up above, and only this exit removes it.
        let _ = TRACED.remove(tgid);
    }
    0
}
