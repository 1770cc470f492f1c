//! osrt system calls: the `raw_syscalls` tracepoints `sys_enter` and
//! `sys_exit`, attached raw (the prototype's `pt_regs *` and id/return
//! value, no record to format and no field offsets to know). One report row
//! per call, for the calls userspace put in `OSRT_SYSCALLS`, filtered by the
//! traced set and by `--osrt-threshold` here, in the kernel.
//!
//! Every system call on the machine runs these programs: an untraced
//! process pays the recording flag's load and one `TRACED` lookup at entry,
//! and one `OSRT_THREADS` lookup (a miss) at exit.
use asys_common::{
    ApiCallEvent, ApiCallShortEvent, Cookie, DropSource, EventKind, MAX_FAMILIES,
    OSRT_SYSCALL_SLOTS, OsrtThread,
};
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel, generated::bpf_ktime_get_ns},
    macros::{map, raw_tracepoint},
    maps::{Array, LruHashMap},
    programs::RawTracePointContext,
};

use crate::maps::{EVENTS, batched_wakeup, count_drop, header_at, is_recording, settings};

/// The cookie of each system call number osrt reports (0: not reported),
/// written by userspace at load.
#[map]
pub static OSRT_SYSCALLS: Array<u64> = Array::with_max_entries(OSRT_SYSCALL_SLOTS, 0);

/// Per-thread osrt state. LRU: a slot of a thread that exited (or of one
/// that left the traced set) is reused when the map is full, so the exit
/// tracepoint need not know about it; 16384 live traced threads would be
/// needed to push out a live slot. Userspace shrinks it to one entry when
/// osrt is not traced (it is preallocated: about 2.5 MB).
#[map]
pub static OSRT_THREADS: LruHashMap<u32, OsrtThread> = LruHashMap::with_max_entries(16384, 0);

/// Offset in `struct pt_regs` (x86-64, uapi) of r10: r10, r9, r8, ax, cx,
/// dx, si, di follow it, 8 bytes each; a system call's arguments are di,
/// si, dx, r10, r8, r9.
const PT_REGS_R10: usize = 56;

/// `restart_syscall` (x86-64): how the kernel resumes an interrupted sleep.
const RESTART_SYSCALL: i64 = 219;
/// The kernel's internal restart codes (ERESTARTSYS, ERESTARTNOINTR,
/// ERESTARTNOHAND, ENOIOCTLCMD, ERESTART_RESTARTBLOCK): a system call that
/// exits with one is restarted or turned into EINTR before user space
/// sees it.
const ERESTART_FIRST: i64 = 512;
const ERESTART_LAST: i64 = 516;
const EINTR: i64 = 4;

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn osrt_sys_enter(ctx: RawTracePointContext) -> u32 {
    if let Err(source) = try_sys_enter(&ctx) {
        count_drop(source);
    }
    0
}

fn try_sys_enter(ctx: &RawTracePointContext) -> Result<(), DropSource> {
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // asys itself (system-wide): its own reads and writes of the events
    // would feed themselves.
    if !is_recording(settings, tgid)? || u64::from(tgid) == settings.self_pid {
        return Ok(());
    }
    let tid = pid_tgid as u32;
    let nr: i64 = ctx.arg(1);
    let cookie = if (0..OSRT_SYSCALL_SLOTS as i64).contains(&nr) {
        OSRT_SYSCALLS.get(nr as u32).copied().unwrap_or(0)
    } else {
        0
    };
    let thread = match OSRT_THREADS.get_ptr_mut(tid) {
        Some(t) => t,
        // Not reported, and no lock call in flight (its entry made the slot).
        None if cookie == 0 => return Ok(()),
        None => {
            OSRT_THREADS
                .insert(tid, OsrtThread::default(), 0)
                .map_err(|_| DropSource::ApiEntryMapFull)?;
            OSRT_THREADS
                .get_ptr_mut(tid)
                .ok_or(DropSource::ApiEntryMapFull)?
        }
    };
    // SAFETY: the pointer is to the map's preallocated memory, valid as
    // long as the map; only this thread writes its slot. (A full LRU map
    // may hand a slot to another thread, the least recently used one: not
    // one just looked up; the worst case is a wrong time, never a fault.)
    let thread = unsafe { &mut *thread };
    // A call the kernel restarts (after a stop, or a signal handled with
    // SA_RESTART) enters again, as itself or as restart_syscall: one call,
    // one row, from its first entry.
    let restarted = thread.restart_start;
    thread.restart_start = 0;
    if restarted != 0 {
        if nr == RESTART_SYSCALL || cookie == thread.syscall_cookie {
            thread.syscall_start = restarted;
            return Ok(());
        }
        // A signal handler runs first: the call ended there, as EINTR.
        let took = thread.restart_end.saturating_sub(restarted);
        let pending = Cookie(thread.syscall_cookie);
        let family = (pending.family() & (MAX_FAMILIES - 1)) as usize;
        if took >= settings.min_duration[family] {
            let (end, args) = (thread.restart_end, &thread.syscall_args);
            emit(
                pid_tgid,
                end,
                restarted,
                EINTR.wrapping_neg() as u64,
                pending,
                args,
            )?;
        }
    }
    if cookie == 0 && thread.lock_depth == 0 {
        thread.syscall_start = 0;
        return Ok(());
    }
    thread.syscall_cookie = cookie;
    if Cookie(cookie).has(Cookie::ARGS) {
        let regs: *const u8 = ctx.arg(0);
        // SAFETY: reads the task's saved user registers, which the kernel
        // helper checks (it fails instead of faulting).
        let r = unsafe { bpf_probe_read_kernel(regs.wrapping_add(PT_REGS_R10) as *const [u64; 8]) }
            .unwrap_or([0; 8]);
        // r10 r9 r8 ax cx dx si di -> di si dx r10 r8 r9
        thread.syscall_args = [r[7], r[6], r[5], r[0], r[2], r[1]];
    }
    // SAFETY: bpf_ktime_get_ns has no preconditions. Read last: the
    // program's own work is not the call's.
    thread.syscall_start = unsafe { bpf_ktime_get_ns() };
    Ok(())
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn osrt_sys_exit(ctx: RawTracePointContext) -> u32 {
    if let Err(source) = try_sys_exit(&ctx) {
        count_drop(source);
    }
    0
}

fn try_sys_exit(ctx: &RawTracePointContext) -> Result<(), DropSource> {
    // SAFETY: bpf_ktime_get_ns has no preconditions. First: the end of the call.
    let now = unsafe { bpf_ktime_get_ns() };
    let pid_tgid = bpf_get_current_pid_tgid();
    // Untraced threads have no slot: this miss is all they pay here.
    let Some(thread) = OSRT_THREADS.get_ptr_mut(pid_tgid as u32) else {
        return Ok(());
    };
    // SAFETY: as in try_sys_enter.
    let thread = unsafe { &mut *thread };
    let start = thread.syscall_start;
    if start == 0 {
        return Ok(());
    }
    thread.syscall_start = 0;
    let took = now.saturating_sub(start);
    if thread.lock_depth != 0 {
        thread.lock_wait_ns += took;
    }
    let cookie = Cookie(thread.syscall_cookie);
    if cookie.0 == 0 {
        return Ok(());
    }
    let ret: i64 = ctx.arg(1);
    if (ERESTART_FIRST..=ERESTART_LAST).contains(&-ret) {
        // Not over: it comes back at once (see try_sys_enter), or, if a
        // signal handler runs first, this is where it ended (EINTR).
        thread.restart_start = start;
        thread.restart_end = now;
        return Ok(());
    }
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let family = (cookie.family() & (MAX_FAMILIES - 1)) as usize;
    if took < settings.min_duration[family] {
        return Ok(());
    }
    emit(
        pid_tgid,
        now,
        start,
        ret as u64,
        cookie,
        &thread.syscall_args,
    )
}

/// Sends one osrt call (a system call or a lock call): with its arguments
/// when the cookie asks, else as a short event.
#[inline(always)]
pub fn emit(
    pid_tgid: u64,
    now: u64,
    start: u64,
    ret: u64,
    cookie: Cookie,
    args: &[u64; 6],
) -> Result<(), DropSource> {
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    if !cookie.has(Cookie::ARGS) {
        let mut slot = EVENTS
            .reserve::<ApiCallShortEvent>(0)
            .ok_or(DropSource::ApiRingFull)?;
        slot.write(ApiCallShortEvent {
            header: header_at(EventKind::ApiCallShort, pid_tgid, now),
            cookie: cookie.0,
            start,
            ret,
            correlation: 0,
        });
        slot.submit(batched_wakeup(settings));
        return Ok(());
    }
    let mut slot = EVENTS
        .reserve::<ApiCallEvent>(0)
        .ok_or(DropSource::ApiRingFull)?;
    slot.write(ApiCallEvent {
        header: header_at(EventKind::ApiCall, pid_tgid, now),
        cookie: cookie.0,
        start,
        ret,
        args: [args[0], args[1], args[2], args[3], args[4], args[5], 0, 0],
        out0: 0,
        correlation: 0,
    });
    slot.submit(batched_wakeup(settings));
    Ok(())
}
