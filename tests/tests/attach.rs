//! `asys attach` to a running process: trace, detach, and the process carries on.
use std::io::{BufRead, BufReader, Write};

use asys_tests::*;

/// Starts `asys attach` on `pids` ("1,2") and waits until it says it is tracing.
fn attach(
    pids: &str,
    report: &std::path::Path,
    extra: &[&str],
) -> (ChildGuard, BufReader<std::process::ChildStderr>) {
    let (g, err, line) = start_tracing(
        asys()
            .args(["attach", "-t", "hggc", "-o", report.to_str().unwrap()])
            .args(extra)
            .arg(pids),
    );
    assert_eq!(line, format!("asys: tracing hggc (pid {pids})"));
    (g, err)
}

#[test]
fn attach_records_exactly_the_calls_made_while_attached() {
    require_root();
    let s = Scratch::new("attach");
    let truth_path = s.path("truth.jsonl");
    let mut t = AttachTarget::start(&truth_path);
    assert_eq!(t.burst(3), expected_checksum(3));
    let before = ground_truth(&truth_path).len();

    let report = s.path("a");
    let (g, _err) = attach(&t.pid.to_string(), &report, &[]);
    assert_eq!(t.burst(25), expected_checksum(25));
    let during = ground_truth(&truth_path).len();
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    let status = g.wait();
    assert!(status.success(), "asys attach exited with {status}");

    // Detached: the target carries on, computes right, and exits 0.
    assert_eq!(t.burst(4), expected_checksum(4));
    let (status, rest) = t.quit();
    assert!(status.success(), "target exited with {status}");
    assert!(
        rest.contains("workload-calls hggcLaunchKernel 32"),
        "{rest}"
    );

    let truth = ground_truth(&truth_path);
    let window: Vec<String> = truth[before..during].iter().map(truth_key).collect();
    assert_eq!(window.len(), 100);
    let rows = stats_json(&report.with_extension("asysrep"), "hggc_api_trace");
    assert_same_calls(window, rows.iter().map(trace_key).collect());
}

#[test]
fn attach_with_duration_detaches_by_itself_and_again() {
    require_root();
    let s = Scratch::new("attach-dur");
    let truth_path = s.path("truth.jsonl");
    let mut t = AttachTarget::start(&truth_path);
    for round in 0..2 {
        let report = s.path(&format!("d{round}"));
        let (g, _err) = attach(&t.pid.to_string(), &report, &["--duration", "1"]);
        assert_eq!(t.burst(5), expected_checksum(5));
        let status = g.wait();
        assert!(status.success());
        let rows = stats_json(&report.with_extension("asysrep"), "hggc_api_trace");
        assert_eq!(rows.len(), 20, "round {round}");
        assert!(rows.iter().all(|r| r["Pid"].as_u64() == Some(t.pid as u64)));
    }
    assert_eq!(t.burst(2), expected_checksum(2));
    let (status, _) = t.quit();
    assert!(status.success());
}

#[test]
fn attach_to_two_processes_at_once() {
    require_root();
    let s = Scratch::new("attach-two");
    let (ta, tb) = (s.path("a.jsonl"), s.path("b.jsonl"));
    let (mut a, mut b) = (AttachTarget::start(&ta), AttachTarget::start(&tb));
    let report = s.path("two");
    let (g, _err) = attach(&format!("{},{}", a.pid, b.pid), &report, &[]);
    assert_eq!(a.burst(6), expected_checksum(6));
    assert_eq!(b.burst(9), expected_checksum(9));
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    assert!(g.wait().success());
    let rows = stats_json(&report.with_extension("asysrep"), "hggc_api_trace");
    let count = |pid: u32| {
        rows.iter()
            .filter(|r| r["Pid"].as_u64() == Some(pid as u64))
            .count()
    };
    assert_eq!((count(a.pid), count(b.pid)), (24, 36));
    for t in [a, b] {
        let (status, _) = t.quit();
        assert!(status.success());
    }
}

#[test]
fn attach_and_detach_a_hundred_times_under_load() {
    require_root();
    let s = Scratch::new("attach-100");
    let truth_path = s.path("truth.jsonl");
    let t = AttachTarget::start(&truth_path);
    // Keep the target busy from a second thread of the test: bursts back to
    // back, each checked, while asys attaches and detaches.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (mut stdin, mut stdout) = (t.stdin, t.stdout);
    let stop2 = stop.clone();
    let load = std::thread::spawn(move || {
        let mut bursts = 0u32;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            writeln!(stdin, "burst 20").unwrap();
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            let sum: i64 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
            assert_eq!(
                sum,
                expected_checksum(20),
                "wrong output after {bursts} bursts"
            );
            bursts += 1;
        }
        writeln!(stdin, "quit").unwrap();
        let mut rest = String::new();
        while stdout.read_line(&mut rest).unwrap() > 0 {}
        bursts
    });
    let mut recorded = 0u64;
    for round in 0..100 {
        let report = s.path(&format!("a{round}"));
        let o = run(&[
            "attach",
            "-d",
            "0.1",
            "-o",
            report.to_str().unwrap(),
            &t.pid.to_string(),
        ]);
        assert!(o.status.success(), "round {round}: {}", stderr(&o));
        recorded += metadata(&report.with_extension("asysrep"))["tables"]["hggc_api"]
            .as_u64()
            .unwrap_or(0);
        std::fs::remove_file(report.with_extension("asysrep")).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let bursts = load.join().expect("the target's output stayed right");
    assert!(bursts > 0);
    assert!(recorded > 0, "attaching recorded calls");
    let status = t.guard.wait();
    assert!(status.success(), "target exited with {status}");
}

#[test]
fn attach_with_a_capture_range_records_the_range_and_leaves_the_process_running() {
    require_root();
    let s = Scratch::new("attach-capture");
    let bin = ranges_on_demand();
    let truth_path = s.path("truth.jsonl");
    let AttachTarget {
        guard: target,
        mut stdin,
        mut stdout,
        pid,
    } = AttachTarget::spawn(
        std::process::Command::new(&bin).env("HGGC_SIM_GROUND_TRUTH", &truth_path),
    );
    let mut said = |cmd: &str| {
        writeln!(stdin, "{cmd}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        line
    };
    assert_eq!(said("range Warmup 1").trim(), "done");

    for (round, (capture, expect)) in [
        (&["-c", "hgtx", "-p", "Step"][..], 4),
        (&["-c", "hggcProfilerApi"][..], 3),
    ]
    .into_iter()
    .enumerate()
    {
        let report = s.path(&format!("cap{round}"));
        let (g, _err, _) = start_tracing(
            asys()
                .args(["attach", "-t", "hggc,hgtx", "-o", report.to_str().unwrap()])
                .args(capture)
                .arg(pid.to_string()),
        );
        let from = ground_truth_of(&truth_path, "hggc").len();
        assert_eq!(said("range Other 2").trim(), "done");
        let begin = ground_truth_of(&truth_path, "hggc").len();
        assert_eq!(said("range Step 4").trim(), "done");
        assert_eq!(said("profiler 3").trim(), "done");
        let end = ground_truth_of(&truth_path, "hggc").len();
        // The end of the range ends collection: asys detaches by itself.
        let status = g.wait();
        assert!(status.success(), "asys attach exited with {status}");
        let truth = ground_truth_of(&truth_path, "hggc");
        let window: Vec<String> = match round {
            0 => truth[begin..begin + 8].iter().map(truth_key).collect(),
            // The profiler range: its start and stop calls are in it.
            _ => truth[begin + 8..end].iter().map(truth_key).collect(),
        };
        assert!(from < begin);
        assert_eq!(window.len(), 2 * expect + 2 * round);
        let rows = stats_json(&report.with_extension("asysrep"), "hggc_api_trace");
        assert_same_calls(window, rows.iter().map(trace_key).collect());
    }
    // The process runs on, unharmed.
    assert_eq!(said("range Step 1").trim(), "done");
    writeln!(stdin, "quit").unwrap();
    assert!(target.wait().success());
}

#[test]
fn attach_window_holds_every_call_to_its_edges_and_nothing_else() {
    require_root();
    let s = Scratch::new("attach-window");
    let bin = timed_calls(TimedRuntime::Hggc);
    // The traced process, and one beside it that is not attached to.
    let (log, other_log) = (s.path("calls.log"), s.path("other.log"));
    let start = |log: &std::path::Path| {
        ChildGuard(Some(
            std::process::Command::new(&bin)
                .args(["2000", "6"])
                .arg(log)
                .spawn()
                .unwrap(),
        ))
    };
    let (target, other) = (start(&log), start(&other_log));
    let pid = target.0.as_ref().unwrap().id();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let report = s.path("w");
    let began = std::time::Instant::now();
    let o = run(&[
        "attach",
        "-t",
        "hggc",
        "-d",
        "2",
        "-o",
        report.to_str().unwrap(),
        &pid.to_string(),
    ]);
    let took = began.elapsed();
    assert!(o.status.success(), "{}", stderr(&o));
    // Loading, attaching, packing and detaching take a moment besides.
    assert!(
        took < std::time::Duration::from_secs(4),
        "-d 2 took {took:?} of wall time"
    );
    assert!(target.wait().success());
    assert!(other.wait().success());

    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    assert_eq!(lost_events(&meta), Default::default(), "{}", stderr(&o));
    let window = (
        meta["start_monotonic_ns"].as_i64().unwrap(),
        meta["end_monotonic_ns"].as_i64().unwrap(),
    );
    let length = (window.1 - window.0) as f64 / 1e9;
    assert!((2.0..3.0).contains(&length), "the window is {length} s");
    let (calls, _) = traced_calls(&report);
    // Only the attached process: the trace's rows are its calls, its
    // calls inside the window are all there, and the last 226 ms too.
    let pids = stats_csv_column(&report, "hggc_api_trace", "Pid");
    assert!(pids.iter().all(|p| p == &pid.to_string()), "{pids:?}");
    let mut starts: Vec<i64> = calls.iter().map(|c| c.start).collect();
    starts.sort_unstable();
    let inside = assert_window_exact(&timed_log(&log), &starts, window);
    assert!(inside >= 3_900, "{inside} calls in the window");
}
