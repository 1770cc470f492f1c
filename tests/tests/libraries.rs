//! acblas, acdnn and pccl: their API calls against the libraries' ground
//! truth, the device work they issue, and pccl between real processes.
use std::collections::BTreeMap;

use asys_tests::*;
use serde_json::Value;

fn profile(
    s: &Scratch,
    items: &str,
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Vec<Value>, std::path::PathBuf, std::process::Output) {
    let p = profile_workload(s, &["-t", items], name, args, env);
    (ground_truth(&p.truth), p.report, p.out)
}

/// Calls per API name, from the truth and from a `*_api_sum` report.
fn counts_match(truth: &[Value], prefix: &str, report: &std::path::Path, sum: &str) {
    let mut made: BTreeMap<String, i64> = BTreeMap::new();
    for t in truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().starts_with(prefix))
    {
        *made
            .entry(t["api"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert!(!made.is_empty());
    let traced: BTreeMap<String, i64> = stats_json(report, sum)
        .iter()
        .map(|r| {
            (
                r["Name"].as_str().unwrap().to_string(),
                r["Num Calls"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(made, traced);
}

#[test]
fn acblas_calls_and_their_gemm_kernels() {
    let s = Scratch::new("acblas");
    let (truth, report, out) = profile(&s, "hggc,acblas", "gemm", &[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    counts_match(&truth, "acblas", &report, "acblas_api_sum");
    // Results, including the deliberately invalid call.
    let results = |v: Vec<(String, i64)>| {
        let mut v = v;
        v.sort();
        v
    };
    assert_eq!(
        results(
            truth
                .iter()
                .filter(|t| t["api"].as_str().unwrap().starts_with("acblas"))
                .map(|t| (
                    t["api"].as_str().unwrap().to_string(),
                    t["ret"].as_i64().unwrap()
                ))
                .collect()
        ),
        results(
            stats_json(&report, "acblas_api_trace")
                .iter()
                .map(|r| (
                    r["Name"].as_str().unwrap().to_string(),
                    r["Result"].as_i64().unwrap()
                ))
                .collect()
        )
    );
    assert!(
        truth
            .iter()
            .any(|t| t["api"].as_str().unwrap().starts_with("acblas") && t["ret"] != 0)
    );
    // Each GEMM that launched a kernel shows it as device work.
    let launched = truth
        .iter()
        .filter(|t| {
            t["kernel"]
                .as_str()
                .is_some_and(|k| k.starts_with("acblas_"))
                && t["api"].as_str().unwrap().starts_with("acblas")
        })
        .count();
    let kernels = stats_json(&report, "hggc_ppu_kern_sum");
    let ran: i64 = kernels
        .iter()
        .filter(|k| k["Name"].as_str().unwrap().starts_with("acblas_"))
        .map(|k| k["Instances"].as_i64().unwrap())
        .sum();
    assert!(launched > 0);
    assert_eq!(ran, launched as i64);
}

#[test]
fn acdnn_calls_and_their_convolution_kernel() {
    let s = Scratch::new("acdnn");
    let (truth, report, out) = profile(&s, "hggc,acdnn", "conv", &[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    counts_match(&truth, "acdnn", &report, "acdnn_api_sum");
    let launched = truth
        .iter()
        .filter(|t| {
            t["api"] == "acdnnConvolutionForward"
                && t["kernel"].as_str().is_some_and(|k| !k.is_empty())
        })
        .count();
    let kernels = stats_json(&report, "hggc_ppu_kern_sum");
    let ran: i64 = kernels
        .iter()
        .filter(|k| k["Name"] == "acdnn_conv2d_fwd_kernel")
        .map(|k| k["Instances"].as_i64().unwrap())
        .sum();
    assert!(launched > 0);
    assert_eq!(ran, launched as i64);
}

/// A pccl op as both sides describe it; sizes only for calls that succeeded
/// (a call rejected for its datatype has no size).
fn op_key(pid: &Value, api: &str, bytes: &Value, ret: &Value) -> String {
    if ret == 0 {
        format!("pid={pid} {api} bytes={bytes}")
    } else {
        format!("pid={pid} {api} ret={ret}")
    }
}

const OPS: &[&str] = &[
    "pcclAllReduce",
    "pcclAllGather",
    "pcclBroadcast",
    "pcclReduceScatter",
    "pcclSend",
    "pcclRecv",
];

#[test]
fn pccl_ops_of_every_rank_with_their_sizes() {
    let s = Scratch::new("pccl");
    let (truth, report, out) = profile(&s, "hggc,pccl", "pccl_ranks", &["4", "2"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ranks: std::collections::BTreeSet<i64> = truth
        .iter()
        .filter(|t| t["api"] == "pcclCommInitRank")
        .map(|t| t["rank"].as_i64().unwrap())
        .collect();
    assert_eq!(ranks.len(), 4);
    let truth_ops: Vec<String> = truth
        .iter()
        .filter(|t| OPS.contains(&t["api"].as_str().unwrap()))
        .map(|t| {
            op_key(
                &t["pid"],
                t["api"].as_str().unwrap(),
                &t["bytes"],
                &t["ret"],
            )
        })
        .collect();
    let rows = stats_json(&report, "pccl_api_trace");
    let traced: Vec<String> = rows
        .iter()
        .filter(|r| OPS.contains(&r["Name"].as_str().unwrap()))
        .map(|r| {
            op_key(
                &r["Pid"],
                r["Name"].as_str().unwrap(),
                &r["Bytes"],
                &r["Result"],
            )
        })
        .collect();
    assert_same_calls(truth_ops, traced);
    let sum = stats_json(&report, "pccl_op_sum");
    let all_reduce = sum.iter().find(|r| r["Name"] == "pcclAllReduce").unwrap();
    assert_eq!(all_reduce["Processes"], 4);
    // The collectives ran as kernels on each rank's stream.
    let kernels = stats_json(&report, "hggc_ppu_kern_sum");
    assert!(kernels.iter().any(|k| k["Name"] == "pcclKernel_AllReduce"));
}

#[test]
fn a_pccl_rank_that_dies_mid_operation() {
    let s = Scratch::new("pccl-die");
    let (truth, report, out) = profile(
        &s,
        "hggc,pccl",
        "pccl_ranks",
        &["3", "1"],
        &[("PCCL_RANKS_DIE_RANK", "1"), ("PCCL_TIMEOUT_MS", "1500")],
    );
    // The workload expects the survivors to see the error and exits 0; asys
    // passes its exit code through and writes a whole report.
    assert!(out.status.success(), "{}", stderr(&out));
    let failed: Vec<String> = truth
        .iter()
        .filter(|t| t["api"] == "pcclAllReduce" && t["ret"] == 6)
        .map(|t| op_key(&t["pid"], "pcclAllReduce", &t["bytes"], &t["ret"]))
        .collect();
    assert_eq!(failed.len(), 2, "both survivors got pcclRemoteError");
    let rows = stats_json(&report, "pccl_api_trace");
    let traced: Vec<String> = rows
        .iter()
        .filter(|r| r["Name"] == "pcclAllReduce" && r["Result"] == 6)
        .map(|r| op_key(&r["Pid"], "pcclAllReduce", &r["Bytes"], &r["Result"]))
        .collect();
    assert_same_calls(failed, traced);
    // The dead rank's calls up to its death are there too.
    let dead = truth
        .iter()
        .find(|t| t["api"] == "pcclCommInitRank" && t["rank"] == 1)
        .unwrap()["pid"]
        .clone();
    assert!(
        rows.iter()
            .any(|r| r["Pid"] == dead && r["Name"] == "pcclAllReduce")
    );
}
