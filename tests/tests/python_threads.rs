//! Python thread names (`threading.Thread.name`) with `--python-sampling`
//! (docs/python-stacks.md): ten named threads spin on five interpreters;
//! each thread's name, as the workload printed it with its native id, is in
//! the `python_thread_names` table, in `python_sample_sum`'s Thread column
//! and in the Perfetto export's thread track names; a name set while the
//! thread ran, a Cyrillic one, and one with a NUL and an escape (recorded
//! in their visible form) too.
use std::collections::{BTreeMap, HashMap};

use asys_tests::*;
use serde_json::Value;

/// The interpreters to check, as tests/python.rs's: Debian's 3.11.2,
/// pyenv's 3.11.7, Ubuntu noble's 3.12.3, Debian's 3.13.5 and Ubuntu
/// jammy's 3.10.12.
fn interpreters() -> Vec<std::path::PathBuf> {
    let pyenv = std::fs::canonicalize(pyenv().join("bin/python3")).unwrap();
    vec![
        "/usr/bin/python3.11".into(),
        pyenv,
        cpython("3.12"),
        cpython("3.13"),
        cpython("3.10"),
    ]
}

/// Prints the thread tracks of a Perfetto trace, read with Perfetto's own
/// protos, as JSON: [pid, tid, name] each.
const TRACKS: &str = r#"
import json, sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
trace = pb.Trace()
trace.ParseFromString(open(sys.argv[1], "rb").read())
out = []
for p in trace.packet:
    if p.WhichOneof("data") == "track_descriptor" and p.track_descriptor.HasField("thread"):
        t = p.track_descriptor.thread
        out.append([t.pid, t.tid, t.thread_name])
print(json.dumps(out, ensure_ascii=False))
"#;

#[test]
fn each_python_thread_is_shown_with_its_threading_name() {
    require_root();
    for python in interpreters() {
        let what = python.display().to_string();
        let s = Scratch::new("python-thread-names");
        let report = s.path("r");
        let o = run(&[
            "profile",
            "-o",
            report.to_str().unwrap(),
            "-s",
            "process-tree",
            "--python-sampling",
            "true",
            python.to_str().unwrap(),
            workload_source("python_thread_names.py").to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let out = stdout(&o);
        let truth: Vec<Value> = serde_json::from_str(
            out.lines()
                .find_map(|l| l.strip_prefix("truth "))
                .expect("the workload's truth line"),
        )
        .unwrap();
        // tid -> the names it had, in order, as recorded: the process's
        // controls in their visible form (text_safety::escaped_name).
        let visible = |n: &str| n.replace('\0', "\\x00").replace('\x1b', "\\x1b");
        let want: BTreeMap<u64, Vec<String>> = truth
            .iter()
            .map(|t| {
                let names = t["names"].as_array().unwrap();
                let names = names.iter().map(|n| visible(n.as_str().unwrap()));
                (t["tid"].as_u64().unwrap(), names.collect())
            })
            .collect();
        assert_eq!(want.len(), 11, "{what}: {truth:?}");
        assert!(
            want.values().any(|n| n == &["nul\\x00esc\\x1b"]),
            "{want:?}"
        );
        assert_eq!(want.values().filter(|n| n.len() == 2).count(), 1);
        let report = report.with_extension("asysrep");
        assert!(
            !stderr(&o).contains("thread names not read"),
            "{what}: {}",
            stderr(&o)
        );

        // The table: each thread's names, in the order first seen.
        let base = s.path("names");
        let o = run(&[
            "export",
            "--type",
            "jsonlines",
            "--tables",
            "python_thread_names,strings",
            "-o",
            base.to_str().unwrap(),
            report.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let mut strings = HashMap::new();
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
        rows.sort_by_key(|r| r["ts"].as_i64().unwrap());
        let mut table: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for r in &rows {
            let name = strings[&r["nameId"].as_u64().unwrap()].clone();
            table
                .entry(r["tid"].as_u64().unwrap())
                .or_default()
                .push(name);
        }
        for (tid, names) in &want {
            assert_eq!(
                table.get(tid),
                Some(names),
                "{what}: thread {tid}: {table:?}"
            );
        }
        // No other thread took a worker's name (the main thread is
        // `MainThread`).
        for (tid, names) in &table {
            assert!(
                want.contains_key(tid) || names == &["MainThread"],
                "{what}: thread {tid} named {names:?}"
            );
        }

        // python_sample_sum: every row of a worker's thread has its name
        // (the renamed one's: its first or its second), and each worker's
        // burn() has its self samples.
        let stats = stats_json(&report, "python_sample_sum");
        for (tid, names) in &want {
            let mine: Vec<&Value> = stats
                .iter()
                .filter(|r| r["Tid"].as_u64() == Some(*tid))
                .collect();
            assert!(!mine.is_empty(), "{what}: no row of thread {tid}");
            for r in &mine {
                let thread = r["Thread"].as_str().unwrap();
                assert!(names.iter().any(|n| n == thread), "{what}: {tid}: {r}");
            }
            // Its last name too: the renamed thread spun on 1.5 s after.
            let last = names.last().unwrap();
            assert!(
                mine.iter().any(|r| r["Thread"] == last.as_str()
                    && r["Function"] == "burn"
                    && r["Self Samples"].as_u64() > Some(0)),
                "{what}: thread {tid} ({last}): {mine:#?}"
            );
        }

        // Perfetto: each worker's thread track is named `NAME (command)`
        // with its last name.
        let o = run(&["export", "--type", "perfetto", report.to_str().unwrap()]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let trace = report.with_extension("pftrace");
        let o = std::process::Command::new(perfetto_python())
            .args(["-c", TRACKS])
            .arg(&trace)
            .finish();
        assert!(o.status.success(), "reading the trace: {}", stderr(&o));
        let tracks: Vec<Value> = serde_json::from_str(&stdout(&o)).unwrap();
        for (tid, names) in &want {
            let named: Vec<&str> = tracks
                .iter()
                .filter(|t| t[1].as_u64() == Some(*tid))
                .map(|t| t[2].as_str().unwrap())
                .collect();
            let last = names.last().unwrap();
            assert!(
                named.len() == 1
                    && named[0].starts_with(&format!("{last} ("))
                    && named[0].ends_with(')'),
                "{what}: thread {tid} ({last}): {named:?}"
            );
        }
        eprintln!(
            "{what}: {} name rows; {} python_sample_sum rows",
            rows.len(),
            stats.len()
        );
    }
}
