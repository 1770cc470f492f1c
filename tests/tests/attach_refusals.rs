//! Each reason an attach cannot load its injection library into a process
//! is one line naming it; that process keeps its host calls, and nothing is
//! left stopped, even when the process is killed while asys has it stopped.
use std::collections::BTreeSet;

use asys_tests::*;

/// Attaches with `-t hggc`, runs a burst of 3, stops asys; returns what it
/// said and the report's API rows.
fn attach_and_burst(t: &mut AttachTarget, report: &std::path::Path) -> (String, usize) {
    let (mut g, mut err, mut said) = start_tracing_said(
        asys()
            .args(["attach", "-t", "hggc", "-o", report.to_str().unwrap()])
            .arg(t.pid.to_string()),
    );
    assert_eq!(t.burst(3), expected_checksum(3));
    signal(g.child().id() as i32, libc::SIGINT);
    std::io::Read::read_to_string(&mut err, &mut said).unwrap();
    assert!(g.wait().success(), "{said}");
    let rows = stats_json(&report.with_extension("asysrep"), "hggc_api_trace");
    (said, rows.len())
}

fn refusal_line(said: &str, pid: u32) -> &str {
    let prefix = format!(
        "asys: warning: process {pid} (attach_target): not injected, its host calls only: "
    );
    said.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no refusal line in {said}"))
}

#[test]
fn a_process_traced_already_is_refused_by_name_and_keeps_its_host_calls() {
    require_root();
    let s = Scratch::new("refuse-traced");
    let mut t = AttachTarget::start(&s.path("truth.jsonl"));
    let pid = t.pid;
    // Another tracer: a thread of this test seizes the target (no stop)
    // and holds it until told; ptrace lets it go when the thread ends.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (seized_tx, seized_rx) = std::sync::mpsc::channel();
    let tracer = std::thread::spawn(move || {
        // SAFETY: PTRACE_SEIZE with no options; no memory is passed.
        let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid as i32, 0usize, 0usize) };
        // SAFETY: gettid has no preconditions.
        seized_tx.send((r, unsafe { libc::gettid() })).unwrap();
        let _ = rx.recv();
    });
    let (r, tracer_tid) = seized_rx.recv().unwrap();
    assert_eq!(r, 0, "the test could not seize the target");
    let tracer_name =
        std::fs::read_to_string(format!("/proc/self/task/{tracer_tid}/comm")).unwrap();
    let (said, rows) = attach_and_burst(&mut t, &s.path("traced"));
    let line = refusal_line(&said, pid);
    assert!(
        line.ends_with(&format!(
            "it is traced already, by process {tracer_tid} ({}): ptrace allows one tracer (TracerPid in /proc/{pid}/status)",
            tracer_name.trim()
        )),
        "{line}"
    );
    assert_eq!(rows, 12, "host calls");
    tx.send(()).unwrap();
    tracer.join().unwrap();
    let (status, _) = t.quit();
    assert!(status.success());
}

#[test]
fn a_process_under_seccomp_is_refused_by_name_and_keeps_its_host_calls() {
    require_root();
    let s = Scratch::new("refuse-seccomp");
    let wrapper = c_workload("under_seccomp.c", &[]);
    let mut t = AttachTarget::spawn(
        std::process::Command::new(wrapper)
            .arg(workload("attach_target"))
            .env("HGGC_SIM_GROUND_TRUTH", s.path("truth.jsonl")),
    );
    let (said, rows) = attach_and_burst(&mut t, &s.path("seccomp"));
    let line = refusal_line(&said, t.pid);
    assert!(
        line.ends_with(&format!(
            "it runs under a seccomp filter (Seccomp: 2 in /proc/{}/status), which may forbid, or kill it for, the system calls of loading a library",
            t.pid
        )),
        "{line}"
    );
    assert_eq!(rows, 12, "host calls");
    let (status, _) = t.quit();
    assert!(status.success());
}

/// Processes stopped now (state T or t), with their names.
fn stopped_processes() -> BTreeSet<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| matches!(process_state(p), Some('T' | 't')))
        .map(|p| {
            let name = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            (p, name.trim().to_string())
        })
        .collect()
}

#[test]
fn a_process_killed_while_asys_has_it_stopped_is_reported_and_nothing_stays_stopped() {
    require_root();
    let s = Scratch::new("refuse-killed");
    let mut t = AttachTarget::start(&s.path("truth.jsonl"));
    let pid = t.pid;
    assert_eq!(t.burst(2), expected_checksum(2));
    let stopped_before = stopped_processes();
    let report = s.path("killed");
    // asys holds the stopped thread 20 s before the load: the test kills
    // the process in that time.
    let mut g = ChildGuard(Some(
        asys()
            .env("ASYS_INJECT_HOLD_MS", "20000")
            .args(["attach", "-t", "hggc", "-o", report.to_str().unwrap()])
            .arg(pid.to_string())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // Its stderr is read on a thread, so that a line other than the one
    // awaited fails the test instead of hanging it.
    let (lines, said_rx) = std::sync::mpsc::channel::<String>();
    let err = g.child().stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(err)) {
            if lines.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    // Killed once asys has the thread in a tracing stop (not merely
    // seized: a kill between the two is another race than the one tested).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        if status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains("tracing stop"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "asys never stopped the process"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let started = std::time::Instant::now();
    assert_eq!(signal(pid as i32, libc::SIGKILL), 0);
    let status = t.guard.wait();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    // asys says so at once (not after its 20 s hold), and records on.
    let want = format!(
        "asys: warning: process {pid} (attach_target): not injected, its host calls only: the process was killed by signal 9 while asys had it stopped"
    );
    let mut said = String::new();
    while !said.contains(&want) {
        match said_rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(line) => said += &(line + "\n"),
            Err(e) => panic!("{e}; asys said:\n{said}"),
        }
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "asys took {:?}",
        started.elapsed()
    );
    signal(g.child().id() as i32, libc::SIGINT);
    assert!(g.wait().success());
    let now: BTreeSet<_> = stopped_processes()
        .difference(&stopped_before)
        .cloned()
        .collect();
    assert!(now.is_empty(), "left stopped: {now:?}");
}

#[test]
fn a_stopped_process_is_left_stopped_and_keeps_its_host_calls() {
    require_root();
    let s = Scratch::new("refuse-stopped");
    let mut t = AttachTarget::start(&s.path("truth.jsonl"));
    let pid = t.pid;
    assert_eq!(signal(pid as i32, libc::SIGSTOP), 0);
    while process_state(pid) != Some('T') {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let report = s.path("stopped");
    let (mut g, mut err, mut said) = start_tracing_said(
        asys()
            .args(["attach", "-t", "hggc", "-o", report.to_str().unwrap()])
            .arg(pid.to_string()),
    );
    // Still stopped: asys ran nothing in it.
    assert_eq!(process_state(pid), Some('T'), "{said}");
    let line = refusal_line(&said, pid);
    assert!(
        line.ends_with(&format!(
            "it is stopped (state T in /proc/{pid}/stat): running code in it would resume it"
        )),
        "{line}"
    );
    assert_eq!(signal(pid as i32, libc::SIGCONT), 0);
    assert_eq!(t.burst(3), expected_checksum(3));
    signal(g.child().id() as i32, libc::SIGINT);
    std::io::Read::read_to_string(&mut err, &mut said).unwrap();
    assert!(g.wait().success(), "{said}");
    let rows = stats_json(&report.with_extension("asysrep"), "hggc_api_trace");
    assert_eq!(rows.len(), 12, "host calls");
    let (status, _) = t.quit();
    assert!(status.success());
}
