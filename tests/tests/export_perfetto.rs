//! `asys export --type perfetto|jsonlines|arrow`: the trace parsed with
//! Perfetto's own protobuf definitions (the `perfetto` PyPI package's
//! `perfetto_trace_pb2`), the Arrow files read by pyarrow and the JSON
//! lines by Python's json, checked against the workload's ground truth and
//! asys's own stats of the same report.
use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
};

use asys_tests::*;
use serde_json::Value;

/// Reads a trace with Perfetto's protos and prints what is in it as JSON:
/// tracks, slices (begin and end matched per track as Perfetto matches
/// them: events in time order, the file's order between equal times),
/// flows, counters, samples with their resolved stacks, sched switches.
const SUMMARY: &str = r#"
import json, sys
from collections import defaultdict
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
trace = pb.Trace()
trace.ParseFromString(open(sys.argv[1], "rb").read())
names, cats, funcs, frames, stacks, arg_names = {}, {}, {}, {}, {}, {}
tracks, events, counters, samples, switches, errors = {}, defaultdict(list), [], [], [], []
wakings = []
clocks = set()
for n, p in enumerate(trace.packet):
    if p.HasField("interned_data"):
        d = p.interned_data
        for x in d.event_names: names[x.iid] = x.name
        for x in d.event_categories: cats[x.iid] = x.name
        for x in d.debug_annotation_names: arg_names[x.iid] = x.name
        for x in d.function_names: funcs[x.iid] = x.str.decode()
        for x in d.frames: frames[x.iid] = funcs.get(x.function_name_id)
        for x in d.callstacks: stacks[x.iid] = [frames.get(f) for f in x.frame_ids]
    if p.HasField("timestamp"):
        clocks.add(p.timestamp_clock_id)
    kind = p.WhichOneof("data")
    if kind == "track_descriptor":
        d = p.track_descriptor
        t = {"uuid": d.uuid, "parent": d.parent_uuid, "name": d.name}
        if d.HasField("process"):
            t.update(kind="process", pid=d.process.pid, name=d.process.process_name)
        elif d.HasField("thread"):
            t.update(kind="thread", pid=d.thread.pid, tid=d.thread.tid, name=d.thread.thread_name)
        elif d.HasField("counter"):
            t.update(kind="counter", unit=d.counter.unit)
        else:
            t.update(kind="child")
        tracks[d.uuid] = t
    elif kind == "track_event":
        e = p.track_event
        if e.type == pb.TrackEvent.TYPE_COUNTER:
            counters.append({"track": e.track_uuid, "ts": p.timestamp, "value": e.counter_value})
        else:
            events[e.track_uuid].append((p.timestamp, n, e))
    elif kind == "perf_sample":
        s = p.perf_sample
        samples.append({"pid": s.pid, "tid": s.tid, "ts": p.timestamp,
                        "stack": stacks.get(s.callstack_iid) if s.HasField("callstack_iid") else None})
    elif kind == "ftrace_events":
        for e in p.ftrace_events.event:
            if e.HasField("sched_switch"):
                switches.append(e.timestamp)
            elif e.HasField("sched_waking"):
                w = e.sched_waking
                wakings.append([e.timestamp, p.ftrace_events.cpu, e.pid, w.pid, w.target_cpu])
slices = []
for track, evs in events.items():
    evs.sort(key=lambda x: (x[0], x[1]))
    open_ = []
    for ts, n, e in evs:
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            args = {arg_names[a.name_iid]: (a.int_value if a.HasField("int_value") else a.uint_value) for a in e.debug_annotations}
            s = {"track": track, "name": names.get(e.name_iid), "category": [cats.get(c) for c in e.category_iids],
                 "start": ts, "end": None, "depth": len(open_),
                 "parent": open_[-1]["index"] if open_ else None, "index": len(slices), "args": args,
                 "flows": list(e.flow_ids), "terminating": list(e.terminating_flow_ids)}
            slices.append(s)
            open_.append(s)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            if not open_:
                errors.append(f"an end with no slice open on track {track} at {ts}")
                continue
            open_.pop()["end"] = ts
    for s in open_:
        errors.append(f"slice {s['name']} on track {track} never ends")
print(json.dumps({"tracks": list(tracks.values()), "slices": slices, "counters": counters,
                  "samples": samples, "switches": len(switches), "errors": errors,
                  "wakings": sorted(wakings),
                  "clocks": sorted(clocks), "unknown_tracks": sorted(set(events) - set(tracks))}))
"#;

fn summary(trace: &Path) -> Value {
    let o = Command::new(perfetto_python())
        .args(["-c", SUMMARY])
        .arg(trace)
        .finish();
    assert!(o.status.success(), "reading the trace: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("the summary is JSON")
}

fn export(args: &[&str], report: &Path) -> std::process::Output {
    let mut a = vec!["export"];
    a.extend_from_slice(args);
    a.push(report.to_str().unwrap());
    run(&a)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The rows a report's metadata says each table has.
fn table_rows(report: &Path) -> BTreeMap<String, u64> {
    metadata(report)["tables"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), u(v)))
        .collect()
}

#[test]
fn the_perfetto_trace_has_the_workloads_tracks_calls_ranges_flows_counters_samples_and_switches() {
    let s = Scratch::new("export-perfetto");
    let p = profile_workload(
        &s,
        &[
            "-t",
            "hggc,hgtx,osrt",
            "-s",
            "process-tree",
            "--cpuctxsw",
            "process-tree",
        ],
        "train_step",
        &["5", "8192"],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let truth = ground_truth(&p.truth);
    let o = export(&["--type", "perfetto"], &p.report);
    assert!(o.status.success(), "{}", stderr(&o));
    let trace = p.report.with_extension("pftrace");
    let sum = summary(&trace);
    assert_eq!(sum["errors"], Value::Array(vec![]), "{}", sum["errors"]);
    assert_eq!(sum["unknown_tracks"], Value::Array(vec![]));
    // Every timed packet is on CLOCK_MONOTONIC (BuiltinClock 3).
    assert_eq!(sum["clocks"], serde_json::json!([3]));

    let tracks = sum["tracks"].as_array().unwrap();
    let slices = sum["slices"].as_array().unwrap();
    let pid = u(&truth[0]["pid"]);
    let by_uuid: BTreeMap<u64, &Value> = tracks.iter().map(|t| (u(&t["uuid"]), t)).collect();

    // One process track for the workload, named by its command, and one
    // thread track (with pid and tid) for each thread that made a call.
    let processes: Vec<&Value> = tracks
        .iter()
        .filter(|t| t["kind"] == "process" && u(&t["pid"]) == pid)
        .collect();
    assert_eq!(processes.len(), 1, "{processes:?}");
    assert_eq!(processes[0]["name"], "train_step");
    let process_uuid = u(&processes[0]["uuid"]);
    let thread_of: BTreeMap<u64, u64> = tracks
        .iter()
        .filter(|t| t["kind"] == "thread" && u(&t["pid"]) == pid)
        .map(|t| (u(&t["tid"]), u(&t["uuid"])))
        .collect();
    let calling: BTreeSet<u64> = truth.iter().map(|t| u(&t["tid"])).collect();
    for tid in &calling {
        assert!(thread_of.contains_key(tid), "no track for thread {tid}");
    }
    let thread_tracks = tracks
        .iter()
        .filter(|t| t["kind"] == "thread" && u(&t["pid"]) == pid)
        .count();
    assert_eq!(thread_tracks, thread_of.len(), "one track per thread");

    // A track per device stream, under the process, as the activity has them.
    let ppu = stats_json(&p.report, "hggc_ppu_trace");
    let want_streams: BTreeSet<String> = ppu
        .iter()
        .map(|r| format!("PPU {} stream {}", r["Device"], r["Strm"]))
        .collect();
    let streams: BTreeMap<String, u64> = tracks
        .iter()
        .filter(|t| t["name"].as_str().is_some_and(|n| n.contains(" stream ")))
        .map(|t| {
            assert_eq!(u(&t["parent"]), process_uuid);
            (t["name"].as_str().unwrap().to_string(), u(&t["uuid"]))
        })
        .collect();
    assert_eq!(
        streams.keys().cloned().collect::<BTreeSet<_>>(),
        want_streams
    );

    // Each hggc call of the workload exactly once, on its thread's track,
    // with its correlation id.
    let hggc: Vec<&Value> = slices
        .iter()
        .filter(|s| s["category"][0] == "hggc_api")
        .collect();
    let truth_hggc: Vec<&Value> = truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().starts_with("hggc"))
        .collect();
    let key = |name: &Value, tid: u64, corr: &Value| format!("{name} tid={tid} corr={corr}");
    let mut want: Vec<String> = truth_hggc
        .iter()
        .map(|t| key(&t["api"], u(&t["tid"]), &t["corr"]))
        .collect();
    want.sort();
    let tid_of_track: BTreeMap<u64, u64> = thread_of.iter().map(|(&t, &u)| (u, t)).collect();
    let mut got: Vec<String> = hggc
        .iter()
        .map(|s| {
            let tid = *tid_of_track
                .get(&u(&s["track"]))
                .unwrap_or_else(|| panic!("{} is not on a thread track", s["name"]));
            key(&s["name"], tid, &s["args"]["correlationId"])
        })
        .collect();
    got.sort();
    assert_eq!(got, want);
    // The osrt calls too: as many slices as the report has rows.
    let rows = table_rows(&p.report);
    let osrt = slices
        .iter()
        .filter(|s| s["category"][0] == "osrt_api")
        .count() as u64;
    assert_eq!(osrt, rows["osrt_api"]);
    assert!(osrt > 0);

    // Nesting: every slice lies inside its parent; the hgtx ranges nest as
    // the workload pushed them, and the launches inside "forward" have it
    // as an ancestor.
    for s in slices {
        if let Some(parent) = s["parent"].as_u64() {
            let parent = &slices[parent as usize];
            assert!(
                u(&s["start"]) >= u(&parent["start"]) && u(&s["end"]) <= u(&parent["end"]),
                "{} is not inside {}",
                s["name"],
                parent["name"]
            );
        }
    }
    let ranges: Vec<&Value> = slices
        .iter()
        .filter(|s| {
            s["category"][0] == "hgtx_api" && thread_of.values().any(|&t| t == u(&s["track"]))
        })
        .collect();
    let pushes = truth
        .iter()
        .filter(|t| t["api"] == "hgtxRangePushA")
        .count();
    assert_eq!(ranges.len(), pushes);
    let ancestors = |s: &Value| {
        let mut out = Vec::new();
        let mut at = s["parent"].as_u64();
        while let Some(i) = at {
            out.push(slices[i as usize]["name"].as_str().unwrap().to_string());
            at = slices[i as usize]["parent"].as_u64();
        }
        out
    };
    // The truth's calls in order, with the ranges open around each.
    let mut open: Vec<String> = Vec::new();
    let mut inside_forward = 0;
    for t in &truth {
        match t["api"].as_str().unwrap() {
            "hgtxRangePushA" => open.push(t["message"].as_str().unwrap().to_string()),
            "hgtxRangePop" => {
                open.pop();
            }
            "hggcLaunchKernel" if open.last().is_some_and(|r| r == "forward") => {
                let s = hggc
                    .iter()
                    .find(|s| {
                        s["name"] == "hggcLaunchKernel" && s["args"]["correlationId"] == t["corr"]
                    })
                    .unwrap();
                let a = ancestors(s);
                assert_eq!(a, ["forward", "train_step"], "launch {}", t["corr"]);
                inside_forward += 1;
            }
            _ => {}
        }
    }
    assert!(inside_forward > 0);
    // The hgtx calls themselves are on their own track under the thread.
    let hgtx_calls = slices
        .iter()
        .filter(|s| {
            s["category"][0] == "hgtx_api" && by_uuid[&u(&s["track"])]["name"] == "HGTX calls"
        })
        .count() as u64;
    assert_eq!(hgtx_calls, rows["hgtx_api"]);

    // Flows: every kernel, copy and memset on a stream track ends the flow
    // its runtime call started, and that call has its correlation id.
    let device: Vec<&Value> = slices
        .iter()
        .filter(|s| streams.values().any(|&t| t == u(&s["track"])))
        .collect();
    assert_eq!(device.len() as u64, rows["hggc_activity"]);
    let kernels = device
        .iter()
        .filter(|s| s["category"][0] == "kernel")
        .count();
    let launches = truth
        .iter()
        .filter(|t| t["api"] == "hggcLaunchKernel" && t["ret"] == 0)
        .count();
    assert_eq!(kernels, launches);
    let starts: BTreeMap<u64, &Value> = slices
        .iter()
        .flat_map(|s| {
            s["flows"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |f| (u(f), s))
        })
        .collect();
    for d in &device {
        let ends = d["terminating"].as_array().unwrap();
        assert_eq!(ends.len(), 1, "{d}");
        let call = starts
            .get(&u(&ends[0]))
            .unwrap_or_else(|| panic!("no call starts the flow to {}", d["name"]));
        assert_eq!(call["args"]["correlationId"], d["args"]["correlationId"]);
        let want = match d["category"][0].as_str().unwrap() {
            "kernel" => "hggcLaunchKernel",
            "memcpy" => "hggcMemcpy",
            _ => "hggcMemset",
        };
        assert!(
            call["name"].as_str().unwrap().starts_with(want),
            "{} from {}",
            d["name"],
            call["name"]
        );
        assert!(u(&call["start"]) <= u(&d["start"]));
    }

    // Counters: device and pinned memory in use, the values and times of
    // device_memory_usage_detail.
    let detail = stats_json(&p.report, "device_memory_usage_detail");
    assert!(!detail.is_empty());
    let mut want: Vec<String> = detail
        .iter()
        .map(|r| {
            let track = if r["Kind"] == "device" {
                format!("PPU {} memory in use", r["Device"])
            } else {
                "Pinned host memory in use".to_string()
            };
            format!("{track} {} {}", r["Time (ns)"], r["Total (B)"])
        })
        .collect();
    want.sort();
    let mut got: Vec<String> = sum["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let t = by_uuid[&u(&c["track"])];
            assert_eq!(t["unit"], 3, "bytes");
            format!("{} {} {}", t["name"].as_str().unwrap(), c["ts"], c["value"])
        })
        .collect();
    got.sort();
    assert_eq!(got, want);

    // CPU samples: as many as the report has, each with its stack.
    let samples = sum["samples"].as_array().unwrap();
    assert!(rows["cpu_samples"] > 0);
    assert_eq!(samples.len() as u64, rows["cpu_samples"]);
    let frames: u64 = samples
        .iter()
        .map(|s| s["stack"].as_array().map_or(0, |f| f.len() as u64))
        .sum();
    assert_eq!(frames, rows["cpu_sample_stacks"]);
    for s in samples {
        let stack = s["stack"].as_array().expect("each sample has a stack");
        assert!(stack.iter().all(Value::is_string), "{s}");
    }

    // Scheduling: one sched_switch per switch recorded.
    assert!(rows["sched"] > 0);
    assert_eq!(u(&sum["switches"]), rows["sched"]);
    // Wake-ups as ftrace sched_waking events: (time, CPU, waker, wakee,
    // target CPU), as the report's rows (read by pyarrow) have them.
    let mut want: Vec<Vec<i64>> = report_rows(&s, &p.report, "sched_wakeups")
        .iter()
        .map(|r| {
            ["ts", "cpu", "wakerTid", "wakeeTid", "targetCpu"]
                .iter()
                .map(|k| r[*k].as_i64().unwrap())
                .collect()
        })
        .collect();
    want.sort();
    assert!(!want.is_empty(), "no wake-ups recorded");
    let got: Vec<Vec<i64>> = serde_json::from_value(sum["wakings"].clone()).unwrap();
    assert_eq!(got, want);

    // The target exists now: refused without -f, replaced with it.
    let o = export(&["--type", "perfetto"], &p.report);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    let o = export(&["--type", "perfetto", "-f", "true"], &p.report);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Row counts of each Arrow file of a folder, read by pyarrow.
const ARROW_ROWS: &str = r#"
import json, os, sys
import pyarrow.ipc as ipc
d = sys.argv[1]
out = {}
for f in sorted(os.listdir(d)):
    t = ipc.open_file(os.path.join(d, f)).read_all()
    out[f[: -len(".arrow")]] = {"rows": t.num_rows, "columns": t.column_names}
print(json.dumps(out))
"#;

/// Row counts of each table of a parquetdir export, read by pyarrow as the
/// hive-partitioned dataset it is.
const PARQUETDIR_ROWS: &str = r#"
import json, os, sys
import pyarrow.dataset as ds
d = sys.argv[1]
print(json.dumps({t: ds.dataset(os.path.join(d, t), format="parquet", partitioning="hive").count_rows()
                  for t in sorted(os.listdir(d))}))
"#;

/// target/bench/duckdb-venv's python (pyarrow), made by `cargo xtask test`.
fn data_python() -> PathBuf {
    let p = std::env::var_os("ASYS_DATA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/bench/duckdb-venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask test`",
        p.display()
    );
    p
}

#[test]
fn arrow_and_jsonlines_exports_hold_every_row_of_every_table() {
    let s = Scratch::new("export-arrow-jsonl");
    let p = profile_workload(
        &s,
        &[
            "-t",
            "hggc,hgtx",
            "-s",
            "process-tree",
            // The other tables too: wake-ups and kernel stacks, host
            // memory, PPU and NIC metrics.
            "--cpuctxsw",
            "process-tree",
            "--host-memory-sampling",
            "true",
            "--ppu-metrics-device",
            "all",
            "--ppu-metrics-frequency",
            "100",
            "--nic-metrics",
            "true",
            "--nic-device-include",
            "lo",
        ],
        // Long enough (3.3 s) for several samples of each metric.
        "busy_idle",
        &[s.path("periods.log").to_str().unwrap()],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let truth = ground_truth(&p.truth);
    let rows = table_rows(&p.report);
    for table in [
        "sched_wakeups",
        "kernel_stacks",
        "host_memory",
        "ppu_metrics",
        "nic_metrics",
    ] {
        assert!(
            rows.get(table).is_some_and(|&n| n > 0),
            "no {table} rows in the report: {rows:?}"
        );
    }
    let o = export(&["--type", "arrow,jsonlines,parquetdir"], &p.report);
    assert!(o.status.success(), "{}", stderr(&o));

    // parquetdir: each table's partitions, read by pyarrow, have its rows.
    let o = Command::new(data_python())
        .args(["-c", PARQUETDIR_ROWS])
        .arg(p.report.with_extension("parquetdir"))
        .finish();
    assert!(o.status.success(), "pyarrow: {}", stderr(&o));
    let got: BTreeMap<String, u64> = serde_json::from_str(&stdout(&o)).unwrap();
    let nonempty: BTreeMap<String, u64> = rows
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    let got_nonempty: BTreeMap<String, u64> = got.into_iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(got_nonempty, nonempty, "parquetdir");

    // Arrow: one IPC file per table, as many rows as the report has.
    let dir = p.report.with_extension("arrow");
    let o = Command::new(data_python())
        .args(["-c", ARROW_ROWS])
        .arg(&dir)
        .finish();
    assert!(o.status.success(), "pyarrow: {}", stderr(&o));
    let arrow: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let got: BTreeMap<String, u64> = arrow
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), u(&v["rows"])))
        .collect();
    assert_eq!(got, rows);
    let hggc_calls = truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().starts_with("hggc"))
        .count() as u64;
    assert_eq!(got["hggc_api"], hggc_calls);
    assert!(
        arrow["hggc_api"]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "correlationId")
    );

    // JSON lines: one object a row, named by table; the hggc calls' names
    // and correlation ids are the workload's.
    let text = std::fs::read_to_string(p.report.with_extension("jsonl")).unwrap();
    let mut per_table: BTreeMap<String, u64> = BTreeMap::new();
    let mut corrs: Vec<u64> = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("each line is JSON");
        let table = v["table"].as_str().expect("a table key").to_string();
        if table == "hggc_api" {
            corrs.push(u(&v["correlationId"]));
        }
        *per_table.entry(table).or_default() += 1;
    }
    // Tables with no rows have no lines.
    let nonempty: BTreeMap<String, u64> = rows.into_iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(per_table, nonempty);
    corrs.sort_unstable();
    let mut want: Vec<u64> = truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().starts_with("hggc"))
        .map(|t| u(&t["corr"]))
        .collect();
    want.sort_unstable();
    assert_eq!(corrs, want);

    // Exists now: refused without -f (the folder and the file alike).
    for t in ["arrow", "jsonlines"] {
        let o = export(&["--type", t], &p.report);
        assert!(!o.status.success(), "{t}");
        assert!(stderr(&o).contains("already exists"), "{t}: {}", stderr(&o));
    }
    let o = export(&["--type", "arrow", "-f", "true"], &p.report);
    assert!(o.status.success(), "{}", stderr(&o));

    // An unknown table is one line of error, and nothing is written.
    let o = export(
        &["--type", "perfetto", "--tables", "hggc_api,nosuch"],
        &p.report,
    );
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("nosuch"), "{}", stderr(&o));
    assert!(!p.report.with_extension("pftrace").exists());
    // --tables keeps a trace to what it names: the calls, not the stacks.
    let o = export(&["--type", "perfetto", "--tables", "hggc_api"], &p.report);
    assert!(o.status.success(), "{}", stderr(&o));
    let sum = summary(&p.report.with_extension("pftrace"));
    let slices = sum["slices"].as_array().unwrap();
    assert_eq!(slices.len() as u64, hggc_calls);
    assert!(slices.iter().all(|s| s["category"][0] == "hggc_api"));
    assert_eq!(sum["samples"], serde_json::json!([]));
}
