//! Project tasks: `cargo xtask <task>`.
//!
//!   setup   install what building eBPF needs (idempotent)
//!   sim     build the simulated HGGC runtime and its sample workloads
//!   pyenv   target/pyenv with real NVIDIA libraries from PyPI (no GPU needed)
//!   cpython target/cpython/3.10, 3.12 and 3.13: fixture CPythons from Ubuntu jammy and noble and Debian trixie
//!   demo    the main job: profile the sample training loop, print its summary
//!   test    the import-cycle check, everything above, then every test, a
//!           short fuzz run, the VM pass (vm-test, both kernels), the
//!           install test (install-test) and a closing summary: passed,
//!           failed, ignored (each with its reason)
//!   import-cycles [--edges [--sites | --write-doc]]   no import cycle
//!                 between the top-level modules of any crate (--edges: print
//!                 each crate's imports as docs/architecture.md's table;
//!                 --sites: with the first file:line of each; --write-doc:
//!                 rewrite the doc's copy of the table)
//!   code-figures [--sites]   how easy the tree is to change: #[path]s,
//!                 root re-imports, long functions, silent skips, tracker
//!                 references (--sites: where each is)
//!   bench   probe overhead: untraced vs asys vs bpftrace, in one run
//!   bench-sampling   CPU sampling overhead: untraced vs asys -s vs perf record
//!   bench-python [ROUNDS] [ITERATIONS]  Python sampling overhead: untraced vs asys -s --python-sampling vs py-spy
//!   attach-torch  PyTorch from PyPI attached mid-run: its NVTX ranges against its own log
//!   bench-torch [ROUNDS] [STEPS]  PyTorch from PyPI under each mode, this kernel's path and the pre-6.6 fallback, py-spy, perf -g
//!   bench-always-on [MIN_ROUNDS] [MAX_ROUNDS] [BLOCK_S]  attach --always-on's cost to a PyTorch
//!                 step, to +-0.5 %: alternating blocks of one pinned process, with py-spy and perf -F 99 -g
//!   soak [MINUTES]  asys profile --always-on left running (60 min): RSS, descriptors, the
//!                 ring's disk and CPU per event bounded, every `asys dump` exact; plots in docs/images
//!   bench-waits   switch + wake-up recording overhead: untraced vs asys --cpuctxsw vs perf record
//!   bench-python-waits [ROUNDS] [PASSES]  Python stacks at waits: a queue ping-pong untraced,
//!                 under ASYS_BENCH_BASE_BIN (without them) and this asys (with them)
//!   bench-metrics   overhead of the host memory, NIC and PPU metrics samplers
//!   bench-osrt   osrt overhead per call: untraced vs asys -t osrt vs strace -c vs perf trace
//!   bench-pipeline   the data path: asys CPU and report bytes per event,
//!                    lossless rates, the finish after the application, and
//!                    stats against DuckDB
//!   bench-lines   source lines: asys's symbolizer vs binutils addr2line on the
//!                 same 200k addresses (time, peak RSS, results compared)
//!   bench-report   report size per event, and stats vs DuckDB (time, memory, results)
//!   bench-zstd-levels TABLE.parquet   an API table re-encoded at zstd levels 1, 3, 6, 9
//!   bench-export   stats, analyze and export of a 10 M-event report vs DuckDB
//!   bench-spark   parquetdir export of a 10 M-event report vs DuckDB's partitioned
//!                 COPY, and a per-rank Spark query over each dataset
//!   same-output    --before PATH: every stats, analyze and export output byte-identical
//!   vm-test [6.1|6.12 ...] [--only TEXT,...] [--run 'COMMAND']   a subset of
//!                    the integration tests inside Debian's real 6.1 and 6.12
//!                    kernels under qemu (both when none is named), or one
//!                    shell command there
//!   dist    the release: target/dist/asys-VERSION-x86_64-linux.tar.gz and a .deb,
//!           built against glibc 2.17 (cargo-zigbuild), with man pages and completions
//!   install-test   the release installed (tarball and .deb) in clean Debian 11
//!           and 12 root file systems (debootstrap), and run in the 6.1 guest
//!   fuzz [seconds]   the report readers and untrusted-input parsers under
//!                    libFuzzer, each target that long
mod attach_torch;
mod bench;
mod bench_always_on;
mod bench_export;
mod bench_lines;
mod bench_metrics;
mod bench_osrt;
mod bench_pipeline;
mod bench_python;
mod bench_python_waits;
pub mod bench_report;
mod bench_sampling;
mod bench_spark;
mod bench_torch;
mod bench_waits;
mod bench_zstd;
mod code_figures;
mod cpython;
mod disk;
mod dist;
// Only a test: every path the docs name exists.
#[cfg(test)]
mod doc_paths;
mod fuzz;
mod hta_python;
mod import_cycles;
mod install_test;
mod perfetto_python;
mod pprof_readers;
mod python;
mod same_output;
mod setup;
mod sim;
mod soak;
mod spark;
mod test_summary;
mod venv;
mod vm_test;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// Runs a command, failing with its name if it fails.
pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// Builds the `asys` binary (debug or release) and returns its path.
pub fn build_asys(release: bool) -> anyhow::Result<PathBuf> {
    let mut c = cargo();
    // The injection library lives beside the binary, where asys looks for it.
    c.args([
        "build",
        "--package",
        "asys-userspace",
        "--package",
        "asys-inject",
    ]);
    if release {
        c.arg("--release");
    }
    run(&mut c)?;
    Ok(target_dir()
        .join(if release { "release" } else { "debug" })
        .join("asys"))
}

fn demo() -> anyhow::Result<()> {
    setup::setup()?;
    let sim = sim::build()?;
    let asys = build_asys(false)?;
    let out = target_dir().join("demo");
    std::fs::create_dir_all(&out)?;
    let report = out.join("train_step");
    println!("== asys profile -t hggc,hgtx of the sample training loop (20 steps) ==");
    let output = Command::new(&asys)
        .args([
            "profile",
            "-t",
            "hggc,hgtx",
            "-f",
            "true",
            "--stats",
            "true",
            "-o",
        ])
        .arg(&report)
        .arg(sim.bin.join("train_step"))
        .arg("20")
        .output()
        .context("running asys")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        bail!("asys profile failed: {}", output.status);
    }
    // Compare the summary's Num Calls with what the workload says it made.
    let made: Vec<(String, u64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("workload-calls "))
        .filter_map(|l| {
            let (n, c) = l.split_once(' ')?;
            Some((n.to_string(), c.parse().ok()?))
        })
        .collect();
    let json = Command::new(&asys)
        .args([
            "stats",
            "--format",
            "json",
            "--report",
            "hggc_api_sum,hgtx_api_sum",
        ])
        .arg(report.with_extension("asysrep"))
        .output()?;
    let text = String::from_utf8_lossy(&json.stdout);
    let mut mismatches = 0;
    for (name, count) in &made {
        let needle = format!("\"Name\": \"{name}\"");
        let traced = text
            .split('{')
            .find(|obj| obj.contains(&needle))
            .and_then(|obj| {
                obj.split("\"Num Calls\": ")
                    .nth(1)?
                    .split([',', '\n'])
                    .next()?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0);
        if traced != *count {
            mismatches += 1;
            println!("MISMATCH {name}: workload made {count}, asys recorded {traced}");
        }
    }
    if made.is_empty() || mismatches > 0 {
        bail!("the summary does not match the workload's own account");
    }
    println!(
        "asys recorded exactly the calls the workload reports making ({} APIs, {} calls).",
        made.len(),
        made.iter().map(|(_, c)| c).sum::<u64>()
    );
    Ok(())
}

/// Installs Debian's `package` with apt-get unless `command` already runs
/// (`--version`); `why` says what needs it.
pub fn ensure_command(command: &str, package: &str, why: &str) -> anyhow::Result<()> {
    if Command::new(command).arg("--version").output().is_ok() {
        return Ok(());
    }
    eprintln!("xtask: installing {package} ({why}) with apt-get");
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    run(Command::new("apt-get").args(["install", "-y", "-qq", package]))
}

/// Installs Debian's `package` with apt-get unless `file` (which it
/// provides) exists; `why` says what needs it.
pub fn ensure_file(file: &str, package: &str, why: &str) -> anyhow::Result<()> {
    if std::path::Path::new(file).exists() {
        return Ok(());
    }
    eprintln!("xtask: installing {package} ({why}) with apt-get");
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    run(Command::new("apt-get").args(["install", "-y", "-qq", package]))
}

fn test(extra: &[String]) -> anyhow::Result<()> {
    // First, as it takes a second and fails on the sources alone.
    import_cycles::run(&[])?;
    disk::warn_if_low(&target_dir());
    setup::setup()?;
    sim::build()?;
    python::ensure()?;
    // The Python-stack tests also run CPython 3.12 and 3.13.
    cpython::ensure()?;
    // The export tests read the exported Parquet with DuckDB and pyarrow,
    // and query the SQLite export with the sqlite3 command.
    bench_report::duckdb_python()?;
    // The Perfetto export test parses the trace with Perfetto's own protos.
    perfetto_python::ensure()?;
    // The pprof export test reads its profiles with `go tool pprof` and
    // npm's pprof-format.
    pprof_readers::ensure()?;
    // The Spark test reads a parquetdir export with PySpark (and a JRE).
    spark::ensure()?;
    // The Kineto export test runs Holistic Trace Analysis on the traces.
    hta_python::ensure()?;
    ensure_command("sqlite3", "sqlite3", "the export tests' SQLite client")?;
    // The flame graph test renders the exported SVG in headless Chromium.
    ensure_command("chromium", "chromium", "the flame graph test's browser")?;
    // The source-line tests build C++ and compare with binutils' addr2line
    // (objcopy and readelf come with it).
    ensure_command("g++", "g++", "the source-line tests' C++ compiler")?;
    ensure_command("addr2line", "binutils", "the source-line tests' reference")?;
    // The debuginfod tests serve a stripped program's debug file with
    // elfutils' server on localhost.
    ensure_command("debuginfod", "debuginfod", "the debuginfod tests' server")?;
    // The JIT-map tests sample real V8 code (node --perf-basic-prof).
    ensure_command("node", "nodejs", "the JIT-map tests' JIT")?;
    // The USDT argument tests: markers built with <sys/sdt.h>, traced by
    // bpftrace beside asys; every SDT note of OpenJDK's libjvm is parsed.
    ensure_file(
        "/usr/include/x86_64-linux-gnu/sys/sdt.h",
        "systemtap-sdt-dev",
        "the USDT test workload's <sys/sdt.h>",
    )?;
    ensure_command("bpftrace", "bpftrace", "the USDT argument tests' peer tool")?;
    ensure_file(
        "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so",
        "openjdk-17-jre-headless",
        "the SDT notes of libjvm the USDT parser reads",
    )?;
    // The hostile neighbours' hung FUSE mount: a libfuse3 server of
    // nobody's, mounted by the setuid fusermount3.
    ensure_command("fusermount3", "fuse3", "the hung FUSE mount test's mount")?;
    ensure_file(
        "/usr/include/fuse3/fuse.h",
        "libfuse3-dev",
        "the hung FUSE mount test's server",
    )?;
    build_asys(false)?;
    let mut c = cargo();
    // Default members: the eBPF crate only builds for the BPF target.
    // --no-fail-fast: one failing test binary must not hide the others' results.
    c.args([
        "test",
        "--workspace",
        "--exclude",
        "asys-ebpf",
        "--no-fail-fast",
    ])
    .args(extra);
    let described = format!("{c:?}");
    let (status, output) = test_summary::run_teed(c)?;
    let summary = test_summary::parse(&output);
    if !status.success() {
        print!("{summary}");
        bail!("{described} failed: {status}");
    }
    // A short bounded fuzz run of the report readers (25 s per target) and
    // of the parsers of other users' data (8 s per target).
    let fuzzed = fuzz::fuzz(FUZZ_SECONDS_IN_TEST, PARSER_FUZZ_SECONDS_IN_TEST).map(|_| ());
    // The kernel-dependent subset inside Debian's real 6.1 and 6.12, under
    // qemu (docs/kernels.md); left out of a run narrowed by arguments.
    // Then the release, installed on clean Debian 11 and 12 roots and run
    // in the 6.1 guest (install_test.rs); also left out of a narrowed run.
    let vm = if extra.is_empty() {
        let vm = vm_test::run_task(&[]);
        let installed = install_test::run_task(&[]);
        match (vm, installed) {
            (Ok(()), r) | (r, Ok(())) => r,
            (Err(v), Err(i)) => Err(v.context(format!("and the install test: {i:#}"))),
        }
    } else {
        println!(
            "xtask: the VM pass and the install test are left out of a narrowed run ({extra:?})"
        );
        Ok(())
    };
    // Last, whatever the fuzzing and the VM pass gave: what ran, failed
    // and was ignored.
    print!("{summary}");
    match (fuzzed, vm) {
        (Ok(()), r) | (r, Ok(())) => r,
        (Err(f), Err(v)) => Err(f.context(format!("and the VM pass: {v:#}"))),
    }
}

/// Seconds per report fuzz target in `cargo xtask test` (three: 75 s).
const FUZZ_SECONDS_IN_TEST: u64 = 25;
/// Seconds per parser fuzz target in `cargo xtask test` (five: 40 s; the
/// parsers are fast, so this is a few hundred thousand runs each).
const PARSER_FUZZ_SECONDS_IN_TEST: u64 = 8;

fn main() -> std::process::ExitCode {
    match task() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn task() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("setup") => setup::setup(),
        Some("sim") => sim::build().map(|s| println!("{}", s.root.display())),
        Some("demo") => demo(),
        Some("pyenv") => python::ensure().map(|p| println!("{}", p.display())),
        Some("cpython") => cpython::ensure(),
        Some("test") => test(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("bench-sampling") => bench_sampling::run(&args[1..]),
        Some("bench-python") => bench_python::run(&args[1..]),
        Some("bench-waits") => bench_waits::run(&args[1..]),
        Some("bench-python-waits") => bench_python_waits::run(&args[1..]),
        Some("bench-osrt") => bench_osrt::run(&args[1..]),
        Some("bench-metrics") => bench_metrics::run(&args[1..]),
        Some("bench-pipeline") => bench_pipeline::run(&args[1..]),
        Some("bench-report") => bench_report::run(&args[1..]),
        Some("bench-zstd-levels") => bench_zstd::run(&args[1..]),
        Some("bench-export") => bench_export::run(&args[1..]),
        Some("bench-spark") => bench_spark::run(&args[1..]),
        Some("same-output") => same_output::run(&args[1..]),
        Some("bench-lines") => bench_lines::run(&args[1..]),
        Some("bench-torch") => bench_torch::run(&args[1..]),
        Some("bench-always-on") => bench_always_on::run(&args[1..]),
        Some("soak") => soak::run(&args[1..]),
        Some("attach-torch") => attach_torch::run(),
        Some("fuzz") => fuzz::run_task(&args[1..]),
        Some("import-cycles") => import_cycles::run(&args[1..]),
        Some("code-figures") => code_figures::run(&args[1..]),
        Some("vm-test") => vm_test::run_task(&args[1..]),
        Some("dist") => dist::run_task(&args[1..]),
        Some("install-test") => install_test::run_task(&args[1..]),
        _ => bail!(
            "usage: cargo xtask setup|sim|pyenv|cpython|demo|test|bench|bench-sampling|bench-python|bench-python-waits|bench-waits|bench-metrics|bench-osrt|bench-pipeline|\
             bench-report|bench-zstd-levels|bench-export|bench-spark|same-output|bench-lines|bench-torch|bench-always-on|soak|attach-torch|fuzz|import-cycles|code-figures|vm-test|dist|install-test"
        ),
    }
}
