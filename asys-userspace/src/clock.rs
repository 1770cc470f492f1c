//! The clocks asys reads: CLOCK_MONOTONIC (the kernel's `bpf_ktime_get_ns`,
//! every recorded time) and CLOCK_REALTIME (when a report began, for people).
pub fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CLOCK_MONOTONIC, ns.
pub fn monotonic_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME, ns since the epoch.
pub fn realtime_ns() -> i64 {
    clock_ns(libc::CLOCK_REALTIME)
}
