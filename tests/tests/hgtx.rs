//! hgtx ranges (NVTX v2 style) against the library's ground truth: push/pop
//! nesting per thread and domain, start/end ranges across threads, domains,
//! registered strings and wide-character messages.
use std::collections::BTreeMap;

use asys_tests::*;
use serde_json::Value;

fn profile_hgtx(s: &Scratch) -> (Vec<Value>, std::path::PathBuf) {
    let p = profile_workload(s, &["-t", "hggc,hgtx"], "hgtx_ranges", &[], &[]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    (ground_truth(&p.truth), p.report)
}

fn s(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

#[test]
fn push_pop_nesting_and_start_end_ranges_match_ground_truth() {
    let scratch = Scratch::new("hgtx");
    let (truth, report) = profile_hgtx(&scratch);
    let pushes: Vec<String> = truth
        .iter()
        .filter(|t| {
            matches!(
                t["api"].as_str().unwrap(),
                "hgtxRangePushA" | "hgtxRangePushW" | "hgtxRangePushEx" | "hgtxDomainRangePushEx"
            ) && t["ret"].as_i64().unwrap() >= 0
        })
        .map(|t| {
            format!(
                "pid={} tid={} lvl={} name={} domain={}",
                t["pid"],
                t["tid"],
                t["level"],
                s(&t["message"]),
                s(&t["domain"])
            )
        })
        .collect();
    assert!(pushes.len() >= 5, "the workload pushes ranges: {pushes:?}");
    let rows = stats_json(&report, "hgtx_pushpop_trace");
    assert_same_calls(
        pushes,
        rows.iter()
            .map(|r| {
                format!(
                    "pid={} tid={} lvl={} name={} domain={}",
                    r["Pid"],
                    r["Tid"],
                    r["Lvl"],
                    s(&r["Name"]),
                    s(&r["Domain"])
                )
            })
            .collect(),
    );
    // Nesting: a range at level L+1 lies inside the level-L range open on its thread.
    let mut by_thread: BTreeMap<(i64, String), Vec<&Value>> = BTreeMap::new();
    for r in &rows {
        by_thread
            .entry((r["Tid"].as_i64().unwrap(), s(&r["Domain"])))
            .or_default()
            .push(r);
    }
    for ranges in by_thread.values() {
        for inner in ranges.iter().filter(|r| r["Lvl"].as_i64().unwrap() > 0) {
            let lvl = inner["Lvl"].as_i64().unwrap();
            let (is, ie) = (
                inner["Start (ns)"].as_i64().unwrap(),
                inner["End (ns)"].as_i64().unwrap(),
            );
            let parent = ranges.iter().find(|p| {
                p["Lvl"].as_i64().unwrap() == lvl - 1
                    && p["Start (ns)"].as_i64().unwrap() <= is
                    && ie <= p["End (ns)"].as_i64().unwrap()
            });
            assert!(
                parent.is_some(),
                "{inner} has no enclosing level {} range",
                lvl - 1
            );
        }
    }
    // Start/end ranges, which may end on another thread than they started.
    let ended: std::collections::HashSet<(i64, String)> = truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().ends_with("RangeEnd") && t["found"] != 0)
        .map(|t| (t["pid"].as_i64().unwrap(), t["id"].to_string()))
        .collect();
    let starts: Vec<String> = truth
        .iter()
        .filter(|t| {
            t["api"].as_str().unwrap().contains("RangeStart") && t["ret"].as_u64().unwrap_or(0) != 0
        })
        .filter(|t| ended.contains(&(t["pid"].as_i64().unwrap(), t["id"].to_string())))
        .map(|t| {
            format!(
                "pid={} tid={} name={} domain={}",
                t["pid"],
                t["tid"],
                s(&t["message"]),
                s(&t["domain"])
            )
        })
        .collect();
    assert!(starts.len() >= 2, "{starts:?}");
    let se = stats_json(&report, "hgtx_startend_trace");
    assert_same_calls(
        starts,
        se.iter()
            .map(|r| {
                format!(
                    "pid={} tid={} name={} domain={}",
                    r["Pid"],
                    r["Start Tid"],
                    s(&r["Name"]),
                    s(&r["Domain"])
                )
            })
            .collect(),
    );
    // Every hgtx call of the workload is in the API table.
    let mut made: BTreeMap<String, i64> = BTreeMap::new();
    for t in truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().starts_with("hgtx"))
    {
        *made.entry(s(&t["api"])).or_default() += 1;
    }
    let sum = stats_json(&report, "hgtx_api_sum");
    let traced: BTreeMap<String, i64> = sum
        .iter()
        .map(|r| (s(&r["Name"]), r["Num Calls"].as_i64().unwrap()))
        .collect();
    assert_eq!(made, traced);
}
