//! `profile -s system-wide`: every process that uses the runtime, without
//! launching anything, each call attributed to its process.
use std::io::{BufRead, Write};

use asys_tests::*;

#[test]
fn three_unrelated_processes_each_attributed_right() {
    require_root();
    let s = Scratch::new("system-wide");
    let mut targets: Vec<(AttachTarget, std::path::PathBuf)> = (0..3)
        .map(|i| {
            let truth = s.path(&format!("truth{i}.jsonl"));
            (AttachTarget::start(&truth), truth)
        })
        .collect();
    let before: Vec<usize> = targets.iter().map(|(_, t)| ground_truth(t).len()).collect();
    let report = s.path("r");
    let (g, _err, line) = start_tracing(asys().args([
        "profile",
        "-s",
        "system-wide",
        "-o",
        report.to_str().unwrap(),
    ]));
    assert_eq!(line, "asys: tracing hggc system-wide");
    for (i, (t, _)) in targets.iter_mut().enumerate() {
        writeln!(t.stdin, "burst {}", i + 2).unwrap();
        let mut done = String::new();
        t.stdout.read_line(&mut done).unwrap();
        assert!(done.starts_with("done"), "{done}");
    }
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    assert!(g.wait().success());
    let rows = stats_json(&report.with_extension("asysrep"), "hggc_api_trace");
    for (i, (t, truth)) in targets.iter().enumerate() {
        let window: Vec<String> = ground_truth(truth)[before[i]..]
            .iter()
            .map(truth_key)
            .collect();
        assert_eq!(window.len(), 4 * (i + 2));
        let mine: Vec<String> = rows
            .iter()
            .filter(|r| r["Pid"].as_u64() == Some(t.pid as u64))
            .map(trace_key)
            .collect();
        assert_same_calls(window, mine);
    }
    for (mut t, _) in targets {
        writeln!(t.stdin, "quit").unwrap();
        assert!(t.guard.wait().success());
    }
}
