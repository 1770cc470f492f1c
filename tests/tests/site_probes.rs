//! `--api-probes site`: hggc API calls recorded at the injection library's
//! callback sites (NOP5 probes) instead of uprobes on the runtime. The same
//! ground-truth comparisons as with entry probes must hold.
use asys_tests::*;

fn profile_site(
    s: &Scratch,
    name: &str,
    args: &[&str],
) -> (Vec<serde_json::Value>, std::path::PathBuf) {
    let p = profile_workload(s, &["-t", "hggc", "--api-probes", "site"], name, args, &[]);
    assert!(
        p.out.status.success(),
        "asys profile failed: {}",
        stderr(&p.out)
    );
    let report = p.report;
    let meta = metadata(&report);
    assert_eq!(meta["api_probes"], "site");
    let probed = meta["libraries"].as_object().unwrap();
    assert!(
        !probed.keys().any(|p| p.ends_with("libhggcrt.so")),
        "the runtime itself has no probes in site mode: {probed:?}"
    );
    (ground_truth_of(&p.truth, "hggc"), report)
}

#[test]
fn site_probes_record_every_call_with_its_arguments() {
    let s = Scratch::new("site-train");
    let (truth, report) = profile_site(&s, "train_step", &["6", "2048"]);
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth.iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
    // And each call carries the runtime's correlation id.
    assert_same_calls(
        truth
            .iter()
            .map(|t| format!("{} {}", t["api"].as_str().unwrap(), t["corr"]))
            .collect(),
        rows.iter()
            .map(|r| format!("{} {}", r["Name"].as_str().unwrap(), r["CorrId"]))
            .collect(),
    );
}

#[test]
fn site_probes_follow_threads_and_forked_children() {
    let s = Scratch::new("site-mt");
    let (truth, report) = profile_site(&s, "multi_stream", &["3", "15"]);
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth.iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
    let train = workload("train_step");
    let (truth, report) = profile_site(&s, "fork_exec", &[train.to_str().unwrap()]);
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth.iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
}
