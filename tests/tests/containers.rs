//! Containers: a process in its own mount namespace, whose runtime lives at a
//! path the host does not have, is traced exactly by `attach` and by
//! system-wide mode; its cgroup and container id are recorded; `--cgroup`
//! and `--container` keep system-wide mode to one cgroup.
//!
//! The "container" is what a runtime makes of one, minus the image: `unshare
//! -m` (mounts made private first), a tmpfs mounted only inside it, the sim
//! runtime's library folder bind-mounted under that tmpfs, LD_LIBRARY_PATH
//! pointing there, and a fresh cgroup v2 (named like docker's where a
//! container id is wanted). The mounts go with the namespace when the process
//! ends; the cgroup is removed by its guard, even when a test fails.
use std::path::{Path, PathBuf};

use asys_tests::*;
use serde_json::Value;

/// The cgroup v2 hierarchy's mount point (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid host).
fn cgroup2_root() -> PathBuf {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines()
        .find_map(|l| {
            let (before, after) = l.split_once(" - ")?;
            let f: Vec<&str> = before.split_whitespace().collect();
            (after.starts_with("cgroup2 ") && f[3] == "/").then(|| PathBuf::from(f[4]))
        })
        .expect("these tests need a cgroup2 file system mounted")
}

/// A fresh cgroup v2 directory, removed on drop (its processes must have
/// exited by then: declare it before them).
struct TestCgroup {
    dir: PathBuf,
    /// Its path in the hierarchy ("/asys-test-...").
    path: String,
}

impl TestCgroup {
    fn new(name: &str) -> Self {
        let dir = cgroup2_root().join(name);
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Self {
            dir,
            path: format!("/{name}"),
        }
    }

    /// Its id: the directory's inode, as the kernel's cgroup ids are.
    fn id(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.dir).unwrap().ino()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // A killed process may take a moment to leave it.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("could not remove cgroup {}", self.dir.display());
    }
}

/// A 64-hex-digit id of our own, unique to this test process and `tag`.
fn container_id(tag: u8) -> String {
    let seed = (u64::from(std::process::id()) << 8 | u64::from(tag)) ^ monotonic_ns() as u64;
    (0..4)
        .map(|i| {
            format!(
                "{:016x}",
                seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(i * 13)
            )
        })
        .collect()
}

/// `attach_target` in a mount namespace of its own and in `cgroup`: it runs
/// from `NSDIR/bin` and its runtime comes from `NSDIR/lib`, bind mounts of
/// the sim's bin folder and of `lib_dir` under a tmpfs that only the
/// namespace has (on the host `NSDIR` is an empty folder). Its kernel
/// function, named in the report, is then only in a file the host cannot
/// open by its path.
fn start_in_namespace(
    truth: &Path,
    ns_dir: &Path,
    lib_dir: &Path,
    cgroup: &TestCgroup,
) -> AttachTarget {
    std::fs::create_dir_all(ns_dir).unwrap();
    let script = std::fs::read_to_string(workload_source("attach_target_in_namespace.sh")).unwrap();
    let mut guard = ChildGuard(Some(
        std::process::Command::new("unshare")
            .args(["-m", "sh", "-c", &script, "sh"])
            .arg(&cgroup.dir)
            .arg(ns_dir)
            .arg(lib_dir)
            .arg(workload("attach_target").parent().unwrap())
            .env("HGGC_SIM_GROUND_TRUTH", truth)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let stdin = guard.child().stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(guard.child().stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let pid: u32 = line
        .trim()
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("the namespaced target said {line:?}"))
        .parse()
        .unwrap();
    // exec kept the pid: the target itself is in the cgroup.
    assert_eq!(guard.child().id(), pid);
    // Its runtime is mapped from a path the host does not have.
    let ns_lib = ns_dir.join("lib/libhggcrt.so");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        maps.contains(ns_lib.to_str().unwrap()),
        "the target did not map {}:\n{maps}",
        ns_lib.display()
    );
    assert!(!ns_lib.exists(), "the host sees {}", ns_lib.display());
    let ns_exe = ns_dir.join("bin/attach_target");
    assert!(maps.contains(ns_exe.to_str().unwrap()), "{maps}");
    assert!(!ns_exe.exists(), "the host sees {}", ns_exe.display());
    AttachTarget {
        guard,
        stdin,
        stdout,
        pid,
    }
}

/// Where process `pid` maps its runtime from.
fn runtime_path(pid: u32) -> PathBuf {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines()
        .find_map(|l| {
            l.split_whitespace()
                .nth(5)
                .filter(|p| p.ends_with("/libhggcrt.so"))
        })
        .map(PathBuf::from)
        .expect("the runtime is mapped")
}

/// The calls the target's ground truth logged from line `from` on.
fn truth_since(truth: &Path, from: usize) -> Vec<String> {
    ground_truth(truth)[from..].iter().map(truth_key).collect()
}

/// The report's hggc_api_trace rows of process `pid`.
fn traced_of(rows: &[Value], pid: u32) -> Vec<String> {
    rows.iter()
        .filter(|r| r["Pid"].as_u64() == Some(u64::from(pid)))
        .map(trace_key)
        .collect()
}

/// The `processes` report's row of `pid`.
fn process_row(report: &Path, pid: u32) -> Value {
    let rows = stats_json(report, "processes");
    let mine: Vec<&Value> = rows
        .iter()
        .filter(|r| r["Pid"].as_u64() == Some(u64::from(pid)))
        .collect();
    assert_eq!(mine.len(), 1, "process {pid} in {rows:?}");
    mine[0].clone()
}

#[test]
fn attach_traces_a_process_in_its_own_mount_namespace_and_records_its_cgroup() {
    require_root();
    let s = Scratch::new("containers-attach");
    let cgroup = TestCgroup::new(&format!("asys-test-{}-attach", std::process::id()));
    let truth = s.path("truth.jsonl");
    let mut t = start_in_namespace(&truth, &s.path("ns"), &sim().join("lib"), &cgroup);
    assert_eq!(t.burst(2), expected_checksum(2));
    let before = ground_truth(&truth).len();

    let report = s.path("a");
    let (g, _err, said) = start_tracing_said(asys().args([
        "attach",
        "-t",
        "hggc",
        "-o",
        report.to_str().unwrap(),
        &t.pid.to_string(),
    ]));
    assert!(
        said.ends_with(&format!("asys: tracing hggc (pid {})\n", t.pid)),
        "{said}"
    );
    // asys's injection library is not in the process's file system: it
    // gets a copy in a memfd.
    assert!(
        said.contains(&format!(
            "asys: process {} (attach_target): device activity recorded from now on (injection library loaded from a memfd (another mount namespace))",
            t.pid
        )),
        "{said}"
    );
    assert_eq!(t.burst(7), expected_checksum(7));
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    assert!(g.wait().success());
    let window = truth_since(&truth, before);
    assert_eq!(window.len(), 4 * 7);

    let report = report.with_extension("asysrep");
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(window.clone(), traced_of(&rows, t.pid));
    // Its device work, each joined to its call by correlation id.
    let device = stats_json(&report, "hggc_ppu_trace");
    let corr = |v: &serde_json::Value, k: &str| v[k].as_u64();
    let mut launched: Vec<u64> = ground_truth(&truth)
        .iter()
        .filter(|t| ["hggcLaunchKernel", "hggcMemcpyAsync"].contains(&t["api"].as_str().unwrap()))
        .filter_map(|t| corr(t, "corr"))
        .filter(|c| rows.iter().any(|r| corr(r, "CorrId") == Some(*c)))
        .collect();
    launched.sort_unstable();
    let mut recorded: Vec<u64> = device.iter().filter_map(|r| corr(r, "CorrId")).collect();
    recorded.sort_unstable();
    assert_eq!(launched.len(), 3 * 7);
    assert_eq!(recorded, launched);
    // Probed in the namespace's own file, named by the path the process
    // knows it by.
    let libraries = metadata(&report)["libraries"].clone();
    let ns_lib = s.path("ns/lib/libhggcrt.so");
    assert!(
        libraries[ns_lib.to_str().unwrap()].as_u64().unwrap_or(0) > 0,
        "{libraries}"
    );
    let p = process_row(&report, t.pid);
    assert_eq!(p["Cgroup"], cgroup.path.as_str(), "{p}");
    assert_eq!(p["Cgroup Version"], 2, "{p}");
    assert_eq!(p["Cgroup ID"].as_u64(), Some(cgroup.id()), "{p}");
    assert!(p["Container ID"].is_null(), "{p}");

    let (status, _) = t.quit();
    assert!(status.success());
}

#[test]
fn system_wide_traces_namespaced_processes_and_probes_a_shared_file_once() {
    require_root();
    let s = Scratch::new("containers-sw");
    let cgroup = TestCgroup::new(&format!("asys-test-{}-sw", std::process::id()));
    let truths = ["host", "shared", "own"].map(|n| s.path(&format!("{n}.truth.jsonl")));
    let host = AttachTarget::start(&truths[0]);
    // One namespace gets the very folder the host process loads its runtime
    // from (one file, seen through two paths); the other a copy of its own,
    // which no process outside it maps.
    let host_lib = runtime_path(host.pid);
    let shared = start_in_namespace(
        &truths[1],
        &s.path("ns1"),
        host_lib.parent().unwrap(),
        &cgroup,
    );
    let copy = s.path("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(&host_lib, copy.join("libhggcrt.so")).unwrap();
    let own = start_in_namespace(&truths[2], &s.path("ns2"), &copy, &cgroup);
    let before: Vec<usize> = truths.iter().map(|t| ground_truth(t).len()).collect();

    let report = s.path("sw");
    let (g, _err, line) = start_tracing(asys().args([
        "profile",
        "-s",
        "system-wide",
        // Switches and sampled stacks of the whole machine are not what
        // this is about (on a busy machine they can fill the buffer while
        // asys starts).
        "--cpuctxsw",
        "none",
        "-b",
        "none",
        "-d",
        "3",
        "-o",
        report.to_str().unwrap(),
    ]));
    assert_eq!(line, "asys: tracing hggc system-wide");
    let mut targets = [host, shared, own];
    for (i, t) in targets.iter_mut().enumerate() {
        let n = 3 + i as u32;
        assert_eq!(t.burst(n), expected_checksum(n));
    }
    assert!(g.wait().success());

    let report = report.with_extension("asysrep");
    let rows = stats_json(&report, "hggc_api_trace");
    for (i, t) in targets.iter().enumerate() {
        let calls = truth_since(&truths[i], before[i]);
        assert_eq!(calls.len(), 4 * (3 + i));
        assert_same_calls(calls, traced_of(&rows, t.pid));
    }
    // The shared file probed once, under whichever path it was seen by
    // first; the copy under its path in the namespace. (Other processes on
    // the machine may have other runtimes probed too.)
    let libraries = metadata(&report)["libraries"].clone();
    let ns1_lib = s.path("ns1/lib/libhggcrt.so");
    let seen_as = [ns1_lib.to_str().unwrap(), host_lib.to_str().unwrap()]
        .iter()
        .filter(|p| libraries.get(**p).is_some())
        .count();
    // At most once: another test of this binary running at the same time
    // may have had it seen first under its own namespace's path. Probed
    // twice, every call above would have been recorded twice.
    assert!(seen_as <= 1, "{libraries}");
    let ns2_lib = s.path("ns2/lib/libhggcrt.so");
    assert!(
        libraries.get(ns2_lib.to_str().unwrap()).is_some(),
        "{libraries}"
    );
    for t in &targets[1..] {
        assert_eq!(process_row(&report, t.pid)["Cgroup"], cgroup.path.as_str());
    }

    for t in targets {
        let (status, _) = t.quit();
        assert!(status.success());
    }
}

#[test]
fn container_filter_keeps_system_wide_mode_to_the_container() {
    require_root();
    let s = Scratch::new("containers-filter");
    let id = container_id(1);
    let cgroup = TestCgroup::new(&format!("docker-{id}.scope"));
    let ns_truth = s.path("ns-truth.jsonl");
    let host_truth = s.path("host-truth.jsonl");
    let mut inside = start_in_namespace(&ns_truth, &s.path("ns"), &sim().join("lib"), &cgroup);
    let mut host = AttachTarget::start(&host_truth);

    // By a prefix of the id, and by the cgroup's path under the mount point.
    let by_path = cgroup.dir.to_str().unwrap().to_string();
    for (round, filter) in [["--container", &id[..12]], ["--cgroup", &by_path]]
        .into_iter()
        .enumerate()
    {
        let before = (
            ground_truth(&ns_truth).len(),
            ground_truth(&host_truth).len(),
        );
        let report = s.path(&format!("f{round}"));
        let (g, _err, line) = start_tracing(
            asys()
                .args([
                    "profile",
                    "-s",
                    "system-wide",
                    "--cpuctxsw",
                    "none",
                    "-b",
                    "none",
                ])
                .args(["-d", "3"])
                .args(filter)
                .args(["-o", report.to_str().unwrap()]),
        );
        let expected = match round {
            0 => format!(
                "asys: tracing hggc system-wide in container {id} (cgroup {})",
                cgroup.path
            ),
            _ => format!("asys: tracing hggc system-wide in cgroup {}", cgroup.path),
        };
        assert_eq!(line, expected);
        assert_eq!(inside.burst(4), expected_checksum(4));
        assert_eq!(host.burst(6), expected_checksum(6));
        assert!(g.wait().success());

        let report = report.with_extension("asysrep");
        let rows = stats_json(&report, "hggc_api_trace");
        let inside_calls = truth_since(&ns_truth, before.0);
        assert_eq!(inside_calls.len(), 16);
        assert_eq!(truth_since(&host_truth, before.1).len(), 24);
        assert_same_calls(inside_calls, traced_of(&rows, inside.pid));
        // The process outside the container made its calls all the same.
        assert!(traced_of(&rows, host.pid).is_empty(), "round {round}");
        assert!(
            rows.iter()
                .all(|r| r["Pid"].as_u64() == Some(u64::from(inside.pid))),
            "round {round}: calls of other processes recorded"
        );
        let m = metadata(&report);
        assert_eq!(m["cgroup_filter"]["path"], cgroup.path.as_str(), "{m}");
        assert_eq!(m["cgroup_filter"]["id"].as_u64(), Some(cgroup.id()), "{m}");
        let chosen_by = if round == 0 {
            Value::from(id.as_str())
        } else {
            Value::Null
        };
        assert_eq!(m["cgroup_filter"]["container"], chosen_by, "{m}");
        let p = process_row(&report, inside.pid);
        assert_eq!(p["Cgroup"], cgroup.path.as_str(), "{p}");
        assert_eq!(p["Container ID"], id.as_str(), "{p}");
        assert_eq!(p["Container Runtime"], "docker", "{p}");
        assert_eq!(p["Cgroup ID"].as_u64(), Some(cgroup.id()), "{p}");
    }

    for t in [inside, host] {
        let (status, _) = t.quit();
        assert!(status.success());
    }
}

#[test]
fn profile_follows_its_application_into_a_mount_namespace_and_its_dlopen() {
    require_root();
    let s = Scratch::new("containers-profile");
    let ns_dir = s.path("ns");
    std::fs::create_dir(&ns_dir).unwrap();
    let truth = s.path("truth.jsonl");
    // The launched program makes its own namespace, then runs a program of
    // it that dlopens the runtime by a path of it: the loader hook's scan
    // must open both through the process.
    let script = std::fs::read_to_string(workload_source("dlopen_app_in_namespace.sh")).unwrap();
    let report = s.path("p");
    let o = asys()
        .args(["profile", "-t", "hggc", "-o", report.to_str().unwrap()])
        .args(["unshare", "-m", "sh", "-c", &script, "sh"])
        .arg(&ns_dir)
        .arg(sim().join("lib"))
        .arg(workload("dlopen_app").parent().unwrap())
        .env("HGGC_SIM_GROUND_TRUTH", &truth)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let truth = ground_truth(&truth);
    assert_eq!(truth.len(), 18);
    let report = report.with_extension("asysrep");
    let rows = stats_json(&report, "hggc_api_trace");
    assert_same_calls(
        truth.iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
    let libraries = metadata(&report)["libraries"].clone();
    let ns_lib = ns_dir.join("lib/libhggcrt.so");
    assert!(
        libraries.get(ns_lib.to_str().unwrap()).is_some(),
        "{libraries}"
    );
}

#[test]
fn bad_cgroup_and_container_values_are_one_line_errors() {
    require_root();
    let s = Scratch::new("containers-bad");
    let out = s.path("r");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--container", "not-hex"], "hexadecimal"),
        (&["--container", "0123456789abcdef0123"], "no container"),
        (&["--cgroup", "/asys-no-such-cgroup"], "no such cgroup"),
        (&["--cgroup", "/a/../b"], "'..'"),
        (&["--cgroup", "/proc"], "no such cgroup"),
    ];
    for (args, says) in cases {
        let o = asys()
            .args(["profile", "-s", "system-wide", "-d", "1", "-o", out])
            .args(args)
            .finish();
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // With an application, the filters have nothing to select.
    let o = asys()
        .args(["profile", "--cgroup", "/", "-o", out, "/bin/true"])
        .finish();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("system-wide"), "{}", stderr(&o));
}
