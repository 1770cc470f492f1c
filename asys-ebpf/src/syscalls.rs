//! osrt system calls: the `raw_syscalls` tracepoints `sys_enter` and
//! `sys_exit`, attached raw (the prototype's `pt_regs *` and id/return
//! value, no record to format and no field offsets to know). One report row
//! per call, for the calls userspace put in `OSRT_SYSCALLS`, filtered by the
//! traced set and by `--osrt-threshold` here, in the kernel.
//!
//! Lock waits come through here too: a pthread lock that waits makes a
//! futex wait system call, from its library's code (libc's, or
//! libpthread's in glibc before 2.34); one that does not wait makes none,
//! and costs nothing. A futex wait whose instruction lies in a lock library
//! of the process (`OSRT_LIBC`) is a lock wait: it is sent over the
//! threshold with the user stack above it ([`LockWaitEvent`]), and
//! userspace names it after the lock function it finds there, or drops it
//! (a wait of libc's own, such as malloc's arena lock).
//!
//! Every system call on the machine runs these programs: an untraced
//! process pays the recording flag's load and one `TRACED` lookup at entry,
//! and one `OSRT_THREADS` lookup (a miss) at exit.
use asys_common::{
    ApiCallEvent, ApiCallShortEvent, Cookie, DropSource, EventKind, LOCK_STACK_BYTES,
    LOCK_WAIT_IN_FLIGHT, LOCK_WAIT_RESTART, LockWaitEvent, MAX_FAMILIES, OSRT_SYSCALL_SLOTS,
    OsrtThread,
};
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_kernel, bpf_probe_read_user_buf,
        generated::bpf_ktime_get_ns,
    },
    macros::{map, raw_tracepoint},
    maps::{Array, HashMap, LruHashMap},
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

/// Per traced process: where the code of its lock libraries (the
/// libraries with the pthread lock functions: libc, and libpthread where
/// it is a library of its own) lies, [start, end) each, written by
/// userspace as it sees the process map them. A futex wait made from
/// elsewhere (libgomp's, the program's own) is not a lock wait; without an
/// entry (a process not looked at yet) every futex wait is sent, and
/// userspace sorts them out.
#[map]
pub static OSRT_LIBC: HashMap<u32, [u64; 4]> = HashMap::with_max_entries(16384, 0);

/// Offset in `struct pt_regs` (x86-64, uapi) of r10: r10, r9, r8, ax, cx,
/// dx, si, di follow it, 8 bytes each; a system call's arguments are di,
/// si, dx, r10, r8, r9. Then orig_ax and ip.
const PT_REGS_R10: usize = 56;
/// Offsets of bp, ip and sp.
const PT_REGS_BP: usize = 32;
const PT_REGS_IP: usize = 128;
const PT_REGS_SP: usize = 152;

/// `futex` (x86-64), and the operations of it that wait (`op &
/// FUTEX_CMD_MASK`): FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET,
/// FUTEX_WAIT_REQUEUE_PI, FUTEX_LOCK_PI2.
const SYS_FUTEX: i64 = 202;
const FUTEX_CMD_MASK: u64 = !(128 | 256);
const FUTEX_WAIT_OPS: u32 = 1 << 0 | 1 << 6 | 1 << 9 | 1 << 11 | 1 << 13;
const EAGAIN: i64 = 11;

/// `restart_syscall` (x86-64): how the kernel resumes an interrupted sleep.
const RESTART_SYSCALL: i64 = 219;
/// The kernel's internal restart codes (ERESTARTSYS, ERESTARTNOINTR,
/// ERESTARTNOHAND, ENOIOCTLCMD, ERESTART_RESTARTBLOCK): a system call that
/// exits with one is restarted or turned into EINTR before user space
/// sees it.
const ERESTART_FIRST: i64 = 512;
const ERESTART_LAST: i64 = 516;
/// The one of them after which the kernel continues the call through
/// `restart_syscall`.
const ERESTART_RESTARTBLOCK: i64 = 516;
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
    let mut cookie = if (0..OSRT_SYSCALL_SLOTS as i64).contains(&nr) {
        OSRT_SYSCALLS.get(nr as u32).copied().unwrap_or(0)
    } else {
        0
    };
    let regs: *const u8 = ctx.arg(0);
    // A futex call is followed only as a lock wait.
    let mut wait_args = None;
    if nr == SYS_FUTEX && cookie != 0 {
        wait_args = lock_wait_args(tgid, regs);
        if wait_args.is_none() {
            cookie = 0;
        }
    }
    let thread = match OSRT_THREADS.get_ptr_mut(tid) {
        Some(t) => t,
        // Not reported, and nothing of the thread in flight.
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
    // A timed lock wait that a signal interrupted comes back as
    // restart_syscall: a lock wait again, its cookie and arguments kept.
    let wait_restarts = thread.lock_wait == LOCK_WAIT_RESTART;
    thread.lock_wait = 0;
    if wait_restarts && nr == RESTART_SYSCALL {
        thread.lock_wait = LOCK_WAIT_IN_FLIGHT;
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        thread.syscall_start = unsafe { bpf_ktime_get_ns() };
        return Ok(());
    }
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
    if cookie == 0 {
        thread.syscall_start = 0;
        return Ok(());
    }
    thread.syscall_cookie = cookie;
    if let Some(args) = wait_args {
        thread.lock_wait = LOCK_WAIT_IN_FLIGHT;
        thread.syscall_args = args;
    } else if Cookie(cookie).has(Cookie::ARGS) {
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

/// The arguments of a futex call that is a lock wait: an operation that
/// waits, made from a lock library's code (when the process's are known).
#[inline(always)]
fn lock_wait_args(tgid: u32, regs: *const u8) -> Option<[u64; 6]> {
    // SAFETY: as for the arguments in try_sys_enter. r10 r9 r8 ax cx dx si
    // di orig_ax ip.
    let r = unsafe { bpf_probe_read_kernel(regs.wrapping_add(PT_REGS_R10) as *const [u64; 10]) }
        .ok()?;
    let op = r[6] & FUTEX_CMD_MASK;
    if op >= 32 || FUTEX_WAIT_OPS & (1 << op) == 0 {
        return None;
    }
    // SAFETY: the value is copied out at once.
    if let Some([a, b, c, d]) = unsafe { OSRT_LIBC.get(tgid).copied() } {
        let ip = r[9];
        if !((a..b).contains(&ip) || (c..d).contains(&ip)) {
            return None;
        }
    }
    Some([r[7], r[6], r[5], r[0], r[2], r[1]])
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
    let cookie = Cookie(thread.syscall_cookie);
    if cookie.0 == 0 {
        return Ok(());
    }
    let ret: i64 = ctx.arg(1);
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let family = (cookie.family() & (MAX_FAMILIES - 1)) as usize;
    if thread.lock_wait == LOCK_WAIT_IN_FLIGHT {
        thread.lock_wait = 0;
        // The futex word had changed already: it never slept.
        if ret == -EAGAIN {
            return Ok(());
        }
        let ret = if (ERESTART_FIRST..=ERESTART_LAST).contains(&-ret) {
            // A signal interrupted it: the wait ends here. What follows
            // (a handler, a restart) is no part of it; a timed wait's
            // restart (restart_syscall) is a wait of its own.
            if -ret == ERESTART_RESTARTBLOCK {
                thread.lock_wait = LOCK_WAIT_RESTART;
            }
            -EINTR
        } else {
            ret
        };
        if took < settings.min_duration[family] {
            return Ok(());
        }
        let regs: *const u8 = ctx.arg(0);
        return emit_lock_wait(
            regs,
            pid_tgid,
            (start, now, ret),
            cookie,
            &thread.syscall_args,
        );
    }
    if (ERESTART_FIRST..=ERESTART_LAST).contains(&-ret) {
        // Not over: it comes back at once (see try_sys_enter), or, if a
        // signal handler runs first, this is where it ended (EINTR).
        thread.restart_start = start;
        thread.restart_end = now;
        return Ok(());
    }
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

/// Sends a lock wait: the call, the user registers and the stack above the
/// system call (`regs`: its saved user registers), for userspace to find
/// the lock function that waited.
#[inline(always)]
fn emit_lock_wait(
    regs: *const u8,
    pid_tgid: u64,
    (start, now, ret): (u64, u64, i64),
    cookie: Cookie,
    args: &[u64; 6],
) -> Result<(), DropSource> {
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let mut slot = EVENTS
        .reserve::<LockWaitEvent>(0)
        .ok_or(DropSource::ApiRingFull)?;
    // SAFETY: the reserved record is ours until submitted (filled in place:
    // it is larger than the BPF stack).
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.call = ApiCallEvent {
        header: header_at(EventKind::LockWait, pid_tgid, now),
        cookie: cookie.0,
        start,
        ret: ret as u64,
        args: [args[0], args[1], args[2], args[3], args[4], args[5], 0, 0],
        out0: 0,
        correlation: 0,
    };
    // SAFETY: as for the arguments in try_sys_enter.
    let reg = |at: usize| unsafe { bpf_probe_read_kernel(regs.wrapping_add(at) as *const u64) };
    ev.ip = reg(PT_REGS_IP).unwrap_or(0);
    ev.sp = reg(PT_REGS_SP).unwrap_or(0);
    ev.bp = reg(PT_REGS_BP).unwrap_or(0);
    ev.len = 0;
    for len in [LOCK_STACK_BYTES, LOCK_STACK_BYTES / 2, LOCK_STACK_BYTES / 4] {
        // SAFETY: bpf_probe_read_user faults nothing (an unmapped address
        // makes it fail), and the destination is ours. Near the top of a
        // stack a full window may run into unmapped memory: smaller ones.
        if unsafe { bpf_probe_read_user_buf(ev.sp as *const u8, &mut ev.stack[..len]) }.is_ok() {
            ev.len = len as u64;
            break;
        }
    }
    slot.submit(batched_wakeup(settings));
    Ok(())
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
