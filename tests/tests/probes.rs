//! User-defined probes (`--probe`, docs/probes.md) against ground truth: a
//! uprobe call pair on the sim workload's `probe_work` against its own log,
//! USDT markers in Debian's libstdc++ and CPython 3.11 (with the semaphore
//! set while asys runs and cleared after), a tracepoint counted exactly in
//! process-tree and system-wide mode, a kernel function probe, and bad
//! specs.
use std::{
    io::{BufRead, Write},
    path::Path,
    process::Stdio,
};

use asys_tests::*;
use serde_json::Value;

/// Serialises the system-wide test with the others of this file: a
/// system-wide recording sees the other tests' workloads.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn probe_target() -> std::path::PathBuf {
    workload("probe_target")
}

/// The pid the workload printed (`pid P calls ...`).
fn printed_pid(out: &str) -> u64 {
    out.lines()
        .find_map(|l| {
            l.strip_prefix("pid ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no pid in {out:?}"))
}

/// The rows of `table`, as `asys export -t jsonlines` writes them (the
/// export this file checks picks the table up).
fn table_rows(s: &Scratch, report: &Path, table: &str) -> Vec<Value> {
    let base = s.path(&format!(
        "{}-{table}",
        report.file_stem().unwrap().to_str().unwrap()
    ));
    let o = run(&[
        "export",
        "-t",
        "jsonlines",
        "-f",
        "true",
        "--tables",
        table,
        "-o",
        base.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "export: {}", stderr(&o));
    std::fs::read_to_string(base.with_extension("jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["table"] == table)
        .collect()
}

fn probes_of(s: &Scratch, report: &Path) -> Vec<Value> {
    table_rows(s, report, "probes")
}

/// The rows of the probe whose spec is `name`, of process `pid`.
fn rows_named<'a>(rows: &'a [Value], name: &str, strings: &[String], pid: u64) -> Vec<&'a Value> {
    rows.iter()
        .filter(|r| {
            r["pid"].as_u64() == Some(pid)
                && strings
                    .get(r["nameId"].as_u64().unwrap() as usize)
                    .is_some_and(|n| n == name)
        })
        .collect()
}

/// The report's strings by id.
fn strings_of(s: &Scratch, report: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for r in table_rows(s, report, "strings") {
        let id = r["id"].as_u64().unwrap() as usize;
        if out.len() <= id {
            out.resize(id + 1, String::new());
        }
        out[id] = r["value"].as_str().unwrap().to_string();
    }
    out
}

#[test]
fn a_call_probe_pairs_entry_and_return_as_the_workload_logged() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-ucall");
    let log = s.path("truth.jsonl");
    let report = s.path("r");
    let spec = format!("ucall:{}:probe_work(i32,i64,str)", probe_target().display());
    let o = asys()
        .args(["profile", "-t", "none", "-o", report.to_str().unwrap()])
        .args(["--probe", &spec])
        .arg(probe_target())
        .args(["300", "0"])
        .arg(&log)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let pid = printed_pid(&stdout(&o));
    let report = report.with_extension("asysrep");
    let strings = strings_of(&s, &report);
    let all = probes_of(&s, &report);
    let mut rows = rows_named(&all, &spec, &strings, pid);
    rows.sort_by_key(|r| r["start"].as_i64().unwrap());
    let truth = ground_truth(&log);
    assert_eq!(truth.len(), 300);
    assert_eq!(rows.len(), truth.len(), "one row per call");
    let (mut most_over, mut total_over) = (0i64, 0i64);
    for (r, t) in rows.iter().zip(&truth) {
        assert_eq!(r["kind"], "ucall");
        assert_eq!(r["hasReturn"], true);
        assert_eq!(r["returnValue"], t["ret"], "{r} {t}");
        let args = format!(
            "{}, {}, {:?}",
            t["a"].as_i64().unwrap(),
            t["b"].as_i64().unwrap(),
            t["name"].as_str().unwrap()
        );
        assert_eq!(r["args"].as_str().unwrap(), args, "{t}");
        assert_eq!(r["tid"], t["tid"]);
        // The probe's entry comes before the function's first clock read,
        // its return after the last: the logged interval lies inside.
        let (rs, re) = (r["start"].as_i64().unwrap(), r["end"].as_i64().unwrap());
        let (ts, te) = (t["start"].as_i64().unwrap(), t["end"].as_i64().unwrap());
        assert!(
            rs <= ts && te <= re,
            "row [{rs}, {re}] vs logged [{ts}, {te}]"
        );
        let over = (re - rs) - (te - ts);
        most_over = most_over.max(over);
        total_over += over;
    }
    eprintln!(
        "300 calls: counts, arguments, results equal; each logged interval inside its row; \
         row duration over the logged one: mean {} ns, most {most_over} ns (the probes' own cost)",
        total_over / 300
    );
    // The summary counts them.
    let sum = stats_json(&report, "probe_sum");
    let row = sum.iter().find(|r| r["Probe"] == spec.as_str()).unwrap();
    assert_eq!(row["Count"].as_u64(), Some(300), "{row}");
    let trace = stats_json(&report, "probe_trace");
    assert_eq!(trace.len(), 300);
    exports_hold_the_hits(&s, &report, &truth);
}

/// Every export has the hits: SQLite's `PROBES`, Perfetto's slices with
/// their arguments, and the generic formats' `probes` table.
fn exports_hold_the_hits(s: &Scratch, report: &Path, truth: &[Value]) {
    let base = s.path("x");
    let o = run(&[
        "export",
        "-t",
        "sqlite,perfetto,arrow,parquetdir",
        "-o",
        base.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "export: {}", stderr(&o));
    let want_sum: i64 = truth.iter().map(|t| t["ret"].as_i64().unwrap()).sum();
    let rows = sqlite(
        &base.with_extension("sqlite"),
        "SELECT count(*), sum(returnValue), sum(end >= start), \
         count(DISTINCT s.value) FROM PROBES p JOIN StringIds s ON s.id = p.nameId",
    );
    assert_eq!(
        rows,
        vec![vec![
            "300".to_string(),
            want_sum.to_string(),
            "300".into(),
            "1".into()
        ]]
    );
    // `asys stats` on the SQLite file reads PROBES back: the same summary.
    let db = base.with_extension("sqlite");
    let on_db = run(&[
        "stats",
        "-r",
        "probe_sum",
        "-f",
        "csv",
        db.to_str().unwrap(),
    ]);
    let on_report = run(&[
        "stats",
        "-r",
        "probe_sum",
        "-f",
        "csv",
        report.to_str().unwrap(),
    ]);
    assert!(on_db.status.success(), "{}", stderr(&on_db));
    assert_eq!(stdout(&on_db), stdout(&on_report));
    assert!(base.with_extension("arrow").join("probes.arrow").exists());
    assert!(
        std::fs::read_dir(base.with_extension("parquetdir"))
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().contains("probes")),
        "no probes table in the parquetdir"
    );
    // Perfetto: one slice per hit carrying the arguments as a string arg.
    let o = std::process::Command::new(perfetto_python())
        .args([
            "-c",
            "import sys\n\
             from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb\n\
             t = pb.Trace(); t.ParseFromString(open(sys.argv[1], 'rb').read())\n\
             n = 0\n\
             for p in t.packet:\n\
             \x20   e = p.track_event\n\
             \x20   if p.HasField('track_event') and any(a.HasField('string_value') for a in e.debug_annotations):\n\
             \x20       n += 1\n\
             print(n)",
        ])
        .arg(base.with_extension("pftrace"))
        .finish();
    assert!(o.status.success(), "perfetto: {}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "300");
}

/// A C++ program throwing and catching N exceptions (`thrower N`), built
/// with Debian's g++ against its libstdc++.
fn thrower() -> std::path::PathBuf {
    build_workload("thrower.cpp", "thrower", &["-O1"])
}

#[test]
fn libstdcxx_throw_and_catch_markers_count_every_exception() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-usdt-cxx");
    let bin = thrower();
    let report = s.path("r");
    // One spec by the library's name (found where the dynamic linker looks),
    // one by its path.
    let throw = "usdt:libstdc++.so.6:libstdcxx:throw(ptr,ptr)";
    let catch = "usdt:/usr/lib/x86_64-linux-gnu/libstdc++.so.6:libstdcxx:catch";
    let o = asys()
        .args(["profile", "-t", "none", "-o", report.to_str().unwrap()])
        .args(["--probe", throw, "--probe", catch])
        .arg(&bin)
        .arg("137")
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("thrown 137 caught 137"), "{out}");
    let pid = printed_pid(&out);
    let report = report.with_extension("asysrep");
    let strings = strings_of(&s, &report);
    let rows = probes_of(&s, &report);
    let thrown = rows_named(&rows, throw, &strings, pid);
    let caught = rows_named(&rows, catch, &strings, pid);
    assert_eq!(thrown.len(), 137);
    assert_eq!(caught.len(), 137);
    // throw's arguments: the exception object and its type_info, both
    // pointers, the type_info the same every time.
    let types: std::collections::BTreeSet<String> = thrown
        .iter()
        .map(|r| {
            r["args"]
                .as_str()
                .unwrap()
                .split(", ")
                .nth(1)
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(types.len(), 1, "{types:?}");
    assert!(types.iter().all(|t| t.starts_with("0x")));
    eprintln!("137 exceptions: 137 throw hits, 137 catch hits");
}

/// The load address of the semaphore of CPython's `python:NAME` marker in
/// process `pid`, from the ELF's notes as `readelf` prints them.
fn python_semaphore(pid: u32, name: &str) -> u64 {
    let o = std::process::Command::new("readelf")
        .args(["-n", "/usr/bin/python3.11"])
        .finish();
    let text = stdout(&o);
    let mut lines = text.lines();
    let mut vaddr = None;
    while let Some(l) = lines.next() {
        if l.trim() == format!("Name: {name}") {
            let loc = lines.next().unwrap();
            let sema = loc.split("Semaphore: ").nth(1).unwrap().trim();
            vaddr = Some(u64::from_str_radix(sema.trim_start_matches("0x"), 16).unwrap());
            break;
        }
    }
    let vaddr = vaddr.expect("python3.11 has the marker");
    // Debian's python3.11 is not position-independent (ELF type EXEC): its
    // addresses are its load addresses. A PIE would add where its first
    // segment is mapped.
    let elf = stdout(
        &std::process::Command::new("readelf")
            .args(["-h", "/usr/bin/python3.11"])
            .finish(),
    );
    if elf.contains("EXEC (Executable file)") {
        return vaddr;
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let base = maps
        .lines()
        .find(|l| {
            l.ends_with("/usr/bin/python3.11") && l.split_whitespace().nth(2) == Some("00000000")
        })
        .map(|l| u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap())
        .expect("python3.11 mapped");
    base + vaddr
}

fn read_u16(pid: u32, addr: u64) -> u16 {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8; 2];
    f.read_exact_at(&mut b, addr).unwrap();
    u16::from_le_bytes(b)
}

#[test]
fn cpython_function_markers_set_their_semaphores_only_while_asys_runs() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-usdt-python");
    let script = workload_source("cpython_calls.py");
    let mut py = std::process::Command::new("/usr/bin/python3.11")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = py.id();
    let mut py_in = py.stdin.take().unwrap();
    let mut py_out = std::io::BufReader::new(py.stdout.take().unwrap());
    let mut line = String::new();
    py_out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let entry_sem = python_semaphore(pid, "function__entry");
    let return_sem = python_semaphore(pid, "function__return");
    assert_eq!(
        (read_u16(pid, entry_sem), read_u16(pid, return_sem)),
        (0, 0),
        "no tracer yet"
    );
    let report = s.path("r");
    let entry = "usdt:/usr/bin/python3.11:python:function__entry(str,str,i32)";
    let ret = "usdt:/usr/bin/python3.11:python:function__return(str,str,i32)";
    let (g, _err, first) = start_tracing(
        asys()
            .args(["attach", "-t", "none", "-o", report.to_str().unwrap()])
            .args(["--probe", entry, "--probe", ret])
            .arg(pid.to_string()),
    );
    assert!(first.starts_with("asys: tracing"), "{first}");
    let during = (read_u16(pid, entry_sem), read_u16(pid, return_sem));
    assert!(
        during.0 > 0 && during.1 > 0,
        "semaphores while asys runs: {during:?}"
    );
    writeln!(py_in, "250").unwrap();
    line.clear();
    py_out.read_line(&mut line).unwrap();
    assert!(line.starts_with("done"), "{line}");
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    assert!(g.wait().success());
    // The kernel removes a perf-event uprobe after a grace period, and
    // only then lowers the semaphore: give it a few.
    let ended = std::time::Instant::now();
    let mut after = (read_u16(pid, entry_sem), read_u16(pid, return_sem));
    while after != (0, 0) && ended.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
        after = (read_u16(pid, entry_sem), read_u16(pid, return_sem));
    }
    assert_eq!(after, (0, 0), "semaphores 10 s after asys ended");
    let cleared_ms = ended.elapsed().as_millis();
    writeln!(py_in).unwrap();
    assert!(py.wait().unwrap().success());
    let report = report.with_extension("asysrep");
    let strings = strings_of(&s, &report);
    let rows = probes_of(&s, &report);
    let target = |name: &str| {
        rows_named(&rows, name, &strings, pid.into())
            .into_iter()
            .filter(|r| {
                let a = r["args"].as_str().unwrap();
                a.starts_with(&format!("{:?}", script.to_str().unwrap()))
                    && a.contains("\"target_fn\"")
            })
            .count()
    };
    assert_eq!(target(entry), 250);
    assert_eq!(target(ret), 250);
    eprintln!(
        "250 calls of target_fn: 250 function__entry, 250 function__return; semaphores \
         0 before, {during:?} during, 0 {cleared_ms} ms after asys ended"
    );
}

/// Records `probe_target 0 SYSCALLS` (SYSCALLS getppid calls) with `specs`,
/// in `mode` (`process-tree` or `system-wide`); returns the workload's pid,
/// the rows and the report's strings.
fn getppid_run(
    s: &Scratch,
    specs: &[&str],
    mode: &str,
    syscalls: u32,
) -> (u64, Vec<Value>, Vec<String>) {
    let report = s.path(&format!("r-{mode}"));
    let mut cmd = asys();
    cmd.args(["profile", "-t", "none", "-o", report.to_str().unwrap()]);
    if mode == "system-wide" {
        cmd.args(["-s", "system-wide"]);
    }
    for spec in specs {
        cmd.args(["--probe", spec]);
    }
    let o = cmd
        .arg(probe_target())
        .arg("0")
        .arg(syscalls.to_string())
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let pid = printed_pid(&stdout(&o));
    let report = report.with_extension("asysrep");
    (pid, probes_of(s, &report), strings_of(s, &report))
}

#[test]
fn a_tracepoint_counts_a_system_call_exactly_in_both_scopes() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-tracepoint");
    let spec = "tracepoint:syscalls:sys_enter_getppid";
    for (mode, n) in [("process-tree", 1234), ("system-wide", 777)] {
        let (pid, rows, strings) = getppid_run(&s, &[spec], mode, n);
        let mine = rows_named(&rows, spec, &strings, pid);
        assert_eq!(mine.len(), n as usize, "{mode}");
        if mode == "process-tree" {
            // Nothing of any other process.
            assert_eq!(rows.len(), n as usize, "{mode}: only the workload's hits");
        }
        eprintln!(
            "{mode}: {n} getppid calls, {} hits of the workload ({} in all)",
            mine.len(),
            rows.len()
        );
    }
}

#[test]
fn tracepoint_fields_are_read_by_name() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-tp-fields");
    // sched_process_exec's filename is a __data_loc string, pid an int.
    let spec = "tracepoint:sched:sched_process_exec(filename,pid)";
    let (pid, rows, strings) = getppid_run(&s, &[spec], "process-tree", 1);
    let mine = rows_named(&rows, spec, &strings, pid);
    assert_eq!(mine.len(), 1, "{rows:?}");
    assert_eq!(
        mine[0]["args"].as_str().unwrap(),
        format!("{:?}, {pid}", probe_target().to_str().unwrap())
    );
}

/// The kernel function the kernel-probe test probes: `getppid` reaches it
/// once per call, and the workload makes a known number of them.
const KERNEL_FUNCTION: &str = "__do_sys_getppid";

/// On a kernel with kprobes (Debian's 6.1 and 6.12, which `cargo xtask
/// vm-test` boots), a kprobe, a kretprobe and a kcall of one kernel function
/// each give one row per call, in both scopes. On a kernel without them
/// (this machine kind's 6.18 is built without `CONFIG_KPROBES` and refuses
/// fentry/fexit programs) the spec is refused in one line naming the
/// feature; where the environment says kprobes must be there
/// (`ASYS_TEST_REQUIRE_KPROBES=1`, set by the VM pass) their absence is a
/// failure, never a pass on the refusal.
#[test]
fn kernel_function_probes_count_every_call_or_are_refused_naming_the_feature() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-kernel");
    let kprobe = format!("kprobe:{KERNEL_FUNCTION}");
    let kretprobe = format!("kretprobe:{KERNEL_FUNCTION}");
    let kcall = format!("kcall:{KERNEL_FUNCTION}");
    if !kernel_has_kprobes() {
        assert!(
            std::env::var_os("ASYS_TEST_REQUIRE_KPROBES").is_none(),
            "ASYS_TEST_REQUIRE_KPROBES is set but this kernel ({}) has no kprobes \
             (no register_kprobe in /proc/kallsyms): the kernel function probes \
             cannot be counted",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
        );
        let o = asys()
            .args(["profile", "-t", "none", "-o", s.path("r").to_str().unwrap()])
            .args(["--probe", &kprobe])
            .arg(probe_target())
            .args(["0", "321"])
            .finish();
        assert!(
            !o.status.success(),
            "this kernel has no kprobes but accepted {kprobe} (fentry/fexit programs \
             loaded): count it as on a kernel with kprobes"
        );
        let err = stderr(&o);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].contains(&kprobe)
                && lines[0].contains("the kernel lacks kernel function probes"),
            "{err}"
        );
        eprintln!("this kernel has no kprobes: {kprobe} refused in one line, as it must be");
        return;
    }
    for (mode, n) in [("process-tree", 321), ("system-wide", 123)] {
        let specs = [kprobe.as_str(), kretprobe.as_str(), kcall.as_str()];
        let (pid, rows, strings) = getppid_run(&s, &specs, mode, n);
        for spec in specs {
            let hits = rows_named(&rows, spec, &strings, pid).len();
            eprintln!("{mode}: {n} getppid calls, {hits} hits of {spec}");
            assert_eq!(hits, n as usize, "{mode}: {spec}");
        }
    }
}

#[test]
fn bad_specs_give_one_line_errors_naming_the_cause() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-bad");
    let target = probe_target();
    let t = target.to_str().unwrap();
    let cases: Vec<(String, &str)> = vec![
        (
            "uprobe:/no/such/lib.so:f".into(),
            "no such library or program /no/such/lib.so",
        ),
        (
            format!("ucall:{t}:no_such_function(i32)"),
            "no such function no_such_function in",
        ),
        (
            "usdt:libstdc++.so.6:libstdcxx:no_such_marker".into(),
            "no SDT note libstdcxx:no_such_marker in",
        ),
        (
            "tracepoint:syscalls:sys_enter_no_such_call".into(),
            "no such tracepoint syscalls:sys_enter_no_such_call",
        ),
        (
            "tracepoint:syscalls:sys_enter_getppid(no_such_field)".into(),
            "has no field no_such_field",
        ),
        (
            "kcall:no_such_kernel_function_xyz".into(),
            "no such kernel function no_such_kernel_function_xyz",
        ),
        (
            "usdt:libstdc++.so.6:libstdcxx:throw(ptr,ptr,ptr)".into(),
            "3 arguments asked, the probe has 2",
        ),
    ];
    for (spec, cause) in &cases {
        let o = asys()
            .args(["profile", "-t", "none", "-o", s.path("r").to_str().unwrap()])
            .args(["--probe", spec])
            .arg(&target)
            .args(["1", "0"])
            .finish();
        assert!(!o.status.success(), "{spec} was accepted");
        let err = stderr(&o);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{spec}: {err}");
        assert!(
            lines[0].contains(cause) && lines[0].contains(spec.as_str()),
            "{spec}: {err}"
        );
    }
    // Syntax errors are refused while the command line is read.
    for (spec, cause) in [
        ("xprobe:a:b", "unknown probe kind \"xprobe\""),
        ("uprobe:nofunction", "expected BIN:FUNC"),
        ("uprobe:a:f(i32,f64)", "argument type \"f64\" unknown"),
    ] {
        let o = asys()
            .args(["profile", "-t", "none", "--probe", spec])
            .arg(&target)
            .finish();
        assert!(!o.status.success());
        let err = stderr(&o);
        assert!(err.lines().next().unwrap().contains(cause), "{spec}: {err}");
    }
}

#[test]
fn launch_and_start_record_probe_hits_only_inside_the_collection() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-session");
    let script = workload_source("getppid_lines.py");
    let session = format!("probes-{}", std::process::id());
    let spec = "tracepoint:syscalls:sys_enter_getppid";
    let err = s.path("launch.err");
    let mut c = asys()
        .args([
            "launch",
            "-t",
            "none",
            "-s",
            "none",
            "--session-new",
            &session,
        ])
        .args(["--probe", spec])
        .arg("/usr/bin/python3.11")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(c.stdout.take().unwrap());
    assert!(
        c.wait().unwrap().success(),
        "{}",
        std::fs::read_to_string(&err).unwrap()
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid: u64 = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
    let mut burst = |n: u32| {
        writeln!(stdin, "{n}").unwrap();
        let mut done = String::new();
        stdout.read_line(&mut done).unwrap();
        assert_eq!(done.trim(), "done");
    };
    burst(5);
    let report = s.path("r");
    let o = run(&[
        "start",
        "--session",
        &session,
        "-o",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    burst(123);
    let o = run(&["stop", "--session", &session]);
    assert!(o.status.success(), "{}", stderr(&o));
    burst(7);
    let _ = run(&["shutdown", "--kill", "sigkill", "--session", &session]);
    let report = report.with_extension("asysrep");
    let strings = strings_of(&s, &report);
    let rows = probes_of(&s, &report);
    assert_eq!(rows_named(&rows, spec, &strings, pid).len(), 123);
    eprintln!("launch/start/stop: 5 calls before, 123 inside, 7 after: 123 hits");
}

#[test]
fn entry_return_and_offset_probes_each_count_every_call() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-plain");
    let t = probe_target();
    let t = t.to_str().unwrap();
    let log = s.path("truth.jsonl");
    let entry = format!("uprobe:{t}:probe_work(i32,_,str)");
    let ret = format!("uretprobe:{t}:probe_work");
    // An offset must be an instruction's start (a breakpoint inside an
    // instruction would corrupt it): the second instruction's, from objdump.
    let dis = stdout(
        &std::process::Command::new("objdump")
            .args(["-d", "--disassemble=probe_work", t])
            .finish(),
    );
    let addrs: Vec<u64> = dis
        .lines()
        .filter_map(|l| {
            let (a, rest) = l.trim().split_once(':')?;
            (!rest.is_empty() && rest.starts_with('\t')).then(|| u64::from_str_radix(a, 16).ok())?
        })
        .take(2)
        .collect();
    assert_eq!(addrs.len(), 2, "{dis}");
    let inner = format!("uprobe:{t}:probe_work+{}", addrs[1] - addrs[0]);
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-t", "none", "-o", report.to_str().unwrap()])
        .args(["--probe", &entry, "--probe", &ret, "--probe", &inner])
        .arg(t)
        .args(["40", "0"])
        .arg(&log)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let pid = printed_pid(&stdout(&o));
    let report = report.with_extension("asysrep");
    let strings = strings_of(&s, &report);
    let rows = probes_of(&s, &report);
    let truth = ground_truth(&log);
    let by_start = |spec: &str| {
        let mut v = rows_named(&rows, spec, &strings, pid);
        v.sort_by_key(|r| r["start"].as_i64().unwrap());
        v
    };
    let (entries, returns, inners) = (by_start(&entry), by_start(&ret), by_start(&inner));
    assert_eq!((entries.len(), returns.len(), inners.len()), (40, 40, 40));
    let mut unreadable = 0;
    for ((e, r), t) in entries.iter().zip(&returns).zip(&truth) {
        // A plain entry probe reads a string when it fires: one in a page
        // the process has not touched yet (the first use of a literal)
        // cannot be read there (a probe may not fault), and is shown as `?`
        // and counted. (A call probe reads it again at the return.)
        let args = e["args"].as_str().unwrap();
        if args == format!("{}, _, ?", t["a"]) {
            unreadable += 1;
        } else {
            assert_eq!(
                args,
                format!("{}, _, {:?}", t["a"], t["name"].as_str().unwrap())
            );
        }
        assert_eq!(e["hasReturn"], false);
        assert_eq!(r["returnValue"], t["ret"]);
        assert_eq!(r["args"], "");
        // Hits are instants: entry before the function's first clock
        // read, return after its last.
        assert_eq!(e["start"], e["end"]);
        assert!(e["start"].as_i64() <= t["start"].as_i64());
        assert!(r["start"].as_i64() >= t["end"].as_i64());
    }
    assert!(
        unreadable <= 3,
        "{unreadable} names unreadable (one per literal at most)"
    );
    let meta = metadata(&report);
    assert_eq!(
        meta["drops"]["probe_arg_unreadable"].as_u64(),
        Some(unreadable)
    );
    eprintln!(
        "40 calls: 40 entries (args equal; {unreadable} first-use strings shown as ?, counted), 40 returns (results equal), 40 hits at +{}",
        addrs[1] - addrs[0]
    );
}

#[test]
fn probe_backtrace_gives_each_hit_the_stack_above_it() {
    require_root();
    let _alone = lock();
    let s = Scratch::new("probe-stacks");
    let t = probe_target();
    let t = t.to_str().unwrap();
    let entry = format!("uprobe:{t}:probe_work");
    let call = format!("ucall:{t}:probe_work");
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-t", "none", "--probe-backtrace", "true"])
        .args(["-o", report.to_str().unwrap()])
        .args(["--probe", &entry, "--probe", &call])
        .arg(t)
        .args(["6", "0"])
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let trace = stats_json(&report.with_extension("asysrep"), "probe_trace");
    assert_eq!(trace.len(), 12);
    // At the entry and at the return alike: the caller, main, first.
    for r in &trace {
        let stack = r["Stack"].as_str().unwrap();
        assert!(stack.starts_with("main <- "), "{r}");
    }
    // A marker in the middle of a library function: that function, then
    // the program's main.
    let bin = thrower();
    let throw = "usdt:libstdc++.so.6:libstdcxx:throw";
    let report = s.path("cxx");
    let o = asys()
        .args(["profile", "-t", "none", "--probe-backtrace", "true"])
        .args(["-o", report.to_str().unwrap(), "--probe", throw])
        .arg(&bin)
        .arg("4")
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let trace = stats_json(&report.with_extension("asysrep"), "probe_trace");
    assert_eq!(trace.len(), 4);
    for r in &trace {
        let stack = r["Stack"].as_str().unwrap();
        assert!(
            stack.starts_with("__cxa_throw <- ") && stack.contains("main"),
            "{r}"
        );
    }
    eprintln!("stacks: {}", trace[0]["Stack"]);
}
