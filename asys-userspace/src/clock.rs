//! The clocks asys reads: CLOCK_MONOTONIC (the kernel's `bpf_ktime_get_ns`,
//! every recorded time) and CLOCK_REALTIME (when a report began, for people).
//! A top-level module because most stages read them (cli, collect, record,
//! sink).
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

/// How many realtime/monotonic pairs [`sample`] reads to keep the tightest.
const PAIR_READS: usize = 16;

/// The clocks as another report's alignment needs them (see
/// `report::set`): boot id, a tight realtime/monotonic pair, NTP state.
pub fn sample() -> asys_report::report::metadata::ClockSample {
    // monotonic, realtime, monotonic: the pair is realtime and the middle
    // of the two monotonic reads; their distance bounds its error.
    let (mut best_gap, mut best) = (i64::MAX, (0, 0));
    for _ in 0..PAIR_READS {
        let m0 = monotonic_ns();
        let r = realtime_ns();
        let m1 = monotonic_ns();
        if m1 - m0 < best_gap {
            best_gap = m1 - m0;
            best = (r, m0 + (m1 - m0) / 2);
        }
    }
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().chars().take(64).collect())
        .unwrap_or_default();
    // SAFETY: an all-zero timex is a valid value; modes 0 asks adjtimex to
    // change nothing and only fill the struct it is given.
    let (state, tx) = unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        let state = libc::adjtimex(&mut tx);
        (state, tx)
    };
    asys_report::report::metadata::ClockSample {
        boot_id,
        realtime_ns: best.0,
        monotonic_ns: best.1,
        pair_gap_ns: best_gap.max(0),
        // TIME_ERROR (5), or the STA_UNSYNC status bit: not synchronised.
        ntp_synchronized: state >= 0
            && state != libc::TIME_ERROR
            && tx.status & libc::STA_UNSYNC == 0,
        ntp_esterror_us: tx.esterror,
        ntp_maxerror_us: tx.maxerror,
    }
}

/// CLOCK_REALTIME, ns since the epoch.
pub fn realtime_ns() -> i64 {
    clock_ns(libc::CLOCK_REALTIME)
}
