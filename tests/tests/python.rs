//! `--python-sampling` (docs/python-stacks.md): the options; a run with them
//! keeps the interpreter's CPU samples as without them.
use asys_tests::*;
use serde_json::Value;

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

/// 3.10's code objects have no qualified name: its frames are named by
/// `co_name` (`run` for `Thread.run`).
fn names_methods_by_name_only(python: &std::path::Path) -> bool {
    python.file_name().is_some_and(|n| n == "python3.10")
}

#[test]
fn hot_python_functions_get_their_share_of_the_samples_in_place_of_the_evaluator() {
    require_root();
    for python in python_interpreters() {
        let s = Scratch::new("python-hot");
        let script = workload_source("hot.py");
        let script_s = script.to_str().unwrap();
        let report = s.path("r");
        let o = run(&[
            "profile",
            "-o",
            report.to_str().unwrap(),
            "-s",
            "process-tree",
            "-b",
            "dwarf",
            // 2 kHz, a Python stack with each (the most
            // --python-sampling-frequency allows): about 3200 samples.
            "--sample-period",
            "500000",
            "--python-sampling",
            "true",
            "--python-sampling-frequency",
            "2000",
            python.to_str().unwrap(),
            script_s,
        ]);
        let what = python.display();
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        assert!(
            !stderr(&o).contains("--python-sampling"),
            "{what}: {}",
            stderr(&o)
        );
        let truth: Value = serde_json::from_str(
            stdout(&o)
                .lines()
                .find_map(|l| l.strip_prefix("truth "))
                .expect("the script's truth line"),
        )
        .unwrap();
        let process_ns = truth["process_ns"].as_f64().unwrap();
        let report = report.with_extension("asysrep");
        let pid = metadata(&report)["root_pids"][0].as_u64().unwrap();

        // cpu_sample_sum: each hot function is a [python] row named with
        // its file and the line of its loop.
        let rows: Vec<Value> = stats_json(&report, "cpu_sample_sum")
            .into_iter()
            .filter(|r| r["Pid"].as_u64() == Some(pid))
            .collect();
        let samples: i64 = rows
            .iter()
            .map(|r| r["Self Samples"].as_i64().unwrap())
            .sum();
        for f in ["leaf_a", "leaf_b", "middle"] {
            let row = rows
                .iter()
                .find(|r| r["Function"] == f && r["Module"] == "[python]")
                .unwrap_or_else(|| panic!("{what}: no [python] row for {f}: {rows:?}"));
            let lo = truth["loop_line"][f].as_u64().unwrap();
            let source = row["Source"].as_str().unwrap();
            let (file, line) = source.rsplit_once(':').unwrap();
            let line: u64 = line.parse().unwrap();
            assert_eq!(file, script_s, "{what}: {f}");
            assert!(
                (lo..=lo + 1).contains(&line),
                "{what}: {f} at line {line}, its loop is on {lo}-{}",
                lo + 1
            );
        }

        // The folded stacks: per sample, the innermost frame of the script
        // is the function whose self time it was.
        let base = s.path("r");
        let o = run(&[
            "export",
            "--type",
            "collapsed",
            "-o",
            base.to_str().unwrap(),
            report.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let folded = std::fs::read_to_string(base.with_extension("collapsed")).unwrap();
        let mut innermost: std::collections::BTreeMap<String, u64> = Default::default();
        let mut total = 0u64;
        // Samples in the hot functions, and those with Py_RunMain outside.
        let (mut hot, mut under_run_main) = (0u64, 0u64);
        let in_script = format!(" ({script_s}:");
        for line in folded.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            let n: u64 = n.parse().unwrap();
            total += n;
            let frames: Vec<&str> = stack.split(';').collect();
            let Some(inner) = frames.iter().rev().find(|f| f.contains(&in_script)) else {
                continue;
            };
            let function = inner.split(" (").next().unwrap();
            *innermost.entry(function.to_string()).or_default() += n;
            // Native frames outside, Python frames where the evaluator was,
            // nested calls in order, outermost first.
            let script_frames: Vec<&str> = frames
                .iter()
                .filter(|f| f.contains(&in_script))
                .map(|f| f.split(" (").next().unwrap())
                .collect();
            let want: &[&str] = match function {
                "leaf_a" => &["<module>", "leaf_a"],
                "middle" => &["<module>", "middle"],
                "leaf_b" => &["<module>", "middle", "leaf_b"],
                _ => continue,
            };
            assert_eq!(script_frames, want, "{what}: {line}");
            let module_at = frames
                .iter()
                .position(|f| f.starts_with("<module> ("))
                .unwrap();
            // A native stack the unwinder cut short has its Python frames
            // outermost: counted, and it must stay rare.
            if let Some(r) = frames.iter().position(|f| *f == "Py_RunMain") {
                assert!(r < module_at, "{what}: Py_RunMain inside: {line}");
                under_run_main += n;
            }
            hot += n;
            assert!(
                !frames[module_at..].contains(&"_PyEval_EvalFrameDefault"),
                "{what}: an evaluator frame left inside the Python ones: {line}"
            );
        }
        assert_eq!(total as i64, samples, "{what}: folded vs cpu_sample_sum");
        eprintln!("{what}: {under_run_main} of {hot} hot samples under Py_RunMain");
        assert!(
            under_run_main as f64 >= 0.9 * hot as f64,
            "{what}: only {under_run_main} of {hot} hot samples under Py_RunMain"
        );
        for f in ["leaf_a", "leaf_b", "middle"] {
            let measured = truth["self_ns"][f].as_f64().unwrap() / process_ns;
            let got = innermost.get(f).copied().unwrap_or(0) as f64 / total as f64;
            eprintln!("{what}: {f}: {got:.3} of the samples, {measured:.3} measured");
            assert!(
                (got - measured).abs() <= 0.1 * measured,
                "{what}: {f} has {got:.3} of the samples, {measured:.3} of the CPU time"
            );
        }
    }
}

#[test]
fn without_python_sampling_the_evaluator_frames_stay() {
    require_root();
    let s = Scratch::new("python-off");
    let script = workload_source("spin.py");
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-o",
        report.to_str().unwrap(),
        "-s",
        "process-tree",
        "-b",
        "dwarf",
        "/usr/bin/python3.11",
        script.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
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
    assert!(
        !rows.iter().any(|r| r["Module"] == "[python]"),
        "Python frames without --python-sampling"
    );
    let eval: i64 = rows
        .iter()
        .filter(|r| r["Function"] == "_PyEval_EvalFrameDefault")
        .map(|r| r["Total Samples"].as_i64().unwrap())
        .sum();
    let spun = cpu_ns / 1e6;
    assert!(
        eval as f64 >= spun * 0.8,
        "_PyEval_EvalFrameDefault on {eval} stacks of {spun:.0} ms of spinning"
    );
}

#[test]
fn python_sampling_frequency_spaces_each_threads_python_stacks() {
    require_root();
    let s = Scratch::new("python-hz");
    let script = workload_source("spin.py");
    let report = s.path("r");
    // 1 kHz CPU sampling, Python stacks at most 100 Hz per thread.
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
        "100",
        "/usr/bin/python3.11",
        script.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cpu_ns: f64 = stdout(&o)
        .lines()
        .find_map(|l| l.strip_prefix("cpu_ns "))
        .expect("the script's cpu_ns line")
        .trim()
        .parse()
        .unwrap();
    let report = report.with_extension("asysrep");
    let base = s.path("frames");
    let o = run(&[
        "export",
        "--type",
        "jsonlines",
        "--tables",
        "python_frames",
        "-o",
        base.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut stacks: std::collections::BTreeMap<u64, std::collections::BTreeSet<i64>> =
        Default::default();
    for line in std::fs::read_to_string(base.with_extension("jsonl"))
        .unwrap()
        .lines()
    {
        let r: Value = serde_json::from_str(line).unwrap();
        stacks
            .entry(r["tid"].as_u64().unwrap())
            .or_default()
            .insert(r["ts"].as_i64().unwrap());
    }
    let n: usize = stacks.values().map(|t| t.len()).sum();
    for ts in stacks.values() {
        let times: Vec<i64> = ts.iter().copied().collect();
        for w in times.windows(2) {
            assert!(w[1] - w[0] >= 10_000_000, "stacks {} ns apart", w[1] - w[0]);
        }
    }
    // The spin alone is cpu_ns of samples 1 ms apart: about one in ten
    // reads its Python stack.
    let expected = cpu_ns / 10e6;
    assert!(
        n as f64 >= expected * 0.8,
        "{n} Python stacks for {:.0} ms of spinning at 100 Hz",
        cpu_ns / 1e6
    );
}

#[test]
fn each_thread_gets_its_own_python_frames() {
    require_root();
    for python in python_interpreters() {
        let what = python.display();
        let s = Scratch::new("python-threads");
        let script = workload_source("threads.py");
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
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let truth: Value = serde_json::from_str(
            stdout(&o)
                .lines()
                .find_map(|l| l.strip_prefix("truth "))
                .expect("the script's truth line"),
        )
        .unwrap();
        let base = s.path("frames");
        let o = run(&[
            "export",
            "--type",
            "jsonlines",
            "--tables",
            "python_frames,strings",
            "-o",
            base.to_str().unwrap(),
            report.with_extension("asysrep").to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let mut strings = std::collections::HashMap::new();
        // (tid, ts) -> (depth, function string id) per frame.
        type Frames = Vec<(u64, Option<u64>)>;
        let mut stacks: std::collections::BTreeMap<(u64, i64), Frames> = Default::default();
        for line in std::fs::read_to_string(base.with_extension("jsonl"))
            .unwrap()
            .lines()
        {
            let r: Value = serde_json::from_str(line).unwrap();
            if r["table"] == "strings" {
                strings.insert(
                    r["id"].as_u64().unwrap(),
                    r["value"].as_str().unwrap().to_string(),
                );
            } else {
                stacks
                    .entry((r["tid"].as_u64().unwrap(), r["ts"].as_i64().unwrap()))
                    .or_default()
                    .push((r["depth"].as_u64().unwrap(), r["functionId"].as_u64()));
            }
        }
        for f in ["spin_a", "spin_b"] {
            let tid = truth[f]["tid"].as_u64().unwrap();
            let cpu_ns = truth[f]["cpu_ns"].as_f64().unwrap();
            let mut n = 0u64;
            let mut in_f = 0u64;
            for ((t, _), frames) in &stacks {
                if *t != tid {
                    continue;
                }
                n += 1;
                let mut frames = frames.clone();
                frames.sort_unstable();
                let names: Vec<&str> = frames
                    .iter()
                    .map(|(_, id)| {
                        id.and_then(|id| strings.get(&id))
                            .map_or("?", |s| s.as_str())
                    })
                    .collect();
                if names.first() == Some(&f) {
                    in_f += 1;
                    // Called by run, itself run by the Thread's bootstrap.
                    assert_eq!(names.get(1), Some(&"run"), "{what}: {names:?}");
                    let thread_run = match names_methods_by_name_only(&python) {
                        true => "run",
                        false => "Thread.run",
                    };
                    assert_eq!(names.get(2), Some(&thread_run), "{what}: {names:?}");
                }
            }
            let spun = cpu_ns / 1e6;
            eprintln!("{what}: thread {f}: {n} Python stacks, {in_f} in {f}, {spun:.0} ms spun");
            // A sample per CPU millisecond, 80 % of them at least (less
            // under emulation, where the timer's interrupts arrive late:
            // `sample_share`; 6.12 on a loaded host gave 86 for 301 ms).
            let coverage = sample_share(0.8);
            assert!(
                in_f as f64 >= spun * coverage && in_f as f64 >= n as f64 * 0.9,
                "{what}: thread {tid} ({f}): {in_f} of {n} Python stacks in {f}, {spun:.0} ms spun"
            );
        }
    }
}

#[test]
fn attach_reads_python_frames_from_the_first_sample() {
    require_root();
    // pyenv's 3.11.7 (docs/python-stacks.md has its figure), and jammy's
    // 3.10, whose version is read from its PY_VERSION string.
    for python in [python_interpreters().swap_remove(1), cpython("3.10")] {
        attach_to_a_spinning_python(&python);
    }
}

fn attach_to_a_spinning_python(python: &std::path::Path) {
    let what = python.display();
    let s = Scratch::new("python-attach");
    // Spins (in Python, with C calls) until killed; says when it started.
    let script = workload_source("long.py");
    let mut child = std::process::Command::new(python)
        .arg(&script)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "spinning");
    let pid = child.id().to_string();
    let report = s.path("r");
    let o = run(&[
        "attach",
        "-s",
        "process-tree",
        "-b",
        "dwarf",
        "--python-sampling",
        "true",
        "-d",
        "1",
        "-o",
        report.to_str().unwrap(),
        &pid,
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(o.status.success(), "{what}: {}", stderr(&o));
    let rows: Vec<Value> = stats_json(&report.with_extension("asysrep"), "cpu_sample_sum")
        .into_iter()
        .filter(|r| r["Pid"].as_u64() == Some(child.id() as u64))
        .collect();
    let samples: i64 = rows
        .iter()
        .map(|r| r["Self Samples"].as_i64().unwrap())
        .sum();
    let total = |f: &str, module: &str| {
        rows.iter()
            .filter(|r| r["Function"] == f && r["Module"] == module)
            .map(|r| r["Total Samples"].as_i64().unwrap())
            .sum::<i64>()
    };
    // A second of a thread that does nothing but spin: up to 1000 samples
    // at 1 kHz (fewer on a busy machine), every one of them inside
    // `forever`, the first ones included.
    assert!(
        samples >= 200,
        "{what}: {samples} samples in 1 s of spinning"
    );
    let in_forever = total("forever", "[python]");
    eprintln!("{what}: {in_forever} of {samples} samples in forever");
    assert!(
        in_forever as f64 >= samples as f64 * 0.98,
        "{what}: {in_forever} of {samples} samples with Python frames"
    );
}

#[test]
fn a_stack_deeper_than_32_frames_keeps_its_innermost_32() {
    require_root();
    // 3.12 and 3.13 also mark the 32nd frame an entry frame when a shim
    // frame follows it: read past the last one sent. 3.10 recurses in C at
    // each call.
    for python in [
        std::path::PathBuf::from("/usr/bin/python3.11"),
        cpython("3.12"),
        cpython("3.13"),
        cpython("3.10"),
    ] {
        let what = python.display();
        let s = Scratch::new("python-deep");
        // 50 nested calls of `down`, then a spin in `bottom`.
        let script = workload_source("deep.py");
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
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let base = s.path("r");
        let o = run(&[
            "export",
            "--type",
            "collapsed",
            "-o",
            base.to_str().unwrap(),
            report.with_extension("asysrep").to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let folded = std::fs::read_to_string(base.with_extension("collapsed")).unwrap();
        let mut in_bottom = 0u64;
        for line in folded.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            let frames: Vec<&str> = stack
                .split(';')
                .filter(|f| f.contains(" (") && f.contains("deep.py:"))
                .map(|f| f.split(" (").next().unwrap())
                .collect();
            if frames.last() != Some(&"bottom") {
                continue;
            }
            in_bottom += n.parse::<u64>().unwrap();
            // The innermost 32: bottom and 31 calls of down, no <module>.
            assert_eq!(frames.len(), 32, "{what}: {line}");
            assert!(frames[..31].iter().all(|f| *f == "down"), "{what}: {line}");
        }
        assert!(
            in_bottom >= 240,
            "{what}: {in_bottom} samples in bottom's 300 ms"
        );
    }
}

#[test]
fn a_process_that_is_not_python_is_sampled_as_without_the_option() {
    require_root();
    let s = Scratch::new("python-not");
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
        "/bin/sh",
        "-c",
        "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("--python-sampling"), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let rows = stats_json(&report, "cpu_sample_sum");
    let samples: i64 = rows
        .iter()
        .map(|r| r["Self Samples"].as_i64().unwrap())
        .sum();
    assert!(samples > 50, "{samples} samples of a busy shell");
    assert!(!rows.iter().any(|r| r["Module"] == "[python]"), "{rows:?}");
    // Only the sources that lost something are listed.
    assert_eq!(lost_events(&metadata(&report)), Default::default());
}

/// CPython 3.12+ `-X perf` (docs/jit-maps.md): each Python function runs
/// through a trampoline of its own that the interpreter names in
/// `/tmp/perf-PID.map` (`py::function:file`); sampled without
/// `--python-sampling`, the trampoline frames are named from the map. Each
/// hot function's trampoline is on the stack while it runs, callees
/// included: its share of the process's samples is its measured time
/// (`middle`'s own and `leaf_b`'s under it) over the process's.
#[test]
fn python_perf_trampolines_are_named_from_the_perf_map() {
    require_root();
    for version in ["3.12", "3.13"] {
        let python = cpython(version);
        let what = python.display();
        let s = Scratch::new("python-xperf");
        let script = workload_source("hot.py");
        let script_s = script.to_str().unwrap();
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
            python.to_str().unwrap(),
            "-X",
            "perf",
            script_s,
        ]);
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
        // The interpreter leaves its map behind.
        let map = format!("/tmp/perf-{pid}.map");
        let _ = std::fs::remove_file(&map);
        let rows: Vec<Value> = stats_json(&report, "cpu_sample_sum")
            .into_iter()
            .filter(|r| r["Pid"].as_u64() == Some(pid))
            .collect();
        assert!(
            !rows.iter().any(|r| r["Module"] == "[python]"),
            "{what}: Python frames without --python-sampling"
        );
        let samples: i64 = rows
            .iter()
            .map(|r| r["Self Samples"].as_i64().unwrap())
            .sum();
        let process_ns = truth["process_ns"].as_f64().unwrap();
        let own = |f: &str| truth["self_ns"][f].as_f64().unwrap();
        for (f, ns) in [
            ("leaf_a", own("leaf_a")),
            ("leaf_b", own("leaf_b")),
            ("middle", own("middle") + own("leaf_b")),
        ] {
            let name = format!("py::{f}:{script_s}");
            let total: i64 = rows
                .iter()
                .filter(|r| {
                    r["Function"] == name.as_str()
                        && r["Module"] == format!("perf-{pid}.map").as_str()
                })
                .map(|r| r["Total Samples"].as_i64().unwrap())
                .sum();
            let got = total as f64 / samples as f64;
            let measured = ns / process_ns;
            eprintln!("{what}: {name}: {got:.3} of the samples, {measured:.3} measured");
            assert!(
                (got - measured).abs() <= 0.1 * measured,
                "{what}: {name} is on {got:.3} of the samples, {measured:.3} of the CPU time"
            );
        }
        // Nested calls in order: leaf_b's trampoline is under middle's.
        let base = s.path("r");
        let o = run(&[
            "export",
            "--type",
            "collapsed",
            "-o",
            base.to_str().unwrap(),
            report.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let folded = std::fs::read_to_string(base.with_extension("collapsed")).unwrap();
        let (a, b) = (
            format!("py::middle:{script_s}"),
            format!("py::leaf_b:{script_s}"),
        );
        let mut nested = 0;
        for line in folded.lines().filter(|l| l.contains(&b)) {
            let frames: Vec<&str> = line.rsplit_once(' ').unwrap().0.split(';').collect();
            let (at_a, at_b) = (
                frames.iter().position(|f| *f == a),
                frames.iter().position(|f| *f == b).unwrap(),
            );
            assert!(at_a.is_some_and(|m| m < at_b), "{what}: {line}");
            nested += 1;
        }
        assert!(nested > 0, "{what}: no stack with leaf_b");
        // Every trampoline is stepped through (Debian's 3.13 keeps no
        // frame pointers): the script's own `<module>` is outside nearly
        // every hot sample.
        let module = format!("py::<module>:{script_s}");
        let (mut hot, mut under_module) = (0u64, 0u64);
        for line in folded.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            let frames: Vec<&str> = stack.split(';').collect();
            let Some(inner) = frames.iter().rposition(|f| {
                ["leaf_a", "middle", "leaf_b"]
                    .iter()
                    .any(|h| *f == format!("py::{h}:{script_s}"))
            }) else {
                continue;
            };
            let n: u64 = n.parse().unwrap();
            hot += n;
            if frames[..inner].contains(&module.as_str()) {
                under_module += n;
            }
        }
        eprintln!("{what}: {under_module} of {hot} hot samples under {module}");
        assert!(
            under_module as f64 >= 0.9 * hot as f64,
            "{what}: only {under_module} of {hot} hot samples under {module}"
        );
    }
}

/// One frame of a wait's Python stack: function, file, line.
type WaitFrame = (String, String, Option<u64>);

/// The `python_switch_frames` stacks of `report` (Python stacks taken as
/// threads left the CPU to wait), by (tid, ts), innermost first, named.
fn wait_stacks(
    s: &Scratch,
    report: &std::path::Path,
) -> std::collections::BTreeMap<(u64, i64), Vec<WaitFrame>> {
    let base = s.path("waits");
    let o = run(&[
        "export",
        "--type",
        "jsonlines",
        "--tables",
        "python_switch_frames,strings",
        "-o",
        base.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut strings = std::collections::HashMap::new();
    let mut rows = Vec::new();
    for line in std::fs::read_to_string(base.with_extension("jsonl"))
        .unwrap()
        .lines()
    {
        let r: Value = serde_json::from_str(line).unwrap();
        if r["table"] == "strings" {
            strings.insert(
                r["id"].as_u64().unwrap(),
                r["value"].as_str().unwrap().to_string(),
            );
        } else {
            rows.push(r);
        }
    }
    let name = |v: &Value| {
        v.as_u64()
            .and_then(|id| strings.get(&id))
            .map_or_else(|| "?".to_string(), String::clone)
    };
    let mut stacks: std::collections::BTreeMap<(u64, i64), Vec<(u64, WaitFrame)>> =
        Default::default();
    for r in rows {
        stacks
            .entry((r["tid"].as_u64().unwrap(), r["ts"].as_i64().unwrap()))
            .or_default()
            .push((
                r["depth"].as_u64().unwrap(),
                (
                    name(&r["functionId"]),
                    name(&r["fileId"]),
                    r["line"].as_u64(),
                ),
            ));
    }
    stacks
        .into_iter()
        .map(|(k, mut f)| {
            f.sort_unstable_by_key(|(d, _)| *d);
            (k, f.into_iter().map(|(_, f)| f).collect())
        })
        .collect()
}

/// py-spy's `--idle` view: a thread blocked in `queue.get()` and one in
/// `time.sleep()` (tests/workloads/python_waits.py, which reads the lines
/// of its two calls with `inspect` and times each itself). Each thread's
/// waits carry the Python stack it blocked in (`python_switch_frames`):
/// the sleeping thread's with its `time.sleep` line innermost, the other's
/// with its `q.get()` line below frames of queue.py or threading.py; and
/// `python_wall_sum` gives each line the time the workload measured as
/// waiting time (the `q.get()` line as total: it is a caller), and almost
/// no on-CPU time.
#[test]
fn blocked_python_threads_wait_with_the_python_line_that_blocked() {
    require_root();
    let wait_s = 0.8;
    for python in python_interpreters() {
        let what = python.display();
        let s = Scratch::new("python-waits");
        let script = workload_source("python_waits.py");
        let report = s.path("r");
        let o = run(&[
            "profile",
            "-o",
            report.to_str().unwrap(),
            "--cpuctxsw",
            "process-tree",
            "-s",
            "process-tree",
            "--python-sampling",
            "true",
            python.to_str().unwrap(),
            script.to_str().unwrap(),
            &wait_s.to_string(),
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let truth: Value = serde_json::from_str(
            stdout(&o)
                .lines()
                .find_map(|l| l.strip_prefix("truth "))
                .expect("the script's truth line"),
        )
        .unwrap();
        let report = report.with_extension("asysrep");
        let script_name = script.file_name().unwrap().to_str().unwrap();
        let stacks = wait_stacks(&s, &report);
        let wall = stats_json(&report, "python_wall_sum");
        let get_function = "blocked_in_get";
        let sleep_function = "blocked_in_sleep";
        for (which, function) in [("get", get_function), ("sleep", sleep_function)] {
            let tid = truth[which]["tid"].as_u64().unwrap();
            let line = truth[which]["line"].as_u64().unwrap();
            let blocked = truth[which]["blocked_ns"].as_f64().unwrap();
            let is_call =
                |f: &WaitFrame| f.0 == function && f.1.ends_with(script_name) && f.2 == Some(line);
            let mine: Vec<&Vec<WaitFrame>> = stacks
                .iter()
                .filter(|((t, _), _)| *t == tid)
                .map(|(_, f)| f)
                .collect();
            let blocking: Vec<&&Vec<WaitFrame>> =
                mine.iter().filter(|f| f.iter().any(is_call)).collect();
            eprintln!(
                "{what}: {which} thread {tid}: {} wait stacks, {} at line {line}: {:?}",
                mine.len(),
                blocking.len(),
                blocking.first()
            );
            assert!(
                !blocking.is_empty(),
                "{what}: no wait of thread {tid} has {function} at line {line}: {mine:?}"
            );
            for frames in &blocking {
                match which {
                    // time.sleep is C: the caller's line is innermost.
                    "sleep" => assert!(is_call(&frames[0]), "{what}: {frames:?}"),
                    // Below the user's q.get(): Queue.get and Condition.wait.
                    _ => assert!(
                        frames[0].1.ends_with("/queue.py")
                            || frames[0].1.ends_with("/threading.py"),
                        "{what}: {frames:?}"
                    ),
                }
            }
            // The wall-time report: the line's waiting time is what the
            // workload measured (self for time.sleep's caller, total for
            // q.get()'s), its on-CPU time next to nothing.
            let row = wall
                .iter()
                .find(|r| {
                    r["Tid"].as_u64() == Some(tid)
                        && r["Function"] == function
                        && r["Line"].as_u64() == Some(line)
                })
                .unwrap_or_else(|| panic!("{what}: no python_wall_sum row of {function}:{line}"));
            let waiting = match which {
                "sleep" => row["Waiting Time (ns)"].as_f64().unwrap(),
                _ => row["Total Waiting Time (ns)"].as_f64().unwrap(),
            };
            let on_cpu = row["Total Wall Time (ns)"].as_f64().unwrap()
                - row["Total Waiting Time (ns)"].as_f64().unwrap();
            eprintln!(
                "{what}: {which}: waiting {:.1} ms of {:.1} ms measured, on CPU {:.1} ms",
                waiting / 1e6,
                blocked / 1e6,
                on_cpu / 1e6
            );
            assert!(
                (waiting - blocked).abs() <= 0.05 * blocked + 10e6,
                "{what}: {which}: {waiting} ns waiting, {blocked} ns measured: {row}"
            );
            assert!(on_cpu <= 5e6, "{what}: {which}: {on_cpu} ns on CPU: {row}");
            if which == "get" {
                // The wait itself is self time of the innermost frame, in
                // queue.py or threading.py.
                let inner: f64 = wall
                    .iter()
                    .filter(|r| {
                        r["Tid"].as_u64() == Some(tid)
                            && r["File"].as_str().is_some_and(|f| {
                                f.ends_with("/queue.py") || f.ends_with("/threading.py")
                            })
                    })
                    .filter_map(|r| r["Waiting Time (ns)"].as_f64())
                    .sum();
                assert!(
                    (inner - blocked).abs() <= 0.05 * blocked + 10e6,
                    "{what}: get: {inner} ns self waiting in queue.py/threading.py, {blocked} ns measured"
                );
            }
        }
    }
}
