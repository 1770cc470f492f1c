//! Helpers for asys's integration tests. The tests run the real `asys` binary,
//! which loads the real eBPF programs, against the simulated HGGC runtime; the
//! runtime's ground-truth log (HGGC_SIM_GROUND_TRUTH) says what really happened.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Command, Output},
};

use serde_json::Value;

mod workloads;
pub use workloads::{build_workload, c_workload, cudart_workload, sim_workload, workload_source};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The build folder (`CARGO_TARGET_DIR`, else target/), where `cargo xtask`
/// puts what the tests use.
pub fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// How much longer than on real hardware a test may let asys's own work
/// take (`ASYS_TEST_TIME_SCALE`, 1 unless set): the VM pass sets it, as
/// software emulation makes CPU-bound code 10 to 20 times slower. Only
/// bounds on asys's own time are scaled, never a window asys is asked to
/// keep (a `-d 5` still records exactly 5 s of the workload's clock).
pub fn time_scale() -> f64 {
    std::env::var("ASYS_TEST_TIME_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|f| *f >= 1.0)
        .unwrap_or(1.0)
}

/// Whether the tests run under software emulation (the VM pass sets a
/// time scale): its timer interrupts arrive late and its collector runs
/// slower than the workload's calls arrive, so a few checks of sampling
/// rates and buffer sizes allow for it, each saying how.
pub fn emulated() -> bool {
    time_scale() > 1.0
}

/// The least share of the CPU-clock samples a thread's CPU time calls for
/// that a test may count on: `native` on real hardware, a fifth under
/// software emulation, whose timer interrupts come late and are then
/// merged (seen there: 45 % on an idle host, 28 % on a loaded one). What
/// the samples hold (the function, the unwound callers) is checked the
/// same everywhere; only their number allows for it.
pub fn sample_share(native: f64) -> f64 {
    if emulated() { 0.2 } else { native }
}

/// The asys binary under test (ASYS_BIN overrides).
pub fn asys_bin() -> PathBuf {
    let p = std::env::var_os("ASYS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target().join("debug/asys"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask test`, which builds it",
        p.display()
    );
    p
}

/// target/sim, built by `cargo xtask sim`.
pub fn sim() -> PathBuf {
    let p = target().join("sim");
    assert!(
        p.join("lib/libhggcrt.so").exists(),
        "the simulated runtime is missing: run `cargo xtask test`, which builds it"
    );
    p
}

pub fn workload(name: &str) -> PathBuf {
    sim().join("bin").join(name)
}

pub fn runtime_lib() -> PathBuf {
    sim().join("lib/libhggcrt.so")
}

/// Whether this kernel has kprobes (`CONFIG_KPROBES`): `register_kprobe`
/// is in /proc/kallsyms exactly when it is built in.
pub fn kernel_has_kprobes() -> bool {
    std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("register_kprobe"))
}

/// Tracing needs root; a test that needs it fails loudly without it.
pub fn require_root() {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "this test loads eBPF programs and must run as root (it does not skip)"
    );
}

/// A scratch folder, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("asys-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Names of the files in the folder, sorted.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Kills and reaps a child process on drop, so a failing test leaves nothing behind.
pub struct ChildGuard(pub Option<Child>);

impl ChildGuard {
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    pub fn wait(mut self) -> std::process::ExitStatus {
        self.0.take().unwrap().wait().unwrap()
    }

    pub fn wait_output(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn asys() -> Command {
    Command::new(asys_bin())
}

/// Starts asys (stderr piped) and waits for its line "asys: tracing ...";
/// returns the guard, the rest of its stderr and that line.
pub fn start_tracing(
    cmd: &mut Command,
) -> (
    ChildGuard,
    std::io::BufReader<std::process::ChildStderr>,
    String,
) {
    let (g, mut err) = spawn_reading_stderr(cmd);
    let line = read_tracing_line(&mut err);
    (g, err, line)
}

/// Starts `cmd` with its stderr piped, to be read line by line.
fn spawn_reading_stderr(
    cmd: &mut Command,
) -> (ChildGuard, std::io::BufReader<std::process::ChildStderr>) {
    let mut g = ChildGuard(Some(
        cmd.stderr(std::process::Stdio::piped()).spawn().unwrap(),
    ));
    let err = std::io::BufReader::new(g.child().stderr.take().unwrap());
    (g, err)
}

/// Starts asys (stderr piped) and waits for its line "asys: tracing ...";
/// returns the guard, the rest of its stderr and everything it said up to
/// and with that line (an attach's injection lines among it).
pub fn start_tracing_said(
    cmd: &mut Command,
) -> (
    ChildGuard,
    std::io::BufReader<std::process::ChildStderr>,
    String,
) {
    use std::io::BufRead as _;
    let (g, mut err) = spawn_reading_stderr(cmd);
    let mut said = String::new();
    while !said.contains("asys: tracing") {
        assert!(err.read_line(&mut said).unwrap() > 0, "asys said {said}");
    }
    (g, err, said)
}

/// The line "asys: tracing ..." from asys's stderr. A kernel that lacks a
/// feature makes asys name the fallback it takes first ("asys: kernel
/// fallback in use: ...", Linux 6.1 for one), and an attach says what its
/// injection into each process did ("asys: process PID (...): ..."): those
/// lines may come before it, anything else fails.
pub fn read_tracing_line(err: &mut impl std::io::BufRead) -> String {
    loop {
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        if line.starts_with("asys: kernel fallback in use: ")
            || line.starts_with("asys: process ")
            || line.starts_with("asys: warning: process ")
        {
            continue;
        }
        assert!(line.starts_with("asys: tracing"), "asys said {line:?}");
        return line.trim().to_string();
    }
}

/// Runs asys to completion.
pub fn run(args: &[&str]) -> Output {
    asys().args(args).finish()
}

/// How long any one command of a test may take: a hang becomes a failure that
/// says what hung, not a CI run that never ends.
pub const COMMAND_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// `Command::output` within [`COMMAND_LIMIT`].
pub trait Finish {
    /// Runs the command to its end and returns its output, as `output()`
    /// does; panics if it or its output (which anything it started may hold
    /// open) has not ended within [`COMMAND_LIMIT`].
    fn finish(&mut self) -> Output;
}

impl Finish for Command {
    fn finish(&mut self) -> Output {
        use std::{io::Read, process::Stdio, sync::mpsc, time::Instant};
        let deadline = Instant::now() + COMMAND_LIMIT;
        let mut child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{self:?}: {e}"));
        let reader = |mut from: Box<dyn Read + Send>| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = from.read_to_end(&mut bytes);
                let _ = tx.send(bytes);
            });
            rx
        };
        let out = reader(Box::new(child.stdout.take().unwrap()));
        let err = reader(Box::new(child.stderr.take().unwrap()));
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{self:?} did not end within {COMMAND_LIMIT:?}");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let collect = |rx: mpsc::Receiver<Vec<u8>>| {
            let left = deadline.saturating_duration_since(Instant::now());
            rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "{self:?} exited ({status}) but its output stayed open for {COMMAND_LIMIT:?}: \
                     something it started is still running (or stopped)"
                )
            })
        };
        let stdout = collect(out);
        let stderr = collect(err);
        Output {
            status,
            stdout,
            stderr,
        }
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A workload run under `asys profile ASYS_ARGS -o REPORT`, with the
/// simulated runtime's ground-truth log beside it.
pub struct Profiled {
    pub truth: PathBuf,
    pub report: PathBuf,
    pub out: Output,
}

/// Runs `asys profile ASYS_ARGS -o SCRATCH/NAME WORKLOAD APP_ARGS` to
/// completion; `report` is the written `.asysrep`. Success is not checked:
/// callers that expect a failure look at `out` themselves.
pub fn profile_workload(
    s: &Scratch,
    asys_args: &[&str],
    name: &str,
    app_args: &[&str],
    env: &[(&str, &str)],
) -> Profiled {
    require_root();
    let truth = s.path(&format!("{name}.truth.jsonl"));
    let report = s.path(name);
    let mut cmd = asys();
    cmd.arg("profile")
        .args(asys_args)
        .args(["-o", report.to_str().unwrap()])
        .arg(workload(name))
        .args(app_args)
        .env("HGGC_SIM_GROUND_TRUTH", &truth);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.finish();
    Profiled {
        truth,
        report: report.with_extension("asysrep"),
        out,
    }
}

/// The lines of a ground-truth log for one library's APIs (`hggc`, `hgtx`...).
pub fn ground_truth_of(path: &Path, prefix: &str) -> Vec<Value> {
    ground_truth(path)
        .into_iter()
        .filter(|t| t["api"].as_str().is_some_and(|a| a.starts_with(prefix)))
        .collect()
}

/// Every line of a ground-truth log.
pub fn ground_truth(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One column of `asys stats --report NAME --format csv REPORT`, as text
/// (cheaper than JSON for reports of hundreds of thousands of rows).
pub fn stats_csv_column(report: &Path, name: &str, column: &str) -> Vec<String> {
    let o = run(&[
        "stats",
        "--report",
        name,
        "--format",
        "csv",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "asys stats failed: {}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let mut lines = text.lines().filter(|l| !l.is_empty());
    let header = csv_fields(lines.next().expect("a header line"));
    let at = header
        .iter()
        .position(|h| h == column)
        .unwrap_or_else(|| panic!("no column {column} in {header:?}"));
    lines.map(|l| csv_fields(l).swap_remove(at)).collect()
}

/// The fields of one CSV line as asys writes them: a field holding a comma
/// or a quote is quoted, its quotes doubled (a grid "2,3,4" is one field).
pub fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

/// Rows of `asys stats --report NAME --format json REPORT`.
pub fn stats_json(report: &Path, name: &str) -> Vec<Value> {
    let o = run(&[
        "stats",
        "--report",
        name,
        "--format",
        "json",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "asys stats failed: {}", stderr(&o));
    serde_json::from_slice::<Value>(&o.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The report's metadata.json, read with tar as a user would.
pub fn metadata(report: &Path) -> Value {
    let o = Command::new("tar")
        .args(["-xOf", report.to_str().unwrap(), "metadata.json"])
        .finish();
    assert!(
        o.status.success(),
        "tar could not read {}",
        report.display()
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn num(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_u64().map(|u| u as i64))
}

const BYTES_APIS: &[&str] = &[
    "hggcMalloc",
    "hggcMallocHost",
    "hggcMemcpy",
    "hggcMemcpyAsync",
    "hggcMemset",
    "hggcMemsetAsync",
];
const STREAM_APIS: &[&str] = &[
    "hggcMemcpyAsync",
    "hggcMemsetAsync",
    "hggcLaunchKernel",
    "hggcStreamSynchronize",
    "hggcStreamDestroy",
    "hggcEventRecord",
];
const PTR_APIS: &[&str] = &["hggcMalloc", "hggcMallocHost", "hggcFree", "hggcFreeHost"];

/// A call as both sides can describe it: API, pid, tid, result and the
/// arguments that matter. Sorted lists of these compare exactly.
pub fn truth_key(t: &Value) -> String {
    let api = t["api"].as_str().unwrap();
    let mut k = format!("{api} pid={} tid={} ret={}", t["pid"], t["tid"], t["ret"]);
    if BYTES_APIS.contains(&api) {
        k += &format!(" bytes={}", t["bytes"]);
    }
    if api.starts_with("hggcMemcpy") {
        k += &format!(" kind={}", t["kind"]);
    }
    if STREAM_APIS.contains(&api) {
        k += &format!(" stream={}", num(&t["stream"]).unwrap_or(0));
    }
    if PTR_APIS.contains(&api) {
        k += &format!(" ptr={}", num(&t["ptr"]).unwrap_or(0));
    }
    if api == "hggcStreamCreate" {
        k += &format!(" ptr={}", num(&t["stream"]).unwrap_or(0));
    }
    if api == "hggcLaunchKernel" {
        let d = |v: &Value| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        k += &format!(
            " kernel={} grid={} block={}",
            t["kernel"].as_str().unwrap(),
            d(&t["grid"]),
            d(&t["block"])
        );
    }
    k
}

/// The same description of a row of hggc_api_trace.
pub fn trace_key(r: &Value) -> String {
    let api = r["Name"].as_str().unwrap();
    let mut k = format!(
        "{api} pid={} tid={} ret={}",
        r["Pid"], r["Tid"], r["Result"]
    );
    if BYTES_APIS.contains(&api) {
        k += &format!(" bytes={}", r["Bytes"]);
    }
    if api.starts_with("hggcMemcpy") {
        k += &format!(" kind={}", r["Copy Kind"]);
    }
    if STREAM_APIS.contains(&api) {
        k += &format!(" stream={}", num(&r["Stream"]).unwrap_or(-1));
    }
    if PTR_APIS.contains(&api) || api == "hggcStreamCreate" {
        k += &format!(" ptr={}", num(&r["Pointer"]).unwrap_or(-1));
    }
    if api == "hggcLaunchKernel" {
        k += &format!(
            " kernel={} grid={} block={}",
            r["Kernel"].as_str().unwrap_or("?"),
            r["Grid"].as_str().unwrap_or("?"),
            r["Block"].as_str().unwrap_or("?")
        );
    }
    k
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Asserts two sorted key lists are equal, printing the difference if not.
pub fn assert_same_calls(truth: Vec<String>, traced: Vec<String>) {
    let (truth, traced) = (sorted(truth), sorted(traced));
    if truth != traced {
        let mut diff = BTreeMap::<&String, i64>::new();
        for k in &truth {
            *diff.entry(k).or_default() += 1;
        }
        for k in &traced {
            *diff.entry(k).or_default() -= 1;
        }
        let lines: Vec<String> = diff
            .into_iter()
            .filter(|(_, n)| *n != 0)
            .take(20)
            .map(|(k, n)| format!("  {n:+} {k}"))
            .collect();
        panic!(
            "traced calls differ from ground truth ({} true, {} traced); +: missing from trace, -: extra\n{}",
            truth.len(),
            traced.len(),
            lines.join("\n")
        );
    }
}

/// "workload-calls NAME N" lines a workload prints about itself.
pub fn workload_calls(out: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in out
        .lines()
        .filter_map(|l| l.strip_prefix("workload-calls "))
    {
        let (n, c) = l.split_once(' ').unwrap();
        *m.entry(n.to_string()).or_default() += c.parse::<u64>().unwrap();
    }
    m
}

/// target/pyenv, made by `cargo xtask pyenv` (part of `cargo xtask test`).
pub fn pyenv() -> PathBuf {
    let p = target().join("pyenv");
    assert!(
        p.join("bin/python").exists(),
        "target/pyenv is missing: run `cargo xtask test`, which installs it"
    );
    p
}

/// Fixture CPython `version` ("3.12": Ubuntu noble's, "3.13": Debian
/// trixie's), installed under target/cpython by `cargo xtask cpython` (part
/// of `cargo xtask test`); runs as it is, with its own glibc.
pub fn cpython(version: &str) -> PathBuf {
    let p = target().join(format!("cpython/{version}/usr/bin/python{version}"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask cpython` (part of `cargo xtask test`)",
        p.display()
    );
    p
}

/// The CPython interpreters the Python-stack tests run: Debian's 3.11.2 and
/// pyenv's 3.11.7 (what `cargo xtask test` links as target/pyenv, the
/// `python3` on PATH), then Ubuntu noble's 3.12.3, Debian's 3.13.5 and
/// Ubuntu jammy's 3.10.12 (`cargo xtask cpython`).
/// `ASYS_TEST_PYTHON=PATH` narrows them to that one: the VM pass runs
/// Debian's python3.11 only, as each interpreter costs a minute under
/// emulation.
pub fn python_interpreters() -> Vec<PathBuf> {
    if let Some(only) = std::env::var_os("ASYS_TEST_PYTHON") {
        return vec![only.into()];
    }
    let pyenv = std::fs::canonicalize(pyenv().join("bin/python3")).unwrap();
    vec![
        "/usr/bin/python3.11".into(),
        pyenv,
        cpython("3.12"),
        cpython("3.13"),
        cpython("3.10"),
    ]
}

/// The site-packages folder of target/pyenv.
pub fn site_packages() -> PathBuf {
    let lib = pyenv().join("lib");
    std::fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("python3")
        })
        .expect("a python3.x folder in target/pyenv/lib")
        .join("site-packages")
}

/// The lib folder of an NVIDIA wheel in target/pyenv (`cuda_runtime`,
/// `cublas`, ...).
pub fn wheel_lib(package: &str) -> PathBuf {
    let lib = site_packages().join("nvidia").join(package).join("lib");
    assert!(
        lib.is_dir(),
        "{} is missing: run `cargo xtask pyenv`",
        lib.display()
    );
    lib
}

/// Whether the CUDA tests run on a GPU host: CUDA's driver works and has a
/// device (the device path: calls succeed, CUPTI records device activity),
/// or not (the PyPI libraries answer with errors, CUPTI refuses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nvidia {
    /// Why there is no usable GPU (no driver, `cuInit` failed, no device).
    NoGpu(String),
    /// CUDA's driver initialized and counts this many devices.
    Gpu(u32),
}

/// Whether this host has an NVIDIA GPU that CUDA can use, asked once per
/// test binary (tests/workloads/nvidia_probe.c, built with cc as the CUDA
/// tests build theirs; the answer is printed to stderr). A host with NVIDIA's device file
/// (/dev/nvidia0) whose driver does not give a device fails here instead of
/// answering: the tests could check neither path there.
pub fn nvidia_gpu() -> &'static Nvidia {
    static ANSWER: std::sync::OnceLock<Nvidia> = std::sync::OnceLock::new();
    ANSWER.get_or_init(|| {
        // Asks CUDA's driver itself, in a process of its own (the test
        // process never loads it): `libcuda.so.1` loads, `cuInit(0)`
        // succeeds and `cuDeviceGetCount` counts at least one device.
        let bin = c_workload("nvidia_probe.c", &["-ldl"]);
        let o = Command::new(&bin).finish();
        let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(
            o.status.success(),
            "the NVIDIA probe failed ({}): {out} {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        let answer = match out.strip_prefix("gpu ") {
            Some(n) => Nvidia::Gpu(n.parse().unwrap_or_else(|_| panic!("probe said {out:?}"))),
            None => Nvidia::NoGpu(
                out.strip_prefix("none: ")
                    .unwrap_or_else(|| panic!("probe said {out:?}"))
                    .to_string(),
            ),
        };
        match &answer {
            Nvidia::Gpu(n) => {
                eprintln!(
                    "asys-tests: an NVIDIA GPU host ({n} device(s)): checking the device path"
                )
            }
            Nvidia::NoGpu(why) => {
                assert!(
                    !Path::new("/dev/nvidia0").exists(),
                    "/dev/nvidia0 exists but CUDA's driver gives no device ({why}): fix the \
                     driver set-up; the CUDA tests can check neither the GPU nor the no-GPU path"
                );
                eprintln!("asys-tests: no NVIDIA GPU ({why}): checking the no-GPU path")
            }
        }
        answer
    })
}

/// For the tests of the GPU path, which are `#[ignore]`d (run them with
/// `--ignored` on a GPU host): fails, saying why, on a host without a GPU
/// CUDA can use. Returns the number of devices.
pub fn require_nvidia_gpu() -> u32 {
    match nvidia_gpu() {
        Nvidia::Gpu(n) => *n,
        Nvidia::NoGpu(why) => {
            panic!(
                "this test checks the NVIDIA GPU path and this host has no GPU CUDA can use: {why}"
            )
        }
    }
}

/// The `attach_target` workload, driven over stdin: `burst N`, `quit`.
pub struct AttachTarget {
    pub guard: ChildGuard,
    pub stdin: std::process::ChildStdin,
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
    pub pid: u32,
}

impl AttachTarget {
    /// Starts it with a ground-truth log at `truth`; waits for "ready".
    pub fn start(truth: &std::path::Path) -> Self {
        let mut cmd = std::process::Command::new(workload("attach_target"));
        cmd.env("HGGC_SIM_GROUND_TRUTH", truth);
        Self::spawn(&mut cmd)
    }

    /// Starts `cmd`, a program that speaks attach_target's protocol (its
    /// first line `ready PID`), with its stdin and stdout piped; waits for
    /// "ready".
    pub fn spawn(cmd: &mut std::process::Command) -> Self {
        let mut guard = ChildGuard(Some(
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        ));
        let stdin = guard.child().stdin.take().unwrap();
        let mut stdout = std::io::BufReader::new(guard.child().stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        let pid = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
        Self {
            guard,
            stdin,
            stdout,
            pid,
        }
    }

    /// Runs n memsets of its device buffer, then a sync.
    pub fn fill(&mut self, n: u32) {
        std::io::Write::write_all(&mut self.stdin, format!("fill {n}\n").as_bytes()).unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut self.stdout, &mut line).unwrap();
        assert_eq!(line.trim(), format!("filled {n}"));
    }

    /// Runs a burst of n iterations; returns the checksum it printed.
    pub fn burst(&mut self, n: u32) -> i64 {
        burst_over(&mut self.stdin, &mut self.stdout, n)
    }

    /// Tells it to quit; returns its status and the rest of its output.
    pub fn quit(mut self) -> (std::process::ExitStatus, String) {
        std::io::Write::write_all(&mut self.stdin, b"quit\n").unwrap();
        let mut rest = String::new();
        for l in std::io::BufRead::lines(&mut self.stdout) {
            rest += &l.unwrap();
            rest.push('\n');
        }
        (self.guard.wait(), rest)
    }
}

/// Has an `attach_target` on the other end of these pipes run a burst of n
/// iterations; returns the checksum it printed.
pub fn burst_over(
    stdin: &mut impl std::io::Write,
    stdout: &mut impl std::io::BufRead,
    n: u32,
) -> i64 {
    stdin.write_all(format!("burst {n}\n").as_bytes()).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts[..2], ["done", &n.to_string()], "target said {line:?}");
    parts[2].parse().unwrap()
}

/// The checksum a burst of n must print: sum over i<n, j<1024 of (i + j + 1).
pub fn expected_checksum(n: u32) -> i64 {
    (0..n as i64)
        .map(|i| (0..1024i64).map(|j| i + j + 1).sum::<i64>())
        .sum()
}

/// A process that runs hgtx ranges on demand (tests/workloads/
/// ranges_on_demand.c): "range NAME N" (N calls in a push/pop range NAME),
/// "profiler N" (N calls between hggcProfilerStart and Stop), "quit". It
/// answers "done" after each.
pub fn ranges_on_demand() -> PathBuf {
    sim_workload("ranges_on_demand.c", &["hggcrt", "hgtx"])
}

/// `kill(pid, sig)`: 0, or -1 (no such process, or not allowed).
pub fn signal(pid: i32, sig: i32) -> i32 {
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(pid, sig) }
}

/// CLOCK_MONOTONIC now, in ns (the clock of asys's timestamps).
pub fn monotonic_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// A process's state letter from /proc (R, S, T, Z, ...); None once gone.
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Waits until the workload's log shows calls `secs` seconds after its start.
pub fn wait_for_progress(log: &Path, secs: f64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if log.exists() {
            let l = SteadyLog::read(log);
            if l.progress
                .last()
                .is_some_and(|(t, _)| (*t - l.start) as f64 >= secs * 1e9)
            {
                return;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the workload made no progress"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What `steady_calls` (sim/workloads) logged: its start, "progress T N"
/// (at CLOCK_MONOTONIC T, N calls had returned; later calls start after T)
/// and its failing call ("fail START END RESULT").
#[derive(Debug, Default)]
pub struct SteadyLog {
    pub start: i64,
    pub progress: Vec<(i64, u64)>,
    pub fails: Vec<(i64, i64, i64)>,
    pub done: bool,
}

impl SteadyLog {
    pub fn read(path: &Path) -> Self {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut log = SteadyLog::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let n = |i: usize| f[i].parse::<i64>().unwrap();
            match f.first() {
                Some(&"start") => log.start = n(1),
                Some(&"progress") if f.len() == 3 => log.progress.push((n(1), n(2) as u64)),
                Some(&"fail") if f.len() == 4 => log.fails.push((n(1), n(2), n(3))),
                Some(&"done") => log.done = true,
                _ => {}
            }
        }
        log
    }

    /// The last progress point at or before `t`: (T, calls returned by T).
    pub fn at_or_before(&self, t: i64) -> Option<(i64, u64)> {
        self.progress.iter().rev().find(|(at, _)| *at <= t).copied()
    }
}

/// One API call of a report, as `hggc_api_trace` shows it.
#[derive(Debug, Clone)]
pub struct TracedCall {
    pub start: i64,
    pub end: i64,
    pub name: String,
    pub result: i64,
}

/// Every call of `asys stats --report hggc_api_trace --format csv REPORT`
/// (the warnings on stderr are returned too).
pub fn traced_calls(report: &Path) -> (Vec<TracedCall>, String) {
    let o = run(&[
        "stats",
        "--report",
        "hggc_api_trace",
        "--format",
        "csv",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "asys stats failed: {}", stderr(&o));
    let text = String::from_utf8(o.stdout.clone()).unwrap();
    let mut lines = text.lines().filter(|l| !l.is_empty());
    let header = csv_fields(lines.next().expect("a header line"));
    let at = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
    };
    let (s, d, n, r) = (
        at("Start (ns)"),
        at("Duration (ns)"),
        at("Name"),
        at("Result"),
    );
    let calls = lines
        .map(|l| {
            let f = csv_fields(l);
            let start: i64 = f[s].parse().unwrap();
            TracedCall {
                start,
                end: start + f[d].parse::<i64>().unwrap(),
                name: f[n].clone(),
                result: f[r].parse().unwrap(),
            }
        })
        .collect();
    (calls, stderr(&o))
}

/// One row of a report's `process_events` table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProcessEventRow {
    pub kind: String,
    /// The acting process and thread.
    pub pid: u32,
    pub tid: u32,
    /// fork: the new task; exec and exit: the process.
    pub child_pid: u32,
}

/// The `process_events` table of `report` (fork, exec and exit as the kernel
/// reported them), read from its Parquet member.
pub fn process_events(report: &Path) -> Vec<ProcessEventRow> {
    use arrow::{
        array::{Array, AsArray},
        datatypes::{DataType, UInt32Type},
    };
    // One folder per call: tests running at once read reports of the same
    // file name (a shared folder was removed under another test's read).
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "asys-process-events-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        report.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new("tar")
        .arg("-xf")
        .arg(report)
        .arg("-C")
        .arg(&dir)
        .arg("process_events.parquet")
        .finish();
    assert!(
        o.status.success(),
        "no process_events in {}",
        report.display()
    );
    let file = std::fs::File::open(dir.join("process_events.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let col = |name: &str| batch.column_by_name(name).unwrap().clone();
        let kind = arrow::compute::cast(&col("kind"), &DataType::Utf8).unwrap();
        let kind = kind.as_string::<i32>();
        let pid = col("pid");
        let pid = pid.as_primitive::<UInt32Type>();
        let tid = col("tid");
        let tid = tid.as_primitive::<UInt32Type>();
        let child = col("childPid");
        let child = child.as_primitive::<UInt32Type>();
        for i in 0..batch.num_rows() {
            assert!(!kind.is_null(i));
            rows.push(ProcessEventRow {
                kind: kind.value(i).to_string(),
                pid: pid.value(i),
                tid: tid.value(i),
                child_pid: child.value(i),
            });
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    rows
}

/// The runtime a [`timed_calls`] program calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedRuntime {
    /// The simulated runtime: hggcGetLastError.
    Hggc,
    /// NVIDIA's libcudart.so.12 from target/pyenv: cudaRuntimeGetVersion.
    Cuda,
}

/// A program that makes one cheap runtime call RATE times a second for
/// SECONDS, from its first instruction on, and logs every call as "A B": the
/// CLOCK_MONOTONIC times just before and just after it (the probe's time of
/// the call lies between). The ground truth of a recorded window's edges.
/// Usage: timed_calls RATE SECONDS LOG (tests/workloads/timed_calls.c),
/// built against `runtime`.
pub fn timed_calls(runtime: TimedRuntime) -> PathBuf {
    match runtime {
        TimedRuntime::Hggc => sim_workload("timed_calls.c", &["hggcrt"]),
        TimedRuntime::Cuda => cudart_workload("timed_calls.c", &["-DCUDA"]),
    }
}

/// The calls a [`timed_calls`] program logged: (just before, just after).
pub fn timed_log(path: &Path) -> Vec<(i64, i64)> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').expect("A B");
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

/// Asserts that `recorded` (the start times of one process's recorded
/// calls) are exactly its `calls` made in the window `[start, end]`: each
/// call made wholly inside it is recorded once, none made wholly outside it
/// is, and nothing else is recorded. A call that straddles an edge may go
/// either way. Returns the number of calls wholly inside.
pub fn assert_window_exact(
    calls: &[(i64, i64)],
    recorded: &[i64],
    (start, end): (i64, i64),
) -> usize {
    let mut hits = vec![0u32; calls.len()];
    for &r in recorded {
        // The calls are one thread's, one after another: the only one that
        // can hold `r` is the first that ends at or after it.
        let i = calls.partition_point(|c| c.1 < r);
        assert!(
            i < calls.len() && calls[i].0 <= r,
            "a call recorded at {r} was not made (the window is [{start}, {end}])"
        );
        hits[i] += 1;
    }
    let mut inside = 0;
    for (c, n) in calls.iter().zip(&hits) {
        if c.0 >= start && c.1 <= end {
            inside += 1;
            assert_eq!(
                *n,
                1,
                "the call made at [{}, {}], inside the window [{start}, {end}] ({} ns after its \
                 start, {} ns before its end), was recorded {n} times",
                c.0,
                c.1,
                c.0 - start,
                end - c.1
            );
        } else if c.1 < start || c.0 > end {
            assert_eq!(
                *n, 0,
                "the call made at [{}, {}], outside the window [{start}, {end}], was recorded",
                c.0, c.1
            );
        }
    }
    inside
}

/// Context switches of traced threads the kernel did not deliver, found by
/// their sequence (`sched_switch_undelivered`). On this machine kind the
/// kernel never delivers a switch out of the sandbox agent's threads (not
/// to asys, bpftrace or ftrace), so a traced thread switched in from one of
/// them arrives unseen.
pub fn undelivered_switches(meta: &Value) -> u64 {
    meta["sched_switch_undelivered"].as_u64().unwrap_or(0)
}

/// Asserts that a recording lost nothing (its summary line and its
/// metadata), and that what the kernel did not hand it (switches it did not
/// deliver, runs of asys's programs it skipped) is on the note line, each
/// with its count.
pub fn assert_nothing_lost(err: &str, meta: &Value) {
    assert_eq!(lost_events(meta), BTreeMap::new(), "{err}");
    assert!(err.contains("; 0 events lost"), "{err}");
    let skipped = meta["kernel_skipped"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let undelivered = undelivered_switches(meta);
    let note = err
        .lines()
        .find(|l| l.starts_with("asys: note: the kernel "));
    assert_eq!(
        note.is_some(),
        !skipped.is_empty() || undelivered > 0,
        "{err}"
    );
    for (program, n) in &skipped {
        assert!(note.unwrap().contains(&format!("{program}={n}")), "{err}");
    }
    if undelivered > 0 {
        assert!(
            note.unwrap()
                .contains(&format!("did not deliver {undelivered} context switches")),
            "{err}"
        );
    }
}

/// Events the report's metadata counts lost, by source (texts that could
/// not be read are not lost events).
pub fn lost_events(meta: &Value) -> BTreeMap<String, u64> {
    meta["drops"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.contains("text_unreadable"))
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The rows of `query` on the SQLite database `db`, by the `sqlite3`
/// command, each row's columns split at `|`.
pub fn sqlite(db: &Path, query: &str) -> Vec<Vec<String>> {
    let o = Command::new("sqlite3")
        .args(["-bail", "-separator", "|"])
        .arg(db)
        .arg(query)
        .finish();
    assert!(o.status.success(), "sqlite3 {query}: {}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect()
}

/// target/perfetto-venv's python (made by `cargo xtask test`), or
/// $ASYS_PERFETTO_PYTHON.
pub fn perfetto_python() -> PathBuf {
    let p = std::env::var_os("ASYS_PERFETTO_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/perfetto-venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask test`, which installs it",
        p.display()
    );
    p
}

/// target/hta-venv's python, with Holistic Trace Analysis (made by
/// `cargo xtask test`), or $ASYS_HTA_PYTHON.
pub fn hta_python() -> PathBuf {
    let p = std::env::var_os("ASYS_HTA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/hta-venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask test`, which installs it",
        p.display()
    );
    p
}

/// target/bench/duckdb-venv's python (pyarrow), made by `cargo xtask test`.
pub fn data_python() -> PathBuf {
    let p = std::env::var_os("ASYS_DATA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/bench/duckdb-venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask test`",
        p.display()
    );
    p
}

/// Every row of member `table` of `report`, as JSON objects (pyarrow).
pub fn report_rows(s: &Scratch, report: &Path, table: &str) -> Vec<Value> {
    let member = format!("{table}.parquet");
    let o = Command::new("tar")
        .arg("-xf")
        .arg(report)
        .arg("-C")
        .arg(&s.0)
        .arg(&member)
        .finish();
    assert!(o.status.success(), "no {member} in {}", report.display());
    let o = Command::new(data_python())
        .args([
            "-c",
            "import json, sys, pyarrow.parquet as pq\n\
             print(json.dumps(pq.read_table(sys.argv[1]).to_pylist()))",
        ])
        .arg(s.path(&member))
        .finish();
    assert!(o.status.success(), "pyarrow: {}", stderr(&o));
    serde_json::from_slice::<Value>(&o.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// target/spark-venv's python, with pyspark (made by `cargo xtask test`,
/// which also installs the JRE), or $ASYS_SPARK_PYTHON.
pub fn spark_python() -> PathBuf {
    let p = std::env::var_os("ASYS_SPARK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/spark-venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask test`, which installs pyspark and a JRE",
        p.display()
    );
    p
}
