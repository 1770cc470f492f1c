//! Root's system-wide asys next to an unprivileged neighbour (`nobody`) who
//! tries to hang it or make it exhaust its memory:
//! - a FIFO, a link or a 2 GB sparse file put at the path of a file it
//!   maps (then deleted): asys opens the mapped file by descriptor, never
//!   the path, so it neither blocks nor follows the link, and `-d 4` ends on
//!   time;
//! - a jitdump of one LOAD and many MOVE records, a 60 MB perf map, and
//!   5,000 Python code objects with 1 MiB names: each raises root's peak RSS
//!   by at most 64 MiB over a run beside a harmless neighbour, what the
//!   budgets left out is counted in the report's drops, and the report is
//!   written;
//! - SIGTERM during each of them: a report within 2 s.
//!
//! The attackers are started by the test as `nobody`, not by asys: asys
//! reaches them system-wide or by attaching, as it would a stranger's
//! process (the memory attacks attach, so that root's peak RSS is asys's
//! own and the attack's, not that of every process on the machine).
use std::{
    io::BufRead,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use asys_tests::*;

/// One system-wide run at a time: each traces the processes of the others,
/// and the memory comparisons need the same machine for both runs.
static SERIAL: Mutex<()> = Mutex::new(());

const MIB: i64 = 1 << 20;

/// What a run of asys did.
struct Run {
    success: bool,
    /// From the start, or from SIGTERM when one was sent, to its exit.
    elapsed: Duration,
    /// Peak resident memory, bytes (getrusage's ru_maxrss).
    peak_rss: i64,
    stderr: String,
    report: PathBuf,
}

/// `asys profile -s system-wide ARGS -o DIR/NAME`, with its peak RSS;
/// SIGTERM `sigterm_after` after the start, if given.
fn system_wide(dir: &Path, name: &str, args: &[&str], sigterm_after: Option<Duration>) -> Run {
    let mut all = vec!["profile", "-s", "system-wide"];
    all.extend_from_slice(args);
    run_asys(dir, name, &all, &[], sigterm_after)
}

/// `asys attach -s process-tree ARGS -o DIR/NAME PID`: the neighbour's
/// process alone, so that root's memory is asys's and the attack's, not
/// every other process's on the machine.
fn attach(dir: &Path, name: &str, pid: u32, args: &[&str], sigterm_after: Option<Duration>) -> Run {
    let mut all = vec!["attach", "-s", "process-tree"];
    all.extend_from_slice(args);
    run_asys(dir, name, &all, &[&pid.to_string()], sigterm_after)
}

/// `asys ARGS -o DIR/NAME TAIL`, with its peak RSS; SIGTERM
/// `sigterm_after` after the start, if given.
fn run_asys(
    dir: &Path,
    name: &str,
    args: &[&str],
    tail: &[&str],
    sigterm_after: Option<Duration>,
) -> Run {
    let out = dir.join(name);
    let err_path = dir.join(format!("{name}.stderr"));
    let child = asys()
        .args(args)
        .args(["-o", out.to_str().unwrap()])
        .args(tail)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Reaped below with wait4, for its rusage; the Child is not waited on.
    std::mem::forget(child);
    let mut start = Instant::now();
    let mut signalled = sigterm_after.is_none();
    // SAFETY: all-zero is a valid rusage to be written over.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    loop {
        // SAFETY: a child of this process; status and usage are written.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert_eq!(r, 0, "wait4: {}", std::io::Error::last_os_error());
        if !signalled && start.elapsed() >= sigterm_after.unwrap() {
            assert_eq!(signal(pid, libc::SIGTERM), 0);
            start = Instant::now();
            signalled = true;
        }
        if start.elapsed() > Duration::from_secs(90) {
            signal(pid, libc::SIGKILL);
            panic!(
                "asys hung ({}): {}",
                name,
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Run {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        elapsed: start.elapsed(),
        peak_rss: usage.ru_maxrss * 1024,
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        report: out.with_extension("asysrep"),
    }
}

/// A folder `nobody` owns, inside a scratch folder.
fn nobodys(s: &Scratch, name: &str) -> PathBuf {
    let d = s.path(name);
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
    d
}

/// `python -c CODE ARGS`, CODE the text of tests/workloads/`script`, run
/// as nobody in `cwd`, once it printed "ready"; killed on drop.
fn attacker(python: &str, cwd: &Path, script: &str, args: &[&str]) -> (ChildGuard, u32) {
    let code = std::fs::read_to_string(workload_source(script)).unwrap();
    let mut g = ChildGuard(Some(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args([python, "-c", &code])
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    ));
    let pid = g.child().id();
    let mut line = String::new();
    std::io::BufReader::new(g.child().stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the attacker did not get ready");
    (g, pid)
}

/// Watches `paths` for being opened (inotify), so that a test can say
/// asys never opened them, not just that it did not hang.
struct OpenWatch(i32);

impl OpenWatch {
    fn new(paths: &[&Path]) -> Self {
        // SAFETY: no pointers; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0);
        for p in paths {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid descriptor and C string. IN_DONT_FOLLOW: the
            // link itself is not the watched file; its target is watched
            // separately.
            let w = unsafe {
                libc::inotify_add_watch(
                    fd,
                    c.as_ptr(),
                    libc::IN_OPEN | libc::IN_ACCESS | libc::IN_DONT_FOLLOW,
                )
            };
            assert!(w >= 0, "watch {}", p.display());
        }
        Self(fd)
    }

    /// Events seen so far.
    fn events(&self) -> usize {
        let mut buf = [0u8; 4096];
        let mut n = 0;
        loop {
            // SAFETY: reads into `buf`, at most its length.
            let r = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
            if r <= 0 {
                return n;
            }
            let mut at = 0;
            while at < r as usize {
                // inotify_event: wd, mask, cookie (i32, u32, u32), len (u32), name.
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap()) as usize;
                at += 16 + len;
                n += 1;
            }
        }
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(self.0) };
    }
}

#[test]
fn a_fifo_a_link_or_a_sparse_file_at_a_mapped_path_is_never_opened() {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let inject = asys_bin().with_file_name("libasys_inject.so");
    for kind in ["fifo", "link", "sparse"] {
        for sigterm in [None, Some(Duration::from_secs(3))] {
            let s = Scratch::new(&format!("hostile-{kind}"));
            let home = nobodys(&s, "home");
            // The library where nobody can read it.
            let src = home.join("src.so");
            std::fs::copy(&inject, &src).unwrap();
            std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o644)).unwrap();
            let path = home.join("libasys_inject.so");
            let other = home.join("elsewhere");
            let (_a, _pid) = attacker(
                "/usr/bin/python3",
                &home,
                "swap_mapped.py",
                &[
                    src.to_str().unwrap(),
                    path.to_str().unwrap(),
                    kind,
                    other.to_str().unwrap(),
                ],
            );
            let watched: Vec<&Path> = match kind {
                "link" => vec![&other],
                _ => vec![&path],
            };
            let watch = OpenWatch::new(&watched);
            let what = format!(
                "{kind}, {}",
                if sigterm.is_some() { "SIGTERM" } else { "-d 4" }
            );
            let duration = if sigterm.is_some() { "60" } else { "4" };
            let run = system_wide(&s.0, "r", &["-t", "nvtx", "-d", duration], sigterm);
            assert!(run.success, "{what}: {}", run.stderr);
            assert!(run.report.is_file(), "{what}: no report: {}", run.stderr);
            let limit = if sigterm.is_some() {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(6)
            };
            assert!(
                run.elapsed <= limit,
                "{what}: took {:?}, over {limit:?}",
                run.elapsed
            );
            assert_eq!(
                watch.events(),
                0,
                "{what}: asys opened the file put at the mapped path (or the link's target)"
            );
        }
    }
}

fn drops(report: &Path, source: &str) -> u64 {
    metadata(report)["drops"][source].as_u64().unwrap_or(0)
}

#[test]
fn jit_maps_jitdumps_and_code_objects_cost_root_at_most_64_mib_each() {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let python_args = ["--python-sampling", "true", "-d", "4"];
    let plain_args = ["-d", "4"];
    // The same runs beside a harmless neighbour: what the attacks may add
    // to.
    let baseline = |python: &str, script: &str, args: &[&str], asys_args: &[&str]| {
        let s = Scratch::new("hostile-base");
        let home = nobodys(&s, "home");
        let (_a, pid) = attacker(python, &home, script, args);
        let run = attach(&s.0, "r", pid, asys_args, None);
        assert!(run.success, "baseline: {}", run.stderr);
        run.peak_rss
    };
    let plain_base = baseline("/usr/bin/python3", "python_burner.py", &[], &plain_args);
    let python_base = baseline(
        "/usr/bin/python3.11",
        "code_objects.py",
        &["0"],
        &python_args,
    );

    struct Attack {
        what: &'static str,
        python: &'static str,
        script: &'static str,
        args: &'static [&'static str],
        asys_args: Vec<&'static str>,
        base: i64,
        drops_source: &'static str,
    }
    let attacks = [
        Attack {
            what: "jitdump of 200,000 MOVEs of a 60 KB name",
            python: "/usr/bin/python3",
            script: "jitdump_of_moves.py",
            args: &["200000", "60000"],
            asys_args: plain_args.to_vec(),
            base: plain_base,
            drops_source: "jit_symbols_over_budget",
        },
        Attack {
            what: "60 MB perf map",
            python: "/usr/bin/python3",
            script: "big_perf_map.py",
            args: &["1000000"],
            asys_args: plain_args.to_vec(),
            base: plain_base,
            drops_source: "jit_symbols_over_budget",
        },
        Attack {
            what: "5,000 code objects with 1 MiB names",
            python: "/usr/bin/python3.11",
            script: "code_objects.py",
            args: &["5000"],
            asys_args: python_args.to_vec(),
            base: python_base,
            drops_source: "python_names_cut",
        },
    ];
    for a in &attacks {
        for sigterm in [None, Some(Duration::from_secs(3))] {
            let s = Scratch::new("hostile-mem");
            let home = nobodys(&s, "home");
            let (_g, pid) = attacker(a.python, &home, a.script, a.args);
            let mut asys_args = a.asys_args.clone();
            if sigterm.is_some() {
                // Long enough that only the signal ends it.
                let d = asys_args.iter().position(|x| *x == "-d").unwrap();
                asys_args[d + 1] = "60";
            }
            let run = attach(&s.0, "r", pid, &asys_args, sigterm);
            let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
            let what = format!(
                "{}{}",
                a.what,
                if sigterm.is_some() { ", SIGTERM" } else { "" }
            );
            assert!(run.success, "{what}: {}", run.stderr);
            assert!(run.report.is_file(), "{what}: no report");
            let rise = run.peak_rss - a.base;
            eprintln!(
                "{what}: peak RSS {} MiB, {} MiB over the harmless run ({} MiB); ended in {:?}",
                run.peak_rss / MIB,
                rise / MIB,
                a.base / MIB,
                run.elapsed
            );
            assert!(
                rise <= 64 * MIB,
                "{what}: root's peak RSS rose by {} MiB (over 64)",
                rise / MIB
            );
            let dropped = drops(&run.report, a.drops_source);
            assert!(
                dropped > 0,
                "{what}: nothing counted as {} in {}",
                a.drops_source,
                metadata(&run.report)["drops"]
            );
            assert!(
                run.stderr.contains(&format!("process {pid}")),
                "{what}: no warning names the process: {}",
                run.stderr
            );
            if sigterm.is_some() {
                assert!(
                    run.elapsed <= Duration::from_secs(2),
                    "{what}: SIGTERM to exit took {:?}",
                    run.elapsed
                );
            }
        }
    }
}
