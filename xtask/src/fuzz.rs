//! `cargo xtask fuzz [seconds]`: the report readers and the parsers of what
//! other users give asys under libFuzzer (`cargo +nightly fuzz`, installed
//! if missing), each target for `seconds` (default 60); it prints the
//! executions of each and in all.
//!
//! Report targets (fuzz/fuzz_targets), from a seed corpus of real reports of
//! the sim workloads made here (never committed: reports are binaries of a
//! few hundred KiB): `container` (a whole report file), `metadata`
//! (metadata.json, alone and as a report's metadata) and `table` (one
//! table's Parquet bytes, its first byte picking the table, read by every
//! stats report).
//!
//! Parser targets, from small valid inputs written by the code below
//! ([`seeds`]), under a 512 MB RSS limit and a check in each target
//! that what a parser keeps stays within a fixed multiple of its input (so
//! that amplification is found, not only panics): `perf_map`, `jitdump`,
//! `proc_maps` (`/proc/PID/maps` lines), `python` (CPython 3.10-3.13
//! interpreter, thread and frame states and code objects, read through a
//! made-up address space) and `registry` (the NVTX registration table).
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::{build_asys, cargo, root, run, sim};

mod seeds;

pub const REPORT_TARGETS: &[&str] = &["container", "metadata", "table", "pprof"];
pub const PARSER_TARGETS: &[&str] = &["perf_map", "jitdump", "proc_maps", "python", "registry"];

/// Every table of a report, in the order the `table` target picks them by
/// (its input's first byte).
use asys_report::report::ALL_TABLES as TABLES;

pub fn run_task(args: &[String]) -> anyhow::Result<()> {
    let seconds = match args.first() {
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|&s| s > 0)
            .with_context(|| format!("'{s}' is not a number of seconds"))?,
        None => 60,
    };
    fuzz(seconds, seconds).map(|_| ())
}

/// Seeds, then each report target for `report_seconds` and each parser
/// target for `parser_seconds`; the executions per target (each printed,
/// and their total). A crash (a panic that escaped the readers, an
/// amplification, an RSS past the limit, or a hang) fails the task, with
/// libFuzzer's reproducer left in fuzz/artifacts.
pub fn fuzz(report_seconds: u64, parser_seconds: u64) -> anyhow::Result<Vec<(&'static str, u64)>> {
    ensure_cargo_fuzz()?;
    let corpus = root().join("fuzz/corpus");
    seed(&corpus)?;
    seeds::write(&corpus)?;
    let mut out = Vec::new();
    let targets = REPORT_TARGETS
        .iter()
        .map(|t| (t, report_seconds, false))
        .chain(PARSER_TARGETS.iter().map(|t| (t, parser_seconds, true)));
    for (target, seconds, parser) in targets {
        let limits: &[&str] = match parser {
            // A decoder may allocate what a damaged page header claims
            // (a page is up to 2 GiB; one input took 4.8 GB after 1.2 M
            // runs): that is memory, not a crash, and this bounds it.
            // Footers, which could ask for any amount, are bounded by
            // asys before decoding (report/footer_bounds.rs).
            false => &["-rss_limit_mb=8192"],
            // What other users feed asys must not make it hold much: 512
            // MB, for RSS and for any one allocation. Inputs up
            // to 160 KiB, so that a whole NVTX table (131 KiB) fits.
            true => &[
                "-rss_limit_mb=512",
                "-malloc_limit_mb=512",
                "-max_len=163840",
            ],
        };
        let log = Command::new("cargo")
            .current_dir(root().join("fuzz"))
            // No sanitizer: the readers are safe Rust, so what is looked
            // for is a panic or an abort, which needs none; without ASan the
            // build takes minutes, not a quarter of an hour, and runs ~3x
            // more inputs a second.
            .args(["+nightly", "fuzz", "run", "--release", "-s", "none", target])
            .arg(corpus.join(target))
            .args([
                "--",
                &format!("-max_total_time={seconds}"),
                "-print_final_stats=1",
                "-timeout=10",
            ])
            .args(limits)
            .output()
            .with_context(|| format!("cannot run cargo fuzz for {target}"))?;
        let text = String::from_utf8_lossy(&log.stderr);
        if !log.status.success() {
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "fuzz target {target} failed ({}):\n{}",
                log.status,
                tail.join("\n")
            );
        }
        let execs = text
            .lines()
            .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .with_context(|| format!("{target}: libFuzzer printed no execution count"))?;
        println!("fuzz: {target}: {execs} executions in {seconds} s, no crash");
        out.push((*target, execs));
    }
    let total: u64 = out.iter().map(|(_, n)| n).sum();
    println!("fuzz: {total} executions in all, no crash");
    Ok(out)
}

fn ensure_cargo_fuzz() -> anyhow::Result<()> {
    let installed = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        run(cargo().args(["install", "cargo-fuzz", "--locked"]))?;
    }
    Ok(())
}

/// Real reports of the sim workloads (every table asys writes for them),
/// split into each target's seeds.
fn seed(corpus: &Path) -> anyhow::Result<()> {
    let sim = sim::build()?;
    let asys = build_asys(false)?;
    let work = root().join("target/fuzz-seeds");
    std::fs::create_dir_all(&work)?;
    let runs: &[(&str, &[&str], &[&str])] = &[
        (
            "train_step",
            &[
                "-t",
                "hggc,hgtx",
                "--hggc-backtrace",
                "all:0",
                "-s",
                "process-tree",
                "-b",
                "dwarf",
            ],
            &["2"],
        ),
        ("hgtx_ranges", &["-t", "hggc,hgtx"], &[]),
        (
            "call_loop",
            &["-t", "hggc,osrt", "--cpuctxsw", "process-tree"],
            &["2000"],
        ),
    ];
    for dir in REPORT_TARGETS {
        std::fs::create_dir_all(corpus.join(dir))?;
    }
    for (workload, opts, app_args) in runs {
        let report: PathBuf = work.join(workload);
        let out = Command::new(&asys)
            .arg("profile")
            .args(*opts)
            .args(["-f", "true", "-o"])
            .arg(&report)
            .arg(sim.bin.join(workload))
            .args(*app_args)
            .output()
            .context("running asys profile for seeds")?;
        if !out.status.success() {
            bail!(
                "asys profile {workload} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let bytes = std::fs::read(report.with_extension("asysrep"))?;
        std::fs::write(corpus.join("container").join(workload), &bytes)?;
        // The pprof export's target reads whole reports too.
        std::fs::write(corpus.join("pprof").join(workload), &bytes)?;
        for (name, data) in tar_members(&bytes) {
            if name == "metadata.json" {
                std::fs::write(corpus.join("metadata").join(workload), data)?;
            }
            let Some(table) = name.strip_suffix(".parquet") else {
                continue;
            };
            let Some(pick) = TABLES.iter().position(|t| *t == table) else {
                continue;
            };
            let mut seed = vec![pick as u8];
            seed.extend_from_slice(data);
            std::fs::write(
                corpus.join("table").join(format!("{workload}-{table}")),
                seed,
            )?;
        }
    }
    Ok(())
}

/// A whole tar's members (name, bytes), read by hand.
fn tar_members(tar: &[u8]) -> Vec<(String, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 512 <= tar.len() && tar[at..at + 512].iter().any(|&b| b != 0) {
        let h = &tar[at..at + 512];
        let name_len = h[..100].iter().position(|&b| b == 0).unwrap_or(100);
        let name = String::from_utf8_lossy(&h[..name_len]).into_owned();
        let size_text: String = h[124..136]
            .iter()
            .take_while(|&&b| b != 0 && b != b' ')
            .map(|&b| b as char)
            .collect();
        let Ok(size) = usize::from_str_radix(size_text.trim(), 8) else {
            break;
        };
        let data = at + 512;
        let Some(bytes) = tar.get(data..data + size) else {
            break;
        };
        out.push((name, bytes));
        at = data + size.div_ceil(512) * 512;
    }
    out
}
