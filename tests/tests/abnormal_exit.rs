//! When things end badly: an application that dies of a signal or leaves by
//! `_exit` (its device records arrive, or the missing ones are counted), and
//! an asys that is SIGKILLed while the loader hook holds a process stopped
//! (its watchdog continues it).
use std::{
    collections::BTreeSet,
    io::Read,
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use asys_tests::*;
use serde_json::Value;

/// APIs that put work on the device when they succeed.
const DEVICE_APIS: &[&str] = &[
    "hggcLaunchKernel",
    "hggcMemcpy",
    "hggcMemcpyAsync",
    "hggcMemset",
    "hggcMemsetAsync",
];

/// Operations `crash_exit` puts on the device before it ends.
const OPS: u64 = 50;

struct Ended {
    out: std::process::Output,
    meta: Value,
    /// Correlation ids of the successful device calls, from the runtime's log.
    issued: BTreeSet<i64>,
    /// Correlation ids of the device records in the report.
    delivered: BTreeSet<i64>,
    report: PathBuf,
    _scratch: Scratch,
}

/// `asys profile [--api-probes PROBES] crash_exit MODE OPS`.
fn crash(mode: &str, probes: &str) -> Ended {
    let s = Scratch::new(&format!("crash-{}", mode.trim_start_matches('_')));
    let p = profile_workload(
        &s,
        &["-t", "hggc", "--api-probes", probes],
        "crash_exit",
        &[mode, &OPS.to_string()],
        &[],
    );
    let truth = ground_truth_of(&p.truth, "hggc");
    let issued: BTreeSet<i64> = truth
        .iter()
        .filter(|t| DEVICE_APIS.contains(&t["api"].as_str().unwrap()) && t["ret"] == 0)
        .map(|t| t["corr"].as_i64().unwrap())
        .collect();
    // The workload's own count and the runtime's log agree.
    let made: u64 = workload_calls(&stdout(&p.out))
        .iter()
        .filter(|(api, _)| DEVICE_APIS.contains(&api.as_str()))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(made, OPS, "{}", stdout(&p.out));
    assert_eq!(issued.len() as u64, OPS);
    let delivered = stats_json(&p.report, "hggc_ppu_trace")
        .iter()
        .map(|d| d["CorrId"].as_i64().unwrap())
        .collect();
    Ended {
        meta: metadata(&p.report),
        out: p.out,
        issued,
        delivered,
        report: p.report,
        _scratch: s,
    }
}

fn drop_count(meta: &Value, source: &str) -> u64 {
    meta["drops"][source]
        .as_u64()
        .unwrap_or_else(|| panic!("no drops.{source} in {}", meta["drops"]))
}

#[test]
fn a_crash_delivers_every_device_record_and_keeps_its_signal() {
    for (mode, sig, probes) in [
        ("segv", libc::SIGSEGV, "entry"),
        ("segv", libc::SIGSEGV, "site"),
        // A stack overflow: the handler runs on its alternate stack.
        ("stack", libc::SIGSEGV, "entry"),
        ("abort", libc::SIGABRT, "entry"),
        ("term", libc::SIGTERM, "entry"),
    ] {
        let e = crash(mode, probes);
        let err = stderr(&e.out);
        // asys reports a death by signal as a shell does: 128 + the signal.
        assert_eq!(e.out.status.code(), Some(128 + sig), "{mode}: {err}");
        assert_eq!(e.meta["exit_code"], 128 + sig, "{mode}");
        assert!(
            stdout(&e.out).contains(&format!("ending by {mode}")),
            "{mode}: the workload's output is complete"
        );
        assert_eq!(
            e.delivered, e.issued,
            "{mode} ({probes}): every device record arrives, each with its call's id"
        );
        assert_eq!(drop_count(&e.meta, "device_activity_undelivered"), 0);
        assert!(err.contains("; 0 events lost"), "{mode}: {err}");
    }
}

#[test]
fn an_applications_own_fault_handler_runs_after_the_flush() {
    // crash_exit installs a SIGSEGV handler before its first runtime call,
    // so before the injection library's: ours flushes, then hands over.
    let e = crash("segv-handled", "entry");
    assert_eq!(e.out.status.code(), Some(42), "{}", stderr(&e.out));
    assert!(
        stdout(&e.out).contains("handled SIGSEGV"),
        "{}",
        stdout(&e.out)
    );
    assert_eq!(e.delivered, e.issued);
}

#[test]
fn device_records_lost_to_exit_without_flush_are_counted_never_silent() {
    for probes in ["entry", "site"] {
        let e = crash("_exit", probes);
        let err = stderr(&e.out);
        assert_eq!(e.out.status.code(), Some(7), "{err}");
        assert!(
            e.delivered.is_subset(&e.issued),
            "no record without its call"
        );
        let lost = drop_count(&e.meta, "device_activity_undelivered");
        // Nothing else could explain a missing record.
        for other in ["activity_ring_full", "activity_lost", "api_ring_full"] {
            assert_eq!(drop_count(&e.meta, other), 0, "{other}");
        }
        assert_eq!(
            e.delivered.len() as u64 + lost,
            OPS,
            "({probes}) delivered + counted lost = what the workload made"
        );
        let total: u64 = e.meta["drops"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| !k.ends_with("text_unreadable"))
            .map(|(_, v)| v.as_u64().unwrap())
            .sum();
        assert!(err.contains(&format!("; {total} events lost")), "{err}");
        if lost > 0 {
            assert!(
                err.contains(&format!("device_activity_undelivered={lost}")),
                "{err}"
            );
            let st = run(&[
                "stats",
                "--report",
                "hggc_ppu_trace",
                e.report.to_str().unwrap(),
            ]);
            assert!(
                stderr(&st).contains(&format!("device_activity_undelivered={lost}")),
                "stats warns too: {}",
                stderr(&st)
            );
        }
    }
    // The control: a normal exit flushes at exit, nothing is missing.
    let e = crash("exit", "entry");
    assert!(e.out.status.success(), "{}", stderr(&e.out));
    assert_eq!(e.delivered, e.issued);
    assert_eq!(drop_count(&e.meta, "device_activity_undelivered"), 0);
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Polls `what` every 2 ms until it holds or `limit` passes; how long it took.
fn wait_for(limit: Duration, mut what: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if what() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

/// Reaps `pid` (a child of this process) within `limit`; its exit code.
fn reap(pid: i32, limit: Duration) -> Option<i32> {
    let mut status = 0;
    let done = wait_for(limit, || {
        // SAFETY: waitpid writes the status into a local.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
    });
    done.map(|_| {
        if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        }
    })
}

#[test]
fn a_process_stopped_at_a_library_load_runs_on_when_asys_is_killed() {
    require_root();
    // Orphans (the application, the watchdog) come to this process, so that
    // their exit statuses can be read.
    // SAFETY: prctl with integer arguments.
    let subreaper = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(subreaper, 0);
    let s = Scratch::new("watchdog");
    let report = s.path("r");
    // dlopen_app sleeps 1.5 s, then loads the runtime: the loader hook stops
    // it there until asys continues it.
    let mut cmd = asys();
    cmd.args(["profile", "-t", "hggc", "-o", report.to_str().unwrap()])
        .arg(workload("dlopen_app"))
        .arg(runtime_lib())
        .args(["10", "1500"])
        .stdout(Stdio::piped());
    let (mut asys_proc, _err, line) = start_tracing(&mut cmd);
    let asys_pid = asys_proc.child().id() as i32;
    let app: i32 = line
        .rsplit_once("pid ")
        .and_then(|(_, p)| p.trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    let mut out = asys_proc.child().stdout.take().unwrap();
    let output = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let watchdogs: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&p| parent_of(p) == Some(asys_pid))
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == b"__watchdog"))
        })
        .collect();
    assert_eq!(watchdogs.len(), 1, "asys runs one watchdog");
    // The application sleeps before its dlopen: past its exec and its
    // start-up stop, in main's nanosleep (clock_nanosleep is syscall 230).
    let sleeping = || {
        let exe = std::fs::read_link(format!("/proc/{app}/exe")).unwrap_or_default();
        let call = std::fs::read_to_string(format!("/proc/{app}/syscall")).unwrap_or_default();
        exe.ends_with("dlopen_app")
            && process_state(app as u32) == Some('S')
            && matches!(call.split_whitespace().next(), Some("230" | "35"))
    };
    assert!(
        wait_for(Duration::from_secs(5), sleeping).is_some(),
        "the application never slept before its dlopen"
    );
    // Freeze asys so that nobody continues the application at its load.
    assert_eq!(signal(asys_pid, libc::SIGSTOP), 0);
    assert!(
        wait_for(Duration::from_secs(5), || process_state(app as u32)
            == Some('T'))
        .is_some(),
        "the loader hook never stopped the application at its dlopen"
    );
    assert_eq!(signal(asys_pid, libc::SIGKILL), 0);
    let status = asys_proc.wait();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    let resumed = wait_for(Duration::from_secs(1), || {
        process_state(app as u32) != Some('T')
    });
    assert!(resumed.is_some(), "the application stayed stopped");
    assert_eq!(
        reap(app, Duration::from_secs(10)),
        Some(0),
        "the application runs to its normal end"
    );
    let text = output.join().unwrap();
    let calls = workload_calls(&text);
    for api in ["hggcMalloc", "hggcMemset", "hggcFree"] {
        assert_eq!(
            calls.get(api),
            Some(&10),
            "{api}: its output is complete: {text}"
        );
    }
    // The watchdog exits once it has looked a few times.
    assert_eq!(
        reap(watchdogs[0], Duration::from_secs(2)),
        Some(0),
        "the watchdog is not left behind"
    );
    let left: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&p| parent_of(p) == Some(std::process::id() as i32))
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == b"__watchdog"))
        })
        .collect();
    assert!(left.is_empty(), "helpers left: {left:?}");
}

#[test]
fn a_normal_exit_leaves_no_watchdog() {
    // asys dismisses and reaps its watchdog before it exits. The watchdog
    // inherits asys's environment: a tag there finds it wherever it went.
    let s = Scratch::new("watchdog-normal");
    let tag = format!("ASYS_TEST_TAG={}", s.0.display());
    let (k, v) = tag.split_once('=').unwrap();
    let p = profile_workload(&s, &["-t", "hggc"], "crash_exit", &["exit", "3"], &[(k, v)]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let strays = || -> Vec<(i32, String)> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|p: &i32| {
                std::fs::read(format!("/proc/{p}/environ"))
                    .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == tag.as_bytes()))
            })
            .map(|p| {
                let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                (p, comm.trim().to_string())
            })
            .collect()
    };
    // The unlinker (a fork of asys, with its environment) removes the
    // probes after asys has gone (kernel/unlinker.rs): it may be there for
    // a moment, nothing else may.
    let left = strays();
    assert!(
        left.iter().all(|(_, comm)| comm == "asys-unlink"),
        "left running after asys: {left:?}"
    );
    let began = std::time::Instant::now();
    while !strays().is_empty() {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(20),
            "the unlinker did not end: {:?}",
            strays()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
