//! Symbols by build id from debuginfod (asys-userspace/src/symbolize/
//! debuginfod.rs) and `asys symbolize REPORT`: a stripped program profiled
//! with elfutils' `debuginfod` serving its debug file on localhost has the
//! functions and source lines of the unstripped build profiled the same way;
//! a report of it recorded with no server is named afterwards by `asys
//! symbolize`, the binary gone; and servers that never answer, answer
//! garbage, or announce a 2 GiB body each cost one warning line and at most
//! the timeout.
use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Output},
    time::{Duration, Instant},
};

use asys_tests::*;

/// Each function on one line, so that every sample of a function is at one
/// source line and `cpu_sample_sum`'s Source for it is the same in every
/// run; main calls both spinners from one line. Built at -O0 (nothing
/// inlined).
const WORKLOAD: &str = r#"#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) unsigned long spin_a(unsigned long n) { unsigned long x = 1; for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005ul + i; return x; }
__attribute__((noinline)) unsigned long spin_b(unsigned long n) { unsigned long x = 3; for (unsigned long i = 0; i < n; i++) x = (x ^ (x >> 7)) * 2862933555777941757ul + i; return x; }
int main(int argc, char **argv) { double secs = argc > 1 ? atof(argv[1]) : 1.0; struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0); unsigned long sink = 0; do { sink += spin_a(200000); sink += spin_b(200000); clock_gettime(CLOCK_MONOTONIC, &t); } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs); return sink == 1 ? 2 : 0; }
"#;

/// The timeout the fault tests set (DEBUGINFOD_TIMEOUT, seconds).
const TIMEOUT_S: u64 = 2;

fn tool(name: &str, args: &[&str]) -> Output {
    let o = Command::new(name).args(args).finish();
    assert!(o.status.success(), "{name} {args:?}: {}", stderr(&o));
    o
}

/// The program three ways: `full` (with DWARF and symbols), `stripped`
/// (`strip --strip-all`: no DWARF, no symbol table, no debuglink), and its
/// debug file (`objcopy --only-keep-debug`) alone in `debug/`; and the
/// build id.
struct Program {
    full: PathBuf,
    stripped: PathBuf,
    debug_dir: PathBuf,
    build_id: String,
}

fn program(s: &Scratch) -> Program {
    let src = s.path("spin.c");
    std::fs::write(&src, WORKLOAD).unwrap();
    let full = s.path("spin");
    tool(
        "cc",
        &[
            "-O0",
            "-g",
            "-Wl,--build-id",
            "-o",
            full.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    let debug_dir = s.path("debug");
    std::fs::create_dir_all(&debug_dir).unwrap();
    let debug = debug_dir.join("spin.debug");
    tool(
        "objcopy",
        &[
            "--only-keep-debug",
            full.to_str().unwrap(),
            debug.to_str().unwrap(),
        ],
    );
    let stripped = s.path("spin-stripped");
    tool(
        "strip",
        &[
            "--strip-all",
            "-o",
            stripped.to_str().unwrap(),
            full.to_str().unwrap(),
        ],
    );
    let o = tool("readelf", &["-n", stripped.to_str().unwrap()]);
    let build_id = stdout(&o)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("a build id");
    // The stripped binary really has nothing to name its code with.
    let o = tool("readelf", &["-S", stripped.to_str().unwrap()]);
    assert!(
        !stdout(&o).contains(".symtab") && !stdout(&o).contains(".debug_info"),
        "{}",
        stdout(&o)
    );
    Program {
        full,
        stripped,
        debug_dir,
        build_id,
    }
}

/// An `asys` command with no debug information of this machine's in the
/// way: an empty debug root and debuginfod client cache, a cache folder of
/// the test's own, no proxy, and `urls` (None: DEBUGINFOD_URLS unset).
fn asys_in(s: &Scratch, urls: Option<&str>) -> Command {
    let mut cmd = asys();
    for d in ["empty-root", "empty-client-cache", "xdg-cache"] {
        std::fs::create_dir_all(s.path(d)).unwrap();
    }
    cmd.env("ASYS_DEBUG_ROOT", s.path("empty-root"))
        .env("DEBUGINFOD_CACHE_PATH", s.path("empty-client-cache"))
        .env("XDG_CACHE_HOME", s.path("xdg-cache"))
        .env("DEBUGINFOD_TIMEOUT", TIMEOUT_S.to_string());
    for v in [
        "DEBUGINFOD_URLS",
        "DEBUGINFOD_MAXSIZE",
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env_remove(v);
    }
    if let Some(u) = urls {
        cmd.env("DEBUGINFOD_URLS", u);
    }
    cmd
}

/// Profiles `bin` for `secs` with CPU sampling; returns the report, asys's
/// stderr and how long asys took.
fn profile(s: &Scratch, bin: &Path, secs: &str, urls: Option<&str>) -> (PathBuf, String, Duration) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let report = s.path(&format!("report-{n}"));
    let mut cmd = asys_in(s, urls);
    cmd.args(["profile", "-s", "process-tree", "-b", "dwarf", "-o"])
        .arg(&report)
        .arg(bin)
        .arg(secs);
    let t = Instant::now();
    let o = cmd.finish();
    let took = t.elapsed();
    assert!(o.status.success(), "asys profile: {}", stderr(&o));
    (report.with_extension("asysrep"), stderr(&o), took)
}

/// `asys symbolize REPORT` (with `extra` arguments before it); returns its
/// output and how long it took.
fn symbolize(s: &Scratch, report: &Path, urls: Option<&str>, extra: &[&str]) -> (Output, Duration) {
    let mut cmd = asys_in(s, urls);
    cmd.arg("symbolize").args(extra).arg(report);
    let t = Instant::now();
    let o = cmd.finish();
    (o, t.elapsed())
}

/// The (Function, Source) rows of `cpu_sample_sum` in `module` (the
/// column holds its file name).
fn named_in(report: &Path, module: &Path) -> BTreeSet<(String, String)> {
    let module = module.file_name().unwrap().to_str().unwrap();
    stats_json(report, "cpu_sample_sum")
        .iter()
        .filter(|r| r["Module"].as_str() == Some(module))
        .map(|r| {
            (
                r["Function"].as_str().unwrap().to_string(),
                r["Source"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The ground truth: what the unstripped build's profile names; it must
/// name both spinners and main at spin.c's lines.
fn truth(s: &Scratch, p: &Program) -> BTreeSet<(String, String)> {
    let (report, _, _) = profile(s, &p.full, "1.0", None);
    let named = named_in(&report, &p.full);
    for f in ["spin_a", "spin_b", "main"] {
        assert!(
            named
                .iter()
                .any(|(function, source)| function == f && source.contains("spin.c:")),
            "the unstripped profile does not name {f} at spin.c: {named:?}"
        );
    }
    named
}

/// A line of asys's stderr that warns of debuginfod URL `url`'s answer.
fn warnings_for<'a>(err: &'a str, url: &str) -> Vec<&'a str> {
    err.lines()
        .filter(|l| l.starts_with(&format!("asys: warning: debuginfod {url}")))
        .collect()
}

/// elfutils' debuginfod serving `dir` on a free port of localhost, killed
/// on drop.
struct Debuginfod {
    _child: ChildGuard,
    url: String,
}

impl Debuginfod {
    /// Starts it and waits until it serves the debug file of `build_id`.
    fn start(s: &Scratch, dir: &Path, build_id: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("debuginfod")
            .args(["-F"])
            .arg(dir)
            .args(["-p", &port.to_string(), "-d"])
            .arg(s.path("debuginfod.sqlite"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("elfutils' debuginfod runs (Debian package debuginfod)");
        let server = Self {
            _child: ChildGuard(Some(child)),
            url: format!("http://127.0.0.1:{port}"),
        };
        // It scans `dir` once started; the file is there when it says so.
        let deadline = Instant::now() + Duration::from_secs(60);
        let path = format!("/buildid/{build_id}/debuginfo");
        loop {
            if http_status(port, &path) == Some(200) {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "debuginfod did not serve {path} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The status of `GET path` on localhost's `port` (None: no answer).
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut line = String::new();
    BufReader::new(c).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_stripped_program_is_named_through_debuginfod_as_its_unstripped_build() {
    require_root();
    let s = Scratch::new("debuginfod-named");
    let p = program(&s);
    let truth = truth(&s, &p);
    let server = Debuginfod::start(&s, &p.debug_dir, &p.build_id);
    let (report, err, _) = profile(&s, &p.stripped, "1.0", Some(&server.url));
    let named = named_in(&report, &p.stripped);
    eprintln!("through debuginfod: {named:?}\nunstripped: {truth:?}");
    assert_eq!(named, truth, "asys said: {err}");
    // Counted on the finish line, and listed in the metadata.
    let finish = err
        .lines()
        .find(|l| l.starts_with("asys: collected "))
        .expect("the finish line");
    assert!(
        finish.ends_with("binary named through debuginfod")
            || finish.ends_with("binaries named through debuginfod"),
        "{finish}"
    );
    let meta = metadata(&report);
    let ids: Vec<&str> = meta["debuginfod_build_ids"]
        .as_array()
        .expect("debuginfod_build_ids")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(ids.contains(&p.build_id.as_str()), "{ids:?}");
    // Kept in asys's cache: a recording with the server gone names it too.
    let cached = s
        .path("xdg-cache/asys/debuginfod")
        .join(format!("{}.debug", p.build_id));
    assert!(cached.is_file(), "{} not cached", cached.display());
    drop(server);
    let (report, err, _) = profile(&s, &p.stripped, "0.5", Some("http://127.0.0.1:9"));
    let named = named_in(&report, &p.stripped);
    assert!(
        named.is_subset(&truth) && named.iter().any(|n| n.0 == "spin_a"),
        "{named:?}: {err}"
    );
}

#[test]
fn asys_symbolize_names_a_report_of_a_stripped_program_whose_binary_is_gone() {
    require_root();
    let s = Scratch::new("debuginfod-symbolize");
    let p = program(&s);
    let truth = truth(&s, &p);
    // Recorded with no server: its frames are addresses.
    let (report, _, _) = profile(&s, &p.stripped, "1.0", None);
    let before = named_in(&report, &p.stripped);
    assert!(
        !before.is_empty()
            && before
                .iter()
                .all(|(f, src)| f.starts_with("0x") && src.is_empty()),
        "frames of the stripped binary named with no debug file: {before:?}"
    );
    let copy = s.path("copy.asysrep");
    std::fs::copy(&report, &copy).unwrap();
    // Named on a machine without the binary: the report's build ids and
    // file offsets only.
    std::fs::remove_file(&p.stripped).unwrap();
    let server = Debuginfod::start(&s, &p.debug_dir, &p.build_id);
    let (o, _) = symbolize(&s, &report, Some(&server.url), &[]);
    assert!(o.status.success(), "asys symbolize: {}", stderr(&o));
    assert!(
        stderr(&o).contains("(1 binary through debuginfod)"),
        "{}",
        stderr(&o)
    );
    let after = named_in(&report, &p.stripped);
    eprintln!("after asys symbolize: {after:?}\nunstripped: {truth:?}");
    assert_eq!(after, truth);
    // The sample count is the report's as it was.
    let total = |r: &Path| -> u64 {
        stats_json(r, "cpu_sample_sum")
            .iter()
            .map(|r| r["Self Samples"].as_u64().unwrap_or(0))
            .sum()
    };
    assert_eq!(total(&report), total(&copy));
    // Again: nothing more to name, and the report is left as it is.
    let (o, _) = symbolize(&s, &report, Some(&server.url), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the report is unchanged"),
        "{}",
        stderr(&o)
    );
    drop(server);
    // A local folder of debug files by build id, no server.
    let root = s.path("by-id");
    let dir = root.join(".build-id").join(&p.build_id[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        p.debug_dir.join("spin.debug"),
        dir.join(format!("{}.debug", &p.build_id[2..])),
    )
    .unwrap();
    let (o, _) = symbolize(&s, &copy, None, &["--debug-dir", root.to_str().unwrap()]);
    assert!(o.status.success(), "asys symbolize: {}", stderr(&o));
    assert_eq!(named_in(&copy, &p.stripped), truth);
}

/// A server on localhost that takes each request and answers with
/// `answer(stream)` on a thread of its own; returns its URL.
fn fake_server(answer: fn(TcpStream)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || answer(conn));
        }
    });
    url
}

/// Reads a request's head.
fn read_request(conn: &TcpStream) {
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
        line.clear();
    }
}

/// Takes the request and never answers (holds the connection a minute).
fn silent(conn: TcpStream) {
    read_request(&conn);
    std::thread::sleep(Duration::from_secs(60));
    drop(conn);
}

/// 200 with bytes that are not ELF.
fn garbage(mut conn: TcpStream) {
    read_request(&conn);
    let body = b"<html><body>debuginfo? here is a page instead</body></html>";
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(body);
}

/// 200 announcing 2 GiB, then zeros for as long as the client reads (made
/// as they go: never a 2 GiB buffer).
fn two_gib(mut conn: TcpStream) {
    read_request(&conn);
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        2u64 << 30
    );
    let zeros = [0u8; 64 << 10];
    let mut sent = 0u64;
    while sent < 2 << 30 {
        if conn.write_all(&zeros).is_err() {
            return;
        }
        sent += zeros.len() as u64;
    }
}

/// A report of the stripped program recorded with no server (its frames
/// addresses), and how long that recording took.
fn unnamed_report(s: &Scratch, p: &Program) -> (PathBuf, Duration) {
    let (report, _, took) = profile(s, &p.stripped, "1.0", None);
    (report, took)
}

/// The URL asys asks `url` for the stripped program's debug file.
fn wanted_url(url: &str, p: &Program) -> String {
    format!("{url}/buildid/{}/debuginfo", p.build_id)
}

#[test]
fn a_server_that_never_answers_costs_one_warning_and_the_timeout_once() {
    require_root();
    let s = Scratch::new("debuginfod-silent");
    let p = program(&s);
    let (report, baseline) = unnamed_report(&s, &p);
    let url = fake_server(silent);
    // The recording: its other binaries are asked too, but the server is
    // given up after its first timeout (on each naming thread at most).
    let (_, err, took) = profile(&s, &p.stripped, "1.0", Some(&url));
    let warned = warnings_for(&err, &url);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        !warned.is_empty() && warned.len() <= threads,
        "warnings: {warned:?} (asys said: {err})"
    );
    for w in &warned {
        assert!(
            w.contains(&format!("no answer within {TIMEOUT_S}.0s")),
            "{w}"
        );
    }
    let bound = baseline + Duration::from_secs(TIMEOUT_S + 5);
    eprintln!("recording: {took:.1?} with the silent server, {baseline:.1?} without");
    assert!(took < bound, "{took:?}, over {bound:?}");
    // asys symbolize: the same, one timeout.
    let (o, took) = symbolize(&s, &report, Some(&url), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let warned = warnings_for(&err, &url);
    assert!(!warned.is_empty() && warned.len() <= threads, "{err}");
    eprintln!("asys symbolize: {took:.1?} with the silent server");
    assert!(
        took >= Duration::from_secs(TIMEOUT_S) && took < Duration::from_secs(TIMEOUT_S + 3),
        "{took:?} for a {TIMEOUT_S} s timeout"
    );
}

#[test]
fn a_server_answering_garbage_is_refused_with_one_warning_line() {
    require_root();
    let s = Scratch::new("debuginfod-garbage");
    let p = program(&s);
    let (report, _) = unnamed_report(&s, &p);
    let before = named_in(&report, &p.stripped);
    let url = fake_server(garbage);
    let (o, took) = symbolize(&s, &report, Some(&url), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let warned = warnings_for(&err, &wanted_url(&url, &p));
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].ends_with("the body is not an ELF file; refused"),
        "{}",
        warned[0]
    );
    assert!(took < Duration::from_secs(TIMEOUT_S + 3), "{took:?}");
    // Nothing was named from it, and nothing was kept.
    assert_eq!(named_in(&report, &p.stripped), before);
    let kept = s.path("xdg-cache/asys/debuginfod");
    let files: Vec<_> = std::fs::read_dir(&kept).unwrap().collect();
    assert!(files.is_empty(), "{files:?}");
}

#[test]
fn a_two_gib_body_is_refused_by_its_length_within_the_timeout() {
    require_root();
    let s = Scratch::new("debuginfod-huge");
    let p = program(&s);
    let (_, baseline) = unnamed_report(&s, &p);
    let url = fake_server(two_gib);
    let (report, err, took) = profile(&s, &p.stripped, "1.0", Some(&url));
    let warned = warnings_for(&err, &wanted_url(&url, &p));
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].ends_with(
            "Content-Length 2147483648 is over the 1073741824-byte limit (DEBUGINFOD_MAXSIZE); refused"
        ),
        "{}",
        warned[0]
    );
    let bound = baseline + Duration::from_secs(TIMEOUT_S + 5);
    eprintln!("recording: {took:.1?} with the 2 GiB server, {baseline:.1?} without");
    assert!(took < bound, "{took:?}, over {bound:?}");
    assert!(
        named_in(&report, &p.stripped)
            .iter()
            .all(|(f, _)| f.starts_with("0x"))
    );
    // With a smaller DEBUGINFOD_MAXSIZE and `asys symbolize`, the same.
    let (o, took) = {
        let mut cmd = asys_in(&s, Some(&url));
        cmd.env("DEBUGINFOD_MAXSIZE", "1000000")
            .arg("symbolize")
            .arg(&report);
        let t = Instant::now();
        (cmd.finish(), t.elapsed())
    };
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let warned = warnings_for(&err, &wanted_url(&url, &p));
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].contains("over the 1000000-byte limit"),
        "{}",
        warned[0]
    );
    assert!(took < Duration::from_secs(TIMEOUT_S + 3), "{took:?}");
}
