//! Crash-safe recording (`asys recover`): a recording asys could not finish
//! (SIGKILL, a full disk) is recovered into a report by `asys recover`, and
//! holds every call the workload made up to a checkpoint, counted against
//! the workload's own progress log (`steady_calls`).
use std::{path::Path, process::Command, time::Duration};

use asys_tests::*;

/// `steady_calls`' arguments: calls per second, seconds, progress log.
fn steady(rate: &str, seconds: &str, log: &Path) -> Vec<String> {
    vec![
        workload("steady_calls").to_string_lossy().into_owned(),
        rate.into(),
        seconds.into(),
        log.to_string_lossy().into_owned(),
    ]
}

/// The folders `asys` left in `dir` whose names say they are unfinished
/// recordings.
fn unfinished(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".asysrep.unfinished-"))
        .collect()
}

/// Checks a recovered report against the workload's log: every call that
/// had returned by the last progress point at or before `complete_by` is in
/// it (exactly those among the calls that ended by then), and nothing after
/// the last checkpoint is claimed.
fn check_against_log(report: &Path, log: &SteadyLog, complete_by: i64) -> (u64, usize) {
    let meta = metadata(report);
    let last = meta["recovered"]["last_checkpoint_monotonic_ns"]
        .as_i64()
        .expect("metadata.recovered is set");
    let (calls, warnings) = traced_calls(report);
    assert!(
        warnings.contains("recovered"),
        "stats says nothing of the recovery: {warnings}"
    );
    let (t, n) = log
        .at_or_before(complete_by)
        .expect("a progress point before the kill");
    let steady: Vec<&TracedCall> = calls
        .iter()
        .filter(|c| c.name == "hggcGetLastError")
        .collect();
    let by_t = steady.iter().filter(|c| c.end <= t).count() as u64;
    assert_eq!(
        by_t, n,
        "the workload had made {n} calls by {t}; the recovered report holds {by_t} of them"
    );
    let after: Vec<_> = calls.iter().filter(|c| c.end > last).collect();
    assert!(
        after.is_empty(),
        "{} calls end after the last checkpoint ({last}): {:?}",
        after.len(),
        after.first()
    );
    assert!(
        last > t,
        "the last checkpoint ({last}) is before the point checked ({t})"
    );
    (n, steady.len())
}

#[test]
fn a_killed_recording_is_recovered_up_to_a_second_before_the_kill() {
    require_root();
    let s = Scratch::new("recover-kill");
    let log_path = s.path("progress.log");
    let out = s.path("r");
    let mut cmd = asys();
    cmd.args(["profile", "-t", "hggc", "-s", "none", "-o"])
        .arg(&out)
        .args(steady("2000", "6", &log_path));
    let (mut g, _err, line) = start_tracing(&mut cmd);
    let app: u32 = line
        .rsplit_once("(pid ")
        .and_then(|(_, p)| p.trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    let asys_pid = g.child().id();
    wait_for_progress(&log_path, 3.0);
    let killed_at = monotonic_ns();
    assert_eq!(signal(asys_pid as i32, libc::SIGKILL), 0);
    g.wait();

    // The application runs on; it is never left stopped by a dead asys.
    for _ in 0..25 {
        let st = process_state(app);
        assert_ne!(st, Some('T'), "the application was left stopped");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The folder says what it is.
    let dirs = unfinished(&s.0);
    assert_eq!(dirs.len(), 1, "{:?}", s.files());
    let dir = &dirs[0];
    assert!(
        dir.to_string_lossy()
            .ends_with(&format!("r.asysrep.unfinished-{asys_pid}")),
        "{}",
        dir.display()
    );
    let readme = std::fs::read_to_string(dir.join("README")).unwrap();
    assert!(readme.contains("asys recover"), "{readme}");

    // The next asys beside it tells the user.
    let o = asys()
        .args(["profile", "-t", "hggc", "-s", "none", "-o"])
        .arg(s.path("other"))
        .args(steady("1000", "0.2", &s.path("other.log")))
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("asys recover {}", dir.display())),
        "{}",
        stderr(&o)
    );

    let o = run(&["recover", dir.to_str().unwrap()]);
    assert!(o.status.success(), "recover failed: {}", stderr(&o));
    assert!(stderr(&o).contains("hggc_api"), "{}", stderr(&o));
    assert!(!dir.exists(), "recover left its folder");
    assert!(unfinished(&s.0).is_empty());
    let report = s.path("r.asysrep");
    let meta = metadata(&report);
    assert!(
        meta["recovered"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("killed")),
        "{}",
        meta["recovered"]
    );

    let log = SteadyLog::read(&log_path);
    let (n, recorded) = check_against_log(&report, &log, killed_at - 1_000_000_000);
    assert!(n >= 2000, "the check covered only {n} calls");
    // The journal kept the libraries table, which the calls' libraryId
    // points into.
    let libraries = stats_json(&report, "libraries");
    assert!(
        libraries.iter().any(|l| l["Items"] == "hggc"
            && l["Path"]
                .as_str()
                .is_some_and(|p| p.ends_with("libhggcrt.so"))
            && l["Calls"].as_u64().is_some_and(|c| c >= recorded as u64)),
        "{libraries:#?}"
    );
    // Nothing was made up: no more calls than the workload had made by the kill.
    let made = log
        .progress
        .iter()
        .find(|(t, _)| *t >= killed_at)
        .map_or(u64::MAX, |(_, n)| *n);
    assert!(
        recorded as u64 <= made,
        "{recorded} calls recorded, {made} made"
    );
    signal(app as i32, libc::SIGKILL);
}

/// A small tmpfs, unmounted however the test ends.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .finish();
        assert!(o.status.success(), "mount: {}", stderr(&o));
        Self(dir.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let o = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .finish();
        assert!(o.status.success(), "remount: {}", stderr(&o));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

#[test]
fn a_full_disk_keeps_what_fit() {
    require_root();
    let s = Scratch::new("recover-full");
    let small = s.path("small");
    let fs = Tmpfs::mount(&small, "1m");
    let log_path = s.path("progress.log");
    let o = asys()
        .args(["profile", "-t", "hggc", "-s", "none", "-o"])
        .arg(small.join("r"))
        .args(steady("10000", "60", &log_path))
        .finish();
    let err = stderr(&o);
    assert!(
        !o.status.success(),
        "asys did not fail on a full disk: {err}"
    );
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("asys: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains("disk is full"), "{err}");
    let report = small.join("r.asysrep");
    if !report.exists() {
        // It did not fit: the folder is kept, and the line names the command.
        let dirs = unfinished(&small);
        assert_eq!(dirs.len(), 1, "{err}");
        let dir = crate_path(&dirs[0]);
        assert!(errors[0].contains(&format!("asys recover {dir}")), "{err}");
        fs.resize("64m");
        let o = run(&["recover", &dir]);
        assert!(o.status.success(), "recover failed: {}", stderr(&o));
    } else {
        assert!(errors[0].contains(&crate_path(&report)), "{err}");
    }
    assert!(unfinished(&small).is_empty());
    let meta = metadata(&report);
    assert_eq!(
        meta["recovered"]["reason"], "disk full",
        "{}",
        meta["recovered"]
    );
    let last = meta["recovered"]["last_checkpoint_monotonic_ns"]
        .as_i64()
        .unwrap();
    let log = SteadyLog::read(&log_path);
    assert!(
        !log.done,
        "the workload ran to its end: the disk never filled"
    );
    // Calls that returned well before the last checkpoint was taken had been
    // read from the kernel by then.
    let (n, _) = check_against_log(&report, &log, last - 200_000_000);
    assert!(n > 0, "nothing was kept");
}

fn crate_path(p: &Path) -> String {
    std::path::absolute(p).unwrap().display().to_string()
}

/// asys killed while the application is stopped at a library load (asys
/// frozen first, so the stop is certain): the application must not stay
/// stopped: the watchdog that outlives asys continues it.
#[test]
fn a_killed_asys_never_leaves_the_application_stopped() {
    require_root();
    let s = Scratch::new("recover-stopped");
    // Loads and unloads a library over and over: every load stops the process
    // at the loader hook until asys has looked at it.
    let app = c_workload("load_loop.c", &["-ldl"]);
    let mut cmd = asys();
    cmd.args(["profile", "-t", "hggc", "-s", "none", "-o"])
        .arg(s.path("r"))
        .arg(&app);
    let (mut g, _err, line) = start_tracing(&mut cmd);
    let pid: u32 = line
        .rsplit_once("(pid ")
        .and_then(|(_, p)| p.trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    let asys_pid = g.child().id() as i32;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(signal(asys_pid, libc::SIGSTOP), 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while process_state(pid) != Some('T') {
        assert!(
            std::time::Instant::now() < deadline,
            "the application never stopped at a library load"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(signal(asys_pid, libc::SIGKILL), 0);
    g.wait();
    // Given a moment, the application runs again (or was ended), never stays stopped.
    // (10 s: the watchdog is an ordinary process, and a loaded CI machine may run it late.)
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut state = process_state(pid);
    while state == Some('T') && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        state = process_state(pid);
    }
    signal(pid as i32, libc::SIGKILL);
    assert_ne!(
        state,
        Some('T'),
        "the application stayed stopped after asys was killed"
    );
}
