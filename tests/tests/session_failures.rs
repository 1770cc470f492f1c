//! A report a session cannot write is said, never dropped. In a test binary
//! of its own: the note an ended session leaves is printed (and removed) by
//! the next `sessions list` of any test, so none may run beside it.
use std::process::Stdio;

use asys_tests::*;

fn name(tag: &str) -> String {
    format!("{tag}-{}", std::process::id())
}

/// Runs `asys ARGS`; asserts it succeeded; returns its stderr.
fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "asys {args:?} failed: {}", stderr(&o));
    stderr(&o)
}

#[test]
fn a_report_the_session_could_not_write_is_said() {
    require_root();
    let s = Scratch::new("session-failed-write");
    let session = name("failwrite");
    let mut launch = asys()
        .args(["launch", "-t", "hggc", "--session-new", &session])
        .arg(workload("attach_target"))
        .env("HGGC_SIM_GROUND_TRUTH", s.path("truth.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = launch.stdin.take().unwrap();
    let mut app_out = std::io::BufReader::new(launch.stdout.take().unwrap());
    assert!(launch.wait().unwrap().success(), "asys launch failed");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut app_out, &mut line).unwrap();
    let pid: i32 = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
    // The report's folder goes away while the session collects into it: its
    // report cannot be written, and no client waits when the session ends.
    let gone = Scratch::new("session-failed-write-out");
    ok(&[
        "start",
        "--session",
        &session,
        "-o",
        gone.path("r").to_str().unwrap(),
    ]);
    assert_eq!(
        burst_over(&mut stdin, &mut app_out, 2),
        expected_checksum(2)
    );
    std::fs::remove_dir_all(&gone.0).unwrap();
    // Whether the failed write ended it or the application's end does.
    let _ = std::io::Write::write_all(&mut stdin, b"quit\n");
    drop(stdin);
    // Listings until the session is gone; the one after its end says what
    // was lost.
    let mut err = String::new();
    let mut ended = false;
    for _ in 0..200 {
        let o = run(&["sessions", "list"]);
        err.push_str(&stderr(&o));
        if !stdout(&o)
            .lines()
            .any(|l| l.split_whitespace().last() == Some(session.as_str()))
        {
            ended = true;
            // The note is left just before the daemon goes.
            err.push_str(&stderr(&run(&["sessions", "list"])));
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    signal(pid, libc::SIGKILL);
    assert!(ended, "the session did not end");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(&format!("session '{session}' (ended)")))
        .collect();
    assert!(
        !said.is_empty() && said.iter().all(|l| l.starts_with("asys: warning: ")),
        "{err}"
    );
    assert!(
        said.iter().any(|l| l.contains("could not be written")),
        "{err}"
    );
    // Each cause once on the line.
    assert!(
        said.iter()
            .all(|l| l.matches("No such file or directory").count() <= 1),
        "{err}"
    );
    let again = stderr(&run(&["sessions", "list"]));
    assert!(!again.contains(&session), "told twice: {again}");
}
