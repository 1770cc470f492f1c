//! Process lifecycle: forks of traced processes become traced, and fork, exec
//! and exit are reported so userspace can follow the tree and know when the
//! workload is done.
use asys_common::{DropSource, EventKind, ProcessEvent, TracedProcess};
use aya_ebpf::{
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_task, bpf_probe_read_kernel,
    },
    macros::tracepoint,
    programs::TracePointContext,
};
use aya_log_ebpf::error;

use crate::{
    layout::layout,
    maps::{EVENTS, THREADS, TRACED, count_drop},
};

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
    // SAFETY: an offset inside the tracepoint's record, from the running
    // kernel's format file; the read is checked.
    let Ok(child) = (unsafe { ctx.read_at::<i32>(layout().fork_child_pid as usize) }) else {
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
    // Its lock libraries too (osrt's filter of futex waits).
    // SAFETY: the value is copied out at once.
    if let Some(code) = unsafe { crate::syscalls::OSRT_LIBC.get(tgid).copied() } {
        let _ = crate::syscalls::OSRT_LIBC.insert(child, code, 0);
    }
    emit(EventKind::ProcessFork, child);
    0
}

#[tracepoint]
pub fn sched_process_exec(_ctx: TracePointContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: the value is copied out at once.
    if let Some(traced) = unsafe { TRACED.get(tgid).copied() } {
        // A new image: userspace writes its ranges once it has seen them.
        let _ = crate::caller_filter::CALLER_RANGES.remove(tgid);
        let _ = crate::syscalls::OSRT_LIBC.remove(tgid);
        if traced.stop_after_exec != 0 {
            let again = TracedProcess {
                stop_on_load: traced.stop_after_exec,
                ..traced
            };
            let _ = TRACED.insert(tgid, again, 0);
        }
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
        let _ = crate::syscalls::OSRT_LIBC.remove(tid);
        // Only forks that were threads have their own key. Removed whether
        // or not the process is still in TRACED: where the main thread's
        // exit ends the process (no group_dead), its other threads exit
        // after, and a stale key could later match a new process's id.
        let _ = TRACED.remove(tid);
    }
    // SAFETY: only whether the key is there is looked at.
    if unsafe { TRACED.get(tgid).is_none() } {
        return 0;
    }
    let layout = layout();
    let group_dead = if layout.exit_group_dead != asys_common::LAYOUT_ABSENT {
        // SAFETY: an offset inside the tracepoint's record, from the running
        // kernel's format file; the read is checked.
        unsafe { ctx.read_at::<u8>(layout.exit_group_dead as usize) }.unwrap_or(0) != 0
    } else if layout.task_signal != asys_common::LAYOUT_ABSENT {
        // Kernels before group_dead was added to the tracepoint (5.15, 6.1,
        // 6.8): do_exit has already decremented current->signal->live when
        // the tracepoint fires, so 0 means every thread is exiting.
        signal_live(&layout) == Some(0)
    } else {
        // No BTF either: the process ends with its main thread (exit_group
        // ends them all; a main thread that leaves by pthread_exit ends it
        // early).
        tid == tgid
    };
    // Only the exit that removes the key reports it: two threads may both
    // see the group dead.
    if group_dead && TRACED.remove(tgid).is_ok() {
        emit(EventKind::ProcessExit, tgid);
        let _ = crate::caller_filter::CALLER_RANGES.remove(tgid);
        let _ = crate::syscalls::OSRT_LIBC.remove(tgid);
    }
    0
}

/// `current->signal->live`, at the offsets the kernel's BTF gave.
#[inline(always)]
fn signal_live(layout: &asys_common::TracepointLayout) -> Option<i32> {
    // SAFETY: the helper only returns the current task's address; the reads
    // of kernel memory go through the checked helper, the offsets come from
    // this kernel's BTF, and a failed read is None.
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let signal: *const u8 =
            bpf_probe_read_kernel(task.add(layout.task_signal as usize) as *const *const u8)
                .ok()?;
        bpf_probe_read_kernel(signal.add(layout.signal_live as usize) as *const i32).ok()
    }
}
