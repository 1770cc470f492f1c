//! Bad input: a one-line error naming the problem, a non-zero exit, and
//! nothing half-written.
use asys_tests::*;

fn assert_one_line_error(o: &std::process::Output, needle: &str) {
    assert!(!o.status.success(), "expected failure, got success");
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line, got {err:?}");
    assert!(lines[0].starts_with("asys: error: "), "{err:?}");
    assert!(
        lines[0].contains(needle),
        "{err:?} does not mention {needle:?}"
    );
}

#[test]
fn unknown_trace_item() {
    let s = Scratch::new("e-item");
    let o = run(&[
        "profile",
        "-t",
        "hggc,bogus",
        "-o",
        s.path("r").to_str().unwrap(),
        "/bin/true",
    ]);
    assert_one_line_error(&o, "unknown trace item 'bogus'");
    assert!(s.files().is_empty());
}

#[test]
fn missing_and_nonexistent_application() {
    let s = Scratch::new("e-app");
    let o = run(&["profile", "-o", s.path("r").to_str().unwrap()]);
    assert_one_line_error(&o, "no application given");
    let o = run(&[
        "profile",
        "-o",
        s.path("r").to_str().unwrap(),
        "/no/such/app",
    ]);
    assert_one_line_error(&o, "application '/no/such/app' not found");
    let o = run(&[
        "profile",
        "-o",
        s.path("r").to_str().unwrap(),
        "no-such-app-on-path",
    ]);
    assert_one_line_error(&o, "not found");
    assert!(s.files().is_empty());
}

#[test]
fn nonexistent_and_invalid_pid() {
    // Find a pid that is not running.
    let pid = (400000..500000)
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .unwrap();
    let o = run(&["attach", &pid.to_string()]);
    assert_one_line_error(&o, &format!("no process with PID {pid}"));
    let o = run(&["attach", "12x"]);
    assert_one_line_error(&o, "invalid PID '12x'");
    let o = run(&["attach"]);
    assert_one_line_error(&o, "no PID given");
}

#[test]
fn unwritable_or_missing_output_folder() {
    require_root();
    let o = run(&["profile", "-o", "/sys/kernel/asys-report", "/bin/true"]);
    assert_one_line_error(&o, "not writable");
    let o = run(&["profile", "-o", "/no/such/folder/r", "/bin/true"]);
    assert_one_line_error(&o, "output folder /no/such/folder does not exist");
}

#[test]
fn existing_report_needs_force() {
    require_root();
    let s = Scratch::new("e-force");
    let r = s.path("r.asysrep");
    std::fs::write(&r, b"precious").unwrap();
    let o = run(&["profile", "-o", s.path("r").to_str().unwrap(), "/bin/true"]);
    assert_one_line_error(&o, "already exists; use -f true");
    assert_eq!(
        std::fs::read(&r).unwrap(),
        b"precious",
        "the existing file is untouched"
    );
    let o = run(&[
        "profile",
        "-f",
        "true",
        "-o",
        s.path("r").to_str().unwrap(),
        "/bin/true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(metadata(&r)["format"], "asysrep");
    assert_eq!(s.files(), vec!["r.asysrep"]);
}

#[test]
fn without_privileges_asys_refuses_and_writes_nothing() {
    require_root();
    let s = Scratch::new("e-priv");
    // A copy of asys that an unprivileged user can run, in a folder they can write.
    let bin = s.path("asys");
    std::fs::copy(asys_bin(), &bin).unwrap();
    let out = s.path("out");
    std::fs::create_dir(&out).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for p in [&s.0, &out] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&bin)
        .args([
            "profile",
            "-o",
            out.join("r").to_str().unwrap(),
            "/bin/true",
        ])
        .finish();
    assert_one_line_error(&o, "tracing needs root, or CAP_BPF and CAP_PERFMON");
    assert!(
        std::fs::read_dir(&out).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn stats_on_files_that_are_not_reports() {
    let s = Scratch::new("e-stats");
    let text = s.path("notes.txt");
    std::fs::write(&text, "hello, not a report\n").unwrap();
    let o = run(&["stats", text.to_str().unwrap()]);
    assert_one_line_error(&o, "is not an asys report");
    let empty = s.path("empty.asysrep");
    std::fs::write(&empty, b"").unwrap();
    let o = run(&["stats", empty.to_str().unwrap()]);
    assert_one_line_error(&o, "is not an asys report");
    // A tar that is not ours.
    let tar = s.path("other.tar");
    let st = std::process::Command::new("tar")
        .args([
            "-cf",
            tar.to_str().unwrap(),
            "-C",
            s.0.to_str().unwrap(),
            "notes.txt",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let o = run(&["stats", tar.to_str().unwrap()]);
    assert_one_line_error(&o, "is not an asys report");
    let o = run(&["stats", s.path("missing.asysrep").to_str().unwrap()]);
    assert_one_line_error(&o, "No such file");
    let o = run(&["stats"]);
    assert_one_line_error(&o, "no report file given");
}

#[test]
fn stats_unknown_report_name_prints_nothing() {
    require_root();
    let s = Scratch::new("e-rep");
    let o = run(&["profile", "-o", s.path("r").to_str().unwrap(), "/bin/true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "stats",
        "--report",
        "hggc_api_sum,nope",
        s.path("r.asysrep").to_str().unwrap(),
    ]);
    assert_one_line_error(&o, "unknown report 'nope'");
    assert!(o.stdout.is_empty(), "no half output");
}

#[test]
fn bad_option_values_are_one_line() {
    let o = run(&["profile", "-d", "soon", "/bin/true"]);
    assert_one_line_error(&o, "soon");
    let o = run(&["profile", "-f", "maybe", "/bin/true"]);
    assert_one_line_error(&o, "maybe");
    let o = run(&["nosuchcommand"]);
    assert_one_line_error(&o, "nosuchcommand");
}

/// The command-line defects found by trying asys as a new user: each is a
/// one-line error now (or, for the guide's own spelling, accepted).
#[test]
fn command_line_defects_are_one_line_errors() {
    let s = Scratch::new("e-cli");
    let out = s.path("r");
    let out = out.to_str().unwrap();
    // A duration too large for any clock: an error, not a panic.
    let o = run(&["profile", "-d", "99999999999999999999", "/bin/true"]);
    assert_one_line_error(&o, "too long");
    // An unknown option before the application is not taken for it.
    let o = run(&["profile", "-o", out, "--bogus", "1", "/bin/true"]);
    assert_one_line_error(&o, "unknown option '--bogus'");
    let o = run(&["launch", "--bogus", "/bin/true"]);
    assert_one_line_error(&o, "unknown option '--bogus'");
    // Report names: %q without its brace, no name, a name too long for the
    // temporary files beside it (asys used to leave the application held).
    let o = run(&["profile", "-o", &format!("{out}_%q{{HOME"), "/bin/true"]);
    assert_one_line_error(&o, "closing }");
    let o = run(&["profile", "-o", "", "/bin/true"]);
    assert_one_line_error(&o, "needs a name");
    let long = s.path(&"x".repeat(240));
    let o = run(&["profile", "-o", long.to_str().unwrap(), "/bin/true"]);
    assert_one_line_error(&o, "longer than");
    assert!(s.files().is_empty(), "{:?}", s.files());
    // stats with no report named.
    let o = run(&["stats", "--report", "", "/nonexistent.asysrep"]);
    assert_one_line_error(&o, "no report named");
    // The guide's spelling of -f.
    let o = run(&[
        "profile",
        "--force-overrite",
        "true",
        "-t",
        "none",
        "-s",
        "none",
        "-o",
        out,
        "/bin/true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// An OS error is named once, not once per layer of the error chain.
#[test]
fn an_os_error_is_named_once() {
    let s = Scratch::new("e-os");
    let o = run(&[
        "stats",
        "--report",
        "hggc_api_sum",
        s.path("missing.asysrep").to_str().unwrap(),
    ]);
    assert_one_line_error(&o, "No such file or directory");
    let err = stderr(&o);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}
