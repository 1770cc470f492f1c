//! An attach loads asys's injection library into the running process, so
//! that its device work (kernels, copies, memsets) is recorded from the
//! attach on, each joined to the call that launched it, and nothing of
//! before or after. The simulated workloads run without
//! HGGC_INJECTION64_PATH: the library comes only by the attach.
use std::collections::{BTreeMap, BTreeSet};

use asys_tests::*;

/// The device work of the truth lines `window`: correlation id -> (the
/// activity kind the report names, the call's start).
fn launched(window: &[serde_json::Value]) -> BTreeMap<u64, (&'static str, i64)> {
    window
        .iter()
        .filter_map(|t| {
            let kind = match t["api"].as_str()? {
                "hggcLaunchKernel" => "kernel",
                "hggcMemcpyAsync" => "memcpy",
                "hggcMemsetAsync" => "memset",
                _ => return None,
            };
            Some((t["corr"].as_u64()?, (kind, t["start"].as_i64()?)))
        })
        .collect()
}

fn kind_of(row: &serde_json::Value) -> &'static str {
    match row["Name"].as_str().unwrap_or("") {
        n if n.starts_with("[HGGC memcpy") => "memcpy",
        n if n.starts_with("[HGGC memset") => "memset",
        _ => "kernel",
    }
}

/// Attaches with `-t hggc` until `work` is done, then stops asys; returns
/// its stderr.
fn attached(
    t: &mut AttachTarget,
    report: &std::path::Path,
    work: impl FnOnce(&mut AttachTarget),
) -> String {
    let (mut g, mut err, mut said) = start_tracing_said(
        asys()
            .args(["attach", "-t", "hggc", "-o", report.to_str().unwrap()])
            .arg(t.pid.to_string()),
    );
    work(t);
    signal(g.child().id() as i32, libc::SIGINT);
    std::io::Read::read_to_string(&mut err, &mut said).unwrap();
    assert!(g.wait().success(), "asys attach failed: {said}");
    said
}

#[test]
fn an_attach_records_the_device_work_launched_inside_its_window_each_joined() {
    require_root();
    let s = Scratch::new("attach-device");
    let truth_path = s.path("truth.jsonl");
    let mut t = AttachTarget::start(&truth_path);
    assert_eq!(t.burst(5), expected_checksum(5));
    t.fill(3);

    let mut windows = Vec::new();
    for (round, (bursts, fills)) in [(20, 7), (11, 4)].into_iter().enumerate() {
        let report = s.path(&format!("w{round}"));
        let before = ground_truth(&truth_path).len();
        let said = attached(&mut t, &report, |t| {
            assert_eq!(t.burst(bursts), expected_checksum(bursts));
            t.fill(fills);
        });
        let during = ground_truth(&truth_path).len();
        // Between the windows, and after: work nothing records.
        assert_eq!(t.burst(6), expected_checksum(6));
        t.fill(2);
        let loaded = if round == 0 {
            "injection library loaded"
        } else {
            "injection library already loaded, re-used"
        };
        assert!(
            said.contains(&format!(
                "asys: process {} (attach_target): device activity recorded from now on ({loaded})",
                t.pid
            )),
            "{said}"
        );
        assert!(
            said.contains("device activity stopped and flushed")
                && said.contains("the injection library stays loaded"),
            "{said}"
        );
        windows.push((report, before, during, loaded, bursts, fills));
    }
    let (status, rest) = t.quit();
    assert!(status.success(), "target exited with {status}: {rest}");

    let truth = ground_truth(&truth_path);
    for (report, before, during, _, bursts, fills) in &windows {
        let report = report.with_extension("asysrep");
        let want = launched(&truth[*before..*during]);
        let counts = |m: &mut dyn Iterator<Item = &'static str>| {
            m.fold(BTreeMap::new(), |mut c: BTreeMap<&str, usize>, k| {
                *c.entry(k).or_default() += 1;
                c
            })
        };
        assert_eq!(
            counts(&mut want.values().map(|(k, _)| *k)),
            BTreeMap::from([
                ("kernel", *bursts as usize),
                ("memcpy", 2 * *bursts as usize),
                ("memset", *fills as usize)
            ])
        );
        let device = stats_json(&report, "hggc_ppu_trace");
        let got: BTreeMap<u64, (&str, i64)> = device
            .iter()
            .map(|r| {
                (
                    r["CorrId"].as_u64().expect("a device row without its call"),
                    (kind_of(r), r["Start (ns)"].as_i64().unwrap()),
                )
            })
            .collect();
        assert_eq!(got.len(), device.len(), "a correlation id twice");
        assert_eq!(
            got.iter().map(|(c, (k, _))| (*c, *k)).collect::<Vec<_>>(),
            want.iter().map(|(c, (k, _))| (*c, *k)).collect::<Vec<_>>(),
            "{}",
            report.display()
        );
        // Each one joined to its recorded call, and after it on the clock.
        let calls: BTreeMap<u64, String> = stats_json(&report, "hggc_api_trace")
            .iter()
            .filter_map(|r| Some((r["CorrId"].as_u64()?, r["Name"].as_str()?.to_string())))
            .collect();
        for (corr, (kind, start)) in &got {
            assert!(calls.contains_key(corr), "{kind} {corr} has no call");
            assert!(
                *start >= want[corr].1,
                "{kind} {corr} starts before its call"
            );
        }
    }
    eprintln!(
        "windows: {:?}",
        windows
            .iter()
            .map(|(_, _, _, l, b, f)| (l, b, 2 * b, f))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_second_attach_reuses_the_library_the_first_loaded() {
    require_root();
    let s = Scratch::new("attach-reuse");
    let mut t = AttachTarget::start(&s.path("truth.jsonl"));
    let mut lines = Vec::new();
    for round in 0..2 {
        let said = attached(&mut t, &s.path(&format!("r{round}")), |t| {
            assert_eq!(t.burst(2), expected_checksum(2));
        });
        lines.push(said);
    }
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", t.pid)).unwrap();
    let mapped: BTreeSet<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains("libasys_inject"))
        .collect();
    assert_eq!(mapped.len(), 1, "{mapped:?}");
    let (status, _) = t.quit();
    assert!(status.success());
    assert!(lines[1].contains("re-used"), "{}", lines[1]);
    for (round, r) in ["r0", "r1"].iter().enumerate() {
        let rows = stats_json(&s.path(r).with_extension("asysrep"), "hggc_ppu_trace");
        assert_eq!(rows.len(), 2 * 3, "round {round}: {}", lines[round]);
    }
}

#[test]
fn an_attached_cuda_program_without_a_driver_loads_the_library_and_says_why_no_device_activity() {
    require_root();
    let s = Scratch::new("attach-cudart");
    let exe = cudart_workload("cudart_on_demand.c", &[]);
    let mut t = AttachTarget::spawn(&mut std::process::Command::new(exe));
    let report = s.path("c");
    let (mut g, mut err, mut said) = start_tracing_said(
        asys()
            .args(["attach", "-t", "cuda", "-o", report.to_str().unwrap()])
            .arg(t.pid.to_string()),
    );
    std::io::Write::write_all(&mut t.stdin, b"calls 5\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut t.stdout, &mut line).unwrap();
    assert!(line.starts_with("done 5 "), "{line}");
    signal(g.child().id() as i32, libc::SIGINT);
    std::io::Read::read_to_string(&mut err, &mut said).unwrap();
    assert!(g.wait().success(), "{said}");
    let prefix = format!(
        "asys: warning: process {} (cudart_on_deman): no device activity: ",
        t.pid
    );
    let why = said
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{said}"));
    // The library is in the process, and its host calls were recorded.
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", t.pid)).unwrap();
    // No driver in the process: CUPTI is not started (CUPTI 13 without one
    // recurses until the stack is spent); with one, CUPTI is missing or
    // refuses with its own error.
    if maps.contains("libcuda.so") {
        assert!(
            why.starts_with("no libcupti found") || why.starts_with("CUPTI refused"),
            "{why}"
        );
    } else {
        assert!(
            why.starts_with("the process has not loaded CUDA's driver (libcuda.so.1)"),
            "{why}"
        );
    }
    eprintln!("no device activity: {why}");
    assert!(maps.contains("libasys_inject.so"), "not loaded");
    let rows = stats_json(&report.with_extension("asysrep"), "cuda_api_trace");
    assert_eq!(rows.len(), 10, "host calls");
    std::io::Write::write_all(&mut t.stdin, b"quit\n").unwrap();
    assert!(t.guard.wait().success());
}

#[test]
fn an_attach_records_the_nvtx_ranges_of_a_python_process_that_started_without_a_tool() {
    require_root();
    let s = Scratch::new("attach-nvtx");
    let script = workspace().join("tests/workloads/nvtx_attach.py");
    let mut t = AttachTarget::spawn(
        std::process::Command::new(pyenv().join("bin/python"))
            .arg(script)
            .env_remove("NVTX_INJECTION64_PATH"),
    );
    let report = s.path("n");
    let (mut g, mut err, mut said) = start_tracing_said(
        asys()
            .args(["attach", "-t", "nvtx", "-o", report.to_str().unwrap()])
            .arg(t.pid.to_string()),
    );
    assert!(
        said.contains(&format!(
            "asys: process {} (python): injection library loaded; NVTX ranges from ",
            t.pid
        )),
        "{said}"
    );
    std::io::Write::write_all(&mut t.stdin, b"ranges 25\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut t.stdout, &mut line).unwrap();
    assert_eq!(line.trim(), "done 25");
    signal(g.child().id() as i32, libc::SIGINT);
    std::io::Read::read_to_string(&mut err, &mut said).unwrap();
    assert!(g.wait().success(), "{said}");
    let rows = stats_json(&report.with_extension("asysrep"), "nvtx_pushpop_trace");
    let count = |name: &str| {
        rows.iter()
            .filter(|r| r["Name"].as_str().is_some_and(|n| n.ends_with(name)))
            .count()
    };
    // Every range of the domain first used after the attach, the forked
    // child's too; none of the domain the package made a dummy before it.
    assert_eq!(
        (
            count("work") - count("child-work"),
            count("child-work"),
            count("before")
        ),
        (25, 25, 0),
        "{rows:?}"
    );
    let pids: BTreeSet<u64> = rows
        .iter()
        .filter_map(|r| r["PID"].as_u64().or(r["Pid"].as_u64()))
        .collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    std::io::Write::write_all(&mut t.stdin, b"quit\n").unwrap();
    assert!(t.guard.wait().success());
}

/// PyTorch 2.15's CUPTI (CUDA 13) without a driver recurses until the
/// thread's stack is spent when started: an attach must not start it, and
/// the process must run on unharmed.
#[test]
fn an_attach_never_starts_cupti_in_a_process_without_cudas_driver() {
    require_root();
    let s = Scratch::new("attach-cupti13");
    let nvidia = pyenv().join("lib/python3.11/site-packages/nvidia");
    let cudart = nvidia.join("cuda_runtime/lib/libcudart.so.12");
    let cupti = nvidia.join("cu13/lib/libcupti.so.13");
    assert!(
        cupti.is_file(),
        "{} is missing: run `cargo xtask test`",
        cupti.display()
    );
    let mut t = AttachTarget::spawn(
        std::process::Command::new(pyenv().join("bin/python"))
            .arg(workspace().join("tests/workloads/cupti13_no_driver.py"))
            .arg(&cudart)
            .arg(&cupti),
    );
    let count = |t: &mut AttachTarget| -> u64 {
        std::io::Write::write_all(&mut t.stdin, b"count\n").unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut t.stdout, &mut line).unwrap();
        line.trim()
            .strip_prefix("counted ")
            .unwrap()
            .parse()
            .unwrap()
    };
    let report = s.path("c");
    let o = asys()
        .args([
            "attach",
            "-t",
            "cuda",
            "-d",
            "1",
            "-o",
            report.to_str().unwrap(),
        ])
        .arg(t.pid.to_string())
        .output()
        .unwrap();
    let said = stderr(&o);
    assert!(o.status.success(), "{said}");
    let prefix = format!(
        "asys: warning: process {} (python): no device activity: ",
        t.pid
    );
    let why = said
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        why.starts_with("the process has not loaded CUDA's driver (libcuda.so.1)"),
        "{why}"
    );
    assert!(!said.contains("faulted"), "{said}");
    // The library is in the process, CUPTI's subscription is not, and the
    // process goes on turning.
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", t.pid)).unwrap();
    assert!(maps.contains("libasys_inject.so"), "not loaded");
    let before = count(&mut t);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after = count(&mut t);
    assert!(
        after > before,
        "the process stopped turning: {before} then {after}"
    );
    std::io::Write::write_all(&mut t.stdin, b"quit\n").unwrap();
    assert!(t.guard.wait().success());
}
