//! `cargo xtask bench-export`: stats, analyze and export of a 10 M-event
//! report against DuckDB doing the same work over the same Parquet, in one
//! run (release build of asys).
//!
//! 1. A report of ≥ `--events` (10 M) hggc events, API calls and device
//!    activity together: `multi_stream` (4 threads, each a loop of an async
//!    copy, a kernel launch and an async memset, so 3 calls and 3 device
//!    activities per iteration) with the simulated copy bandwidth raised so
//!    that copies do not sleep. Its tables are checked to hold every event.
//! 2. Interleaved rounds of each pair, each a child process timed here with
//!    its peak RSS from `/usr/bin/time -v`:
//!    - `stats --report hggc_api_sum` / DuckDB's aggregation (results equal);
//!    - `stats --report hggc_ppu_kern_sum` / the same over the activity
//!      joined with symbols and strings (results equal);
//!    - `stats --report hggc_api_trace --format csv` to a file / DuckDB's
//!      `COPY (SELECT ...) TO` CSV of the same rows and joins (row count and
//!      sums of start and duration equal);
//!    - `analyze` with ppu_gaps and hggc_api_sync / the rules as SQL (gaps
//!      through a window `max(end) OVER (... ROWS ... 1 PRECEDING)`; the
//!      findings equal);
//!    - `export --type parquetdir` / DuckDB `COPY ... TO` Parquet, zstd,
//!      `PARTITION_BY (pid)` for the tables that have a pid (row counts and
//!      sums equal, both read back by DuckDB);
//!    - `export --type sqlite` / the nearest baseline that runs offline
//!      (DuckDB's sqlite extension is a download): DuckDB `COPY ... TO` CSV
//!      of the same tables and columns, then the `sqlite3` command's
//!      `.import` into the same schema, in one transaction; the two
//!      processes' times add up, the higher RSS counts. DuckDB's CSV COPY
//!      alone is reported as well. Row counts and sums compared with
//!      `sqlite3` on both files.
//!
//! Medians and ratios are printed and written to `target/bench/export.json`.
//! Options: `--events N` (10 M), `--rounds N` (3), `--asys PATH`.
use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::{
    bench::median,
    bench_report::{
        Measured, duckdb_python, duckdb_sum, extract, measure, parse_asys_csv, same_results,
    },
};

/// Threads of `multi_stream`; each iteration makes 3 calls and 3 activities.
const THREADS: u64 = 4;
const EVENTS_PER_ITERATION: u64 = 6;
/// ppu_gaps' `gap=` in ms for the analyze pair.
const GAP_MS: u64 = 1;

const DUCKDB_SCRIPT: &str = r#"
import sys, os, time, duckdb
mode, m = sys.argv[1], sys.argv[2]
def p(name): return os.path.join(m, name + ".parquet")
t0 = time.perf_counter()
con = duckdb.connect()
con.execute(f"CREATE VIEW api AS SELECT * FROM read_parquet('{p('hggc_api')}')")
con.execute(f"CREATE VIEW act AS SELECT * FROM read_parquet('{p('hggc_activity')}')")
con.execute(f"CREATE VIEW strings AS SELECT * FROM read_parquet('{p('strings')}')")
con.execute(f"CREATE VIEW symbols AS SELECT * FROM read_parquet('{p('symbols')}')")
out = []
if mode == "kern_sum":
    rows = con.execute("""
      SELECT coalesce(s.value, printf('%#x', a.kernelAddr)) AS name, count(*), sum(d), avg(d),
             median(d), min(d), max(d), coalesce(stddev_samp(d), 0)
      FROM (SELECT pid, kernelAddr, greatest("end" - start, 0) AS d FROM act WHERE kind = 'kernel') a
      LEFT JOIN symbols y ON y.pid = a.pid AND y.addr = a.kernelAddr
      LEFT JOIN strings s ON s.id = y.nameId
      GROUP BY 1""").fetchall()
    for r in rows:
        out.append("\t".join(str(x) for x in (r[1], r[2], float(r[3]), float(r[4]), r[5], r[6], float(r[7]), r[0])))
elif mode == "trace":
    con.execute(f"""COPY (
      SELECT row_number() OVER (ORDER BY a.start, a.tid) AS "Row#", a.start AS "Start (ns)",
             greatest(a."end" - a.start, 0) AS "Duration (ns)", s.value AS "Name",
             a.returnValue AS "Result", a.correlationId AS "CorrId", a.pid AS "Pid", a.tid AS "Tid",
             a.bytes AS "Bytes", a.copyKind AS "Copy Kind", a.stream AS "Stream", a.ptr AS "Pointer",
             CASE WHEN a.kernelAddr IS NOT NULL THEN coalesce(ks.value, printf('%#x', a.kernelAddr)) END AS "Kernel",
             CASE WHEN a.gridX IS NOT NULL THEN concat_ws(',', a.gridX, a.gridY, a.gridZ) END AS "Grid",
             CASE WHEN a.blockX IS NOT NULL THEN concat_ws(',', a.blockX, a.blockY, a.blockZ) END AS "Block"
      FROM api a JOIN strings s ON s.id = a.nameId
      LEFT JOIN symbols y ON y.pid = a.pid AND y.addr = a.kernelAddr
      LEFT JOIN strings ks ON ks.id = y.nameId
      ORDER BY a.start, a.tid) TO '{sys.argv[3]}' (HEADER, DELIMITER ',')""")
elif mode == "analyze":
    gap_ns = int(sys.argv[3])
    # ppu_gaps: the device's busy-until before each activity is the latest
    # end of the activities before it (start order), on any stream.
    for r in con.execute(f"""
      SELECT busy, start, pid, device FROM (
        SELECT pid, device, start,
               max("end") OVER (PARTITION BY pid, device ORDER BY start, "end"
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy
        FROM act)
      WHERE busy IS NOT NULL AND start > busy AND start - busy >= {gap_ns}""").fetchall():
        out.append("gap\t%d\t%d\t%d\t%d" % r)
    # hggc_api_sync with threshold=0: every synchronizing call.
    for r in con.execute("""
      SELECT a.start, a."end", a.pid, a.tid, s.value FROM api a JOIN strings s ON s.id = a.nameId
      WHERE s.value IN ('hggcDeviceSynchronize', 'hggcStreamSynchronize', 'hggcEventSynchronize')""").fetchall():
        out.append("sync\t%d\t%d\t%d\t%d\t%s" % r)
elif mode == "parquetdir":
    d = sys.argv[3]
    os.makedirs(d)
    for f in sorted(os.listdir(m)):
        if not f.endswith(".parquet"):
            continue
        t = f[:-8]
        cols = [c[0] for c in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{p(t)}')").fetchall()]
        if "pid" in cols:
            con.execute(f"COPY (SELECT * FROM read_parquet('{p(t)}')) TO '{d}/{t}' "
                        "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (pid))")
        else:
            os.makedirs(f"{d}/{t}")
            con.execute(f"COPY (SELECT * FROM read_parquet('{p(t)}')) TO '{d}/{t}/part-0.parquet' "
                        "(FORMAT parquet, COMPRESSION zstd)")
elif mode == "csv":
    # The rows and columns asys's SQLite export writes for the big tables.
    d, origin = sys.argv[3], int(sys.argv[4])
    os.makedirs(d)
    gtid = "((pid::BIGINT << 24) | (tid & 16777215))"
    common = f"""a.start - {origin}, a."end" - {origin}, a.device, 0, a.stream, a.correlationId, a.pid::BIGINT << 24"""
    copies = {
        "CUPTI_ACTIVITY_KIND_RUNTIME": f"""SELECT start - {origin}, "end" - {origin}, 1, {gtid},
            correlationId, nameId, returnValue, NULL FROM api""",
        "CUPTI_ACTIVITY_KIND_KERNEL": f"""SELECT {common}, coalesce(y.nameId, 0), coalesce(y.nameId, 0),
            NULL, a.gridX, a.gridY, a.gridZ, a.blockX, a.blockY, a.blockZ, 0, a.sharedMem
            FROM act a LEFT JOIN symbols y ON y.pid = a.pid AND y.addr = a.kernelAddr
            WHERE a.kind = 'kernel'""",
        "CUPTI_ACTIVITY_KIND_MEMCPY": f"""SELECT {common}, bytes,
            CASE copyKind WHEN 0 THEN 9 WHEN 1 THEN 1 WHEN 2 THEN 2 WHEN 3 THEN 8 ELSE 0 END,
            srcKind, dstKind, device, device FROM act a WHERE kind = 'memcpy'""",
        "CUPTI_ACTIVITY_KIND_MEMSET": f"""SELECT {common}, NULL, bytes, dstKind FROM act a WHERE kind = 'memset'""",
        "StringIds": "SELECT id, value FROM strings",
    }
    for t, q in copies.items():
        con.execute(f"COPY ({q}) TO '{d}/{t}.csv' (HEADER false)")
print("seconds", time.perf_counter() - t0)
print("\n".join(out))
"#;

/// The schema asys's SQLite export gives these tables, for the baseline's
/// `sqlite3 .import` (import into an existing table keeps its types).
const SQLITE_SCHEMA: &str = "\
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, \
eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, \
returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, \
deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, \
correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, \
mangledName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, \
blockZ INTEGER, staticSharedMemory INTEGER, dynamicSharedMemory INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, \
deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, \
correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, \
srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, dstDeviceId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, \
deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, \
correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER NOT NULL, memKind INTEGER);
";

/// The tables the baseline imports; all but StringIds (to which asys adds
/// the names it makes, such as `[pid]` thread names) are compared.
const SQLITE_COMPARED: &[&str] = &[
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "StringIds",
];

/// The bench's working files.
struct Setup {
    asys: PathBuf,
    python: PathBuf,
    report: PathBuf,
    members: PathBuf,
    script: PathBuf,
    dir: PathBuf,
    origin: i64,
}

fn os(s: &str) -> &OsStr {
    s.as_ref()
}

/// `asys ARGS > out` under `/usr/bin/time` (the shell execs asys, so the
/// peak RSS is asys's).
fn measure_to_file(asys: &Path, args: &str, out: &Path) -> anyhow::Result<Measured> {
    let line = format!("exec '{}' {args} > '{}'", asys.display(), out.display());
    measure(Path::new("/bin/sh"), &[os("-c"), os(&line)])
}

fn duck(s: &Setup, mode: &str, extra: &[&OsStr]) -> anyhow::Result<(Measured, f64, Vec<String>)> {
    let mut args = vec![s.script.as_os_str(), os(mode), s.members.as_os_str()];
    args.extend_from_slice(extra);
    let m = measure(&s.python, &args)?;
    let mut query_s = 0.0;
    let mut lines = Vec::new();
    for line in m.stdout.lines() {
        match line.strip_prefix("seconds ") {
            Some(v) => query_s = v.trim().parse()?,
            None if !line.is_empty() => lines.push(line.to_string()),
            None => {}
        }
    }
    Ok((m, query_s, lines))
}

fn rows_of_duck(lines: &[String]) -> anyhow::Result<Vec<crate::bench_report::Row>> {
    lines
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.splitn(8, '\t').collect();
            if f.len() != 8 {
                bail!("unexpected DuckDB line {l:?}");
            }
            Ok(crate::bench_report::Row {
                count: f[0].parse()?,
                total: f[1].parse()?,
                avg: f[2].parse()?,
                med: f[3].parse()?,
                min: f[4].parse()?,
                max: f[5].parse()?,
                stddev: f[6].parse()?,
                name: f[7].to_string(),
            })
        })
        .collect()
}

/// Rows, and sums of the start and duration columns, of a trace CSV (asys
/// quotes fields with commas; neither column is one of them).
fn trace_digest(path: &Path) -> anyhow::Result<(u64, i128, i128)> {
    use std::io::BufRead;
    let f = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut lines = f.lines();
    let header = lines.next().context("empty trace")??;
    let cols: Vec<&str> = header.split(',').collect();
    let at = |name: &str| cols.iter().position(|c| c.trim_matches('"') == name);
    let (si, di) = (
        at("Start (ns)").context("no Start column")?,
        at("Duration (ns)").context("no Duration column")?,
    );
    let (mut n, mut start, mut dur) = (0u64, 0i128, 0i128);
    for line in lines {
        let line = line?;
        let f: Vec<&str> = line.splitn(di.max(si) + 2, ',').collect();
        start += f[si].parse::<i128>()?;
        dur += f[di].parse::<i128>()?;
        n += 1;
    }
    Ok((n, start, dur))
}

/// asys's analyze findings as the lines the DuckDB script prints.
fn analyze_findings(base: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let read = |rule: &str| -> anyhow::Result<Vec<Vec<String>>> {
        let p = PathBuf::from(format!("{}_{rule}.csv", base.display()));
        let text = std::fs::read_to_string(&p).with_context(|| p.display().to_string())?;
        Ok(text
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect())
    };
    // Duration,Start,End,PID,Device,Next Stream,Hint
    for f in read("ppu_gaps")? {
        out.push(format!("gap\t{}\t{}\t{}\t{}", f[2], f[3], f[4], f[5]));
    }
    // Duration,Start,End,PID,TID,Stream,Name,Hint
    for f in read("hggc_api_sync")? {
        out.push(format!(
            "sync\t{}\t{}\t{}\t{}\t{}",
            f[2], f[3], f[4], f[5], f[7]
        ));
    }
    out.sort();
    Ok(out)
}

/// Output of a DuckDB query over `dir`'s Parquet files (verification, not
/// timed).
fn duckdb_query(python: &Path, sql: &str) -> anyhow::Result<String> {
    let o = Command::new(python)
        .args([
            "-c",
            "import sys, duckdb\nfor r in duckdb.sql(sys.argv[1]).fetchall(): print(*r)",
            sql,
        ])
        .output()?;
    if !o.status.success() {
        bail!("DuckDB: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Row counts and sums of every table of a parquetdir dataset, as DuckDB
/// reads it (hive partitions).
pub(crate) fn parquetdir_digest(
    python: &Path,
    dir: &Path,
    members: &Path,
) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut tables: Vec<String> = std::fs::read_dir(members)?
        .filter_map(|e| {
            let n = e.ok()?.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".parquet").map(str::to_string)
        })
        .collect();
    tables.sort();
    for t in tables {
        let sum = match t.as_str() {
            "hggc_api" | "hggc_activity" => "sum(start), sum(\"end\"), sum(pid)",
            _ => "0, 0, 0",
        };
        let has_files = Command::new("find")
            .arg(dir.join(&t))
            .args(["-name", "*.parquet"])
            .output()
            .is_ok_and(|o| !o.stdout.is_empty());
        if !has_files {
            // An empty table with a pid column has no partition to write.
            out.push_str(&format!("{t} 0\n"));
            continue;
        }
        let glob = dir.join(&t).join("**/*.parquet");
        let q = format!(
            "SELECT '{t}', count(*), {sum} FROM read_parquet('{}', hive_partitioning = true, union_by_name = true)",
            glob.display()
        );
        out.push_str(&duckdb_query(python, &q)?);
    }
    Ok(out)
}

/// Row counts and sums of the compared tables of a SQLite file.
fn sqlite_digest(db: &Path) -> anyhow::Result<String> {
    let sql: String = SQLITE_COMPARED
        .iter()
        .filter(|t| **t != "StringIds")
        .map(|t| format!("SELECT '{t}', count(*), sum(start), sum(\"end\") FROM {t};\n"))
        .collect();
    let o = Command::new("sqlite3").arg(db).arg(sql).output()?;
    if !o.status.success() {
        bail!("sqlite3: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// One pair's figures over the rounds.
#[derive(Default)]
struct Pair {
    name: &'static str,
    asys_s: Vec<f64>,
    asys_mb: Vec<f64>,
    duck_s: Vec<f64>,
    duck_mb: Vec<f64>,
    /// DuckDB's own time for its work (from inside the process).
    duck_query_s: Vec<f64>,
}

impl Pair {
    fn push(&mut self, a: &Measured, d_s: f64, d_mb: f64, q: f64) {
        self.asys_s.push(a.wall_s);
        self.asys_mb.push(a.peak_rss_mb);
        self.duck_s.push(d_s);
        self.duck_mb.push(d_mb);
        self.duck_query_s.push(q);
        println!(
            "  {:<12} asys {:>7.3} s {:>6.0} MB | DuckDB {:>7.3} s (own {:.3} s) {:>6.0} MB | results match",
            self.name, a.wall_s, a.peak_rss_mb, d_s, q, d_mb
        );
    }

    fn json(&mut self) -> String {
        let (a_s, a_mb, d_s, d_mb, q) = (
            median(&mut self.asys_s),
            median(&mut self.asys_mb),
            median(&mut self.duck_s),
            median(&mut self.duck_mb),
            median(&mut self.duck_query_s),
        );
        println!(
            "{:<12} asys {a_s:.3} s {a_mb:.0} MB | DuckDB {d_s:.3} s (own {q:.3} s) {d_mb:.0} MB | \
             time {:.2}x, memory {:.2}x",
            self.name,
            a_s / d_s,
            a_mb / d_mb
        );
        format!(
            "    \"{}\": {{\"asys_s\": {a_s:.4}, \"asys_peak_rss_mb\": {a_mb:.1}, \
             \"duckdb_s\": {d_s:.4}, \"duckdb_own_s\": {q:.4}, \"duckdb_peak_rss_mb\": {d_mb:.1}, \
             \"time_ratio\": {:.3}, \"memory_ratio\": {:.3}}}",
            self.name,
            a_s / d_s,
            a_mb / d_mb
        )
    }
}

fn round(s: &Setup, pairs: &mut [Pair], csv_copy: &mut Vec<f64>) -> anyhow::Result<()> {
    let tmp = s.dir.join("out");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    api_sum(s, &mut pairs[0])?;
    kern_sum(s, &mut pairs[1])?;
    api_trace(s, &tmp, &mut pairs[2])?;
    analyze(s, &tmp, &mut pairs[3])?;
    parquetdir(s, &tmp, &mut pairs[4])?;
    sqlite(s, &tmp, &mut pairs[5], csv_copy)?;
    std::fs::remove_dir_all(&tmp)?;
    Ok(())
}

/// `asys stats --report REPORT --format csv` of the bench's report.
fn stats_csv(s: &Setup, report: &str) -> anyhow::Result<Measured> {
    measure(
        &s.asys,
        &[
            os("stats"),
            os("--report"),
            os(report),
            os("--format"),
            os("csv"),
            s.report.as_os_str(),
        ],
    )
}

/// stats: API summary.
fn api_sum(s: &Setup, pair: &mut Pair) -> anyhow::Result<()> {
    let a = stats_csv(s, "hggc_api_sum")?;
    let (d, q, rows) = duckdb_sum(&s.python, &s.members)?;
    same_results(&parse_asys_csv(&a.stdout)?, &rows)
        .map_err(|e| anyhow::anyhow!("api_sum: asys and DuckDB disagree: {e}"))?;
    pair.push(&a, d.wall_s, d.peak_rss_mb, q);
    Ok(())
}

/// stats: kernel summary.
fn kern_sum(s: &Setup, pair: &mut Pair) -> anyhow::Result<()> {
    let a = stats_csv(s, "hggc_ppu_kern_sum")?;
    let (d, q, lines) = duck(s, "kern_sum", &[])?;
    same_results(&parse_asys_csv(&a.stdout)?, &rows_of_duck(&lines)?)
        .map_err(|e| anyhow::anyhow!("kern_sum: asys and DuckDB disagree: {e}"))?;
    pair.push(&a, d.wall_s, d.peak_rss_mb, q);
    Ok(())
}

/// stats: the API trace to a CSV file.
fn api_trace(s: &Setup, tmp: &Path, pair: &mut Pair) -> anyhow::Result<()> {
    let (asys_csv, duck_csv) = (tmp.join("asys_trace.csv"), tmp.join("duck_trace.csv"));
    let a = measure_to_file(
        &s.asys,
        &format!(
            "stats --report hggc_api_trace --format csv '{}'",
            s.report.display()
        ),
        &asys_csv,
    )?;
    let (d, q, _) = duck(s, "trace", &[duck_csv.as_os_str()])?;
    let (ad, dd) = (trace_digest(&asys_csv)?, trace_digest(&duck_csv)?);
    if ad != dd {
        bail!("api_trace: asys (rows, Σstart, Σduration) {ad:?}, DuckDB {dd:?}");
    }
    pair.push(&a, d.wall_s, d.peak_rss_mb, q);
    std::fs::remove_file(&asys_csv)?;
    std::fs::remove_file(&duck_csv)?;
    Ok(())
}

/// analyze: ppu_gaps and the synchronizing calls.
fn analyze(s: &Setup, tmp: &Path, pair: &mut Pair) -> anyhow::Result<()> {
    let base = tmp.join("an");
    let a = measure(
        &s.asys,
        &[
            os("analyze"),
            os("--rule"),
            os(&format!("ppu_gaps:gap={GAP_MS}")),
            os("--rule"),
            os("hggc_api_sync:threshold=0"),
            os("--format"),
            os("csv"),
            os("-o"),
            base.as_os_str(),
            s.report.as_os_str(),
        ],
    )?;
    let gap_ns = (GAP_MS * 1_000_000).to_string();
    let (d, q, mut lines) = duck(s, "analyze", &[os(&gap_ns)])?;
    lines.sort();
    let found = analyze_findings(&base)?;
    if found != lines {
        bail!(
            "analyze: asys found {} ({} gaps), DuckDB {} ({} gaps)",
            found.len(),
            found.iter().filter(|l| l.starts_with("gap")).count(),
            lines.len(),
            lines.iter().filter(|l| l.starts_with("gap")).count()
        );
    }
    pair.push(&a, d.wall_s, d.peak_rss_mb, q);
    Ok(())
}

/// `asys export --type TYPE -o OUT` of the bench's report.
fn export(s: &Setup, kind: &str, out: &Path) -> anyhow::Result<Measured> {
    measure(
        &s.asys,
        &[
            os("export"),
            os("--type"),
            os(kind),
            os("-o"),
            out.as_os_str(),
            s.report.as_os_str(),
        ],
    )
}

/// export: parquetdir.
fn parquetdir(s: &Setup, tmp: &Path, pair: &mut Pair) -> anyhow::Result<()> {
    let (asys_pq, duck_pq) = (tmp.join("asys"), tmp.join("duck"));
    let a = export(s, "parquetdir", &asys_pq)?;
    let (d, q, _) = duck(s, "parquetdir", &[duck_pq.as_os_str()])?;
    let asys_pq = asys_pq.with_extension("parquetdir");
    let (ad, dd) = (
        parquetdir_digest(&s.python, &asys_pq, &s.members)?,
        parquetdir_digest(&s.python, &duck_pq, &s.members)?,
    );
    if ad != dd {
        bail!("parquetdir: asys\n{ad}DuckDB\n{dd}");
    }
    pair.push(&a, d.wall_s, d.peak_rss_mb, q);
    std::fs::remove_dir_all(&asys_pq)?;
    std::fs::remove_dir_all(&duck_pq)?;
    Ok(())
}

/// export: sqlite, against DuckDB's CSV COPY then sqlite3's .import.
fn sqlite(s: &Setup, tmp: &Path, pair: &mut Pair, csv_copy: &mut Vec<f64>) -> anyhow::Result<()> {
    let asys_db = tmp.join("asys");
    let a = export(s, "sqlite", &asys_db)?;
    let asys_db = asys_db.with_extension("sqlite");
    let csv_dir = tmp.join("csv");
    let origin = s.origin.to_string();
    let (d, q, _) = duck(s, "csv", &[csv_dir.as_os_str(), os(&origin)])?;
    let duck_db = tmp.join("duck.sqlite");
    let import_sql = tmp.join("import.sql");
    std::fs::write(&import_sql, sqlite_import(&csv_dir))?;
    let line = format!(
        "exec sqlite3 '{}' < '{}'",
        duck_db.display(),
        import_sql.display()
    );
    let i = measure(Path::new("/bin/sh"), &[os("-c"), os(&line)])?;
    let (ad, dd) = (sqlite_digest(&asys_db)?, sqlite_digest(&duck_db)?);
    if ad != dd {
        bail!("sqlite: asys\n{ad}DuckDB + sqlite3\n{dd}");
    }
    csv_copy.push(d.wall_s);
    pair.push(
        &a,
        d.wall_s + i.wall_s,
        d.peak_rss_mb.max(i.peak_rss_mb),
        q + i.wall_s,
    );
    Ok(())
}

/// The `sqlite3` script that imports the CSV files of `csv_dir` into asys's
/// schema, in one transaction.
fn sqlite_import(csv_dir: &Path) -> String {
    let mut import =
        format!("PRAGMA journal_mode=OFF;\nPRAGMA synchronous=OFF;\nBEGIN;\n{SQLITE_SCHEMA}");
    for t in SQLITE_COMPARED {
        import.push_str(&format!(
            ".import --csv '{}/{t}.csv' {t}\n",
            csv_dir.display()
        ));
    }
    import.push_str("COMMIT;\n");
    import
}

pub(crate) fn option(args: &[String], name: &str, default: u64) -> anyhow::Result<u64> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .with_context(|| format!("{name} needs a value"))?
            .parse()
            .with_context(|| name.to_string()),
        None => Ok(default),
    }
}

/// `"key": N` of a metadata.json text (the format is ours; no JSON parser).
pub(crate) fn json_number(text: &str, key: &str) -> Option<i64> {
    let v = text.split(&format!("\"{key}\": ")).nth(1)?;
    v.split([',', '\n', '}']).next()?.trim().parse().ok()
}

/// Records the bench's report of at least `events` hggc events with `asys`
/// into `dir` (`big.asysrep`), unpacks it into `dir/members`, and checks that
/// it holds every call and activity the workload made. Returns the report,
/// the members' folder, and the numbers of calls and activities.
pub fn record_report(
    asys: &Path,
    sim: &crate::sim::Sim,
    dir: &Path,
    events: u64,
) -> anyhow::Result<(PathBuf, PathBuf, u64, u64)> {
    record_report_with(asys, sim, dir, events, &[])
}

/// [`record_report`] with `env` set for the workload too (`RANK`).
pub fn record_report_with(
    asys: &Path,
    sim: &crate::sim::Sim,
    dir: &Path,
    events: u64,
    env: &[(&str, &str)],
) -> anyhow::Result<(PathBuf, PathBuf, u64, u64)> {
    let iterations = events.div_ceil(THREADS * EVENTS_PER_ITERATION);
    println!("== a report of {events}+ events: multi_stream {THREADS} {iterations} ==");
    let out = dir.join("big");
    let o = Command::new(asys)
        .args([
            "profile",
            "-t",
            "hggc",
            "--api-probes",
            "site",
            "-s",
            "none",
        ])
        .args(["--event-buffer-size", "262144", "-f", "true", "-o"])
        .arg(&out)
        .arg(sim.bin.join("multi_stream"))
        .arg(THREADS.to_string())
        .arg(iterations.to_string())
        // Copies and memsets sleep for their bytes at the simulated
        // bandwidth; at 1 PB/s they do not, and the loop makes events fast.
        .env("HGGC_SIM_BANDWIDTH_GBPS", "1000000")
        .envs(env.iter().copied())
        .output()
        .context("running asys profile")?;
    if !o.status.success() {
        bail!(
            "asys profile failed: {}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let report = out.with_extension("asysrep");
    let members = dir.join("members");
    extract(&report, &members)?;
    let meta = std::fs::read_to_string(members.join("metadata.json"))?;
    let tables = meta
        .split("\"tables\": {")
        .nth(1)
        .context("no tables in metadata")?;
    let api_rows = json_number(tables, "hggc_api").unwrap_or(0) as u64;
    let act_rows = json_number(tables, "hggc_activity").unwrap_or(0) as u64;
    // The workload's own account: 3 calls and 3 activities per iteration,
    // plus 6 set-up calls per thread.
    let made = THREADS * iterations;
    if act_rows != 3 * made || api_rows != 3 * made + 6 * THREADS {
        bail!(
            "the report holds {api_rows} calls and {act_rows} activities; the workload made {} and {}",
            3 * made + 6 * THREADS,
            3 * made
        );
    }
    Ok((report, members, api_rows, act_rows))
}

/// The options of this bench and bench-spark (`--events N`, `--rounds N`,
/// `--asys PATH`), with the simulated runtime built and asys built unless
/// given.
pub(crate) struct Options {
    pub events: u64,
    pub rounds: u64,
    pub sim: crate::sim::Sim,
    pub asys: PathBuf,
}

pub(crate) fn options(args: &[String]) -> anyhow::Result<Options> {
    let events = option(args, "--events", 10_000_000)?;
    let rounds = option(args, "--rounds", 3)?.max(1);
    let sim = crate::sim::build()?;
    let asys = match args.iter().position(|a| a == "--asys") {
        Some(i) => PathBuf::from(args.get(i + 1).context("--asys needs a path")?),
        None => crate::build_asys(true)?,
    };
    Ok(Options {
        events,
        rounds,
        sim,
        asys,
    })
}

/// Writes the results to `target/FILE`, says so, and removes the report
/// and its unpacked members.
pub(crate) fn write_results(
    file: &str,
    json: String,
    members: &Path,
    report: &Path,
) -> anyhow::Result<()> {
    let path = crate::target_dir().join(file);
    std::fs::write(&path, json)?;
    println!("wrote {}", path.display());
    let _ = std::fs::remove_dir_all(members);
    let _ = std::fs::remove_file(report);
    Ok(())
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let Options {
        events,
        rounds,
        sim,
        asys,
    } = options(args)?;
    crate::ensure_command("sqlite3", "sqlite3", "the SQLite baseline's .import")?;
    let python = duckdb_python()?;
    let dir = crate::target_dir().join("bench/export");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;

    let (report, members, api_rows, act_rows) = record_report(&asys, &sim, &dir, events)?;
    let meta = std::fs::read_to_string(members.join("metadata.json"))?;
    let bytes = std::fs::metadata(&report)?.len();
    println!(
        "{} events ({api_rows} calls, {act_rows} activities), every one the workload made; {bytes} bytes",
        api_rows + act_rows
    );
    let origin = json_number(&meta, "start_monotonic_ns").context("no start_monotonic_ns")?;
    let script = dir.join("duckdb_export.py");
    std::fs::write(&script, DUCKDB_SCRIPT)?;
    let s = Setup {
        asys,
        python,
        report: report.clone(),
        members: members.clone(),
        script,
        dir: dir.clone(),
        origin,
    };
    let names = [
        "api_sum",
        "kern_sum",
        "api_trace",
        "analyze",
        "parquetdir",
        "sqlite",
    ];
    let mut pairs: Vec<Pair> = names
        .iter()
        .map(|&name| Pair {
            name,
            ..Default::default()
        })
        .collect();
    let mut csv_copy = Vec::new();
    for r in 1..=rounds {
        println!("round {r}:");
        round(&s, &mut pairs, &mut csv_copy)?;
    }
    println!(
        "== medians of {rounds} rounds (sqlite's DuckDB side: COPY TO CSV + sqlite3 .import) =="
    );
    let entries: Vec<String> = pairs.iter_mut().map(Pair::json).collect();
    let csv_s = median(&mut csv_copy);
    let sqlite_s = median(&mut pairs[5].asys_s);
    println!(
        "sqlite export / DuckDB COPY TO CSV alone: {:.2}x ({sqlite_s:.3} s / {csv_s:.3} s)",
        sqlite_s / csv_s
    );
    let json = format!(
        "{{\n  \"events\": {},\n  \"api_rows\": {api_rows},\n  \"activity_rows\": {act_rows},\n  \
         \"report_bytes\": {bytes},\n  \"rounds\": {rounds},\n  \"pairs\": {{\n{}\n  }},\n  \
         \"duckdb_copy_to_csv_s\": {csv_s:.4},\n  \"sqlite_ratio_to_csv_copy\": {:.3}\n}}\n",
        api_rows + act_rows,
        entries.join(",\n"),
        sqlite_s / csv_s
    );
    write_results("bench/export.json", json, &members, &report)
}
