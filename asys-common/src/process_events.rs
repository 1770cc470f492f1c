//! Processes: their fork, exec and exit, the loader hook's notice of a
//! library load, and what the kernel keeps per traced process (whether the
//! loader hook stops it, its vendor libraries' ranges for the caller filter).
use core::mem::offset_of;

use crate::EventHeader;

/// Fork, exec and exit of a traced process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEvent {
    pub header: EventHeader,
    /// Fork: the new task's id. Exec/exit: the process id.
    pub child_pid: u32,
    pub _pad: u32,
    pub comm: [u8; 16],
}

// collect/decode.rs reads it whole for the three process kinds; `comm` is
// NUL-terminated unless it fills all 16 bytes.
const _: () = assert!(size_of::<ProcessEvent>() == 48);
const _: () = assert!(offset_of!(ProcessEvent, header) == 0);
const _: () = assert!(offset_of!(ProcessEvent, child_pid) == 24);
const _: () = assert!(offset_of!(ProcessEvent, comm) == 32);

/// The dynamic loader changed a traced process's link map (start-up or
/// dlopen/dlclose). The process has been sent SIGSTOP by the probe when
/// `stopped` is 1 and waits for userspace to attach new probes and SIGCONT it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LibraryLoadEvent {
    pub header: EventHeader,
    pub stopped: u32,
    pub _pad: u32,
}

// collect/decode.rs reads it whole. The smallest record with
// `CaptureEvent`: 40 bytes in the ring with its 8-byte record header, the
// figure docs/architecture.md gives for a load the ring has no room for.
const _: () = assert!(size_of::<LibraryLoadEvent>() == 32);
const _: () = assert!(offset_of!(LibraryLoadEvent, header) == 0);
const _: () = assert!(offset_of!(LibraryLoadEvent, stopped) == 24);

/// The key of the `STOPPED` map that asys's watchdog sets once asys has
/// died, telling the loader hook to stop nothing more (no process has tgid
/// 0, so the key never stands for a stopped process).
pub const STOPPED_DISARMED: u32 = 0;

/// A `STOPPED` value: the loader hook stopped the process and announced the
/// load with an event in the ring; userspace continues it when it reads it.
pub const STOPPED_ANNOUNCED: u32 = 1;
/// A `STOPPED` value: the loader hook stopped the process but the ring was
/// full, so no event tells of it. Userspace looks for these in `STOPPED`
/// itself (each collection tick), probes the process and continues it: a
/// burst of other events must not cost a launched process its library's
/// probes.
pub const STOPPED_UNANNOUNCED: u32 = 2;

/// Per-process tracing state kept in the `TRACED` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TracedProcess {
    /// Whether the loader hook stops the process at a library load:
    /// [`STOP_EVERY_LOAD`] so that probes go in before any new library code
    /// runs; [`STOP_UNTIL_PLACED`] until userspace has seen where its lock
    /// libraries are (osrt alone, which adds no probes: userspace then sets
    /// 0); 0 never.
    pub stop_on_load: u32,
    /// What an exec sets `stop_on_load` to (the new image maps its
    /// libraries anew); 0: an exec leaves it.
    pub stop_after_exec: u32,
}

// The `TRACED` map's value, written by both sides.
const _: () = assert!(size_of::<TracedProcess>() == 8);

/// [`TracedProcess::stop_on_load`] values.
pub const STOP_EVERY_LOAD: u32 = 1;
pub const STOP_UNTIL_PLACED: u32 = 2;

/// Most executable ranges of vendor libraries kept per process for the
/// caller filter ([`CallerRanges`]).
pub const MAX_CALLER_RANGES: usize = 64;

/// One executable range of a vendor library in a process, and the API
/// families (bit `1 << family`) for which a call from it is the vendor's own
/// (left out while [`Settings::caller_filter`](crate::Settings::caller_filter)
/// has the family's bit).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallerRange {
    pub start: u64,
    pub end: u64,
    pub families: u64,
}

// An element of `CallerRanges::ranges`; no hidden padding (Pod).
const _: () = assert!(size_of::<CallerRange>() == 24);

/// A process's vendor library ranges, in the `CALLER_RANGES` map by tgid:
/// userspace writes them from the process's mappings; a fork copies its
/// parent's. Without an entry the kernel falls back to recording only the
/// outermost call of a family on each thread.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CallerRanges {
    pub count: u64,
    pub ranges: [CallerRange; MAX_CALLER_RANGES],
}

// The `CALLER_RANGES` map's value, written whole by userspace.
const _: () = assert!(size_of::<CallerRanges>() == 8 + 24 * MAX_CALLER_RANGES);
