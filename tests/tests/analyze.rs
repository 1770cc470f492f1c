//! `asys analyze` against a workload that plants each problem and logs when
//! (planted_problems), and against its clean mode, which plants none.
use std::collections::HashMap;

use asys_tests::*;
use serde_json::Value;

/// The workload's log: name → (before, after), CLOCK_MONOTONIC ns.
fn brackets(log: &std::path::Path) -> HashMap<String, (i64, i64)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                (f[1].parse().unwrap(), f[2].parse().unwrap()),
            )
        })
        .collect()
}

/// Rows of `asys analyze --rule RULE --format json REPORT`.
fn analyze(report: &std::path::Path, rule: &str) -> Vec<Value> {
    let o = run(&[
        "analyze",
        "--rule",
        rule,
        "--format",
        "json",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "asys analyze failed: {}", stderr(&o));
    serde_json::from_slice::<Value>(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
        .as_array()
        .unwrap()
        .clone()
}

fn i(r: &Value, k: &str) -> i64 {
    r[k].as_i64().unwrap_or_else(|| panic!("{k} of {r}"))
}

fn profile(s: &Scratch, clean: bool) -> (Profiled, std::path::PathBuf) {
    let log = s.path("planted.log");
    let mut args = vec![log.to_str().unwrap()];
    if clean {
        args.push("clean");
    }
    let p = profile_workload(s, &["-t", "hggc"], "planted_problems", &args, &[]);
    assert!(
        p.out.status.success(),
        "asys profile failed: {}",
        stderr(&p.out)
    );
    (p, log)
}

#[test]
fn finds_each_planted_problem_at_its_time() {
    let s = Scratch::new("analyze-planted");
    let (p, log) = profile(&s, false);
    let b = brackets(&log);
    let truth = ground_truth_of(&p.truth, "hggc");
    let pid = i(&truth[0], "pid");

    // The device gap: it starts when the first kernel ended (before the
    // host's 5 ms sleep began) and ends when the second began (after it).
    // Other gaps of 4 ms may appear on a loaded machine (the host thread
    // descheduled between steps); exactly one covers the planted one.
    let gaps = analyze(&p.report, "ppu_gaps:gap=4");
    let (before, after) = b["gap"];
    let covering: Vec<&Value> = gaps
        .iter()
        .filter(|g| i(g, "Start (ns)") <= after && i(g, "End (ns)") >= before)
        .collect();
    assert_eq!(covering.len(), 1, "{gaps:?}");
    let g = covering[0];
    assert!(
        i(g, "Start (ns)") <= before && i(g, "End (ns)") >= after,
        "{g} vs {before}..{after}"
    );
    assert!(
        i(g, "Duration (ns)") >= 5_000_000 && i(g, "Duration (ns)") < 100_000_000,
        "{g}"
    );
    assert_eq!(i(g, "Duration (ns)"), i(g, "End (ns)") - i(g, "Start (ns)"));
    assert_eq!(i(g, "PID"), pid);
    assert!(!g["Hint"].as_str().unwrap().is_empty());
    // Gap threshold: 50 ms is longer than any gap the workload made.
    assert!(analyze(&p.report, "ppu_gaps:gap=50").is_empty());

    // Each synchronous call: the one the workload bracketed, around the
    // call's own times in the runtime's log.
    for (rule, api, key) in [
        ("hggc_memcpy_sync", "hggcMemcpy", "memcpy"),
        ("hggc_memset_sync", "hggcMemset", "memset"),
        (
            "hggc_api_sync:threshold=10",
            "hggcDeviceSynchronize",
            "sync",
        ),
    ] {
        // The stream synchronizes around the gap are short, but on a loaded
        // machine might pass 10 ms: only calls of `api` count here.
        let rows: Vec<Value> = analyze(&p.report, rule)
            .into_iter()
            .filter(|r| r.get("Name").is_none_or(|n| n == api))
            .collect();
        assert_eq!(rows.len(), 1, "{rule}: {rows:?}");
        let r = &rows[0];
        let (before, after) = b[key];
        let t: Vec<&Value> = truth.iter().filter(|t| t["api"] == api).collect();
        assert_eq!(t.len(), 1, "{api} in the truth");
        // The probes fire just outside the runtime's own clock reads.
        assert!(
            i(r, "Start (ns)") <= i(t[0], "start"),
            "{rule}: {r} vs {}",
            t[0]
        );
        assert!(
            i(r, "End (ns)") >= i(t[0], "end"),
            "{rule}: {r} vs {}",
            t[0]
        );
        assert!(
            before <= i(r, "Start (ns)") && i(r, "End (ns)") <= after,
            "{rule}: {r}"
        );
        assert_eq!((i(r, "PID"), i(r, "TID")), (pid, i(t[0], "tid")), "{rule}");
        if api != "hggcDeviceSynchronize" {
            // Sync copies and memsets run on the default stream (id 1).
            assert_eq!(i(r, "Stream"), 1, "{rule}: {r}");
            assert_eq!(i(r, "Bytes"), 1 << 20, "{rule}: {r}");
        } else {
            assert!(i(r, "Duration (ns)") >= 15_000_000, "{r}");
        }
    }
    // The copy from malloc memory is pageable; the device ran it inside the
    // call that the workload bracketed.
    let pageable = analyze(&p.report, "hggc_memcpy_pageable");
    assert_eq!(pageable.len(), 1, "{pageable:?}");
    let r = &pageable[0];
    let (before, after) = b["memcpy"];
    assert!(
        before <= i(r, "Start (ns)") && i(r, "End (ns)") <= after,
        "{r}"
    );
    assert_eq!(r["Src Kind"], "Pageable", "{r}");
    assert_eq!(r["Dst Kind"], "Device", "{r}");
    assert_eq!(r["API"], "hggcMemcpy", "{r}");
    assert_eq!((i(r, "PID"), i(r, "Bytes")), (pid, 1 << 20), "{r}");
    // The nsys name of the rule is accepted too.
    assert_eq!(analyze(&p.report, "cuda_memcpy_async").len(), 1);

    // The 5 ms stream synchronizes around the gap are short; a threshold
    // above the slow kernel's 20 ms finds nothing.
    assert!(analyze(&p.report, "hggc_api_sync:threshold=200").is_empty());

    // Utilisation: the chunk holding the 5 ms gap is mostly idle.
    let util = analyze(&p.report, "ppu_time_util:threshold=50:chunks=10");
    let (before, after) = b["gap"];
    assert!(
        util.iter()
            .any(|c| i(c, "Start (ns)") <= after && i(c, "End (ns)") >= before),
        "{util:?}"
    );
    // Each chunk listed is under the threshold; the value is printed to
    // 0.1 %, so a chunk at 49.96 % shows as 50.0.
    for c in &util {
        assert!(c["Utilization (%)"].as_f64().unwrap() <= 50.0, "{c}");
    }
}

#[test]
fn a_clean_run_has_no_findings() {
    let s = Scratch::new("analyze-clean");
    let (p, _) = profile(&s, true);
    for rule in [
        "ppu_gaps:gap=4",
        "hggc_memcpy_sync",
        "hggc_memcpy_pageable",
        "hggc_memset_sync",
        "hggc_api_sync:threshold=100",
    ] {
        let rows = analyze(&p.report, rule);
        assert!(rows.is_empty(), "{rule}: {rows:?}");
    }
    // Every rule by default, on the console: each says it found nothing.
    let o = run(&["analyze", p.report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("hggc_memcpy_sync"), "{}", stdout(&o));
    // Every rule in JSON: one document, each rule's rows under its name.
    let o = run(&["analyze", "-f", "json", p.report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let all: Value = serde_json::from_slice(&o.stdout).unwrap();
    for rule in [
        "ppu_gaps",
        "ppu_time_util",
        "hggc_memcpy_sync",
        "hggc_memcpy_pageable",
        "hggc_memset_sync",
        "hggc_api_sync",
    ] {
        assert!(all[rule].is_array(), "{rule} in {all}");
    }
    assert_eq!(all["hggc_memcpy_pageable"].as_array().unwrap().len(), 0);
}

#[test]
fn bad_rules_and_arguments_are_one_line_errors() {
    let s = Scratch::new("analyze-bad");
    let (p, _) = profile(&s, true);
    let report = p.report.to_str().unwrap();
    for rule in [
        "no_such_rule",
        "ppu_gaps:gap=abc",
        "ppu_gaps:threshold=5",
        "ppu_time_util:threshold=200",
        "ppu_time_util:chunks=0",
        "hggc_api_sync:rows=x",
    ] {
        let o = run(&["analyze", "--rule", rule, report]);
        assert!(!o.status.success(), "{rule} accepted");
        let err = stderr(&o);
        assert_eq!(err.trim().lines().count(), 1, "{rule}: {err}");
        assert!(!err.contains("panicked"), "{rule}: {err}");
    }
    // A damaged report: an error, not a panic.
    let bad = s.path("damaged.asysrep");
    let mut bytes = std::fs::read(&p.report).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&bad, bytes).unwrap();
    let o = run(&["analyze", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn output_base_writes_one_file_per_rule() {
    let s = Scratch::new("analyze-output");
    let (p, _) = profile(&s, false);
    let base = s.path("found");
    let o = run(&[
        "analyze",
        "-r",
        "hggc_memcpy_sync",
        "-r",
        "hggc_memset_sync",
        "-f",
        "csv",
        "-o",
        base.to_str().unwrap(),
        p.report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for rule in ["hggc_memcpy_sync", "hggc_memset_sync"] {
        let text = std::fs::read_to_string(s.path(&format!("found_{rule}.csv"))).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{rule}: {text}");
        assert!(
            lines[0].starts_with("Row#,Duration (ns),Start (ns)"),
            "{text}"
        );
    }
}

/// A rank told to arrive 50 ms late at its first collective is the late
/// rank of that collective, arriving after its own sleep.
#[test]
fn finds_the_late_rank_of_a_collective() {
    let s = Scratch::new("analyze-late-rank");
    let log = s.path("late.log");
    let log_s = log.to_str().unwrap().to_string();
    let p = profile_workload(
        &s,
        &["-t", "hggc,pccl"],
        "pccl_ranks",
        &["4", "1"],
        &[("PCCL_RANKS_LATE", "2:50"), ("PCCL_RANKS_LATE_LOG", &log_s)],
    );
    assert!(
        p.out.status.success(),
        "asys profile failed: {}",
        stderr(&p.out)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let f: Vec<i64> = text
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    let (late_pid, after) = (f[0], f[2]);
    let rows = analyze(&p.report, "pccl_late_rank:threshold=30");
    let first = rows
        .iter()
        .find(|r| r["Collective"] == "pcclAllReduce" && i(r, "Instance") == 1)
        .unwrap_or_else(|| panic!("no late rank at the first AllReduce: {rows:?}"));
    assert_eq!(i(first, "PID"), late_pid, "{first}");
    assert_eq!(i(first, "Ranks"), 4, "{first}");
    assert!(i(first, "Late Arrival (ns)") >= after, "{first} vs {after}");
    assert!(i(first, "Lateness (ns)") >= 30_000_000, "{first}");
}
