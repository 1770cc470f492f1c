//! USDT arguments (docs/probes.md) read as their SDT notes say, against the
//! program's own values and bpftrace's in the same run: the workload
//! `usdt_args.c` passes constants of every size and sign, registers of every
//! width, memory at a register plus a displacement, and indexed memory (with
//! and without a base) to markers, and prints what it passed; bpftrace traces
//! the markers while `asys profile --probe` runs the program, each argument
//! asked as `i32`, `u32`, `i64`, `u64` and `ptr`. Each value must be the
//! note's (its size in bytes, sign- or zero-extended by the note's sign),
//! then converted to the type asked: `4@$-202182160` is 4092785136 as `i64`
//! and `0xf3f2f1f0` as `ptr`, `-2@$-3600` is -3600 as `i32`.
use std::{
    collections::BTreeMap,
    io::BufRead,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use asys_tests::*;

const PROVIDER: &str = "usdt_args";
/// The types each argument is asked as, one `--probe` per type and marker.
const TYPES: [&str; 5] = ["i32", "u32", "i64", "u64", "ptr"];

/// A marker of the workload and the operand form its note must have.
struct Marker {
    name: &'static str,
    /// Whether an argument's location (after `@`) has the form the marker
    /// is there to test.
    form: fn(&str) -> bool,
    /// Says the form, for a failure.
    form_text: &'static str,
    /// bpftrace reads it (bpftrace 0.17 refuses a memory operand without a
    /// base register: "Parse error" at the comma).
    bpftrace: bool,
}

fn is_const(l: &str) -> bool {
    l.starts_with('$')
}
fn is_reg(l: &str) -> bool {
    l.starts_with('%')
}
fn is_mem(l: &str) -> bool {
    l.ends_with(')') && !l.contains(',') && !l.contains("%rip")
}
fn is_indexed(l: &str) -> bool {
    l.ends_with(')') && l.contains(",%") && !l.contains("(,")
}
fn is_indexed_without_base(l: &str) -> bool {
    l.contains("(,%")
}

const SIZE_AND_SIGN: [Marker; 5] = [
    Marker {
        name: "consts",
        form: is_const,
        form_text: "constants ($N)",
        bpftrace: true,
    },
    Marker {
        name: "consts64",
        form: is_const,
        form_text: "constants ($N)",
        bpftrace: true,
    },
    Marker {
        name: "regs",
        form: is_reg,
        form_text: "registers (%R)",
        bpftrace: true,
    },
    Marker {
        name: "regs64",
        form: is_reg,
        form_text: "registers (%R)",
        bpftrace: true,
    },
    Marker {
        name: "mem",
        form: is_mem,
        form_text: "memory at a register (D(%R))",
        bpftrace: true,
    },
];

const INDEXED: [Marker; 2] = [
    Marker {
        name: "indexed",
        form: is_indexed,
        form_text: "indexed memory (D(%B,%I,S))",
        bpftrace: true,
    },
    Marker {
        name: "nobase",
        form: is_indexed_without_base,
        form_text: "indexed memory without a base (D(,%I,S))",
        bpftrace: false,
    },
];

/// regs64's third argument is a string (asked as `str` in every spec).
fn is_str(marker: &str, i: usize) -> bool {
    marker == "regs64" && i == 2
}

fn usdt_args() -> PathBuf {
    c_workload("usdt_args.c", &[])
}

/// The arguments of each SDT note of `bin` by marker name, as
/// `readelf -n` (binutils) prints them.
fn notes(bin: &Path) -> BTreeMap<String, Vec<String>> {
    let o = Command::new("readelf")
        .args(["-n", "--wide"])
        .arg(bin)
        .finish();
    assert!(o.status.success(), "readelf: {}", stderr(&o));
    let mut out = BTreeMap::new();
    let mut name = None;
    for l in stdout(&o).lines().map(str::trim) {
        if let Some(n) = l.strip_prefix("Name: ") {
            name = Some(n.to_string());
        } else if let Some(args) = l.strip_prefix("Arguments: ")
            && let Some(n) = name.take()
        {
            out.insert(n, args.split_whitespace().map(String::from).collect());
        }
    }
    out
}

/// bpftrace printing each marker's arguments as 64-bit integers (strings
/// as strings), with the pid, line by line: `NAME PID V0 V1 ...`.
fn bpftrace_script(
    bin: &Path,
    markers: &[&Marker],
    notes: &BTreeMap<String, Vec<String>>,
) -> String {
    let mut script = String::new();
    for m in markers.iter().filter(|m| m.bpftrace) {
        let n = notes[m.name].len();
        let fmt: Vec<&str> = (0..n)
            .map(|i| if is_str(m.name, i) { "%s" } else { "%ld" })
            .collect();
        let args: Vec<String> = (0..n)
            .map(|i| {
                if is_str(m.name, i) {
                    format!("str(arg{i})")
                } else {
                    format!("arg{i}")
                }
            })
            .collect();
        script += &format!(
            "usdt:{}:{PROVIDER}:{} {{ printf(\"{} %d {}\\n\", pid, {}); }}\n",
            bin.display(),
            m.name,
            m.name,
            fmt.join(" "),
            args.join(", ")
        );
    }
    script
}

/// A running bpftrace and its stdout, line by line.
struct Bpftrace {
    guard: ChildGuard,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Bpftrace {
    /// Starts bpftrace on `script` and waits until its probes are attached.
    fn start(script: &str) -> Self {
        let child = Command::new("bpftrace")
            .args(["-B", "line", "-e", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("bpftrace: {e} (the peer tool: `cargo xtask test` installs it)")
            });
        let mut guard = ChildGuard(Some(child));
        let out = guard.child().stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut b = Self {
            guard,
            lines,
            seen: Vec::new(),
        };
        assert!(
            b.wait_for(Duration::from_secs(120), |l| l.starts_with("Attaching")),
            "bpftrace did not attach; it said {:?}",
            b.seen
        );
        b
    }

    /// Reads lines until one satisfies `done`, or `limit` passes.
    fn wait_for(&mut self, limit: Duration, done: impl Fn(&str) -> bool) -> bool {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let hit = done(&l);
                    self.seen.push(l);
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// The values bpftrace printed for each marker of `markers` in process
    /// `pid`, once all have come (stops bpftrace).
    fn values(mut self, markers: &[&Marker], pid: u64) -> BTreeMap<String, Vec<String>> {
        let of_pid = |l: &str| -> Option<(String, Vec<String>)> {
            let mut w = l.split(' ');
            let name = w.next()?.to_string();
            (w.next()?.parse::<u64>().ok()? == pid).then(|| (name, w.map(String::from).collect()))
        };
        let wanted = markers.iter().filter(|m| m.bpftrace).count();
        let end = Instant::now() + Duration::from_secs(30);
        while self.seen.iter().filter_map(|l| of_pid(l)).count() < wanted && Instant::now() < end {
            self.wait_for(Duration::from_millis(200), |_| true);
        }
        let pid_of_bpftrace = self.guard.child().id() as i32;
        signal(pid_of_bpftrace, libc::SIGINT);
        let _ = self.guard.wait();
        self.seen.iter().filter_map(|l| of_pid(l)).collect()
    }
}

/// `v` (the value the program passed) as type `ty`.
fn as_type(v: i128, ty: &str) -> String {
    match ty {
        "i32" => (v as i32).to_string(),
        "u32" => (v as u32).to_string(),
        "i64" => (v as i64).to_string(),
        "u64" => (v as u64).to_string(),
        "ptr" => format!("{:#x}", v as u64),
        _ => unreachable!("{ty}"),
    }
}

/// What asys must show for the program's `value` asked as `ty`: a string
/// quoted, a number converted to the type.
fn expected(value: &str, string: bool, ty: &str) -> String {
    if string {
        format!("{value:?}")
    } else {
        as_type(value.parse().unwrap(), ty)
    }
}

/// The probe spec of marker `m` with every argument of type `ty`.
fn spec(bin: &Path, m: &Marker, nargs: usize, ty: &str) -> String {
    let types: Vec<&str> = (0..nargs)
        .map(|i| if is_str(m.name, i) { "str" } else { ty })
        .collect();
    format!(
        "usdt:{}:{PROVIDER}:{}({})",
        bin.display(),
        m.name,
        types.join(",")
    )
}

/// Asserts that the notes carry the forms their markers are there to
/// test (or the test would not test them).
fn assert_forms(notes: &BTreeMap<String, Vec<String>>, markers: &[&Marker]) {
    for m in markers {
        let args = notes
            .get(m.name)
            .unwrap_or_else(|| panic!("no note {PROVIDER}:{} in {notes:?}", m.name));
        for a in args {
            let loc = a.split_once('@').map_or("", |(_, l)| l);
            assert!(
                (m.form)(loc),
                "{}'s argument {a} is not {}: {args:?}",
                m.name,
                m.form_text
            );
        }
    }
}

/// One run of the workload, traced by asys and bpftrace at once.
struct Traced {
    /// What the program printed: values by marker.
    program: BTreeMap<String, Vec<String>>,
    /// What bpftrace printed, by marker (64-bit values).
    bpftrace: BTreeMap<String, Vec<String>>,
    /// What asys showed, by marker and type asked.
    asys: BTreeMap<(String, &'static str), Vec<String>>,
}

/// Runs the workload under `asys profile` with every marker of `markers`
/// probed as every type of [`TYPES`], bpftrace tracing the same markers.
fn trace(
    s: &Scratch,
    bin: &Path,
    notes: &BTreeMap<String, Vec<String>>,
    markers: &[&Marker],
) -> Traced {
    let bpftrace = Bpftrace::start(&bpftrace_script(bin, markers, notes));
    let report = s.path("r");
    let mut specs = Vec::new();
    let mut cmd = asys();
    cmd.args(["profile", "-t", "none", "-o", report.to_str().unwrap()]);
    for m in markers {
        for ty in TYPES {
            let sp = spec(bin, m, notes[m.name].len(), ty);
            cmd.args(["--probe", &sp]);
            specs.push((m.name.to_string(), ty, sp));
        }
    }
    let o = cmd.arg(bin).finish();
    let out = stdout(&o);
    let pid: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("pid ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out:?}; asys said {}", stderr(&o)));
    let bpftrace = bpftrace.values(markers, pid);
    assert!(o.status.success(), "asys: {}", stderr(&o));
    let program = out
        .lines()
        .filter_map(|l| {
            let (name, values) = l.split_once(' ')?;
            Some((
                name.to_string(),
                values.split(' ').map(String::from).collect(),
            ))
        })
        .collect();
    let rows = stats_json(&report.with_extension("asysrep"), "probe_trace");
    let mut asys = BTreeMap::new();
    for (name, ty, sp) in specs {
        let hits: Vec<&serde_json::Value> = rows
            .iter()
            .filter(|r| r["Pid"].as_u64() == Some(pid) && r["Probe"].as_str() == Some(&sp))
            .collect();
        assert_eq!(hits.len(), 1, "{sp}: one hit, got {hits:?}");
        let args = hits[0]["Arguments"].as_str().unwrap();
        asys.insert((name, ty), args.split(", ").map(String::from).collect());
    }
    Traced {
        program,
        bpftrace,
        asys,
    }
}

/// Compares each argument as asys shows it with the program's value (as
/// the type asked) and bpftrace's, printing the table; returns the
/// mismatches.
fn compare(t: &Traced, notes: &BTreeMap<String, Vec<String>>, markers: &[&Marker]) -> Vec<String> {
    let mut bad = Vec::new();
    let row = |cells: [&str; 4], asys: &str| {
        let [m, note, program, bpftrace] = cells;
        eprintln!("{m:<9} {note:<24} {program:>21} {bpftrace:>21} {asys}");
    };
    row(
        ["marker", "note", "program", "bpftrace"],
        &TYPES.map(|t| format!("asys {t}")).join(" | "),
    );
    for m in markers {
        let values = t
            .program
            .get(m.name)
            .unwrap_or_else(|| panic!("the program printed no {} line: {:?}", m.name, t.program));
        for (i, note) in notes[m.name].iter().enumerate() {
            let value = values[i].as_str();
            let peer = t.bpftrace.get(m.name).map(|v| v[i].as_str());
            let string = is_str(m.name, i);
            // bpftrace's numbers are 64-bit: the note's value extended by
            // its sign, which is the program's.
            let peer_want = if string {
                value.to_string()
            } else {
                expected(value, false, "i64")
            };
            let mut cells = Vec::new();
            for ty in TYPES {
                let got = &t.asys[&(m.name.to_string(), ty)][i];
                let want = expected(value, string, ty);
                if *got == want {
                    cells.push(got.clone());
                } else {
                    cells.push(format!("{got} (want {want})"));
                    bad.push(format!(
                        "{} {note} as {ty}: asys {got}, the program {want}",
                        m.name
                    ));
                }
            }
            if m.bpftrace && peer != Some(peer_want.as_str()) {
                bad.push(format!(
                    "{} {note}: bpftrace {peer:?}, the program {value}",
                    m.name
                ));
            }
            row(
                [m.name, note, value, peer.unwrap_or("(not read)")],
                &cells.join(" | "),
            );
        }
    }
    bad
}

/// The workload traced by asys and bpftrace, `markers` compared.
fn compare_with_bpftrace_and_the_program(tag: &str, markers: &[&Marker]) -> Vec<String> {
    require_root();
    let s = Scratch::new(tag);
    let bin = usdt_args();
    let notes = notes(&bin);
    assert_forms(&notes, markers);
    let traced = trace(&s, &bin, &notes, markers);
    compare(&traced, &notes, markers)
}

#[test]
fn usdt_arguments_take_the_size_and_sign_of_their_notes() {
    let bad = compare_with_bpftrace_and_the_program(
        "usdt-size-sign",
        &SIZE_AND_SIGN.iter().collect::<Vec<_>>(),
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn indexed_usdt_operands_read_base_plus_index_times_scale() {
    let bad =
        compare_with_bpftrace_and_the_program("usdt-indexed", &INDEXED.iter().collect::<Vec<_>>());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
