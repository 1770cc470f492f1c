//! CPU sampling (`-s`, `-b`, `--sample-period`): the real perf-event program
//! samples real processes; the ground truth is the CPU time each function of
//! the workload measured for itself (CLOCK_THREAD_CPUTIME_ID).
use std::{
    io::{BufRead, Write},
    path::PathBuf,
    process::Stdio,
};

use asys_tests::*;
use serde_json::Value;

const PERIOD_NS: f64 = 1_000_000.0;

/// `burner [MS]` (tests/workloads/phased_burner.c): main -> run_phase ->
/// burn_a for MS ms of CPU, then run_phase -> burn_b for half that, then
/// run_phase -> poll_clock (reading CLOCK_MONOTONIC, which runs in the vDSO)
/// for half that; prints what each took. Without MS it reads `burn MS`
/// lines from stdin and answers `burned NS` (for attach).
fn burner(extra: &[&str]) -> PathBuf {
    let mut flags = vec!["-O1"];
    flags.extend_from_slice(extra);
    build_workload("phased_burner.c", "burner", &flags)
}

/// `a=NS b=NS c=NS` from the burner's output: burn_a's, burn_b's, poll_clock's.
fn measured(stdout: &str) -> (f64, f64, f64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("a="))
        .unwrap_or_else(|| panic!("no measurement in {stdout:?}"));
    let mut v = line
        .split_whitespace()
        .map(|kv| kv.split_once('=').unwrap().1.parse::<f64>().unwrap());
    (v.next().unwrap(), v.next().unwrap(), v.next().unwrap())
}

/// cpu_sample_sum rows of `pid`: function -> (self, total).
fn by_function(rows: &[Value], pid: u32) -> std::collections::BTreeMap<String, (i64, i64)> {
    rows.iter()
        .filter(|r| r["Pid"].as_u64() == Some(pid as u64))
        .map(|r| {
            (
                r["Function"].as_str().unwrap().to_string(),
                (
                    r["Self Samples"].as_i64().unwrap(),
                    r["Total Samples"].as_i64().unwrap(),
                ),
            )
        })
        .collect()
}

/// `samples` is what `cpu_ns` of CPU time gives at one sample per period:
/// within 10% and 5 samples (the timer's phase at either end). Emulated,
/// half of them at least: the guest's timer interrupts arrive late when
/// the host is busy, and late ones are lost, never added (6.12 on a
/// loaded host gave 127 samples for 208 ms).
fn assert_samples(what: &str, samples: i64, cpu_ns: f64) {
    let expected = cpu_ns / PERIOD_NS;
    let below = 1.0 - sample_share(0.9);
    let s = samples as f64;
    assert!(
        s >= expected * (1.0 - below) - 5.0 && s <= expected * 1.10 + 5.0,
        "{what}: {samples} samples for {:.1} ms of CPU ({expected:.0} expected)",
        cpu_ns / 1e6
    );
}

fn profile(s: &Scratch, name: &str, args: &[&str], app: &[&str]) -> (PathBuf, u32, String) {
    let report = s.path(name);
    let mut all = vec!["profile", "-o", report.to_str().unwrap(), "-f", "true"];
    all.extend_from_slice(args);
    all.extend_from_slice(app);
    let o = run(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let pid = metadata(&report)["root_pids"][0].as_u64().unwrap() as u32;
    (report, pid, stdout(&o))
}

#[test]
fn samples_follow_the_cpu_time_of_each_function_and_unwind_without_frame_pointers() {
    require_root();
    let s = Scratch::new("sample-dwarf");
    // -O1 without frame pointers: only the call frame information unwinds it.
    let bin = burner(&["-fomit-frame-pointer"]);
    let (report, pid, out) = profile(&s, "r", &[], &[bin.to_str().unwrap(), "400"]);
    let (a, b, c) = measured(&out);
    let rows = stats_json(&report, "cpu_sample_sum");
    let f = by_function(&rows, pid);
    let (self_a, _) = f["burn_a"];
    let (self_b, _) = f["burn_b"];
    assert_samples("burn_a", self_a, a);
    assert_samples("burn_b", self_b, b);
    // Every sample in either burns has run_phase and main above it.
    for caller in ["run_phase", "main"] {
        let (_, total) = f[caller];
        assert!(
            total >= self_a + self_b,
            "{caller} is on {total} stacks, fewer than the {} burn samples: {f:?}",
            self_a + self_b
        );
    }
    // poll_clock spends most of its time in the vDSO (no file behind it):
    // those samples are named there and unwound back through poll_clock.
    let in_vdso: i64 = rows
        .iter()
        .filter(|r| r["Pid"].as_u64() == Some(pid as u64) && r["Module"] == "[vdso]")
        .map(|r| r["Self Samples"].as_i64().unwrap())
        .sum();
    // At least 30 % of a sample a millisecond natively; under emulation,
    // what `sample_share` allows of the 90 % the other functions get.
    assert!(
        in_vdso as f64 >= 0.3 * sample_share(0.9) / 0.9 * c / PERIOD_NS,
        "{in_vdso} samples in the vDSO for {:.0} ms of clock polling: {rows:?}",
        c / 1e6
    );
    assert_samples("poll_clock (total)", f["poll_clock"].1, c);
    let meta = metadata(&report);
    assert_eq!(meta["events"]["cpu_samples"], meta["tables"]["cpu_samples"]);
    assert_eq!(meta["sample"], "process-tree");
    assert_eq!(meta["sample_backtrace"], "dwarf");
    assert_eq!(meta["sample_period_ns"], 1_000_000);
}

#[test]
fn frame_pointer_unwinding_and_no_stacks() {
    require_root();
    let s = Scratch::new("sample-fp");
    let bin = burner(&["-fno-omit-frame-pointer"]);
    let (report, pid, out) = profile(&s, "fp", &["-b", "fp"], &[bin.to_str().unwrap(), "300"]);
    let (a, b, _) = measured(&out);
    let f = by_function(&stats_json(&report, "cpu_sample_sum"), pid);
    assert_samples("burn_a (fp)", f["burn_a"].0, a);
    assert_samples("burn_b (fp)", f["burn_b"].0, b);
    assert!(
        f["main"].1 >= f["burn_a"].0 + f["burn_b"].0,
        "main under every burn sample: {f:?}"
    );

    // -b none: the sampled function only, no callers. (A sample in code
    // inlined into another function, in a library with DWARF such as the
    // loader, names that function too, at the same address: the burner's
    // own functions, built without -g, have no inlined rows.)
    let (report, pid, out) = profile(&s, "none", &["-b", "none"], &[bin.to_str().unwrap(), "300"]);
    let (a, _, _) = measured(&out);
    let f = by_function(&stats_json(&report, "cpu_sample_sum"), pid);
    assert_samples("burn_a (no stacks)", f["burn_a"].0, a);
    for function in ["burn_a", "burn_b", "poll_clock", "run_phase", "main"] {
        if let Some((own, total)) = f.get(function) {
            assert_eq!(
                own, total,
                "{function} counted beyond its own samples: {f:?}"
            );
        }
    }
}

#[test]
fn the_scope_decides_whose_samples_are_kept_and_none_keeps_none() {
    require_root();
    let s = Scratch::new("sample-scope");
    let bin = burner(&[]);
    // An unrelated process burning all along, not started by asys. It stays
    // in burn_a for a minute of CPU time and is killed at the end: a slow
    // machine took over 3 s for the runs before the system-wide one, and the
    // process had moved on to burn_b.
    let mut other = ChildGuard(Some(
        std::process::Command::new(&bin)
            .arg("60000")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let other_pid = other.child().id();
    let app = [bin.to_str().unwrap(), "300"];

    let (report, pid, _) = profile(&s, "tree", &[], &app);
    let rows = stats_json(&report, "cpu_sample_sum");
    assert!(by_function(&rows, pid).contains_key("burn_a"));
    assert!(
        by_function(&rows, other_pid).is_empty(),
        "process-tree sampled a process outside the tree"
    );

    // System-wide with an application: its calls as usual, and samples of
    // every process, each under its own pid and named from its own binary.
    let (report, pid, out) = profile(&s, "wide", &["-s", "system-wide"], &app);
    let (a, _, _) = measured(&out);
    let rows = stats_json(&report, "cpu_sample_sum");
    assert_samples(
        "burn_a (system-wide)",
        by_function(&rows, pid)["burn_a"].0,
        a,
    );
    let theirs = by_function(&rows, other_pid);
    let own: i64 = theirs.values().map(|c| c.0).sum();
    let in_burn_a = theirs.get("burn_a").map_or(0, |c| c.0);
    assert!(
        own > 50 && in_burn_a * 10 >= own * 9,
        "the other process: {own} samples, {in_burn_a} in burn_a: {theirs:?}"
    );

    let (report, _, _) = profile(&s, "off", &["-s", "none"], &app);
    assert!(stats_json(&report, "cpu_sample_sum").is_empty());
    assert!(metadata(&report)["tables"].get("cpu_samples").is_none());
    assert_eq!(metadata(&report)["sample"], "none");
    let _ = other.child().kill();
}

#[test]
fn attach_samples_a_running_process() {
    require_root();
    let s = Scratch::new("sample-attach");
    let bin = burner(&[]);
    let mut target = ChildGuard(Some(
        std::process::Command::new(&bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let pid = target.child().id();
    let mut to = target.child().stdin.take().unwrap();
    let mut from = std::io::BufReader::new(target.child().stdout.take().unwrap());
    let mut line = String::new();
    from.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    let report = s.path("att");
    let (g, _err, _) = start_tracing(asys().args([
        "attach",
        "-s",
        "process-tree",
        "--duration",
        "2",
        "-o",
        report.to_str().unwrap(),
        &pid.to_string(),
    ]));
    writeln!(to, "burn 400").unwrap();
    line.clear();
    from.read_line(&mut line).unwrap();
    let burned: f64 = line
        .trim()
        .strip_prefix("burned ")
        .unwrap()
        .parse()
        .unwrap();
    let status = g.wait();
    assert!(status.success(), "asys attach exited with {status}");
    writeln!(to, "quit").unwrap();
    let f = by_function(
        &stats_json(&report.with_extension("asysrep"), "cpu_sample_sum"),
        pid,
    );
    assert_samples("burn_a (attached)", f["burn_a"].0, burned);
    assert!(f["main"].1 >= f["burn_a"].0, "{f:?}");
}
