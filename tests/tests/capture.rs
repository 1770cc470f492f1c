//! `-c hggcProfilerApi` capture ranges, gated in the kernel, with
//! `--capture-range-end none|stop|stop-shutdown`.
use asys_tests::*;

fn build() -> std::path::PathBuf {
    sim_workload("ranges.c", &["hggcrt"])
}

/// Runs asys (output not piped: the application may outlive it).
fn profile(
    s: &Scratch,
    bin: &std::path::Path,
    extra: &[&str],
    app_args: &[&str],
) -> (
    std::process::ExitStatus,
    Vec<serde_json::Value>,
    std::path::PathBuf,
) {
    require_root();
    let truth = s.path(&format!("truth{}.jsonl", extra.join("")));
    let _ = std::fs::remove_file(&truth);
    let report = s.path(&format!("r{}", extra.join("").replace('-', "")));
    let status = asys()
        .args([
            "profile",
            "-c",
            "hggcProfilerApi",
            "-f",
            "true",
            "-o",
            report.to_str().unwrap(),
        ])
        .args(extra)
        .arg(bin)
        .args(app_args)
        .env("HGGC_SIM_GROUND_TRUTH", &truth)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    (
        status,
        ground_truth_of(&truth, "hggc"),
        report.with_extension("asysrep"),
    )
}

fn index_of(truth: &[serde_json::Value], api: &str, nth: usize) -> usize {
    truth
        .iter()
        .enumerate()
        .filter(|(_, t)| t["api"] == api)
        .nth(nth)
        .unwrap()
        .0
}

#[test]
fn stop_shutdown_records_exactly_the_first_range_and_ends_the_app() {
    let s = Scratch::new("cap-ss");
    let bin = build();
    let (status, truth, report) = profile(&s, &bin, &[], &[]);
    // The application was still sleeping when the range ended: SIGTERM.
    assert_eq!(status.code(), Some(143));
    let first = index_of(&truth, "hggcProfilerStart", 0);
    let stop = index_of(&truth, "hggcProfilerStop", 0);
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth[first..=stop].iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
    assert_eq!(rows.len(), 10);
    let meta = metadata(&report);
    assert_eq!(meta["capture_ranges"], 1);
}

#[test]
fn stop_leaves_the_app_running_and_none_keeps_recording() {
    let s = Scratch::new("cap-stop");
    let bin = build();
    let (status, truth, report) = profile(&s, &bin, &["--capture-range-end", "stop"], &[]);
    assert!(status.success());
    let rows = stats_json(&report, "hggc_api_trace");
    assert_eq!(rows.len(), 10);
    let pid = metadata(&report)["root_pids"][0].as_i64().unwrap() as i32;
    assert_eq!(signal(pid, 0), 0, "the application runs on");
    // It finishes by itself, its last calls untraced.
    for _ in 0..200 {
        if signal(pid, 0) != 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = truth;

    // none: from the first start to the end of the program; the second
    // start and both stops change nothing.
    let (status, truth, report) = profile(&s, &bin, &["--capture-range-end", "none"], &[]);
    assert!(status.success());
    let first = index_of(&truth, "hggcProfilerStart", 0);
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth[first..].iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
}

#[test]
fn a_range_that_never_begins_gives_an_empty_report_and_a_warning() {
    require_root();
    let s = Scratch::new("cap-none");
    let bin = build();
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-c",
        "hggcProfilerApi",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the capture range never began"),
        "{}",
        stderr(&o)
    );
    let report = report.with_extension("asysrep");
    assert_eq!(metadata(&report)["capture_ranges"], 0);
    assert!(stats_json(&report, "hggc_api_trace").is_empty());
    for (end, why) in [
        (
            "merge:0",
            "the number of ranges in 'merge:0' must be at least 1",
        ),
        (
            "repeat-shutdown",
            "'repeat-shutdown' needs the number of ranges",
        ),
        (
            "repeat:x",
            "the number of ranges in 'repeat:x' must be at least 1",
        ),
    ] {
        let o = run(&[
            "profile",
            "-c",
            "hggcProfilerApi",
            "--capture-range-end",
            end,
            "/bin/true",
        ]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
    }
}

#[test]
fn repeat_writes_one_report_per_range() {
    let s = Scratch::new("cap-repeat");
    let bin = build();
    // The program opens two ranges (4 then 2 alloc/free pairs inside).
    let (status, truth, report) = profile(&s, &bin, &["--capture-range-end", "repeat"], &[]);
    assert!(status.success());
    let stem = report.with_extension("");
    let first = stem.with_extension("1.asysrep");
    let second = stem.with_extension("2.asysrep");
    let (start0, stop0) = (
        index_of(&truth, "hggcProfilerStart", 0),
        index_of(&truth, "hggcProfilerStop", 0),
    );
    let (start1, stop1) = (
        index_of(&truth, "hggcProfilerStart", 1),
        index_of(&truth, "hggcProfilerStop", 1),
    );
    assert_same_calls(
        truth[start0..=stop0].iter().map(truth_key).collect(),
        stats_json(&first, "hggc_api_trace")
            .iter()
            .map(trace_key)
            .collect(),
    );
    assert_same_calls(
        truth[start1..=stop1].iter().map(truth_key).collect(),
        stats_json(&second, "hggc_api_trace")
            .iter()
            .map(trace_key)
            .collect(),
    );
    assert!(!stem.with_extension("3.asysrep").exists());

    // repeat-shutdown:1: the first range's report, then the application ends.
    let (status, _, report) = profile(&s, &bin, &["--capture-range-end", "repeat-shutdown:1"], &[]);
    assert_eq!(status.code(), Some(143));
    let stem = report.with_extension("");
    assert_eq!(
        stats_json(&stem.with_extension("1.asysrep"), "hggc_api_trace").len(),
        10
    );
    assert!(!stem.with_extension("2.asysrep").exists());

    let o = run(&[
        "profile",
        "-c",
        "hggcProfilerApi",
        "--capture-range-end",
        "repeat:0",
        "/bin/true",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("must be at least 1"), "{}", stderr(&o));
}
