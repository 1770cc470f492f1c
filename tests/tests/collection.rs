//! Collection control options of `profile`: --delay, --kill, --env-var,
//! --inherit-environment, --show-output.
use asys_tests::*;

#[test]
fn delay_records_only_what_happens_after_it() {
    require_root();
    let s = Scratch::new("delay");
    let bin = sim_workload("two_phases.c", &["hggcrt"]);
    let truth = s.path("truth.jsonl");
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-y", "0.7", "-o", report.to_str().unwrap()])
        .arg(&bin)
        .env("HGGC_SIM_GROUND_TRUTH", &truth)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let all = ground_truth_of(&truth, "hggc");
    assert_eq!(all.len(), 24);
    // The second phase: the 14 calls after the pause.
    let rows = stats_json(&report.with_extension("asysrep"), "hggc_api_trace");
    assert_same_calls(
        all[10..].iter().map(truth_key).collect(),
        rows.iter().map(trace_key).collect(),
    );
}

#[test]
fn kill_chooses_what_happens_to_the_application_after_duration() {
    require_root();
    let s = Scratch::new("kill");
    let report = s.path("k");
    let o = run(&[
        "profile",
        "-d",
        "0.5",
        "--kill",
        "sigkill",
        "-o",
        report.to_str().unwrap(),
        "/bin/sleep",
        "30",
    ]);
    assert_eq!(o.status.code(), Some(137), "{}", stderr(&o));
    let none = s.path("n");
    let t0 = std::time::Instant::now();
    // (Not through pipes: the application keeps them open after asys exits.)
    let status = asys()
        .args(["profile", "-d", "0.5", "--kill", "none", "-o"])
        .arg(&none)
        .args(["/bin/sleep", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        t0.elapsed().as_secs() < 20,
        "asys waited for the application"
    );
    // The application runs on without asys.
    let pid = metadata(&none.with_extension("asysrep"))["root_pids"][0]
        .as_i64()
        .unwrap() as i32;
    assert_eq!(signal(pid, 0), 0, "sleep {pid} is still running");
    signal(pid, libc::SIGKILL);
    let o = run(&["profile", "--kill", "maybe", "/bin/true"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("maybe"));
}

#[test]
fn environment_and_output_options() {
    require_root();
    let s = Scratch::new("env");
    let r = s.path("r");
    let r = r.to_str().unwrap();
    let o = run(&[
        "profile",
        "-f",
        "true",
        "-e",
        "FOO=1,BAR=two",
        "-o",
        r,
        "/bin/sh",
        "-c",
        "echo \"$FOO:$BAR:$HOME\"",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(stdout(&o).trim(), format!("1:two:{home}"));
    let o = run(&[
        "profile",
        "-f",
        "true",
        "-n",
        "false",
        "-e",
        "FOO=1",
        "-o",
        r,
        "/bin/sh",
        "-c",
        "echo \"$FOO:$HOME\"",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        "1:",
        "only -e variables without inheritance"
    );
    let o = run(&[
        "profile",
        "-f",
        "true",
        "-w",
        "false",
        "-o",
        r,
        "/bin/sh",
        "-c",
        "echo hidden; echo hidden >&2",
    ]);
    assert!(o.status.success());
    assert!(stdout(&o).is_empty());
    assert!(!stderr(&o).contains("hidden"));
    let o = run(&["profile", "-e", "NOEQUALS", "/bin/true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("invalid --env-var 'NOEQUALS'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn wait_all_follows_a_daemon_that_outlives_the_launched_process() {
    require_root();
    let s = Scratch::new("wait");
    let train = workload("train_step");
    // The launched shell exits at once; its daemon (double fork + setsid)
    // makes runtime calls a moment later.
    let script = format!(
        "setsid sh -c 'sleep 0.5; {} 2 64 > /dev/null' & exit 0",
        train.display()
    );
    let all = s.path("all");
    let o = run(&[
        "profile",
        "-o",
        all.to_str().unwrap(),
        "/bin/sh",
        "-c",
        &script,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let calls = stats_json(&all.with_extension("asysrep"), "hggc_api_trace");
    assert!(
        calls.len() > 20,
        "the daemon's calls are in the report: {}",
        calls.len()
    );
    let primary = s.path("primary");
    let o = run(&[
        "profile",
        "--wait",
        "primary",
        "-o",
        primary.to_str().unwrap(),
        "/bin/sh",
        "-c",
        &script,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stats_json(&primary.with_extension("asysrep"), "hggc_api_trace").is_empty());
    // Let the second daemon finish before the scratch folder goes.
    std::thread::sleep(std::time::Duration::from_secs(2));
}

/// The loader hook stops a traced process at each library load until asys has
/// probed it. A child that reaches its loader just as collection ends (here:
/// an exec loop that outlives the launched shell, with --wait primary) must
/// be continued all the same, never left stopped once asys is gone. Before
/// the fix about a third of these rounds left one `true` stopped for good.
#[test]
fn a_child_loading_libraries_as_collection_ends_is_never_left_stopped() {
    require_root();
    let s = Scratch::new("stopped");
    for round in 0..8 {
        let dir = s.path(&format!("round{round}"));
        std::fs::create_dir(&dir).unwrap();
        let d = dir.display();
        let script = format!(
            "exec > /dev/null 2>&1; \
             setsid sh -c 'echo $$ > {d}/loop.pid; \
               while [ ! -e {d}/stop ]; do /usr/bin/true; done; touch {d}/finished' & \
             sleep 0.3; exit 0"
        );
        let report = dir.join("r");
        let o = run(&[
            "profile",
            "--wait",
            "primary",
            "-o",
            report.to_str().unwrap(),
            "/bin/sh",
            "-c",
            &script,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let group = ProcessGroup::of(&dir.join("loop.pid"));
        // The loop goes on untraced for a moment, then is asked to end.
        std::thread::sleep(std::time::Duration::from_millis(200));
        std::fs::write(dir.join("stop"), "").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !dir.join("finished").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            dir.join("finished").exists(),
            "round {round}: the loop never finished; its processes: {:?}",
            group.states()
        );
    }
}

/// A process group a test started (its leader wrote its pid to a file),
/// killed whole when the test ends, stopped members included.
struct ProcessGroup(i32);

impl ProcessGroup {
    fn of(pid_file: &std::path::Path) -> Self {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(pid) = std::fs::read_to_string(pid_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return Self(pid);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} never written",
                pid_file.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// "pid (command) state" of each member, from /proc.
    fn states(&self) -> Vec<String> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some((head, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // After the command: state, ppid, pgrp.
            if fields.get(2).and_then(|g| g.parse().ok()) == Some(self.0) {
                out.push(format!("{head}) {}", fields[0]));
            }
        }
        out
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        signal(-self.0, libc::SIGKILL);
    }
}

#[test]
fn trace_rotation_keeps_the_newest_reports() {
    require_root();
    let s = Scratch::new("rotation");
    let train = workload("train_step");
    let script = format!(
        "for i in 1 2 3 4 5; do {} 3 64 > /dev/null; sleep 0.4; done",
        train.display()
    );
    let report = s.path("rot");
    let o = run(&[
        "profile",
        "-d",
        "0.5",
        "--trace-rotation",
        "2",
        "-o",
        report.to_str().unwrap(),
        "/bin/sh",
        "-c",
        &script,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kept: Vec<String> = s
        .files()
        .into_iter()
        .filter(|f| f.starts_with("rot."))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    // The newest two: the highest numbers, consecutive.
    let mut numbers: Vec<u32> = kept
        .iter()
        .map(|f| f.split('.').nth(1).unwrap().parse().unwrap())
        .collect();
    numbers.sort();
    assert!(
        numbers[0] >= 2 && numbers[1] == numbers[0] + 1,
        "{numbers:?}"
    );
    for f in &kept {
        assert_eq!(metadata(&s.path(f))["format"], "asysrep");
    }

    // %t names each report by its own start time (hh_mm_ss, local time).
    let o = run(&[
        "profile",
        "-d",
        "1.2",
        "--trace-rotation",
        "3",
        "-o",
        s.path("t_%t").to_str().unwrap(),
        "/bin/sh",
        "-c",
        "sleep 3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let timed: Vec<String> = s
        .files()
        .into_iter()
        .filter(|f| f.starts_with("t_"))
        .collect();
    assert_eq!(timed.len(), 3, "{timed:?}");
    let mut starts = Vec::new();
    for f in &timed {
        let m = metadata(&s.path(f));
        let start_s = m["start_realtime_ns"].as_i64().unwrap() / 1_000_000_000;
        // SAFETY: tm is plain integers (and a pointer that may be null): zero is valid.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: localtime_r reads the time and writes only the tm it is given.
        unsafe { libc::localtime_r(&(start_s as libc::time_t), &mut tm) };
        let hms = format!("{:02}_{:02}_{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec);
        assert!(f.starts_with(&format!("t_{hms}")), "{f} began at {hms}");
        starts.push(start_s);
    }
    starts.sort();
    assert!(starts[2] > starts[0], "{starts:?}");

    let o = run(&["profile", "-d", "1", "--trace-rotation", "0", "/bin/true"]);
    assert!(stderr(&o).contains("at least 1"), "{}", stderr(&o));
    let o = run(&["profile", "--trace-rotation", "2", "/bin/true"]);
    assert!(stderr(&o).contains("needs --duration"), "{}", stderr(&o));
}

#[test]
fn max_report_size_keeps_the_first_calls_within_the_size() {
    let s = Scratch::new("maxsize");
    // A buffer large enough that nothing is lost: the report must then be
    // exactly the application's first calls. A compressed call_loop call
    // takes about 3 bytes, so it takes about 700,000 of them to fill 2 MiB.
    const CALLS: usize = 1_000_000;
    let p = profile_workload(
        &s,
        &["--max-report-size", "2", "--event-buffer-size", "65536"],
        "call_loop",
        &[&CALLS.to_string()],
        &[],
    );
    let err = stderr(&p.out);
    assert!(p.out.status.success(), "{err}");
    assert!(err.contains("reached --max-report-size (2 MiB)"), "{err}");
    assert!(err.contains("0 events lost"), "{err}");
    let size = std::fs::metadata(&p.report).unwrap().len();
    assert!(size <= 2 << 20, "report is {size} bytes");
    assert_eq!(metadata(&p.report)["size_limited"], true);
    // The application ran to its end untraced: all its calls are in the truth.
    let truth_text = std::fs::read_to_string(&p.truth).unwrap();
    let truth: Vec<&str> = truth_text.lines().collect();
    assert_eq!(truth.len(), CALLS + 1);
    let start_of = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line).unwrap()["start"]
            .as_i64()
            .unwrap()
    };
    let mut starts: Vec<i64> = stats_csv_column(&p.report, "hggc_api_trace", "Start (ns)")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    starts.sort_unstable();
    let k = starts.len();
    assert!(k > 10_000 && k < CALLS + 1, "{k} calls recorded");
    // A prefix: the last recorded call began before the first one left out.
    assert!(
        *starts.last().unwrap() < start_of(truth[k]),
        "recorded calls are not the first {k}"
    );
    assert!(starts[k - 1] > start_of(truth[k - 1]) - 1_000_000);

    let o = run(&["profile", "--max-report-size", "0", "/bin/true"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--max-report-size"), "{}", stderr(&o));
    let o = run(&[
        "profile",
        "--max-report-size",
        "2",
        "--duration",
        "1",
        "--trace-rotation",
        "2",
        "/bin/true",
    ]);
    assert!(
        stderr(&o).contains("cannot be used with --trace-rotation"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn output_macros_expand_and_stay_in_the_folder() {
    require_root();
    let s = Scratch::new("macros");
    std::fs::create_dir(s.path("out")).unwrap();
    let template = s.path("out/r_%q{ASYS_RANK}_%h_%p_%i_%%");
    let host = {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most buf.len() bytes into buf.
        unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        let n = buf.iter().position(|&b| b == 0).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut names = Vec::new();
    for _ in 0..2 {
        let o = asys()
            .args(["profile", "-t", "osrt", "-o", template.to_str().unwrap()])
            .args(["/bin/sh", "-c", "echo $$"])
            // A value with a path in it names part of a file, never a folder.
            .env("ASYS_RANK", "../../escape")
            .finish();
        assert!(o.status.success(), "{}", stderr(&o));
        let pid = stdout(&o).trim().to_string();
        // %i is the first free index for the rest of the name (the pids differ).
        let want = format!("r_.._.._escape_{host}_{pid}_1_%.asysrep");
        assert!(s.path("out").join(&want).exists(), "{want}: {}", stderr(&o));
        assert!(stderr(&o).contains(&want), "{}", stderr(&o));
        names.push(want);
    }
    // Nothing was written outside the chosen folder.
    assert_eq!(s.files(), vec!["out".to_string()]);
    let mut inside = std::fs::read_dir(s.path("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    inside.sort();
    names.sort();
    assert_eq!(inside, names);

    // %i counts up where the rest of the name is the same.
    for i in 1..=2 {
        let o = run(&[
            "profile",
            "-t",
            "osrt",
            "-o",
            s.path("out/idx_%i").to_str().unwrap(),
            "/bin/true",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(s.path(&format!("out/idx_{i}.asysrep")).exists());
    }

    // An existing report is kept unless -f true.
    let fixed = s.path("out/fixed");
    let first = run(&[
        "profile",
        "-t",
        "osrt",
        "-o",
        fixed.to_str().unwrap(),
        "/bin/true",
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = run(&[
        "profile",
        "-t",
        "osrt",
        "-o",
        fixed.to_str().unwrap(),
        "/bin/true",
    ]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already exists; use -f true"),
        "{}",
        stderr(&again)
    );
    let forced = run(&[
        "profile",
        "-t",
        "osrt",
        "-f",
        "true",
        "-o",
        fixed.to_str().unwrap(),
        "/bin/true",
    ]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    for bad in ["r%z", "r%", "r%q"] {
        let o = run(&["profile", "-o", bad, "/bin/true"]);
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("invalid report name template"),
            "{}",
            stderr(&o)
        );
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    }
}
