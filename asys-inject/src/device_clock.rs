//! Device clock to CLOCK_MONOTONIC: the offset is measured by reading the
//! device clock between two host reads and keeping the tightest of a few
//! tries; the midpoint's error is at most half that window.
pub fn monotonic() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The runtime's own clock read (`hgptiGetTimestamp`, `cuptiGetTimestamp`).
pub type Timestamp = unsafe extern "C" fn(*mut u64) -> i32;

/// Measures the offset (device minus host, ns).
pub fn refresh(get_timestamp: Timestamp) -> i64 {
    let mut best: Option<(i64, i64)> = None;
    for _ in 0..5 {
        let mut device = 0u64;
        let t0 = monotonic();
        // SAFETY: the runtime's timestamp function, writing one u64 we own.
        unsafe { get_timestamp(&mut device) };
        let t1 = monotonic();
        let window = t1 - t0;
        let offset = device as i64 - (t0 + window / 2);
        if best.is_none_or(|(w, _)| window < w) {
            best = Some((window, offset));
        }
    }
    best.map(|(_, o)| o).unwrap_or(0)
}
