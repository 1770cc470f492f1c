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
