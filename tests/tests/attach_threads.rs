//! Threads that existed before an attach are traced like the ones started
//! after it: the context-switch probe knows a thread switching in only by
//! its id, so each of them must be in the traced set by its own id.
use std::io::{BufRead, BufReader, Write};

use asys_tests::*;

#[test]
fn a_thread_started_before_the_attach_is_seen_switching_in() {
    require_root();
    let s = Scratch::new("attach-threads");
    // A worker thread started before the attach waits for a byte on stdin,
    // then spins about 2 ms and sleeps 5 ms, 30 times, and prints its own
    // voluntary switches and CPU time over that loop.
    let bin = c_workload("prethreaded.c", &["-lpthread"]);
    let mut app = ChildGuard(Some(
        std::process::Command::new(&bin)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let pid = app.child().id();
    let mut out = BufReader::new(app.child().stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let tid: u64 = line
        .trim()
        .strip_prefix("worker ")
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(tid, u64::from(pid), "the worker is a thread of its own");

    let report = s.path("r");
    let (g, _err, _) = start_tracing(
        asys()
            .args(["attach", "--cpuctxsw", "process-tree", "-o"])
            .arg(&report)
            .arg(pid.to_string()),
    );
    app.child().stdin.as_mut().unwrap().write_all(b"g").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let w: Vec<&str> = line.split_whitespace().collect();
    let (voluntary, cpu_ns): (u64, u64) = (w[1].parse().unwrap(), w[3].parse().unwrap());
    assert!(app.wait().success());
    // attach ends at Ctrl+C (or --duration), not with the application.
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    assert!(g.wait().success());

    let rows = stats_json(&report.with_extension("asysrep"), "cpu_ctxsw_sum");
    let row = rows
        .iter()
        .find(|r| r["Tid"].as_u64() == Some(tid))
        .unwrap_or_else(|| panic!("no row for the worker {tid} in {rows:?}"));
    assert!(voluntary >= 30, "the worker slept 30 times: {voluntary}");
    assert!(row["Voluntary"].as_u64().unwrap() >= voluntary, "{row}");
    // Time on CPU runs from a switch in to the next switch out: without the
    // switches in, the worker's CPU time is not there.
    let on_cpu = row["Total Time (ns)"].as_u64().unwrap();
    assert!(
        on_cpu + on_cpu / 20 + 3_000_000 >= cpu_ns && on_cpu <= cpu_ns + cpu_ns / 20 + 10_000_000,
        "on CPU: traced {on_cpu} ns, the worker's CPU time over its loop {cpu_ns} ns"
    );
}
