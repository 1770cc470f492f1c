//! Targets that are not what asys hopes for: no runtime at all, a stripped
//! runtime library, a stripped application.
use asys_tests::*;

#[test]
fn a_target_without_the_runtime_gets_a_warning_and_an_empty_report() {
    require_root();
    let s = Scratch::new("no-runtime");
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "hggc",
        "-o",
        report.to_str().unwrap(),
        "/bin/true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("asys: warning: no traced process loaded a library with hggc functions"),
        "{}",
        stderr(&o)
    );
    let meta = metadata(&report.with_extension("asysrep"));
    assert_eq!(meta["items_not_found"], serde_json::json!(["hggc"]));
    assert!(stats_json(&report.with_extension("asysrep"), "hggc_api_trace").is_empty());
}

fn strip(path: &std::path::Path) {
    let st = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
    let o = std::process::Command::new("readelf")
        .arg("-S")
        .arg(path)
        .finish();
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains(".symtab"),
        "still has .symtab"
    );
}

#[test]
fn stripped_runtime_and_application_are_traced_from_their_dynamic_symbols() {
    require_root();
    let s = Scratch::new("stripped");
    // A stripped copy of the runtime, found first through LD_LIBRARY_PATH
    // (the workload's RUNPATH comes after it), and a stripped application.
    for lib in ["libhggcrt.so", "libhgtx.so"] {
        std::fs::copy(sim().join("lib").join(lib), s.path(lib)).unwrap();
    }
    strip(&s.path("libhggcrt.so"));
    let app = s.path("train_step");
    std::fs::copy(workload("train_step"), &app).unwrap();
    strip(&app);
    let truth = s.path("truth.jsonl");
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-t", "hggc", "-o", report.to_str().unwrap()])
        .arg(&app)
        .args(["3", "1024"])
        .env("LD_LIBRARY_PATH", &s.0)
        .env("HGGC_SIM_GROUND_TRUTH", &truth)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    let libs: Vec<&String> = meta["libraries"].as_object().unwrap().keys().collect();
    assert_eq!(
        libs,
        vec![&s.path("libhggcrt.so").display().to_string()],
        "the stripped copy was probed"
    );
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        ground_truth_of(&truth, "hggc")
            .iter()
            .map(truth_key)
            .collect(),
        rows.iter().map(trace_key).collect(),
    );
}
