//! osrt lock calls: uprobes on the pthread and semaphore functions that
//! wait without a system call of their own when nothing contends
//! (`pthread_mutex_lock`, condition waits, ...). One row per outermost call
//! on a thread: a condition wait re-locks its mutex through the probed
//! `pthread_mutex_lock`, which is part of the wait, not a second call.
//!
//! `--osrt-threshold` applies to the call's own time, not to the probes':
//! an int3 trap costs microseconds on a VM, so the time between the two
//! probes is mostly theirs. What the call itself waited is the time its
//! system calls (a futex wait) spent in the kernel, which the `sys_exit`
//! program adds up in the thread's slot; an uncontended lock makes none
//! and waits 0 ns.
use asys_common::{Cookie, DropSource, MAX_FAMILIES, OsrtThread};
use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user,
        generated::{bpf_get_attach_cookie, bpf_ktime_get_ns},
    },
    macros::{map, uprobe, uretprobe},
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};

use crate::{
    maps::{count_drop, is_traced, settings, state},
    syscalls::{OSRT_THREADS, emit},
};

/// Per traced process: where the code of the library with the probed lock
/// functions (libc) and the dynamic loader's are, [start, end) each,
/// written by userspace as it links the probes. A lock call made from in
/// there is libc's own (pthread_create takes the loader's locks, through
/// the loader), not one the program made: it is not a row.
#[map]
pub static OSRT_LIBC: HashMap<u32, [u64; 4]> = HashMap::with_max_entries(16384, 0);

/// Deeper nesting than this is a thread that never returned (cancelled in
/// a wait): its count stops growing instead of wrapping.
const MAX_LOCK_DEPTH: u32 = 64;

#[uprobe]
pub fn osrt_lock_entry(ctx: ProbeContext) -> u32 {
    if let Err(source) = try_lock_entry(&ctx) {
        count_drop(source);
    }
    0
}

fn try_lock_entry(ctx: &ProbeContext) -> Result<(), DropSource> {
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let pid_tgid = bpf_get_current_pid_tgid();
    // The probes of a traced process are scoped to it, except system-wide
    // (and where a process was reached through a global link): filter.
    let tgid = (pid_tgid >> 32) as u32;
    if !is_traced(settings, tgid) || u64::from(tgid) == settings.self_pid {
        return Ok(());
    }
    let tid = pid_tgid as u32;
    let thread = match OSRT_THREADS.get_ptr_mut(tid) {
        Some(t) => t,
        None => {
            OSRT_THREADS
                .insert(tid, OsrtThread::default(), 0)
                .map_err(|_| DropSource::ApiEntryMapFull)?;
            OSRT_THREADS
                .get_ptr_mut(tid)
                .ok_or(DropSource::ApiEntryMapFull)?
        }
    };
    // SAFETY: as in syscalls.rs: valid while this thread runs the program,
    // written only by this thread.
    let thread = unsafe { &mut *thread };
    let depth = thread.lock_depth;
    // Nesting is counted whether or not recording is on, so that every
    // return finds its own level (recording may turn on in between).
    if depth < MAX_LOCK_DEPTH {
        thread.lock_depth = depth + 1;
    }
    if depth != 0 {
        return Ok(());
    }
    let recording = state().ok_or(DropSource::ConfigUnreadable)?.recording != 0;
    // SAFETY: a uprobe's context points to the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    thread.lock_recording = (recording && !from_libc(tgid, regs.rsp)) as u32;
    // SAFETY: the context is the uprobe's, which the helper expects.
    thread.lock_cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    thread.lock_arg0 = regs.rdi;
    thread.lock_wait_ns = 0;
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    thread.lock_start = unsafe { bpf_ktime_get_ns() };
    Ok(())
}

/// Whether the call whose return address is at `sp` comes from libc itself.
#[inline(always)]
fn from_libc(tgid: u32, sp: u64) -> bool {
    // SAFETY: the value is copied out at once.
    let Some([libc_start, libc_end, ld_start, ld_end]) = (unsafe { OSRT_LIBC.get(tgid).copied() })
    else {
        return false;
    };
    // At a function's first instruction the return address is at the top
    // of the stack. SAFETY: bpf_probe_read_user fails instead of faulting.
    let ret = unsafe { bpf_probe_read_user(sp as *const u64) }.unwrap_or(0);
    (libc_start..libc_end).contains(&ret) || (ld_start..ld_end).contains(&ret)
}

#[uretprobe]
pub fn osrt_lock_exit(ctx: RetProbeContext) -> u32 {
    if let Err(source) = try_lock_exit(&ctx) {
        count_drop(source);
    }
    0
}

fn try_lock_exit(ctx: &RetProbeContext) -> Result<(), DropSource> {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let pid_tgid = bpf_get_current_pid_tgid();
    // No slot: the entry did not count this call (untraced).
    let Some(thread) = OSRT_THREADS.get_ptr_mut(pid_tgid as u32) else {
        return Ok(());
    };
    // SAFETY: as in try_lock_entry.
    let thread = unsafe { &mut *thread };
    match thread.lock_depth {
        0 => return Ok(()),
        1 => thread.lock_depth = 0,
        d => {
            thread.lock_depth = d - 1;
            return Ok(());
        }
    }
    if thread.lock_recording == 0 {
        return Ok(());
    }
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let cookie = Cookie(thread.lock_cookie);
    let family = (cookie.family() & (MAX_FAMILIES - 1)) as usize;
    // The call's own time: what it waited in the kernel (see above).
    if thread.lock_wait_ns < settings.min_duration[family] {
        return Ok(());
    }
    // SAFETY: a uretprobe's context points to the task's saved registers.
    let ret = unsafe { (*ctx.regs).rax };
    let args = [thread.lock_arg0, 0, 0, 0, 0, 0];
    emit(pid_tgid, now, thread.lock_start, ret, cookie, &args)
}
