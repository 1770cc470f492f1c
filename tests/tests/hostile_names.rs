//! Names another user chose, printed by root's asys: terminal escape
//! sequences (clear screen, window title, OSC 52 clipboard writes),
//! bidirectional controls and spreadsheet formulas in thread, process, hgtx
//! range and domain, JIT symbol and SQLite string names are escaped in
//! column, csv and tsv output and exact in json (docs/stats.md, "Names in
//! the output"). Also: an SQLite input is read without changing its folder,
//! and the hidden subcommands and rule options check their arguments.
use std::{
    collections::{BTreeMap, BTreeSet},
    os::unix::fs::MetadataExt,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use asys_tests::*;
use serde_json::Value;

const NOBODY: &str = "65534";

/// A name, as column output shows it, and as a csv or tsv cell holds it
/// (before csv quoting). Written out by hand from docs/stats.md's rules, not
/// computed with asys's own code.
struct Name {
    raw: &'static str,
    column: &'static str,
    cell: &'static str,
}

/// The process (its main thread's name). Names the kernel keeps are at
/// most 15 bytes.
const PROCESS: Name = Name {
    raw: "@SUM(1)\u{202e}\x1b[2J",
    column: r"@SUM(1)\u{202e}\x1b[2J",
    cell: r"'@SUM(1)\u{202e}\x1b[2J",
};

const THREADS: [Name; 5] = [
    Name {
        raw: "\x1b]0;pwned\x07",
        column: r"\x1b]0;pwned\x07",
        cell: r"\x1b]0;pwned\x07",
    },
    Name {
        raw: "+1\x1b[2J",
        column: r"+1\x1b[2J",
        cell: r"'+1\x1b[2J",
    },
    Name {
        raw: "-1+2\u{202e}",
        column: r"-1+2\u{202e}",
        cell: r"'-1+2\u{202e}",
    },
    // 15 bytes: all the kernel keeps of "=cmd|' /C calc'!A0".
    Name {
        raw: "=cmd|' /C calc'",
        column: "=cmd|' /C calc'",
        cell: "'=cmd|' /C calc'",
    },
    // A C1 control (CSI) and a tab before a formula.
    Name {
        raw: "\u{9b}2J\t=x",
        column: r"\u{9b}2J\x09=x",
        cell: r"\u{9b}2J\x09=x",
    },
];

const RANGES: [Name; 8] = [
    Name {
        raw: "\x1b]52;c;cHduZWQ=\x07",
        column: r"\x1b]52;c;cHduZWQ=\x07",
        cell: r"\x1b]52;c;cHduZWQ=\x07",
    },
    Name {
        raw: "=cmd|' /C calc'!A0",
        column: "=cmd|' /C calc'!A0",
        cell: "'=cmd|' /C calc'!A0",
    },
    Name {
        raw: "@SUM(1)",
        column: "@SUM(1)",
        cell: "'@SUM(1)",
    },
    Name {
        raw: "+1",
        column: "+1",
        cell: "'+1",
    },
    Name {
        raw: "-1+2",
        column: "-1+2",
        cell: "'-1+2",
    },
    Name {
        raw: "\u{202e}gnp.exe",
        column: r"\u{202e}gnp.exe",
        cell: r"\u{202e}gnp.exe",
    },
    Name {
        raw: "\x1b[2J\x1b]0;pwned\x07",
        column: r"\x1b[2J\x1b]0;pwned\x07",
        cell: r"\x1b[2J\x1b]0;pwned\x07",
    },
    // A csv separator and quotes: quoted by the csv writer as well.
    Name {
        raw: "a,\"b\"\x1b[2J\\",
        column: r#"a,"b"\x1b[2J\\"#,
        cell: r#"a,"b"\x1b[2J\\"#,
    },
];

/// A range pushed in a domain another user named.
const DOMAIN: Name = Name {
    raw: "=1+1\u{2066}\x1b]0;t\x07",
    column: r"=1+1\u{2066}\x1b]0;t\x07",
    cell: r"'=1+1\u{2066}\x1b]0;t\x07",
};
const IN_DOMAIN: Name = Name {
    raw: "-2\x7f",
    column: r"-2\x7f",
    cell: r"'-2\x7f",
};
/// hgtx_sum's Range of the range in the domain: `NAME@DOMAIN`.
const IN_DOMAIN_LABEL: Name = Name {
    raw: "-2\x7f@=1+1\u{2066}\x1b]0;t\x07",
    column: r"-2\x7f@=1+1\u{2066}\x1b]0;t\x07",
    cell: r"'-2\x7f@=1+1\u{2066}\x1b]0;t\x07",
};

const JIT: Name = Name {
    raw: "-3+4\x1b]0;jit\x07\u{202e}",
    column: r"-3+4\x1b]0;jit\x07\u{202e}",
    cell: r"'-3+4\x1b]0;jit\x07\u{202e}",
};

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(h: &str) -> String {
    let bytes: Vec<u8> = (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect();
    String::from_utf8(bytes).unwrap()
}

/// Whether `c` must never reach a terminal raw: C0 (but the line breaks
/// of the output itself, and tsv's separators), DEL, C1, and the
/// bidirectional controls.
fn dangerous(c: char) -> bool {
    matches!(c, '\0'..='\x09' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `asys stats -r REPORT -f FORMAT FILE`: its stdout.
fn stats(file: &Path, report: &str, format: &str) -> String {
    let o = run(&["stats", "-r", report, "-f", format, file.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "stats {report} {format}: {}",
        stderr(&o)
    );
    let text = stdout(&o);
    // JSON is exact: its encoder escapes control characters, and a bidi
    // control is the name's own character there.
    assert!(
        format == "json"
            || !text
                .chars()
                .any(|c| dangerous(c) && !(format == "tsv" && c == '\t')),
        "{report} -f {format} wrote a control or bidi character raw: {text:?}"
    );
    text
}

/// Rows of csv or tsv text as header → cell maps.
fn rows_of(text: &str, format: &str) -> Vec<BTreeMap<String, String>> {
    let split = |l: &str| -> Vec<String> {
        if format == "csv" {
            csv_fields(l)
        } else {
            l.split('\t').map(String::from).collect()
        }
    };
    let mut lines = text.lines().filter(|l| !l.is_empty());
    let header = split(lines.next().expect("a header"));
    lines
        .map(|l| {
            let cells = split(l);
            assert_eq!(cells.len(), header.len(), "{format} line {l:?}");
            header.iter().cloned().zip(cells).collect()
        })
        .collect()
}

/// The `column` values of `report`'s csv and tsv rows that `keep` keeps
/// are `cells`, and its json rows' are `raws`; column output shows each of
/// `shown` and none of the cells prefixed for spreadsheets.
fn check_report(
    file: &Path,
    report: &str,
    column: &str,
    keep: &dyn Fn(&BTreeMap<String, String>) -> bool,
    keep_json: &dyn Fn(&Value) -> bool,
    names: &[&Name],
) {
    let want = |f: fn(&Name) -> &'static str| -> BTreeSet<String> {
        names.iter().map(|n| f(n).to_string()).collect()
    };
    for format in ["csv", "tsv"] {
        let text = stats(file, report, format);
        let got: BTreeSet<String> = rows_of(&text, format)
            .iter()
            .filter(|r| keep(r))
            .map(|r| r[column].clone())
            .collect();
        assert_eq!(got, want(|n| n.cell), "{report} -f {format}:\n{text}");
    }
    let json: Value = serde_json::from_str(&stats(file, report, "json")).unwrap();
    let got: BTreeSet<String> = json
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| keep_json(r))
        .map(|r| r[column].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, want(|n| n.raw), "{report} -f json exact");
    let text = stats(file, report, "column");
    for n in names {
        assert!(
            text.contains(n.column),
            "{report}: no {:?} in\n{text}",
            n.column
        );
        if n.cell != n.column {
            assert!(
                !text.contains(n.cell),
                "{report}: {:?} prefixed in\n{text}",
                n.cell
            );
        }
    }
}

/// The workload (tests/workloads/hostile.c) runs as nobody under root's
/// asys. Every name comes in as hex on the command line (`p:` the process,
/// `t:` a thread, `r:` a push/pop range, `d:DOMAIN:RANGE` a range in a
/// domain, `j:` a JIT symbol), and the workload prints each name as the
/// kernel or itself then holds it, in hex: the ground truth. Threads and the
/// process read their names back from /proc (the kernel keeps 15 bytes) and
/// sleep under them, so that the context switches asys records carry them.
/// The JIT symbol names six bytes of machine code (`dec rdi; jnz; ret`) in
/// an anonymous executable page, listed in /tmp/perf-PID.map as a JIT
/// would, which then spins ~1e9 times.
///
/// Names chosen by a process of nobody's, traced by root's asys (launched
/// under setpriv, so asys's whole process tree is traced): thread and
/// process names in cpu_ctxsw_sum, hgtx ranges and domains in
/// hgtx_pushpop_trace and hgtx_sum, a JIT symbol in cpu_sample_sum.
#[test]
fn names_another_user_chose_are_escaped_in_text_and_exact_in_json() {
    require_root();
    let s = Scratch::new("hostile-names");
    let bin = sim_workload("hostile.c", &["hgtx", "pthread"]);
    let mut args: Vec<String> = vec![format!("p:{}", hex(PROCESS.raw))];
    args.extend(THREADS.iter().map(|t| format!("t:{}", hex(t.raw))));
    args.extend(RANGES.iter().map(|r| format!("r:{}", hex(r.raw))));
    args.push(format!("d:{}:{}", hex(DOMAIN.raw), hex(IN_DOMAIN.raw)));
    args.push(format!("j:{}", hex(JIT.raw)));
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-t", "hgtx", "-s", "process-tree"])
        .args(["--cpuctxsw", "process-tree", "-o"])
        .arg(&report)
        .args(["setpriv", &format!("--reuid={NOBODY}")])
        .args([&format!("--regid={NOBODY}"), "--clear-groups"])
        .arg(&bin)
        .args(&args)
        .finish();
    let out = stdout(&o);
    // The workload's perf map is nobody's file in /tmp: gone with the test.
    let pid = out.lines().find_map(|l| {
        l.strip_prefix("process ")?
            .split(' ')
            .next()?
            .parse::<u32>()
            .ok()
    });
    if let Some(pid) = pid {
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    }
    assert!(o.status.success(), "{}\n{out}", stderr(&o));
    assert!(out.lines().any(|l| l == format!("uid {NOBODY}")), "{out}");
    let pid = pid.expect("the workload said its pid");
    let report = report.with_extension("asysrep");

    // Ground truth: what the kernel held, and what the workload passed.
    let said = |what: &str| -> Vec<(u64, Vec<String>)> {
        out.lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                (w[0] == what).then(|| {
                    (
                        w[2].parse().unwrap(),
                        w[3..].iter().map(|h| unhex(h)).collect(),
                    )
                })
            })
            .collect()
    };
    let process = said("process");
    assert_eq!(process.len(), 1, "{out}");
    assert_eq!(
        process[0].1,
        [PROCESS.raw],
        "the kernel kept the whole name"
    );
    let threads = said("thread");
    let held: BTreeSet<&str> = threads.iter().map(|(_, n)| n[0].as_str()).collect();
    let set: BTreeSet<&str> = THREADS.iter().map(|t| t.raw).collect();
    assert_eq!(held, set, "the kernel kept each thread's whole name");
    let ranges: BTreeSet<String> = said("range")
        .into_iter()
        .map(|(_, n)| n[0].clone())
        .collect();
    assert_eq!(ranges.len(), RANGES.len(), "{out}");
    assert_eq!(said("domain").len(), 1, "{out}");
    assert_eq!(said("jit").len(), 1, "{out}");

    // Threads and the process: their rows of cpu_ctxsw_sum.
    let tids: BTreeSet<String> = threads
        .iter()
        .map(|(t, _)| t.to_string())
        .chain([pid.to_string()])
        .collect();
    let mut names: Vec<&Name> = THREADS.iter().collect();
    names.push(&PROCESS);
    check_report(
        &report,
        "cpu_ctxsw_sum",
        "Name",
        &|r| r["Pid"] == pid.to_string() && tids.contains(&r["Tid"]),
        &|r| r["Pid"] == pid && tids.contains(&r["Tid"].to_string()),
        &names,
    );

    // Ranges: their names and domain in the trace, their labels in the sum.
    let mut names: Vec<&Name> = RANGES.iter().collect();
    names.push(&IN_DOMAIN);
    check_report(
        &report,
        "hgtx_pushpop_trace",
        "Name",
        &|r| r["Pid"] == pid.to_string(),
        &|r| r["Pid"] == pid,
        &names,
    );
    check_report(
        &report,
        "hgtx_pushpop_trace",
        "Domain",
        &|r| r["Pid"] == pid.to_string() && !r["Domain"].is_empty(),
        &|r| r["Pid"] == pid && r["Domain"] != "",
        &[&DOMAIN],
    );
    let mut names: Vec<&Name> = RANGES.iter().collect();
    names.push(&IN_DOMAIN_LABEL);
    check_report(&report, "hgtx_sum", "Range", &|_| true, &|_| true, &names);

    // The Kineto export (JSON, read whole by serde_json): the ranges exact,
    // as the json reports give them.
    let base = s.path("k");
    let o = run(&[
        "export",
        "--type",
        "kineto",
        "-o",
        base.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let trace: Value =
        serde_json::from_slice(&std::fs::read(s.path("k.pt.trace.json")).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let got: BTreeSet<String> = events
        .iter()
        .filter(|e| e["cat"] == "user_annotation" && e["pid"] == pid)
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    let want: BTreeSet<String> = stats_json(&report, "hgtx_pushpop_trace")
        .iter()
        .filter(|r| r["Pid"] == pid)
        .map(|r| match r["Domain"].as_str().unwrap() {
            "" => r["Name"].as_str().unwrap().to_string(),
            d => format!("{}@{d}", r["Name"].as_str().unwrap()),
        })
        .collect();
    assert_eq!(got.len(), RANGES.len() + 1, "{got:?}");
    assert_eq!(got, want);

    // The JIT symbol: the frame sampled in its code.
    check_report(
        &report,
        "cpu_sample_sum",
        "Function",
        &|r| r["Pid"] == pid.to_string() && r["Function"].contains("jit"),
        &|r| r["Pid"] == pid && r["Function"].as_str().unwrap().contains("jit"),
        &[&JIT],
    );
}

/// Each file of `dir`: its size, modification time and content.
fn listing(dir: &Path) -> BTreeMap<String, (u64, i64, i64, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                (
                    m.size(),
                    m.mtime(),
                    m.mtime_nsec(),
                    std::fs::read(e.path()).unwrap(),
                ),
            )
        })
        .collect()
}

/// A WAL-mode SQLite export that a writer left with changes in its `-wal`
/// (copied while the writer had it open, as a crash leaves it), whose
/// string table another user filled with escape sequences and formulas:
/// stats and analyze read it without creating, changing or removing a file
/// beside it (no `-shm`, the log neither applied nor removed), warn that
/// the log was not read, and print its strings escaped (exact in json).
#[test]
fn a_wal_mode_sqlite_input_leaves_its_folder_unchanged() {
    require_root();
    let s = Scratch::new("hostile-sqlite");
    let p = profile_workload(&s, &["-t", "hggc"], "call_loop", &["200"], &[]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let o = run(&["export", "--type", "sqlite", p.report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = p.report.with_extension("sqlite");
    assert!(db.is_file(), "{:?}", s.files());
    // The API names, as a hostile file would have them: each hggc name
    // prefixed with '@' and followed by a title-setting sequence and an
    // override. Then a change only the write-ahead log holds.
    let input = Scratch::new("hostile-sqlite-input");
    let script = format!(
        "UPDATE StringIds SET value = '@' || value || char(27) || ']0;pwned' || char(7) || char(8238) \
           WHERE value LIKE 'hggc%';\n\
         PRAGMA journal_mode=WAL;\n\
         PRAGMA wal_autocheckpoint=0;\n\
         UPDATE StringIds SET value = 'wal-only' || value;\n\
         .shell cp {db} {dir}/x.sqlite && cp {db}-wal {dir}/x.sqlite-wal\n",
        db = db.display(),
        dir = input.0.display()
    );
    let o = Command::new("sqlite3")
        .arg(&db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(script.as_bytes())?;
            c.wait_with_output()
        })
        .expect("sqlite3 runs");
    assert!(o.status.success(), "{}", stderr(&o));
    let copy = input.path("x.sqlite");
    assert_eq!(input.files(), ["x.sqlite", "x.sqlite-wal"]);
    assert!(input.path("x.sqlite-wal").metadata().unwrap().len() > 0);
    let before = listing(&input.0);

    let o = run(&[
        "stats",
        "-r",
        "hggc_api_sum",
        "-f",
        "csv",
        copy.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("x.sqlite-wal was not read"), "{err}");
    let csv = stdout(&o);
    assert!(!csv.chars().any(dangerous), "{csv:?}");
    assert!(!csv.contains("wal-only"), "the log was applied: {csv}");
    let names: Vec<String> = rows_of(&csv, "csv")
        .iter()
        .map(|r| r["Name"].clone())
        .collect();
    assert!(!names.is_empty(), "{csv}");
    for n in &names {
        let base = n
            .strip_prefix("'@")
            .and_then(|n| n.strip_suffix(r"\x1b]0;pwned\x07\u{202e}"))
            .unwrap_or_else(|| panic!("{n:?} not escaped and neutralized"));
        assert!(base.starts_with("hggc"), "{n}");
    }
    let o = run(&[
        "stats",
        "-r",
        "hggc_api_sum",
        "-f",
        "json",
        copy.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: Value = serde_json::from_slice(&o.stdout).unwrap();
    for r in json.as_array().unwrap() {
        let n = r["Name"].as_str().unwrap();
        assert!(
            n.starts_with("@hggc") && n.ends_with("\x1b]0;pwned\x07\u{202e}"),
            "json is exact: {n:?}"
        );
    }
    let o = run(&["analyze", copy.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(listing(&input.0), before, "the input's folder changed");
}

/// An error that quotes what the user gave: escaped, on one line.
#[test]
fn error_messages_escape_what_they_quote() {
    let o = run(&["stats", "-r", "x\x1b]0;pwned\x07\u{202e}", "/nonexistent"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.chars().any(dangerous), "{err:?}");
    assert!(
        err.contains(r"unknown report 'x\x1b]0;pwned\x07\u{202e}'"),
        "{err}"
    );
    // A file name, through the error chain.
    let o = run(&["stats", "/nonexistent/\u{202e}fdp.exe\x1b[2J"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.chars().any(dangerous), "{err:?}");
    assert!(err.contains(r"\u{202e}fdp.exe\x1b[2J"), "{err}");
    // clap's own errors echo the argument too. (clap drops escape
    // sequences and C0 controls from its message itself; a bidi control it
    // leaves is escaped.)
    let o = run(&["stats", "--timeunit", "a\x1b[2Jb\u{202e}c\x07"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.chars().any(dangerous), "{err:?}");
    assert!(err.contains(r"b\u{202e}c"), "{err:?}");
}

/// Negative and other bad rule options are refused before any report is
/// read: one line, a non-zero exit.
#[test]
fn negative_rule_options_are_refused() {
    let s = Scratch::new("hostile-rows");
    // A file that exists: the refusal is the option's, not the input's.
    let input = s.path("r.asysrep");
    std::fs::write(&input, b"not read").unwrap();
    for rule in [
        "pccl_late_rank:rows=-1",
        "ppu_gaps:rows=-1",
        "ppu_gaps:rows=0",
        "hggc_api_sync:threshold=-3",
        "ppu_time_util:chunks=-1",
        "ppu_gaps:gap=-5",
    ] {
        let o = run(&["analyze", "--rule", rule, input.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{rule}: {err}");
        assert_eq!(err.lines().count(), 1, "{rule}: {err}");
        let key = rule.split(':').nth(1).unwrap().split('=').next().unwrap();
        assert!(err.contains(&format!("{key}=")), "{rule}: {err}");
        assert!(
            !err.contains("not read") && stdout(&o).is_empty(),
            "{rule}: {err}"
        );
    }
}

/// Runs `asys ARGS` through `sh` with descriptor 3 closed (as a user's
/// shell starts it; cargo may have left its jobserver pipe there), with a
/// deadline: a command that hangs fails the test instead of stalling it.
fn hidden(args: &[&str]) -> std::process::Output {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(r#"exec 3>&-; exec "$@""#)
        .arg("sh")
        .arg(asys_bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = ChildGuard(Some(c.spawn().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.child().try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "asys {args:?} hung");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_output()
}

/// The hidden subcommands refuse arguments they cannot work with, at once
/// and in one line, instead of making a socket nobody can name and waiting
/// on it for ever.
#[test]
fn hidden_subcommands_check_their_arguments() {
    for (args, says) in [
        (&["__session-daemon", ""][..], "invalid session name"),
        (&["__session-daemon", ".hidden"][..], "invalid session name"),
        (&["__session-daemon", "a/b"][..], "invalid session name"),
        (&["__session-daemon", "fine"][..], "not by hand"),
        (&["__watchdog", "1", "1"][..], "not by hand"),
        (&["__watchdog", "40", "41"][..], "not by hand"),
        // clap itself refuses an empty path, before asys sees it.
        (&["__symbolize-addresses", ""][..], ""),
        (&["__symbolize-addresses", "/"][..], "not a regular file"),
    ] {
        let o = hidden(args);
        let err = stderr(&o);
        // 1: asys refused it; 2: clap did.
        assert!(matches!(o.status.code(), Some(1 | 2)), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("asys: error: ") && err.contains(says),
            "{args:?}: {err}"
        );
    }
    // Nothing was made in the caller's session folder for a refused name.
    let o = run(&["sessions", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("fine"), "{}", stdout(&o));
}
