//! Spark over a parquetdir dataset: eight pccl ranks on two hosts, each
//! rank under its own `asys profile` (as `srun asys profile` would run
//! them), each host exporting its four reports into one shared folder; real
//! PySpark in local mode reads the folder as one hive-partitioned dataset
//! and gives per-rank kernel time and API counts equal to `asys stats` on
//! each report and to the workload's own account of its calls.
//!
//! The two hosts are two UTS namespaces (`unshare --uts`, then `hostname`):
//! a report's host is what gethostname() says to the asys that records it.
use std::{collections::BTreeMap, path::PathBuf, process::Command};

use asys_tests::*;
use serde_json::Value;

const NRANKS: u32 = 8;
const HOSTS: [&str; 2] = ["asys-spark-a", "asys-spark-b"];

fn host_of(rank: u32) -> &'static str {
    HOSTS[(rank * HOSTS.len() as u32 / NRANKS) as usize]
}

/// A rank's report, its host and the workload's account of its calls.
struct Rank {
    rank: u32,
    host: &'static str,
    report: PathBuf,
    calls: BTreeMap<String, u64>,
}

/// Runs the eight ranks at once, each `asys profile` in a UTS namespace of
/// its host's name.
fn eight_ranks(s: &Scratch) -> Vec<Rank> {
    require_root();
    let id = s.path("pccl.id");
    let runs: Vec<_> = (0..NRANKS)
        .map(|r| {
            let host = host_of(r);
            let report = s.path(&format!("rank{r}"));
            let mut cmd = Command::new("unshare");
            cmd.args(["--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\"", host])
                .arg(asys_bin())
                .args(["profile", "-t", "hggc,pccl", "-o", report.to_str().unwrap()])
                .arg(workload("pccl_ranks"))
                .args(["--rank", &r.to_string(), "--nranks", &NRANKS.to_string()])
                .args(["--id", id.to_str().unwrap(), "2"])
                .env("RANK", r.to_string())
                // Eight asys start up at their own pace on a busy machine.
                .env("PCCL_TIMEOUT_MS", "120000");
            std::thread::spawn(move || (r, host, report, cmd.finish()))
        })
        .collect();
    runs.into_iter()
        .map(|t| {
            let (rank, host, report, out) = t.join().unwrap();
            assert!(out.status.success(), "rank {rank}: {}", stderr(&out));
            let text = stdout(&out);
            assert!(text.contains("all results verified"), "{text}");
            Rank {
                rank,
                host,
                report: report.with_extension("asysrep"),
                calls: workload_calls(&text),
            }
        })
        .collect()
}

/// Per (host, rank, report): kernel count and time, and per (host, rank,
/// name) the same by kernel name and the API calls' count and time (hggc
/// and pccl), from the dataset as Spark SQL sees it.
const SPARK_QUERY: &str = r#"
import json, sys
from pyspark.sql import SparkSession
root = sys.argv[1]
spark = (SparkSession.builder.master("local[2]").appName("asys-parquetdir")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.driver.host", "127.0.0.1")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
out = {}
for t in ["hggc_activity", "hggc_api", "pccl_api", "strings", "symbols"]:
    df = spark.read.parquet(f"{root}/{t}")
    out.setdefault("columns", {})[t] = [f.name for f in df.schema.fields]
    df.createOrReplaceTempView(t)
def rows(sql):
    return [list(r) for r in spark.sql(sql).collect()]
out["kernels"] = rows("""
  SELECT host, rank, report, count(*), sum(greatest(`end` - start, 0))
  FROM hggc_activity WHERE kind = 'kernel' GROUP BY host, rank, report""")
out["kernel_names"] = rows("""
  SELECT k.host, k.rank, s.value, count(*), sum(greatest(k.`end` - k.start, 0))
  FROM hggc_activity k
  JOIN symbols y ON y.host = k.host AND y.report = k.report AND y.pid = k.pid AND y.addr = k.kernelAddr
  JOIN strings s ON s.host = y.host AND s.report = y.report AND s.id = y.nameId
  WHERE k.kind = 'kernel' GROUP BY k.host, k.rank, s.value""")
out["api"] = rows("""
  SELECT a.host, a.rank, s.value, count(*), sum(greatest(a.`end` - a.start, 0))
  FROM (SELECT host, rank, report, nameId, start, `end` FROM hggc_api
        UNION ALL SELECT host, rank, report, nameId, start, `end` FROM pccl_api) a
  JOIN strings s ON s.host = a.host AND s.report = a.report AND s.id = a.nameId
  GROUP BY a.host, a.rank, s.value""")
print("SPARK " + json.dumps(out))
spark.stop()
"#;

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// `asys stats --report NAME --format csv REPORT`: per Name, the numbers
/// of `count` and `time` columns.
fn stats_sums(report: &std::path::Path, name: &str, count: &str) -> BTreeMap<String, (i64, i64)> {
    let names = stats_csv_column(report, name, "Name");
    let counts = stats_csv_column(report, name, count);
    let times = stats_csv_column(report, name, "Total Time (ns)");
    names
        .into_iter()
        .zip(counts.iter().zip(&times))
        .map(|(n, (c, t))| (n, (c.parse().unwrap(), t.parse().unwrap())))
        .collect()
}

#[test]
fn spark_reads_eight_ranks_of_two_hosts_as_asys_stats_does() {
    let s = Scratch::new("spark");
    let ranks = eight_ranks(&s);

    // Each report records its host and rank.
    for r in &ranks {
        let meta = metadata(&r.report);
        assert_eq!(meta["host"].as_str(), Some(r.host), "{:?}", r.report);
        assert_eq!(meta["rank"].as_i64(), Some(r.rank.into()), "{:?}", r.report);
    }

    // Each host exports its own reports into the one shared folder.
    let job = s.path("job");
    for host in HOSTS {
        let mut cmd = asys();
        cmd.args([
            "export",
            "--type",
            "parquetdir",
            "-o",
            job.to_str().unwrap(),
        ]);
        cmd.args(ranks.iter().filter(|r| r.host == host).map(|r| &r.report));
        let o = cmd.finish();
        assert!(o.status.success(), "export: {}", stderr(&o));
    }
    let root = job.with_extension("parquetdir");
    // The partitioning keys: host, then rank, then report.
    for r in &ranks {
        let part = root.join(format!(
            "hggc_api/host={}/rank={}/report=rank{}/part-0.parquet",
            r.host, r.rank, r.rank
        ));
        assert!(part.is_file(), "{part:?}");
    }

    let o = Command::new(spark_python())
        .args(["-c", SPARK_QUERY])
        .arg(&root)
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .finish();
    assert!(o.status.success(), "pyspark: {}", stderr(&o));
    let text = stdout(&o);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("SPARK "))
        .unwrap_or_else(|| panic!("no result from Spark: {text}\n{}", stderr(&o)));
    let got: Value = serde_json::from_str(line).unwrap();

    // Spark discovers the partitioning keys as columns; the rank's is an
    // integer.
    for (t, cols) in got["columns"].as_object().unwrap() {
        let cols: Vec<&str> = cols
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let keys = if t == "strings" {
            &["host", "report"][..]
        } else {
            &["host", "rank", "report"][..]
        };
        assert!(cols.ends_with(keys), "{t}: {cols:?}");
    }

    // Per (host, rank): name (or report) → (count, time) of one Spark
    // result; the rank must be an integer (i() fails on a string).
    let by_rank = |what: &str| -> BTreeMap<(String, i64), BTreeMap<String, (i64, i64)>> {
        let mut m: BTreeMap<(String, i64), BTreeMap<String, (i64, i64)>> = BTreeMap::new();
        for row in got[what].as_array().unwrap() {
            let key = (row[0].as_str().unwrap().to_string(), i(&row[1]));
            let name = row[2].as_str().unwrap().to_string();
            let prev = m
                .entry(key)
                .or_default()
                .insert(name, (i(&row[3]), i(&row[4])));
            assert!(prev.is_none(), "{what}: {row}");
        }
        m
    };
    let kernels = by_rank("kernels");
    let kernel_names = by_rank("kernel_names");
    let api = by_rank("api");
    assert_eq!(kernels.len(), NRANKS as usize, "{kernels:?}");
    assert_eq!(api.len(), NRANKS as usize, "{api:?}");

    for r in &ranks {
        let key = (r.host.to_string(), i64::from(r.rank));
        // Kernel time: hggc_ppu_kern_sum, by kernel and in all.
        let kern = stats_sums(&r.report, "hggc_ppu_kern_sum", "Instances");
        assert!(!kern.is_empty(), "rank {} ran no kernel", r.rank);
        assert_eq!(kernel_names[&key], kern, "rank {}", r.rank);
        let total = kern.values().fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1));
        let name = format!("rank{}", r.rank);
        assert_eq!(
            kernels[&key],
            BTreeMap::from([(name, total)]),
            "rank {}",
            r.rank
        );

        // API counts and time: hggc_api_sum and pccl_api_sum.
        let mut sums = stats_sums(&r.report, "hggc_api_sum", "Num Calls");
        sums.extend(stats_sums(&r.report, "pccl_api_sum", "Num Calls"));
        assert_eq!(api[&key], sums, "rank {}", r.rank);
        // The counts of the calls the workload made are those it says it
        // made (the others are libpccl's own: its kernel launches, and the
        // pcclKernel_* functions it calls).
        for (name, made) in &r.calls {
            let traced = api[&key].get(name).map_or(0, |v| v.0);
            assert_eq!(traced, *made as i64, "rank {} {name}", r.rank);
        }
        // Every kernel was launched by one hggcLaunchKernel.
        assert_eq!(api[&key]["hggcLaunchKernel"].0, total.0, "rank {}", r.rank);
    }
}
