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

/// `asys launch -t hggc --session-new SESSION attach_target`; the app's pid
/// once it says "ready", and the pipes that drive it.
fn launch_attach_target(
    session: &str,
    truth: &std::path::Path,
) -> (
    i32,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let mut launch = asys()
        .args(["launch", "-t", "hggc", "--session-new", session])
        .arg(workload("attach_target"))
        .env("HGGC_SIM_GROUND_TRUTH", truth)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = launch.stdin.take().unwrap();
    let mut app_out = std::io::BufReader::new(launch.stdout.take().unwrap());
    assert!(launch.wait().unwrap().success(), "asys launch failed");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut app_out, &mut line).unwrap();
    let pid = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
    (pid, stdin, app_out)
}

#[test]
fn a_report_the_session_could_not_write_is_said() {
    require_root();
    let s = Scratch::new("session-failed-write");
    let session = name("failwrite");
    let (pid, mut stdin, mut app_out) = launch_attach_target(&session, &s.path("truth.jsonl"));
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

/// A session daemon killed while collecting: its folder holds what `asys
/// recover` needs, and the recovered report has every call made before the
/// last checkpoint (here: all of a burst made well before the kill).
#[test]
fn a_killed_session_daemons_collection_is_recovered() {
    require_root();
    let s = Scratch::new("session-killed");
    let truth = s.path("truth.jsonl");
    let session = name("killed");
    let (app, mut stdin, mut app_out) = launch_attach_target(&session, &truth);
    let out = s.path("r");
    ok(&["start", "--session", &session, "-o", out.to_str().unwrap()]);
    let before = ground_truth(&truth).len();
    assert_eq!(
        burst_over(&mut stdin, &mut app_out, 5),
        expected_checksum(5)
    );
    let made = ground_truth(&truth).len() - before;
    assert!(made > 0);
    // Past two checkpoints (500 ms each).
    std::thread::sleep(std::time::Duration::from_millis(1300));
    let daemon = std::process::Command::new("pgrep")
        .args(["-f", &format!("__session-daemon {session}$")])
        .output()
        .unwrap();
    let daemon: i32 = String::from_utf8_lossy(&daemon.stdout)
        .trim()
        .parse()
        .expect("the session daemon's pid");
    assert_eq!(signal(daemon, libc::SIGKILL), 0);
    // Gone (or a zombie) once the kernel has closed its descriptors, which
    // removes its probes and can take a while.
    let gone = || matches!(process_state(daemon as u32), None | Some('Z'));
    for _ in 0..100 {
        if gone() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(gone(), "the killed daemon {daemon} is still there");
    let dir = s.path(&format!("r.asysrep.unfinished-{daemon}"));
    assert!(dir.join("recording.json").is_file(), "{:?}", s.files());
    let o = run(&["recover", dir.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "recover failed: {}; journal: {:?}",
        stderr(&o),
        std::fs::read_to_string(dir.join("journal.jsonl"))
    );
    let report = s.path("r.asysrep");
    let calls = stats_csv_column(&report, "hggc_api_trace", "Name");
    assert_eq!(calls.len(), made, "{calls:?}");
    assert!(!dir.exists(), "recover left its folder");
    let _ = std::io::Write::write_all(&mut stdin, b"quit\n");
    signal(app, libc::SIGKILL);
}
