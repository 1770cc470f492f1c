//! NVIDIA's real libraries from PyPI (target/pyenv: nvidia-cublas-cu12,
//! nvidia-cudnn-cu12, nvidia-nccl-cu12, nvidia-cuda-runtime-cu12), traced
//! as the application called them. There is no GPU here: calls that need
//! one fail, and still return their codes, versions and strings.
//!
//! Each program (tests/workloads/*_calls.c) prints one line per call
//! it made, with the result it received (tally.h). The reports must hold
//! exactly those calls: the same count per function, the same results in
//! the same order (pointer results with all 64 bits), and the same bytes
//! for collectives; nothing the libraries called among themselves (cuDNN
//! forwarding to libcudnn_graph, cuBLAS to cuBLASLt, ncclBcast to
//! ncclBroadcast), and under `-t nvtx` no NVTX calls a library made.
//!
//! The cuDNN wheel is 717 MB (1.1 GB installed); all three are 1.6 GB,
//! which `cargo xtask pyenv` installs in about a minute. Without them:
//! `cargo xtask pyenv && cargo test -p asys-tests --test vendor_libraries`.
use std::{collections::BTreeMap, path::PathBuf};

use asys_tests::*;
use serde_json::Value;

/// One call as the program saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    name: String,
    result: i64,
    /// A pointer result (printed in hex): its upper half must be there.
    pointer: bool,
    bytes: Option<u64>,
    /// A pointer argument or out-value the call's row carries (`Pointer`).
    ptr: Option<u64>,
}

/// Parses the program's "call NAME KIND VALUE [BYTES [PTR]]" lines.
fn tally(out: &str) -> Vec<Call> {
    out.lines()
        .filter_map(|l| l.strip_prefix("call "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            let result = match f[1] {
                "int" => f[2].parse::<i32>().unwrap().into(),
                "size" => f[2].parse::<u64>().unwrap() as i64,
                "ptr" => hex(f[2]) as i64,
                k => panic!("unknown kind {k} in {l:?}"),
            };
            Call {
                name: f[0].to_string(),
                result,
                pointer: f[1] == "ptr",
                bytes: f.get(3).filter(|b| **b != "-").map(|b| b.parse().unwrap()),
                ptr: f.get(4).map(|p| hex(p)),
            }
        })
        .collect()
}

/// Compiles tests/workloads/NAME.c against `libs` (folder, file name),
/// found at run time by rpath.
fn build(name: &str, libs: &[(PathBuf, &str)]) -> PathBuf {
    let dir = workspace().join("tests/workloads");
    let mut args = vec![format!("-I{}", dir.display())];
    for (folder, file) in libs {
        args.push(format!("-L{}", folder.display()));
        args.push(format!("-l:{file}"));
        args.push(format!("-Wl,-rpath,{}", folder.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    c_workload(&format!("{name}.c"), &args)
}

/// Profiles `bin` under `-t ITEMS`; returns the report and the program's calls.
fn profile(s: &Scratch, bin: &std::path::Path, items: &str) -> (PathBuf, Vec<Call>) {
    profile_with(s, bin, items, &[])
}

fn profile_with(
    s: &Scratch,
    bin: &std::path::Path,
    items: &str,
    options: &[&str],
) -> (PathBuf, Vec<Call>) {
    let report = s.path("r");
    let mut args = vec!["profile", "-t", items, "-o", report.to_str().unwrap()];
    args.extend(options);
    args.push(bin.to_str().unwrap());
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let calls = tally(&stdout(&o));
    assert!(!calls.is_empty(), "the program printed no calls");
    (report.with_extension("asysrep"), calls)
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_u64().map(|u| u as i64))
}

/// The reports of `item` hold exactly the program's calls.
fn assert_exactly_the_calls(report: &std::path::Path, item: &str, calls: &[Call]) {
    // Per-function counts: the summary has no other name and no other count.
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for c in calls {
        *want.entry(c.name.clone()).or_default() += 1;
    }
    let got: BTreeMap<String, i64> = stats_json(report, &format!("{item}_api_sum"))
        .iter()
        .map(|r| {
            (
                r["Name"].as_str().unwrap().to_string(),
                int(&r["Num Calls"]).unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want, "{item}_api_sum against the program's tally");
    // Every call in order, with its result, bytes and pointer.
    let trace = stats_json(report, &format!("{item}_api_trace"));
    let traced: Vec<Call> = trace
        .iter()
        .zip(calls)
        .map(|(r, c)| Call {
            name: r["Name"].as_str().unwrap().to_string(),
            result: int(&r["Result"]).unwrap(),
            pointer: c.pointer,
            bytes: c.bytes.and(int(&r["Bytes"]).map(|b| b as u64)),
            ptr: c.ptr.and(int(&r["Pointer"]).map(|p| p as u64)),
        })
        .collect();
    assert_eq!(trace.len(), calls.len(), "{item}_api_trace: {trace:#?}");
    assert_eq!(
        traced, calls,
        "{item}_api_trace against the program's tally"
    );
    // Pointer results are addresses in a shared library, above 4 GiB: cut to
    // 32 bits and sign-extended they could not equal the program's.
    for c in calls.iter().filter(|c| c.pointer) {
        assert!(c.result as u64 > u64::from(u32::MAX), "{c:?}");
    }
    // libraryId points into the libraries table: every call is counted
    // against a library that serves the item.
    let libraries = stats_json(report, "libraries");
    let of_item: i64 = libraries
        .iter()
        .filter(|l| l["Items"].as_str().unwrap().split(',').any(|i| i == item))
        .map(|l| int(&l["Calls"]).unwrap())
        .sum();
    assert_eq!(
        of_item,
        calls.len() as i64,
        "calls per library of {item}: {libraries:#?}"
    );
}

#[test]
fn cublas_calls_are_the_applications() {
    require_root();
    let s = Scratch::new("vendor-cublas");
    let lib = wheel_lib("cublas");
    let bin = build(
        "cublas_calls",
        &[(lib.clone(), "libcublas.so.12"), (lib, "libcublasLt.so.12")],
    );
    let (report, calls) = profile(&s, &bin, "cublas,nvtx");
    // Without a GPU creating a handle fails; the rest answer.
    assert!(
        calls
            .iter()
            .any(|c| c.name == "cublasCreate_v2" && c.result != 0)
    );
    // cublasCreate_v2 and the status strings call cuBLASLt inside libcublas:
    // only the program's own cublasLt* calls are counted.
    assert_exactly_the_calls(&report, "cublas", &calls);
    assert!(stats_json(&report, "nvtx_api_sum").is_empty());
}

#[test]
fn cudnn_calls_are_counted_once() {
    require_root();
    let s = Scratch::new("vendor-cudnn");
    let bin = build("cudnn_calls", &[(wheel_lib("cudnn"), "libcudnn.so.9")]);
    let (report, calls) = profile(&s, &bin, "cudnn,nvtx");
    assert!(
        calls
            .iter()
            .any(|c| c.name == "cudnnCreate" && c.result != 0)
    );
    // libcudnn.so.9 forwards to libcudnn_graph.so.9, which exports the same
    // names (and calls cudnnGetLibConfig): each call is counted once.
    assert_exactly_the_calls(&report, "cudnn", &calls);
    assert!(stats_json(&report, "nvtx_api_sum").is_empty());
}

/// `--trace-vendor-internal true` keeps what the filter leaves out: the
/// calls libcudnn makes of libcudnn_graph's functions come back.
#[test]
fn the_option_keeps_cudnns_internal_calls() {
    require_root();
    let s = Scratch::new("vendor-cudnn-internal");
    let bin = build("cudnn_calls", &[(wheel_lib("cudnn"), "libcudnn.so.9")]);
    let (report, calls) = profile_with(&s, &bin, "cudnn", &["--trace-vendor-internal", "true"]);
    let got: BTreeMap<String, i64> = stats_json(&report, "cudnn_api_sum")
        .iter()
        .map(|r| {
            (
                r["Name"].as_str().unwrap().to_string(),
                int(&r["Num Calls"]).unwrap(),
            )
        })
        .collect();
    for c in &calls {
        let made = calls.iter().filter(|d| d.name == c.name).count() as i64;
        assert!(got.get(&c.name).copied().unwrap_or(0) >= made, "{got:?}");
    }
    assert!(
        got.values().sum::<i64>() > calls.len() as i64,
        "no internal call kept: {got:?}"
    );
}

#[test]
fn nccl_calls_carry_their_bytes_and_no_internal_calls() {
    require_root();
    let s = Scratch::new("vendor-nccl");
    let bin = build("nccl_calls", &[(wheel_lib("nccl"), "libnccl.so.2")]);
    let (report, calls) = profile(&s, &bin, "nccl,nvtx");
    // Every collective of nccl.h, with bf16 and both fp8 types among them.
    for op in [
        "ncclAllReduce",
        "ncclReduce",
        "ncclBcast",
        "ncclBroadcast",
        "ncclReduceScatter",
        "ncclAllGather",
        "ncclAlltoAll",
        "ncclGather",
        "ncclScatter",
        "ncclSend",
        "ncclRecv",
    ] {
        assert!(
            calls.iter().any(|c| c.name == op && c.bytes.is_some()),
            "{op}"
        );
    }
    // ncclBcast calls ncclBroadcast inside libnccl: one call, the program's.
    assert_exactly_the_calls(&report, "nccl", &calls);
    // One rank: nccl_desync_trace has each collective call as an operation
    // of its own, arriving alone (spread 0), and the summary counts them.
    let collective = |n: &str| {
        [
            "ncclAllReduce",
            "ncclReduce",
            "ncclBcast",
            "ncclBroadcast",
            "ncclReduceScatter",
            "ncclAllGather",
            "ncclAlltoAll",
            "ncclGather",
            "ncclScatter",
        ]
        .contains(&n)
    };
    let trace = stats_json(&report, "nccl_desync_trace");
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for c in calls.iter().filter(|c| collective(&c.name)) {
        *want.entry(c.name.clone()).or_default() += 1;
    }
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for r in &trace {
        assert_eq!(int(&r["Spread (ns)"]), Some(0), "{r}");
        assert_eq!(
            int(&r["Instance"]),
            got.get(r["Collective"].as_str().unwrap())
                .map(|n| n + 1)
                .or(Some(1)),
            "{r}"
        );
        *got.entry(r["Collective"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(got, want);
    // libnccl marks its own work with NVTX ranges (through asys's NVTX
    // tool): the program made no NVTX call, so none is recorded.
    assert!(
        stats_json(&report, "nvtx_api_sum").is_empty(),
        "{:#?}",
        stats_json(&report, "nvtx_api_sum")
    );
    assert!(stats_json(&report, "nvtx_pushpop_trace").is_empty());
}

#[test]
fn cudart_pointer_results_keep_64_bits() {
    require_root();
    let s = Scratch::new("vendor-cudart");
    let bin = build(
        "cudart_calls",
        &[(wheel_lib("cuda_runtime"), "libcudart.so.12")],
    );
    let (report, calls) = profile(&s, &bin, "cuda");
    assert!(calls.iter().filter(|c| c.pointer).count() >= 5);
    assert_exactly_the_calls(&report, "cuda", &calls);
}

/// The driver API (cu* in libcuda.so.1) is part of `cuda`, as in nsys's
/// cuda_api_sum. libcuda comes from no wheel: see libcuda_standin.c.
#[test]
fn driver_api_calls_are_traced_inside_cuda() {
    require_root();
    let s = Scratch::new("vendor-driver");
    let driver = build_workload(
        "libcuda_standin.c",
        "libcuda.so.1",
        &["-O1", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1"],
    );
    let bin = build(
        "driver_calls",
        &[(driver.parent().unwrap().to_path_buf(), "libcuda.so.1")],
    );
    let (report, calls) = profile(&s, &bin, "cuda");
    assert!(
        calls
            .iter()
            .any(|c| c.name == "cuMemAlloc_v2" && c.ptr.is_some())
    );
    // cuMemAlloc_v2 calls cuDriverGetVersion inside libcuda: not counted.
    assert_exactly_the_calls(&report, "cuda", &calls);
    let libraries = stats_json(&report, "libraries");
    assert!(
        libraries.iter().any(|l| l["Items"] == "cuda"
            && l["Path"].as_str().unwrap().ends_with("/libcuda.so.1")
            && int(&l["Functions"]) == Some(7)),
        "{libraries:#?}"
    );
}

/// A report with no probed library (the item's library was never loaded)
/// has no `libraries` member, as reports written before it existed: the
/// reports read it as empty.
#[test]
fn a_report_without_libraries_reads_as_empty() {
    require_root();
    let s = Scratch::new("vendor-no-libraries");
    let bin = build(
        "cudart_calls",
        &[(wheel_lib("cuda_runtime"), "libcudart.so.12")],
    );
    let (report, _) = profile(&s, &bin, "cublas");
    let meta = metadata(&report);
    assert!(
        meta["tables"].get("libraries").is_none(),
        "{}",
        meta["tables"]
    );
    assert!(meta["members"].get("libraries.parquet").is_none());
    assert_eq!(meta["items_not_found"], serde_json::json!(["cublas"]));
    assert!(stats_json(&report, "libraries").is_empty());
    assert!(stats_json(&report, "cublas_api_trace").is_empty());
}

/// `--report help` lists every report, a summary and a trace for every
/// item among them.
#[test]
fn report_help_lists_a_trace_for_every_item() {
    let o = run(&["stats", "--report", "help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    for item in [
        "hggc", "hgtx", "acblas", "acdnn", "pccl", "cuda", "nvtx", "cublas", "cudnn", "nccl",
    ] {
        for kind in ["sum", "trace"] {
            let name = format!("{item}_api_{kind}");
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
    }
    for name in ["osrt_sum", "osrt_trace", "libraries"] {
        assert!(names.contains(&name.to_string()), "{name} missing");
    }
}

#[test]
fn only_the_programs_nvtx_ranges_are_recorded() {
    require_root();
    let s = Scratch::new("vendor-nvtx");
    let script = workload_source("nvtx_nccl.py");
    let nccl = wheel_lib("nccl").join("libnccl.so.2");
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "nccl,nvtx",
        "-o",
        report.to_str().unwrap(),
        pyenv().join("bin/python").to_str().unwrap(),
        script.to_str().unwrap(),
        nccl.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let report = report.with_extension("asysrep");
    assert_exactly_the_calls(&report, "nccl", &tally(&out));
    let want: Vec<(String, i64, String)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("pushpop "))
        .map(|l| {
            let (name, level) = l.split_once(' ').unwrap();
            (name.to_string(), level.parse().unwrap(), String::new())
        })
        .collect();
    assert_eq!(want.len(), 4);
    let got: Vec<(String, i64, String)> = stats_json(&report, "nvtx_pushpop_trace")
        .iter()
        .map(|r| {
            (
                r["Name"].as_str().unwrap().to_string(),
                int(&r["Lvl"]).unwrap(),
                r["Domain"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got, want, "NVTX ranges against the program's");
}
