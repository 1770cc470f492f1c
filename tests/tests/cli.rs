//! Help and version, as the guide shows them.
use asys_tests::*;

#[test]
fn top_level_help_lists_the_guides_commands() {
    let o = run(&["-h"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(
        out.starts_with(
            "usage: asys [--version] [--help] <command> [<args>] [application] [<application args>]"
        ),
        "{out}"
    );
    for cmd in [
        "profile", "attach", "launch", "start", "stop", "cancel", "shutdown", "sessions", "status",
        "export", "stats", "analyze",
    ] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(cmd)),
            "{cmd} missing from {out}"
        );
    }
    assert!(out.contains("Use 'asys --help <command>' for more information"));
}

#[test]
fn help_for_a_command_both_spellings() {
    for args in [&["--help", "profile"][..], &["profile", "-h"][..]] {
        let o = run(args);
        assert!(o.status.success());
        let out = stdout(&o);
        assert!(
            out.contains("asys profile [<args>] <application> [<application args>]"),
            "{out}"
        );
        assert!(out.contains("--trace"));
        assert!(out.contains("--force-overwrite"));
    }
}

/// The version, the commit the checkout is at, the C library baseline and
/// the embedded eBPF programs.
#[test]
fn version() {
    let o = run(&["-v"]);
    assert!(o.status.success());
    let commit = std::process::Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .output()
        .unwrap();
    let commit = String::from_utf8_lossy(&commit.stdout).trim().to_string();
    let libc = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .unwrap();
    let libc = String::from_utf8_lossy(&libc.stdout).trim().to_string();
    assert_eq!(
        stdout(&o).trim(),
        format!(
            "asys {} (commit {commit}; needs {libc} (the build host's) or later; \
             eBPF programs embedded)",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(stdout(&run(&["--version"])), stdout(&o));
}

#[test]
fn export_and_analyze_of_a_missing_report_are_one_line_errors() {
    // Both commands exist now: a report that is not there is named in one
    // line, not answered with "not available".
    for args in [
        &["export", "--type", "sqlite", "no-such-report.asysrep"][..],
        &["analyze", "no-such-report.asysrep"],
    ] {
        let command = args[0];
        let o = run(args);
        assert!(!o.status.success(), "{command}");
        let err = stderr(&o);
        assert_eq!(err.trim_end().lines().count(), 1, "{command}: {err}");
        assert!(err.contains("no-such-report"), "{command}: {err}");
        assert!(!err.contains("not available"), "{command}: {err}");
    }
}

#[test]
fn status_environment_checks_this_machine() {
    require_root();
    let o = asys()
        .args(["status", "--environment"])
        .env("LD_LIBRARY_PATH", sim().join("lib"))
        .finish();
    assert!(o.status.success(), "{}", stdout(&o));
    let out = stdout(&o);
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .to_string()
    };
    assert!(
        line("eBPF programs").contains("ok    loaded and verified"),
        "{out}"
    );
    assert!(line("privileges").contains("ok"), "{out}");
    assert!(
        line("accelerator runtimes").contains("libhggcrt.so"),
        "{out}"
    );
    assert!(
        line("injection library").contains("libasys_inject.so"),
        "{out}"
    );
    // Without --environment, status names the caller's sessions, the same
    // ones `sessions list` shows (none, or each by name).
    let o = run(&["status"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stdout(&o);
    let listed = run(&["sessions", "list", "-p", "false"]);
    let names: Vec<String> = stdout(&listed)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5).map(str::to_string))
        .collect();
    if names.is_empty() {
        assert!(said.contains("no sessions of uid"), "{said}");
    } else {
        for n in &names {
            assert!(said.contains(&format!("'{n}'")), "{n}: {said}");
        }
    }
    assert!(!said.contains("not available"), "{said}");
}
