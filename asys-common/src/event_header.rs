//! What every ring-buffer record starts with: the [`EventHeader`], and the
//! [`EventKind`] in it that says which record follows.
use core::mem::offset_of;

#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    ApiCall = 1,
    /// An API call with a text argument (range names, marks, domains).
    ApiCallText = 2,
    /// The user stack of the caller of the API call just reported on the
    /// same thread (`--hggc-backtrace`).
    ApiStack = 3,
    /// An API call whose signature reads no argument:
    /// [`ApiCallShortEvent`](crate::ApiCallShortEvent).
    ApiCallShort = 4,
    /// A futex wait made by a lock library (osrt): [`LockWaitEvent`](crate::LockWaitEvent).
    LockWait = 5,
    ProcessFork = 100,
    ProcessExec = 101,
    ProcessExit = 102,
    LibraryLoad = 200,
    /// The injection library named an API id (site-recorded calls).
    ApiName = 201,
    /// Device activity (kernel, copy, memset) from the injection library.
    DeviceActivity = 300,
    /// The capture range opened or closed.
    Capture = 400,
    /// A CPU switched from one thread to another (`--cpuctxsw`).
    SchedSwitch = 500,
    /// A thread woke another (`sched_waking`, with `--cpuctxsw`).
    SchedWaking = 501,
    /// A CPU sample (`-s`) without its stack (`-b none`).
    CpuSample = 600,
    /// A CPU sample with a copy of the user stack.
    CpuSampleStack = 601,
    /// The kernel stack of the sample or switch just reported on the same
    /// thread: [`KernelStackEvent`](crate::KernelStackEvent).
    KernelStack = 602,
    /// The Python frames of the CPU sample just reported on the same thread
    /// (`--python-sampling`): [`PythonStackEvent`](crate::PythonStackEvent).
    PythonStack = 603,
    /// The Python frames of a traced thread as it left the CPU to wait
    /// (`--python-sampling` with `--cpuctxsw` and `-s`; the switch just
    /// reported on the same thread, `owner_ts` its time):
    /// [`PythonStackEvent`](crate::PythonStackEvent).
    PythonSwitchStack = 604,
    /// A hit of a user-defined probe (`--probe`) with string arguments:
    /// [`ProbeHitEvent`](crate::ProbeHitEvent).
    ProbeHit = 700,
    /// A hit of a user-defined probe without string arguments:
    /// [`ProbeHitShortEvent`](crate::ProbeHitShortEvent) (a fifth of the size: no string slots).
    ProbeHitShort = 701,
}

impl EventKind {
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::ApiCall,
            2 => Self::ApiCallText,
            3 => Self::ApiStack,
            4 => Self::ApiCallShort,
            5 => Self::LockWait,
            100 => Self::ProcessFork,
            101 => Self::ProcessExec,
            102 => Self::ProcessExit,
            200 => Self::LibraryLoad,
            201 => Self::ApiName,
            300 => Self::DeviceActivity,
            400 => Self::Capture,
            500 => Self::SchedSwitch,
            501 => Self::SchedWaking,
            600 => Self::CpuSample,
            601 => Self::CpuSampleStack,
            602 => Self::KernelStack,
            603 => Self::PythonStack,
            604 => Self::PythonSwitchStack,
            700 => Self::ProbeHit,
            701 => Self::ProbeHitShort,
            _ => return None,
        })
    }
}

/// The start of every ring-buffer record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventHeader {
    pub kind: u32,
    pub cpu: u32,
    /// CLOCK_MONOTONIC, ns.
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
}

// Userspace reads the header from the start of every record before it
// knows the kind (collect/decode.rs), so every record type puts its header
// (or a record that starts with one) at offset 0 and asserts it beside
// itself; these are the header's own fields, which the decode tests also
// write by position.
const _: () = assert!(size_of::<EventHeader>() == 24);
const _: () = assert!(offset_of!(EventHeader, kind) == 0);
const _: () = assert!(offset_of!(EventHeader, cpu) == 4);
const _: () = assert!(offset_of!(EventHeader, ts) == 8);
const _: () = assert!(offset_of!(EventHeader, pid) == 16);
const _: () = assert!(offset_of!(EventHeader, tid) == 20);
