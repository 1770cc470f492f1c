//! CPU context switches (`--cpuctxsw`, and `-s system-wide`): checked
//! against what the kernel tells the thread itself about its own switches
//! (getrusage RUSAGE_THREAD) and CPU time (CLOCK_THREAD_CPUTIME_ID).
use asys_tests::*;

/// Switches in main, and since the thread began.
struct Own {
    tid: u64,
    voluntary: u64,
    involuntary: u64,
    all_voluntary: u64,
    all_involuntary: u64,
    cpu_ns: u64,
}

fn parse(out: &str) -> Own {
    let w: Vec<&str> = out.split_whitespace().collect();
    let n = |k: &str| {
        let i = w.iter().position(|x| *x == k).unwrap();
        w[i + 1].parse::<u64>().unwrap()
    };
    Own {
        tid: n("tid"),
        voluntary: n("nvcsw"),
        involuntary: n("nivcsw"),
        all_voluntary: n("all_nvcsw"),
        all_involuntary: n("all_nivcsw"),
        cpu_ns: n("cpu_ns"),
    }
}

/// The thread's row of cpu_ctxsw_sum agrees with what it measured itself:
/// at least its switches in main, at most all its switches and those of
/// printing and exiting; and its time on CPU is its CPU time.
fn check(report: &std::path::Path, own: &Own, pid: u64) {
    let rows = stats_json(report, "cpu_ctxsw_sum");
    let row = rows
        .iter()
        .find(|r| r["Tid"].as_u64() == Some(own.tid))
        .unwrap_or_else(|| panic!("no row for tid {} in {rows:?}", own.tid));
    assert_eq!(row["Pid"].as_u64(), Some(pid), "{row}");
    assert_eq!(row["Name"], "sleeper", "{row}");
    let vol = row["Voluntary"].as_u64().unwrap();
    let invol = row["Involuntary"].as_u64().unwrap();
    assert!(
        own.voluntary >= 30,
        "the thread slept 30 times: {}",
        own.voluntary
    );
    assert!(
        vol >= own.voluntary && vol <= own.all_voluntary + 3,
        "voluntary: traced {vol}, the thread counted {}",
        own.voluntary
    );
    assert!(
        invol >= own.involuntary && invol <= own.all_involuntary + 3,
        "involuntary: traced {invol}, the thread counted {}",
        own.involuntary
    );
    let on_cpu = row["Total Time (ns)"].as_u64().unwrap();
    let diff = on_cpu.abs_diff(own.cpu_ns);
    assert!(
        diff <= own.cpu_ns / 20 + 3_000_000,
        "on CPU: traced {on_cpu} ns, the thread's CPU time {} ns",
        own.cpu_ns
    );
}

/// Spins about 2 ms, sleeps 5 ms, 30 times; then prints its own counts.
fn build() -> std::path::PathBuf {
    c_workload("sleeper.c", &[])
}

#[test]
fn process_tree_context_switches_match_the_threads_own_counts() {
    require_root();
    let s = Scratch::new("sched-tree");
    let bin = build();
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-t", "osrt", "--cpuctxsw", "process-tree", "-o"])
        .arg(&report)
        .arg(&bin)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let own = parse(&stdout(&o));
    let report = report.with_extension("asysrep");
    // Switch-ins the kernel did not deliver (on the note line) cost on-CPU
    // time within the check's margin; the counts come from switch-outs.
    assert_nothing_lost(&stderr(&o), &metadata(&report));
    let pid = metadata(&report)["root_pids"][0].as_u64().unwrap();
    check(&report, &own, pid);
    // Only the traced tree: no other process's threads.
    let rows = stats_json(&report, "cpu_ctxsw_sum");
    assert!(
        rows.iter().all(|r| r["Pid"].as_u64() == Some(pid)),
        "{rows:?}"
    );

    // --cpuctxsw none records none.
    let o = asys()
        .args(["profile", "-t", "osrt", "--cpuctxsw", "none", "-o"])
        .arg(s.path("none"))
        .arg(&bin)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stats_json(&s.path("none.asysrep"), "cpu_ctxsw_sum").is_empty());
}

#[test]
fn system_wide_records_every_threads_switches() {
    require_root();
    let s = Scratch::new("sched-system");
    let bin = build();
    let report = s.path("sys");
    let (g, _err, line) = start_tracing(
        asys()
            .args(["profile", "-s", "system-wide", "-o"])
            .arg(&report),
    );
    assert_eq!(line, "asys: tracing hggc system-wide");
    // A process asys did not start, which sleeps (so it switches out at least once).
    let mut other = std::process::Command::new("sleep")
        .arg("0.1")
        .spawn()
        .expect("sleep");
    let other_pid = other.id() as u64;
    assert!(other.wait().expect("sleep").success());
    let child = std::process::Command::new(&bin).finish();
    assert!(child.status.success());
    let own = parse(&String::from_utf8_lossy(&child.stdout));
    // The process is gone; its pid is its main thread's id.
    let asys_pid = g.0.as_ref().map(|c| c.id() as u64);
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    assert!(g.wait().success());
    let report = report.with_extension("asysrep");
    check(&report, &own, own.tid);
    let rows = stats_json(&report, "cpu_ctxsw_sum");
    // Other processes were recorded too: one the test ran beside, and asys. (Not
    // the idle task: on a machine whose CPUs are all busy it may not run at all.)
    assert!(
        rows.iter().any(|r| r["Pid"].as_u64() == Some(other_pid)),
        "no switch of the other process {other_pid}: {rows:?}"
    );
    assert!(
        rows.iter().any(|r| r["Pid"].as_u64() == asys_pid),
        "asys itself ran during the trace"
    );
}
