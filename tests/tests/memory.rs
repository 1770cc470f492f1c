//! Device and pinned memory usage from the recorded allocation calls, against
//! a replay of the runtime's ground truth.
use std::collections::{BTreeMap, HashMap};

use asys_tests::*;

#[test]
fn memory_usage_matches_a_replay_of_the_ground_truth() {
    require_root();
    let s = Scratch::new("memory");
    let truth_path = s.path("truth.jsonl");
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-t", "hggc", "-o", report.to_str().unwrap()])
        .arg(workload("multi_stream"))
        .args(["3", "4"])
        .env("HGGC_SIM_GROUND_TRUTH", &truth_path)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut truth = ground_truth_of(&truth_path, "hggc");
    truth.sort_by_key(|t| t["end"].as_i64().unwrap());
    // Replay: (pid, kind) -> (allocations, frees, current, peak).
    let mut live: HashMap<(i64, i64), (i64, &str)> = HashMap::new();
    let mut usage: BTreeMap<(i64, String), (i64, i64, i64, i64)> = BTreeMap::new();
    for t in truth.iter().filter(|t| t["ret"] == 0) {
        let pid = t["pid"].as_i64().unwrap();
        let api = t["api"].as_str().unwrap();
        let (kind, delta) = match api {
            "hggcMalloc" | "hggcMallocHost" => {
                let kind = if api == "hggcMalloc" {
                    "device"
                } else {
                    "pinned"
                };
                let bytes = t["bytes"].as_i64().unwrap();
                live.insert((pid, t["ptr"].as_i64().unwrap()), (bytes, kind));
                usage.entry((pid, kind.into())).or_default().0 += 1;
                (kind, bytes)
            }
            "hggcFree" | "hggcFreeHost" => {
                let Some((bytes, kind)) = live.remove(&(pid, t["ptr"].as_i64().unwrap())) else {
                    continue;
                };
                usage.entry((pid, kind.into())).or_default().1 += 1;
                (kind, -bytes)
            }
            _ => continue,
        };
        let u = usage.entry((pid, kind.into())).or_default();
        u.2 += delta;
        u.3 = u.3.max(u.2);
    }
    assert!(!usage.is_empty());
    let rows = stats_json(
        &report.with_extension("asysrep"),
        "device_memory_usage_summary",
    );
    let traced: BTreeMap<(i64, String), (i64, i64, i64, i64)> = rows
        .iter()
        .map(|r| {
            (
                (
                    r["Pid"].as_i64().unwrap(),
                    r["Kind"].as_str().unwrap().to_string(),
                ),
                (
                    r["Allocations"].as_i64().unwrap(),
                    r["Frees"].as_i64().unwrap(),
                    r["At End (B)"].as_i64().unwrap(),
                    r["Peak (B)"].as_i64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(usage, traced);
}
