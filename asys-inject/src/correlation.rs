//! Correlation ids for calls that uprobes on the runtime record
//! (`--api-probes entry`). A probe hit on a NOP5 site costs about as much as
//! a uretprobe, which made entry mode pay three probe hits per call where a
//! plain uprobe + uretprobe pair pays two. Instead the library keeps the id
//! of the call that is returning in a thread-local slot, and announces the
//! slot's address to the kernel at `asys_site_api` only on a thread's first
//! call, after a fork, and every [`ANNOUNCE_EVERY`]th call (in case asys
//! attached after the announcement); the exit probe reads the slot.
use std::{
    cell::Cell,
    sync::atomic::{AtomicU32, Ordering},
};

/// Bumped by each attach (`attach.rs`): a thread whose last announcement
/// was made before it announces its slot again at its next call, since the
/// asys now attached never saw the earlier one.
static EPOCH: AtomicU32 = AtomicU32::new(0);

/// A new tracer attached: every thread announces again.
pub fn announce_again() {
    EPOCH.fetch_add(1, Ordering::Relaxed);
}

/// Calls between two announcements of a thread's slot: a tracer that
/// attaches to a running process learns the slot within this many calls.
const ANNOUNCE_EVERY: u32 = 64;

struct Thread {
    /// The correlation id of the call returning on this thread: written by
    /// the exit callback, which runs just before the runtime function
    /// returns and its exit probe reads the slot.
    slot: Cell<u32>,
    /// Calls until the next announcement; 0: announce now.
    countdown: Cell<u32>,
    /// [`EPOCH`] at the thread's last announcement.
    epoch: Cell<u32>,
}

thread_local! {
    static THREAD: Thread = const {
        Thread {
            slot: Cell::new(0),
            countdown: Cell::new(0),
            epoch: Cell::new(0),
        }
    };
}

/// At the entry callback of a runtime call.
pub fn enter(correlation: u32) {
    THREAD.with(|t| {
        // The id of the call in flight, should the exit probe of a call
        // made inside this one's callback read the slot before our exit.
        t.slot.set(correlation);
        let epoch = EPOCH.load(Ordering::Relaxed);
        if t.epoch.get() != epoch {
            t.epoch.set(epoch);
            t.countdown.set(0);
        }
        match t.countdown.get() {
            0 => {
                t.countdown.set(ANNOUNCE_EVERY - 1);
                crate::sites::asys_site_api(correlation, t.slot.as_ptr());
            }
            n => t.countdown.set(n - 1),
        }
    });
}

/// At the exit callback of a runtime call.
pub fn exit(correlation: u32) {
    THREAD.with(|t| t.slot.set(correlation));
}

/// In a forked child: its thread is new to the kernel, so announce at its
/// next call.
pub fn after_fork() {
    THREAD.with(|t| t.countdown.set(0));
}
