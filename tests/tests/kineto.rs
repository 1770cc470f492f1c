//! `asys export --type kineto` read by Meta's Holistic Trace Analysis (the
//! `HolisticTraceAnalysis` PyPI package, installed by `cargo xtask test` in
//! target/hta-venv): four pccl ranks, each recorded by its own `asys
//! profile`, and a real CUDA runtime client with NVTX ranges. HTA's
//! results are checked against asys's own reports of the same recordings:
//! the kernel breakdown against `hggc_ppu_kern_sum` (and its memory kernels
//! against `hggc_ppu_mem_time_sum`), the idle time against the `ppu_gaps`
//! findings, the temporal breakdown against the device span of
//! `hggc_ppu_trace`, the runtime calls against `hggc_api_sum`; and the
//! iterations `--kineto-steps` makes of hgtx ranges (train_step) and of
//! NVTX ranges (the CUDA client) against asys's range and trace reports.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use asys_tests::*;
use serde_json::Value;

const NRANKS: u32 = 4;

/// Runs HTA's analyses on the traces of a folder and prints what they
/// give as JSON. HTA_DISABLE_NS_ROUNDING keeps the traces' nanoseconds
/// (HTA otherwise rounds each event inwards to whole microseconds).
const HTA: &str = r#"
import json, math, os, sys, logging
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
from hta.configs.parser_config import ParserConfig
from hta.trace_analysis import TraceAnalysis
logging.disable(logging.WARNING)
# The communication args (Collective name, ...) besides the default ones.
cfg = ParserConfig.get_default_cfg()
cfg.set_args(cfg.get_args() + ParserConfig.ARGS_COMMUNICATION)
ParserConfig.set_default_cfg(cfg)
t = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(int(r) for r in t.t.get_ranks())
sym = t.t.symbol_table.get_sym_table()
out = {"ranks": ranks, "iterations": {}, "events": {}, "unlinked_gpu": {}, "collectives": {}}
for rank in ranks:
    df = t.t.get_trace(rank)
    out["iterations"][rank] = [int(i) for i in t.t.get_iterations(rank)]
    counts = {}
    for (cat, name, it), n in df.groupby(["cat", "name", "iteration"]).size().items():
        counts.setdefault(sym[cat] + " " + sym[name], {})[str(int(it))] = int(n)
    out["events"][rank] = counts
    gpu = df[df["stream"].ne(-1)]
    out["unlinked_gpu"][rank] = int((gpu["index_correlation"] <= 0).sum())
    coll = {}
    if "collective_name" in gpu.columns:
        comm = gpu[gpu["collective_name"] != ""].sort_values("ts")
        for name, n in comm.groupby("collective_name").size().items():
            coll[name] = int(n)
        out.setdefault("messages", {})[rank] = [
            [r["collective_name"], int(r["in_msg_nelems"]), int(r["out_msg_nelems"]),
             r["msg_dtype"], int(r["group_size"])] for _, r in comm.iterrows()]
    out["collectives"][rank] = coll
if sys.argv[2] == "gpu":
    _, kernels = t.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0,
                                            num_kernels=1_000_000, include_memory_kernels=True)
    out["kernels"] = [{"rank": int(r["rank"]), "name": r["name"], "type": r["kernel_type"],
                       "sum_us": float(r["sum (us)"])} for _, r in kernels.iterrows()]
    temporal = t.get_temporal_breakdown(visualize=False)
    out["temporal"] = [{k: float(v) for k, v in r.items()} for _, r in temporal.iterrows()]
    idle, _ = t.get_idle_time_breakdown(ranks=ranks, visualize=False)
    out["idle"] = [{"rank": int(r["rank"]), "stream": int(r["stream"]), "category": r["idle_category"],
                    "idle_us": float(r["idle_time"])} for _, r in idle.iterrows()]
if sys.argv[2] == "launch":
    stats = t.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    out["launches"] = {r: [{k: float(v) for k, v in row.items()} for _, row in df.iterrows()]
                       for r, df in stats.items()}
    queue = t.get_queue_length_time_series(ranks=ranks)
    out["queue_max"] = {r: {int(st): int(g["queue_length"].max()) for st, g in df.groupby("stream")}
                        for r, df in queue.items()}
if sys.argv[2] == "comm":
    # PCCL's kernels, named as NCCL's, are communication to HTA.
    ov = t.get_comm_comp_overlap(visualize=False)
    out["overlap"] = {str(int(r["rank"])): (None if math.isnan(r["comp_comm_overlap_pctg"])
                                            else float(r["comp_comm_overlap_pctg"]))
                      for _, r in ov.iterrows()}
    _, kernels = t.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0,
                                            num_kernels=1_000_000, include_memory_kernels=False)
    out["kernel_types"] = [{"rank": int(r["rank"]), "name": r["name"], "type": r["kernel_type"]}
                           for _, r in kernels.iterrows()]
print(json.dumps(out))
"#;

fn hta(dir: &Path, gpu: bool) -> Value {
    hta_mode(dir, if gpu { "gpu" } else { "cpu" })
}

/// [`HTA`] with its analyses of `mode`: "cpu" (none), "gpu" (kernel,
/// temporal and idle time breakdowns), "launch" (launch statistics and
/// queue lengths), "comm" (communication/computation overlap, and the
/// kernels' types).
fn hta_mode(dir: &Path, mode: &str) -> Value {
    let o = Command::new(hta_python())
        .args(["-c", HTA])
        .arg(dir)
        .arg(mode)
        .finish();
    assert!(o.status.success(), "HTA: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

/// `--kineto-cuda-names true`: HGGC's calls as CUDA's, PCCL's kernels as
/// NCCL's.
const CUDA_NAMES: &[&str] = &["--kineto-cuda-names", "true"];

/// Exports `reports` with `options` as one job's Kineto traces,
/// `job_REPORT.pt.trace.json` in a new folder `name` of `s`; returns it.
fn export_job(s: &Scratch, name: &str, options: &[&str], reports: &[PathBuf]) -> PathBuf {
    let dir = s.path(name);
    std::fs::create_dir(&dir).unwrap();
    let base = dir.join("job");
    let mut args = vec!["export", "-t", "kineto"];
    args.extend(options);
    args.extend(["-o", base.to_str().unwrap()]);
    args.extend(reports.iter().map(|r| r.to_str().unwrap()));
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    dir
}

/// A collective as pccl_ranks logged it ("workload-collective RANK OP DTYPE
/// IN_BYTES OUT_BYTES": its buffers' sizes), in call order.
#[derive(Debug)]
struct Logged {
    op: String,
    dtype: String,
    in_bytes: u64,
    out_bytes: u64,
}

fn logged_collectives(out: &str) -> Vec<Logged> {
    out.lines()
        .filter_map(|l| l.strip_prefix("workload-collective "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Logged {
                op: w[1].into(),
                dtype: w[2].into(),
                in_bytes: w[3].parse().unwrap(),
                out_bytes: w[4].parse().unwrap(),
            }
        })
        .collect()
}

/// Runs the ranks of pccl_ranks, each under its own `asys profile` with
/// `RANK=R` (as tests/ranks.rs does); returns their reports in rank order,
/// and the collectives each rank logged.
fn four_ranks(s: &Scratch) -> Vec<(PathBuf, Vec<Logged>)> {
    pccl_ranks(s, NRANKS, &[])
}

/// [`four_ranks`] with `nranks` ranks and `env` set for the workload.
fn pccl_ranks(s: &Scratch, nranks: u32, env: &[(&str, &str)]) -> Vec<(PathBuf, Vec<Logged>)> {
    require_root();
    let id = s.path("pccl.id");
    let runs: Vec<_> = (0..nranks)
        .map(|r| {
            let report = s.path(&format!("rank{r}"));
            let mut cmd = asys();
            cmd.args(["profile", "-t", "hggc,pccl", "-o", report.to_str().unwrap()])
                .arg(workload("pccl_ranks"))
                .args(["--rank", &r.to_string(), "--nranks", &nranks.to_string()])
                .args(["--id", id.to_str().unwrap(), "1"])
                .envs(env.iter().copied())
                .env("RANK", r.to_string())
                // Four asys start up at their own pace on a busy machine.
                .env("PCCL_TIMEOUT_MS", "120000");
            std::thread::spawn(move || (report, cmd.finish()))
        })
        .collect();
    runs.into_iter()
        .map(|t| {
            let (report, out) = t.join().unwrap();
            assert!(out.status.success(), "asys profile: {}", stderr(&out));
            (
                report.with_extension("asysrep"),
                logged_collectives(&stdout(&out)),
            )
        })
        .collect()
}

/// What the PyTorch profiler calls a pccl operation (`Collective name`).
fn pytorch_collective(op: &str) -> &'static str {
    match op {
        "AllReduce" => "allreduce",
        "AllGather" => "all_gather",
        "Broadcast" => "broadcast",
        "ReduceScatter" => "reduce_scatter",
        "SendRecv" => "send_recv",
        other => panic!("a collective this test does not know: {other}"),
    }
}

/// PyTorch's name of a datatype pccl_ranks logs, and its size in bytes.
fn pytorch_dtype(logged: &str) -> (&'static str, u64) {
    match logged {
        "float16" => ("Half", 2),
        "float32" => ("Float", 4),
        "float64" => ("Double", 8),
        "int32" => ("Int", 4),
        "int64" => ("Long", 8),
        other => panic!("a datatype this test does not know: {other}"),
    }
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} of {v}"))
}

fn s(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_else(|| panic!("{k} of {v}")).into()
}

/// `asys analyze -r RULE -f json REPORT`'s findings.
fn findings(report: &Path, rule: &str) -> Vec<Value> {
    let o = run(&[
        "analyze",
        "-r",
        rule,
        "-f",
        "json",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "asys analyze: {}", stderr(&o));
    serde_json::from_slice::<Value>(&o.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The same within `tol`.
fn near(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: HTA {got}, asys {want} (tolerance {tol})"
    );
}

/// What HTA names a memory operation, by the name asys's
/// `hggc_ppu_mem_time_sum` gives it.
fn memory_name(asys: &str) -> &'static str {
    match asys {
        "[HGGC memcpy Host-to-Device]" => "Memcpy HtoD",
        "[HGGC memcpy Device-to-Host]" => "Memcpy DtoH",
        "[HGGC memcpy Device-to-Device]" => "Memcpy DtoD",
        "[HGGC memcpy Host-to-Host]" => "Memcpy HtoH",
        "[HGGC memset]" => "Memset",
        other => panic!("an operation this test does not know: {other}"),
    }
}

#[test]
fn hta_reads_four_ranks_as_asys_reports_them() {
    let s_ = Scratch::new("kineto-ranks");
    let (reports, logged): (Vec<PathBuf>, Vec<Vec<Logged>>) = four_ranks(&s_).into_iter().unzip();
    let dir = export_job(&s_, "traces", &[], &reports);
    // One file per report, named as -o says.
    for r in 0..NRANKS {
        assert!(dir.join(format!("job_rank{r}.pt.trace.json")).exists());
    }
    let h = hta(&dir, true);

    // Every rank is one of HTA's, by the rank each report recorded.
    let ranks: Vec<u64> = h["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_u64().unwrap())
        .collect();
    assert_eq!(ranks, (0..u64::from(NRANKS)).collect::<Vec<_>>());

    for (rank, report) in reports.iter().enumerate() {
        let key = rank.to_string();
        // The kernel breakdown: each kernel's total time is kern_sum's.
        let mine = |ty: &str| -> BTreeMap<String, f64> {
            h["kernels"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|k| k["rank"] == rank as u64 && k["type"] == ty)
                .map(|k| (s(k, "name"), f(k, "sum_us")))
                .collect()
        };
        let kern_sum = stats_json(report, "hggc_ppu_kern_sum");
        let mut computed = mine("COMPUTATION");
        computed.extend(mine("COMMUNICATION"));
        assert_eq!(
            computed.keys().collect::<Vec<_>>(),
            {
                let mut n: Vec<String> = kern_sum.iter().map(|k| s(k, "Name")).collect();
                n.sort();
                n
            }
            .iter()
            .collect::<Vec<_>>(),
            "rank {rank}"
        );
        for k in &kern_sum {
            let name = s(k, "Name");
            near(
                &format!("rank {rank} {name} (us)"),
                computed[&name],
                f(k, "Total Time (ns)") / 1e3,
                1e-3,
            );
        }
        // Its memory kernels: mem_time_sum's operations.
        let memory = mine("MEMORY");
        let mem_sum = stats_json(report, "hggc_ppu_mem_time_sum");
        assert_eq!(memory.len(), mem_sum.len(), "rank {rank}: {memory:?}");
        for m in &mem_sum {
            let name = memory_name(&s(m, "Operation"));
            near(
                &format!("rank {rank} {name} (us)"),
                memory[name],
                f(m, "Total Time (ns)") / 1e3,
                1e-3,
            );
        }

        // The temporal breakdown: HTA's kernel time is the device's span,
        // from the first device operation's start to the last one's end,
        // and its parts add up to it.
        let trace = stats_json(report, "hggc_ppu_trace");
        let first = trace
            .iter()
            .map(|t| f(t, "Start (ns)"))
            .fold(f64::MAX, f64::min);
        let last = trace
            .iter()
            .map(|t| f(t, "Start (ns)") + f(t, "Duration (ns)"))
            .fold(f64::MIN, f64::max);
        let temporal = h["temporal"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| f(t, "rank") == rank as f64)
            .unwrap();
        let span_us = f(temporal, "kernel_time(us)");
        near(
            &format!("rank {rank} span (us)"),
            span_us,
            (last - first) / 1e3,
            1e-3,
        );
        let parts = f(temporal, "idle_time(us)")
            + f(temporal, "compute_time(us)")
            + f(temporal, "non_compute_time(us)");
        near(&format!("rank {rank} parts (us)"), parts, span_us, 1e-3);

        // HTA's idle time is the span less the time any device operation
        // ran: the gaps ppu_gaps finds with no minimum (gap=0), summed.
        let gaps = findings(report, "ppu_gaps:gap=0:rows=1000000");
        assert!(!gaps.is_empty(), "rank {rank}");
        let gaps_us: f64 = gaps.iter().map(|g| f(g, "Duration (ns)")).sum::<f64>() / 1e3;
        near(
            &format!("rank {rank} idle (us)"),
            f(temporal, "idle_time(us)"),
            gaps_us,
            1e-3,
        );
        // The idle time breakdown is per stream: the gaps between one
        // stream's operations. This workload runs one stream a rank, so
        // those are the device's gaps too (HTA rounds each category to
        // 0.01 us).
        let streams: std::collections::BTreeSet<i64> =
            trace.iter().map(|t| t["Strm"].as_i64().unwrap()).collect();
        assert_eq!(streams.len(), 1, "rank {rank}: {streams:?}");
        let idle: Vec<&Value> = h["idle"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["rank"] == rank as u64)
            .collect();
        assert!(
            idle.iter()
                .all(|i| streams.contains(&i["stream"].as_i64().unwrap()))
        );
        let by_category: f64 = idle.iter().map(|i| f(i, "idle_us")).sum();
        near(
            &format!("rank {rank} idle by category (us)"),
            by_category,
            gaps_us,
            0.015 * idle.len() as f64,
        );

        // Every runtime call is a cuda_runtime event, and every device
        // operation is linked to its call by correlation.
        let events = &h["events"][&key];
        let count = |k: &str| -> u64 {
            events[k]
                .as_object()
                .map_or(0, |m| m.values().map(|v| v.as_u64().unwrap()).sum())
        };
        for c in stats_json(report, "hggc_api_sum") {
            let name = s(&c, "Name");
            assert_eq!(
                count(&format!("cuda_runtime {name}")),
                c["Num Calls"].as_u64().unwrap(),
                "rank {rank} {name}"
            );
        }
        assert_eq!(h["unlinked_gpu"][&key], 0, "rank {rank}");
        // A flow (ac2g) from each device operation's call to it, and none
        // from a call that made no device work.
        let file = dir.join(format!("job_rank{rank}.pt.trace.json"));
        let trace: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let flows = |ph: &str| -> Vec<i64> {
            let mut ids: Vec<i64> = trace["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["cat"] == "ac2g" && e["ph"] == ph)
                .map(|e| e["id"].as_i64().unwrap())
                .collect();
            ids.sort();
            ids
        };
        let mut corrs: Vec<i64> = trace_ops_corr(report);
        corrs.sort();
        assert_eq!(flows("s"), corrs, "rank {rank}");
        assert_eq!(flows("f"), corrs, "rank {rank}");

        // Every collective's kernel carries the collective's name, as
        // the PyTorch profiler names it (a call inside a group launches
        // none: its group's end launches one kernel for all).
        let coll = &h["collectives"][&key];
        let mut named = 0;
        for k in &kern_sum {
            let kernel = s(k, "Name");
            let Some(op) = kernel.strip_prefix("pcclKernel_") else {
                continue;
            };
            let name = pytorch_collective(op);
            assert_eq!(coll[name], k["Instances"], "rank {rank} {kernel}: {coll}");
            named += 1;
        }
        assert_eq!(
            coll.as_object().unwrap().len(),
            named,
            "rank {rank}: {coll}"
        );

        // Each communication kernel carries its collective's message as
        // the workload allocated it: elements each way, datatype and group
        // size as HTA reads them, and bytes in the trace.
        let want: Vec<Value> = logged[rank]
            .iter()
            .map(|l| {
                let (dtype, elem) = pytorch_dtype(&l.dtype);
                serde_json::json!([
                    pytorch_collective(&l.op),
                    l.in_bytes / elem,
                    l.out_bytes / elem,
                    dtype,
                    NRANKS
                ])
            })
            .collect();
        assert!(!want.is_empty(), "rank {rank} logged no collective");
        assert_eq!(
            h["messages"][&key].as_array().unwrap(),
            &want,
            "rank {rank}"
        );
        let mut comm: Vec<&Value> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "kernel" && e["args"]["Collective name"].is_string())
            .collect();
        comm.sort_by(|a, b| f(a, "ts").total_cmp(&f(b, "ts")));
        let bytes: Vec<(u64, u64)> = comm
            .iter()
            .map(|e| {
                let n = |k: &str| e["args"][k].as_u64().unwrap_or_else(|| panic!("{k}: {e}"));
                (n("In msg size"), n("Out msg size"))
            })
            .collect();
        let logged_bytes: Vec<(u64, u64)> = logged[rank]
            .iter()
            .map(|l| (l.in_bytes, l.out_bytes))
            .collect();
        assert_eq!(bytes, logged_bytes, "rank {rank}");
    }
    // The trace says the job's size, as PyTorch's does.
    let file = dir.join("job_rank0.pt.trace.json");
    let head = std::fs::read_to_string(&file).unwrap();
    let head: Value = serde_json::from_str(&head).unwrap();
    assert_eq!(head["distributedInfo"]["world_size"], NRANKS);

    // With HGGC's calls named as CUDA's, HTA's launch statistics find every
    // launch, copy and memset call: its duration, its device operation's,
    // and the delay between them are asys's (hggc_api_trace and
    // hggc_ppu_trace joined by correlation id); and the queue lengths.
    let dir = export_job(&s_, "cuda-names", CUDA_NAMES, &reports);
    let h = hta_mode(&dir, "launch");
    for (rank, report) in reports.iter().enumerate() {
        let key = rank.to_string();
        let calls: BTreeMap<i64, (String, f64, f64)> = stats_json(report, "hggc_api_trace")
            .iter()
            .filter(|c| c["CorrId"].is_i64())
            .map(|c| {
                let corr = c["CorrId"].as_i64().unwrap();
                (
                    corr,
                    (s(c, "Name"), f(c, "Start (ns)"), f(c, "Duration (ns)")),
                )
            })
            .collect();
        let ops = stats_json(report, "hggc_ppu_trace");
        let launches = h["launches"][&key].as_array().unwrap();
        assert_eq!(launches.len(), ops.len(), "rank {rank}");
        let by_corr: BTreeMap<i64, &Value> = launches
            .iter()
            .map(|l| (f(l, "correlation") as i64, l))
            .collect();
        for op in &ops {
            let corr = op["CorrId"].as_i64().unwrap();
            let (name, start, dur) = &calls[&corr];
            assert!(
                ["hggcLaunchKernel", "hggcMemcpyAsync", "hggcMemsetAsync"].contains(&name.as_str()),
                "{name}"
            );
            let l = by_corr[&corr];
            let what = format!("rank {rank} correlation {corr}");
            near(&what, f(l, "cpu_duration"), dur / 1e3, 1e-3);
            near(
                &what,
                f(l, "gpu_duration"),
                f(op, "Duration (ns)") / 1e3,
                1e-3,
            );
            let delay = (f(op, "Start (ns)") - start - dur).max(0.0) / 1e3;
            near(&what, f(l, "launch_delay"), delay, 1e-3);
        }
        // The queue: each call adds its operation at the call's start, each
        // operation takes itself off as it starts.
        let mut steps: Vec<(f64, i64)> = ops
            .iter()
            .flat_map(|op| {
                let call = calls[&op["CorrId"].as_i64().unwrap()].1;
                [(call, 1), (f(op, "Start (ns)"), -1)]
            })
            .collect();
        steps.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let (mut q, mut max) = (0, 0);
        for (_, d) in steps {
            q += d;
            max = max.max(q);
        }
        let stream = ops[0]["Strm"].as_i64().unwrap().to_string();
        assert_eq!(h["queue_max"][&key][&stream], max, "rank {rank}");
    }
}

/// With computation beside communication (pccl_ranks's
/// `PCCL_RANKS_COMPUTE`: a kernel on a second stream at each collective)
/// and PCCL's kernels named as NCCL's (`--kineto-cuda-names true`), HTA's
/// communication analysis finds PCCL's kernels, and their overlap with
/// computation is the one in asys's own trace.
#[test]
fn hta_finds_pccls_communication_and_its_overlap_with_computation() {
    let s_ = Scratch::new("kineto-overlap");
    let reports: Vec<PathBuf> = pccl_ranks(&s_, 2, &[("PCCL_RANKS_COMPUTE", "1")])
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    let dir = export_job(&s_, "traces", CUDA_NAMES, &reports);
    let h = hta_mode(&dir, "comm");
    for (rank, report) in reports.iter().enumerate() {
        let key = rank.to_string();
        let ops = stats_json(report, "hggc_ppu_trace");

        // PCCL's kernels, named as NCCL's, are HTA's communication kernels
        // (every other kernel is computation), and the overlap of the two
        // is the one of asys's own trace: the time both ran, over the time
        // communication ran.
        let kernel_names: Vec<String> = ops
            .iter()
            .map(|op| s(op, "Name"))
            .filter(|n| !n.starts_with('['))
            .collect();
        let types: BTreeMap<String, String> = h["kernel_types"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["rank"] == rank as u64)
            .map(|k| (s(k, "name"), s(k, "type")))
            .collect();
        let want: BTreeMap<String, String> = kernel_names
            .iter()
            .map(|n| match n.strip_prefix("pccl") {
                Some(rest) => (format!("nccl{rest}"), "COMMUNICATION".to_string()),
                None => (n.clone(), "COMPUTATION".to_string()),
            })
            .collect();
        assert_eq!(types, want, "rank {rank}");
        let spans = |comm: bool| -> Vec<(f64, f64)> {
            ops.iter()
                .filter(|op| {
                    let n = s(op, "Name");
                    !n.starts_with('[') && n.starts_with("pccl") == comm
                })
                .map(|op| {
                    let start = f(op, "Start (ns)");
                    (start, start + f(op, "Duration (ns)"))
                })
                .collect()
        };
        let comm = merged(spans(true));
        let comp = merged(spans(false));
        let comm_ns: f64 = comm.iter().map(|(a, b)| b - a).sum();
        assert!(comm_ns > 0.0, "rank {rank}");
        let both: f64 = comm
            .iter()
            .flat_map(|&(a, b)| {
                comp.iter()
                    .map(move |&(c, d)| (b.min(d) - a.max(c)).max(0.0))
            })
            .sum();
        let overlap = h["overlap"][&key]
            .as_f64()
            .unwrap_or_else(|| panic!("rank {rank}: {}", h["overlap"]));
        // HTA gives a percentage rounded to 0.01.
        near(
            &format!("rank {rank} overlap (%)"),
            overlap,
            100.0 * both / comm_ns,
            0.0051,
        );

        assert!(
            both > 0.0,
            "rank {rank}: no computation overlapped communication"
        );
    }
}

/// Intervals merged where they touch or overlap, in start order.
fn merged(mut spans: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[test]
fn hta_reads_a_cuda_report_with_nvtx_steps() {
    require_root();
    let gpu = nvidia_gpu();
    let s_ = Scratch::new("kineto-cuda");
    let script = workload_source("cuda_steps.py");
    let report = s_.path("cuda");
    let python = pyenv().join("bin/python");
    let o = run(&[
        "profile",
        "-t",
        "cuda,nvtx",
        "-o",
        report.to_str().unwrap(),
        python.to_str().unwrap(),
        script.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let dir = s_.path("traces");
    std::fs::create_dir(&dir).unwrap();
    let base = dir.join("cuda");
    let o = run(&[
        "export",
        "-t",
        "kineto",
        "--kineto-steps",
        "step@train",
        "-o",
        base.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.join("cuda.pt.trace.json")).unwrap();
    // No rank was recorded (no RANK in the environment): no distributedInfo,
    // and HTA takes the trace as rank 0.
    assert!(!text.contains("distributedInfo"));
    // No kernels to break down (HTA's GPU analyses need some): its parse.
    let h = hta(&dir, false);
    assert_eq!(h["ranks"], serde_json::json!([0]));

    // The three steps are HTA's iterations. HTA leaves out the last one
    // (an iteration the profiler may have cut short) unless told.
    let steps = stats_json(&report, "nvtx_pushpop_trace")
        .into_iter()
        .filter(|r| r["Name"] == "step" && r["Domain"] == "train")
        .count();
    assert_eq!(steps, 3);
    assert_eq!(
        h["iterations"]["0"],
        serde_json::json!((0..steps as i64 - 1).collect::<Vec<_>>())
    );
    let events = h["events"]["0"].as_object().unwrap();
    for i in 0..steps - 1 {
        assert_eq!(
            events[&format!("user_annotation ProfilerStep#{i}")][i.to_string()],
            1,
            "{events:?}"
        );
    }
    // Each step's calls: one of each, in the step's iteration; the other
    // ranges keep their names.
    for i in 0..steps - 1 {
        let it = i.to_string();
        for name in [
            "cudaGetDeviceCount",
            "cudaMalloc",
            "cudaMemcpy",
            "cudaGetLastError",
        ] {
            assert_eq!(
                events[&format!("cuda_runtime {name}")][&it],
                1,
                "{name} in step {i}: {events:?}"
            );
        }
        assert_eq!(events["user_annotation forward"][&it], 1, "{events:?}");
    }
    // The calls HTA kept are cuda_api_sum's, less the last step's.
    for c in stats_json(&report, "cuda_api_sum") {
        let name = s(&c, "Name");
        let Some(per) = events.get(&format!("cuda_runtime {name}")) else {
            continue;
        };
        let kept: u64 = per
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert!(kept <= c["Num Calls"].as_u64().unwrap(), "{name}");
    }
    // Device work: none without a GPU (the runtime answers every call
    // with an error); on a GPU host the copies CUPTI recorded, each with
    // its call's correlation id. Either way what cuda_gpu_trace holds.
    let trace: Value = serde_json::from_str(&text).unwrap();
    let device: Vec<&Value> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e["cat"].as_str().unwrap())
        })
        .collect();
    let gpu_trace = stats_json(&report, "cuda_gpu_trace");
    assert_eq!(device.len(), gpu_trace.len());
    match gpu {
        Nvidia::NoGpu(_) => assert!(device.is_empty()),
        Nvidia::Gpu(_) => {
            let copies = device.iter().filter(|e| e["cat"] == "gpu_memcpy").count();
            assert_eq!(copies, steps, "{device:?}");
            let linked = h["unlinked_gpu"]["0"].as_u64().unwrap();
            assert_eq!(linked, 0, "every copy joined to its call");
        }
    }
}

/// The correlation ids of `hggc_ppu_trace`'s operations.
fn trace_ops_corr(report: &Path) -> Vec<i64> {
    stats_json(report, "hggc_ppu_trace")
        .iter()
        .map(|op| op["CorrId"].as_i64().unwrap())
        .collect()
}

/// The events HTA files under `cat name` for a row of `hggc_ppu_trace`.
fn hta_key(op: &Value) -> String {
    let name = s(op, "Name");
    match op["CopyKind"].as_str() {
        Some(kind) => {
            let short = match kind {
                "Host-to-Device" => "HtoD",
                "Device-to-Host" => "DtoH",
                "Device-to-Device" => "DtoD",
                "Host-to-Host" => "HtoH",
                other => panic!("a copy this test does not know: {other}"),
            };
            format!("gpu_memcpy Memcpy {short}")
        }
        None if name == "[HGGC memset]" => "gpu_memset Memset".into(),
        None => format!("kernel {name}"),
    }
}

#[test]
fn hta_numbers_the_iterations_of_hgtx_steps() {
    require_root();
    const STEPS: usize = 6;
    let s_ = Scratch::new("kineto-steps");
    let report = s_.path("train");
    let o = run(&[
        "profile",
        "-t",
        "hggc,hgtx",
        "-o",
        report.to_str().unwrap(),
        workload("train_step").to_str().unwrap(),
        &STEPS.to_string(),
        "4096",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let dir = s_.path("traces");
    std::fs::create_dir(&dir).unwrap();
    let base = dir.join("train");
    let o = run(&[
        "export",
        "-t",
        "kineto",
        "--kineto-steps",
        "train_step",
        "-o",
        base.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let h = hta(&dir, true);

    // The steps, from asys's own range report; HTA keeps all but the last.
    let steps: Vec<(f64, f64)> = stats_json(&report, "hgtx_pushpop_trace")
        .iter()
        .filter(|r| r["Name"] == "train_step")
        .map(|r| (f(r, "Start (ns)"), f(r, "End (ns)")))
        .collect();
    assert_eq!(steps.len(), STEPS);
    assert_eq!(
        h["iterations"]["0"],
        serde_json::json!((0..STEPS as i64 - 1).collect::<Vec<_>>())
    );

    // Each device operation is in the iteration of the step its call was
    // made in (-1: made outside every step); HTA keeps those whose call
    // came before the last step. asys's ground truth: hggc_ppu_trace's
    // operations joined to hggc_api_trace's calls by correlation id.
    let call_start: BTreeMap<i64, f64> = stats_json(&report, "hggc_api_trace")
        .iter()
        .filter(|c| c["CorrId"].is_i64())
        .map(|c| (c["CorrId"].as_i64().unwrap(), f(c, "Start (ns)")))
        .collect();
    let last_start = steps[STEPS - 1].0;
    let mut want: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut want_us: BTreeMap<String, f64> = BTreeMap::new();
    for op in stats_json(&report, "hggc_ppu_trace") {
        let at = call_start[&op["CorrId"].as_i64().unwrap()];
        if at >= last_start {
            continue;
        }
        let it = steps
            .iter()
            .position(|&(a, b)| a <= at && at < b)
            .map_or(-1, |i| i as i64);
        let key = hta_key(&op);
        *want
            .entry(key.clone())
            .or_default()
            .entry(it.to_string())
            .or_default() += 1;
        if let Some(kernel) = key.strip_prefix("kernel ") {
            *want_us.entry(kernel.into()).or_default() += f(&op, "Duration (ns)") / 1e3;
        }
    }
    let events = h["events"]["0"].as_object().unwrap();
    let got: BTreeMap<String, BTreeMap<String, u64>> = events
        .iter()
        .filter(|(k, _)| k.starts_with("kernel ") || k.starts_with("gpu_mem"))
        .map(|(k, v)| {
            let per = v
                .as_object()
                .unwrap()
                .iter()
                .map(|(i, n)| (i.clone(), n.as_u64().unwrap()))
                .collect();
            (k.clone(), per)
        })
        .collect();
    assert_eq!(got, want);
    // Each kept step made one of each kernel.
    for k in ["forward_kernel", "backward_kernel", "sgd_update_kernel"] {
        for i in 0..STEPS - 1 {
            assert_eq!(want[&format!("kernel {k}")][&i.to_string()], 1, "{k} {i}");
        }
    }
    // The kernel breakdown is of the kernels kept.
    let kernels: BTreeMap<String, f64> = h["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["type"] == "COMPUTATION")
        .map(|k| (s(k, "name"), f(k, "sum_us")))
        .collect();
    assert_eq!(
        kernels.keys().collect::<Vec<_>>(),
        want_us.keys().collect::<Vec<_>>()
    );
    for (name, us) in &want_us {
        near(name, kernels[name], *us, 1e-3);
    }

    // --tables: the device work alone.
    let only = s_.path("only");
    let o = run(&[
        "export",
        "-t",
        "kineto",
        "--tables",
        "hggc_activity",
        "-o",
        only.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let trace: Value =
        serde_json::from_slice(&std::fs::read(s_.path("only.pt.trace.json")).unwrap()).unwrap();
    let cats: std::collections::BTreeSet<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["cat"].as_str().unwrap())
        .collect();
    let ops = stats_json(&report, "hggc_ppu_trace");
    let want: std::collections::BTreeSet<String> = ops
        .iter()
        .map(|op| hta_key(op).split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(
        cats.iter()
            .map(|c| c.to_string())
            .collect::<std::collections::BTreeSet<_>>(),
        want
    );

    // A template that names no range: said, and the trace has no step.
    let none = s_.path("none");
    let o = run(&[
        "export",
        "-t",
        "kineto",
        "--kineto-steps",
        "no_such_range@*",
        "-o",
        none.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("names no hgtx or NVTX range"),
        "{}",
        stderr(&o)
    );
    let text = std::fs::read_to_string(s_.path("none.pt.trace.json")).unwrap();
    assert!(!text.contains("ProfilerStep"));
    // The option is kineto's alone.
    let o = run(&[
        "export",
        "-t",
        "sqlite",
        "--kineto-steps",
        "train_step",
        "-o",
        none.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--kineto-steps is for --type kineto"),
        "{}",
        stderr(&o)
    );
}
