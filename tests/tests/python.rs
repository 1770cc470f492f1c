//! `--python-sampling` (docs/python-stacks.md): the options; a run with them
//! keeps the interpreter's CPU samples as without them.
use asys_tests::*;
use serde_json::Value;

/// A CPU-bound script that measures its own CPU time
/// (`time.thread_time_ns`) and prints it.
const SPIN: &str = r#"
import time
def spin(ns):
    end = time.thread_time_ns() + ns
    x = 0
    while time.thread_time_ns() < end:
        x += 1
    return x
start = time.thread_time_ns()
spin(300_000_000)
print("cpu_ns", time.thread_time_ns() - start, flush=True)
"#;

#[test]
fn python_sampling_options_out_of_range_are_one_line_errors() {
    for (opt, v) in [
        ("--python-sampling", "maybe"),
        ("--python-sampling-frequency", "0"),
        ("--python-sampling-frequency", "2001"),
        ("--python-sampling-frequency", "fast"),
    ] {
        let o = run(&["profile", opt, v, "true"]);
        assert!(!o.status.success(), "{opt} {v} was taken");
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains(opt), "{opt} {v}: {err}");
    }
}

#[test]
fn with_python_sampling_a_python_run_keeps_its_native_samples_without_warnings() {
    require_root();
    let s = Scratch::new("python-sampling-warned");
    let script = s.path("spin.py");
    std::fs::write(&script, SPIN).unwrap();
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-o",
        report.to_str().unwrap(),
        "-s",
        "process-tree",
        "-b",
        "dwarf",
        "--python-sampling",
        "true",
        "--python-sampling-frequency",
        "500",
        "/usr/bin/python3.11",
        script.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("--python-sampling"))
        .collect();
    assert!(warnings.is_empty(), "{err}");
    let cpu_ns: f64 = stdout(&o)
        .lines()
        .find_map(|l| l.strip_prefix("cpu_ns "))
        .expect("the script's cpu_ns line")
        .trim()
        .parse()
        .unwrap();
    let report = report.with_extension("asysrep");
    let pid = metadata(&report)["root_pids"][0].as_u64().unwrap();
    let rows: Vec<Value> = stats_json(&report, "cpu_sample_sum")
        .into_iter()
        .filter(|r| r["Pid"].as_u64() == Some(pid))
        .collect();
    let total = |name: &str| {
        rows.iter()
            .filter(|r| r["Function"].as_str() == Some(name))
            .map(|r| r["Total Samples"].as_i64().unwrap())
            .sum::<i64>()
    };
    let samples: i64 = rows
        .iter()
        .map(|r| r["Self Samples"].as_i64().unwrap())
        .sum();
    // The default period is 1 ms of CPU: the spin alone gives cpu_ns / 1e6
    // samples, start-up and exit a few more.
    let spun = cpu_ns / 1e6;
    assert!(
        samples as f64 >= spun * 0.9 && samples as f64 <= spun * 1.1 + 200.0,
        "{samples} samples for {:.0} ms of spinning",
        spun
    );
    // The interpreter's C frames, as without the option: the evaluator is
    // on the spin's stacks (cpu_sample_sum's native view).
    let eval = total("_PyEval_EvalFrameDefault");
    assert!(
        eval as f64 >= spun * 0.8,
        "_PyEval_EvalFrameDefault on {eval} stacks of {spun:.0} ms of spinning"
    );
}
