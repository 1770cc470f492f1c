//! The soak (`cargo xtask soak`, xtask/src/soak.rs) for 2 minutes: `asys
//! profile --always-on` of the soak workload, `asys dump` every 30 s with
//! each report checked exactly against the workload's log, RSS and
//! descriptors not growing, the flight recorder's ring within its bound and
//! CPU per event not rising. The run and its goals are xtask's, so that
//! the hour-long soak and this test judge alike; this test runs them with
//! the asys under test and reads what they found.
use std::process::Command;

use asys_tests::*;

#[test]
fn two_minutes_always_on_stay_bounded_and_every_dump_is_exact() {
    require_root();
    let s = Scratch::new("soak");
    // `cargo xtask test` runs the tests from the xtask binary it built.
    let xtask = target().join("debug/xtask");
    assert!(
        xtask.exists(),
        "{} is missing: run `cargo xtask test`, which builds it",
        xtask.display()
    );
    let o = Command::new(&xtask)
        .args(["soak", "2", "--no-plots", "--asys"])
        .arg(asys_bin())
        .arg("--out")
        .arg(&s.0)
        .output()
        .unwrap();
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "{said}");
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.path("soak.json")).unwrap()).unwrap();
    assert_eq!(result["passed"], true, "{said}");
    // Dumps at 30, 60 and 90 s, and the end's report, all exact.
    let goals = &result["goals"];
    assert_eq!(goals["dumps"]["of"], 4, "{said}");
    assert_eq!(goals["dumps"]["exact"], 4, "{said}");
    for d in result["dumps"].as_array().unwrap() {
        assert!(d["calls_checked"].as_u64().unwrap() > 0, "{d}");
    }
    // A sample every 2 s (60 in 2 minutes; the first may come late).
    assert!(result["samples"].as_array().unwrap().len() >= 55, "{said}");
}
