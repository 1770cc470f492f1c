//! The flight recorder (`--flight-recorder N`): only the last N seconds are kept,
//! and a report of exactly them is written on SIGUSR1, on a trigger (an API
//! call that fails) and at the end, counted against the workload's own log
//! (`steady_calls`).
use std::{path::Path, time::Duration};

use asys_tests::*;

const WINDOW_NS: i64 = 2_000_000_000;

/// Starts `asys profile -t hggc -s none --flight-recorder SECS ARGS -o OUT
/// steady_calls RATE SECONDS LOG [FAIL_AT]`.
fn start(
    out: &Path,
    flight: &[&str],
    app: &[&str],
) -> (ChildGuard, std::io::BufReader<std::process::ChildStderr>) {
    let mut cmd = asys();
    cmd.args(["profile", "-t", "hggc", "-s", "none"])
        .args(flight)
        .arg("-o")
        .arg(out)
        .arg(workload("steady_calls"))
        .args(app);
    let (g, err, _) = start_tracing(&mut cmd);
    (g, err)
}

/// Checks one flight report against the log; returns its trigger time.
fn check_window(report: &Path, log: &SteadyLog, trigger: &str) -> i64 {
    let meta = metadata(report);
    let f = &meta["flight"];
    assert_eq!(f["trigger"].as_str(), Some(trigger), "{f}");
    assert_eq!(f["window_ns"].as_i64(), Some(WINDOW_NS), "{f}");
    let at = f["trigger_monotonic_ns"].as_i64().unwrap();
    let lo = at - WINDOW_NS;
    let (calls, _) = traced_calls(report);
    // Nothing outside the window.
    let outside: Vec<_> = calls
        .iter()
        .filter(|c| c.start < lo || c.start > at)
        .collect();
    assert!(
        outside.is_empty(),
        "{}: {} calls outside [{lo}, {at}], e.g. {:?}",
        report.display(),
        outside.len(),
        outside.first()
    );
    // Everything inside it: the calls the workload made between two of its
    // progress points within the window (they started after the first and
    // had returned by the second).
    let (a_t, a_n) = *log
        .progress
        .iter()
        .find(|(t, _)| *t >= lo)
        .expect("a progress point in the window");
    let (b_t, b_n) = log.at_or_before(at).expect("a progress point");
    // The points are the workload's own, 300 ms of the window at most
    // outside them (under emulation, where a point can come late, 200 ms
    // more: the calls between them are still checked exactly).
    let slack = 300_000_000 + if emulated() { 200_000_000 } else { 0 };
    assert!(b_t - a_t >= WINDOW_NS - slack, "points {a_t}..{b_t}");
    let between = calls
        .iter()
        .filter(|c| c.name == "hggcGetLastError" && c.start > a_t && c.end <= b_t)
        .count() as u64;
    assert_eq!(
        between,
        b_n - a_n,
        "{}: the workload made {} calls between {a_t} and {b_t}; the report holds {between}",
        report.display(),
        b_n - a_n
    );
    at
}

#[test]
fn a_flight_report_holds_exactly_the_last_seconds_before_its_trigger() {
    require_root();
    let s = Scratch::new("flight");
    let log_path = s.path("progress.log");
    let out = s.path("f");
    // 9 s of calls; one failing call 6.5 s in.
    let (mut g, _err) = start(
        &out,
        &["--flight-recorder", "2", "--flight-trigger", "api-error"],
        &["2000", "9", log_path.to_str().unwrap(), "6.5"],
    );
    wait_for_progress(&log_path, 3.5);
    let sent = monotonic_ns();
    assert_eq!(signal(g.child().id() as i32, libc::SIGUSR1), 0);
    let status = g.wait();
    assert!(status.success(), "{status}");
    let log = SteadyLog::read(&log_path);
    assert!(log.done);

    // SIGUSR1: the window ends when the signal arrived.
    let at = check_window(&s.path("f.1.asysrep"), &log, "SIGUSR1");
    assert!(
        at >= sent && at - sent < 1_000_000_000,
        "signal sent at {sent}, report ends at {at}"
    );

    // The failing call: the window ends at its return.
    let [(fail_start, fail_end, result)] = log.fails[..] else {
        panic!("the workload logged {:?}", log.fails)
    };
    assert_ne!(result, 0);
    let trigger = format!("hggcSetDevice returned {result}");
    let at = check_window(&s.path("f.2.asysrep"), &log, &trigger);
    assert!(
        (fail_start..=fail_end).contains(&at),
        "the call ran {fail_start}..{fail_end}; the report ends at {at}"
    );
    let (calls, _) = traced_calls(&s.path("f.2.asysrep"));
    let failed: Vec<_> = calls.iter().filter(|c| c.name == "hggcSetDevice").collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].result, result);
    assert_eq!(failed[0].end, at);

    // The end of the run.
    check_window(&s.path("f.3.asysrep"), &log, "end of the run");
    assert!(!s.path("f.4.asysrep").exists());
    assert!(
        !s.files().iter().any(|f| f.contains("unfinished")),
        "{:?}",
        s.files()
    );
}

/// Bytes in the recording folders in `dir` (the flight recorder's ring).
fn ring_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".unfinished-"))
        .filter_map(|e| std::fs::read_dir(e.path()).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// asys's peak resident memory (VmHWM, KiB) over a flight-recorded run, and
/// the most its recording folder held.
fn peak_rss_kib(s: &Scratch, seconds: &str) -> (u64, u64) {
    let log_path = s.path(&format!("rss-{seconds}.log"));
    let (mut g, _err) = start(
        &s.path(&format!("rss-{seconds}")),
        &["--flight-recorder", "1"],
        &["20000", seconds, log_path.to_str().unwrap()],
    );
    let pid = g.child().id();
    let mut peak = 0;
    let mut ring = 0;
    while g.child().try_wait().unwrap().is_none() {
        ring = ring.max(ring_bytes(&s.0));
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(g.wait().success());
    assert!(SteadyLog::read(&log_path).done);
    assert!(peak > 0, "VmHWM was never read");
    (peak, ring)
}

#[test]
fn a_flight_recorder_keeps_memory_bounded_whatever_the_run_length() {
    require_root();
    let s = Scratch::new("flight-rss");
    let (short, short_ring) = peak_rss_kib(&s, "4");
    let (long, long_ring) = peak_rss_kib(&s, "12");
    eprintln!(
        "peak RSS: 4 s run {short} KiB, 12 s run {long} KiB; \
         most chunk bytes kept: {short_ring}, {long_ring}"
    );
    assert!(
        long as f64 <= short as f64 * 1.2,
        "peak RSS grew with the run's length: {short} KiB for 4 s, {long} KiB for 12 s"
    );
    // The ring on disk does not grow either (a recording without the flight
    // recorder would hold three times as much).
    assert!(short_ring > 0);
    assert!(
        long_ring as f64 <= short_ring as f64 * 1.3,
        "the ring grew with the run's length: {short_ring} B for 4 s, {long_ring} B for 12 s"
    );
}
