//! Interactive sessions: `launch`, `start`, `stop`, `cancel`, `shutdown`,
//! `sessions list`. Each session lives in its own daemon; the application
//! is `attach_target`, driven over the stdin it shares with `asys launch`.
use std::{
    io::BufReader,
    path::{Path, PathBuf},
    process::Stdio,
};

use asys_tests::*;

/// A unique session name for this test process.
fn name(tag: &str) -> String {
    format!("{tag}-{}", std::process::id())
}

/// An `attach_target` launched into a session; shut down on drop.
struct SessionApp {
    session: Option<String>,
    pid: u32,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl SessionApp {
    /// `asys launch -t hggc [SESSION_ARGS] attach_target`; waits for "ready".
    fn launch(s: &Scratch, session_args: &[&str], truth: &Path) -> Self {
        Self::launch_program(s, session_args, truth, &workload("attach_target"), "hggc")
    }

    /// `asys launch -t TRACE [SESSION_ARGS] PROGRAM`; waits for "ready PID".
    fn launch_program(
        s: &Scratch,
        session_args: &[&str],
        truth: &Path,
        program: &Path,
        trace: &str,
    ) -> Self {
        let err = s.path(&format!("launch{}.err", session_args.join("_")));
        let mut c = asys()
            .args(["launch", "-t", trace])
            .args(session_args)
            .arg(program)
            .env("HGGC_SIM_GROUND_TRUTH", truth)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let stdin = c.stdin.take().unwrap();
        let mut stdout = BufReader::new(c.stdout.take().unwrap());
        // asys launch returns once the application runs; the application
        // keeps its stdin and stdout.
        let status = c.wait().unwrap();
        let said = std::fs::read_to_string(&err).unwrap();
        assert!(status.success(), "asys launch failed: {said}");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        let pid: u32 = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
        assert!(said.contains(&format!("launched pid {pid}")), "{said}");
        let session = session_args
            .iter()
            .position(|a| *a == "--session-new")
            .map(|i| session_args[i + 1].to_string());
        Self {
            session,
            pid,
            stdin,
            stdout,
        }
    }

    fn burst(&mut self, n: u32) {
        assert_eq!(
            burst_over(&mut self.stdin, &mut self.stdout, n),
            expected_checksum(n)
        );
    }

    /// Sends a line, returns the answer (`ranges_on_demand`).
    fn said(&mut self, cmd: &str) -> String {
        std::io::Write::write_all(&mut self.stdin, format!("{cmd}\n").as_bytes()).unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut self.stdout, &mut line).unwrap();
        line.trim().to_string()
    }

    fn alive(&self) -> bool {
        signal(self.pid as i32, 0) == 0
    }
}

impl Drop for SessionApp {
    fn drop(&mut self) {
        let mut c = asys();
        c.args(["shutdown", "--kill", "sigkill"]);
        if let Some(s) = &self.session {
            c.args(["--session", s]);
        }
        let _ = c.output();
        signal(self.pid as i32, libc::SIGKILL);
    }
}

/// Runs `asys ARGS`; asserts it succeeded; returns its stderr.
fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "asys {args:?} failed: {}", stderr(&o));
    stderr(&o)
}

/// `asys start` in `session` with `-c hgtx -p Step --capture-range-end END`,
/// the report to `out`; asserts it succeeded; returns its stderr.
fn start_on_step(session: &str, end: &str, out: &Path) -> String {
    ok(&[
        "start",
        "--session",
        session,
        "-c",
        "hgtx",
        "-p",
        "Step",
        "--capture-range-end",
        end,
        "-o",
        out.to_str().unwrap(),
    ])
}

/// Runs `asys ARGS`; asserts it failed with one line; returns that line.
fn fails(args: &[&str]) -> String {
    let o = run(args);
    let err = stderr(&o);
    assert!(!o.status.success(), "asys {args:?} should fail: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// The truth rows between two lengths of the log, as call keys.
fn window(truth: &Path, from: usize, to: usize) -> Vec<String> {
    ground_truth(truth)[from..to]
        .iter()
        .map(truth_key)
        .collect()
}

fn report_calls(report: &Path) -> Vec<String> {
    stats_json(report, "hggc_api_trace")
        .iter()
        .map(trace_key)
        .collect()
}

/// The sessions list lines that name `session`.
fn listed(session: &str) -> Vec<String> {
    let o = run(&["sessions", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .filter(|l| l.split_whitespace().last() == Some(session))
        .map(str::to_string)
        .collect()
}

fn rep(s: &Scratch, n: &str) -> PathBuf {
    s.path(&format!("{n}.asysrep"))
}

#[test]
fn a_launched_app_keeps_running_across_stop_and_start() {
    require_root();
    let s = Scratch::new("session-cycle");
    let truth = s.path("truth.jsonl");
    let session = name("cycle");
    let mut app = SessionApp::launch(&s, &["--session-new", &session], &truth);
    let line = listed(&session);
    assert_eq!(line.len(), 1, "{line:?}");
    assert!(line[0].contains("Launched") && line[0].contains(&app.pid.to_string()));
    // Not collecting yet: nothing to stop or cancel.
    let err = fails(&["stop", "--session", &session]);
    assert!(err.contains("not collecting"), "{err}");
    let err = fails(&["cancel", "--session", &session]);
    assert!(err.contains("not collecting"), "{err}");
    app.burst(3);

    let mut windows = Vec::new();
    for (i, (n, ends)) in [(5, "stop"), (4, "stop"), (1, "cancel"), (2, "shutdown")]
        .into_iter()
        .enumerate()
    {
        let out = s.path(&format!("r{i}"));
        ok(&["start", "--session", &session, "-o", out.to_str().unwrap()]);
        assert!(listed(&session)[0].contains("Collecting"));
        let err = fails(&["start", "--session", &session, "-o", "other"]);
        assert!(err.contains("already collecting"), "{err}");
        let from = ground_truth(&truth).len();
        app.burst(n);
        let to = ground_truth(&truth).len();
        let said = ok(&[ends, "--session", &session]);
        if ends == "cancel" {
            assert!(!rep(&s, &format!("r{i}")).exists());
        } else {
            assert!(said.contains(&format!("r{i}.asysrep")), "{said}");
            windows.push((rep(&s, &format!("r{i}")), window(&truth, from, to)));
        }
        if ends != "shutdown" {
            // Between collections the application runs on, untraced.
            assert!(app.alive());
            app.burst(2);
        }
    }
    // shutdown ended the application (SIGTERM) and the session.
    for _ in 0..100 {
        if !app.alive() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!app.alive(), "shutdown left the application running");
    assert!(listed(&session).is_empty());
    let err = fails(&["stop", "--session", &session]);
    assert!(err.contains("no session"), "{err}");

    assert_eq!(windows.len(), 3);
    for ((report, truth_calls), n) in windows.into_iter().zip([5, 4, 2]) {
        assert_eq!(truth_calls.len(), 4 * n, "{}", report.display());
        assert_same_calls(truth_calls, report_calls(&report));
    }
}

#[test]
fn two_sessions_at_once_each_with_its_own_report() {
    require_root();
    let s = Scratch::new("session-two");
    let (ta, tb) = (s.path("a.jsonl"), s.path("b.jsonl"));
    let (na, nb) = (name("two-a"), name("two-b"));
    let mut a = SessionApp::launch(&s, &["--session-new", &na], &ta);
    let mut b = SessionApp::launch(&s, &["--session-new", &nb], &tb);
    // Names are unique.
    let o = asys()
        .args(["launch", "-t", "hggc", "--session-new", &na])
        .arg(workload("attach_target"))
        .stdin(Stdio::null())
        .finish();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));

    let (ra, rb) = (s.path("ra"), s.path("rb"));
    ok(&["start", "--session", &na, "-o", ra.to_str().unwrap()]);
    ok(&["start", "--session", &nb, "-o", rb.to_str().unwrap()]);
    let (fa, fb) = (ground_truth(&ta).len(), ground_truth(&tb).len());
    a.burst(3);
    b.burst(6);
    a.burst(1);
    let (ea, eb) = (ground_truth(&ta).len(), ground_truth(&tb).len());
    // Sessions are found by ID as well as by name.
    let id_of_b = listed(&nb)[0]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    ok(&["stop", "--session", &id_of_b]);
    ok(&["stop", "--session", &na]);

    let (ca, cb) = (report_calls(&rep(&s, "ra")), report_calls(&rep(&s, "rb")));
    assert_eq!(ca.len(), 16);
    assert_eq!(cb.len(), 24);
    assert!(ca.iter().all(|k| k.contains(&format!("pid={} ", a.pid))));
    assert!(cb.iter().all(|k| k.contains(&format!("pid={} ", b.pid))));
    assert_same_calls(window(&ta, fa, ea), ca);
    assert_same_calls(window(&tb, fb, eb), cb);
}

#[test]
fn another_user_cannot_stop_start_or_read_a_session() {
    require_root();
    let s = Scratch::new("session-user");
    let truth = s.path("truth.jsonl");
    let session = name("owned");
    let mut app = SessionApp::launch(&s, &["--session-new", &session], &truth);
    let report = s.path("mine");
    ok(&[
        "start",
        "--session",
        &session,
        "-o",
        report.to_str().unwrap(),
    ]);
    let id = listed(&session)[0]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();

    // The same binary, somewhere user 65534 (nobody) may run it.
    let bin = s.path("asys");
    std::fs::copy(asys_bin(), &bin).unwrap();
    let as_nobody = |args: &[&str]| {
        use std::os::unix::process::CommandExt as _;
        std::process::Command::new(&bin)
            .args(args)
            .current_dir("/")
            .uid(65534)
            .gid(65534)
            .finish()
    };
    let elsewhere = "/tmp/asys-nobody-report";
    for args in [
        vec!["stop", "--session", &session],
        vec!["stop", "--session", &id],
        vec!["cancel", "--session", &session],
        vec!["start", "--session", &session, "-o", elsewhere],
        vec!["shutdown", "--session", &session],
    ] {
        // Sessions live in a folder per user: nobody's asys looks in its
        // own and cannot even see root's.
        let o = as_nobody(&args);
        assert!(!o.status.success(), "nobody ran {args:?}");
        assert!(
            stderr(&o).contains(&format!("no session '{}'", args[2])),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let o = as_nobody(&["sessions", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains(&session), "{}", stdout(&o));
    assert!(stdout(&o).contains("NAME"), "{}", stdout(&o));

    // The session went on untouched: its owner stops it and gets every call.
    let from = ground_truth(&truth).len();
    app.burst(3);
    let to = ground_truth(&truth).len();
    ok(&["stop", "--session", &session]);
    assert!(app.alive());
    assert_same_calls(window(&truth, from, to), report_calls(&rep(&s, "mine")));
}

#[test]
fn start_before_launch_in_the_default_session() {
    require_root();
    let s = Scratch::new("session-default");
    let truth = s.path("truth.jsonl");
    let report = s.path("first_%p");
    ok(&["start", "-o", report.to_str().unwrap()]);
    let line = listed("[default]");
    assert_eq!(line.len(), 1, "{line:?}");
    assert!(line[0].contains("StartPending"), "{line:?}");
    // launch joins the default session, which collects from the first call.
    let mut app = SessionApp::launch(&s, &[], &truth);
    app.burst(3);
    let said = ok(&["stop"]);
    let written = rep(&s, &format!("first_{}", app.pid));
    assert!(said.contains(written.to_str().unwrap()), "{said}");
    let all = ground_truth(&truth).len();
    assert_same_calls(window(&truth, 0, all), report_calls(&written));
    ok(&["shutdown"]);
    assert!(listed("[default]").is_empty());
}

#[test]
fn session_bad_input() {
    let s = Scratch::new("session-bad");
    let err = fails(&["stop", "--session", &name("nope")]);
    assert!(err.contains("no session 'nope-"), "{err}");
    let err = fails(&["shutdown", "--session", "424242"]);
    assert!(err.contains("no session '424242'"), "{err}");
    let err = fails(&[
        "launch",
        "--session-new",
        "a/b",
        workload("attach_target").to_str().unwrap(),
    ]);
    assert!(err.contains("invalid session name"), "{err}");
    let err = fails(&[
        "launch",
        "-o",
        "x",
        workload("attach_target").to_str().unwrap(),
    ]);
    assert!(err.contains("-o is not an option of launch"), "{err}");
    let bad = name("badtemplate");
    let out = s.path("x%z");
    let err = fails(&["start", "--session-new", &bad, "-o", out.to_str().unwrap()]);
    assert!(err.contains("unknown macro %z"), "{err}");
    // The bad template made no session.
    assert!(listed(&bad).is_empty());
    let o = run(&["sessions", "list", "-p", "false"]);
    assert!(o.status.success());
    assert!(!stdout(&o).contains("NAME"));
}

#[test]
fn a_profile_is_listed_as_a_session_of_its_own() {
    require_root();
    let s = Scratch::new("session-profile");
    let mut g = ChildGuard(Some(
        asys()
            .args(["profile", "-t", "hggc", "-o"])
            .arg(s.path("p"))
            .arg(workload("attach_target"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let mut stdin = g.child().stdin.take().unwrap();
    let mut stdout = BufReader::new(g.child().stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let pid: u32 = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
    let name = format!("profile-{pid}-attach_target");
    let row = listed(&name);
    assert_eq!(row.len(), 1, "{row:?}");
    assert!(row[0].contains("Collecting") && row[0].contains(&pid.to_string()));
    let err = fails(&["stop", "--session", &name]);
    assert!(
        err.contains("controlled by its 'asys profile' command"),
        "{err}"
    );
    burst_over(&mut stdin, &mut stdout, 2);
    std::io::Write::write_all(&mut stdin, b"quit\n").unwrap();
    assert!(g.wait().success());
    assert!(listed(&name).is_empty());
    assert_eq!(report_calls(&rep(&s, "p")).len(), 3 + 8 + 2);
}

/// Waits until `sessions list` shows `session` in `state` (or gone, with "").
fn wait_state(session: &str, state: &str) {
    for _ in 0..200 {
        let rows = listed(session);
        if (state.is_empty() && rows.is_empty()) || rows.iter().any(|r| r.contains(state)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!(
        "session {session} never reached {state:?}: {:?}",
        listed(session)
    );
}

#[test]
fn start_with_a_capture_range_collects_only_the_range() {
    require_root();
    let s = Scratch::new("session-capture");
    let truth = s.path("truth.jsonl");
    let bin = ranges_on_demand();
    let session = name("capture");
    let mut app =
        SessionApp::launch_program(&s, &["--session-new", &session], &truth, &bin, "hggc,hgtx");
    let hggc = |from: usize, to: usize| -> Vec<String> {
        ground_truth_of(&truth, "hggc")[from..to]
            .iter()
            .map(truth_key)
            .collect()
    };
    let count = || ground_truth_of(&truth, "hggc").len();

    // -c hgtx -p Step, stop: the report is written when the range ends and
    // the application runs on.
    let r1 = s.path("r1");
    let said = start_on_step(&session, "stop", &r1);
    assert!(said.contains("starts with the capture range"), "{said}");
    assert!(listed(&session)[0].contains("Armed"));
    assert_eq!(app.said("range Other 2"), "done");
    let begin = count();
    assert_eq!(app.said("range Step 3"), "done");
    let end = count();
    wait_state(&session, "Launched");
    assert_same_calls(hggc(begin, end), report_calls(&rep(&s, "r1")));
    assert_eq!(metadata(&rep(&s, "r1"))["capture_range"], "hgtx:Step");

    // The profiler API, in the same session.
    let r2 = s.path("r2");
    ok(&[
        "start",
        "--session",
        &session,
        "-c",
        "hggcProfilerApi",
        "--capture-range-end",
        "stop",
        "-o",
        r2.to_str().unwrap(),
    ]);
    assert_eq!(app.said("range Step 1"), "done");
    let begin = count();
    assert_eq!(app.said("profiler 2"), "done");
    let end = count();
    wait_state(&session, "Launched");
    assert_eq!(end - begin, 6);
    assert_same_calls(hggc(begin, end), report_calls(&rep(&s, "r2")));

    // repeat:2: a report per range (NAME.1, NAME.2), then collection ends
    // and the application runs on; a third range is in no report.
    let rr = s.path("rr");
    start_on_step(&session, "repeat:2", &rr);
    let mut spans = Vec::new();
    for n in [3, 5, 2] {
        assert_eq!(app.said("range Other 1"), "done");
        let begin = count();
        assert_eq!(app.said(&format!("range Step {n}")), "done");
        spans.push((begin, count()));
    }
    wait_state(&session, "Launched");
    assert_same_calls(hggc(spans[0].0, spans[0].1), report_calls(&rep(&s, "rr.1")));
    assert_same_calls(hggc(spans[1].0, spans[1].1), report_calls(&rep(&s, "rr.2")));
    assert!(!rep(&s, "rr.3").exists());
    assert!(app.alive());

    // merge:2: both ranges in one report, what ran between them not.
    let rm = s.path("rm");
    start_on_step(&session, "merge:2", &rm);
    let mut merged = Vec::new();
    for n in [4, 2] {
        assert_eq!(app.said("range Other 1"), "done");
        let begin = count();
        assert_eq!(app.said(&format!("range Step {n}")), "done");
        merged.extend(hggc(begin, count()));
    }
    wait_state(&session, "Launched");
    assert_same_calls(merged, report_calls(&rep(&s, "rm")));
    assert_eq!(metadata(&rep(&s, "rm"))["capture_ranges"], 2);

    // repeat without N, stopped by hand after one range: that range's
    // report, and no empty one for the period after it.
    let ru = s.path("ru");
    start_on_step(&session, "repeat", &ru);
    let begin = count();
    assert_eq!(app.said("range Step 3"), "done");
    let end = count();
    // Its report is written when the daemon has seen the range end.
    for _ in 0..500 {
        if rep(&s, "ru.1").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(rep(&s, "ru.1").exists(), "the range's report never came");
    let said = ok(&["stop", "--session", &session]);
    assert!(said.contains("1 range report(s) written"), "{said}");
    assert_same_calls(hggc(begin, end), report_calls(&rep(&s, "ru.1")));
    assert!(!rep(&s, "ru.2").exists());

    // stop-shutdown (the default): the range's end ends the application and
    // the session.
    let r3 = s.path("r3");
    ok(&[
        "start",
        "--session",
        &session,
        "-c",
        "hgtx",
        "-p",
        "Step",
        "-o",
        r3.to_str().unwrap(),
    ]);
    let begin = count();
    assert_eq!(app.said("range Step 2"), "done");
    let end = count();
    wait_state(&session, "");
    for _ in 0..100 {
        if !app.alive() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!app.alive());
    assert_same_calls(hggc(begin, end), report_calls(&rep(&s, "r3")));
}

#[test]
fn start_with_a_capture_range_before_launch() {
    require_root();
    let s = Scratch::new("session-capture-first");
    let truth = s.path("truth.jsonl");
    let bin = ranges_on_demand();
    let session = name("capture-first");
    let r = s.path("first");
    // The guide's order: start with the trigger, then launch into it.
    ok(&[
        "start",
        "--session-new",
        &session,
        "-c",
        "hgtx",
        "-p",
        "Step",
        "--capture-range-end",
        "stop",
        "-o",
        r.to_str().unwrap(),
    ]);
    assert!(listed(&session)[0].contains("StartPending"));
    let mut app =
        SessionApp::launch_program(&s, &["--session", &session], &truth, &bin, "hggc,hgtx");
    app.session = Some(session.clone());
    wait_state(&session, "Armed");
    assert_eq!(app.said("range Other 1"), "done");
    let begin = ground_truth_of(&truth, "hggc").len();
    assert_eq!(app.said("range Step 2"), "done");
    let end = ground_truth_of(&truth, "hggc").len();
    wait_state(&session, "Launched");
    let want: Vec<String> = ground_truth_of(&truth, "hggc")[begin..end]
        .iter()
        .map(truth_key)
        .collect();
    assert_eq!(want.len(), 4);
    assert_same_calls(want, report_calls(&rep(&s, "first")));
    ok(&["shutdown", "--session", &session]);
    wait_state(&session, "");
}
