//! `profile -s system-wide`: every process that uses the runtime, without
//! launching anything, each call attributed to its process.
use std::{
    collections::BTreeMap,
    io::{BufRead, Write},
    process::Stdio,
};

use asys_tests::*;

#[test]
fn three_unrelated_processes_each_attributed_right() {
    require_root();
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
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

/// Tests that time a system-wide recording, or count what it lost, run one
/// at a time: two at once would each see the other's load.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The `Start (ns)` of every row of `report`'s `table` made by `pid`.
fn starts_of(report: &std::path::Path, table: &str, pid: u32) -> Vec<i64> {
    let pids = stats_csv_column(report, table, "Pid");
    let starts = stats_csv_column(report, table, "Start (ns)");
    let mut mine: Vec<i64> = pids
        .iter()
        .zip(&starts)
        .filter(|(p, _)| p.parse::<u32>().ok() == Some(pid))
        .map(|(_, s)| s.parse().unwrap())
        .collect();
    mine.sort_unstable();
    mine
}

#[test]
fn system_wide_cuda_for_5_s_is_exact_lossless_on_time_and_has_nothing_foreign() {
    require_root();
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new("system-wide-window");
    let bin = timed_calls(TimedRuntime::Cuda);
    // Two processes calling libcudart 2,000 times a second each, running
    // before asys starts and after it ends: for 10 s (longer under
    // emulation, where asys takes longer to start and its window may run
    // up to time_scale seconds long).
    let seconds = if emulated() {
        10.0 + 2.0 * time_scale()
    } else {
        10.0
    };
    let logs: Vec<std::path::PathBuf> = (0..2).map(|i| s.path(&format!("calls{i}.log"))).collect();
    let workers: Vec<ChildGuard> = logs
        .iter()
        .map(|log| {
            ChildGuard(Some(
                std::process::Command::new(&bin)
                    .args(["2000".to_string(), seconds.to_string()])
                    .arg(log)
                    .spawn()
                    .unwrap(),
            ))
        })
        .collect();
    // And a process that is none of -t cuda's business: the simulated
    // runtime with asys's injection library, launching kernels whose device
    // activity the library reports at its probe sites.
    let inject = asys_bin().with_file_name("libasys_inject.so");
    assert!(inject.exists(), "{} is missing", inject.display());
    let mut foreign = ChildGuard(Some(
        std::process::Command::new(workload("attach_target"))
            .env("HGGC_INJECTION64_PATH", &inject)
            .env("HGGC_SIM_GROUND_TRUTH", s.path("foreign.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let mut foreign_in = foreign.child().stdin.take().unwrap();
    let mut foreign_out = std::io::BufReader::new(foreign.child().stdout.take().unwrap());
    let mut ready = String::new();
    foreign_out.read_line(&mut ready).unwrap();
    assert!(ready.starts_with("ready"), "{ready}");
    std::thread::sleep(std::time::Duration::from_millis(500));

    let report = s.path("r");
    let began = std::time::Instant::now();
    let mut command = asys();
    command.arg("profile");
    if emulated() {
        // Emulated, asys's collector reads events about time_scale times
        // slower than the workload makes them: the ring must hold that
        // much more for the run to stay lossless (8 MiB by default).
        let kib = (8192 * time_scale() as u32).next_power_of_two();
        command.args(["--event-buffer-size".to_string(), kib.to_string()]);
    }
    let (g, mut err, line) = start_tracing(command.args([
        "-s",
        "system-wide",
        "-t",
        "cuda",
        "-d",
        "5",
        "-o",
        report.to_str().unwrap(),
    ]));
    assert_eq!(line, "asys: tracing cuda system-wide");
    for _ in 0..3 {
        assert_eq!(
            burst_over(&mut foreign_in, &mut foreign_out, 50),
            expected_checksum(50)
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let status = g.wait();
    let took = began.elapsed();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(status.success(), "asys: {status}\n{rest}");
    eprintln!("-d 5 took {took:?} of wall time");
    // The window, and at most a second of asys's own. Under emulation,
    // where its start-up reaches every process of the guest slowly, only a
    // guard against a hang, nine times time_scale: one pass took 15.4 s on
    // an idle host, one 52 s on a loaded one.
    let own = if emulated() { 9.0 * time_scale() } else { 1.0 };
    let bound = std::time::Duration::from_secs_f64(5.0 + own);
    assert!(
        took < bound,
        "-d 5 took {took:?} of wall time (bound {bound:?})"
    );
    let worker_pids: Vec<u32> = workers.iter().map(|w| w.0.as_ref().unwrap().id()).collect();
    for w in workers {
        assert!(w.wait().success());
    }
    writeln!(foreign_in, "quit").unwrap();
    assert!(foreign.wait().success());

    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    assert_eq!(lost_events(&meta), BTreeMap::new(), "{rest}");
    let window = (
        meta["start_monotonic_ns"].as_i64().unwrap(),
        meta["end_monotonic_ns"].as_i64().unwrap(),
    );
    // 5 s, and at most a second more while asys turns recording off (more
    // under emulation, where asys notices its deadline later: time_scale);
    // whatever its length, every call inside it is checked below.
    let length = (window.1 - window.0) as f64 / 1e9;
    assert!(
        (5.0..5.0 + time_scale()).contains(&length),
        "the window is {length} s"
    );
    // The two workers, and only they.
    let mut pids: Vec<u64> = meta["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    pids.sort_unstable();
    let mut want: Vec<u64> = worker_pids.iter().map(|&p| u64::from(p)).collect();
    want.sort_unstable();
    assert_eq!(pids, want, "the processes in the report");
    // Each worker: every call it made inside the window, none outside.
    for (log, pid) in logs.iter().zip(&worker_pids) {
        let calls = timed_log(log);
        // The worker called before the window and after it, so the window
        // holds its calls of the whole window: 2,000 a second.
        let (first, last) = (calls[0].0, calls[calls.len() - 1].1);
        assert!(
            first < window.0 && last > window.1,
            "worker {pid} called from {first} to {last}, the window is {window:?}"
        );
        let mine = starts_of(&report, "cuda_api_trace", *pid);
        let inside = assert_window_exact(&calls, &mine, window);
        let want = 2000.0 * length;
        assert!(
            inside as f64 >= 0.99 * want,
            "{inside} calls of {pid} in the window of {length} s"
        );
    }
    // Nothing of the hggc process: no device activity, no calls.
    assert_eq!(meta["tables"]["hggc_activity"].as_u64().unwrap_or(0), 0);
    assert_eq!(meta["tables"]["hggc_api"].as_u64().unwrap_or(0), 0);
}

/// System-wide, a process's first load of a library no other process has
/// loaded is how asys learns to probe that file. The hook does not stop
/// such a process, so a load the full ring had no room for used to leave
/// the library unprobed for the whole recording; now the hook notes the
/// process and asys scans it at its next tick.
#[test]
fn a_runtime_first_loaded_while_the_ring_is_full_is_probed_late_not_never() {
    require_root();
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new("system-wide-full");
    // A copy of the runtime: a file no other process maps, so nothing but
    // this target's load can get it probed.
    let lib = s.path("lib");
    std::fs::create_dir(&lib).unwrap();
    std::fs::copy(runtime_lib(), lib.join("libhggcrt.so")).unwrap();
    let report = s.path("r");
    let (g, err, line) = start_tracing(asys().args([
        "profile",
        "-s",
        "system-wide",
        // One sample a second: the ring is for the loads, not the samples.
        "--sample-period",
        "1000000000",
        "--event-buffer-size",
        "16",
        "-o",
        report.to_str().unwrap(),
    ]));
    assert_eq!(line, "asys: tracing hggc system-wide");
    // Read what the start left (asys reads at least each 50 ms), then stop
    // asys: the ring fills and stays full.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let asys_pid = g.0.as_ref().unwrap().id() as i32;
    assert_eq!(signal(asys_pid, libc::SIGSTOP), 0);
    // Each `true` is a load the hook announces with a 40-byte record, the
    // smallest there is: 800 of them are twice what 16 KiB holds, and the
    // last ones leave less room than any record needs.
    for _ in 0..800 {
        let status = std::process::Command::new("true").status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            signal(asys_pid, libc::SIGCONT);
            panic!("true: {status:?}");
        }
    }
    let truth = s.path("truth.jsonl");
    let mut target = AttachTarget::spawn(
        std::process::Command::new(workload("attach_target"))
            .env("HGGC_SIM_GROUND_TRUTH", &truth)
            .env("LD_LIBRARY_PATH", &lib),
    );
    let pid = target.pid;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(maps.contains(lib.to_str().unwrap()), "{maps}");
    assert_eq!(signal(asys_pid, libc::SIGCONT), 0);
    // Twenty of asys's ticks: it has read the ring and scanned the target.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let before = ground_truth(&truth).len();
    assert_eq!(target.burst(3), expected_checksum(3));
    signal(asys_pid, libc::SIGINT);
    assert!(g.wait().success());
    let rest: Vec<String> = err.lines().map(|l| l.unwrap()).collect();
    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    assert!(
        meta["drops"]["loader_ring_full"].as_u64().unwrap() > 0,
        "the flood filled the ring: {rest:?}"
    );
    let window: Vec<String> = ground_truth(&truth)[before..]
        .iter()
        .map(truth_key)
        .collect();
    assert_eq!(window.len(), 12);
    let rows = stats_json(&report, "hggc_api_trace");
    let traced: Vec<String> = rows
        .iter()
        .filter(|r| r["Pid"].as_u64() == Some(pid as u64))
        .map(trace_key)
        .collect();
    eprintln!("lost: {} {rest:?}", meta["drops"]);
    assert_same_calls(window, traced);
    assert!(
        meta["events"]["late_load_scans"].as_u64().unwrap_or(0) >= 1,
        "{} {rest:?}",
        meta["events"]
    );
    let (status, _) = target.quit();
    assert!(status.success());
}

#[test]
fn with_inject_running_each_running_process_gets_its_device_activity() {
    require_root();
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new("system-wide-inject");
    let mut targets: Vec<AttachTarget> = (0..2)
        .map(|i| AttachTarget::start(&s.path(&format!("truth{i}.jsonl"))))
        .collect();
    let report = s.path("r");
    let (g, mut err, said) = start_tracing_said(asys().args([
        "profile",
        "-s",
        "system-wide",
        "--inject",
        "running",
        "-o",
        report.to_str().unwrap(),
    ]));
    for t in &targets {
        assert!(
            said.contains(&format!(
                "asys: process {} (attach_target): device activity recorded from now on (injection library loaded)",
                t.pid
            )),
            "{said}"
        );
    }
    for (i, t) in targets.iter_mut().enumerate() {
        assert_eq!(t.burst(i as u32 + 2), expected_checksum(i as u32 + 2));
    }
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(g.wait().success(), "{rest}");
    let device = stats_json(&report.with_extension("asysrep"), "hggc_ppu_trace");
    for (i, t) in targets.into_iter().enumerate() {
        let mine = device
            .iter()
            .filter(|r| r["Pid"].as_u64() == Some(t.pid as u64))
            .count();
        // Each burst iteration: a kernel and two copies.
        assert_eq!(mine, 3 * (i + 2), "process {}", t.pid);
        let (status, _) = t.quit();
        assert!(status.success());
    }
}
