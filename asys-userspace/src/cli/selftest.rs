//! `asys selftest`: whether asys works on this host, end to end. asys traces
//! a small workload of its own (this binary again, as `__selftest-child`)
//! once per capability, each through a real `asys profile` of its own, and
//! compares what the report holds with what the workload did:
//!
//! | capability | the workload | counted in the report |
//! |---|---|---|
//! | the loader hook and uprobes | `dlopen`s the simulated runtime, N `hggcMemset` | `hggc_api_sum`'s calls |
//! | the injection library | (the same run) | `[HGGC memset]` records joined to those calls |
//! | a USDT marker | fires `asys:selftest` N times | `probe_sum` |
//! | sched and wake-ups | blocks N times on a pipe another thread writes | wake-ups of the reader by the writer |
//! | CPU sampling with DWARF | spins 300 ms of CPU in `selftest_spin`, called by `selftest_burn` | samples in the one, unwound to the other |
//! | a tracepoint probe | N `getppid` | `probe_sum` of `sys_enter_getppid` |
//! | a kprobe probe | (the same) | `probe_sum` of `kprobe:__do_sys_getppid` |
//!
//! First, the kernel's BTF: asys reads kernel layouts without it, but
//! kernel function probes need it, and a kernel that has it but a file
//! system that hides it is a broken host.
//!
//! A capability the kernel lacks (asys refuses it with "the kernel lacks
//! ...") is said to be absent, and is no failure; any other shortfall is,
//! and makes the exit status 1. The reports go to a private temporary
//! folder (mkdtemp, 0700), removed at the end: selftest writes nothing else.
use std::{
    collections::BTreeSet,
    ffi::CString,
    io::{Read as _, Write as _},
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use asys_report::{
    report::{container::Container, read::sched},
    stats,
};
use clap::{Args, ValueEnum};
use serde_json::Value;

#[derive(Args, Debug)]
pub struct SelftestArgs {}

#[derive(Args, Debug)]
pub struct ChildArgs {
    #[arg(value_enum)]
    pub mode: ChildMode,
    pub count: u32,
    /// The simulated runtime's library (mode `runtime`).
    pub library: Option<PathBuf>,
}

/// What the workload does.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildMode {
    /// `dlopen`s the runtime, allocates, sets memory COUNT times.
    Runtime,
    /// Fires the `asys:selftest` marker COUNT times.
    Marker,
    /// Calls `getppid` COUNT times.
    Syscalls,
    /// Reads COUNT bytes, one a millisecond, that another thread writes.
    Waits,
    /// Spins for COUNT milliseconds of CPU time in `selftest_spin`.
    Burn,
}

/// Calls, hits and wake-ups each capability's workload makes.
const CALLS: u32 = 200;
const WAITS: u32 = 100;
const BURN_MS: u32 = 300;
/// How long one traced run may take before it is given up.
const RUN_LIMIT: Duration = Duration::from_secs(60);
/// The kernel function the kprobe probe counts (the test suite's too).
const KERNEL_FUNCTION: &str = "__do_sys_getppid";

enum Verdict {
    Ok,
    Failed(String),
    /// The kernel lacks what the capability needs.
    Absent(String),
}

struct Line {
    name: &'static str,
    expected: String,
    got: String,
    verdict: Verdict,
}

impl Line {
    fn print(&self) {
        let (word, why) = match &self.verdict {
            Verdict::Ok => ("ok", String::new()),
            Verdict::Failed(w) => ("FAILED", format!(": {w}")),
            Verdict::Absent(w) => ("absent", format!(": {w}")),
        };
        println!(
            "{:<29} {:<7} expected {}, got {}{why}",
            self.name, word, self.expected, self.got
        );
    }
}

/// A private folder, removed with everything in it when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<Self> {
        let template = std::env::temp_dir().join("asys-selftest-XXXXXX");
        let mut bytes = CString::new(template.as_os_str().as_bytes())
            .context("temporary folder name")?
            .into_bytes_with_nul();
        // SAFETY: a NUL-terminated, writable template ending in XXXXXX,
        // which mkdtemp fills in place.
        let p = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("creating {}", template.display()));
        }
        bytes.pop();
        Ok(Self(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes))))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn run(_args: SelftestArgs) -> anyhow::Result<u8> {
    let began = Instant::now();
    let exe = std::env::current_exe().context("asys's own binary")?;
    let dir = TempDir::new()?;
    let t = Tracer {
        exe: &exe,
        dir: &dir.0,
    };
    let mut lines = vec![btf()];
    lines.extend(runtime_and_injection(&t));
    lines.push(marker(&t));
    lines.push(waits(&t));
    lines.push(sampling(&t));
    lines.extend(kernel_probes(&t));
    for l in &lines {
        l.print();
    }
    let failed = lines
        .iter()
        .filter(|l| matches!(l.verdict, Verdict::Failed(_)))
        .count();
    let absent = lines
        .iter()
        .filter(|l| matches!(l.verdict, Verdict::Absent(_)))
        .count();
    println!(
        "asys selftest: {} of {} capabilities ok, {failed} failed, {absent} absent from this kernel ({:.1} s)",
        lines.len() - failed - absent,
        lines.len(),
        began.elapsed().as_secs_f64()
    );
    Ok(u8::from(failed > 0))
}

/// Runs `asys profile` of the workload into the temporary folder.
struct Tracer<'a> {
    exe: &'a Path,
    dir: &'a Path,
}

/// Why a traced run gave no report: the kernel lacks a feature, or
/// something else went wrong; one line either way.
enum RunError {
    Absent(String),
    Failed(String),
}

impl Tracer<'_> {
    fn profile(
        &self,
        name: &str,
        asys_args: &[&str],
        mode: ChildMode,
        count: u32,
        library: Option<&Path>,
    ) -> Result<Container, RunError> {
        let out = self.dir.join(name);
        let mut c = Command::new(self.exe);
        c.arg("profile")
            .args(asys_args)
            .arg("-o")
            .arg(&out)
            .arg(self.exe)
            .arg("__selftest-child")
            .arg(
                mode.to_possible_value()
                    .expect("no skipped modes")
                    .get_name(),
            )
            .arg(count.to_string());
        if let Some(l) = library {
            c.arg(l);
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| RunError::Failed(format!("cannot run asys profile: {e}")))?;
        let mut stderr = child.stderr.take().expect("piped");
        // The pipe is drained on its own thread, so a chatty run cannot
        // block on it while it is waited for.
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let began = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if began.elapsed() > RUN_LIMIT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(RunError::Failed(format!(
                        "asys profile did not finish in {} s",
                        RUN_LIMIT.as_secs()
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(RunError::Failed(format!("waiting for asys profile: {e}"))),
            }
        };
        let err = reader.join().unwrap_or_default();
        if !status.success() {
            // asys's own error is its last line.
            let line = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
                .trim()
                .trim_start_matches("asys: ")
                .trim_start_matches("error: ")
                .to_string();
            return Err(if line.contains("the kernel lacks") {
                RunError::Absent(line)
            } else {
                RunError::Failed(format!("asys profile exited with {status}: {line}"))
            });
        }
        Container::open(&out.with_extension("asysrep"))
            .map_err(|e| RunError::Failed(format!("reading the report: {e}")))
    }
}

/// A stats report's rows, as `asys stats --format json` gives them.
fn rows(report: &Container, name: &str) -> Result<Vec<Value>, String> {
    let f = stats::find(name).ok_or_else(|| format!("no stats report {name}"))?;
    let table = f(report).map_err(|e| format!("{name}: {e}"))?;
    let mut out = Vec::new();
    stats::format::write(&mut out, &table, stats::format::Format::Json)
        .map_err(|e| format!("{name}: {e}"))?;
    let v: Value = serde_json::from_slice(&out).map_err(|e| format!("{name}: {e}"))?;
    Ok(v.as_array().cloned().unwrap_or_default())
}

fn number(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_f64().map(|f| f as u64))
        .unwrap_or(0)
}

/// The hits of the probe `spec` in a report.
fn probe_hits(report: &Container, spec: &str) -> Result<u64, String> {
    Ok(rows(report, "probe_sum")?
        .iter()
        .filter(|r| r["Probe"] == spec)
        .map(|r| number(&r["Count"]))
        .sum())
}

/// The line of an exact count: ok when `got` is `want`.
fn exact(name: &'static str, what: &str, want: u64, got: Result<u64, String>) -> Line {
    match got {
        Ok(n) => Line {
            name,
            expected: format!("{want} {what}"),
            got: n.to_string(),
            verdict: if n == want {
                Verdict::Ok
            } else {
                Verdict::Failed(format!("{} {what} missing", want as i64 - n as i64))
            },
        },
        Err(e) => failed(name, &format!("{want} {what}"), e),
    }
}

fn failed(name: &'static str, expected: &str, why: String) -> Line {
    Line {
        name,
        expected: expected.to_string(),
        got: "none".into(),
        verdict: Verdict::Failed(why),
    }
}

fn not_run(name: &'static str, expected: &str, e: RunError) -> Line {
    match e {
        RunError::Absent(why) => Line {
            name,
            expected: expected.to_string(),
            got: "none".into(),
            verdict: Verdict::Absent(why),
        },
        RunError::Failed(why) => failed(name, expected, why),
    }
}

/// The kernel's BTF: absent from a kernel built without it (no
/// /sys/kernel/btf), failed where the kernel has it (the folder, with its
/// modules' files) but its vmlinux cannot be read: a container or a mount
/// that hides it from asys, which then cannot probe kernel functions.
fn btf() -> Line {
    const NAME: &str = "kernel BTF";
    const VMLINUX: &str = "/sys/kernel/btf/vmlinux";
    let expected = format!("{VMLINUX} readable");
    match std::fs::File::open(VMLINUX).and_then(|f| f.metadata()) {
        Ok(m) => Line {
            name: NAME,
            expected,
            got: format!("{} bytes", m.len()),
            verdict: Verdict::Ok,
        },
        Err(e) if !Path::new("/sys/kernel/btf").is_dir() => Line {
            name: NAME,
            expected,
            got: "none".into(),
            verdict: Verdict::Absent(format!("the kernel lacks BTF (no /sys/kernel/btf): {e}")),
        },
        Err(e) => failed(
            NAME,
            &expected,
            format!(
                "{VMLINUX}: {e}, though the kernel has BTF (/sys/kernel/btf exists): \
                 is /sys mounted whole?"
            ),
        ),
    }
}

fn runtime_and_injection(t: &Tracer<'_>) -> Vec<Line> {
    const HOOK: &str = "loader hook and uprobes";
    const INJECT: &str = "injection library";
    let calls = format!("{CALLS} hggcMemset calls");
    let records = format!("{CALLS} memset records");
    let Some(sim) = crate::install_layout::simulated_runtime() else {
        let why =
            "no simulated runtime (lib/asys/sim/libhggcrt.so) installed with asys".to_string();
        return vec![
            failed(HOOK, &calls, why.clone()),
            failed(INJECT, &records, why),
        ];
    };
    let mut lines = Vec::new();
    let report = match t.profile(
        "runtime",
        &["-t", "hggc", "-s", "none", "--cpuctxsw", "none"],
        ChildMode::Runtime,
        CALLS,
        Some(&sim.join("libhggcrt.so")),
    ) {
        Ok(r) => r,
        Err(e) => {
            let why = match e {
                RunError::Absent(w) | RunError::Failed(w) => w,
            };
            return vec![
                failed(HOOK, &calls, why.clone()),
                failed(INJECT, &records, why),
            ];
        }
    };
    lines.push(exact(
        HOOK,
        "hggcMemset calls",
        CALLS.into(),
        rows(&report, "hggc_api_sum").map(|rs| {
            rs.iter()
                .filter(|r| r["Name"] == "hggcMemset")
                .map(|r| number(&r["Num Calls"]))
                .sum()
        }),
    ));
    // Each memset's record, joined to its call by the correlation id.
    let joined = rows(&report, "hggc_api_trace").and_then(|calls| {
        let ids: BTreeSet<u64> = calls
            .iter()
            .filter(|r| r["Name"] == "hggcMemset")
            .map(|r| number(&r["CorrId"]))
            .collect();
        Ok(rows(&report, "hggc_ppu_trace")?
            .iter()
            .filter(|r| r["Name"] == "[HGGC memset]" && ids.contains(&number(&r["CorrId"])))
            .count() as u64)
    });
    let mut line = exact(
        INJECT,
        "memset records joined to their calls",
        CALLS.into(),
        joined,
    );
    if crate::install_layout::injection_library().is_none() {
        line.verdict = Verdict::Failed(format!(
            "no injection library: {}",
            crate::install_layout::injection_library_places()
        ));
    }
    lines.push(line);
    lines
}

fn marker(t: &Tracer<'_>) -> Line {
    let spec = format!("usdt:{}:asys:selftest(i64)", t.exe.display());
    probe_line(t, "USDT marker", "marker", &spec, ChildMode::Marker)
}

/// A run of the workload in `mode` with the probe `spec` alone: its hits
/// must be the workload's CALLS.
fn probe_line(t: &Tracer<'_>, name: &'static str, run: &str, spec: &str, mode: ChildMode) -> Line {
    let only_the_probe = [
        "-t",
        "none",
        "-s",
        "none",
        "--cpuctxsw",
        "none",
        "--probe",
        spec,
    ];
    match t.profile(run, &only_the_probe, mode, CALLS, None) {
        Ok(r) => exact(name, "hits", CALLS.into(), probe_hits(&r, spec)),
        Err(e) => not_run(name, &format!("{CALLS} hits"), e),
    }
}

fn waits(t: &Tracer<'_>) -> Line {
    const NAME: &str = "sched and wake-ups";
    let expected = format!("{WAITS} wake-ups of the reader by the writer");
    let report = match t.profile(
        "waits",
        &["-t", "none", "-s", "none", "--cpuctxsw", "process-tree"],
        ChildMode::Waits,
        WAITS,
        None,
    ) {
        Ok(r) => r,
        Err(e) => return not_run(NAME, &expected, e),
    };
    let counted = (|| -> Result<(u64, u64), String> {
        let pid = *report
            .metadata
            .root_pids
            .first()
            .ok_or("the report names no process")?;
        let wakeups = sched::wakeups(&report).map_err(|e| e.to_string())?;
        // The reader is the main thread (tid = pid); the writer is the
        // process's other thread.
        let by_writer = wakeups
            .iter()
            .filter(|w| w.wakee_tid == pid && w.waker_pid == pid && w.waker_tid != pid)
            .count() as u64;
        let switches = sched::switches(&report).map_err(|e| e.to_string())?;
        let blocked = switches
            .iter()
            .filter(|s| s.prev_tid == pid && s.prev_state & 0xff != 0)
            .count() as u64;
        Ok((by_writer, blocked))
    })();
    match counted {
        // A reader late to read finds two bytes and does not block for
        // the second: nine in ten is the bar.
        Ok((woken, blocked)) => Line {
            name: NAME,
            expected,
            got: format!("{woken} (the reader left the CPU {blocked} times)"),
            verdict: if woken * 10 >= u64::from(WAITS) * 9 && blocked >= woken {
                Verdict::Ok
            } else {
                Verdict::Failed("wake-ups or switches missing".into())
            },
        },
        Err(e) => failed(NAME, &expected, e),
    }
}

fn sampling(t: &Tracer<'_>) -> Line {
    const NAME: &str = "CPU sampling with DWARF";
    // The default period: a sample a millisecond of CPU time, and the
    // spin runs until it has had BURN_MS of it.
    let expected = format!("about {BURN_MS} samples in selftest_spin, unwound to selftest_burn");
    let report = match t.profile(
        "sampling",
        &[
            "-t",
            "none",
            "-s",
            "process-tree",
            "-b",
            "dwarf",
            "--cpuctxsw",
            "none",
        ],
        ChildMode::Burn,
        BURN_MS,
        None,
    ) {
        Ok(r) => r,
        Err(e) => return not_run(NAME, &expected, e),
    };
    match rows(&report, "cpu_sample_sum") {
        Ok(rs) => {
            let of = |f: &str, col: &str| -> u64 {
                rs.iter()
                    .filter(|r| r["Function"].as_str().is_some_and(|n| n.contains(f)))
                    .map(|r| number(&r[col]))
                    .max()
                    .unwrap_or(0)
            };
            // Samples in the spin and what it calls (a build at a low
            // optimization level keeps some of std's helpers apart).
            let spin = of("selftest_spin", "Total Samples");
            let caller = of("selftest_burn", "Total Samples");
            // Timer ticks come late on a loaded machine: half the samples
            // is enough to say sampling works. A virtual machine loses
            // more of them (an emulated one gave 136 of 300), so there a
            // quarter is the bar. Unwinding must reach the caller from
            // nearly all of them (frame pointers are not kept in a release
            // build: that is DWARF's work).
            let virtual_machine = runs_virtualized();
            let divisor = if virtual_machine { 4 } else { 2 };
            let ok = spin * divisor >= u64::from(BURN_MS) && caller * 10 >= spin * 9;
            let bar = if virtual_machine {
                " (a virtual machine: a quarter of them is the bar)"
            } else {
                ""
            };
            Line {
                name: NAME,
                expected,
                got: format!("{spin}, {caller} unwound to the caller{bar}"),
                verdict: if ok {
                    Verdict::Ok
                } else {
                    Verdict::Failed("too few samples, or stacks that stop short".into())
                },
            }
        }
        Err(e) => failed(NAME, &expected, e),
    }
}

/// Whether this kernel runs under a hypervisor (the `hypervisor` CPU flag
/// it sets for KVM, Xen, Hyper-V and emulation alike).
fn runs_virtualized() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
        c.lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

fn kernel_probes(t: &Tracer<'_>) -> Vec<Line> {
    vec![
        probe_line(
            t,
            "tracepoint probe",
            "tracepoint",
            "tracepoint:syscalls:sys_enter_getppid",
            ChildMode::Syscalls,
        ),
        probe_line(
            t,
            "kprobe probe",
            "kprobe",
            &format!("kprobe:{KERNEL_FUNCTION}"),
            ChildMode::Syscalls,
        ),
    ]
}

/// The workload (`asys __selftest-child MODE COUNT [LIBRARY]`).
pub fn child(a: ChildArgs) -> anyhow::Result<u8> {
    match a.mode {
        ChildMode::Runtime => {
            let lib = a.library.context("runtime needs the runtime's library")?;
            runtime_calls(&lib, a.count)?;
        }
        ChildMode::Marker => {
            for i in 0..a.count {
                probe::probe!(asys, selftest, std::hint::black_box(i64::from(i)));
            }
        }
        ChildMode::Syscalls => {
            for _ in 0..a.count {
                // SAFETY: getppid takes no arguments and cannot fail.
                std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
            }
        }
        ChildMode::Waits => pipe_waits(a.count)?,
        ChildMode::Burn => selftest_burn(Duration::from_millis(a.count.into())),
    }
    Ok(0)
}

type MallocFn = unsafe extern "C" fn(*mut *mut libc::c_void, usize) -> i32;
type MemsetFn = unsafe extern "C" fn(*mut libc::c_void, i32, usize) -> i32;
type SyncFn = unsafe extern "C" fn() -> i32;
type FreeFn = unsafe extern "C" fn(*mut libc::c_void) -> i32;

/// `dlopen`s the runtime (so that the loader hook must find it) and sets
/// device memory `count` times.
fn runtime_calls(lib: &Path, count: u32) -> anyhow::Result<()> {
    let path = CString::new(lib.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path; the handle is never closed (the
    // process ends soon).
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
    anyhow::ensure!(!h.is_null(), "dlopen {} failed", lib.display());
    let sym = |name: &str| -> anyhow::Result<*mut libc::c_void> {
        let n = CString::new(name)?;
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(h, n.as_ptr()) };
        anyhow::ensure!(!p.is_null(), "{} has no {name}", lib.display());
        Ok(p)
    };
    // SAFETY: the simulated runtime's functions, with the signatures of
    // sim/include/hggc_runtime.h.
    let (malloc, memset, sync, free) = unsafe {
        (
            std::mem::transmute::<*mut libc::c_void, MallocFn>(sym("hggcMalloc")?),
            std::mem::transmute::<*mut libc::c_void, MemsetFn>(sym("hggcMemset")?),
            std::mem::transmute::<*mut libc::c_void, SyncFn>(sym("hggcDeviceSynchronize")?),
            std::mem::transmute::<*mut libc::c_void, FreeFn>(sym("hggcFree")?),
        )
    };
    let mut buf: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: the runtime's calls, on memory it allocated.
    unsafe {
        anyhow::ensure!(malloc(&mut buf, 4096) == 0, "hggcMalloc failed");
        for i in 0..count {
            anyhow::ensure!(
                memset(buf, (i & 0xff) as i32, 4096) == 0,
                "hggcMemset failed"
            );
        }
        anyhow::ensure!(sync() == 0, "hggcDeviceSynchronize failed");
        anyhow::ensure!(free(buf) == 0, "hggcFree failed");
    }
    Ok(())
}

/// The main thread reads `count` bytes from a pipe that a second thread
/// writes one a millisecond: each read blocks, and the writer wakes it.
fn pipe_waits(count: u32) -> anyhow::Result<()> {
    let (mut r, mut w) = std::io::pipe()?;
    let writer = std::thread::Builder::new()
        .name("selftest-writer".into())
        .spawn(move || -> std::io::Result<()> {
            for _ in 0..count {
                std::thread::sleep(Duration::from_millis(1));
                w.write_all(&[1])?;
            }
            Ok(())
        })?;
    let mut b = [0u8; 1];
    for _ in 0..count {
        r.read_exact(&mut b)?;
    }
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("the writer thread panicked"))??;
    Ok(())
}

/// Spins in [`selftest_spin`] until this thread has had `d` of CPU time
/// (not wall time: on a busy host the samples still number d / period),
/// the caller the DWARF unwinder must find above each sample.
#[inline(never)]
fn selftest_burn(d: Duration) {
    let mut x = 1u64;
    while thread_cpu_time() < d {
        x = selftest_spin(std::hint::black_box(x));
    }
    std::hint::black_box(x);
}

fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[inline(never)]
fn selftest_spin(mut x: u64) -> u64 {
    let mut i = 0;
    while i < 100_000 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        i += 1;
    }
    x
}
