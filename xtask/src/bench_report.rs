//! `cargo xtask bench-report`: the report side, measured (release build).
//!
//! 1. A 10 M-call report (`asys profile -t hggc --api-probes site -s none` of
//!    `call_loop 10000000`), its API table checked to hold every call.
//! 2. Interleaved rounds of `asys stats --report hggc_api_sum --format csv`
//!    and DuckDB (from PyPI, in `target/bench/duckdb-venv`) running the same
//!    aggregation over the same Parquet members (`tar xf`): wall time and
//!    peak RSS of each child, results compared, medians and ratios printed.
//! 3. Bytes per API event of a 1 M-call report in site and entry mode.
//!
//! Figures go to `target/bench/report.json`. Options: `--calls N` (10 M),
//! `--size-calls N` (1 M), `--rounds N` (5), `--asys PATH` (a prebuilt asys
//! instead of this tree's release build). The pieces are `pub` for a
//! pipeline bench to reuse.
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, bail};

use crate::bench::median;

/// A report made by [`make_call_loop_report`].
pub struct Report {
    pub path: PathBuf,
    /// Rows of the report's `hggc_api` table (from its metadata).
    pub api_rows: u64,
    /// Events lost while recording, all sources.
    pub drops: u64,
    /// Size of the report file.
    pub bytes: u64,
}

/// The value of `"key": N` in the first object after `"section": {` of a
/// metadata.json text (the bench has no JSON parser; the format is ours).
fn json_number_in(text: &str, section: &str, key: &str) -> Option<u64> {
    let body = text.split(&format!("\"{section}\": {{")).nth(1)?;
    let body = body.split('}').next()?;
    let v = body.split(&format!("\"{key}\": ")).nth(1)?;
    v.split([',', '\n']).next()?.trim().parse().ok()
}

fn json_sum_of(text: &str, section: &str) -> u64 {
    text.split(&format!("\"{section}\": {{"))
        .nth(1)
        .and_then(|b| b.split('}').next())
        .map(|b| {
            b.split(',')
                .filter_map(|kv| kv.split(':').nth(1)?.trim().parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// Profiles `call_loop CALLS` with `--api-probes MODE` into `out` (without
/// extension) and reads back what the report holds.
pub fn make_call_loop_report(
    asys: &Path,
    call_loop: &Path,
    mode: &str,
    calls: u64,
    out: &Path,
) -> anyhow::Result<Report> {
    let path = out.with_extension("asysrep");
    let _ = std::fs::remove_file(&path);
    let o = Command::new(asys)
        .args(["profile", "-t", "hggc", "--api-probes", mode, "-s", "none"])
        // A large ring buffer: the bench measures reports, not drops.
        .args(["--event-buffer-size", "262144", "-f", "true", "-o"])
        .arg(out)
        .arg(call_loop)
        .arg(calls.to_string())
        .output()
        .context("running asys profile")?;
    if !o.status.success() {
        bail!(
            "asys profile failed: {}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let meta = Command::new("tar")
        .arg("-xOf")
        .arg(&path)
        .arg("metadata.json")
        .output()
        .context("tar")?;
    let text = String::from_utf8_lossy(&meta.stdout);
    let api_rows = json_number_in(&text, "tables", "hggc_api").unwrap_or(0);
    Ok(Report {
        bytes: std::fs::metadata(&path)?.len(),
        drops: json_sum_of(&text, "drops"),
        api_rows,
        path,
    })
}

/// Report bytes per API event of a `calls`-call report in `mode`.
pub fn bytes_per_event(
    asys: &Path,
    call_loop: &Path,
    mode: &str,
    calls: u64,
    dir: &Path,
) -> anyhow::Result<(f64, Report)> {
    let r = make_call_loop_report(
        asys,
        call_loop,
        mode,
        calls,
        &dir.join(format!("size-{mode}")),
    )?;
    if r.api_rows < calls {
        bail!(
            "{mode}: the API table holds {} rows of {calls} calls ({} events lost)",
            r.api_rows,
            r.drops
        );
    }
    Ok((r.bytes as f64 / r.api_rows as f64, r))
}

/// Unpacks a report's members into `dir` with tar, as a user would.
pub fn extract(report: &Path, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    crate::run(Command::new("tar").arg("xf").arg(report).arg("-C").arg(dir))
}

/// A venv with DuckDB and pyarrow from PyPI (the benchmarks and the export
/// tests read Parquet with them); its python.
pub fn duckdb_python() -> anyhow::Result<PathBuf> {
    let env = crate::target_dir().join("bench/duckdb-venv");
    let python = env.join("bin/python");
    if !python.exists() {
        crate::run(Command::new("python3").args(["-m", "venv"]).arg(&env))
            .context("creating a Python venv")?;
    }
    let has = Command::new(&python)
        .args(["-c", "import duckdb, pyarrow"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        crate::run(
            Command::new(env.join("bin/pip"))
                .args(crate::venv::PIP_INSTALL)
                .args(["duckdb", "pyarrow"]),
        )?;
    }
    Ok(python)
}

/// One timed child: wall time, peak RSS, stdout.
pub struct Measured {
    pub wall_s: f64,
    pub peak_rss_mb: f64,
    pub stdout: String,
}

/// Runs `cmd` under `/usr/bin/time -v` for its peak RSS; times it here.
pub fn measure(program: &Path, args: &[&std::ffi::OsStr]) -> anyhow::Result<Measured> {
    let t0 = Instant::now();
    let o = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(program)
        .args(args)
        .output()
        .context("/usr/bin/time (apt-get install time)")?;
    let wall_s = t0.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        bail!("{} failed: {}\n{stderr}", program.display(), o.status);
    }
    let rss_kb: f64 = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.trim().parse().ok())
        .context("no peak RSS from /usr/bin/time")?;
    Ok(Measured {
        wall_s,
        peak_rss_mb: rss_kb / 1024.0,
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
    })
}

/// One name's summary: count, total, avg, median, min, max, stddev.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub count: u64,
    pub total: u64,
    pub avg: f64,
    pub med: f64,
    pub min: u64,
    pub max: u64,
    pub stddev: f64,
}

/// Rows of `asys stats --report hggc_api_sum --format csv`.
pub fn parse_asys_csv(text: &str) -> anyhow::Result<Vec<Row>> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
    {
        // Row#,Time (%),Total,Num Calls,Avg,Med,Min,Max,StdDev,Name
        let f: Vec<&str> = line.splitn(10, ',').collect();
        if f.len() != 10 {
            bail!("unexpected csv line {line:?}");
        }
        out.push(Row {
            total: f[2].parse()?,
            count: f[3].parse()?,
            avg: f[4].parse()?,
            med: f[5].parse()?,
            min: f[6].parse()?,
            max: f[7].parse()?,
            stddev: f[8].parse()?,
            name: f[9].to_string(),
        });
    }
    Ok(out)
}

const DUCKDB_SCRIPT: &str = r#"
import sys, time, duckdb
api, strings = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
con = duckdb.connect()
rows = con.execute(f"""
  SELECT s.value, count(*), sum(d), avg(d), median(d), min(d), max(d),
         coalesce(stddev_samp(d), 0)
  FROM (SELECT nameId, greatest("end" - start, 0) AS d FROM read_parquet('{api}')) a
  JOIN read_parquet('{strings}') s ON s.id = a.nameId
  GROUP BY s.value""").fetchall()
t1 = time.perf_counter()
print("seconds", t1 - t0)
for r in rows:
    print("\t".join(str(x) for x in (r[1], r[2], float(r[3]), float(r[4]), r[5], r[6], float(r[7]), r[0])))
"#;

/// DuckDB's aggregation over the extracted members in `dir`: the child's
/// measurement, the query's own time, and its rows.
pub fn duckdb_sum(python: &Path, dir: &Path) -> anyhow::Result<(Measured, f64, Vec<Row>)> {
    let script = dir.join("duckdb_sum.py");
    std::fs::write(&script, DUCKDB_SCRIPT)?;
    let api = dir.join("hggc_api.parquet");
    let strings = dir.join("strings.parquet");
    let m = measure(
        python,
        &[script.as_os_str(), api.as_os_str(), strings.as_os_str()],
    )?;
    let mut query_s = 0.0;
    let mut rows = Vec::new();
    for line in m.stdout.lines() {
        if let Some(s) = line.strip_prefix("seconds ") {
            query_s = s.trim().parse()?;
            continue;
        }
        let f: Vec<&str> = line.splitn(8, '\t').collect();
        if f.len() != 8 {
            continue;
        }
        rows.push(Row {
            count: f[0].parse()?,
            total: f[1].parse()?,
            avg: f[2].parse()?,
            med: f[3].parse()?,
            min: f[4].parse()?,
            max: f[5].parse()?,
            stddev: f[6].parse()?,
            name: f[7].to_string(),
        });
    }
    Ok((m, query_s, rows))
}

/// Whether asys's rows (printed with one decimal) match DuckDB's.
pub fn same_results(asys: &[Row], duck: &[Row]) -> Result<(), String> {
    if asys.len() != duck.len() {
        return Err(format!("{} names vs DuckDB's {}", asys.len(), duck.len()));
    }
    let close = |a: f64, b: f64| (a - b).abs() <= 0.051 + 1e-9 * b.abs();
    for a in asys {
        let Some(d) = duck.iter().find(|d| d.name == a.name) else {
            return Err(format!("{} missing from DuckDB's result", a.name));
        };
        let exact = (a.count, a.total, a.min, a.max) == (d.count, d.total, d.min, d.max);
        if !exact || !close(a.avg, d.avg) || !close(a.med, d.med) || !close(a.stddev, d.stddev) {
            return Err(format!("{}: asys {a:?}, DuckDB {d:?}", a.name));
        }
    }
    Ok(())
}

/// `asys stats` against DuckDB: medians of wall time (s) and peak RSS (MB),
/// and DuckDB's query time alone.
pub struct StatsFigures {
    pub asys_s: f64,
    pub asys_mb: f64,
    pub duck_s: f64,
    pub duck_query_s: f64,
    pub duck_mb: f64,
}

/// Medians of `rounds` interleaved runs of `asys stats --report
/// hggc_api_sum --format csv REPORT` and of DuckDB's same aggregation over
/// the report's extracted members (`members`); fails if a round's results
/// differ.
pub fn compare_stats(
    asys: &Path,
    report: &Path,
    members: &Path,
    python: &Path,
    rounds: usize,
) -> anyhow::Result<StatsFigures> {
    let (mut asys_s, mut asys_mb, mut duck_s, mut duck_query_s, mut duck_mb) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds.max(1) {
        let a = measure(
            asys,
            &[
                "stats".as_ref(),
                "--report".as_ref(),
                "hggc_api_sum".as_ref(),
                "--format".as_ref(),
                "csv".as_ref(),
                report.as_os_str(),
            ],
        )?;
        let (d, q, duck_rows) = duckdb_sum(python, members)?;
        let asys_rows = parse_asys_csv(&a.stdout)?;
        if let Err(e) = same_results(&asys_rows, &duck_rows) {
            bail!("asys and DuckDB disagree: {e}");
        }
        println!(
            "round {round}: asys {:.3} s {:.0} MB | DuckDB {:.3} s (query {:.3} s) {:.0} MB | results match",
            a.wall_s, a.peak_rss_mb, d.wall_s, q, d.peak_rss_mb
        );
        asys_s.push(a.wall_s);
        asys_mb.push(a.peak_rss_mb);
        duck_s.push(d.wall_s);
        duck_query_s.push(q);
        duck_mb.push(d.peak_rss_mb);
    }
    Ok(StatsFigures {
        asys_s: median(&mut asys_s),
        asys_mb: median(&mut asys_mb),
        duck_s: median(&mut duck_s),
        duck_query_s: median(&mut duck_query_s),
        duck_mb: median(&mut duck_mb),
    })
}

fn option(args: &[String], name: &str, default: u64) -> anyhow::Result<u64> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .with_context(|| format!("{name} needs a value"))?
            .parse()
            .with_context(|| name.to_string()),
        None => Ok(default),
    }
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let calls = option(args, "--calls", 10_000_000)?;
    let size_calls = option(args, "--size-calls", 1_000_000)?;
    let rounds = option(args, "--rounds", 5)?.max(1);
    let sim = crate::sim::build()?;
    // --asys PATH measures another build (an earlier version, for before and
    // after figures); its injection library must lie beside it.
    let asys = match args.iter().position(|a| a == "--asys") {
        Some(i) => PathBuf::from(args.get(i + 1).context("--asys needs a path")?),
        None => crate::build_asys(true)?,
    };
    let call_loop = sim.bin.join("call_loop");
    let dir = crate::target_dir().join("bench/report");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let python = duckdb_python()?;

    println!("== a {calls}-call report (site mode) ==");
    let big = make_call_loop_report(&asys, &call_loop, "site", calls, &dir.join("big"))?;
    if big.api_rows < calls {
        bail!(
            "the API table holds {} rows of {calls} calls ({} events lost)",
            big.api_rows,
            big.drops
        );
    }
    println!(
        "{} API rows, {} bytes ({:.2} B/event)",
        big.api_rows,
        big.bytes,
        big.bytes as f64 / big.api_rows as f64
    );
    let members = dir.join("members");
    extract(&big.path, &members)?;

    let f = compare_stats(&asys, &big.path, &members, &python, rounds as usize)?;
    let (a_s, a_mb, d_s, d_q, d_mb) = (f.asys_s, f.asys_mb, f.duck_s, f.duck_query_s, f.duck_mb);
    println!(
        "median: asys stats {a_s:.3} s, {a_mb:.0} MB peak | DuckDB process {d_s:.3} s, query {d_q:.3} s, {d_mb:.0} MB peak"
    );
    println!(
        "ratio asys / DuckDB: {:.2}x of the process, {:.2}x of the query alone",
        a_s / d_s,
        a_s / d_q
    );
    let _ = std::fs::remove_dir_all(&members);
    let _ = std::fs::remove_file(&big.path);

    println!("== bytes per API event ({size_calls} calls) ==");
    let (site, site_r) = bytes_per_event(&asys, &call_loop, "site", size_calls, &dir)?;
    println!("site:  {site:.2} B/event ({} bytes)", site_r.bytes);
    let (entry, entry_r) = bytes_per_event(&asys, &call_loop, "entry", size_calls, &dir)?;
    println!("entry: {entry:.2} B/event ({} bytes)", entry_r.bytes);

    let json = format!(
        "{{\n  \"calls\": {calls},\n  \"rounds\": {rounds},\n  \"stats_report_bytes\": {},\n  \
         \"asys_stats_s\": {a_s:.4},\n  \"asys_stats_peak_rss_mb\": {a_mb:.1},\n  \
         \"duckdb_process_s\": {d_s:.4},\n  \"duckdb_query_s\": {d_q:.4},\n  \
         \"duckdb_peak_rss_mb\": {d_mb:.1},\n  \"ratio_to_duckdb_process\": {:.3},\n  \
         \"ratio_to_duckdb_query\": {:.3},\n  \"size_calls\": {size_calls},\n  \
         \"site_bytes_per_event\": {site:.3},\n  \"entry_bytes_per_event\": {entry:.3}\n}}\n",
        big.bytes,
        a_s / d_s,
        a_s / d_q,
    );
    let out = crate::target_dir().join("bench/report.json");
    std::fs::write(&out, json)?;
    println!("wrote {}", out.display());
    Ok(())
}
