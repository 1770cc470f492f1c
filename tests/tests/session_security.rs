//! Sessions nobody else can impersonate, squat or block. Root runs asys;
//! the attacker is user 65534 (nobody), a small Python script, or a
//! root-owned client that is slow on purpose. What the attacker received
//! is recorded by the attacker itself.
use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::{fs::PermissionsExt as _, net::UnixStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use asys_tests::*;

const NOBODY: u32 = 65534;

/// A unique session name for this test process.
fn name(tag: &str) -> String {
    format!("{tag}-{}", std::process::id())
}

/// Root's session folder (as asys documents it).
fn root_dir() -> PathBuf {
    if Path::new("/run").is_dir() {
        PathBuf::from("/run/asys")
    } else {
        PathBuf::from("/tmp/asys-0")
    }
}

/// The socket file of root's session `session`, if any.
fn socket_of(session: &str) -> Option<PathBuf> {
    std::fs::read_dir(root_dir())
        .ok()?
        .filter_map(|e| e.ok())
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .split_once('.')
                .is_some_and(|(_, n)| n == session)
        })
        .map(|e| e.path())
}

/// `setpriv` to `uid` (its own group, no others), without root's runtime
/// folder in the environment.
fn as_user(uid: u32, program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg(program)
        .env_remove("XDG_RUNTIME_DIR")
        .current_dir("/");
    c
}

const PYTHON: &str = "/usr/bin/python3";

/// Runs a fake session daemon (tests/workloads/fake_daemon.py, given with
/// `-c`; as `user`, or as root); waits for "ready". It listens on every
/// address given (a leading '@' is the abstract namespace), says "ready",
/// and for each connection appends to RECORD how many bytes and descriptors
/// it was sent. `--drop-to UID`: bind first, then become UID, then listen
/// (so SO_PEERCRED names UID).
fn fake_daemon(user: Option<u32>, pre: &[&str], record: &Path, addrs: &[String]) -> ChildGuard {
    std::fs::write(record, "").unwrap();
    std::os::unix::fs::chown(record, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut c = match user {
        Some(uid) => as_user(uid, Path::new(PYTHON)),
        None => Command::new(PYTHON),
    };
    c.arg("-c")
        .arg(std::fs::read_to_string(workload_source("fake_daemon.py")).unwrap())
        .args(pre)
        .arg(record)
        .args(addrs)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut g = ChildGuard(Some(c.spawn().unwrap()));
    let mut line = String::new();
    BufReader::new(g.child().stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the fake daemon did not start");
    g
}

/// The fake's record: one "BYTES FDS" line per connection it got.
fn record_lines(record: &Path) -> Vec<String> {
    std::fs::read_to_string(record)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits until the record holds `n` lines (a connection is recorded when
/// the client closes it).
fn wait_record(record: &Path, n: usize) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end && record_lines(record).len() < n {
        std::thread::sleep(Duration::from_millis(20));
    }
    record_lines(record)
}

/// Runs `asys ARGS` as root and expects it to fail; returns its stderr.
fn fails(args: &[&str]) -> String {
    let o = run(args);
    assert!(!o.status.success(), "asys {args:?} succeeded");
    stderr(&o)
}

fn listed(session: &str) -> bool {
    let o = run(&["sessions", "list", "-p", "false"]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .any(|l| l.split_whitespace().nth(5) == Some(session))
}

/// `attach_target` launched into a new session; shut down on drop.
struct SessionApp {
    session: String,
    pid: u32,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl SessionApp {
    fn launch(s: &Scratch, session: &str) -> Self {
        let err = s.path(&format!("launch-{session}.err"));
        let mut c = asys()
            .args(["launch", "-t", "hggc", "--session-new", session])
            .arg(workload("attach_target"))
            .env("HGGC_SIM_GROUND_TRUTH", s.path("truth.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let stdin = c.stdin.take().unwrap();
        let mut stdout = BufReader::new(c.stdout.take().unwrap());
        let status = c.wait().unwrap();
        assert!(
            status.success(),
            "asys launch failed: {}",
            std::fs::read_to_string(&err).unwrap()
        );
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
        Self {
            session: session.to_string(),
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
}

impl Drop for SessionApp {
    fn drop(&mut self) {
        let _ = asys()
            .args(["shutdown", "--kill", "sigkill", "--session", &self.session])
            .output();
        signal(self.pid as i32, libc::SIGKILL);
    }
}

/// A fake daemon run by nobody under a session's name, where nobody can
/// bind (the abstract names asys used to use, and a folder of its own),
/// is never even connected to; one inside root's folder (made by root,
/// listening as nobody, or as root but not asys) is connected to and
/// refused before a byte is sent: no environment, no descriptors.
#[test]
fn a_fake_daemon_gets_nothing() {
    require_root();
    let s = Scratch::new("sec-fake");
    let session = name("s2");
    let record = s.path("outside.rec");
    let own = PathBuf::from(format!("/tmp/asys-sec-fake-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&own);
    std::fs::create_dir(&own).unwrap();
    std::os::unix::fs::chown(&own, Some(NOBODY), Some(NOBODY)).unwrap();
    let _outside = fake_daemon(
        Some(NOBODY),
        &[],
        &record,
        &[
            format!("@asys-session/1/{session}"),
            format!("@asys-session-name/{session}"),
            own.join(format!("1.{session}")).display().to_string(),
        ],
    );
    let no_session = format!("no session '{session}'");
    let err = fails(&["stop", "--session", &session]);
    assert!(err.contains(&no_session), "{err}");
    let app = workload("attach_target");
    let err = fails(&["launch", "--session", &session, app.to_str().unwrap()]);
    assert!(err.contains(&no_session), "{err}");
    assert!(!listed(&session));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        record_lines(&record),
        Vec::<String>::new(),
        "it was reached"
    );
    let _ = std::fs::remove_dir_all(&own);

    // Inside root's folder (only root can put it there): the first listens
    // as nobody, the second as root but is not asys.
    std::fs::create_dir_all(root_dir()).unwrap();
    let base = 60000 + std::process::id() % 5000;
    for (i, (listen_as, why)) in [
        (Some("65534"), "uid 65534, not 0".to_string()),
        (None, "does not run this asys executable".to_string()),
    ]
    .into_iter()
    .enumerate()
    {
        let impostor = name(&format!("imp{i}"));
        let sock = root_dir().join(format!("{}.{impostor}", base + i as u32));
        let _ = std::fs::remove_file(&sock);
        let record = s.path(&format!("inside{i}.rec"));
        let pre: Vec<&str> = listen_as.map(|u| vec!["--drop-to", u]).unwrap_or_default();
        let fake = fake_daemon(None, &pre, &record, &[sock.display().to_string()]);
        let err = fails(&["stop", "--session", &impostor]);
        assert!(err.contains(&why) && err.contains("refusing"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        let err = fails(&["launch", "--session", &impostor, app.to_str().unwrap()]);
        assert!(err.contains(&why), "{err}");
        // Both connected, and both hung up having sent nothing (so did any
        // `sessions list` of the tests running alongside).
        let got = wait_record(&record, 2);
        assert!(got.len() >= 2, "{got:?}");
        assert!(
            got.iter().all(|l| l == "0 0"),
            "it was sent something: {got:?}"
        );
        drop(fake);
        let _ = std::fs::remove_file(&sock);
    }
}

/// Nobody can neither bind nor connect in root's session folder (EACCES),
/// and whatever it squats elsewhere does not stop root from creating a
/// session of that name.
#[test]
fn nobody_cannot_squat_or_reach_root_sessions() {
    require_root();
    let s = Scratch::new("sec-squat");
    let session = name("train");
    let record = s.path("squat.rec");
    let _squatter = fake_daemon(
        Some(NOBODY),
        &[],
        &record,
        &[
            format!("@asys-session-name/{session}"),
            format!("@asys-session/1/{session}"),
        ],
    );
    let _app = SessionApp::launch(&s, &session);
    assert!(listed(&session));
    let sock = socket_of(&session).expect("the session's socket file");
    let probe = r#"
import errno, socket, sys
for op, path in (("connect", sys.argv[1]), ("bind", sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        getattr(s, op)(path)
        print(op, "ok")
    except OSError as e:
        print(op, errno.errorcode[e.errno])
"#;
    let o = as_user(NOBODY, Path::new(PYTHON))
        .arg("-c")
        .arg(probe)
        .arg(&sock)
        .arg(root_dir().join(format!("1.{session}x")))
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "connect EACCES\nbind EACCES\n",
        "{}",
        stderr(&o)
    );
    let dir_mode = std::fs::symlink_metadata(root_dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    assert_eq!(record_lines(&record), Vec::<String>::new());
}

/// Stop's wall time with a silent client and one sending a byte a second
/// (both root: nobody cannot connect at all) is within 100 ms of stop's
/// without them; the daemon drops them by its deadline, and survives
/// garbage and half requests.
#[test]
fn slow_and_silent_clients_do_not_delay_stop() {
    require_root();
    let s = Scratch::new("sec-slow");
    let session = name("slow");
    let mut app = SessionApp::launch(&s, &session);
    let sock = socket_of(&session).expect("the session's socket file");
    let out = |n: usize| s.path(&format!("r{n}")).display().to_string();
    let timed_stop = |app: &mut SessionApp, n: usize| {
        let o = run(&["start", "--session", &session, "-o", &out(n)]);
        assert!(o.status.success(), "{}", stderr(&o));
        app.burst(1);
        let t = Instant::now();
        let o = run(&["stop", "--session", &session]);
        let took = t.elapsed();
        assert!(o.status.success(), "{}", stderr(&o));
        took
    };
    let mut base = Vec::new();
    let mut slowed = Vec::new();
    for round in 0..3 {
        base.push(timed_stop(&mut app, 2 * round));
        let silent = UnixStream::connect(&sock).unwrap();
        let mut dribbler = UnixStream::connect(&sock).unwrap();
        let dribbling = std::thread::spawn(move || {
            // One byte a second, never a newline; the daemon hangs up.
            let started = Instant::now();
            for _ in 0..10 {
                if dribbler.write_all(b"{").is_err() {
                    return Some(started.elapsed());
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            None
        });
        std::thread::sleep(Duration::from_millis(100));
        slowed.push(timed_stop(&mut app, 2 * round + 1));
        let hung_up = dribbling.join().unwrap();
        assert!(
            hung_up.is_some_and(|t| t < Duration::from_secs(5)),
            "the dribbling client was kept: {hung_up:?}"
        );
        let mut rest = Vec::new();
        let mut silent = silent;
        silent
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        // Closed by the deadline without an answer.
        assert_eq!(silent.read_to_end(&mut rest).ok(), Some(0));
    }
    let (b, w) = (base.iter().min().unwrap(), slowed.iter().min().unwrap());
    eprintln!("stop: {base:?} without, {slowed:?} with slow clients");
    assert!(
        w.saturating_sub(*b) <= Duration::from_millis(100),
        "stop took {w:?} with slow clients, {b:?} without ({base:?} / {slowed:?})"
    );

    // Garbage, a half request, a hang-up: each answered or dropped, and
    // the session still serves its owner.
    let mut garbage = UnixStream::connect(&sock).unwrap();
    garbage.write_all(b"\x00\xffnot json\n").unwrap();
    let mut answer = String::new();
    BufReader::new(&garbage).read_line(&mut answer).unwrap();
    assert!(answer.contains("bad request"), "{answer}");
    let mut half = UnixStream::connect(&sock).unwrap();
    half.write_all(b"{\"Shutdown\":").unwrap();
    drop(half);
    drop(UnixStream::connect(&sock).unwrap());
    let huge = vec![b'x'; 1 << 20];
    let mut big = UnixStream::connect(&sock).unwrap();
    let _ = big.write_all(&huge);
    drop(big);
    assert!(listed(&session));
    let o = run(&["start", "--session", &session, "-o", &out(9)]);
    assert!(o.status.success(), "{}", stderr(&o));
    app.burst(2);
    let o = run(&["stop", "--session", &session]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A socket file nobody listens on (its daemon was killed) is not listed,
/// is removed, and its name is taken again; a session's file goes when the
/// session ends.
#[test]
fn a_stale_socket_is_removed_and_its_name_reused() {
    require_root();
    let s = Scratch::new("sec-stale");
    let session = name("stale");
    std::fs::create_dir_all(root_dir()).unwrap();
    let stale = root_dir().join(format!("{}.{session}", 65000 + std::process::id() % 500));
    // Bound, then closed without removing the file: what SIGKILL leaves.
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    assert!(!listed(&session));
    let err = fails(&["stop", "--session", &session]);
    assert!(err.contains("no session"), "{err}");
    let app = SessionApp::launch(&s, &session);
    assert!(!stale.exists(), "the stale socket was left");
    let live = socket_of(&session).expect("the new session's socket");
    drop(app);
    assert!(!live.exists(), "the ended session left {}", live.display());
}

/// A session folder that is a link, another user's, or open to others is
/// refused with a one-line error naming it; nothing is made through it.
/// The victim is uid 65533, the planter nobody.
#[test]
fn a_planted_link_or_foreign_folder_is_refused() {
    require_root();
    let s = Scratch::new("sec-link");
    let victim = 65533;
    let bin = s.path("asys");
    std::fs::copy(asys_bin(), &bin).unwrap();
    let dir = PathBuf::from(format!("/tmp/asys-{victim}"));
    let target = PathBuf::from(format!("/tmp/asys-sec-target-{}", std::process::id()));
    let clear = || {
        let _ = std::fs::remove_file(&dir);
        let _ = std::fs::remove_dir_all(&dir);
    };
    let victim_asys = |args: &[&str]| as_user(victim, &bin).args(args).output().unwrap();
    clear();
    let _ = std::fs::remove_dir_all(&target);
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::chown(&target, Some(NOBODY), Some(NOBODY)).unwrap();
    let planted = as_user(NOBODY, Path::new("/bin/ln"))
        .arg("-s")
        .arg(&target)
        .arg(&dir)
        .status()
        .unwrap();
    assert!(planted.success());
    let cases: [(&dyn Fn(), &str); 3] = [
        (&|| {}, "it is a symbolic link"),
        (
            &|| {
                clear();
                std::fs::create_dir(&dir).unwrap();
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
                std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
            },
            "it belongs to uid 65534, not 65533",
        ),
        (
            &|| {
                std::os::unix::fs::chown(&dir, Some(victim), Some(victim)).unwrap();
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
            },
            "other users may enter it",
        ),
    ];
    for (plant, why) in cases {
        plant();
        for args in [
            &["sessions", "list"][..],
            &["stop", "--session", "x"],
            &["status"],
        ] {
            let o = victim_asys(args);
            let err = stderr(&o);
            assert!(!o.status.success(), "{args:?} used it: {}", stdout(&o));
            assert!(
                err.contains(dir.to_str().unwrap()) && err.contains(why),
                "{args:?}: {err}"
            );
            assert_eq!(err.trim().lines().count(), 1, "{err}");
        }
    }
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    // Its own folder, once the plant is gone, is fine.
    clear();
    let o = victim_asys(&["sessions", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&target);
}
