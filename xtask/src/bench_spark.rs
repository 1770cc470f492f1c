//! `cargo xtask bench-spark`: the parquetdir export of a 10 M-event report
//! against DuckDB writing the same hive-partitioned dataset, and a per-rank
//! aggregate query by Spark (PySpark, local mode) over each dataset, in one
//! run (release build of asys).
//!
//! 1. The report of `bench-export` (≥ `--events`, 10 M, hggc calls and
//!    device activity of `multi_stream`), recorded with `RANK=0` so that its
//!    process has a rank and its rows go under `host=H/rank=0/report=R`.
//! 2. Interleaved rounds of:
//!    - `asys export --type parquetdir` / DuckDB `COPY ... TO` Parquet, zstd,
//!      `PARTITION_BY (host, rank, report)` from the report's own Parquet
//!      members, each row's rank joined from the `processes` table as asys
//!      does (rows of an unranked pid under `(host, pid, report)`, tables
//!      without a pid under `(host, report)`); both datasets' row counts and
//!      sums compared, as DuckDB reads them back;
//!    - Spark over asys's dataset / Spark over DuckDB's: per (host, rank,
//!      report) the kernels' count and time, and per rank and API name the
//!      calls' count and time (a join with `strings`); both results equal,
//!      and their counts the report's rows. Wall time includes the JVM's
//!      start; Spark's own time (after the session is up) is given too;
//!    - DuckDB's run of the same query over asys's dataset, for scale.
//!
//! Medians and ratios are printed and written to `target/bench/spark.json`.
//! Options: `--events N` (10 M), `--rounds N` (3), `--asys PATH`.
use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};

use crate::{
    bench::median,
    bench_export::{json_number, options, parquetdir_digest, record_report_with, write_results},
    bench_report::{Measured, duckdb_python, measure},
};

/// DuckDB writes the dataset asys's parquetdir export writes: argv MEMBERS
/// OUT HOST REPORT.
const DUCKDB_WRITE: &str = r#"
import sys, os, time, duckdb
m, d, host, report = sys.argv[1:5]
def p(t): return os.path.join(m, t + ".parquet")
t0 = time.perf_counter()
con = duckdb.connect()
con.execute(f"""CREATE TABLE ranks AS SELECT DISTINCT pid, rank FROM read_parquet('{p("processes")}')
                WHERE rank IS NOT NULL""")
os.makedirs(d)
opts = "FORMAT parquet, COMPRESSION zstd, OVERWRITE_OR_IGNORE true"
for f in sorted(os.listdir(m)):
    if not f.endswith(".parquet"):
        continue
    t = f[:-8]
    cols = [c[0] for c in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{p(t)}')").fetchall()]
    keys = f"'{host}' AS host, '{report}' AS report"
    if "pid" in cols:
        own = "t.* EXCLUDE (rank)" if "rank" in cols else "t.*"
        con.execute(f"""COPY (SELECT {own}, {keys}, r.rank FROM read_parquet('{p(t)}') t JOIN ranks r USING (pid))
                        TO '{d}/{t}' ({opts}, PARTITION_BY (host, rank, report))""")
        con.execute(f"""COPY (SELECT t.*, {keys} FROM read_parquet('{p(t)}') t ANTI JOIN ranks r USING (pid))
                        TO '{d}/{t}' ({opts}, PARTITION_BY (host, pid, report))""")
    else:
        con.execute(f"""COPY (SELECT *, {keys} FROM read_parquet('{p(t)}'))
                        TO '{d}/{t}' ({opts}, PARTITION_BY (host, report))""")
print("seconds", time.perf_counter() - t0)
"#;

/// The per-rank query, in SQL both engines take; `{api}`, `{act}` and
/// `{strings}` name the tables.
const QUERY_KERNELS: &str = "
  SELECT host, rank, report, count(*), sum(greatest(`end` - start, 0))
  FROM {act} WHERE kind = 'kernel' GROUP BY host, rank, report";
const QUERY_API: &str = "
  SELECT a.host, a.rank, s.value, count(*), sum(greatest(a.`end` - a.start, 0))
  FROM {api} a JOIN {strings} s ON s.host = a.host AND s.report = a.report AND s.id = a.nameId
  GROUP BY a.host, a.rank, s.value";

/// Spark's run of the query over argv DATASET: result lines, then
/// `seconds` (after the session is up).
const SPARK_READ: &str = r#"
import sys, time
from pyspark.sql import SparkSession
root, q_kern, q_api = sys.argv[1:4]
spark = (SparkSession.builder.master("local[*]").appName("asys-bench-spark")
         .config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "4g")
         .config("spark.driver.host", "127.0.0.1")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
t0 = time.perf_counter()
for t in ["hggc_activity", "hggc_api", "strings"]:
    spark.read.parquet(f"{root}/{t}").createOrReplaceTempView(t)
names = {"act": "hggc_activity", "api": "hggc_api", "strings": "strings"}
out = []
for q in (q_kern, q_api):
    for r in spark.sql(q.format(**names)).collect():
        out.append("\t".join(str(x) for x in r))
secs = time.perf_counter() - t0
for l in sorted(out):
    print(l)
print("seconds", secs)
spark.stop()
"#;

/// DuckDB's run of the same query over argv DATASET.
const DUCKDB_READ: &str = r#"
import sys, time, duckdb
root, q_kern, q_api = sys.argv[1:4]
t0 = time.perf_counter()
con = duckdb.connect()
names = {t: f"read_parquet('{root}/{n}/**/*.parquet', hive_partitioning = true)"
         for t, n in [("act", "hggc_activity"), ("api", "hggc_api"), ("strings", "strings")]}
out = []
for q in (q_kern, q_api):
    for r in con.execute(q.replace("`", '"').format(**names)).fetchall():
        out.append("\t".join(str(x) for x in r))
secs = time.perf_counter() - t0
for l in sorted(out):
    print(l)
print("seconds", secs)
"#;

fn os(s: &str) -> &OsStr {
    s.as_ref()
}

/// A timed Python script's result lines and its own `seconds`.
fn script(
    python: &Path,
    script: &Path,
    args: &[&OsStr],
) -> anyhow::Result<(Measured, f64, Vec<String>)> {
    let mut all = vec![script.as_os_str()];
    all.extend_from_slice(args);
    let m = measure(python, &all)?;
    let mut own = None;
    let mut lines = Vec::new();
    for l in m.stdout.lines() {
        match l.strip_prefix("seconds ") {
            Some(v) => own = Some(v.trim().parse::<f64>()?),
            None if !l.is_empty() => lines.push(l.to_string()),
            None => {}
        }
    }
    let own = own.with_context(|| format!("{} said no seconds: {}", script.display(), m.stdout))?;
    Ok((m, own, lines))
}

/// One measured thing over the rounds: wall s, peak RSS MB, own s.
#[derive(Default)]
struct Series {
    wall: Vec<f64>,
    rss: Vec<f64>,
    own: Vec<f64>,
}

impl Series {
    fn push(&mut self, m: &Measured, own: f64) {
        self.wall.push(m.wall_s);
        self.rss.push(m.peak_rss_mb);
        self.own.push(own);
    }

    fn medians(&mut self) -> (f64, f64, f64) {
        (
            median(&mut self.wall),
            median(&mut self.rss),
            median(&mut self.own),
        )
    }
}

/// `"key": "value"` of a metadata.json text.
fn json_string(text: &str, key: &str) -> Option<String> {
    let v = text.split(&format!("\"{key}\": \"")).nth(1)?;
    Some(v.split('"').next()?.to_string())
}

/// The bench's programs, report and scripts.
struct Setup {
    asys: PathBuf,
    python: PathBuf,
    spark: PathBuf,
    dir: PathBuf,
    report: PathBuf,
    members: PathBuf,
    /// The report's host and name, as asys's dataset partitions by them.
    host: String,
    name: String,
    api_rows: u64,
    act_rows: u64,
    /// The report's size.
    bytes: u64,
    write_py: PathBuf,
    spark_py: PathBuf,
    duck_py: PathBuf,
}

/// Each measured thing over the rounds.
#[derive(Default)]
struct Rounds {
    a_exp: Series,
    d_exp: Series,
    s_asys: Series,
    s_duck: Series,
    d_read: Series,
    /// The last round's datasets' sizes: asys's, DuckDB's.
    dataset_bytes: (u64, u64),
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let o = options(args)?;
    let python = duckdb_python()?;
    let spark = crate::spark::ensure()?;
    let dir = crate::target_dir().join("bench/spark");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let s = set_up(o.asys, &o.sim, python, spark, dir, o.events)?;
    let mut m = Rounds::default();
    for r in 1..=o.rounds {
        println!("round {r}:");
        let out = s.dir.join("out");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out)?;
        let (asys_pq, duck_pq) = export_pair(&s, &out, &mut m)?;
        read_pair(&s, &asys_pq, &duck_pq, &mut m)?;
        std::fs::remove_dir_all(&out)?;
    }
    print_medians(&s, &mut m, o.rounds)
}

/// Records the report with rank 0, checks its rank and host, and writes
/// the scripts.
fn set_up(
    asys: PathBuf,
    sim: &crate::sim::Sim,
    python: PathBuf,
    spark: PathBuf,
    dir: PathBuf,
    events: u64,
) -> anyhow::Result<Setup> {
    let (report, members, api_rows, act_rows) =
        record_report_with(&asys, sim, &dir, events, &[("RANK", "0")])?;
    let meta = std::fs::read_to_string(members.join("metadata.json"))?;
    if json_number(&meta, "rank") != Some(0) {
        bail!("the report records no rank 0");
    }
    let host = json_string(&meta, "host").context("no host in the metadata")?;
    if host
        .bytes()
        .any(|b| !(b.is_ascii_alphanumeric() || b"._-".contains(&b)))
    {
        bail!("host {host:?} would be %-encoded by asys: run where the hostname is plain");
    }
    let name = report
        .file_stem()
        .and_then(|n| n.to_str())
        .context("report name")?
        .to_string();
    let bytes = std::fs::metadata(&report)?.len();
    println!(
        "{} events ({api_rows} calls, {act_rows} activities); {bytes} bytes; host {host}, rank 0",
        api_rows + act_rows
    );
    let write_py = dir.join("duckdb_write.py");
    let spark_py = dir.join("spark_read.py");
    let duck_py = dir.join("duckdb_read.py");
    std::fs::write(&write_py, DUCKDB_WRITE)?;
    std::fs::write(&spark_py, SPARK_READ)?;
    std::fs::write(&duck_py, DUCKDB_READ)?;
    Ok(Setup {
        asys,
        python,
        spark,
        dir,
        report,
        members,
        host,
        name,
        api_rows,
        act_rows,
        bytes,
        write_py,
        spark_py,
        duck_py,
    })
}

/// A round's export by asys and by DuckDB into `out`, compared; returns
/// the two datasets.
fn export_pair(s: &Setup, out: &Path, m: &mut Rounds) -> anyhow::Result<(PathBuf, PathBuf)> {
    let asys_pq = out.join("asys");
    let a = measure(
        &s.asys,
        &[
            os("export"),
            os("--type"),
            os("parquetdir"),
            os("-o"),
            asys_pq.as_os_str(),
            s.report.as_os_str(),
        ],
    )?;
    let asys_pq = asys_pq.with_extension("parquetdir");
    let duck_pq = out.join("duck");
    let (d, own, _) = script(
        &s.python,
        &s.write_py,
        &[
            s.members.as_os_str(),
            duck_pq.as_os_str(),
            os(&s.host),
            os(&s.name),
        ],
    )?;
    let (ad, dd) = (
        parquetdir_digest(&s.python, &asys_pq, &s.members)?,
        parquetdir_digest(&s.python, &duck_pq, &s.members)?,
    );
    if ad != dd {
        bail!("the datasets differ: asys\n{ad}DuckDB\n{dd}");
    }
    m.a_exp.push(&a, a.wall_s);
    m.d_exp.push(&d, own);
    println!(
        "  export      asys {:>7.3} s {:>6.0} MB | DuckDB COPY {:>7.3} s (own {own:.3} s) {:>6.0} MB | same rows",
        a.wall_s, a.peak_rss_mb, d.wall_s, d.peak_rss_mb
    );
    m.dataset_bytes = (du(&asys_pq)?, du(&duck_pq)?);
    Ok((asys_pq, duck_pq))
}

/// A round's per-rank query by Spark over each dataset and by DuckDB over
/// asys's, compared.
fn read_pair(s: &Setup, asys_pq: &Path, duck_pq: &Path, m: &mut Rounds) -> anyhow::Result<()> {
    let q = [os(QUERY_KERNELS), os(QUERY_API)];
    let read =
        |py: &Path, read_py: &Path, ds: &Path| script(py, read_py, &[ds.as_os_str(), q[0], q[1]]);
    let (sa, sa_own, sa_rows) = read(&s.spark, &s.spark_py, asys_pq)?;
    let (sd, sd_own, sd_rows) = read(&s.spark, &s.spark_py, duck_pq)?;
    let (dr, dr_own, dr_rows) = read(&s.python, &s.duck_py, asys_pq)?;
    if sa_rows != sd_rows || sa_rows != dr_rows {
        bail!(
            "the per-rank results differ:\nSpark on asys's\n{}\nSpark on DuckDB's\n{}\nDuckDB on asys's\n{}",
            sa_rows.join("\n"),
            sd_rows.join("\n"),
            dr_rows.join("\n")
        );
    }
    check_counts(&sa_rows, &s.host, &s.name, s.api_rows, s.act_rows)?;
    m.s_asys.push(&sa, sa_own);
    m.s_duck.push(&sd, sd_own);
    m.d_read.push(&dr, dr_own);
    println!(
        "  read        Spark on asys's {:>7.3} s (own {sa_own:.3} s) | Spark on DuckDB's {:>7.3} s (own {sd_own:.3} s) | \
         DuckDB on asys's {:>7.3} s | results match",
        sa.wall_s, sd.wall_s, dr.wall_s
    );
    Ok(())
}

/// The medians and ratios, printed and written to `target/bench/spark.json`.
fn print_medians(s: &Setup, m: &mut Rounds, rounds: u64) -> anyhow::Result<()> {
    let (api_rows, act_rows, bytes) = (s.api_rows, s.act_rows, s.bytes);
    let dataset_bytes = m.dataset_bytes;
    let (ae, ae_mb, _) = m.a_exp.medians();
    let (de, de_mb, de_own) = m.d_exp.medians();
    // Spark's peak RSS is left out: /usr/bin/time sees the Python driver,
    // not the JVM it starts (a child it does not wait for).
    let (sa, _, sa_own) = m.s_asys.medians();
    let (sd, _, sd_own) = m.s_duck.medians();
    let (dr, dr_mb, dr_own) = m.d_read.medians();
    println!("== medians of {rounds} rounds ==");
    println!(
        "export: asys {ae:.3} s {ae_mb:.0} MB | DuckDB COPY PARTITION_BY {de:.3} s (own {de_own:.3} s) {de_mb:.0} MB | \
         time {:.2}x, memory {:.2}x; dataset {} / {} bytes",
        ae / de,
        ae_mb / de_mb,
        dataset_bytes.0,
        dataset_bytes.1
    );
    println!(
        "Spark per-rank query: on asys's dataset {sa:.3} s (own {sa_own:.3} s) | on DuckDB's {sd:.3} s (own {sd_own:.3} s) | \
         ratio {:.2}x (own {:.2}x)",
        sa / sd,
        sa_own / sd_own
    );
    println!(
        "DuckDB's run of the query on asys's dataset: {dr:.3} s (own {dr_own:.3} s) {dr_mb:.0} MB"
    );
    let json = format!(
        "{{\n  \"events\": {},\n  \"api_rows\": {api_rows},\n  \"activity_rows\": {act_rows},\n  \
         \"report_bytes\": {bytes},\n  \"rounds\": {rounds},\n  \
         \"export\": {{\"asys_s\": {ae:.4}, \"asys_peak_rss_mb\": {ae_mb:.1}, \"duckdb_s\": {de:.4}, \
         \"duckdb_own_s\": {de_own:.4}, \"duckdb_peak_rss_mb\": {de_mb:.1}, \"time_ratio\": {:.3}, \
         \"memory_ratio\": {:.3}, \"asys_dataset_bytes\": {}, \"duckdb_dataset_bytes\": {}}},\n  \
         \"spark_read\": {{\"asys_dataset_s\": {sa:.4}, \"asys_dataset_own_s\": {sa_own:.4}, \
         \"duckdb_dataset_s\": {sd:.4}, \"duckdb_dataset_own_s\": {sd_own:.4}, \"time_ratio\": {:.3}, \"own_time_ratio\": {:.3}}},\n  \
         \"duckdb_read_of_asys_dataset\": {{\"s\": {dr:.4}, \"own_s\": {dr_own:.4}, \"peak_rss_mb\": {dr_mb:.1}}}\n}}\n",
        api_rows + act_rows,
        ae / de,
        ae_mb / de_mb,
        dataset_bytes.0,
        dataset_bytes.1,
        sa / sd,
        sa_own / sd_own
    );
    write_results("bench/spark.json", json, &s.members, &s.report)
}

/// The query's counts are the report's rows: every kernel (a third of the
/// activities) and every call, all under rank 0 of `host`.
fn check_counts(
    rows: &[String],
    host: &str,
    report: &str,
    api_rows: u64,
    act_rows: u64,
) -> anyhow::Result<()> {
    let (mut kernels, mut calls) = (0u64, 0u64);
    for r in rows {
        let f: Vec<&str> = r.split('\t').collect();
        if f.len() != 5 || f[0] != host || f[1] != "0" {
            bail!("unexpected result row {r:?}");
        }
        let n: u64 = f[3].parse()?;
        if f[2] == report {
            kernels += n;
        } else {
            calls += n;
        }
    }
    if kernels != act_rows / 3 || calls != api_rows {
        bail!(
            "the query counted {kernels} kernels and {calls} calls; the report holds {} and {api_rows}",
            act_rows / 3
        );
    }
    Ok(())
}

/// Bytes of the files under `dir`.
fn du(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let t = e.file_type()?;
        total += if t.is_dir() {
            du(&e.path())?
        } else {
            e.metadata()?.len()
        };
    }
    Ok(total)
}
