//! The flusher thread: hands the runtime's completed activity records to the
//! probe sites every [`PERIOD`], and at once when a fatal signal handler asks
//! ([`request_and_wait`]).
//!
//! The handler does not flush itself: the runtime's flush takes the runtime's
//! lock and our buffer callback calls `free`, and the thread that faulted may
//! hold either (a crash inside the runtime or inside malloc). Asking another
//! thread through a pipe keeps the handler to `write`, `poll` and `read`,
//! which are async-signal-safe, and lets it give up after [`HANDLER_WAIT_MS`]
//! if the flush is stuck behind a lock the dying thread holds.
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// How often records are handed over while the application runs.
const PERIOD_MS: i32 = 100;

/// How long a fatal signal handler waits for the flush before the process
/// dies without it (what is not delivered is counted by asys).
pub const HANDLER_WAIT_MS: i32 = 2000;

/// The process the flusher thread runs in (0: none yet). A forked child
/// inherits the parent's pipes but not its thread: it must not use them.
static PID: AtomicI32 = AtomicI32::new(0);
/// The flusher thread's tid: a fault on it cannot wait for itself.
static TID: AtomicI32 = AtomicI32::new(0);
/// Write end of the request pipe (the flusher polls the read end).
static REQUEST_W: AtomicI32 = AtomicI32::new(-1);
/// Read end of the done pipe (the flusher writes a byte per request served).
static DONE_R: AtomicI32 = AtomicI32::new(-1);
/// Set in a forked child (see `fork.rs`): its first API callback starts a
/// flusher of its own. A callback is a normal context, unlike the fork
/// handler, where starting a thread is not safe.
static NEEDED: AtomicBool = AtomicBool::new(false);

/// Starts the flusher of this process.
pub fn start() {
    let mut request = [-1; 2];
    let mut done = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into each array.
    let ok = unsafe {
        libc::pipe2(request.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) == 0
            && libc::pipe2(done.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) == 0
    };
    if !ok {
        // Periodic flushes still run; a fatal signal then flushes nothing.
        eprintln!("asys-inject: no pipe for the flusher; records of a crash will be lost");
    }
    let (request_r, done_w) = (request[0], done[1]);
    // The pipes are published before the thread is spawned, not by it: a
    // process that dies before its new thread first runs (a loaded machine,
    // a crash right after start-up) still has its request waiting in the
    // pipe, served as soon as the flusher runs, while the handler waits.
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    if ok {
        // Descriptors inherited from a parent's flusher are the parent's
        // business; this process has its own now.
        for (slot, fd) in [(&REQUEST_W, request[1]), (&DONE_R, done[0])] {
            let old = slot.swap(fd, Ordering::AcqRel);
            if old >= 0 && PID.load(Ordering::Acquire) != pid {
                // SAFETY: a descriptor of ours that nothing in this
                // process uses any more.
                unsafe { libc::close(old) };
            }
        }
    }
    // Until the thread stores its tid, no thread is taken for the flusher.
    TID.store(0, Ordering::Release);
    PID.store(pid, Ordering::Release);
    let spawned = std::thread::Builder::new()
        .name("asys-inject".into())
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) as i32 };
            TID.store(tid, Ordering::Release);
            run(request_r, done_w);
        });
    if spawned.is_err() {
        // No thread will answer: a fatal signal must not wait for one.
        PID.store(0, Ordering::Release);
        eprintln!("asys-inject: cannot start the flusher thread; records are delivered at exit");
    }
}

/// In a forked child: a flusher is needed again.
pub fn after_fork() {
    NEEDED.store(true, Ordering::Relaxed);
}

/// At each API callback: starts the flusher of a forked child on its first
/// call. One relaxed load on the common path.
#[inline]
pub fn ensure_started() {
    if NEEDED.load(Ordering::Relaxed) && NEEDED.swap(false, Ordering::AcqRel) {
        start();
    }
}

fn run(request_r: i32, done_w: i32) {
    loop {
        let mut pfd = libc::pollfd {
            fd: request_r,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd; a negative fd (no pipe) is ignored by poll.
        let n = unsafe { libc::poll(&mut pfd, 1, PERIOD_MS) };
        let requested = n > 0 && pfd.revents & libc::POLLIN != 0;
        if requested {
            let mut buf = [0u8; 16];
            // SAFETY: reads into a local buffer of its size (non-blocking).
            while unsafe { libc::read(request_r, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
        }
        // A fatal signal's flush takes everything, complete or not; the
        // periodic one only what is complete (CUPTI would otherwise hand
        // over kernels still running, without their times).
        crate::flush(requested);
        if requested {
            // SAFETY: writes one byte from a local.
            unsafe { libc::write(done_w, [1u8].as_ptr().cast(), 1) };
        }
    }
}

/// What a fatal signal handler could get done.
#[derive(PartialEq, Eq)]
pub enum Flushed {
    Yes,
    /// No flusher runs in this process, or the fault is on the flusher thread.
    NoFlusher,
    /// The flusher did not answer in time (stuck behind a lock, most likely).
    TimedOut,
}

/// From a signal handler: asks the flusher to flush and waits for it.
/// Async-signal-safe: getpid, gettid, read, write and poll only.
pub fn request_and_wait() -> Flushed {
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid(), libc::syscall(libc::SYS_gettid) as i32) };
    if PID.load(Ordering::Acquire) != pid || TID.load(Ordering::Acquire) == tid {
        return Flushed::NoFlusher;
    }
    let (request_w, done_r) = (
        REQUEST_W.load(Ordering::Acquire),
        DONE_R.load(Ordering::Acquire),
    );
    if request_w < 0 || done_r < 0 {
        return Flushed::NoFlusher;
    }
    let mut buf = [0u8; 16];
    // A late answer to an earlier request (one that timed out) would read
    // as this one's.
    // SAFETY: reads into a local buffer of its size (non-blocking).
    while unsafe { libc::read(done_r, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    // SAFETY: writes one byte from a local.
    if unsafe { libc::write(request_w, [1u8].as_ptr().cast(), 1) } != 1 {
        return Flushed::NoFlusher;
    }
    let mut pfd = libc::pollfd {
        fd: done_r,
        events: libc::POLLIN,
        revents: 0,
    };
    let mut left = HANDLER_WAIT_MS;
    while left > 0 {
        // SAFETY: one pollfd on our own pipe.
        let n = unsafe { libc::poll(&mut pfd, 1, 50) };
        // SAFETY: as above.
        if n > 0 && unsafe { libc::read(done_r, buf.as_mut_ptr().cast(), 1) } == 1 {
            return Flushed::Yes;
        }
        left -= 50;
    }
    Flushed::TimedOut
}
