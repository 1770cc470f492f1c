//! The OS runtime trace item: system calls from the system-call
//! tracepoints, one row per call, and pthread lock waits from the futex
//! system calls libc's lock code makes, one row per wait that blocked,
//! named after the lock function, with `--osrt-threshold` applied in the
//! kernel. Counts and times are checked against the workload's own.
use asys_tests::*;

struct Traced {
    report: std::path::PathBuf,
    root: u64,
    tally: std::collections::BTreeMap<String, u64>,
    /// The address of the workload's mutex and condition variable.
    mutex: u64,
    cond: u64,
}

fn profile(s: &Scratch, threshold: &str) -> Traced {
    // Locks, condition waits, sleeps, pipe I/O of a size nothing else uses
    // (777 bytes, told apart by the Bytes column) and a forked child's sleep;
    // it prints how many of each it made.
    let bin = c_workload("osrt_calls.c", &["-lpthread"]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "--osrt-threshold",
        threshold,
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let root = metadata(&report)["root_pids"][0].as_u64().unwrap();
    let tally = workload_calls(&stdout(&o));
    assert_eq!(tally["pthread_mutex_lock"], 2004, "{tally:?}");
    let printed = |what: &str| -> u64 {
        stdout(&o)
            .lines()
            .find_map(|l| l.strip_prefix(what))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("the workload prints {what}"))
    };
    Traced {
        report,
        root,
        tally,
        mutex: printed("workload-mutex "),
        cond: printed("workload-cond "),
    }
}

/// The rows of `pthread_cond_wait`: those that waited on the condition
/// variable (its futex words lie inside it), and the others, which may only
/// be its re-lock of the mutex after the wake-up (when the signaler still
/// held it: a wait of its own, on the mutex).
fn cond_waits(t: &Traced, rows: &[serde_json::Value]) -> usize {
    const COND_SIZE: u64 = 48;
    let pointer = |r: &serde_json::Value| r["Pointer"].as_u64().unwrap();
    let (on_cond, relocks): (Vec<_>, Vec<_>) = rows
        .iter()
        .partition(|r| (t.cond..t.cond + COND_SIZE).contains(&pointer(r)));
    assert!(relocks.len() <= on_cond.len(), "{rows:?}");
    assert!(relocks.iter().all(|r| pointer(r) == t.mutex), "{rows:?}");
    on_cond.len()
}

fn calls(report: &std::path::Path, name: &str, pid: Option<u64>) -> Vec<serde_json::Value> {
    stats_json(report, "osrt_trace")
        .into_iter()
        .filter(|r| r["Name"] == name && pid.is_none_or(|p| r["Pid"] == p))
        .collect()
}

#[test]
fn uncontended_locks_record_nothing_under_the_threshold_and_a_blocked_lock_one_row() {
    require_root();
    let s = Scratch::new("osrt");
    // The default threshold, 1,000 ns.
    let t = profile(&s, "1000");
    // 2,004 locks, of which only one waited (30 ms, for the holder).
    let locks = calls(&t.report, "pthread_mutex_lock", Some(t.root));
    assert_eq!(locks.len(), 1, "{locks:?}");
    let d = locks[0]["Duration (ns)"].as_i64().unwrap();
    assert!(d >= 10_000_000, "the blocked lock took {d} ns");
    assert_eq!(locks[0]["Pointer"], t.mutex);
    // The condition wait blocked for the signaler (10 ms): one row on the
    // condition variable.
    let waits = calls(&t.report, "pthread_cond_wait", Some(t.root));
    assert_eq!(
        cond_waits(&t, &waits) as u64,
        t.tally["pthread_cond_wait"],
        "{waits:?}"
    );
}

#[test]
fn each_sleep_is_one_row_and_the_forked_child_is_traced() {
    require_root();
    let s = Scratch::new("osrt-sleep");
    let t = profile(&s, "1000");
    let sleeps = calls(&t.report, "clock_nanosleep", Some(t.root));
    // usleep -> nanosleep -> clock_nanosleep: one call, one row (4 naps of
    // 1 ms, the holder's and the signaler's).
    assert_eq!(
        sleeps.len() as u64,
        t.tally["clock_nanosleep"],
        "{sleeps:?}"
    );
    assert_eq!(t.tally["clock_nanosleep"], 6);
    for r in &sleeps {
        assert!(r["Duration (ns)"].as_i64().unwrap() >= 1_000_000, "{r}");
        assert_eq!(r["Result"], 0);
    }
    assert!(calls(&t.report, "usleep", None).is_empty());
    assert!(calls(&t.report, "nanosleep", None).is_empty());
    // The child sleeps 40 ms; the parent waits for it in wait4 (waitpid).
    let child: Vec<_> = calls(&t.report, "clock_nanosleep", None)
        .into_iter()
        .filter(|r| r["Pid"] != t.root)
        .collect();
    assert_eq!(child.len(), 1, "{child:?}");
    assert_eq!(calls(&t.report, "wait4", Some(t.root)).len(), 1);
    // Pipe I/O of 777 bytes takes microseconds or less: kept only if over
    // the threshold, never more rows than calls.
    let writes = calls(&t.report, "write", Some(t.root));
    assert!(writes.iter().filter(|w| w["Bytes"] == 777).count() <= 9);
}

#[test]
fn with_no_threshold_every_call_and_every_lock_wait_is_one_row() {
    require_root();
    let s = Scratch::new("osrt-all");
    let t = profile(&s, "0");
    let count = |name: &str| {
        calls(&t.report, name, Some(t.root))
            .iter()
            .filter(|r| name != "read" && name != "write" || r["Bytes"] == 777)
            .count() as u64
    };
    for name in ["read", "write", "clock_nanosleep"] {
        assert_eq!(count(name), t.tally[name], "{name}");
    }
    let waits = calls(&t.report, "pthread_cond_wait", Some(t.root));
    assert_eq!(cond_waits(&t, &waits) as u64, t.tally["pthread_cond_wait"]);
    // A lock that does not wait makes no system call: of the 2,004 lock
    // calls, the one that blocked is the one row. libc's own locks
    // (pthread_create takes the loader's) are none.
    let locks = calls(&t.report, "pthread_mutex_lock", Some(t.root));
    assert_eq!(locks.len(), 1, "{locks:?}");
    assert_eq!(locks[0]["Pointer"], t.mutex);
}

#[test]
fn system_calls_of_an_untraced_process_are_not_recorded() {
    require_root();
    let s = Scratch::new("osrt-untraced");
    // Writes 555-byte blocks to /dev/null while the traced workload runs.
    let noise = c_workload("noise.c", &[]);
    let mut noise = ChildGuard(Some(std::process::Command::new(&noise).spawn().unwrap()));
    let noise_pid = u64::from(noise.child().id());
    let t = profile(&s, "0");
    noise.child().kill().unwrap();
    let rows = stats_json(&t.report, "osrt_trace");
    assert!(rows.iter().all(|r| r["Pid"] != noise_pid));
    assert!(rows.iter().all(|r| r["Bytes"] != 555));
    // The traced process's own writes are all there.
    let writes = calls(&t.report, "write", Some(t.root));
    assert_eq!(
        writes.iter().filter(|w| w["Bytes"] == 777).count() as u64,
        t.tally["write"]
    );
}

#[test]
fn a_restarted_sleep_is_one_row_and_an_interrupted_one_ends_in_eintr() {
    require_root();
    let s = Scratch::new("osrt-restart");
    // A sleep stopped and continued (SIGSTOP, SIGCONT: the kernel restarts it
    // through restart_syscall), then a sleep cut short by a signal handler
    // (EINTR): two calls, two rows.
    let bin = c_workload("interrupted.c", &[]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // usleep's own results: the restarted one succeeded, the other did not.
    assert!(stdout(&o).contains("results 0 -1"), "{}", stdout(&o));
    let report = report.with_extension("asysrep");
    let root = metadata(&report)["root_pids"][0].as_u64().unwrap();
    let sleeps = calls(&report, "clock_nanosleep", Some(root));
    assert_eq!(sleeps.len(), 2, "{sleeps:?}");
    let took = |i: usize| sleeps[i]["Duration (ns)"].as_i64().unwrap();
    // From its first entry to its end, the stop included.
    assert!(took(0) >= 300_000_000, "{sleeps:?}");
    assert_eq!(sleeps[0]["Result"], 0);
    assert!((50_000_000..300_000_000).contains(&took(1)), "{sleeps:?}");
    assert_eq!(sleeps[1]["Result"], -libc::EINTR);
}

/// The pid and lock address a WHERE_IS_THE_LOCK process wrote to `file`.
fn wait_for_lock_address(file: &std::path::Path) -> (u32, u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            let mut words = text.split_whitespace();
            let pid = words.next().unwrap().parse().unwrap();
            return (pid, words.next().unwrap().parse().unwrap());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} never came",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The first byte of the instruction at `addr` in `pid`'s memory.
fn first_byte(pid: u32, addr: u64) -> u8 {
    use std::os::unix::fs::FileExt as _;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8];
    mem.read_exact_at(&mut b, addr).unwrap();
    b[0]
}

#[test]
fn osrt_puts_no_breakpoint_in_libc() {
    require_root();
    const INT3: u8 = 0xcc;
    let s = Scratch::new("osrt-no-probe");
    // Writes its pid and where `pthread_mutex_lock` is in its memory to the
    // file named by its argument, then waits until that file is removed.
    let bin = c_workload("where.c", &["-ldl"]);
    // The same program, untraced, started first: it maps the same libc.
    let other_file = s.path("other");
    let _other = ChildGuard(Some(
        std::process::Command::new(&bin)
            .arg(&other_file)
            .spawn()
            .unwrap(),
    ));
    let (other_pid, other_lock) = wait_for_lock_address(&other_file);
    let traced_file = s.path("traced");
    let (asys, _err, _line) = start_tracing(
        asys()
            .args(["profile", "-t", "osrt", "-o"])
            .arg(s.path("r"))
            .arg(&bin)
            .arg(&traced_file),
    );
    let (traced_pid, traced_lock) = wait_for_lock_address(&traced_file);
    // Lock waits come from the futex system calls: no breakpoint (and no
    // trap on every lock call) in the traced process's libc, nor in the
    // other's.
    assert_ne!(first_byte(traced_pid, traced_lock), INT3);
    assert_ne!(first_byte(other_pid, other_lock), INT3);
    std::fs::remove_file(&traced_file).unwrap();
    assert!(asys.wait().success());
    std::fs::remove_file(&other_file).unwrap();
}

#[test]
fn each_kind_of_lock_waits_one_row_as_long_as_it_waited() {
    require_root();
    let s = Scratch::new("osrt-kinds");
    // Each kind of lock waits once, for a holder that lets go 20 ms later
    // (one kind at a time); the waiter times its own call and prints
    // `workload-wait NAME NS OBJECT SIZE`. Then a futex wait that is no lock's (the
    // program's own, through libc's `syscall`), which must be no row.
    let bin = c_workload("lock_kinds.c", &["-lpthread"]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let root = metadata(&report)["root_pids"][0].as_u64().unwrap();
    let out = stdout(&o);
    let rows = stats_json(&report, "osrt_trace");
    let mut kinds = 0;
    for line in out.lines().filter_map(|l| l.strip_prefix("workload-wait ")) {
        let w: Vec<&str> = line.split(' ').collect();
        let (kind, took) = (w[0], w[1].parse::<i64>().unwrap());
        let (object, size) = (w[2].parse::<u64>().unwrap(), w[3].parse::<u64>().unwrap());
        let name = kind.trim_end_matches("-pi");
        // The waiter's own call, timed by itself: held for most of the
        // holder's 20 ms (the waiter starts after the holder took it).
        assert!(took >= 15_000_000, "{kind} took {took} ns");
        let mine: Vec<_> = rows
            .iter()
            .filter(|r| r["Name"] == name && r["Pid"] == root)
            .filter(|r| {
                // The object waited on: its futex word lies in it (a
                // joined thread's is in its descriptor).
                let p = r["Pointer"].as_u64().unwrap();
                object == 0 || (object..object + size).contains(&p)
            })
            .filter(|r| r["Duration (ns)"].as_i64().unwrap() >= 10_000_000)
            .collect();
        assert_eq!(mine.len(), 1, "{kind}: {mine:?}\n{out}");
        let d = mine[0]["Duration (ns)"].as_i64().unwrap();
        // The wait is the call's, less what the call did before and after.
        assert!(
            d <= took && d >= took - 5_000_000,
            "{kind}: waited {d} ns in a call of {took} ns"
        );
        kinds += 1;
    }
    assert_eq!(kinds, 11, "{out}");
    // The program's own futex wait is no lock's: no row.
    let word: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("workload-futex "))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(rows.iter().all(|r| r["Pointer"] != word), "{rows:?}");
    assert!(rows.iter().all(|r| r["Name"] != "futex"), "{rows:?}");
}

#[test]
fn lock_waits_of_a_forked_and_of_an_executed_child_are_named() {
    require_root();
    let s = Scratch::new("osrt-children");
    // A lock that waits 20 ms in a forked child, and in a child that executed
    // the program anew: each prints `workload-contended PID`.
    let bin = c_workload("children.c", &["-lpthread"]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let pids: Vec<u64> = stdout(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("workload-contended "))
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{}", stdout(&o));
    for pid in pids {
        let locks = calls(&report, "pthread_mutex_lock", Some(pid));
        assert_eq!(locks.len(), 1, "child {pid}: {locks:?}");
        let d = locks[0]["Duration (ns)"].as_i64().unwrap();
        assert!(d >= 10_000_000, "child {pid} waited {d} ns");
    }
}
