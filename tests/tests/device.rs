//! Device activity through the injection library, against the simulated
//! runtime's ground truth (every API call logs its correlation id).
use std::collections::{BTreeMap, HashMap};

use asys_tests::*;
use serde_json::Value;

/// APIs that put work on the device when they succeed.
const DEVICE_APIS: &[&str] = &[
    "hggcLaunchKernel",
    "hggcMemcpy",
    "hggcMemcpyAsync",
    "hggcMemset",
    "hggcMemsetAsync",
];

struct Run {
    truth: Vec<Value>,
    api: Vec<Value>,
    device: Vec<Value>,
    meta: Value,
    stderr: String,
    _scratch: Scratch,
}

fn profile(workload_name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    require_root();
    let s = Scratch::new(&format!("dev-{workload_name}"));
    let truth = s.path("truth.jsonl");
    let report = s.path("r");
    let mut cmd = asys();
    cmd.args(["profile", "-t", "hggc", "-o", report.to_str().unwrap()])
        .arg(workload(workload_name))
        .args(args)
        .env("HGGC_SIM_GROUND_TRUTH", &truth);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.finish();
    assert!(
        out.status.success(),
        "asys profile failed: {}",
        stderr(&out)
    );
    let report = report.with_extension("asysrep");
    Run {
        truth: ground_truth_of(&truth, "hggc"),
        api: stats_json(&report, "hggc_api_trace"),
        device: stats_json(&report, "hggc_ppu_trace"),
        meta: metadata(&report),
        stderr: stderr(&out),
        _scratch: s,
    }
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn check_device_work_matches_truth(run: &Run) {
    // Host calls carry the runtime's correlation ids.
    assert_same_calls(
        run.truth
            .iter()
            .map(|t| format!("{} corr={}", t["api"].as_str().unwrap(), t["corr"]))
            .collect(),
        run.api
            .iter()
            .map(|r| format!("{} corr={}", r["Name"].as_str().unwrap(), r["CorrId"]))
            .collect(),
    );
    let issued: Vec<&Value> = run
        .truth
        .iter()
        .filter(|t| DEVICE_APIS.contains(&t["api"].as_str().unwrap()) && t["ret"] == 0)
        .collect();
    assert!(!issued.is_empty());
    assert_eq!(
        run.device.len(),
        issued.len(),
        "one device record per successful device call"
    );
    let by_corr: HashMap<i64, &Value> = run.device.iter().map(|d| (i(&d["CorrId"]), d)).collect();
    assert_eq!(
        by_corr.len(),
        run.device.len(),
        "correlation ids are unique"
    );
    for t in issued {
        let d = by_corr
            .get(&i(&t["corr"]))
            .unwrap_or_else(|| panic!("no device record for {t}"));
        match t["api"].as_str().unwrap() {
            "hggcLaunchKernel" => {
                assert_eq!(d["Name"], t["kernel"], "{t}");
                assert_eq!(
                    [&d["GrdX"], &d["GrdY"], &d["GrdZ"]].map(i).to_vec(),
                    t["grid"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(i)
                        .collect::<Vec<_>>()
                );
                assert_eq!(
                    [&d["BlkX"], &d["BlkY"], &d["BlkZ"]].map(i).to_vec(),
                    t["block"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(i)
                        .collect::<Vec<_>>()
                );
            }
            api if api.starts_with("hggcMemcpy") => {
                assert_eq!(i(&d["Bytes (B)"]), i(&t["bytes"]), "{t}");
                let kind = [
                    "Host-to-Host",
                    "Host-to-Device",
                    "Device-to-Host",
                    "Device-to-Device",
                ][i(&t["kind"]) as usize];
                assert_eq!(d["CopyKind"], kind, "{t}");
            }
            _ => {
                assert_eq!(d["Name"], "[HGGC memset]");
                assert_eq!(i(&d["Bytes (B)"]), i(&t["bytes"]), "{t}");
            }
        }
        // Device work cannot start before the host call that issued it
        // (allowing for the 10 µs the clock conversion may be off).
        assert!(
            i(&d["Start (ns)"]) >= i(&t["start"]) - 10_000,
            "{t} ran before it was issued: {d}"
        );
    }
}

#[test]
fn every_kernel_copy_and_memset_appears_once_correlated_to_its_call() {
    let run = profile("train_step", &["5", "8192"], &[]);
    check_device_work_matches_truth(&run);
    assert_eq!(run.meta["device_activity"], true);
    // 5 steps: 15 kernels, 10 copies, 1 memset.
    let kinds: BTreeMap<String, usize> = run.device.iter().fold(BTreeMap::new(), |mut m, d| {
        *m.entry(d["Name"].as_str().unwrap().to_string())
            .or_default() += 1;
        m
    });
    assert_eq!(kinds["forward_kernel"], 5);
    assert_eq!(kinds["[HGGC memcpy Host-to-Device]"], 5);
    assert_eq!(kinds["[HGGC memcpy Device-to-Host]"], 5);
    assert_eq!(kinds["[HGGC memset]"], 1);
}

#[test]
fn device_work_of_many_streams_runs_in_each_streams_order() {
    let run = profile("multi_stream", &["4", "20"], &[]);
    check_device_work_matches_truth(&run);
    let mut streams: BTreeMap<i64, Vec<&Value>> = BTreeMap::new();
    for d in &run.device {
        streams.entry(i(&d["Strm"])).or_default().push(d);
    }
    assert_eq!(streams.len(), 4, "one stream per thread");
    for (stream, mut recs) in streams {
        assert_eq!(recs.len(), 60);
        // Issue order (correlation) is execution order, without overlap.
        recs.sort_by_key(|d| i(&d["CorrId"]));
        for w in recs.windows(2) {
            let end0 = i(&w[0]["Start (ns)"]) + i(&w[0]["Duration (ns)"]);
            assert!(
                end0 <= i(&w[1]["Start (ns)"]),
                "stream {stream}: {} overlaps {}",
                w[0],
                w[1]
            );
        }
    }
}

#[test]
fn device_clock_is_converted_within_10_microseconds() {
    let offset: i64 = 5_000_000_000_777;
    let run = profile(
        "train_step",
        &["2", "1024"],
        &[("HGGC_SIM_CLOCK_OFFSET_NS", &offset.to_string())],
    );
    let offsets = run.meta["device_clock_offsets"].as_object().unwrap();
    assert_eq!(offsets.len(), 1);
    let measured = offsets.values().next().unwrap().as_i64().unwrap();
    assert!(
        (measured - offset).abs() < 10_000,
        "measured offset {measured}, true {offset}"
    );
    check_device_work_matches_truth(&run);
}

#[test]
fn an_injection_library_that_cannot_load_leaves_a_host_trace_and_a_warning() {
    let run = profile(
        "train_step",
        &["2", "1024"],
        &[("HGGC_INJECTION64_PATH", "/nonexistent/libinject.so")],
    );
    assert!(
        run.stderr
            .contains("asys: warning: the runtime did not load asys's injection library"),
        "{}",
        run.stderr
    );
    assert_eq!(run.meta["device_activity"], false);
    assert!(run.device.is_empty());
    assert_same_calls(
        run.truth.iter().map(truth_key).collect(),
        run.api.iter().map(trace_key).collect(),
    );
}

#[test]
fn device_summaries_count_what_ran() {
    require_root();
    let s = Scratch::new("dev-sum");
    let truth = s.path("truth.jsonl");
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-o", report.to_str().unwrap()])
        .arg(workload("train_step"))
        .args(["4", "4096"])
        .env("HGGC_SIM_GROUND_TRUTH", &truth)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let kern = stats_json(&report, "hggc_ppu_kern_sum");
    assert_eq!(kern.len(), 3);
    assert!(kern.iter().all(|k| k["Instances"] == 4));
    let size = stats_json(&report, "hggc_ppu_mem_size_sum");
    let h2d = size
        .iter()
        .find(|r| r["Operation"] == "[HGGC memcpy Host-to-Device]")
        .unwrap();
    assert_eq!(h2d["Count"], 4);
    assert!((h2d["Total (MB)"].as_f64().unwrap() - 4.0 * 4096.0 * 4.0 / 1e6).abs() < 1e-3);
    let time = stats_json(&report, "hggc_ppu_mem_time_sum");
    assert_eq!(
        time.iter()
            .map(|r| r["Count"].as_i64().unwrap())
            .sum::<i64>(),
        4 + 4 + 1
    );
}

#[test]
fn the_hggc_trace_set_selects_apis_and_activity() {
    require_root();
    for (mode, set) in [
        ("entry", "kernel-api,memory-activity"),
        ("site", "kernel-api,memory-activity"),
    ] {
        let s = Scratch::new("traceset");
        let report = s.path("r");
        let o = asys()
            .args([
                "profile",
                "--api-probes",
                mode,
                "--hggc-trace-set",
                set,
                "-o",
                report.to_str().unwrap(),
            ])
            .arg(workload("train_step"))
            .args(["3", "256"])
            .finish();
        assert!(o.status.success(), "{}", stderr(&o));
        let report = report.with_extension("asysrep");
        let api: std::collections::BTreeSet<String> = stats_json(&report, "hggc_api_sum")
            .iter()
            .map(|r| r["Name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(api, ["hggcLaunchKernel".to_string()].into(), "{mode}");
        let device = stats_json(&report, "hggc_ppu_trace");
        assert!(!device.is_empty());
        assert!(
            device
                .iter()
                .all(|d| d["Name"].as_str().unwrap().starts_with("[HGGC mem")),
            "{mode}: {device:?}"
        );
    }
}
