//! Many reports on one timeline: four pccl ranks, each a process of its own
//! traced by its own concurrent `asys profile` (as `srun asys profile ...`
//! would run them), read back together by stats, analyze and export.
use std::{collections::BTreeMap, path::PathBuf, process::Command};

use asys_tests::*;
use serde_json::Value;

const NRANKS: u32 = 4;
/// The planted delay of the late rank before every collective, ms.
const LATE_MS: i64 = 30;
const LATE_RANK: i64 = 2;

/// Runs the four ranks, each under its own `asys profile` with `RANK=R`;
/// returns their reports in rank order.
fn four_ranks(s: &Scratch, late: bool) -> Vec<PathBuf> {
    require_root();
    let id = s.path("pccl.id");
    let log = s.path("late.log");
    let late_spec = format!("{LATE_RANK}:{LATE_MS}:all");
    let runs: Vec<_> = (0..NRANKS)
        .map(|r| {
            let report = s.path(&format!("rank{r}"));
            let mut cmd = asys();
            cmd.args(["profile", "-t", "hggc,pccl", "-o", report.to_str().unwrap()])
                .arg(workload("pccl_ranks"))
                .args(["--rank", &r.to_string(), "--nranks", &NRANKS.to_string()])
                .args(["--id", id.to_str().unwrap(), "1"])
                .env("RANK", r.to_string())
                .env(
                    "HGGC_SIM_GROUND_TRUTH",
                    s.path(&format!("rank{r}.truth.jsonl")),
                )
                // Four asys start up at their own pace on a busy machine.
                .env("PCCL_TIMEOUT_MS", "120000")
                .env("PCCL_RANKS_LATE_LOG", &log);
            if late {
                cmd.env("PCCL_RANKS_LATE", &late_spec);
            }
            std::thread::spawn(move || (report, cmd.finish()))
        })
        .collect();
    runs.into_iter()
        .map(|t| {
            let (report, out) = t.join().unwrap();
            assert!(out.status.success(), "asys profile: {}", stderr(&out));
            assert!(
                stdout(&out).contains("all results verified"),
                "{}",
                stdout(&out)
            );
            report.with_extension("asysrep")
        })
        .collect()
}

fn strs(reports: &[PathBuf]) -> Vec<&str> {
    reports.iter().map(|r| r.to_str().unwrap()).collect()
}

/// `asys CMD ARGS REPORTS... --format json`: its rows and its stderr.
fn json_of(cmd: &str, args: &[&str], reports: &[PathBuf]) -> (Vec<Value>, String) {
    let mut all = vec![cmd];
    all.extend(args);
    all.extend(["--format", "json"]);
    all.extend(strs(reports));
    let o = run(&all);
    assert!(o.status.success(), "asys {all:?}: {}", stderr(&o));
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    (v.as_array().unwrap().clone(), stderr(&o))
}

fn i(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or_else(|| panic!("{k} of {v}"))
}

/// The late rank's delays (CLOCK_MONOTONIC before and after each sleep),
/// as the workload logged them.
fn delays(log: &std::path::Path) -> Vec<(i64, i64)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<i64> = l
                .split_whitespace()
                .skip(2)
                .map(|v| v.parse().unwrap())
                .collect();
            (f[0], f[1])
        })
        .collect()
}

#[test]
fn four_ranks_of_four_reports_on_one_timeline() {
    let s = Scratch::new("ranks-late");
    let reports = four_ranks(&s, true);

    // The rank each report recorded is the RANK its process was given.
    for (r, report) in reports.iter().enumerate() {
        assert_eq!(
            metadata(report)["rank"].as_i64(),
            Some(r as i64),
            "{report:?}"
        );
        let clock = &metadata(report)["clock"];
        assert!(
            clock["boot_id"].as_str().is_some_and(|b| b.len() >= 32),
            "{clock}"
        );
        assert!(i(clock, "pair_gap_ns") >= 0, "{clock}");
        // The report holds the one process, with its rank.
        let procs = stats_json(report, "processes");
        assert_eq!(procs.len(), 1, "{procs:?}");
        assert_eq!(i(&procs[0], "Rank"), r as i64, "{procs:?}");
    }

    // stats over the four: each report's rows as stats gives them alone,
    // led by its name and rank; the alignment line says how.
    let (rows, err) = json_of("stats", &["--report", "pccl_api_sum"], &reports);
    assert!(
        err.contains("4 reports aligned by shared monotonic clock (same boot)"),
        "{err}"
    );
    for (r, report) in reports.iter().enumerate() {
        let name = report.file_name().unwrap().to_str().unwrap();
        let mut mine: Vec<Value> = rows
            .iter()
            .filter(|row| row["Report"] == name)
            .map(|row| {
                assert_eq!(i(row, "Rank"), r as i64, "{row}");
                let mut row = row.clone();
                row.as_object_mut().unwrap().remove("Report");
                row.as_object_mut().unwrap().remove("Rank");
                // Rows are numbered through the whole table.
                row.as_object_mut().unwrap().remove("Row#");
                row
            })
            .collect();
        let mut alone = stats_json(report, "pccl_api_sum");
        for row in &mut alone {
            row.as_object_mut().unwrap().remove("Row#");
        }
        let key = |v: &Value| v["Name"].as_str().unwrap().to_string();
        mine.sort_by_key(key);
        alone.sort_by_key(key);
        assert_eq!(mine, alone, "{name}");
    }

    // Every collective operation: rank 2 arrived last, and each rank's
    // arrival and the spread are what the ranks' own ground truth says.
    let sleeps = delays(&s.path("late.log"));
    let (trace, _) = json_of("stats", &["--report", "pccl_desync_trace"], &reports);
    let mut ops: BTreeMap<(String, i64), Vec<&Value>> = BTreeMap::new();
    for row in &trace {
        ops.entry((
            row["Collective"].as_str().unwrap().into(),
            i(row, "Instance"),
        ))
        .or_default()
        .push(row);
    }
    assert_eq!(ops.len(), sleeps.len(), "one delay per operation: {ops:?}");
    let truth = truth(&s);
    assert_eq!(
        ops.keys().collect::<Vec<_>>(),
        truth.keys().collect::<Vec<_>>()
    );
    let mut lasts: Vec<i64> = Vec::new();
    for (op, calls) in &ops {
        assert_eq!(calls.len(), NRANKS as usize, "{op:?}");
        let last: Vec<&&Value> = calls.iter().filter(|c| i(c, "Last") == 1).collect();
        assert_eq!(last.len(), 1, "{op:?}");
        assert_eq!(i(last[0], "Rank"), LATE_RANK, "{op:?}: {calls:?}");
        lasts.push(i(last[0], "Arrival (ns)"));
        // The probe fires as the call is entered, before the library reads
        // the clock for its ground truth: asys's arrival is at most that,
        // and close to it.
        let t = &truth[op];
        for c in calls {
            let want = t[&i(c, "Rank")];
            let got = i(c, "Arrival (ns)");
            assert!(
                got <= want && want - got < 2_000_000,
                "{op:?} rank {}: asys {got}, truth {want}",
                c["Rank"]
            );
        }
        let truth_spread = t.values().max().unwrap() - t.values().min().unwrap();
        let spread = i(last[0], "Spread (ns)");
        assert!(
            (spread - truth_spread).abs() < 2_000_000,
            "{op:?}: spread {spread}, truth {truth_spread}"
        );
        // The others do their own share of the work between collectives
        // while the late rank sleeps: the spread is most of the delay.
        assert!(spread >= LATE_MS * 1_000_000 / 2, "{op:?}: {calls:?}");
    }
    // Each late arrival follows one of the logged delays' end (one clock:
    // the reports share the first one's monotonic clock, offset 0).
    lasts.sort_unstable();
    for (arrival, (_, after)) in lasts.iter().zip(&sleeps) {
        assert!(
            arrival >= after,
            "arrival {arrival} before the delay ended {after}"
        );
    }

    let (sum, _) = json_of("stats", &["--report", "pccl_desync_summary"], &reports);
    assert!(!sum.is_empty());
    for row in &sum {
        assert_eq!(i(row, "Most Often Last Rank"), LATE_RANK, "{row}");
        assert_eq!(i(row, "Times Last"), i(row, "Operations"), "{row}");
        assert_eq!(i(row, "Ranks"), NRANKS as i64, "{row}");
        assert!(
            i(row, "Max Spread (ns)") >= LATE_MS * 1_000_000 / 2,
            "{row}"
        );
    }

    // analyze over the four finds rank 2 at every operation.
    let (late, err) = json_of(
        "analyze",
        &["--rule", "pccl_late_rank:threshold=20"],
        &reports,
    );
    assert!(err.contains("same boot"), "{err}");
    assert_eq!(late.len(), ops.len(), "{late:?}");
    for row in &late {
        assert_eq!(i(row, "Rank"), LATE_RANK, "{row}");
        assert_eq!(row["Report"], "rank2.asysrep", "{row}");
    }

    // parquetdir of the four into one folder: one dataset with rank=
    // partitions, the same per-rank totals as stats on each report.
    let mut args = vec!["export", "--type", "parquetdir,sqlite", "-o"];
    let base = s.path("job");
    args.push(base.to_str().unwrap());
    args.extend(strs(&reports));
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let root = s.path("job.parquetdir");
    for r in 0..NRANKS {
        assert!(
            root.join(format!(
                "pccl_api/host={}/rank={r}/report=rank{r}",
                hostname()
            ))
            .is_dir(),
            "no rank={r} partition"
        );
    }
    let mut want: BTreeMap<(i64, String), (i64, i64)> = BTreeMap::new();
    for (r, report) in reports.iter().enumerate() {
        for row in stats_json(report, "pccl_api_sum") {
            want.insert(
                (r as i64, row["Name"].as_str().unwrap().into()),
                (i(&row, "Num Calls"), i(&row, "Total Time (ns)")),
            );
        }
    }
    for engine in ["duckdb", "pyarrow"] {
        let o = Command::new(data_python())
            .args(["-c", RANK_QUERY, root.to_str().unwrap(), engine])
            .finish();
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        let rows: Vec<(i64, String, i64, i64)> = serde_json::from_slice(&o.stdout).unwrap();
        let got: BTreeMap<(i64, String), (i64, i64)> = rows
            .into_iter()
            .map(|(r, n, c, t)| ((r, n), (c, t)))
            .collect();
        assert_eq!(got, want, "{engine}");
    }

    // One sqlite file per report beside the dataset.
    for r in 0..NRANKS {
        assert!(s.path(&format!("job_rank{r}.sqlite")).is_file(), "rank {r}");
    }
}

/// ProcessStreams names the files the traced process's standard output and
/// error went to, as nsys's export does (asys keeps no copy of the text).
#[test]
fn process_streams_name_where_the_output_went() {
    require_root();
    let s = Scratch::new("ranks-streams");
    let (out, err) = (s.path("app.out"), s.path("app.err"));
    let report = s.path("one");
    let truth = s.path("one.truth.jsonl");
    let status = asys()
        .args(["profile", "-t", "hggc,pccl", "-o", report.to_str().unwrap()])
        .arg(workload("pccl_ranks"))
        .args(["--rank", "0", "--nranks", "1", "--id"])
        .arg(s.path("id"))
        .arg("0")
        .env("HGGC_SIM_GROUND_TRUTH", &truth)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .status()
        .unwrap();
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(&err).unwrap()
    );
    let pid = ground_truth(&truth)[0]["pid"].as_i64().unwrap();
    let db = s.path("one.sqlite");
    let o = run(&[
        "export",
        "--type",
        "sqlite",
        "-o",
        s.path("one").to_str().unwrap(),
        report.with_extension("asysrep").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = Command::new("sqlite3")
        .arg(&db)
        .arg(
            "SELECT p.globalPid >> 24, f.value, length(c.value) FROM ProcessStreams p \
             JOIN StringIds f ON f.id = p.filenameId JOIN StringIds c ON c.id = p.contentId \
             ORDER BY f.value;",
        )
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).lines().collect::<Vec<_>>(),
        [
            format!("{pid}|{}|0", err.display()),
            format!("{pid}|{}|0", out.display()),
        ]
    );
}

/// Without a planted delay, pccl_late_rank finds exactly the operations
/// whose ranks' own ground truth spread as far as its threshold: none on a
/// quiet machine (a loaded one can starve a rank for real, and the
/// workload's own clock then says so too).
#[test]
fn a_clean_run_of_four_reports_has_no_late_rank_beyond_the_truth() {
    let s = Scratch::new("ranks-clean");
    let reports = four_ranks(&s, false);
    let threshold_ms = 20;
    let rule = format!("pccl_late_rank:threshold={threshold_ms}");
    let (late, _) = json_of("analyze", &["--rule", &rule], &reports);
    let found: Vec<(String, i64)> = late
        .iter()
        .map(|r| {
            (
                r["Collective"].as_str().unwrap().to_string(),
                i(r, "Instance"),
            )
        })
        .collect();
    let margin = 2_000_000;
    for (op, t) in truth(&s) {
        let spread = t.values().max().unwrap() - t.values().min().unwrap();
        let limit = threshold_ms * 1_000_000;
        if (spread - limit).abs() < margin {
            continue; // too close to call between two clocks read µs apart
        }
        assert_eq!(
            found.contains(&op),
            spread >= limit,
            "{op:?}: truth spread {spread} ns; found {late:?}"
        );
        if spread < limit {
            continue;
        }
        eprintln!("note: {op:?} really was {spread} ns apart in a clean run");
    }
    let (sum, _) = json_of("stats", &["--report", "pccl_desync_sum"], &reports);
    let truth = truth(&s);
    for row in &sum {
        let name = row["Collective"].as_str().unwrap();
        let max = truth
            .iter()
            .filter(|(k, _)| k.0 == name)
            .map(|(_, t)| t.values().max().unwrap() - t.values().min().unwrap())
            .max()
            .unwrap();
        assert!(
            (i(row, "Max Spread (ns)") - max).abs() < margin,
            "{row}: truth {max}"
        );
    }
}

/// `report` copied to `to` with its metadata edited by Python's own tar
/// and JSON code (and its checksum member rewritten to match): another
/// host and boot (`clock` removed too when `drop_clock`), as a report of a
/// rank on another machine, or of an older asys, would say.
fn as_if_elsewhere(report: &std::path::Path, to: &std::path::Path, drop_clock: bool) {
    const EDIT: &str = r#"
import io, json, sys, tarfile, zlib
src, dst, drop = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
with tarfile.open(src) as t, tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as o:
    meta = None
    for m in t.getmembers():
        data = t.extractfile(m).read()
        if m.name == "metadata.json":
            j = json.loads(data)
            j["host"] = "elsewhere"
            if drop:
                del j["clock"]
            else:
                j["clock"]["boot_id"] = "00000000-0000-0000-0000-000000000000"
            data = json.dumps(j).encode()
            meta = data
        elif m.name == "metadata.json.crc32":
            data = b"%08x\n" % zlib.crc32(meta)
        m.size = len(data)
        o.addfile(m, io.BytesIO(data))
"#;
    let o = Command::new("python3")
        .args(["-c", EDIT])
        .arg(report)
        .arg(to)
        .arg(if drop_clock { "1" } else { "0" })
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A report from another boot is aligned through CLOCK_REALTIME, one
/// without clock data by start times, and the tool says which. The copies
/// are of this host's reports, so realtime gives (nearly) the same offset
/// as the shared clock: the same late rank, spreads within 1 ms.
#[test]
fn reports_of_another_boot_are_aligned_through_realtime() {
    let s = Scratch::new("ranks-elsewhere");
    let reports = four_ranks(&s, true);
    let (same, _) = json_of("stats", &["--report", "pccl_desync_sum"], &reports);
    for (drop_clock, says) in [
        (false, "4 reports aligned by CLOCK_REALTIME; "),
        (
            true,
            "4 reports no shared clock: aligned by report start times only, ± unknown",
        ),
    ] {
        let mut set = reports.clone();
        let other = s.path(&format!("rank3-elsewhere-{drop_clock}.asysrep"));
        as_if_elsewhere(&reports[3], &other, drop_clock);
        set[3] = other;
        let (rows, err) = json_of("stats", &["--report", "pccl_desync_sum"], &set);
        assert!(err.contains(says), "{err}");
        if drop_clock {
            // Start times on two clocks read a moment apart: no bound.
            continue;
        }
        assert_eq!(rows.len(), same.len());
        for (a, b) in rows.iter().zip(&same) {
            assert_eq!(a["Collective"], b["Collective"]);
            assert_eq!(i(a, "Most Often Last Rank"), LATE_RANK, "{a}");
            assert!(
                (i(a, "Max Spread (ns)") - i(b, "Max Spread (ns)")).abs() < 1_000_000,
                "{a} vs {b}"
            );
        }
    }
}

/// (collective, instance) → rank → the call's start, from each rank's
/// ground-truth log (the n-th call of a name in each rank is one operation).
fn truth(s: &Scratch) -> BTreeMap<(String, i64), BTreeMap<i64, i64>> {
    const OPS: [&str; 4] = [
        "pcclAllReduce",
        "pcclAllGather",
        "pcclBroadcast",
        "pcclReduceScatter",
    ];
    let mut out: BTreeMap<(String, i64), BTreeMap<i64, i64>> = BTreeMap::new();
    for r in 0..NRANKS {
        let mut n: BTreeMap<String, i64> = BTreeMap::new();
        let mut calls = ground_truth(&s.path(&format!("rank{r}.truth.jsonl")));
        calls.sort_by_key(|t| t["start"].as_i64().unwrap());
        for t in calls {
            let api = t["api"].as_str().unwrap();
            if !OPS.contains(&api) {
                continue;
            }
            let k = n.entry(api.to_string()).or_default();
            *k += 1;
            out.entry((api.to_string(), *k))
                .or_default()
                .insert(r.into(), t["start"].as_i64().unwrap());
        }
    }
    out
}

fn hostname() -> String {
    let o = Command::new("hostname").finish();
    stdout(&o).trim().to_string()
}

/// A Python with DuckDB and pyarrow (as the export tests find it).
fn data_python() -> PathBuf {
    std::env::var_os("ASYS_DATA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/bench/duckdb-venv/bin/python"))
}

/// Per (rank, API name): calls and total time of pccl_api, from the dataset
/// by DuckDB or pyarrow.dataset, ranks from the rank= partitions.
const RANK_QUERY: &str = r#"
import json, sys
root, engine = sys.argv[1], sys.argv[2]
if engine == "duckdb":
    import duckdb
    rows = duckdb.sql(f"""
        SELECT a.rank, s.value, count(*), sum(a."end" - a.start)
        FROM read_parquet('{root}/pccl_api/**/*.parquet', hive_partitioning = true) AS a
        JOIN read_parquet('{root}/strings/**/*.parquet', hive_partitioning = true) AS s
          ON s.host = a.host AND s.report = a.report AND s.id = a.nameId
        GROUP BY ALL""").fetchall()
else:
    import pyarrow.dataset as ds, pyarrow.compute as pc
    api = ds.dataset(f"{root}/pccl_api", format="parquet", partitioning="hive").to_table(
        columns=["host", "report", "rank", "nameId", "start", "end"])
    strings = ds.dataset(f"{root}/strings", format="parquet", partitioning="hive").to_table()
    api = api.append_column("dur", pc.subtract(api["end"], api["start"]))
    j = api.join(strings, keys=["host", "report", "nameId"], right_keys=["host", "report", "id"])
    g = j.group_by(["rank", "value"]).aggregate([("dur", "count"), ("dur", "sum")])
    rows = zip(*[g[c].to_pylist() for c in ["rank", "value", "dur_count", "dur_sum"]])
print(json.dumps([[int(r[0]), r[1], int(r[2]), int(r[3])] for r in rows]))
"#;

/// `--process-rank-include`: a rank in the list is traced, one outside it
/// runs the application untraced (its output and exit status as without
/// asys, and no report), and a bad list is a one-line error.
#[test]
fn process_rank_include_traces_only_the_listed_ranks() {
    require_root();
    let s = Scratch::new("ranks-include");
    for (rank, traced) in [("2", true), ("1", false)] {
        let report = s.path(&format!("r{rank}"));
        let o = asys()
            .args([
                "profile",
                "-t",
                "hggc,pccl",
                "--process-rank-include",
                "0,2-3",
            ])
            .args(["-o", report.to_str().unwrap()])
            .arg(workload("pccl_ranks"))
            .args(["--rank", "0", "--nranks", "1", "--id"])
            .arg(s.path(&format!("id{rank}")))
            .arg("0")
            .env("RANK", rank)
            .finish();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stdout(&o).contains("all results verified"),
            "{}",
            stdout(&o)
        );
        assert_eq!(
            report.with_extension("asysrep").exists(),
            traced,
            "rank {rank}: {}",
            stderr(&o)
        );
        if !traced {
            assert!(
                stderr(&o).contains("rank 1 is not in --process-rank-include"),
                "{}",
                stderr(&o)
            );
        }
    }
    let o = run(&["profile", "--process-rank-include", "3-1", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}
