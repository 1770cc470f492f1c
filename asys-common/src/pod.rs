//! `aya::Pod` for the types userspace reads out of maps and the ring buffer
//! (the `user` feature: the eBPF side has no aya).
use crate::*;

/// `aya::Pod` for types userspace reads out of maps and the ring buffer.
macro_rules! pod {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: each type listed is `#[repr(C)]`, made only of integers
        // and arrays of integers (and of such types), with explicit `_pad`
        // fields where the alignment would leave a hole (the size asserted
        // beside each type is the sum of its fields'), so every bit
        // pattern is a valid value and none has uninitialised padding.
        unsafe impl aya::Pod for $t {}
    )*};
}

pod!(
    ProbeArg,
    UserProbe,
    ProbeCallKey,
    ProbeCallEntry,
    ProbeHitShortEvent,
    ProbeHitEvent,
    EventHeader,
    SchedEvent,
    ApiEntry,
    ThreadCalls,
    ApiCallEvent,
    ProcessEvent,
    LibraryLoadEvent,
    TracedProcess,
    ActivityEvent,
    ApiNameEvent,
    ApiTextEvent,
    ApiStackEvent,
    CpuSampleEvent,
    CpuSampleStackEvent,
    WakingEvent,
    KernelStackEvent,
    PythonStackEvent,
    PythonProcess,
    CaptureEvent,
    ApiCallShortEvent,
    Settings,
    KernelState,
    OsrtThread,
    LockWaitEvent,
    CallerRange,
    CallerRanges,
    TracepointLayout,
);
