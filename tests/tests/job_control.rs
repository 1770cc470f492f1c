//! The application and job control. asys stops the application (SIGSTOP)
//! while it probes each library the application loads. A process group
//! with a stopped member gets SIGHUP and SIGCONT from the kernel when it
//! becomes orphaned: `(asys profile ./app &)` in a script, whose shell
//! returns at once, killed the application by SIGHUP (2 of 2 tries on
//! PyTorch), and asys did not say so.
use std::{
    io::Read,
    path::Path,
    time::{Duration, Instant},
};

use asys_tests::*;

fn wait_gone(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

#[test]
fn the_application_survives_the_shell_that_started_asys_returning() {
    require_root();
    let s = Scratch::new("job-control");
    let lib = build_workload("libjob.c", "libjob.so", &["-shared", "-fPIC"]);
    // Loads and unloads a library for `secs` seconds (a stop at each load),
    // then writes "done N" to a file.
    let app = c_workload("loads.c", &["-ldl"]);
    // The shell of a script that starts asys in the background and returns
    // while the application is stopped at a library load: asys in its
    // process group, and the shell gone the moment it sees the application
    // in state T.
    let shell = workload_source("background_shell.py");
    let done = s.path("done");
    let log = s.path("asys.log");
    let report = s.path("r");
    // The shell in a process group of its own in the test's session, as a
    // job-control shell starts a script (`sh script` from bash): its exit
    // orphans its group, which asys and (before the fix) the application
    // were in.
    let mut cmd = std::process::Command::new("python3");
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.arg(&shell)
        .arg(&log)
        .arg(asys_bin())
        .args(["profile", "-o", report.to_str().unwrap()])
        .arg(&app)
        .arg(&lib)
        .arg(&done)
        .arg("3");
    let o = cmd.finish();
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.starts_with("shell-exits "))
        .unwrap_or_else(|| panic!("{out}{}", stderr(&o)));
    let asys_pid: u32 = line
        .split(' ')
        .find_map(|w| w.strip_prefix("asys="))
        .unwrap()
        .parse()
        .unwrap();
    // The shell left while the application was stopped (otherwise this test
    // tested nothing).
    assert!(!line.ends_with("stopped=None"), "{line}");
    assert!(
        wait_gone(asys_pid, Duration::from_secs(60)),
        "asys did not end"
    );
    let mut text = String::new();
    std::fs::File::open(&log)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let finished = std::fs::read_to_string(&done).unwrap_or_default();
    assert!(
        finished.starts_with("done "),
        "the application did not finish; asys said:\n{text}"
    );
    assert!(!text.contains("was ended by"), "{text}");
    let meta = metadata(&report.with_extension("asysrep"));
    assert_eq!(meta["exit_code"], 0, "{text}");
}

#[test]
fn an_application_killed_by_a_signal_is_said_to_be() {
    require_root();
    let s = Scratch::new("job-control-death");
    let app = c_workload("dies.c", &[]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-o",
        report.to_str().unwrap(),
        app.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert!(
        err.lines()
            .any(|l| l.contains("the application (pid ") && l.contains("was ended by SIGSEGV (11")),
        "{err}"
    );
    assert_eq!(o.status.code(), Some(128 + 11), "{err}");
}
