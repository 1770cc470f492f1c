//! JIT perf maps (`/tmp/perf-PID.map`): frames in JIT-compiled code are
//! named from the map the JIT wrote. The JIT is a real one, Node's V8 with
//! `--perf-basic-prof`; the ground truth is the CPU time each hot function
//! measured for itself (`process.cpuUsage`).
use std::{collections::BTreeMap, path::Path};

use asys_tests::*;
use serde_json::Value;

const PERIOD_NS: f64 = 1_000_000.0;

fn node() -> &'static str {
    let ok = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "these tests need Node.js (`node`) on PATH: apt-get install nodejs"
    );
    "node"
}

/// The workload's own measurement: (hotA ns, hotB ns).
fn measured(stdout: &str) -> (f64, f64) {
    let get = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} in {stdout:?}"))
    };
    (get("hotA "), get("hotB "))
}

/// Samples of `pid` per (function, module): (self, total).
fn by_frame(rows: &[Value], pid: u32) -> BTreeMap<(String, String), (i64, i64)> {
    let mut out: BTreeMap<(String, String), (i64, i64)> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r["Pid"].as_u64() == Some(pid as u64))
    {
        let key = (
            r["Function"].as_str().unwrap().to_string(),
            r["Module"].as_str().unwrap().to_string(),
        );
        let e = out.entry(key).or_default();
        e.0 += r["Self Samples"].as_i64().unwrap();
        e.1 += r["Total Samples"].as_i64().unwrap();
    }
    out
}

/// Self samples of the JIT frames of `function` (V8 names each tier's code
/// `JS:~f` interpreted, `JS:^f` baseline, `JS:*f` optimised, with the file
/// and position after; V8 before 11, as in Debian's Node 18, says
/// `LazyCompile:` or `Function:` for `JS:`), all from a module named `module`*.
fn jit_self(
    f: &BTreeMap<(String, String), (i64, i64)>,
    function: &str,
    script: &Path,
    module: &str,
) -> i64 {
    jit_samples(f, function, script, module).0
}

/// Self and total samples of the JIT frames of `function` (see [`jit_self`]).
fn jit_samples(
    f: &BTreeMap<(String, String), (i64, i64)>,
    function: &str,
    script: &Path,
    module: &str,
) -> (i64, i64) {
    let suffix = format!("{function} {}:", script.display());
    f.iter()
        .filter(|((name, m), _)| {
            let code = ["JS:", "LazyCompile:", "Function:"]
                .iter()
                .find_map(|p| name.strip_prefix(p));
            // After the prefix, one tier mark (~, ^, * or none), then the name.
            code.is_some_and(|c| {
                let c = c.strip_prefix(['~', '^', '*', '+']).unwrap_or(c);
                c.starts_with(&suffix)
            }) && m.starts_with(module)
        })
        .fold((0, 0), |(o, t), (_, (own, total))| (o + own, t + total))
}

fn assert_samples(what: &str, samples: i64, cpu_ns: f64) {
    let expected = cpu_ns / PERIOD_NS;
    assert!(
        (samples as f64 - expected).abs() <= expected * 0.10 + 5.0,
        "{what}: {samples} samples for {:.1} ms of CPU ({expected:.0} expected)",
        cpu_ns / 1e6
    );
}

/// tests/workloads/hot.js: `hotA` burns MS ms of CPU in a loop V8 compiles
/// (TurboFan), `hotB` half that; `phase` (left to the interpreter: it runs
/// once) measures each and the script prints `hotA NS` and `hotB NS`. The
/// inner loops do not leave the compiled code; the CPU clock is read every 2
/// million rounds.
///
/// Checks the report of one run of it by `pid` against its output; the
/// JIT frames' module is the file they were named from (`module`*).
fn check(report: &Path, pid: u32, out: &str, script: &Path, module: &str) {
    let (a, b) = measured(out);
    let rows = stats_json(report, "cpu_sample_sum");
    let f = by_frame(&rows, pid);
    let (self_a, self_b) = (
        jit_self(&f, "hotA", script, module),
        jit_self(&f, "hotB", script, module),
    );
    // The script times each whole call, callees included (V8 builtins, and
    // the kernel: a sample taken in the kernel has its kernel frames
    // innermost), so the samples to compare are those with the function
    // anywhere on the stack.
    let total = |name: &str| jit_samples(&f, name, script, module).1;
    assert_samples("hotA (JIT frames)", total("hotA"), a);
    assert_samples("hotB (JIT frames)", total("hotB"), b);
    // Unwound through the JIT code by its frame pointer: beneath every hot
    // sample is the interpreter running `phase` (V8's entry trampoline, in
    // the node binary). Without the step through the JIT frame the stacks
    // would end at the JIT frame.
    let (_, under) = f
        .get(&(
            "Builtins_InterpreterEntryTrampoline".to_string(),
            "node".to_string(),
        ))
        .copied()
        .unwrap_or_default();
    assert!(
        under >= self_a + self_b,
        "the interpreter frame is under {under} samples, fewer than the {} in hotA and hotB: {f:?}",
        self_a + self_b
    );
    let meta = metadata(report);
    assert!(
        meta["tables"]["jit_symbols"].as_u64().unwrap_or(0) > 0,
        "no jit_symbols rows: {meta}"
    );
}

#[test]
fn frames_in_jit_code_are_named_from_the_perf_map() {
    require_root();
    let node = node();
    let s = Scratch::new("jit-map");
    let script = workload_source("hot.js");
    // V8 writes its log (which --perf-basic-prof turns on) into the scratch
    // folder, not the working directory.
    let log_flag = format!("--logfile={}", s.path("v8.log").display());
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-o",
        report.to_str().unwrap(),
        "-s",
        "process-tree",
        "-b",
        "dwarf",
        node,
        "--perf-basic-prof",
        &log_flag,
        "--no-logfile-per-isolate",
        script.to_str().unwrap(),
        "400",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let pid = metadata(&report)["root_pids"][0].as_u64().unwrap() as u32;
    let map = std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"));
    let _ = std::fs::remove_file(&map);
    check(&report, pid, &stdout(&o), &script, "perf-");
}

#[test]
fn a_process_that_exits_early_has_its_map_read_when_it_exits() {
    require_root();
    let node = node();
    let s = Scratch::new("jit-map-exit");
    let script = workload_source("hot.js");
    // The shell outlives node and removes node's map a second after node
    // exited, well before the recording ends: only a map read at the exit
    // names the frames.
    let shell = format!(
        "{node} --perf-basic-prof --logfile={} --no-logfile-per-isolate {} 300 & p=$!; echo node=$p; wait $p; sleep 1; rm -f /tmp/perf-$p.map; sleep 0.3",
        s.path("v8.log").display(),
        script.display()
    );
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-o",
        report.to_str().unwrap(),
        "-s",
        "process-tree",
        "-b",
        "dwarf",
        "sh",
        "-c",
        &shell,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let pid: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("node=")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no node pid in {out:?}"));
    assert!(
        !Path::new(&format!("/tmp/perf-{pid}.map")).exists(),
        "the shell did not remove node's map"
    );
    check(
        &report.with_extension("asysrep"),
        pid,
        &out,
        &script,
        "perf-",
    );
}

#[test]
fn frames_in_jit_code_are_named_from_the_jitdump() {
    require_root();
    let node = node();
    let s = Scratch::new("jit-dump");
    // `--perf-prof`: V8 writes `jit-PID.dump` (code loads) into its working
    // folder, and no perf map. The script is run from there, by its name.
    let script = s.path("hot.js");
    std::fs::copy(workload_source("hot.js"), &script).unwrap();
    let shell = format!(
        "cd {} && exec {node} --perf-prof --logfile=v8.log --no-logfile-per-isolate hot.js 300",
        s.0.display()
    );
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-o",
        report.to_str().unwrap(),
        "-s",
        "process-tree",
        "-b",
        "dwarf",
        "sh",
        "-c",
        &shell,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let pid = metadata(&report)["root_pids"][0].as_u64().unwrap() as u32;
    assert!(
        s.path(&format!("jit-{pid}.dump")).exists(),
        "no jitdump: {:?}",
        s.files()
    );
    assert!(!Path::new(&format!("/tmp/perf-{pid}.map")).exists());
    check(
        &report,
        pid,
        &stdout(&o),
        &script,
        &format!("jit-{pid}.dump"),
    );
}
