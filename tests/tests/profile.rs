//! `asys profile` against the simulated runtime's ground truth.
use asys_tests::*;

/// Profiles `workload args` with a ground-truth log; returns (truth, report, asys output).
fn profile(
    s: &Scratch,
    name: &str,
    args: &[&str],
    extra: &[&str],
) -> (
    Vec<serde_json::Value>,
    std::path::PathBuf,
    std::process::Output,
) {
    let extra: Vec<&str> = ["-t", "hggc"].iter().chain(extra).copied().collect();
    let p = profile_workload(s, &extra, name, args, &[]);
    assert!(
        p.out.status.success(),
        "asys profile failed: {}",
        stderr(&p.out)
    );
    (ground_truth_of(&p.truth, "hggc"), p.report, p.out)
}

#[test]
fn training_loop_calls_and_arguments_match_ground_truth() {
    let s = Scratch::new("train");
    let (truth, report, out) = profile(&s, "train_step", &["7", "4096"], &[]);
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth.iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
    // The workload's own account agrees with the summary's Num Calls.
    // (Only -t hggc is traced here; the workload's hgtx calls are not.)
    let made: std::collections::BTreeMap<_, _> = workload_calls(&stdout(&out))
        .into_iter()
        .filter(|(name, _)| name.starts_with("hggc"))
        .collect();
    let sum = stats_json(&report, "hggc_api_sum");
    assert_eq!(
        made.len(),
        sum.len(),
        "one summary row per API the workload used"
    );
    for row in &sum {
        let name = row["Name"].as_str().unwrap();
        assert_eq!(row["Num Calls"].as_u64(), made.get(name).copied(), "{name}");
    }
    // 7 steps x 3 kernels, named from the workload's symbols.
    let launches: Vec<_> = rows
        .iter()
        .filter(|r| r["Name"] == "hggcLaunchKernel")
        .collect();
    assert_eq!(launches.len(), 21);
    assert_eq!(
        launches
            .iter()
            .filter(|r| r["Kernel"] == "forward_kernel")
            .count(),
        7
    );
    // The deliberate error: invalid copy direction (21), then read by GetLastError.
    let bad: Vec<_> = rows.iter().filter(|r| r["Name"] == "hggcMemcpy").collect();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0]["Result"], 21);
    assert_eq!(bad[0]["Copy Kind"], 7);
    let last: Vec<_> = rows
        .iter()
        .filter(|r| r["Name"] == "hggcGetLastError")
        .collect();
    assert_eq!(last[0]["Result"], 21);
}

#[test]
fn call_times_lie_around_the_runtimes_own_timing() {
    let s = Scratch::new("times");
    let (truth, report, _) = profile(&s, "train_step", &["3", "1024"], &[]);
    let mut rows = stats_json(&report, "hggc_api_trace");
    rows.sort_by_key(|r| r["Start (ns)"].as_i64().unwrap());
    let mut truth = truth;
    truth.sort_by_key(|t| t["start"].as_i64().unwrap());
    assert_eq!(rows.len(), truth.len());
    for (r, t) in rows.iter().zip(&truth) {
        assert_eq!(r["Name"], t["api"]);
        // The probe fires before the runtime reads the clock and after it
        // last reads it: the traced interval contains the runtime's.
        let (rs, re) = (
            r["Start (ns)"].as_i64().unwrap(),
            r["Start (ns)"].as_i64().unwrap() + r["Duration (ns)"].as_i64().unwrap(),
        );
        let (ts, te) = (t["start"].as_i64().unwrap(), t["end"].as_i64().unwrap());
        assert!(
            rs <= ts && te <= re,
            "{}: traced [{rs},{re}] does not contain [{ts},{te}]",
            t["api"]
        );
    }
}

#[test]
fn every_thread_of_a_multithreaded_app_is_traced_exactly() {
    let s = Scratch::new("mt");
    let (truth, report, _) = profile(&s, "multi_stream", &["4", "30"], &[]);
    assert_eq!(truth.len(), 4 * (6 + 3 * 30));
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth.iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
    let tids: std::collections::BTreeSet<_> =
        rows.iter().map(|r| r["Tid"].as_u64().unwrap()).collect();
    assert_eq!(tids.len(), 4);
}

#[test]
fn follows_fork_and_exec_across_the_process_tree() {
    let s = Scratch::new("tree");
    let train = workload("train_step");
    let (truth, report, _) = profile(&s, "fork_exec", &[train.to_str().unwrap()], &[]);
    let pids: std::collections::BTreeSet<_> =
        truth.iter().map(|t| t["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 2, "parent and child both make calls");
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth.iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
    let meta = metadata(&report);
    let meta_pids: Vec<u64> = meta["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    for p in &pids {
        assert!(
            meta_pids.contains(p),
            "metadata pids {meta_pids:?} lack {p}"
        );
    }
}

#[test]
fn a_runtime_loaded_later_with_dlopen_is_traced_from_its_first_call() {
    let s = Scratch::new("dlopen");
    let lib = runtime_lib();
    let (truth, report, _) = profile(&s, "dlopen_app", &[lib.to_str().unwrap(), "6"], &[]);
    assert_eq!(truth.len(), 18);
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth.iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
}

#[test]
fn the_applications_exit_code_becomes_asys_exit_code() {
    require_root();
    let s = Scratch::new("exit");
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-o",
        report.to_str().unwrap(),
        "/bin/sh",
        "-c",
        "exit 7",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(report.with_extension("asysrep").exists());
    assert_eq!(metadata(&report.with_extension("asysrep"))["exit_code"], 7);
}

#[test]
fn duration_ends_collection_and_terminates_the_application() {
    require_root();
    let s = Scratch::new("dur");
    let report = s.path("r");
    let t0 = std::time::Instant::now();
    let o = run(&[
        "profile",
        "-d",
        "1",
        "-o",
        report.to_str().unwrap(),
        "/bin/sleep",
        "30",
    ]);
    assert!(
        t0.elapsed().as_secs() < 20,
        "asys did not stop after --duration"
    );
    // sleep dies of SIGTERM: 128 + 15.
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(report.with_extension("asysrep").exists());
}

#[test]
fn the_default_report_name_takes_the_first_free_index() {
    require_root();
    let s = Scratch::new("idx");
    for expected in ["report1.asysrep", "report2.asysrep"] {
        let o = asys()
            .current_dir(&s.0)
            .args(["profile", "/bin/true"])
            .finish();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            s.path(expected).exists(),
            "missing {expected}: {:?}",
            s.files()
        );
    }
    assert_eq!(
        s.files(),
        vec!["report1.asysrep", "report2.asysrep"],
        "no temporary files are left"
    );
}

#[test]
fn lost_events_are_counted_stored_and_printed() {
    require_root();
    let s = Scratch::new("drops");
    let truth = s.path("truth.jsonl");
    let report = s.path("r");
    // A one-page event buffer against eight threads issuing calls at once.
    let o = asys()
        .args([
            "profile",
            "--event-buffer-size",
            "4",
            "-o",
            report.to_str().unwrap(),
        ])
        .arg(workload("multi_stream"))
        .args(["8", "400"])
        .env("HGGC_SIM_GROUND_TRUTH", &truth)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    let drops = meta["drops"]["api_ring_full"].as_u64().unwrap();
    let recorded = meta["tables"]["hggc_api"].as_u64().unwrap();
    let made = ground_truth(&truth).len() as u64;
    assert!(
        drops > 0,
        "a 4 KiB buffer should overflow under 8 threads (made {made}, recorded {recorded})"
    );
    assert_eq!(
        recorded + drops,
        made,
        "every call is either recorded or counted as lost"
    );
    let total: u64 = meta["drops"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(
        stderr(&o).contains(&format!("{total} events lost")),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains(&format!("api_ring_full={drops}")),
        "{}",
        stderr(&o)
    );
    let st = run(&["stats", report.to_str().unwrap()]);
    assert!(
        stderr(&st).contains(&format!("{total} events were lost")),
        "{}",
        stderr(&st)
    );
}

/// A library load that finds the event ring full still gets its probes:
/// the loader hook stops the process all the same and notes it where asys
/// looks without an event. Before, the load went unannounced, the process
/// ran on, and its runtime was never probed: a CI run whose ring a burst of
/// context switches had filled recorded no call at all (`loader_ring_full=5`).
#[test]
fn a_library_loaded_while_the_event_buffer_is_full_is_still_probed() {
    require_root();
    let s = Scratch::new("full-load");
    let truth = s.path("truth.jsonl");
    let report = s.path("r");
    let ready = s.path("ready");
    let stopped = s.path("stopped");
    // The shell waits until asys is stopped, then makes 20,000 traced
    // calls (an openat and a close each), far more than a 256 KiB ring
    // holds, and only then execs the workload, whose loads find the ring
    // full. It waits by testing for a file: a stat, which osrt does not
    // trace, so that nothing it does while waiting goes into the ring.
    let script = format!(
        "touch {ready}; while [ ! -e {stopped} ]; do :; done; i=0; \
         while [ $i -lt 20000 ]; do : </dev/null; i=$((i+1)); done; exec {workload} 1 20",
        ready = ready.display(),
        stopped = stopped.display(),
        workload = workload("multi_stream").display(),
    );
    let (g, err, line) = start_tracing(
        asys()
            .args(["profile", "--event-buffer-size", "256", "-t", "hggc,osrt"])
            // Every call recorded, however short: with the default
            // threshold most of the flood's calls are too fast to count
            // on a fast machine, and the ring would not fill.
            .args(["--osrt-threshold", "0"])
            .args(["-s", "none", "--cpuctxsw", "none"])
            .args(["-o", report.to_str().unwrap(), "sh", "-c", &script])
            .env("HGGC_SIM_GROUND_TRUTH", &truth),
    );
    let pid: u32 = line
        .rsplit_once("(pid ")
        .and_then(|(_, p)| p.strip_suffix(')'))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ready.exists() {
        assert!(std::time::Instant::now() < deadline, "the shell never ran");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // asys reads nothing while stopped: the ring fills and stays full.
    // Stopped once it has read what the start left (it reads at least each
    // 50 ms), the ring holds nothing but the flood's calls: 64-byte records
    // (no arguments), which fill it to the byte, so that no load event
    // fits, however small.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let asys_pid = g.0.as_ref().unwrap().id() as i32;
    assert_eq!(signal(asys_pid, libc::SIGSTOP), 0);
    std::fs::write(&stopped, "").unwrap();
    // Until the workload is held at a load (what asys does now) or has run
    // to its end untraced (what it did before).
    let held = loop {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        match process_state(pid) {
            Some('T') if comm.trim() == "multi_stream" => break true,
            None | Some('Z') => break false,
            _ => {}
        }
        if std::time::Instant::now() > deadline {
            signal(asys_pid, libc::SIGCONT);
            panic!("the workload neither stopped nor ended");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert_eq!(signal(asys_pid, libc::SIGCONT), 0);
    let status = g.wait();
    let rest: Vec<String> = std::io::BufRead::lines(err).map(|l| l.unwrap()).collect();
    assert!(status.success(), "{rest:?}");
    let meta = metadata(&report.with_extension("asysrep"));
    let made = ground_truth_of(&truth, "hggc").len() as u64;
    assert!(made > 0, "the workload ran: {rest:?}");
    assert!(
        meta["drops"]["api_ring_full"].as_u64().unwrap() > 0,
        "the shell's calls filled the ring: {rest:?}"
    );
    assert!(held, "the workload ran on, unprobed: {rest:?}");
    assert!(
        meta["events"]["unannounced_loads"].as_u64().unwrap_or(0) >= 1,
        "{} {} {rest:?}",
        meta["events"],
        meta["drops"]
    );
    assert_eq!(meta["drops"]["loader_ring_full"].as_u64(), Some(0));
    assert_eq!(
        meta["tables"]["hggc_api"].as_u64(),
        Some(made),
        "every call the workload made is recorded: {rest:?}"
    );
}

#[test]
fn stats_formats_agree() {
    let s = Scratch::new("fmt");
    let (truth, report, _) = profile(&s, "train_step", &["2", "256"], &[]);
    let r = report.to_str().unwrap();
    let csv = stdout(&run(&["stats", "--format", "csv", r]));
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "Row#,Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name"
    );
    let total: u64 = lines
        .map(|l| l.split(',').nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, truth.len() as u64);
    let col = stdout(&run(&["stats", r]));
    assert!(col.contains("HGGC API Summary (hggc_api_sum)"));
    assert!(col.contains("hggcLaunchKernel"));
    let pct: f64 = stats_json(&report, "hggc_api_sum")
        .iter()
        .map(|r| r["Time (%)"].as_f64().unwrap())
        .sum();
    assert!((pct - 100.0).abs() < 0.5, "Time (%) sums to {pct}");
}

#[test]
fn ctrl_c_ends_collection_writes_the_report_and_stops_the_app() {
    require_root();
    let s = Scratch::new("int");
    let report = s.path("r");
    let mut cmd = asys();
    cmd.args([
        "profile",
        "-o",
        report.to_str().unwrap(),
        "/bin/sleep",
        "30",
    ])
    .stderr(std::process::Stdio::piped());
    // A command started in the background by a shell inherits SIGINT
    // ignored, and so would sleep: give them the default, as at a terminal.
    // SAFETY: the hook runs in the forked child before exec and only calls
    // signal, which is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut g = ChildGuard(Some(cmd.spawn().unwrap()));
    let mut err = std::io::BufReader::new(g.child().stderr.take().unwrap());
    read_tracing_line(&mut err);
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    let status = g.wait();
    // sleep got the interrupt too: 128 + SIGINT.
    assert_eq!(status.code(), Some(130));
    let report = report.with_extension("asysrep");
    assert_eq!(metadata(&report)["exit_code"], 130);
    assert_eq!(s.files(), vec!["r.asysrep"], "no temporary files are left");
}
