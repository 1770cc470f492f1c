//! The data path benchmark: what asys itself costs per recorded
//! event, how large a report is per event, how fast events can come before
//! any is lost, and how long asys takes to finish after the application.
//!
//! The load is `rate_loop THREADS CALLS RATE` (sim/workloads): T threads each
//! make CALLS calls of `hggcGetLastError`, paced to RATE calls/s per thread
//! (0: as fast as they can), and print their own CPU time and exit time.
//!
//! - **asys CPU per event**: asys's CPU time is what `wait4` reports for it
//!   (its own, and the application it reaped) minus the CPU time the
//!   application reports for itself; start-up and teardown are taken out by
//!   subtracting a run with one call. Per event = difference / events.
//! - **bytes per event**: report file size / API calls recorded.
//! - **highest lossless rate** with 1, 2 and 4 threads: a run as fast as the
//!   threads can go; if asys lost events, a search over paced rates for the
//!   highest one with none lost.
//! - **finish**: from the application's exit (its own clock reading) to
//!   asys's exit, on a 10 M-event run.
//! - **stats against DuckDB**: `asys stats --report hggc_api_sum` on that
//!   10 M-event report, and DuckDB's same aggregation over the same Parquet
//!   (`bench_report`), interleaved: wall time, peak RSS, results compared.
//!
//! `--asys PATH` measures another build (for before/after figures); the
//! injection library is taken from beside it.
use std::{
    io::Read as _,
    os::unix::process::ExitStatusExt as _,
    path::PathBuf,
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

use crate::bench::{field, median};

/// What one run of asys over `rate_loop` gave.
#[derive(Debug, Clone)]
struct Run {
    /// asys's own CPU, ns (application's taken out).
    asys_cpu_ns: f64,
    /// API calls asys recorded, and events it says were lost.
    recorded: u64,
    lost: u64,
    /// Calls the application made, and at what rate.
    made: u64,
    calls_per_s: f64,
    /// From the application's exit to asys's, ns.
    finish_ns: f64,
    report_bytes: u64,
}

fn now_monotonic_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// Runs `cmd` to its end; its stdout, stderr, exit status, the CPU time
/// `wait4` reports for it (with the children it reaped), and when it ended.
fn run_measured(cmd: &mut Command) -> anyhow::Result<(String, String, i32, f64, f64)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    let mut out = child.stdout.take().context("stdout")?;
    let mut err = child.stderr.take().context("stderr")?;
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, whose pid std gave us; std never
    // waits for it after this (the Child is only dropped).
    let rc = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let ended = now_monotonic_ns();
    if rc < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let cpu = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    let cpu_ns = cpu(ru.ru_utime) + cpu(ru.ru_stime);
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    Ok((stdout, stderr, code, cpu_ns, ended))
}

/// `asys: collected N API calls ...; M events lost`.
fn collected(stderr: &str) -> Option<(u64, u64)> {
    let line = stderr.lines().find(|l| l.starts_with("asys: collected "))?;
    let calls = line
        .strip_prefix("asys: collected ")?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    let lost = line.rsplit_once("; ")?.1.split(' ').next()?.parse().ok()?;
    Some((calls, lost))
}

struct Setup {
    asys: PathBuf,
    rate_loop: PathBuf,
    out: PathBuf,
}

impl Setup {
    /// asys profile of `rate_loop threads calls rate` in `mode` (site|entry).
    fn run(&self, mode: &str, threads: u32, calls: u64, rate: f64) -> anyhow::Result<Run> {
        let report = self.out.join(format!("pipeline-{mode}"));
        let mut cmd = Command::new(&self.asys);
        cmd.args(["profile", "-t", "hggc", "--api-probes", mode, "-s", "none"])
            .args(["-f", "true", "-o"])
            .arg(&report)
            .arg(&self.rate_loop)
            .args([threads.to_string(), calls.to_string(), format!("{rate:.0}")]);
        let (stdout, stderr, code, cpu_ns, ended) = run_measured(&mut cmd)?;
        if code != 0 {
            bail!(
                "asys profile ({mode}, {threads} threads, {calls} calls) failed ({code}):\n{stderr}"
            );
        }
        let app_cpu = field(&stdout, "cpu_ns ").context("rate_loop printed no cpu_ns")?;
        let exit = field(&stdout, "exit_ns ").context("rate_loop printed no exit_ns")?;
        let (recorded, lost) =
            collected(&stderr).with_context(|| format!("asys printed no summary:\n{stderr}"))?;
        let report_bytes = std::fs::metadata(report.with_extension("asysrep"))
            .map(|m| m.len())
            .unwrap_or(0);
        Ok(Run {
            asys_cpu_ns: cpu_ns - app_cpu,
            recorded,
            lost,
            made: field(&stdout, "calls ").context("no calls")? as u64,
            calls_per_s: field(&stdout, "calls_per_s ").context("no calls_per_s")?,
            finish_ns: ended - exit,
            report_bytes,
        })
    }
}

/// asys CPU per event and report bytes per event in one mode, medians of
/// `rounds` (each round: a run of `calls` calls and a one-call run).
fn per_event(s: &Setup, mode: &str, calls: u64, rounds: usize) -> anyhow::Result<(f64, f64)> {
    let (mut cpu, mut bytes) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let big = s.run(mode, 1, calls, 0.0)?;
        let small = s.run(mode, 1, 1, 0.0)?;
        if big.recorded != big.made || big.lost != 0 {
            eprintln!(
                "  note: {mode}: {} calls made, {} recorded, {} lost",
                big.made, big.recorded, big.lost
            );
        }
        let events = (big.recorded - small.recorded.min(big.recorded)).max(1) as f64;
        cpu.push((big.asys_cpu_ns - small.asys_cpu_ns) / events);
        bytes.push(big.report_bytes as f64 / big.recorded.max(1) as f64);
        eprintln!(
            "  {mode}: {:.0} ns of asys CPU per event, {:.1} B per event",
            cpu.last().unwrap(),
            bytes.last().unwrap()
        );
    }
    Ok((median(&mut cpu), median(&mut bytes)))
}

/// The highest rate (calls/s, all threads) at which asys lost nothing, and
/// whether the threads' full speed was lossless.
fn lossless_rate(s: &Setup, mode: &str, threads: u32) -> anyhow::Result<(f64, bool)> {
    // About a second of calls at full speed.
    let probe = s.run(mode, threads, 100_000, 0.0)?;
    let per_thread_max = probe.calls_per_s / threads as f64;
    let calls = |rate: f64| ((rate * 1.0).max(10_000.0)) as u64;
    let full = s.run(mode, threads, calls(per_thread_max), 0.0)?;
    eprintln!(
        "  {mode} x{threads}: full speed {:.0} calls/s, {} lost",
        full.calls_per_s, full.lost
    );
    if full.lost == 0 && full.recorded == full.made {
        return Ok((full.calls_per_s, true));
    }
    // Search between nothing and full speed for the highest lossless pace.
    let (mut lo, mut hi) = (0.0f64, per_thread_max);
    let mut best = 0.0;
    for _ in 0..6 {
        let mid = (lo + hi) / 2.0;
        let r = s.run(mode, threads, calls(mid), mid)?;
        eprintln!(
            "  {mode} x{threads}: paced {:.0} calls/s, {} lost",
            r.calls_per_s, r.lost
        );
        if r.lost == 0 && r.recorded == r.made {
            lo = mid;
            best = r.calls_per_s;
        } else {
            hi = mid;
        }
    }
    Ok((best, false))
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut rounds = 3usize;
    let mut asys: Option<PathBuf> = None;
    let mut big_events: u64 = 10_000_000;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--asys" => asys = Some(it.next().context("--asys PATH")?.into()),
            "--finish-events" => {
                big_events = it.next().context("--finish-events N")?.parse()?;
            }
            n => rounds = n.parse().with_context(|| format!("unknown argument {n}"))?,
        }
    }
    crate::setup::setup()?;
    let sim = crate::sim::build()?;
    let asys = match asys {
        Some(p) => p,
        None => crate::build_asys(true)?,
    };
    let out = crate::target_dir().join("bench");
    std::fs::create_dir_all(&out)?;
    let s = Setup {
        asys: asys.clone(),
        rate_loop: sim.bin.join("rate_loop"),
        out: out.clone(),
    };
    println!("asys under test: {}", asys.display());
    let (site_cpu, site_bytes) = per_event(&s, "site", 1_000_000, rounds)?;
    let (entry_cpu, entry_bytes) = per_event(&s, "entry", 1_000_000, rounds)?;
    println!("asys CPU per recorded event (medians of {rounds}; goal <= 300 ns)");
    println!("  site  {site_cpu:>8.0} ns   entry {entry_cpu:>8.0} ns");
    println!("report bytes per API event (goal <= 10 site, <= 16 entry)");
    println!("  site  {site_bytes:>8.1} B    entry {entry_bytes:>8.1} B");

    let mut lossless = Vec::new();
    for threads in [1u32, 2, 4] {
        let (rate, full) = lossless_rate(&s, "site", threads)?;
        lossless.push((threads, rate, full));
    }
    println!(
        "highest lossless rate, site probes, default 8 MiB buffer, {} CPUs",
        cpus()
    );
    for (threads, rate, full) in &lossless {
        println!(
            "  {threads} thread(s): {rate:>10.0} calls/s{}",
            if *full {
                " (the threads' full speed: nothing lost)"
            } else {
                " (full speed lost events)"
            }
        );
    }

    let mut finish = Vec::new();
    let mut big = None;
    for _ in 0..rounds.min(3) {
        let r = s.run("site", 1, big_events, 0.0)?;
        big = Some(r.clone());
        eprintln!(
            "  finish after {} events: {:.3} s ({} lost)",
            r.recorded,
            r.finish_ns / 1e9,
            r.lost
        );
        finish.push(r.finish_ns / 1e9);
    }
    let finish = median(&mut finish);
    println!("application exit to asys exit, {big_events} events (goal <= 0.5 s): {finish:.3} s");

    // The last finish run's report: asys stats against DuckDB on it.
    let big = big.context("no finish run")?;
    if big.recorded < big_events || big.lost > 0 {
        bail!(
            "the {big_events}-call report holds {} calls ({} lost): not comparable",
            big.recorded,
            big.lost
        );
    }
    let report = out.join("pipeline-site.asysrep");
    let members = out.join("pipeline-members");
    let _ = std::fs::remove_dir_all(&members);
    crate::bench_report::extract(&report, &members)?;
    let python = crate::bench_report::duckdb_python()?;
    let f = crate::bench_report::compare_stats(&asys, &report, &members, &python, rounds)?;
    let _ = std::fs::remove_dir_all(&members);
    let (a_s, a_mb, d_s, d_q, d_mb) = (f.asys_s, f.asys_mb, f.duck_s, f.duck_query_s, f.duck_mb);
    println!(
        "asys stats --report hggc_api_sum on {} events (goal <= 1.5x DuckDB, <= 300 MB): \
         {a_s:.3} s {a_mb:.0} MB; DuckDB {d_s:.3} s (query alone {d_q:.3} s) {d_mb:.0} MB; \
         ratio {:.2}x of DuckDB's process, {:.2}x of its query; results match",
        big.recorded,
        a_s / d_s,
        a_s / d_q
    );
    let json = format!(
        "{{\"asys\":{:?},\"rounds\":{rounds},\"cpu_ns_per_event_site\":{site_cpu:.1},\
         \"cpu_ns_per_event_entry\":{entry_cpu:.1},\"bytes_per_event_site\":{site_bytes:.2},\
         \"bytes_per_event_entry\":{entry_bytes:.2},\"lossless_calls_per_s\":{{{}}},\
         \"finish_s\":{finish:.3},\"finish_events\":{big_events},\"stats_s\":{a_s:.3},\
         \"stats_peak_rss_mb\":{a_mb:.1},\"duckdb_s\":{d_s:.3},\"duckdb_query_s\":{d_q:.3},\"duckdb_peak_rss_mb\":{d_mb:.1}}}\n",
        asys.display().to_string(),
        lossless
            .iter()
            .map(|(t, r, full)| format!("\"{t}\":{{\"rate\":{r:.0},\"full_speed\":{full}}}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    std::fs::write(out.join("pipeline.json"), json)?;
    Ok(())
}

fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
