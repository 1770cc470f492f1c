//! `--always-on`: the preset a team leaves running (the API items of both
//! runtimes and the OS calls, 99 Hz sampling, a 60 s flight recorder with
//! its triggers), and `asys dump`, which asks it for a report now. Counted
//! against the workload's own log (`steady_calls`).
use std::process::Command;

use asys_tests::*;

/// What the preset records, as the report's metadata says it.
fn check_preset(report: &std::path::Path) -> serde_json::Value {
    let meta = metadata(report);
    let trace: Vec<&str> = meta["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for item in ["hggc", "hgtx", "cuda", "nvtx", "osrt"] {
        assert!(trace.contains(&item), "{item} not in {trace:?}");
    }
    assert_eq!(meta["sample"].as_str(), Some("process-tree"), "{meta}");
    assert_eq!(
        meta["sample_period_ns"].as_u64(),
        Some(10_101_010),
        "{meta}"
    );
    assert_eq!(meta["flight"]["window_ns"].as_i64(), Some(60_000_000_000));
    meta
}

/// The calls a report holds of the workload's hggcGetLastError loop up to
/// its trigger equal those the workload logged: the window (60 s) is
/// longer than the run, so every call from the start is in it.
fn check_everything_before(report: &std::path::Path, log: &SteadyLog) -> i64 {
    let meta = metadata(report);
    let at = meta["flight"]["trigger_monotonic_ns"].as_i64().unwrap();
    let (calls, _) = traced_calls(report);
    let (b_t, b_n) = log.at_or_before(at).expect("a progress point");
    let before = calls
        .iter()
        .filter(|c| c.name == "hggcGetLastError" && c.end <= b_t)
        .count() as u64;
    assert_eq!(
        before,
        b_n,
        "{}: the workload made {b_n} calls by {b_t}; the report holds {before}",
        report.display()
    );
    assert!(
        calls.iter().all(|c| c.start <= at),
        "{}: a call after the trigger at {at}",
        report.display()
    );
    at
}

#[test]
fn always_on_dumps_on_asys_dump_and_on_a_failing_call_with_every_call_before() {
    require_root();
    let s = Scratch::new("always-on");
    let log_path = s.path("progress.log");
    let out = s.path("a");
    // 7 s of calls at 2,000 a second; one failing call 5 s in.
    let mut cmd = asys();
    cmd.args(["profile", "--always-on", "-o"])
        .arg(&out)
        .arg(workload("steady_calls"))
        .args(["2000", "7", log_path.to_str().unwrap(), "5"]);
    let (mut g, mut err, _) = start_tracing(&mut cmd);
    wait_for_progress(&log_path, 2.0);
    let asked = monotonic_ns();
    let dump = Command::new(asys_bin())
        .args(["dump", "--pid"])
        .arg(g.child().id().to_string())
        .output()
        .unwrap();
    let answered = monotonic_ns();
    let printed = String::from_utf8_lossy(&dump.stdout);
    assert!(
        dump.status.success(),
        "asys dump: {}{printed}",
        String::from_utf8_lossy(&dump.stderr)
    );
    // It waits for the report, and names it.
    let first = s.path("a.1.asysrep");
    assert_eq!(printed.trim(), first.to_str().unwrap());
    assert!(first.exists());
    let status = g.wait();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut err, &mut stderr).unwrap();
    assert!(status.success(), "{status}\n{stderr}");
    // The items of the other runtime are tried quietly.
    assert!(!stderr.contains("warning"), "{stderr}");
    let log = SteadyLog::read(&log_path);
    assert!(log.done);

    // `asys dump`: SIGUSR1, the window ending while it asked.
    let meta = check_preset(&first);
    assert_eq!(meta["flight"]["trigger"].as_str(), Some("SIGUSR1"));
    let at = check_everything_before(&first, &log);
    assert!(
        (asked..=answered).contains(&at),
        "asked {asked}..{answered}, at {at}"
    );

    // The failing call, one of the preset's triggers.
    let [(fail_start, fail_end, result)] = log.fails[..] else {
        panic!("the workload logged {:?}", log.fails)
    };
    let second = s.path("a.2.asysrep");
    let meta = check_preset(&second);
    assert_eq!(
        meta["flight"]["trigger"].as_str(),
        Some(format!("hggcSetDevice returned {result}").as_str())
    );
    let at = check_everything_before(&second, &log);
    assert!((fail_start..=fail_end).contains(&at));

    // And the end of the run; nothing more, and no note left behind.
    let meta = check_preset(&s.path("a.3.asysrep"));
    assert_eq!(meta["flight"]["trigger"].as_str(), Some("end of the run"));
    assert!(!s.path("a.4.asysrep").exists());
    let none = Command::new(asys_bin()).arg("dump").output().unwrap();
    assert!(!none.status.success());
    let said = String::from_utf8_lossy(&none.stderr);
    assert!(
        said.contains("no flight recorder of this user's is running"),
        "{said}"
    );
    assert_eq!(said.trim().lines().count(), 1, "{said}");
}

#[test]
fn an_option_given_with_always_on_overrides_its_part_of_the_preset() {
    require_root();
    let s = Scratch::new("always-on-override");
    let out = s.path("o");
    let log_path = s.path("progress.log");
    let o = asys()
        .args([
            "profile",
            "--always-on",
            "-t",
            "hggc",
            "--sample-period",
            "2000000",
            "--flight-recorder",
            "5",
            "-o",
        ])
        .arg(&out)
        .arg(workload("steady_calls"))
        .args(["500", "1", log_path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let meta = metadata(&s.path("o.1.asysrep"));
    assert_eq!(meta["trace"], serde_json::json!(["hggc"]));
    assert_eq!(meta["sample_period_ns"].as_u64(), Some(2_000_000));
    assert_eq!(meta["flight"]["window_ns"].as_i64(), Some(5_000_000_000));
    assert_eq!(meta["flight"]["trigger"].as_str(), Some("end of the run"));
}

#[test]
fn launch_refuses_always_on_in_one_line() {
    let o = asys()
        .args(["launch", "--always-on", "true"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("--always-on is not an option of launch"),
        "{said}"
    );
    assert_eq!(said.trim().lines().count(), 1, "{said}");
}
