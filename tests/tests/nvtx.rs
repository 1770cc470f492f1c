//! NVTX v3 from a real NVTX client (the `nvtx` package from PyPI, built on
//! NVIDIA's header-only NVTX v3), which loads asys's injection library as its
//! tool through NVTX_INJECTION64_PATH. No GPU involved.
use asys_tests::*;

#[test]
fn ranges_of_a_real_nvtx_client_are_traced() {
    require_root();
    let s = Scratch::new("nvtx");
    let script = workload_source("nvtx_ranges.py");
    let report = s.path("r");
    let python = pyenv().join("bin/python");
    let o = run(&[
        "profile",
        "-t",
        "nvtx",
        "-o",
        report.to_str().unwrap(),
        python.to_str().unwrap(),
        script.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let expect = |kind: &str| -> Vec<String> {
        out.lines()
            .filter_map(|l| l.strip_prefix(kind))
            .map(|l| l.trim().replace(" - ", "  ").replace(" -", " "))
            .collect()
    };
    let report = report.with_extension("asysrep");
    let rows = stats_json(&report, "nvtx_pushpop_trace");
    let dom = |r: &serde_json::Value| r["Domain"].as_str().unwrap().to_string();
    assert_same_calls(
        expect("pushpop "),
        rows.iter()
            .map(|r| format!("{} {} {}", r["Name"].as_str().unwrap(), dom(r), r["Lvl"]))
            .collect(),
    );
    let se = stats_json(&report, "nvtx_startend_trace");
    assert_same_calls(
        expect("startend "),
        se.iter()
            .map(|r| format!("{} {}", r["Name"].as_str().unwrap(), dom(r)))
            .collect(),
    );
    // The thread's range is on another thread than the main ones.
    let main_tid = rows.iter().find(|r| r["Name"] == "outer").unwrap()["Tid"].clone();
    assert!(
        rows.iter()
            .any(|r| r["Name"] == "in-thread" && r["Tid"] != main_tid)
    );
}

/// Starts tests/workloads/nvtx_late.py (with NVTX's tool variable when
/// `tool`) and waits for "ready".
fn late_script(
    tool: bool,
) -> (
    ChildGuard,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let script = workload_source("nvtx_late.py");
    let mut cmd = std::process::Command::new(pyenv().join("bin/python"));
    cmd.arg(&script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    if tool {
        let lib = asys_bin().with_file_name("libasys_inject.so");
        cmd.env("NVTX_INJECTION64_PATH", lib);
    }
    let mut g = ChildGuard(Some(cmd.spawn().unwrap()));
    let stdin = g.child().stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(g.child().stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    (g, stdin, stdout)
}

#[test]
fn attach_names_ranges_with_strings_registered_before_it() {
    use std::io::{BufRead, Write};
    require_root();
    let s = Scratch::new("nvtx-attach");
    let (app, mut stdin, mut stdout) = late_script(true);
    let pid = app.0.as_ref().unwrap().id();
    let report = s.path("late");
    let (g, _err, line) = start_tracing(asys().args([
        "attach",
        "-t",
        "nvtx",
        "-o",
        report.to_str().unwrap(),
        &pid.to_string(),
    ]));
    assert_eq!(line, format!("asys: tracing nvtx (pid {pid})"));
    writeln!(stdin, "go").unwrap();
    let mut done = String::new();
    stdout.read_line(&mut done).unwrap();
    assert_eq!(done.trim(), "done");
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    let o = g.wait_output();
    assert!(o.status.success(), "{}", stderr(&o));
    writeln!(stdin, "quit").unwrap();
    assert!(app.wait().success());

    let report = report.with_extension("asysrep");
    let rows = stats_json(&report, "nvtx_pushpop_trace");
    let got: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["Name"].as_str().unwrap(),
                r["Domain"].as_str().unwrap()
            )
        })
        .collect();
    // The string registered before the attach is named as the one after.
    assert_same_calls(
        vec![
            "registered-early early-domain".into(),
            "registered-late early-domain".into(),
        ],
        got,
    );
    assert_eq!(
        metadata(&report)["drops"]["nvtx_registrations_unread"].as_u64(),
        None,
        "nothing was left unread"
    );
}

/// With `--inject none` an attach leaves the process as it is: NVTX, which
/// found no tool at its start, gives nothing, and asys says how to get it.
/// (Without it asys makes the process adopt its tool: attach_device.rs.)
#[test]
fn attach_without_the_nvtx_tool_says_how_to_get_it() {
    use std::io::Write;
    require_root();
    let s = Scratch::new("nvtx-attach-no-tool");
    let (app, mut stdin, _stdout) = late_script(false);
    let pid = app.0.as_ref().unwrap().id();
    let report = s.path("none");
    let o = run(&[
        "attach",
        "-t",
        "nvtx",
        "--inject",
        "none",
        "-d",
        "0.5",
        "-o",
        report.to_str().unwrap(),
        &pid.to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("nothing was recorded for -t nvtx"), "{err}");
    let lib = asys_bin().with_file_name("libasys_inject.so");
    assert!(
        err.contains("asys profile -t nvtx")
            && err.contains(&format!("NVTX_INJECTION64_PATH={}", lib.display())),
        "the warning says how to get NVTX: {err}"
    );
    writeln!(stdin, "go").unwrap();
    writeln!(stdin, "quit").unwrap();
    assert!(app.wait().success());
}
