//! Python frames as a Python user reads them (docs/python-stacks.md,
//! "Output"): a workload whose functions measure their own CPU time, one of
//! them named "\0x" (as a class body in gzip.py is named "\0" under
//! PyTorch), one with a 3,000-character name, and a module that spins while
//! it is imported, profiled with `-s process-tree -b dwarf --python-sampling
//! true`. Its flame graph renders in headless Chromium with no XML error and
//! the Python functions in it; its Perfetto export, read with Perfetto's own
//! protos, has the Python frames between the native ones; `cpu_sample_sum`
//! keeps the two files' `<module>` apart; and `python_sample_sum` gives
//! each function the self time it measured.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use asys_tests::*;
use serde_json::Value;

struct Run {
    _s: Scratch,
    dir: PathBuf,
    report: PathBuf,
    pid: u64,
    truth: Value,
    main: String,
    helper: String,
    odd: String,
}

impl Run {
    /// The share of the process's CPU time `f` measured for itself.
    fn measured(&self, f: &str) -> f64 {
        self.truth["self_ns"][f].as_f64().unwrap() / self.truth["process_ns"].as_f64().unwrap()
    }
}

fn profile(python: &Path) -> Run {
    require_root();
    let s = Scratch::new("python-output");
    let dir = s.0.clone();
    // The workload: `hot` 600 ms, `odd.py`'s "\0x" 300 ms, `warm` 200 ms,
    // helper.py's `<module>` 200 ms at import, the long-named one 60 ms.
    // Each loop calls only C (`time.thread_time_ns`, which calls libc's
    // `clock_gettime`), so the function is the innermost Python frame all
    // the while. Prints what each measured, and the process's CPU time.
    // Copied into the scratch folder: main.py imports helper.py from its
    // own folder, where Python writes the module's cache.
    std::fs::copy(
        workload_source("python_output_helper.py"),
        s.path("helper.py"),
    )
    .unwrap();
    let main = s.path("main.py");
    std::fs::copy(workload_source("python_output_main.py"), &main).unwrap();
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
        main.to_str().unwrap(),
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
    let file = |name: &str| dir.join(name).to_str().unwrap().to_string();
    Run {
        main: file("main.py"),
        helper: file("helper.py"),
        odd: file("odd.py"),
        _s: s,
        dir,
        report,
        pid,
        truth,
    }
}

/// The Python interpreters: Debian's 3.11 and the fixture 3.13 (3.12+
/// marks entry frames by shim frames).
fn interpreters() -> [PathBuf; 2] {
    ["/usr/bin/python3.11".into(), cpython("3.13")]
}

/// "\0x" as asys records it: escaped visibly.
const ODD: &str = "\\x00x";

/// The relative error allowed between a function's share of the samples
/// and of the CPU time it measured (as in python.rs), plus one point for
/// the start-up the process spent before any Python frame.
fn close(got: f64, measured: f64) -> bool {
    (got - measured).abs() <= 0.1 * measured + 0.01
}

/// Headless Chromium's DOM of `url` after its scripts ran.
fn chromium_dom(url: &str) -> String {
    let o = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(url)
        .finish();
    assert!(
        o.status.success(),
        "chromium failed (cargo xtask test installs it): {}",
        stderr(&o)
    );
    String::from_utf8(o.stdout).expect("the DOM is UTF-8")
}

/// The samples of each frame titled `name (...)` in a flame graph's DOM
/// (`<title>NAME (N samples, P%)</title>`), summed.
fn dom_samples(dom: &str, prefix: &str) -> u64 {
    let mut n = 0;
    for part in dom.split("<title>").skip(1) {
        let title = part.split("</title>").next().unwrap();
        if !title.starts_with(prefix) {
            continue;
        }
        let counts = title.rsplit_once(" (").unwrap().1;
        n += counts
            .split(' ')
            .next()
            .unwrap()
            .replace(',', "")
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{title}"));
    }
    n
}

#[test]
fn chromium_renders_the_flame_graph_of_python_frames_with_odd_names() {
    for python in interpreters() {
        let what = python.display().to_string();
        let r = profile(&python);
        let o = run(&[
            "export",
            "--type",
            "flamegraph",
            "-o",
            r.dir.join("flame").to_str().unwrap(),
            r.report.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let svg_path = r.dir.join("flame.svg");
        let svg = std::fs::read(&svg_path).unwrap();
        let svg = String::from_utf8(svg).expect("the SVG is UTF-8");
        // Nothing XML refuses (a NUL made Chromium show only "Invalid
        // character U+0000").
        let bad: Vec<(usize, char)> = svg
            .char_indices()
            .filter(|&(_, c)| {
                !matches!(c as u32, 0x9 | 0xa | 0xd | 0x20..=0xd7ff | 0xe000..=0xfffd | 0x10000..)
            })
            .collect();
        assert!(bad.is_empty(), "{what}: characters XML refuses: {bad:?}");
        let dom = chromium_dom(&format!("file://{}", svg_path.display()));
        assert!(
            !dom.contains("parsererror")
                && !dom.contains("This page contains the following errors"),
            "{what}: Chromium could not read the SVG: {}",
            &dom[..dom.len().min(2000)]
        );
        // The Python functions are frames of the drawn graph, each with as
        // many samples as cpu_sample_sum has with it on the stack.
        let rows = stats_json(&r.report, "cpu_sample_sum");
        let total_of = |function: &str, file: &str| -> u64 {
            rows.iter()
                .filter(|x| {
                    x["Pid"].as_u64() == Some(r.pid)
                        && x["Module"] == "[python]"
                        && x["Function"] == function
                        && x["Source"].as_str().unwrap().starts_with(file)
                })
                .map(|x| x["Total Samples"].as_u64().unwrap())
                .sum()
        };
        for (function, file) in [("hot", &r.main), ("warm", &r.main), (ODD, &r.odd)] {
            let drawn = dom_samples(&dom, &format!("{function} ({file}:"));
            let want = total_of(function, file);
            eprintln!("{what}: {function}: {drawn} samples drawn, {want} in cpu_sample_sum");
            assert!(want > 50, "{what}: {function} in {want} samples");
            assert_eq!(drawn, want, "{what}: {function}'s frames in the DOM");
        }
    }
}

/// Reads a Perfetto trace with Perfetto's protos and prints each sample's
/// pid and stack (outermost first) as [function name, mapping path] pairs.
const STACKS: &str = r#"
import json, sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
trace = pb.Trace()
trace.ParseFromString(open(sys.argv[1], "rb").read())
funcs, paths, maps, frames, stacks, out = {}, {}, {}, {}, {}, []
for p in trace.packet:
    if p.HasField("interned_data"):
        d = p.interned_data
        for x in d.function_names: funcs[x.iid] = x.str.decode()
        for x in d.mapping_paths: paths[x.iid] = x.str.decode()
        for x in d.mappings: maps[x.iid] = "/".join(paths[i] for i in x.path_string_ids)
        for x in d.frames: frames[x.iid] = [funcs[x.function_name_id], maps[x.mapping_id]]
        for x in d.callstacks: stacks[x.iid] = [frames[f] for f in x.frame_ids]
    if p.WhichOneof("data") == "perf_sample":
        s = p.perf_sample
        out.append({"pid": s.pid, "stack": stacks.get(s.callstack_iid, [])})
print(json.dumps(out))
"#;

#[test]
fn the_perfetto_export_has_python_frames_between_the_native_ones() {
    for python in interpreters() {
        let what = python.display().to_string();
        let r = profile(&python);
        let o = run(&[
            "export",
            "--type",
            "perfetto",
            "-o",
            r.dir.join("trace").to_str().unwrap(),
            r.report.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let o = Command::new(perfetto_python())
            .args(["-c", STACKS])
            .arg(r.dir.join("trace.pftrace"))
            .finish();
        assert!(
            o.status.success(),
            "{what}: reading the trace: {}",
            stderr(&o)
        );
        let samples: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
        let is_py = |f: &Value| f[1].as_str().unwrap().ends_with(".py");
        let name = |f: &Value| f[0].as_str().unwrap().to_string();
        let (mut all, mut with_python) = (0u64, 0u64);
        // Per (function, file), the samples whose innermost Python frame
        // it is.
        let mut innermost: BTreeMap<(String, String), u64> = BTreeMap::new();
        // Samples in `hot` with a native caller outside `<module>`, and
        // with libc's clock_gettime (which time.thread_time_ns calls) inside.
        let (mut in_hot, mut native_outside, mut clock_inside) = (0u64, 0u64, 0u64);
        for sample in samples.iter().filter(|x| x["pid"].as_u64() == Some(r.pid)) {
            all += 1;
            let stack = sample["stack"].as_array().unwrap();
            let Some(inner) = stack.iter().rposition(is_py) else {
                continue;
            };
            with_python += 1;
            // `function (file:line)`.
            let f = name(&stack[inner]);
            let (function, place) = f
                .rsplit_once(" (")
                .unwrap_or_else(|| panic!("{f:?}, a .py frame not named as one, in {stack:?}"));
            // `file:line)`, or `file)` where the line could not be read (a
            // code object read while an import was still making it, or
            // freed and reused before it was read: python_frames.line is
            // null then, as docs/python-stacks.md says).
            let place = place.strip_suffix(')').unwrap_or(place);
            let file = match place.rsplit_once(':') {
                Some((file, line)) if line.parse::<u32>().is_ok() => file,
                _ => place,
            };
            *innermost
                .entry((function.to_string(), file.to_string()))
                .or_default() += 1;
            // No evaluator frame inside the Python frames.
            let first = stack.iter().position(is_py).unwrap();
            assert!(
                !stack[first..]
                    .iter()
                    .any(|f| name(f) == "_PyEval_EvalFrameDefault"),
                "{what}: an evaluator frame among the Python ones: {stack:?}"
            );
            if function != "hot" {
                continue;
            }
            in_hot += 1;
            // The script's frames, outermost first, are <module> and hot.
            let py: Vec<String> = stack.iter().filter(|f| is_py(f)).map(name).collect();
            assert_eq!(py.len(), 2, "{what}: {py:?}");
            assert!(
                py[0].starts_with(&format!("<module> ({}:", r.main)),
                "{py:?}"
            );
            assert!(py[1].starts_with(&format!("hot ({}:", r.main)), "{py:?}");
            if first > 0 && !is_py(&stack[first - 1]) {
                native_outside += 1;
            }
            if stack[inner + 1..]
                .iter()
                .any(|f| !is_py(f) && name(f).contains("clock_gettime"))
            {
                clock_inside += 1;
            }
        }
        eprintln!(
            "{what}: {with_python} of {all} samples with Python frames; {in_hot} in hot, \
             {native_outside} with a native caller, {clock_inside} with clock_gettime inside"
        );
        assert!(with_python as f64 >= 0.9 * all as f64, "{what}");
        assert!(in_hot > 100, "{what}: {in_hot} samples in hot");
        assert!(
            native_outside as f64 >= 0.9 * in_hot as f64,
            "{what}: {native_outside} of {in_hot} samples in hot have a native caller"
        );
        assert!(
            clock_inside > 0 && clock_inside < in_hot,
            "{what}: {clock_inside} of {in_hot} samples in hot are in clock_gettime"
        );
        for (f, file, key) in [
            ("hot", &r.main, "hot"),
            ("warm", &r.main, "warm"),
            (ODD, &r.odd, "\0x"),
            ("<module>", &r.helper, "helper"),
        ] {
            let n = innermost.get(&(f.to_string(), file.to_string()));
            let got = n.copied().unwrap_or(0) as f64 / with_python as f64;
            let measured = r.measured(key);
            eprintln!("{what}: {f}: {got:.3} of the Python samples, {measured:.3} measured");
            assert!(
                close(got, measured),
                "{what}: {f}: {got:.3} vs {measured:.3}"
            );
        }
    }
}

#[test]
fn python_reports_keep_modules_apart_and_give_the_innermost_frame_its_self_time() {
    let python = PathBuf::from("/usr/bin/python3.11");
    let r = profile(&python);
    // cpu_sample_sum: main.py's and helper.py's <module> are two rows,
    // each with its own file; helper's is on as many samples as its
    // import spun, main's on nearly all.
    let rows: Vec<Value> = stats_json(&r.report, "cpu_sample_sum")
        .into_iter()
        .filter(|x| x["Pid"].as_u64() == Some(r.pid))
        .collect();
    let samples: u64 = rows
        .iter()
        .map(|x| x["Self Samples"].as_u64().unwrap())
        .sum();
    let module = |file: &str| -> Vec<&Value> {
        rows.iter()
            .filter(|x| {
                x["Function"] == "<module>"
                    && x["Module"] == "[python]"
                    && x["Source"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("{file}:"))
            })
            .collect()
    };
    let (main, helper) = (module(&r.main), module(&r.helper));
    assert_eq!((main.len(), helper.len()), (1, 1), "{rows:#?}");
    let share = |x: &Value| x["Total Samples"].as_u64().unwrap() as f64 / samples as f64;
    let (main_share, helper_share) = (share(main[0]), share(helper[0]));
    eprintln!(
        "cpu_sample_sum: main.py's <module> on {main_share:.3}, helper.py's on {helper_share:.3} \
         ({:.3} measured) of {samples} samples",
        r.measured("helper")
    );
    assert!(main_share >= 0.9, "{main_share}");
    assert!(close(helper_share, r.measured("helper")), "{helper_share}");

    // python_sample_sum: the self time of each function as it measured
    // it, hot's the largest; the file of each its own.
    let rows: Vec<Value> = stats_json(&r.report, "python_sample_sum")
        .into_iter()
        .filter(|x| x["Pid"].as_u64() == Some(r.pid))
        .collect();
    assert_eq!(rows[0]["Function"], "hot", "{rows:#?}");
    let long = r.truth["long"].as_str().unwrap();
    for (function, file, key) in [
        ("hot", &r.main, "hot"),
        (ODD, &r.odd, "\0x"),
        ("warm", &r.main, "warm"),
        ("<module>", &r.helper, "helper"),
        (long, &r.odd, "long"),
    ] {
        let row = rows
            .iter()
            .find(|x| x["Function"] == function && x["File"] == file.as_str())
            .unwrap_or_else(|| panic!("no row of {function} in {file}: {rows:#?}"));
        let got = row["Self (%)"].as_f64().unwrap() / 100.0;
        let measured = r.measured(key);
        eprintln!(
            "python_sample_sum: {}: self {got:.3}, {measured:.3} measured",
            &function[..function.len().min(20)]
        );
        assert!(
            close(got, measured),
            "{function}: {got:.3} vs {measured:.3}"
        );
    }

    // Column output elides the long name to a readable width and shows
    // "\0x" escaped; csv keeps the name whole.
    let column = |format: &str| {
        let o = run(&[
            "stats",
            "-r",
            "python_sample_sum",
            "-f",
            format,
            r.report.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let text = column("column");
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 400, "a line {widest} characters wide");
    assert!(text.contains("Long.nnn") && text.contains('…'), "{text}");
    assert!(!text.contains('\0') && text.contains("\\\\x00x"), "{text}");
    let csv = column("csv");
    assert!(csv.contains(long) && !csv.contains('…'));
}
