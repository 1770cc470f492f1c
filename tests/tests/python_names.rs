//! `--python-sampling` names each frame with its own code object's names
//! (docs/python-stacks.md): module code compiled at run time for two files,
//! whose code objects share their qualified name and first line and take
//! each other's freed addresses, keep their files apart; and names in any
//! UTF-8 (a file name with a character outside the BMP, Cyrillic and
//! Latin-1 function names) are read exactly, on every CPython the suite
//! runs.
use asys_tests::*;
use serde_json::Value;

/// Profiles `script` under `python` with Python stacks at 2 kHz; returns
/// the report, the root pid and the script's truth line.
fn profile_python(
    s: &Scratch,
    python: &std::path::Path,
    script: &std::path::Path,
) -> (std::path::PathBuf, u64, Value) {
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-o",
        report.to_str().unwrap(),
        "-s",
        "process-tree",
        "-b",
        "dwarf",
        "--sample-period",
        "500000",
        "--python-sampling",
        "true",
        "--python-sampling-frequency",
        "2000",
        python.to_str().unwrap(),
        script.to_str().unwrap(),
    ]);
    let what = python.display();
    assert!(o.status.success(), "{what}: {}", stderr(&o));
    let truth: Value = serde_json::from_str(
        stdout(&o)
            .lines()
            .find_map(|l| l.strip_prefix("truth "))
            .expect("the script's truth line"),
    )
    .unwrap();
    let report = report.with_extension("asysrep");
    let pid = metadata(&report)["root_pids"][0].as_u64().unwrap();
    (report, pid, truth)
}

/// `python_sample_sum`'s rows of process `pid`.
fn python_rows(report: &std::path::Path, pid: u64) -> Vec<Value> {
    stats_json(report, "python_sample_sum")
        .into_iter()
        .filter(|r| r["Pid"].as_u64() == Some(pid))
        .collect()
}

fn self_samples(rows: &[Value], function: &str, file: &str) -> i64 {
    rows.iter()
        .filter(|r| r["Function"] == function && r["File"] == file)
        .map(|r| r["Self Samples"].as_i64().unwrap())
        .sum()
}

#[test]
fn module_code_compiled_at_run_time_for_two_files_keeps_each_files_share() {
    require_root();
    let script = workload_source("runtime_modules.py");
    for python in python_interpreters() {
        let what = python.display();
        let s = Scratch::new("python-runtime-modules");
        let (report, pid, truth) = profile_python(&s, &python, &script);
        let rows = python_rows(&report, pid);
        let even = self_samples(&rows, "<module>", "<even>");
        let odd = self_samples(&rows, "<module>", "<odd>");
        let unknown: i64 = rows
            .iter()
            .filter(|r| r["Function"] == "[python unknown]")
            .map(|r| r["Self Samples"].as_i64().unwrap())
            .sum();
        let want = truth["<even>"].as_f64().unwrap() / truth["<odd>"].as_f64().unwrap();
        eprintln!(
            "{what}: <even> {even}, <odd> {odd}, unknown {unknown} self samples; \
             the script measured {want:.2}:1"
        );
        let top: Vec<&Value> = rows.iter().take(5).collect();
        assert!(odd > 0, "{what}: no <odd> samples; the top rows: {top:?}");
        let got = even as f64 / odd as f64;
        assert!(
            (got - want).abs() <= 0.5,
            "{what}: <even>:<odd> is {got:.2}:1 in the samples, {want:.2}:1 in CPU time"
        );
        // A frame whose code object was freed before it was read may stay
        // unnamed; never most of them.
        assert!(
            (unknown as f64) < 0.05 * (even + odd) as f64,
            "{what}: {unknown} unnamed of {} samples",
            even + odd
        );
    }
}

#[test]
fn a_script_and_functions_named_outside_ascii_are_named_exactly() {
    require_root();
    let source = workload_source("unicode💩.py");
    let script_s = source.to_str().unwrap();
    let lines = std::fs::read_to_string(&source).unwrap();
    for python in python_interpreters() {
        let what = python.display();
        let s = Scratch::new("python-unicode-names");
        let (report, pid, truth) = profile_python(&s, &python, &source);
        let rows = python_rows(&report, pid);
        let total: i64 = rows
            .iter()
            .map(|r| r["Self Samples"].as_i64().unwrap())
            .sum();
        let measured_total: f64 = truth
            .as_object()
            .unwrap()
            .values()
            .map(|v| v["ns"].as_f64().unwrap())
            .sum();
        let mut named = 0;
        for (function, t) in truth.as_object().unwrap() {
            let row = rows
                .iter()
                .find(|r| r["Function"] == function.as_str())
                .unwrap_or_else(|| {
                    let top: Vec<&Value> = rows.iter().take(5).collect();
                    panic!("{what}: no row for {function}; the top rows: {top:?}")
                });
            assert_eq!(row["File"], script_s, "{what}: {function}");
            // Its loop: the lines after its def, up to its return.
            let first = t["first_line"].as_u64().unwrap();
            let line = row["Line"].as_u64().unwrap();
            let body = lines.lines().nth(line as usize - 1).unwrap_or("");
            assert!(
                line > first && line <= first + 5 && body.contains("time.thread_time()"),
                "{what}: {function} at line {line} ({body:?}), defined on {first}"
            );
            let own = row["Self Samples"].as_i64().unwrap();
            named += own;
            let share = own as f64 / total as f64;
            let want = t["ns"].as_f64().unwrap() / measured_total;
            eprintln!("{what}: {function}: {share:.3} of the samples, {want:.3} measured");
            assert!(
                (share - want).abs() <= 0.1,
                "{what}: {function} has {share:.3} of the samples, {want:.3} of the CPU time"
            );
        }
        let unknown = self_samples(&rows, "[python unknown]", "");
        assert!(
            (unknown as f64) < 0.02 * total as f64,
            "{what}: {unknown} of {total} samples unnamed ({named} named)"
        );
    }
}
