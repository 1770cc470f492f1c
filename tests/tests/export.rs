//! `asys export`: what other tools read out of the exported files, with
//! those tools (the `sqlite3` command), against the workload's ground truth
//! and asys's own stats on the same report.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use asys_tests::*;
use serde_json::Value;

/// Rows of `query` run by the sqlite3 command on `db`, fields split on '|'.
fn export(args: &[&str], report: &Path) -> std::process::Output {
    let mut a = vec!["export"];
    a.extend_from_slice(args);
    a.push(report.to_str().unwrap());
    run(&a)
}

fn export_sqlite(report: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec!["--type", "sqlite"];
    args.extend_from_slice(extra);
    let o = export(&args, report);
    assert!(o.status.success(), "asys export failed: {}", stderr(&o));
    let db = report.with_extension("sqlite");
    assert!(db.is_file(), "{} was not written", db.display());
    db
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn nsys_style_queries_on_the_sqlite_export_give_the_workloads_numbers() {
    let s = Scratch::new("export-sqlite");
    let p = profile_workload(&s, &["-t", "hggc,hgtx"], "train_step", &["5", "8192"], &[]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let truth = ground_truth(&p.truth);
    let db = export_sqlite(&p.report, &[]);

    // Kernels per name, through StringIds on shortName, as nsys users
    // count them.
    let launches: Vec<&Value> = truth
        .iter()
        .filter(|t| t["api"] == "hggcLaunchKernel" && t["ret"] == 0)
        .collect();
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for t in &launches {
        *want
            .entry(t["kernel"].as_str().unwrap().into())
            .or_default() += 1;
    }
    assert_eq!(want.values().sum::<u64>(), 15, "{want:?}");
    let got: BTreeMap<String, u64> = sqlite(
        &db,
        "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k \
         JOIN StringIds AS s ON s.id = k.shortName GROUP BY s.value",
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].parse().unwrap()))
    .collect();
    assert_eq!(got, want);

    // Kernel time per name equals asys's own kernel summary.
    let stats: BTreeMap<String, i64> = stats_json(&p.report, "hggc_ppu_kern_sum")
        .iter()
        .map(|r| {
            (
                r["Name"].as_str().unwrap().to_string(),
                i(&r["Total Time (ns)"]),
            )
        })
        .collect();
    let totals: BTreeMap<String, i64> = sqlite(
        &db,
        "SELECT s.value, sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k \
         JOIN StringIds AS s ON s.id = k.demangledName GROUP BY s.value",
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].parse().unwrap()))
    .collect();
    assert_eq!(totals, stats);

    // Every kernel has its launch call, joined on correlationId, with the
    // runtime's correlation id, grid and block, on the launching thread.
    let rows = sqlite(
        &db,
        "SELECT k.correlationId, r.globalTid >> 24, r.globalTid & 16777215, s.value, \
         k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.globalPid >> 24 \
         FROM CUPTI_ACTIVITY_KIND_KERNEL AS k \
         JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId \
         JOIN StringIds AS s ON s.id = r.nameId ORDER BY k.correlationId",
    );
    let mut want: Vec<String> = launches
        .iter()
        .map(|t| {
            let dims = |v: &Value| {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            };
            format!(
                "corr={} pid={} tid={} hggcLaunchKernel grid={} block={} pid={}",
                t["corr"],
                t["pid"],
                t["tid"],
                dims(&t["grid"]),
                dims(&t["block"]),
                t["pid"]
            )
        })
        .collect();
    want.sort();
    let mut got: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "corr={} pid={} tid={} {} grid={},{},{} block={},{},{} pid={}",
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10]
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, want);

    // Copies: bytes per CUPTI copy kind (1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH)
    // equal what the runtime was asked to copy.
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for t in truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().starts_with("hggcMemcpy") && t["ret"] == 0)
    {
        let kind = ["9", "1", "2", "8"][i(&t["kind"]) as usize];
        *want.entry(kind.into()).or_default() += i(&t["bytes"]);
    }
    assert!(!want.is_empty());
    let got: BTreeMap<String, i64> = sqlite(
        &db,
        "SELECT copyKind, sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind",
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].parse().unwrap()))
    .collect();
    assert_eq!(got, want);
    let memsets: i64 = truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().starts_with("hggcMemset") && t["ret"] == 0)
        .count() as i64;
    assert_eq!(
        sqlite(&db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")[0][0],
        memsets.to_string()
    );

    // Every runtime call of the workload, by name.
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for t in truth
        .iter()
        .filter(|t| t["api"].as_str().unwrap().starts_with("hggc"))
    {
        *want.entry(t["api"].as_str().unwrap().into()).or_default() += 1;
    }
    let got: BTreeMap<String, u64> = sqlite(
        &db,
        "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r \
         JOIN StringIds AS s ON s.id = r.nameId GROUP BY s.value",
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].parse().unwrap()))
    .collect();
    assert_eq!(got, want);

    // Times are since the session start, which TARGET_INFO_SESSION_START_TIME
    // puts on the wall clock.
    let start = sqlite(&db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
    assert_eq!(
        start[0][0],
        metadata(&p.report)["start_realtime_ns"].to_string()
    );
    let first = sqlite(&db, "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME");
    let first: i64 = first[0][0].parse().unwrap();
    assert!((0..60_000_000_000).contains(&first), "{first}");

    // hgtx ranges as NVTX push/pop ranges (eventType 59) on the thread
    // that pushed them, their text both inline and through textId.
    let mut want: Vec<String> = truth
        .iter()
        .filter(|t| t["api"] == "hgtxRangePushA" && i(&t["ret"]) >= 0)
        .map(|t| {
            format!(
                "{} {} {}",
                t["pid"],
                t["tid"],
                t["message"].as_str().unwrap()
            )
        })
        .collect();
    want.sort();
    assert!(!want.is_empty());
    let mut got: Vec<String> = sqlite(
        &db,
        "SELECT n.globalTid >> 24, n.globalTid & 16777215, n.text, s.value \
         FROM NVTX_EVENTS AS n JOIN StringIds AS s ON s.id = n.textId \
         WHERE n.eventType = 59",
    )
    .into_iter()
    .map(|r| {
        assert_eq!(r[2], r[3], "text and textId disagree");
        format!("{} {} {}", r[0], r[1], r[2])
    })
    .collect();
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn nvtx_ranges_per_thread_through_thread_names() {
    let s = Scratch::new("export-nvtx");
    let p = profile_workload(&s, &["-t", "hggc,hgtx"], "hgtx_ranges", &[], &[]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let truth = ground_truth(&p.truth);
    // Only the tables the query needs (--tables, any case).
    let db = export_sqlite(
        &p.report,
        &["--tables", "nvtx_events,ThreadNames,StringIds"],
    );
    let tables = sqlite(
        &db,
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    );
    assert_eq!(
        tables.concat(),
        ["NVTX_EVENTS", "StringIds", "ThreadNames"],
        "only the tables asked for"
    );
    // Push/pop ranges per thread, the thread found through ThreadNames by
    // its globalTid, as nsys users write it.
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    let mut pids = std::collections::BTreeSet::new();
    for t in truth.iter().filter(|t| {
        matches!(
            t["api"].as_str().unwrap(),
            "hgtxRangePushA" | "hgtxRangePushW" | "hgtxRangePushEx" | "hgtxDomainRangePushEx"
        ) && i(&t["ret"]) >= 0
    }) {
        pids.insert(i(&t["pid"]));
        *want
            .entry(format!("hgtx_ranges pid={} tid={}", t["pid"], t["tid"]))
            .or_default() += 1;
    }
    assert!(
        want.len() >= 2,
        "the workload pushes on several threads: {want:?}"
    );
    let got: BTreeMap<String, u64> = sqlite(
        &db,
        "SELECT s.value, (t.globalTid >> 24), (t.globalTid & 16777215), count(*) \
         FROM NVTX_EVENTS AS n JOIN ThreadNames AS t ON t.globalTid = n.globalTid \
         JOIN StringIds AS s ON s.id = t.nameId \
         WHERE n.eventType = 59 GROUP BY n.globalTid",
    )
    .into_iter()
    .map(|r| {
        (
            format!("{} pid={} tid={}", r[0], r[1], r[2]),
            r[3].parse().unwrap(),
        )
    })
    .collect();
    assert_eq!(got, want);
    // Ranges as asys's own trace counts them, start/end ranges included.
    let push_pop = stats_json(&p.report, "hgtx_pushpop_trace").len();
    let start_end = stats_json(&p.report, "hgtx_startend_trace").len();
    let counts = sqlite(
        &db,
        "SELECT eventType, count(*) FROM NVTX_EVENTS GROUP BY eventType ORDER BY eventType",
    );
    assert_eq!(
        counts,
        [
            vec!["59".to_string(), push_pop.to_string()],
            vec!["60".to_string(), start_end.to_string()]
        ]
    );
}

#[test]
fn an_existing_target_is_refused_without_force_and_bad_input_is_one_line() {
    let s = Scratch::new("export-refuse");
    let p = profile_workload(&s, &["-t", "hggc"], "call_loop", &["3"], &[]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let db = export_sqlite(&p.report, &[]);
    let before = std::fs::read(&db).unwrap();
    std::fs::write(&db, b"mine").unwrap();
    let o = export(&["--type", "sqlite"], &p.report);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&db).unwrap(), b"mine", "left as it was");
    let o = export(&["--type", "sqlite", "-f", "true"], &p.report);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&db).unwrap().len(), before.len());
    // A link at the target is replaced with -f, never written through.
    let elsewhere = s.path("elsewhere");
    std::fs::write(&elsewhere, b"keep").unwrap();
    std::fs::remove_file(&db).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &db).unwrap();
    assert!(!export(&["--type", "sqlite"], &p.report).status.success());
    let o = export(&["--type", "sqlite", "-f", "true"], &p.report);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep");
    assert!(!db.symlink_metadata().unwrap().file_type().is_symlink());

    // Bad input: one line of error, no panic, nothing written.
    let junk = s.path("junk.asysrep");
    std::fs::write(&junk, b"not a report").unwrap();
    for (args, file) in [
        (vec!["--type", "sqlite"], junk.as_path()),
        (vec!["--type", "bogus"], p.report.as_path()),
        (
            vec!["--type", "sqlite", "--tables", "NOPE", "-o", "x"],
            p.report.as_path(),
        ),
    ] {
        let o = export(&args, file);
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.trim().lines().count() <= 3,
            "a short error for {args:?}: {err}"
        );
    }
    assert!(!s.path("junk.sqlite").exists());
    assert!(
        !s.path("x.sqlite").exists(),
        "a refused --tables writes nothing"
    );
}

/// A Python with DuckDB and pyarrow: ASYS_DATA_PYTHON, or the venv that
/// `cargo xtask` fills for the benchmarks (target/bench/duckdb-venv).
fn data_python() -> PathBuf {
    let p = std::env::var_os("ASYS_DATA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/bench/duckdb-venv/bin/python"));
    let ok = Command::new(&p)
        .args(["-c", "import duckdb, pyarrow"])
        .finish()
        .status
        .success();
    assert!(
        ok,
        "{} lacks DuckDB or pyarrow: `cargo xtask` installs both there (or set ASYS_DATA_PYTHON)",
        p.display()
    );
    p
}

/// Per (report, pid, op): calls, total time and bytes of the pccl
/// operations, from the dataset by DuckDB (`duckdb`) or pyarrow.dataset.
const DATASET_QUERY: &str = r#"
import json, sys
root, engine = sys.argv[1], sys.argv[2]
out = []
if engine == "duckdb":
    import duckdb
    rows = duckdb.sql(f"""
        SELECT a.report, a.pid, s.value, count(*), sum(a."end" - a.start), sum(coalesce(a.bytes, 0))
        FROM read_parquet('{root}/pccl_api/**/*.parquet', hive_partitioning = true) AS a
        JOIN read_parquet('{root}/strings/**/*.parquet', hive_partitioning = true) AS s
          ON s.host = a.host AND s.report = a.report AND s.id = a.nameId
        GROUP BY ALL""").fetchall()
else:
    import pyarrow.dataset as ds, pyarrow.compute as pc
    api = ds.dataset(f"{root}/pccl_api", format="parquet", partitioning="hive").to_table(
        columns=["host", "report", "pid", "nameId", "start", "end", "bytes"])
    strings = ds.dataset(f"{root}/strings", format="parquet", partitioning="hive").to_table()
    api = api.append_column("dur", pc.subtract(api["end"], api["start"]))
    api = api.append_column("b", pc.fill_null(api["bytes"], 0))
    j = api.join(strings, keys=["host", "report", "nameId"], right_keys=["host", "report", "id"])
    g = j.group_by(["report", "pid", "value"]).aggregate([("dur", "count"), ("dur", "sum"), ("b", "sum")])
    rows = zip(*[g[c].to_pylist() for c in ["report", "pid", "value", "dur_count", "dur_sum", "b_sum"]])
for r in rows:
    out.append([str(r[0]), int(r[1]), r[2], int(r[3]), int(r[4]), int(r[5])])
print(json.dumps(out))
"#;

#[test]
fn parquetdir_exports_of_several_reports_are_one_dataset_for_duckdb_and_pyarrow() {
    let s = Scratch::new("export-parquetdir");
    let root = s.path("fleet.parquetdir");
    // Per (report, pid, op), from asys stats on each report.
    let mut want: BTreeMap<(String, i64, String), (i64, i64, i64)> = BTreeMap::new();
    let mut op_sums = Vec::new();
    for name in ["job1", "job2"] {
        let p = profile_workload(&s, &["-t", "hggc,pccl"], "pccl_ranks", &["4", "2"], &[]);
        assert!(p.out.status.success(), "{}", stderr(&p.out));
        let report = s.path(&format!("{name}.asysrep"));
        std::fs::rename(&p.report, &report).unwrap();
        for r in stats_json(&report, "pccl_api_trace") {
            let e = want
                .entry((
                    name.to_string(),
                    i(&r["Pid"]),
                    r["Name"].as_str().unwrap().to_string(),
                ))
                .or_default();
            e.0 += 1;
            e.1 += i(&r["Duration (ns)"]);
            e.2 += r["Bytes"].as_i64().unwrap_or(0);
        }
        op_sums.push((name, stats_json(&report, "pccl_op_sum")));
        let o = export(
            &[
                "--type",
                "parquetdir",
                "-o",
                s.path("fleet").to_str().unwrap(),
            ],
            &report,
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let ranks: std::collections::BTreeSet<(String, i64)> = want
        .keys()
        .filter(|k| k.2 == "pcclAllReduce")
        .map(|k| (k.0.clone(), k.1))
        .collect();
    assert_eq!(ranks.len(), 8, "4 ranks in each of 2 reports: {ranks:?}");
    for engine in ["duckdb", "pyarrow"] {
        let o = Command::new(data_python())
            .args(["-c", DATASET_QUERY, root.to_str().unwrap(), engine])
            .finish();
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        let rows: Vec<(String, i64, String, i64, i64, i64)> =
            serde_json::from_slice(&o.stdout).unwrap();
        let got: BTreeMap<(String, i64, String), (i64, i64, i64)> = rows
            .into_iter()
            .map(|(r, p, n, c, t, b)| ((r, p, n), (c, t, b)))
            .collect();
        assert_eq!(got, want, "{engine}");
        // Over all ranks of a report: asys's pccl_op_sum.
        for (name, sums) in &op_sums {
            for row in sums {
                let op = row["Name"].as_str().unwrap();
                let (calls, time, bytes) = got
                    .iter()
                    .filter(|(k, _)| k.0 == *name && k.2 == op)
                    .fold((0, 0, 0), |a, (_, v)| (a.0 + v.0, a.1 + v.1, a.2 + v.2));
                assert_eq!(calls, i(&row["Num Calls"]), "{engine} {name} {op}");
                assert_eq!(time, i(&row["Total Time (ns)"]), "{engine} {name} {op}");
                assert_eq!(bytes, i(&row["Total Bytes"]), "{engine} {name} {op}");
            }
        }
    }
    // The same report again is refused, and replaced with -f true.
    let job1 = s.path("job1.asysrep");
    let o = export(
        &[
            "--type",
            "parquetdir",
            "-o",
            s.path("fleet").to_str().unwrap(),
        ],
        &job1,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("already holds report"),
        "{}",
        stderr(&o)
    );
    let o = export(
        &[
            "--type",
            "parquetdir",
            "-f",
            "true",
            "-o",
            s.path("fleet").to_str().unwrap(),
        ],
        &job1,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = Command::new(data_python())
        .args(["-c", DATASET_QUERY, root.to_str().unwrap(), "duckdb"])
        .finish();
    let rows: Vec<(String, i64, String, i64, i64, i64)> =
        serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.3).sum::<i64>(),
        want.values().map(|v| v.0).sum::<i64>(),
        "replaced, not doubled"
    );

    // pccl has no nsys table: the SQLite export gives it PCCL_API, in the
    // runtime table's columns, with every call of the report.
    let db = export_sqlite(&job1, &[]);
    let got: BTreeMap<(i64, String), i64> = sqlite(
        &db,
        "SELECT p.globalTid >> 24, s.value, count(*) FROM PCCL_API AS p \
         JOIN StringIds AS s ON s.id = p.nameId GROUP BY 1, 2",
    )
    .into_iter()
    .map(|r| ((r[0].parse().unwrap(), r[1].clone()), r[2].parse().unwrap()))
    .collect();
    let want: BTreeMap<(i64, String), i64> = want
        .iter()
        .filter(|(k, _)| k.0 == "job1")
        .map(|(k, v)| ((k.1, k.2.clone()), v.0))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn collapsed_stacks_and_the_flame_graph_hold_every_sample() {
    let s = Scratch::new("export-flame");
    // Burns CPU in `burn_hot` (most of it) and `burn_cold`, under `main`.
    let bin = c_workload("burner.c", &[]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-s",
        "process-tree",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
        "300",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let samples = metadata(&report)["tables"]["cpu_samples"].as_u64().unwrap();
    assert!(samples >= 100, "{samples} samples for 360 ms of CPU");

    let o = export(&["--type", "collapsed,flamegraph"], &report);
    assert!(o.status.success(), "{}", stderr(&o));
    let folded = std::fs::read_to_string(s.path("r.collapsed")).unwrap();
    let mut total = 0;
    let mut per_function: BTreeMap<String, u64> = BTreeMap::new();
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        total += n;
        let leaf = stack.rsplit(';').next().unwrap();
        *per_function.entry(leaf.to_string()).or_default() += n;
        if leaf == "burn_hot" {
            assert!(stack.contains(";main;"), "burn_hot under main: {stack}");
        }
    }
    assert_eq!(total, samples, "every sample of the report, once");
    // asys's own per-function self samples.
    let by_function: BTreeMap<String, u64> = stats_json(&report, "cpu_sample_sum")
        .iter()
        .map(|r| {
            (
                r["Function"].as_str().unwrap().to_string(),
                r["Self Samples"].as_u64().unwrap(),
            )
        })
        .fold(BTreeMap::new(), |mut m, (f, n)| {
            *m.entry(f).or_default() += n;
            m
        });
    assert_eq!(per_function["burn_hot"], by_function["burn_hot"]);
    assert!(
        per_function["burn_hot"] > per_function["burn_cold"],
        "{per_function:?}"
    );

    // The SVG is XML (parsed by Python's parser) and names the hot function.
    let check = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag.endswith("svg"), root.tag
text = " ".join(t for e in root.iter() for t in [e.text or ""] + list(e.attrib.values()))
print("burn_hot" in text)
"#;
    let o = Command::new("python3")
        .args(["-c", check, s.path("r.svg").to_str().unwrap()])
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "True");

    // --time-range: two windows that split the session hold every sample
    // between them, and a window before the session none.
    let meta = metadata(&report);
    let length =
        meta["end_monotonic_ns"].as_i64().unwrap() - meta["start_monotonic_ns"].as_i64().unwrap();
    let count = |range: String| -> u64 {
        let arg = format!("--time-range={range}");
        let o = export(&["--type", "collapsed", "-f", "true", &arg], &report);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read_to_string(s.path("r.collapsed"))
            .unwrap()
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum()
    };
    let half = length / 2;
    let (first, second) = (
        count(format!("0/{half}")),
        count(format!("{half}/{}", length + 1)),
    );
    assert_eq!(first + second, samples);
    assert!(first > 0 && second > 0, "{first} and {second}");
    assert_eq!(count("-1000/0".into()), 0);
    let o = export(&["--type", "collapsed", "--time-range", "5/1"], &report);
    assert!(!o.status.success());
}

/// `--stacks api` draws the backtraces of the calls, each call once with its
/// API name as the leaf; `--filter-hgtx` cuts every export type to a range.
/// Ground truth: train_step's own calls (one launch in each "forward", two
/// in each "backward" per step).
#[test]
fn api_stacks_and_range_filters_cut_every_export() {
    let s = Scratch::new("export-api-stacks");
    let steps = 6u64;
    let p = profile_workload(
        &s,
        &["-t", "hggc,hgtx", "--hggc-backtrace", "all:0"],
        "train_step",
        &[&steps.to_string(), "8192"],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let truth = ground_truth_of(&p.truth, "hggc");
    let calls = truth.len() as u64;
    let folded = |extra: &[&str], name: &str| -> BTreeMap<String, u64> {
        let out = s.path(name);
        let mut args = vec!["--type", "collapsed", "--stacks", "api", "-o"];
        args.push(out.to_str().unwrap());
        args.extend_from_slice(extra);
        let o = export(&args, &p.report);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = std::fs::read_to_string(out.with_extension("collapsed")).unwrap();
        let mut leaves = BTreeMap::new();
        for line in text.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            assert!(
                stack.contains(";main;"),
                "a call's path runs through main: {stack}"
            );
            let leaf = stack.rsplit(';').next().unwrap().to_string();
            *leaves.entry(leaf).or_default() += n.parse::<u64>().unwrap();
        }
        leaves
    };
    let all = folded(&[], "all");
    assert_eq!(all.values().sum::<u64>(), calls, "every call once: {all:?}");
    let launches = truth
        .iter()
        .filter(|t| t["api"] == "hggcLaunchKernel")
        .count() as u64;
    assert_eq!(all["hggcLaunchKernel"], launches);

    let backward = folded(&["--filter-hgtx", "backward"], "backward");
    assert_eq!(
        backward,
        BTreeMap::from([("hggcLaunchKernel".to_string(), 2 * steps)]),
        "two launches in each backward range"
    );
    let first = folded(&["--filter-hgtx", "forward/0"], "forward0");
    assert_eq!(
        first.values().sum::<u64>(),
        1,
        "one launch in the first forward"
    );

    // The same window on the SQLite export: one runtime call per forward.
    let db = s.path("fwd");
    let o = export(
        &[
            "--type",
            "sqlite",
            "--filter-hgtx",
            "forward",
            "-o",
            db.to_str().unwrap(),
        ],
        &p.report,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = sqlite(
        &db.with_extension("sqlite"),
        "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r \
         JOIN StringIds s ON s.id = r.nameId GROUP BY s.value",
    );
    assert_eq!(
        rows,
        vec![vec!["hggcLaunchKernel".to_string(), steps.to_string()]]
    );

    // A range the report does not hold is a one-line error; nothing written.
    let o = export(
        &[
            "--type",
            "collapsed",
            "--filter-hgtx",
            "no_such_range",
            "-o",
            s.path("none").to_str().unwrap(),
        ],
        &p.report,
    );
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
    assert!(!s.path("none.collapsed").exists());
}

/// nsys's SAMPLING_CALLCHAINS: each sample's kernel frames (a sample in a
/// system call), then its user frames, as the report's own tables (read by
/// pyarrow) have them.
#[test]
fn sqlite_callchains_are_each_samples_kernel_then_user_frames() {
    let s = Scratch::new("export-callchains");
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-s",
        "process-tree",
        "-o",
        report.to_str().unwrap(),
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=1M",
        "count=3000",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let db = export_sqlite(
        &report,
        &[
            "--tables",
            "COMPOSITE_EVENTS,SAMPLING_CALLCHAINS,StringIds,KERNEL_STACKS",
        ],
    );
    let n = |v: &Value, k: &str| i(&v[k]);
    let samples = report_rows(&s, &report, "cpu_samples");
    let ids: std::collections::HashMap<(i64, i64), usize> = samples
        .iter()
        .enumerate()
        .map(|(id, r)| ((n(r, "tid"), n(r, "ts")), id))
        .collect();
    // (depth, kernel mode, symbol) per sample, kernel frames first.
    let mut want: Vec<Vec<(i64, i64, i64)>> = vec![Vec::new(); samples.len()];
    let mut kernel = report_rows(&s, &report, "kernel_stacks");
    kernel.retain(|r| r["source"] == "sample");
    kernel.sort_by_key(|r| n(r, "depth"));
    for r in &kernel {
        if let Some(&id) = ids.get(&(n(r, "tid"), n(r, "ts"))) {
            want[id].push((n(r, "depth"), 1, n(r, "nameId")));
        }
    }
    let mut user = report_rows(&s, &report, "cpu_sample_stacks");
    user.sort_by_key(|r| n(r, "depth"));
    for r in &user {
        let id = ids[&(n(r, "tid"), n(r, "ts"))];
        let below = want[id].iter().filter(|f| f.1 == 1).count() as i64;
        want[id].push((below + n(r, "depth"), 0, n(r, "functionId")));
    }
    let kernel_samples = want.iter().filter(|f| f.first().is_some_and(|f| f.1 == 1));
    assert!(
        kernel_samples.count() >= 10,
        "samples in the kernel: dd spends its time in read and write"
    );
    let mut got: Vec<Vec<(i64, i64, i64)>> = vec![Vec::new(); samples.len()];
    for r in sqlite(
        &db,
        "SELECT id, stackDepth, kernelMode, symbol FROM SAMPLING_CALLCHAINS ORDER BY id, stackDepth",
    ) {
        let v: Vec<i64> = r.iter().map(|x| x.parse().unwrap()).collect();
        got[v[0] as usize].push((v[1], v[2], v[3]));
    }
    assert_eq!(got, want);
    // Kernel symbols are kallsyms names in the kernel's module.
    let k = sqlite(
        &db,
        "SELECT DISTINCT m.value FROM SAMPLING_CALLCHAINS c JOIN StringIds m ON m.id = c.module \
         WHERE c.kernelMode = 1",
    );
    assert_eq!(k, vec![vec!["[kernel.kallsyms]".to_string()]]);

    // The report's kernel_stacks as asys's own KERNEL_STACKS, row for row,
    // times from the session start.
    let origin = i(&metadata(&report)["start_monotonic_ns"]);
    let mut all = report_rows(&s, &report, "kernel_stacks");
    let key = |r: &Value| {
        (
            n(r, "ts"),
            n(r, "tid"),
            r["source"].as_str().unwrap().to_string(),
            n(r, "depth"),
        )
    };
    all.sort_by_key(key);
    let want: Vec<Vec<String>> = all
        .iter()
        .map(|r| {
            vec![
                (n(r, "ts") - origin).to_string(),
                n(r, "tid").to_string(),
                r["source"].as_str().unwrap().to_string(),
                n(r, "depth").to_string(),
                (r["addr"].as_u64().unwrap() as i64).to_string(),
                n(r, "nameId").to_string(),
            ]
        })
        .collect();
    let got = sqlite(
        &db,
        "SELECT ts, tid, source, depth, addr, nameId FROM KERNEL_STACKS \
         ORDER BY ts, tid, source, depth",
    );
    assert_eq!(got, want);
}

/// `-o NAME.EXT` writes NAME.EXT for every type, as `nsys export -o` does;
/// `-o NAME` adds the type's extension; several types get one file each.
#[test]
fn output_names_that_end_in_the_types_extension_are_used_as_given() {
    let s = Scratch::new("export-names");
    let p = profile_workload(
        &s,
        &["-t", "hggc", "-s", "process-tree"],
        "train_step",
        &["2", "4096"],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let types = [
        ("sqlite", "sqlite"),
        ("parquetdir", "parquetdir"),
        ("arrow", "arrow"),
        ("jsonlines", "jsonl"),
        ("perfetto", "pftrace"),
        ("collapsed", "collapsed"),
        ("flamegraph", "svg"),
        ("kineto", "pt.trace.json"),
    ];
    for (t, ext) in types {
        let given = s.path(&format!("given.{ext}"));
        let o = export(&["--type", t, "-o", given.to_str().unwrap()], &p.report);
        assert!(o.status.success(), "--type {t}: {}", stderr(&o));
        assert!(
            given.exists(),
            "--type {t} -o {} wrote nothing there",
            given.display()
        );
        let doubled = s.path(&format!("given.{ext}.{ext}"));
        assert!(!doubled.exists(), "--type {t} wrote {}", doubled.display());
        let bare = s.path(&format!("bare-{t}"));
        let o = export(&["--type", t, "-o", bare.to_str().unwrap()], &p.report);
        assert!(o.status.success(), "--type {t}: {}", stderr(&o));
        assert!(
            s.path(&format!("bare-{t}.{ext}")).exists(),
            "--type {t} -o bare"
        );
    }
    let o = export(
        &[
            "--type",
            "sqlite,perfetto",
            "-o",
            s.path("both.sqlite").to_str().unwrap(),
        ],
        &p.report,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(s.path("both.sqlite").is_file());
    assert!(s.path("both.sqlite.pftrace").is_file());
}
