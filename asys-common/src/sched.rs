//! The scheduler (`--cpuctxsw`): context switches and wake-ups.
use core::mem::offset_of;

use crate::EventHeader;

/// A context switch; the header's pid/tid are the thread switched out (the
/// idle task is 0), on the header's CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SchedEvent {
    pub header: EventHeader,
    /// The state the thread left in: 0 runnable (preempted), else the
    /// kernel's TASK_* bits (1 S: sleeping, 2 D: uninterruptible, ...).
    pub prev_state: i64,
    /// The thread switched in (its process id is not known here).
    pub next_tid: u32,
    pub _pad: u32,
    pub prev_comm: [u8; 16],
    pub next_comm: [u8; 16],
}

// collect/decode.rs reads it whole; the comms are NUL-terminated unless
// they fill all 16 bytes.
const _: () = assert!(size_of::<SchedEvent>() == 72);
const _: () = assert!(offset_of!(SchedEvent, header) == 0);
const _: () = assert!(offset_of!(SchedEvent, prev_state) == 24);
const _: () = assert!(offset_of!(SchedEvent, next_tid) == 32);
const _: () = assert!(offset_of!(SchedEvent, prev_comm) == 40);
const _: () = assert!(offset_of!(SchedEvent, next_comm) == 56);

/// A wake-up (`sched_waking`): the header is the waker (the thread running
/// when the wake-up was issued) on its CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WakingEvent {
    pub header: EventHeader,
    /// The thread woken.
    pub wakee_tid: u32,
    /// The CPU it was queued on.
    pub target_cpu: u32,
    pub waker_comm: [u8; 16],
}

// collect/decode.rs reads it whole.
const _: () = assert!(size_of::<WakingEvent>() == 48);
const _: () = assert!(offset_of!(WakingEvent, header) == 0);
const _: () = assert!(offset_of!(WakingEvent, wakee_tid) == 24);
const _: () = assert!(offset_of!(WakingEvent, target_cpu) == 28);
const _: () = assert!(offset_of!(WakingEvent, waker_comm) == 32);
