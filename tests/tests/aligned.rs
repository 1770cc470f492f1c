//! `-y /PERIOD` and `-y @TIME`: recording that starts at one wall-clock
//! instant, whenever each asys was started. Four asys processes started
//! 0.3 s apart, as a job's ranks are by a launcher, record the same window,
//! and each holds exactly the calls its workload logged inside it.
use std::time::Duration;

use asys_tests::*;

fn realtime_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_nanos() as i64
}

#[test]
fn four_processes_started_apart_record_the_same_wall_clock_window() {
    require_root();
    let s = Scratch::new("aligned");
    const PERIOD: i64 = 2_000_000_000;
    // Start just after a 2 s boundary, so that all four (the last 0.9 s
    // later) name the same next boundary.
    loop {
        let into = realtime_ns().rem_euclid(PERIOD);
        if (10_000_000..100_000_000).contains(&into) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut children = Vec::new();
    for r in 0..4 {
        let child = asys()
            .args(["profile", "-t", "hggc", "-y", "/2s", "-d", "1", "-o"])
            .arg(s.path(&format!("r{r}")))
            .arg(workload("steady_calls"))
            .args(["200", "4"])
            .arg(s.path(&format!("progress{r}")))
            .env("HGGC_SIM_GROUND_TRUTH", s.path(&format!("truth{r}.jsonl")))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start asys");
        children.push(child);
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut starts = Vec::new();
    for (r, child) in children.into_iter().enumerate() {
        let o = child.wait_with_output().expect("asys ends");
        // asys exits with the application's status: SIGTERM's after -d.
        let report = s.path(&format!("r{r}.asysrep"));
        assert!(report.is_file(), "rank {r}: {}", stderr(&o));
        let m = metadata(&report);
        let at = m["activation"]["realtime_ns"].as_i64().expect("activation");
        assert_eq!(m["activation"]["spec"], "/2s");
        assert_eq!(at % PERIOD, 0, "rank {r} started off the boundary");
        assert_eq!(m["start_realtime_ns"].as_i64(), Some(at));
        let (ws, we) = (
            m["start_monotonic_ns"].as_i64().unwrap(),
            m["end_monotonic_ns"].as_i64().unwrap(),
        );
        assert_eq!(we - ws, 1_000_000_000, "rank {r}: the window is -d long");
        // Exactly the calls the workload started inside the window.
        let truth = ground_truth_of(&s.path(&format!("truth{r}.jsonl")), "hggc");
        let inside: Vec<&serde_json::Value> = truth
            .iter()
            .filter(|t| (ws..=we).contains(&t["start"].as_i64().unwrap()))
            .collect();
        assert!(
            inside.len() > 150,
            "rank {r}: {} calls in the window",
            inside.len()
        );
        let rows = stats_json(&report, "hggc_api_trace");
        assert_same_calls(
            inside.iter().map(|t| truth_key(t)).collect(),
            rows.iter().map(trace_key).collect(),
        );
        // Recording was on at the instant: the first call recorded is the
        // first the workload made in the window.
        let first = inside.iter().map(|t| t["start"].as_i64().unwrap()).min();
        let recorded = rows.iter().map(|r| r["Start (ns)"].as_i64().unwrap()).min();
        assert!(
            recorded.unwrap() >= ws && recorded.unwrap() <= first.unwrap(),
            "rank {r}: first call at {recorded:?}, window from {ws}"
        );
        starts.push(at);
    }
    // The four windows start at one instant of the realtime clock.
    let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    assert!(spread <= 1_000_000, "windows' starts differ by {spread} ns");
}

#[test]
fn aligned_starts_that_cannot_be_met_are_one_line_errors() {
    require_root();
    for (spec, says) in [
        ("@2001-01-01T00:00:00", "has already passed"),
        ("/0s", "must be positive"),
        ("/10parsecs", "expected seconds, @TIME"),
        ("@noon", "expected seconds, @TIME"),
    ] {
        let o = run(&["profile", "-y", spec, "-o", "/nonexistent/x", "/bin/true"]);
        assert!(!o.status.success(), "-y {spec} was taken");
        let err = stderr(&o);
        assert!(err.contains(says), "-y {spec}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "-y {spec}: {err}");
    }
}
