//! Call stacks of API calls (`--hggc-backtrace`): copied by the kernel at the
//! return, unwound with DWARF CFI in userspace (binaries built without frame
//! pointers), named with addr2line (function, file, line, demangled C++).
use asys_tests::*;

/// The workload's source, whose lines the stacks must name.
const PROGRAM: &str = include_str!("../workloads/stacks.cpp");

fn line_of(marker: &str) -> i64 {
    PROGRAM.lines().position(|l| l.contains(marker)).unwrap() as i64 + 1
}

#[test]
fn stacks_of_frame_pointer_less_code_unwind_to_named_lines() {
    require_root();
    let s = Scratch::new("backtrace");
    let lib = sim().join("lib");
    let bin = build_workload(
        "stacks.cpp",
        "stacks",
        &[
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            &format!("-I{}", sim().join("include").display()),
            &format!("-L{}", lib.display()),
            "-lhggcrt",
            &format!("-Wl,-rpath,{}", lib.display()),
        ],
    );
    let report = s.path("r");
    let o = run(&[
        "profile",
        "--hggc-backtrace",
        "all:0",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let frames: Vec<_> = stats_json(&report.with_extension("asysrep"), "hggc_api_backtrace")
        .into_iter()
        .filter(|f| f["API"] == "hggcStreamSynchronize")
        .collect();
    let got: Vec<(String, i64)> = frames
        .iter()
        .take(4)
        .map(|f| {
            (
                f["Function"].as_str().unwrap().to_string(),
                f["Line"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "app::inner(hggcStream_st*)".to_string(),
                line_of("CALL-INNER")
            ),
            (
                "app::middle(hggcStream_st*)".to_string(),
                line_of("CALL-MIDDLE")
            ),
            ("outer(hggcStream_st*)".to_string(), line_of("CALL-OUTER")),
            ("main".to_string(), line_of("CALL-MAIN")),
        ],
        "all frames: {frames:?}"
    );
    assert!(frames[0]["File"].as_str().unwrap().ends_with("stacks.cpp"));
}

#[test]
fn only_calls_over_the_threshold_get_a_stack() {
    require_root();
    let s = Scratch::new("backtrace-thr");
    let report = s.path("r");
    // A threshold no call reaches (10 s), then one every call reaches.
    let o = run(&[
        "profile",
        "--hggc-backtrace",
        "all:10000000000",
        "-o",
        report.to_str().unwrap(),
        workload("train_step").to_str().unwrap(),
        "2",
        "64",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stats_json(&report.with_extension("asysrep"), "hggc_api_backtrace").is_empty());
    let all = s.path("all");
    let o = run(&[
        "profile",
        "--hggc-backtrace",
        "all:0",
        "-o",
        all.to_str().unwrap(),
        workload("train_step").to_str().unwrap(),
        "2",
        "64",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let all = all.with_extension("asysrep");
    let calls = stats_json(&all, "hggc_api_trace").len();
    let stacks: std::collections::BTreeSet<String> = stats_json(&all, "hggc_api_backtrace")
        .iter()
        .map(|f| format!("{}-{}", f["Tid"], f["Start (ns)"]))
        .collect();
    assert_eq!(stacks.len(), calls, "every call has a stack");
}
