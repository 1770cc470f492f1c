//! Delivering device activity when the application dies of a signal.
//!
//! Records reach asys when the runtime's buffer is flushed: every 100 ms and
//! at `exit`. A process killed by a signal runs no `atexit` handler, so the
//! records of its last moments were lost without a word. Here a handler for
//! the fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, and SIGTERM,
//! SIGINT, SIGHUP when their action is the default) asks the flusher thread
//! to flush, waits for it (bounded), then puts back the action that was there
//! before and lets the signal take its course: the process dies as it would
//! have (same signal, same status, a core dump where the default action
//! dumps), or the application's own earlier handler runs.
//!
//! On async-signal-safety: the handler itself calls only sigaction, getpid,
//! gettid, poll, read, write, nanosleep and rt_tgsigqueueinfo. The flush,
//! which takes the runtime's lock and calls `free`, runs on the flusher
//! thread (see `flusher.rs`): if the dying thread holds one of those, the
//! flush is stuck, the handler gives up after two seconds and the records
//! are lost (asys counts them). A fault on the flusher thread itself goes
//! straight to the previous action. A fault inside this handler cannot
//! recurse: the handled signals are blocked while it runs, and the kernel
//! turns a blocked synchronous fault into its default action. The handler
//! runs on an alternate stack where the thread that initialized the
//! injection has none, so a stack overflow there (the main thread, usually)
//! still flushes; on other threads it dies as before, and asys counts.
//!
//! An application that installs its own handler later replaces ours, and we
//! never put ours back. One that chains to the previous action (ours) gets
//! the flush and then the action that was there before us.
use std::sync::{
    OnceLock,
    atomic::{AtomicI32, Ordering},
};

use crate::flusher::{self, Flushed};

/// Signals whose default action ends the process: ours always (unless
/// ignored), the application's earlier handler runs after the flush.
const FAULTS: [i32; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];
/// Handled only when their action is the default (terminate): an
/// application that handles them decides what they mean.
const TERMINATING: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

const ALTSTACK_BYTES: usize = 64 * 1024;

/// The action each handled signal had before ours.
struct Saved {
    actions: Vec<(i32, libc::sigaction)>,
}

// SAFETY: plain data (handler addresses, masks, flags), written once before
// any handler can run and only read afterwards.
unsafe impl Sync for Saved {}
// SAFETY: as above.
unsafe impl Send for Saved {}

static SAVED: OnceLock<Saved> = OnceLock::new();

/// The thread handling a fatal signal now (0: none).
static HANDLING: AtomicI32 = AtomicI32::new(0);

pub fn install() {
    let mut actions = Vec::new();
    for &sig in FAULTS.iter().chain(&TERMINATING) {
        // SAFETY: an all-zero sigaction is a valid value to be overwritten.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the current action into `old`.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            continue;
        }
        let wanted = if TERMINATING.contains(&sig) {
            old.sa_sigaction == libc::SIG_DFL
        } else {
            old.sa_sigaction != libc::SIG_IGN
        };
        if wanted {
            actions.push((sig, old));
        }
    }
    if SAVED.set(Saved { actions }).is_err() {
        return; // installed already
    }
    let saved = SAVED.get().expect("just set");
    ensure_altstack();
    for (sig, _) in &saved.actions {
        // SAFETY: a zeroed sigaction, then filled: our handler, with the
        // handled signals blocked while it runs.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            for &s in FAULTS.iter().chain(&TERMINATING) {
                libc::sigaddset(&mut sa.sa_mask, s);
            }
            libc::sigaction(*sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Gives the calling thread an alternate signal stack unless it has one.
fn ensure_altstack() {
    // SAFETY: reads the current alternate stack into a zeroed stack_t.
    let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut old) } != 0
        || old.ss_flags & libc::SS_DISABLE == 0
    {
        return;
    }
    // SAFETY: a fresh anonymous mapping, never unmapped (the thread may
    // need it until the process ends).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            ALTSTACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return;
    }
    let st = libc::stack_t {
        ss_sp: p,
        ss_flags: 0,
        ss_size: ALTSTACK_BYTES,
    };
    // SAFETY: a mapping of ss_size bytes that lives as long as the process.
    unsafe { libc::sigaltstack(&st, std::ptr::null_mut()) };
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

extern "C" fn on_signal(sig: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let tid = gettid();
    let mine = match HANDLING.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => true,
        // A second signal on the thread already handling one: no second try.
        Err(t) if t == tid => false,
        // Another thread is flushing and will most likely end the process:
        // wait for it (bounded), then try once more.
        Err(_) => {
            let step = libc::timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            };
            let mut waited = 0;
            while HANDLING.load(Ordering::Acquire) != 0 && waited < flusher::HANDLER_WAIT_MS + 500 {
                // SAFETY: sleeps; async-signal-safe.
                unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
                waited += 10;
            }
            HANDLING
                .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        }
    };
    if mine {
        // NoFlusher (a fault on the flusher thread, a child whose flusher has
        // not started) and TimedOut both leave the records to asys's count.
        let _: Flushed = flusher::request_and_wait();
    }
    pass_on(sig, info, tid);
    if mine {
        // The previous action may be a handler that recovers: a later
        // signal must find the gate open.
        HANDLING.store(0, Ordering::Release);
    }
}

/// Puts back the action `sig` had before us and lets it act: a fault the
/// kernel raised for an instruction happens again when the handler
/// returns; a signal that was sent is sent again, with its own siginfo,
/// and arrives when the handler returns (it is blocked until then).
fn pass_on(sig: i32, info: *mut libc::siginfo_t, tid: i32) {
    // SAFETY: a zeroed sigaction with SIG_DFL (0) is the default action.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    if let Some(saved) = SAVED.get()
        && let Some((_, a)) = saved.actions.iter().find(|(s, _)| *s == sig)
    {
        action = *a;
    }
    // SAFETY: sigaction is async-signal-safe; `action` is a valid value.
    unsafe { libc::sigaction(sig, &action, std::ptr::null_mut()) };
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
        unsafe { (*info).si_code }
    };
    let raised_by_fault = code > 0
        && matches!(
            sig,
            libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL
        );
    if raised_by_fault {
        return;
    }
    // SAFETY: getpid has no preconditions; rt_tgsigqueueinfo queues `sig`
    // for this thread with the siginfo it arrived with (allowed for our own
    // process whatever its si_code); tgkill when that fails.
    unsafe {
        let pid = libc::getpid();
        if info.is_null() || libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, sig, info) != 0 {
            libc::syscall(libc::SYS_tgkill, pid, tid, sig);
        }
    }
}
