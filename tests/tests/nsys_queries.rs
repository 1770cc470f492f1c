//! Queries published for nsys's SQLite exports, run unchanged on asys's
//! SQLite export, with results checked against the workload's own log.
//!
//! The five trace queries are those of Pipit's Nsight Systems SQLite reader
//! (hpcgroup/pipit, `pipit/readers/nsight_sqlite_reader.py`, MIT licence,
//! Copyright (c) the Pipit authors), which reads an nsys export into a
//! trace: NVTX ranges, CUDA API calls joined to `ThreadNames`, and kernels,
//! copies and memsets joined to their launching call on `correlationId` and
//! to nsys's `ENUM_CUDA_MEMCPY_OPER` and `ENUM_CUDA_MEM_KIND`. The text is
//! Pipit's, byte for byte (its indentation included).
//!
//! The second reader is nsys2prv (Barcelona Supercomputing Center, Marc
//! Clascà; PyPI `nsys2prv`, source pm.bsc.es/gitlab/beppp/nsys2prv,
//! GPL-3.0-only), which turns an nsys export into a Paraver trace. Its
//! queries are files of its package (`nsys2prv/scripts/*.sql`): kernels,
//! copies and memsets with their `greenContextId`, whole graph executions
//! (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`) and graph and node creation calls
//! (`CUDA_GRAPH_EVENTS`, `CUDA_GRAPH_NODE_EVENTS`). Its licence does not
//! let its text be copied into this MIT/Apache-2.0 repository, so the test
//! reads the files from the published wheel itself ([`nsys2prv_scripts`]),
//! pinned by version and hash: unchanged by construction.
use std::collections::BTreeMap;

use asys_tests::*;
use serde_json::Value;

/// Pipit's `nvtx` query.
const PIPIT_NVTX: &str = r#"
        SELECT
            start as Enter,
            end as Leave,
            'annotation' as type,
            IFNULL(text, StringIds.value) as "Name",
            (ne.globalTid >> 24) & 0x00FFFFFF AS "Process",
            ne.globalTid & 0x00FFFFFF AS "Thread",
            jsonText as meta
        FROM
            NVTX_EVENTS as ne
        LEFT JOIN StringIds
            ON StringIds.id = ne.textId
        WHERE
            -- Filter to only include range start/end and push/pop events
            ne.eventType in (59, 60)
        "#;

/// Pipit's `cuda_api` query.
const PIPIT_CUDA_API: &str = r#"
        SELECT
            start as Enter,
            end as Leave,
            rname.value AS Name,
            (cuda_api.globalTid >> 24) & 0x00FFFFFF AS "Process",
            cuda_api.globalTid & 0x00FFFFFF AS "Thread",
            correlationId As id,
            null as meta
        FROM
            CUPTI_ACTIVITY_KIND_RUNTIME as cuda_api
        JOIN ThreadNames AS tname
            ON cuda_api.globalTid == tname.globalTid
        JOIN
            StringIds AS rname
            ON cuda_api.nameId = rname.id
        JOIN
            StringIds AS rname2
            ON tname.nameId = rname2.id
        "#;

/// Pipit's first `gpu_trace` query: kernels.
const PIPIT_KERNELS: &str = r#"
        SELECT
            cuda_gpu.start as Enter,
            cuda_gpu.end as Leave,
            cuda_gpu.deviceId as gpuId,
            value as Name,
            cuda_gpu.streamId,
            'kernel' as type,
            null as bytes,
            cuda_gpu.correlationId as id,
            (cuda_api.globalTid >> 24) & 0x00FFFFFF AS "Process",
            null as meta
        FROM CUPTI_ACTIVITY_KIND_KERNEL as cuda_gpu
        JOIN StringIds
            ON cuda_gpu.shortName = StringIds.id
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME as cuda_api
            ON cuda_gpu.correlationId = cuda_api.correlationId
        "#;

/// Pipit's second `gpu_trace` query: copies, named by ENUM_CUDA_MEMCPY_OPER.
const PIPIT_MEMCPY: &str = r#"
        SELECT
            cuda_memcpy.start as Enter,
            cuda_memcpy.end as Leave,
            cuda_memcpy.deviceId as gpuId,
            memcpy_labels.name as Name,
            cuda_memcpy.streamId,
            'cuda_memcpy' as type,
            bytes,
            cuda_memcpy.correlationId as id,
            (cuda_api.globalTid >> 24) & 0x00FFFFFF AS "Process",
            null as meta
        FROM CUPTI_ACTIVITY_KIND_MEMCPY as cuda_memcpy
        JOIN ENUM_CUDA_MEMCPY_OPER as memcpy_labels
            ON cuda_memcpy.copyKind = memcpy_labels.id
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME as cuda_api
            ON cuda_memcpy.correlationId = cuda_api.correlationId
        "#;

/// Pipit's third `gpu_trace` query: memsets, named by ENUM_CUDA_MEM_KIND.
const PIPIT_MEMSET: &str = r#"
        SELECT
            cuda_memset.start as Enter,
            cuda_memset.end as Leave,
            cuda_memset.deviceId as gpuId,
            memset_labels.name as Name,
            streamId,
            'cuda_memset' as type,
            bytes,
            cuda_memset.correlationId as id,
            (cuda_api.globalTid >> 24) & 0x00FFFFFF AS "Process",
            null as meta
        FROM CUPTI_ACTIVITY_KIND_MEMSET as cuda_memset
        JOIN ENUM_CUDA_MEM_KIND as memset_labels
            ON cuda_memset.memKind = memset_labels.id
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME as cuda_api
            ON cuda_memset.correlationId = cuda_api.correlationId
        "#;

/// The rows of `query` on `db` as JSON objects (the sqlite3 command's json
/// mode), so that columns are read by the names the query gives them.
fn rows(db: &std::path::Path, query: &str) -> Vec<Value> {
    let o = std::process::Command::new("sqlite3")
        .args(["-bail", "-json"])
        .arg(db)
        .arg(query)
        .finish();
    assert!(o.status.success(), "sqlite3: {}", stderr(&o));
    let text = stdout(&o);
    if text.trim().is_empty() {
        return Vec::new();
    }
    serde_json::from_str(&text).expect("sqlite3 -json output")
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn text(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not text: {v}"))
        .to_owned()
}

/// Counts of each key.
fn counts<K: Ord>(keys: impl IntoIterator<Item = K>) -> BTreeMap<K, u64> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k).or_default() += 1;
    }
    m
}

#[test]
fn pipits_nsys_queries_give_the_workloads_calls_kernels_copies_memsets_and_ranges() {
    let s = Scratch::new("nsys-queries");
    let p = profile_workload(&s, &["-t", "hggc,hgtx"], "train_step", &["5", "8192"], &[]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let truth = ground_truth(&p.truth);
    let o = run(&[
        "export",
        "--type",
        "sqlite",
        "-o",
        s.path("t.sqlite").to_str().unwrap(),
        p.report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = s.path("t.sqlite");
    let ok = |t: &&Value| t["ret"] == 0;
    let api = |t: &Value| text(&t["api"]);

    // NVTX: every range the workload pushed, on its process and thread.
    let want = counts(
        truth
            .iter()
            .filter(|t| api(t) == "hgtxRangePushA" && int(&t["ret"]) >= 0)
            .map(|t| (text(&t["message"]), int(&t["pid"]), int(&t["tid"]))),
    );
    assert!(!want.is_empty());
    let got = counts(
        rows(&db, PIPIT_NVTX)
            .iter()
            .map(|r| (text(&r["Name"]), int(&r["Process"]), int(&r["Thread"]))),
    );
    assert_eq!(got, want, "Pipit's nvtx query");

    // Runtime calls: each of the workload's calls, by name, process and
    // thread, and the launches by their correlation id.
    let want = counts(
        truth
            .iter()
            .filter(|t| api(t).starts_with("hggc"))
            .map(|t| (api(t), int(&t["pid"]), int(&t["tid"]))),
    );
    let calls = rows(&db, PIPIT_CUDA_API);
    let got = counts(
        calls
            .iter()
            .map(|r| (text(&r["Name"]), int(&r["Process"]), int(&r["Thread"]))),
    );
    assert_eq!(got, want, "Pipit's cuda_api query");

    // Kernels: one row per launch, named by the launch, joined to its call
    // and process.
    let mut want: Vec<(i64, String, i64)> = truth
        .iter()
        .filter(|t| api(t) == "hggcLaunchKernel")
        .filter(ok)
        .map(|t| (int(&t["corr"]), text(&t["kernel"]), int(&t["pid"])))
        .collect();
    want.sort();
    assert_eq!(want.len(), 15, "the workload's launches");
    let mut got: Vec<(i64, String, i64)> = rows(&db, PIPIT_KERNELS)
        .iter()
        .map(|r| (int(&r["id"]), text(&r["Name"]), int(&r["Process"])))
        .collect();
    got.sort();
    assert_eq!(got, want, "Pipit's kernel query");

    // Copies: bytes per nsys copy-kind name (the workload's kinds are
    // cudaMemcpyKind: 0 host-host, 1 host-device, 2 device-host, 3
    // device-device).
    let kind_name = [
        "CUDA_MEMCPY_KIND_HTOH",
        "CUDA_MEMCPY_KIND_HTOD",
        "CUDA_MEMCPY_KIND_DTOH",
        "CUDA_MEMCPY_KIND_DTOD",
    ];
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for t in truth
        .iter()
        .filter(|t| api(t).starts_with("hggcMemcpy"))
        .filter(ok)
    {
        *want
            .entry(kind_name[int(&t["kind"]) as usize].into())
            .or_default() += int(&t["bytes"]);
    }
    assert!(!want.is_empty());
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for r in rows(&db, PIPIT_MEMCPY) {
        *got.entry(text(&r["Name"])).or_default() += int(&r["bytes"]);
    }
    assert_eq!(got, want, "Pipit's memcpy query");

    // Memsets: each of device memory, with its bytes.
    let mut want: Vec<(i64, i64)> = truth
        .iter()
        .filter(|t| api(t).starts_with("hggcMemset"))
        .filter(ok)
        .map(|t| (int(&t["corr"]), int(&t["bytes"])))
        .collect();
    want.sort();
    assert!(!want.is_empty());
    let memsets = rows(&db, PIPIT_MEMSET);
    let mut got: Vec<(i64, i64)> = memsets
        .iter()
        .map(|r| {
            assert_eq!(r["Name"], "CUDA_MEMOPR_MEMORY_KIND_DEVICE");
            (int(&r["id"]), int(&r["bytes"]))
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "Pipit's memset query");
}

/// The tables nsys readers join with beside the activity: the enums name
/// every value the activity tables use, TARGET_INFO_GPU every device they
/// name, the event classes say runtime, META_DATA_EXPORT says what wrote
/// the file; and an export holds no column its declaration lacks.
#[test]
fn enum_and_target_info_tables_cover_what_the_activity_uses() {
    let s = Scratch::new("nsys-enums");
    let p = profile_workload(
        &s,
        &["-t", "hggc,hgtx,osrt"],
        "train_step",
        &["3", "4096"],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let db = s.path("e.sqlite");
    let o = run(&[
        "export",
        "--type",
        "sqlite",
        "-o",
        db.to_str().unwrap(),
        p.report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let unnamed = |q: &str| {
        let r = sqlite(&db, q);
        assert_eq!(r, vec![vec!["0".to_string()]], "{q}");
    };
    unnamed(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m \
         LEFT JOIN ENUM_CUDA_MEMCPY_OPER e ON e.id = m.copyKind WHERE e.id IS NULL",
    );
    unnamed(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m \
         LEFT JOIN ENUM_CUDA_MEM_KIND e ON e.id = m.dstKind \
         WHERE m.dstKind IS NOT NULL AND e.id IS NULL",
    );
    unnamed(
        "SELECT count(*) FROM NVTX_EVENTS n \
         LEFT JOIN ENUM_NSYS_EVENT_TYPE e ON e.id = n.eventType WHERE e.id IS NULL",
    );
    for t in ["CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API"] {
        unnamed(&format!(
            "SELECT count(*) FROM {t} r \
             LEFT JOIN ENUM_NSYS_EVENT_CLASS e ON e.id = r.eventClass WHERE e.id IS NULL"
        ));
    }
    for t in [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
    ] {
        unnamed(&format!(
            "SELECT count(*) FROM {t} k \
             LEFT JOIN TARGET_INFO_GPU g ON g.id = k.deviceId WHERE g.id IS NULL"
        ));
    }
    let classes = sqlite(
        &db,
        "SELECT DISTINCT e.name FROM CUPTI_ACTIVITY_KIND_RUNTIME r \
         JOIN ENUM_NSYS_EVENT_CLASS e ON e.id = r.eventClass",
    );
    assert_eq!(
        classes,
        vec![vec!["TRACE_PROCESS_EVENT_CUDA_RUNTIME".to_string()]]
    );
    let classes = sqlite(
        &db,
        "SELECT DISTINCT e.name FROM OSRT_API r JOIN ENUM_NSYS_EVENT_CLASS e ON e.id = r.eventClass",
    );
    assert_eq!(
        classes,
        vec![vec!["TRACE_PROCESS_EVENT_OS_RUNTIME".to_string()]]
    );
    // Every stream a kernel ran on is a stream of its process.
    unnamed(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN TARGET_INFO_CUDA_STREAM s \
         ON s.streamId = k.streamId AND s.processId = k.globalPid >> 24 WHERE s.streamId IS NULL",
    );
    let product = sqlite(
        &db,
        "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_NAME'",
    );
    assert_eq!(product, vec![vec!["asys".to_string()]]);
    let host = sqlite(
        &db,
        "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'",
    );
    assert_eq!(host[0][0], metadata(&p.report)["host"].as_str().unwrap());
}

/// The nsys2prv release whose queries are run, and the SHA-256 of its
/// wheel as PyPI publishes it (pip refuses any other bytes).
const NSYS2PRV: &str = "nsys2prv==0.5.8";
const NSYS2PRV_WHEEL_SHA256: &str =
    "4d376d29c18328109426be837d16ce1a394a6cf1fe65d9d62594d01e3ac40adb";

/// nsys2prv's `scripts` folder, from its wheel (downloaded with pip, no
/// dependencies, and unpacked under target/ the first time).
fn nsys2prv_scripts() -> std::path::PathBuf {
    let dir = workspace().join("target/nsys2prv-0.5.8");
    let scripts = dir.join("nsys2prv/scripts");
    if scripts.join("graph_node.sql").exists() {
        return scripts;
    }
    // Unpacked beside, then renamed into place: a run stopped half-way
    // leaves no half-unpacked folder behind that would be taken as whole.
    let tmp = workspace().join(format!("target/nsys2prv-0.5.8.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let req = tmp.join("requirements.txt");
    std::fs::write(
        &req,
        format!("{NSYS2PRV} --hash=sha256:{NSYS2PRV_WHEEL_SHA256}\n"),
    )
    .unwrap();
    let o = std::process::Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(["--require-hashes", "-r"])
        .arg(&req)
        .arg("-d")
        .arg(tmp.join("dist"))
        .finish();
    assert!(
        o.status.success(),
        "pip download {NSYS2PRV}: {}",
        stderr(&o)
    );
    let wheel = tmp.join("dist/nsys2prv-0.5.8-py3-none-any.whl");
    let o = std::process::Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(tmp.join("unpacked"))
        .finish();
    assert!(
        o.status.success(),
        "unzip {}: {}",
        wheel.display(),
        stderr(&o)
    );
    if !scripts.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(tmp.join("unpacked"), &dir).unwrap();
    }
    let _ = std::fs::remove_dir_all(&tmp);
    scripts
}

/// One of nsys2prv's query files, as published.
fn nsys2prv_query(name: &str) -> String {
    let p = nsys2prv_scripts().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// nsys's label of a copy of the workload's cudaMemcpyKind (0 host-host, 1
/// host-device, 2 device-host, 3 device-device), as ENUM_CUDA_MEMCPY_OPER
/// labels it, and the memory kinds of its two sides (ENUM_CUDA_MEM_KIND's
/// label `Device` for device memory; host memory's kind, pageable or
/// pinned, is not known: NULL).
fn copy_labels(kind: i64) -> (&'static str, Value, Value) {
    let device = || Value::from("Device");
    match kind {
        0 => ("Host-to-Host", Value::Null, Value::Null),
        1 => ("Host-to-Device", Value::Null, device()),
        2 => ("Device-to-Host", device(), Value::Null),
        3 => ("Device-to-Device", device(), device()),
        k => panic!("cudaMemcpyKind {k}"),
    }
}

#[test]
fn nsys2prvs_queries_give_the_workloads_kernels_copies_memsets_and_graphs() {
    let s = Scratch::new("nsys2prv-queries");
    let p = profile_workload(&s, &["-t", "hggc,hgtx"], "train_step", &["4", "8192"], &[]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let truth = ground_truth(&p.truth);
    let db = s.path("t.sqlite");
    let o = run(&[
        "export",
        "--type",
        "sqlite",
        "-o",
        db.to_str().unwrap(),
        p.report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let api = |t: &Value| text(&t["api"]);
    let ok = |t: &&Value| t["ret"] == 0;
    // No green contexts, and no graph nodes outside graphs: every device
    // row's greenContextId and graphNodeId are NULL.
    let plain = |r: &Value, what: &str| {
        assert_eq!(r["greenContext"], Value::Null, "{what}: {r}");
        assert_eq!(r["graphNodeId"], Value::Null, "{what}: {r}");
    };

    // Kernels: one per launch, by correlation id, short name and process.
    let mut want: Vec<(i64, String, i64)> = truth
        .iter()
        .filter(|t| api(t) == "hggcLaunchKernel")
        .filter(ok)
        .map(|t| (int(&t["corr"]), text(&t["kernel"]), int(&t["pid"])))
        .collect();
    want.sort();
    assert!(!want.is_empty());
    let mut got: Vec<(i64, String, i64)> = rows(&db, &nsys2prv_query("kernels.sql"))
        .iter()
        .map(|r| {
            plain(r, "kernel");
            (int(&r["correlation"]), text(&r["name"]), int(&r["PID"]))
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "nsys2prv's kernels.sql");

    // Copies: each by correlation id, named by its kind as nsys names it,
    // its sides' memory kinds, bytes and process.
    type CopyRow = (i64, String, Value, Value, i64, i64);
    let mut want: Vec<CopyRow> = truth
        .iter()
        .filter(|t| api(t).starts_with("hggcMemcpy"))
        .filter(ok)
        .map(|t| {
            let (label, src, dst) = copy_labels(int(&t["kind"]));
            let name = format!("[CUDA memcpy {label}]");
            (
                int(&t["corr"]),
                name,
                src,
                dst,
                int(&t["bytes"]),
                int(&t["pid"]),
            )
        })
        .collect();
    want.sort_by_key(|c| c.0);
    assert!(!want.is_empty());
    let mut got: Vec<CopyRow> = rows(&db, &nsys2prv_query("memcpy.sql"))
        .iter()
        .map(|r| {
            plain(r, "memcpy");
            (
                int(&r["correlation"]),
                text(&r["name"]),
                r["srcmemkind"].clone(),
                r["dstmemkind"].clone(),
                int(&r["bytes"]),
                int(&r["PID"]),
            )
        })
        .collect();
    got.sort_by_key(|c| c.0);
    assert_eq!(got, want, "nsys2prv's memcpy.sql");

    // Memsets: each of device memory, by correlation id, bytes and process.
    let mut want: Vec<(i64, i64, i64)> = truth
        .iter()
        .filter(|t| api(t).starts_with("hggcMemset"))
        .filter(ok)
        .map(|t| (int(&t["corr"]), int(&t["bytes"]), int(&t["pid"])))
        .collect();
    want.sort();
    assert!(!want.is_empty());
    let mut got: Vec<(i64, i64, i64)> = rows(&db, &nsys2prv_query("memset.sql"))
        .iter()
        .map(|r| {
            plain(r, "memset");
            assert_eq!(r["name"], Value::from("[CUDA memset]"), "{r}");
            assert_eq!(r["srcmemkind"], Value::from("Device"), "{r}");
            (int(&r["correlation"]), int(&r["bytes"]), int(&r["PID"]))
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "nsys2prv's memset.sql");

    // Graphs: the simulated runtime has none. Each graph query runs and
    // gives as many rows as the workload launched and created graphs (none):
    // a graph execution's row is checked where the report has one
    // (asys-report's graph_executions_fill_the_graph_trace_table).
    let graph_calls = |part: &str| {
        truth
            .iter()
            .filter(|t| api(t).contains("Graph") && api(t).contains(part))
            .count()
    };
    for (query, calls) in [
        ("graph_cupti.sql", graph_calls("Launch")),
        ("graph_events.sql", graph_calls("Create")),
        ("graph_node.sql", graph_calls("Add")),
    ] {
        assert_eq!(
            rows(&db, &nsys2prv_query(query)).len(),
            calls,
            "nsys2prv's {query}"
        );
    }
}

/// The columns of nsys's CUPTI activity tables, in its order: NVIDIA's
/// Nsight Systems documentation, "SQLite Schema Reference", as of the
/// 2026.4 release (export schema version 3.28.1).
const NSYS_COLUMNS: &[(&str, &[&str])] = &[
    (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        &[
            "start",
            "end",
            "deviceId",
            "contextId",
            "greenContextId",
            "streamId",
            "correlationId",
            "globalPid",
            "demangledName",
            "shortName",
            "mangledName",
            "launchType",
            "cacheConfig",
            "registersPerThread",
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
            "staticSharedMemory",
            "dynamicSharedMemory",
            "localMemoryPerThread",
            "localMemoryTotal",
            "gridId",
            "sharedMemoryExecuted",
            "graphNodeId",
            "sharedMemoryLimitConfig",
            "qmdBulkReleaseDone",
            "qmdPreexitDone",
            "qmdLastCtaDone",
            "graphId",
            "clusterX",
            "clusterY",
            "clusterZ",
            "clusterSchedulingPolicy",
            "maxPotentialClusterSize",
            "maxActiveClusters",
            "sharedMemoryRequestedPercentage",
            "tensorSizeMinusOneElements",
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        &[
            "start",
            "end",
            "deviceId",
            "contextId",
            "greenContextId",
            "streamId",
            "correlationId",
            "globalPid",
            "bytes",
            "copyKind",
            "deprecatedSrcId",
            "srcKind",
            "dstKind",
            "srcDeviceId",
            "srcContextId",
            "dstDeviceId",
            "dstContextId",
            "migrationCause",
            "graphNodeId",
            "virtualAddress",
            "copyCount",
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMSET",
        &[
            "start",
            "end",
            "deviceId",
            "contextId",
            "greenContextId",
            "streamId",
            "correlationId",
            "globalPid",
            "value",
            "bytes",
            "graphNodeId",
            "memKind",
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        &[
            "start",
            "end",
            "deviceId",
            "contextId",
            "greenContextId",
            "streamId",
            "correlationId",
            "globalPid",
            "deprecatedSyncType",
            "syncType",
            "eventId",
            "eventSyncId",
        ],
    ),
];

#[test]
fn the_cupti_activity_tables_have_nsys_columns_in_nsys_order() {
    let s = Scratch::new("nsys-columns");
    let p = profile_workload(&s, &["-t", "hggc"], "train_step", &["1", "4096"], &[]);
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let db = s.path("c.sqlite");
    let o = run(&[
        "export",
        "--type",
        "sqlite",
        "-o",
        db.to_str().unwrap(),
        p.report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (table, want) in NSYS_COLUMNS {
        let got: Vec<String> = rows(
            &db,
            &format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
        )
        .iter()
        .map(|r| text(&r["name"]))
        .collect();
        assert_eq!(got, *want, "{table}'s columns");
    }
}
