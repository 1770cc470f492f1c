//! `cargo xtask same-output --before PATH [--after PATH] [--events N | --report R]`:
//! checks that a change to how asys reads reports left every output byte
//! for byte as it was. Both binaries run on one report (bench-export's
//! workload, 1 M events by default, recorded by the "after" binary): every
//! `stats` report in csv, json and column format (traces in csv and json),
//! `analyze` with every rule in csv and json, and each `export` format.
//! Files are compared byte for byte, an SQLite export table by table
//! (each table's columns and rows, so that page layout and the spelling
//! of `CREATE TABLE` do not count).
//! "after" is a release build of this tree unless given. `--report R` compares
//! the two on R instead (a report with findings, samples or ranges).
use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

/// Export formats whose files are compared byte for byte.
const EXPORTS: &[&str] = &[
    "parquetdir",
    "arrow",
    "jsonlines",
    "perfetto",
    "kineto",
    "collapsed",
    "flamegraph",
];

fn output(asys: &Path, args: &[&OsStr]) -> anyhow::Result<(bool, Vec<u8>, Vec<u8>)> {
    let o = Command::new(asys)
        .args(args)
        .output()
        .with_context(|| format!("running {}", asys.display()))?;
    Ok((o.status.success(), o.stdout, o.stderr))
}

/// The names `stats --help-reports` lists.
fn report_names(asys: &Path) -> anyhow::Result<Vec<String>> {
    let (ok, out, err) = output(asys, &["stats".as_ref(), "--help-reports".as_ref()])?;
    if !ok {
        bail!("stats --help-reports: {}", String::from_utf8_lossy(&err));
    }
    Ok(String::from_utf8(out)?
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Every file under `dir`, relative to it, sorted.
fn files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir)?.to_path_buf());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Each table of an SQLite file: its columns (name, type, NOT NULL,
/// place in the primary key, from `PRAGMA table_info`) and its rows in
/// rowid order, each value quoted as SQL writes it. The `CREATE TABLE`
/// text itself does not count: how it is spelled (a key as a column or a
/// table constraint) changes nothing a query sees.
fn sqlite_dump(db: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let o = Command::new("sqlite3")
        .arg(db)
        .arg("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name;")
        .output()?;
    let mut out = Vec::new();
    for t in String::from_utf8(o.stdout)?.lines() {
        let columns = Command::new("sqlite3")
            .arg(db)
            .arg(format!(
                "SELECT name, type, \"notnull\", pk FROM pragma_table_info('{t}') ORDER BY cid;"
            ))
            .output()?;
        let rows = Command::new("sqlite3")
            .args(["-cmd", ".mode quote"])
            .arg(db)
            .arg(format!("SELECT * FROM \"{t}\" ORDER BY rowid;"))
            .output()?;
        anyhow::ensure!(
            columns.status.success() && rows.status.success(),
            "sqlite3 could not read table {t} of {}: {}",
            db.display(),
            String::from_utf8_lossy(&rows.stderr)
        );
        let mut d = columns.stdout;
        d.extend(rows.stdout);
        out.push((t.to_string(), d));
    }
    Ok(out)
}

/// The value after `name` in `args`, if it is there.
fn value<'a>(args: &'a [String], name: &str) -> anyhow::Result<Option<&'a String>> {
    args.iter()
        .position(|a| a == name)
        .map(|i| {
            args.get(i + 1)
                .with_context(|| format!("{name} needs a value"))
        })
        .transpose()
}

/// The outputs compared so far, and how those that differ do.
#[derive(Default)]
struct Comparison {
    compared: usize,
    differ: Vec<String>,
}

impl Comparison {
    fn same(&mut self, what: String, b: &[u8], a: &[u8]) {
        self.compared += 1;
        if a != b {
            let line = a
                .split(|&c| c == b'\n')
                .zip(b.split(|&c| c == b'\n'))
                .position(|(x, y)| x != y)
                .map_or("at the end".into(), |n| format!("from line {}", n + 1));
            self.differ.push(format!(
                "{what}: {} bytes before, {} after, differing {line}",
                b.len(),
                a.len()
            ));
        }
    }
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let before = PathBuf::from(value(args, "--before")?.context("--before PATH is needed")?);
    let after = match value(args, "--after")? {
        Some(p) => PathBuf::from(p),
        None => crate::build_asys(true)?,
    };
    let events: u64 = value(args, "--events")?.map_or(Ok(1_000_000), |v| v.parse())?;
    crate::ensure_command("sqlite3", "sqlite3", "comparing SQLite exports")?;
    let sim = crate::sim::build()?;
    let dir = crate::target_dir().join("bench/same-output");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let (report, calls, activities) = match value(args, "--report")? {
        // A report of the user's (one with findings, samples, ranges).
        Some(r) => (PathBuf::from(r), 0, 0),
        None => {
            let (r, _, c, a) = crate::bench_export::record_report(&after, &sim, &dir, events)?;
            (r, c, a)
        }
    };
    println!(
        "== {calls} calls and {activities} activities; before {} after {} ==",
        before.display(),
        after.display()
    );
    let report = report.as_os_str();
    let mut cmp = Comparison::default();
    compare_runs(&before, &after, report, &mut cmp)?;
    run_exports(&before, &after, &dir, report, &mut cmp)?;
    compare_exports(&dir, &mut cmp)?;
    let _ = std::fs::remove_dir_all(&dir);
    let Comparison { compared, differ } = cmp;
    if !differ.is_empty() {
        bail!(
            "{} of {compared} outputs differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
    println!("all {compared} outputs are byte-identical");
    Ok(())
}

/// Reports and rules: their stdout and stderr.
fn compare_runs(
    before: &Path,
    after: &Path,
    report: &OsStr,
    cmp: &mut Comparison,
) -> anyhow::Result<()> {
    for r in &stats_and_analyze_runs(after)? {
        let mut a: Vec<&OsStr> = r.iter().map(OsStr::new).collect();
        a.push(report);
        let (ok_b, out_b, err_b) = output(before, &a)?;
        let (ok_a, out_a, err_a) = output(after, &a)?;
        let what = r.join(" ");
        if ok_a != ok_b {
            cmp.differ
                .push(format!("{what}: succeeded {ok_b} before, {ok_a} after"));
        }
        cmp.same(format!("{what} (stdout)"), &out_b, &out_a);
        cmp.same(format!("{what} (stderr)"), &err_b, &err_a);
    }
    Ok(())
}

/// The arguments of every `stats` report in each format and of `analyze`,
/// the report left out.
fn stats_and_analyze_runs(after: &Path) -> anyhow::Result<Vec<Vec<String>>> {
    let mut runs: Vec<Vec<String>> = Vec::new();
    for name in report_names(after)? {
        // Column output of a trace is left out: before the streamed traces,
        // the column writer looked at every row again for each cell (the
        // 500,000-row API trace had not finished after 7 minutes). Column
        // output of every other report goes through the same writer.
        let formats: &[&str] = if name.ends_with("_trace") {
            &["csv", "json"]
        } else {
            &["csv", "json", "column"]
        };
        for f in formats {
            runs.push(vec![
                "stats".into(),
                "-r".into(),
                name.clone(),
                "-f".into(),
                f.to_string(),
            ]);
        }
    }
    for f in ["csv", "json"] {
        runs.push(vec!["analyze".into(), "-f".into(), f.into()]);
    }
    Ok(runs)
}

/// Exports of each format by both binaries, into `dir/before` and
/// `dir/after`; whether each succeeded and what it said are compared.
fn run_exports(
    before: &Path,
    after: &Path,
    dir: &Path,
    report: &OsStr,
    cmp: &mut Comparison,
) -> anyhow::Result<()> {
    // Exports: every file, and SQLite by table. Each format alone, so that
    // one a report cannot give (a flame graph without samples) fails alike
    // on both sides and the others are still compared.
    for t in ["sqlite"].iter().chain(EXPORTS) {
        let mut results = Vec::new();
        for (side, asys) in [("before", before), ("after", after)] {
            let base = dir.join(side).join("x");
            std::fs::create_dir_all(base.parent().expect("a folder"))?;
            let (ok, _, err) = output(
                asys,
                &[
                    "export".as_ref(),
                    "-t".as_ref(),
                    t.as_ref(),
                    "-o".as_ref(),
                    base.as_os_str(),
                    report,
                ],
            )?;
            // The paths differ by side; the message otherwise not.
            let side_dir = dir.join(side).display().to_string();
            let err = String::from_utf8_lossy(&err).replace(&side_dir, "DIR");
            results.push((ok, err));
        }
        if results[0] != results[1] {
            cmp.differ.push(format!(
                "export -t {t}: {:?} before, {:?} after",
                results[0], results[1]
            ));
        }
    }
    Ok(())
}

/// The exported files of both sides: the same names, and each the same
/// bytes (an SQLite file the same tables).
fn compare_exports(dir: &Path, cmp: &mut Comparison) -> anyhow::Result<()> {
    let (b, a) = (dir.join("before"), dir.join("after"));
    let (fb, fa) = (files(&b)?, files(&a)?);
    if fb != fa {
        cmp.differ
            .push(format!("export files: {fb:?} before, {fa:?} after"));
    }
    for f in fb.iter().filter(|f| fa.contains(f)) {
        if f.extension().is_some_and(|e| e == "sqlite") {
            compare_sqlite(f, &b.join(f), &a.join(f), cmp)?;
        } else {
            cmp.same(
                f.display().to_string(),
                &std::fs::read(b.join(f))?,
                &std::fs::read(a.join(f))?,
            );
        }
    }
    Ok(())
}

/// The SQLite export `f` of both sides, table by table.
fn compare_sqlite(f: &Path, b: &Path, a: &Path, cmp: &mut Comparison) -> anyhow::Result<()> {
    let (db, da) = (sqlite_dump(b)?, sqlite_dump(a)?);
    // Table by name: a table only one side has is a difference of
    // its own, and does not shift the pairing of the others.
    let (nb, na): (Vec<&String>, Vec<&String>) = (
        db.iter().map(|t| &t.0).collect(),
        da.iter().map(|t| &t.0).collect(),
    );
    for t in nb.iter().filter(|t| !na.contains(t)) {
        cmp.differ
            .push(format!("{}: table {t} only before", f.display()));
    }
    for t in na.iter().filter(|t| !nb.contains(t)) {
        cmp.differ
            .push(format!("{}: table {t} only after", f.display()));
    }
    for (tb, xb) in &db {
        if let Some((_, xa)) = da.iter().find(|(ta, _)| ta == tb) {
            cmp.same(format!("{} table {tb}", f.display()), xb, xa);
        }
    }
    Ok(())
}
