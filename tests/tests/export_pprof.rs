//! `asys export --type pprof`: the profiles read by Go's own `go tool
//! pprof` (Debian's golang-go) and by npm's `pprof-format` decoder
//! (target/pprof-js, installed by `cargo xtask test`), checked against
//! asys's own summaries of the same report (`cpu_sample_sum`,
//! `python_sample_sum`, `cpu_wait_sum`, `hggc_api_sum`) and against what
//! the workloads say they did.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use asys_tests::*;
use serde_json::Value;

/// `go tool pprof ARGS FILE`, which must succeed; its standard output.
fn go_pprof(args: &[&str], profile: &Path) -> String {
    // -symbolize=none: the profile is named already; pprof must not go
    // looking for binaries or a symbol server.
    let o = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        // Every node: pprof drops those under 0.5 % of the total unless told.
        .args(["-nodefraction=0", "-edgefraction=0"])
        .args(args)
        .arg(profile)
        .output()
        .expect("go (Debian's golang-go: cargo xtask test installs it)");
    assert!(
        o.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The rows of `go tool pprof -top`: (flat, flat %, name), the name
/// without pprof's ` (inline)` mark.
fn top_rows(text: &str) -> Vec<(f64, f64, String)> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.trim_start().starts_with("flat ") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        let mut f = line.split_whitespace();
        let (Some(flat), Some(pct)) = (f.next(), f.next()) else {
            continue;
        };
        let (_sum, _cum, _cum_pct) = (f.next(), f.next(), f.next());
        let name = f.collect::<Vec<_>>().join(" ");
        let name = address_name(name.strip_suffix(" (inline)").unwrap_or(&name));
        rows.push((
            number(flat),
            pct.trim_end_matches('%').parse().unwrap(),
            name,
        ));
    }
    rows
}

/// A frame pprof shows as a bare address (hex digits, zero-padded) as
/// asys names an address it could not name (`0x` and the digits);
/// anything else as it is.
fn address_name(name: &str) -> String {
    let hex = name.strip_prefix("0x").unwrap_or(name);
    if hex.len() >= 8 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        let digits = hex.trim_start_matches('0').to_ascii_lowercase();
        return format!("0x{}", if digits.is_empty() { "0" } else { &digits });
    }
    name.to_string()
}

/// A value of `-top` as a number: a count, or a time in ms (`12.5ms`,
/// `1.2s`, `300us`).
fn number(v: &str) -> f64 {
    for (unit, scale) in [("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)] {
        if let Some(n) = v.strip_suffix(unit) {
            return n.parse::<f64>().unwrap() * scale;
        }
    }
    v.parse().unwrap()
}

/// What the samples `go tool pprof` kept (after its filters) add up to:
/// the `N` of `Showing nodes accounting for N, P% of TOTAL total`, all of
/// them as no node is dropped ([`go_pprof`]); 0 when none was kept.
fn total(text: &str) -> f64 {
    let Some(line) = text
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for "))
    else {
        return 0.0;
    };
    let n = line["Showing nodes accounting for ".len()..]
        .split(',')
        .next()
        .unwrap();
    number(n)
}

/// Decodes a profile with npm's pprof-format and prints, per leaf
/// function name, the sum of the first value (samples, calls or waits),
/// and the sample types.
const PPROF_FORMAT_LEAVES: &str = r#"
const fs = require('fs'), zlib = require('zlib');
const { Profile } = require(process.argv[1]);
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const str = i => p.stringTable.strings[Number(i)];
const functions = new Map(p.function.map(f => [Number(f.id), str(f.name)]));
const locations = new Map(p.location.map(l => [Number(l.id), l]));
const leaves = {};
for (const s of p.sample) {
  const leaf = locations.get(Number(s.locationId[0]));
  const name = functions.get(Number(leaf.line[0].functionId));
  leaves[name] = (leaves[name] || 0) + Number(s.value[0]);
}
console.log(JSON.stringify({
  types: p.sampleType.map(t => str(t.type) + '/' + str(t.unit)),
  leaves,
}));
"#;

fn pprof_format_leaves(profile: &Path) -> Value {
    let module = target().join("pprof-js/node_modules/pprof-format");
    assert!(
        module.join("package.json").is_file(),
        "{} is missing: cargo xtask test installs it",
        module.display()
    );
    let o = Command::new("node")
        .args(["-e", PPROF_FORMAT_LEAVES])
        .arg(&module)
        .arg(profile)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `asys export --type pprof ARGS REPORT -o BASE`; the profile written.
fn export_pprof(report: &Path, base: &Path, args: &[&str]) -> PathBuf {
    let mut all = vec!["export", "--type", "pprof", "-o", base.to_str().unwrap()];
    all.extend_from_slice(args);
    all.push(report.to_str().unwrap());
    let o = run(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = PathBuf::from(format!("{}.pb.gz", base.display()));
    assert!(file.is_file(), "{}", stderr(&o));
    file
}

/// The line of `source` holding `marker`, counted from 1.
fn line_of(source: &Path, marker: &str) -> usize {
    std::fs::read_to_string(source)
        .unwrap()
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{marker} not in {}", source.display()))
        + 1
}

#[test]
fn a_sampled_c_program_reads_in_go_pprof_as_in_cpu_sample_sum() {
    require_root();
    let s = Scratch::new("pprof-c");
    let source = workload_source("named_burners.c");
    let bin = c_workload("named_burners.c", &["-g", "-pthread"]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-s",
        "process-tree",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
        "600",
        "200",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let truth: BTreeMap<String, Value> = stdout(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("truth "))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["thread"].as_str().unwrap().to_string(), v)
        })
        .collect();
    assert_eq!(truth.len(), 2, "{}", stdout(&o));
    let report = report.with_extension("asysrep");
    let profile = export_pprof(&report, &s.path("cpu"), &[]);

    // -top: every function with self samples, its count and share as
    // cpu_sample_sum gives them.
    let top = go_pprof(
        &["-top", "-nodecount=100000", "-sample_index=samples"],
        &profile,
    );
    let rows = top_rows(&top);
    let mut expected: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let sum_rows = stats_json(&report, "cpu_sample_sum");
    let all: f64 = sum_rows
        .iter()
        .map(|r| r["Self Samples"].as_f64().unwrap())
        .sum();
    for r in &sum_rows {
        let e = expected
            .entry(unnamed_as_one(r["Function"].as_str().unwrap()))
            .or_default();
        e.0 += r["Self Samples"].as_f64().unwrap();
    }
    for e in expected.values_mut() {
        e.1 = 100.0 * e.0 / all;
    }
    expected.retain(|_, e| e.0 > 0.0);
    // (samples, share, rows merged into it)
    let mut got: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for (n, p, name) in rows.iter().filter(|r| r.0 > 0.0) {
        let e = got.entry(unnamed_as_one(name)).or_default();
        e.0 += n;
        e.1 += p;
        e.2 += 1.0;
    }
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{top}"
    );
    for (name, (n, pct, merged)) in &got {
        let (want_n, want_pct) = expected[name];
        assert_eq!(*n, want_n, "{name}: {top}");
        // pprof rounds to 0.01 %, each row it shows.
        assert!(
            (pct - want_pct).abs() <= 0.006 * merged,
            "{name}: {pct} vs {want_pct}"
        );
    }
    // The hot thread's inlined step and the cold loop hold the CPU time
    // the threads measured, a sample a period (1 ms by default).
    let period_s = metadata(&report)["sample_period_ns"].as_f64().unwrap() / 1e9;
    for (function, thread) in [("mix_step", "hot-worker"), ("burn_cold", "cold-worker")] {
        let measured = truth[thread]["cpu_ns"].as_f64().unwrap() / 1e9;
        let sampled = got[function].0 * period_s;
        assert!(
            (sampled - measured).abs() <= 0.1 * measured,
            "{function}: {sampled} s sampled, {measured} s of CPU measured"
        );
    }

    // -lines: the inlined step and the cold loop at their source lines.
    let lines = go_pprof(
        &[
            "-top",
            "-lines",
            "-nodecount=100000",
            "-sample_index=samples",
        ],
        &profile,
    );
    let file = source.to_str().unwrap();
    for (function, marker) in [
        ("mix_step", "MIX_STEP_LINE"),
        ("burn_cold", "BURN_COLD_LINE"),
    ] {
        let at = format!(
            "{function} {file}:{}",
            line_of(&source, &format!("/* {marker} */"))
        );
        let best = top_rows(&lines)
            .into_iter()
            .filter(|r| r.2.starts_with(&format!("{function} ")))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap_or_else(|| panic!("no {function} in {lines}"));
        assert_eq!(best.2, at, "{lines}");
    }

    // -tagfocus on a thread name: that thread's samples only, the same as
    // on its tid.
    for (thread, mine, other) in [
        ("hot-worker", "mix_step", "burn_cold"),
        ("cold-worker", "burn_cold", "mix_step"),
    ] {
        let by_name = go_pprof(
            &[
                "-top",
                "-sample_index=samples",
                &format!("-tagfocus=thread_name={thread}"),
            ],
            &profile,
        );
        let tid = truth[thread]["tid"].as_u64().unwrap();
        let by_tid = go_pprof(
            &[
                "-top",
                "-sample_index=samples",
                &format!("-tagfocus=tid={tid}"),
            ],
            &profile,
        );
        let rows = top_rows(&by_name);
        let flat = |f: &str| rows.iter().find(|r| r.2 == f).map_or(0.0, |r| r.0);
        assert_eq!(flat(mine), got[mine].0, "{thread}: {by_name}");
        assert_eq!(flat(other), 0.0, "{thread}: {by_name}");
        let sum: f64 = rows.iter().map(|r| r.0).sum();
        let tid_sum: f64 = top_rows(&by_tid).iter().map(|r| r.0).sum();
        assert_eq!(sum, tid_sum, "{thread} by name and by tid {tid}");
    }

    // A second reader: pprof-format's decoding gives every leaf the
    // counts go tool pprof gives.
    let decoded = pprof_format_leaves(&profile);
    assert_eq!(
        decoded["types"],
        serde_json::json!(["samples/count", "cpu/nanoseconds"])
    );
    let leaves: BTreeMap<String, f64> = decoded["leaves"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
        .collect();
    let go_leaves: BTreeMap<String, f64> = got.iter().map(|(k, v)| (k.clone(), v.0)).collect();
    assert_eq!(leaves, go_leaves);
}

#[test]
fn a_python_workload_reads_in_go_pprof_as_in_python_sample_sum() {
    require_root();
    let python = &python_interpreters()[0];
    let s = Scratch::new("pprof-python");
    let script = workload_source("hot.py");
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
        python.to_str().unwrap(),
        script.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let profile = export_pprof(&report, &s.path("py"), &[]);

    // Python frames only (`[python]`, as cpu_sample_sum's Module), of the
    // samples that have one, shares of those: python_sample_sum's rows.
    let top = go_pprof(
        &[
            "-top",
            "-nodecount=100000",
            "-sample_index=samples",
            "-relative_percentages",
            r"-focus=^\[python\]$",
            r"-show=^\[python\]$",
        ],
        &profile,
    );
    let mut expected: BTreeMap<String, f64> = BTreeMap::new();
    let rows = stats_json(&report, "python_sample_sum");
    let all: f64 = rows
        .iter()
        .map(|r| r["Self Samples"].as_f64().unwrap())
        .sum();
    for r in &rows {
        *expected
            .entry(r["Function"].as_str().unwrap().to_string())
            .or_default() += r["Self Samples"].as_f64().unwrap();
    }
    expected.retain(|_, n| *n > 0.0);
    let got: BTreeMap<String, (f64, f64)> = top_rows(&top)
        .into_iter()
        .filter(|r| r.0 > 0.0)
        .map(|(n, p, name)| (name, (n, p)))
        .collect();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{top}"
    );
    for (name, (n, pct)) in &got {
        assert_eq!(*n, expected[name], "{name}: {top}");
        let want = 100.0 * expected[name] / all;
        assert!((pct - want).abs() <= 0.006, "{name}: {pct} vs {want}");
    }
    // The hot functions lead, as the script spent its time.
    for f in ["leaf_a", "leaf_b", "middle"] {
        assert!(got[f].1 > 15.0, "{f}: {top}");
    }

    // The whole profile, native frames and Python frames together, reads
    // as cpu_sample_sum (where [python] rows are the Python functions).
    let top = go_pprof(
        &["-top", "-nodecount=100000", "-sample_index=samples"],
        &profile,
    );
    let mut expected: BTreeMap<String, f64> = BTreeMap::new();
    for r in stats_json(&report, "cpu_sample_sum") {
        *expected
            .entry(r["Function"].as_str().unwrap().to_string())
            .or_default() += r["Self Samples"].as_f64().unwrap();
    }
    expected.retain(|_, n| *n > 0.0);
    let got: BTreeMap<String, f64> = top_rows(&top)
        .into_iter()
        .filter(|r| r.0 > 0.0)
        .map(|(n, _, name)| (name, n))
        .collect();
    assert_eq!(got, expected, "{top}");
}

#[test]
fn off_cpu_waits_read_in_go_pprof_as_in_cpu_wait_sum() {
    require_root();
    let s = Scratch::new("pprof-waits");
    // Spins about 2 ms and sleeps 5 ms, 30 times.
    let bin = c_workload("sleeper.c", &[]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-s",
        "process-tree",
        "--cpuctxsw",
        "process-tree",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let profile = export_pprof(&report, &s.path("waits"), &["--stacks", "waits"]);
    let rows = stats_json(&report, "cpu_wait_sum");
    for state in ["S", "R"] {
        let (n, ns) = rows
            .iter()
            .filter(|r| r["State"] == state)
            .fold((0.0, 0.0), |(n, ns), r| {
                (
                    n + r["Num Waits"].as_f64().unwrap(),
                    ns + r["Total Time (ns)"].as_f64().unwrap(),
                )
            });
        if n == 0.0 {
            assert_ne!(state, "S", "no sleeps in cpu_wait_sum: {rows:?}");
            continue;
        }
        let focus = format!("-tagfocus=state={state}");
        let count = go_pprof(&["-top", "-sample_index=waits", &focus], &profile);
        let wall = go_pprof(&["-top", "-sample_index=wall", &focus], &profile);
        assert_eq!(total(&count), n, "{state}: {count}");
        // -top prints times to 0.01 ms.
        assert!(
            (total(&wall) - ns / 1e9).abs() <= 1e-5 + 1e-4 * ns / 1e9,
            "{state}: {wall} vs {ns} ns"
        );
    }
    // The sleeps wait in nanosleep, 30 of them of about 5 ms.
    let sleeps = go_pprof(
        &[
            "-top",
            "-sample_index=waits",
            "-tagfocus=state=S",
            "-focus=nanosleep",
        ],
        &profile,
    );
    assert!(total(&sleeps) >= 30.0, "{sleeps}");
}

#[test]
fn api_call_stacks_read_in_go_pprof_one_call_each_with_its_time() {
    require_root();
    let s = Scratch::new("pprof-api");
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "hggc",
        "--hggc-backtrace",
        "all:0",
        "-o",
        report.to_str().unwrap(),
        workload("train_step").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let profile = export_pprof(&report, &s.path("api"), &["--stacks", "api"]);
    // Each API is a leaf as often as it was called, worth its calls'
    // time (hggc_api_sum's counts and totals).
    let decoded = pprof_format_leaves(&profile);
    assert_eq!(
        decoded["types"],
        serde_json::json!(["calls/count", "wall/nanoseconds"])
    );
    let sums = stats_json(&report, "hggc_api_sum");
    assert!(!sums.is_empty());
    for r in &sums {
        let name = r["Name"].as_str().unwrap();
        let calls = r["Num Calls"].as_f64().unwrap();
        assert_eq!(decoded["leaves"][name].as_f64(), Some(calls), "{name}");
        let wall = go_pprof(
            &["-top", "-sample_index=wall", &format!("-focus=^{name}$")],
            &profile,
        );
        let ns = r["Total Time (ns)"].as_f64().unwrap();
        assert!(
            (total(&wall) - ns / 1e9).abs() <= 1e-5 + 1e-4 * ns / 1e9,
            "{name}: {wall} vs {ns} ns"
        );
    }
}

#[test]
fn pprof_export_takes_the_filters_of_the_other_exports() {
    require_root();
    let s = Scratch::new("pprof-filters");
    let bin = c_workload("named_burners.c", &["-g", "-pthread"]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-s",
        "process-tree",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
        "300",
        "100",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let pid = metadata(&report)["root_pids"][0].as_u64().unwrap();
    let samples = |profile: &Path| total(&go_pprof(&["-top", "-sample_index=samples"], profile));
    let whole = samples(&export_pprof(&report, &s.path("all"), &[]));
    assert!(whole >= 300.0, "{whole}");
    // Another process's pid leaves nothing; the workload's, everything.
    let mine = export_pprof(
        &report,
        &s.path("mine"),
        &["--filter-pid", &pid.to_string()],
    );
    assert_eq!(samples(&mine), whole);
    let none = export_pprof(&report, &s.path("none"), &["--filter-pid", "1"]);
    assert_eq!(samples(&none), 0.0);
    // --filter-time: the second half of the recording holds some of the
    // samples, not all; the first half the rest.
    let m = metadata(&report);
    let half =
        (m["end_monotonic_ns"].as_i64().unwrap() - m["start_monotonic_ns"].as_i64().unwrap()) / 2;
    let late = export_pprof(
        &report,
        &s.path("late"),
        &["--filter-time", &format!("{half}/")],
    );
    let early = export_pprof(
        &report,
        &s.path("early"),
        &["--filter-time", &format!("0/{half}")],
    );
    let (late_n, early_n) = (samples(&late), samples(&early));
    assert!(late_n > 0.0 && late_n < whole, "{late_n} of {whole}");
    assert_eq!(early_n + late_n, whole);
    // -f false refuses to overwrite; --stacks waits is pprof's alone.
    let o = run(&[
        "export",
        "--type",
        "pprof",
        "-o",
        s.path("all").to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(!o.status.success() && stderr(&o).contains("already exists"));
    let o = run(&[
        "export",
        "--type",
        "collapsed",
        "--stacks",
        "waits",
        report.to_str().unwrap(),
    ]);
    assert!(
        !o.status.success() && stderr(&o).contains("--type pprof"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn frames_of_a_stripped_binary_stay_addresses_that_go_pprof_names_from_the_binary() {
    require_root();
    let s = Scratch::new("pprof-stripped");
    // No build id: Debian's go tool pprof (1.19) reads an empty one from
    // the notes current binutils write ("build-id mismatch (ID != )") and
    // then refuses the file; without one it finds the binary by name.
    let built = c_workload(
        "named_burners.c",
        &["-g", "-pthread", "-Wl,--build-id=none"],
    );
    // The stripped copy runs; the unstripped one waits in another folder,
    // where go tool pprof finds it (PPROF_BINARY_PATH), as a fleet's store
    // finds debug files by build id.
    let (run_dir, debug_dir) = (s.path("run"), s.path("debug"));
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::create_dir_all(&debug_dir).unwrap();
    let stripped = run_dir.join("named_burners");
    std::fs::copy(&built, &stripped).unwrap();
    std::fs::copy(&built, debug_dir.join("named_burners")).unwrap();
    let o = Command::new("strip")
        .arg("--strip-all")
        .arg(&stripped)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = s.path("r");
    let recorded = asys()
        .env_remove("DEBUGINFOD_URLS")
        .args(["profile", "-s", "process-tree", "-o"])
        .arg(&report)
        .arg(&stripped)
        .args(["400", "200"])
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{}", stderr(&recorded));
    let cpu_ns: BTreeMap<String, f64> = stdout(&recorded)
        .lines()
        .filter_map(|l| l.strip_prefix("truth "))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let thread = v["thread"].as_str().unwrap().to_string();
            (thread, v["cpu_ns"].as_f64().unwrap())
        })
        .collect();
    let report = report.with_extension("asysrep");
    let profile = export_pprof(&report, &s.path("cpu"), &[]);

    // As recorded: the program's own functions are addresses.
    let top = go_pprof(&["-top", "-sample_index=samples"], &profile);
    let rows = top_rows(&top);
    assert!(
        !rows.iter().any(|r| r.2 == "mix_step" || r.2 == "burn_cold"),
        "{top}"
    );
    // Named by go tool pprof from the unstripped build: the two hot
    // loops' samples, as the threads measured their CPU time.
    let o = Command::new("go")
        .args([
            "tool",
            "pprof",
            "-symbolize=local",
            "-top",
            "-sample_index=samples",
        ])
        .args(["-nodefraction=0", "-edgefraction=0"])
        .arg(&profile)
        .env("PPROF_BINARY_PATH", &debug_dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let named = String::from_utf8(o.stdout).unwrap();
    let rows = top_rows(&named);
    let flat = |f: &str| rows.iter().find(|r| r.2 == f).map_or(0.0, |r| r.0);
    let period_ns = metadata(&report)["sample_period_ns"].as_f64().unwrap();
    // pprof's addr2line names the inlined step by the function it is in.
    for (functions, thread) in [
        (&["mix_step", "burn_hot"][..], "hot-worker"),
        (&["burn_cold"][..], "cold-worker"),
    ] {
        let function = functions.join("+");
        let sampled = functions.iter().map(|f| flat(f)).sum::<f64>() * period_ns;
        let measured = cpu_ns[thread];
        assert!(
            (sampled - measured).abs() <= 0.1 * measured,
            "{function}: {sampled} ns sampled, {measured} ns of CPU measured: {named}"
        );
    }
}

/// A frame left unnamed: cpu_sample_sum shows its address (`0x7f...`), and
/// go's pprof the address or `<unknown>` (an address in no mapping it
/// knows, such as a sample at the dynamic loader's start); both are one
/// name here, so that their samples are compared all the same.
fn unnamed_as_one(name: &str) -> String {
    if name == "<unknown>" || name.starts_with("0x") {
        "<unnamed>".into()
    } else {
        name.to_string()
    }
}
