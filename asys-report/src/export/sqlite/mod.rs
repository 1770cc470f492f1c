//! `--type sqlite`: nsys's SQLite export schema, so queries written for
//! nsys exports run unchanged. Table and column names are nsys's wherever
//! asys has the same data; see docs/export.md for the mapping.
//!
//! Times are nanoseconds since the session start (nsys's convention);
//! `TARGET_INFO_SESSION_START_TIME.utcEpochNs` is that start on the wall
//! clock.
mod callchains;
mod copy;
mod metrics;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::Path,
};

use arrow::datatypes::{Int64Type, UInt32Type};
use rusqlite::{Connection, params};

use super::{ExportError, global_pid, global_tid};
use crate::{
    report::schema::ActivityKind,
    report::{
        container::Container,
        reader,
        schema::{self, api},
        strings::StringTable,
    },
    stats::hgtx,
    stats::{
        api_sum::CallColumns,
        device::{device_ops, ops_of},
    },
};

/// Every table this export can write, nsys's names first.
pub const TABLES: &[&str] = &[
    "StringIds",
    "TARGET_INFO_SESSION_START_TIME",
    "ThreadNames",
    "ProcessStreams",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
    "OSRT_API",
    "SCHED_EVENTS",
    "COMPOSITE_EVENTS",
    "SAMPLING_CALLCHAINS",
    "GPU_METRICS",
    "TARGET_INFO_GPU_METRICS",
    "NET_NIC_METRIC",
    "TARGET_INFO_NETWORK_METRICS",
    "TARGET_INFO_NIC_INFO",
    "NIC_ID_MAP",
];

/// API tables of the report that have a table of their own above.
const MAPPED_API_SOURCES: &[&str] = &["hggc_api", "cuda_api", "osrt_api", "hgtx_api", "nvtx_api"];

/// The tables an export of `report` can hold: [`TABLES`], then one
/// `ITEM_API` table (nsys has none) per other trace item's API table
/// (`pccl_api` becomes `PCCL_API`), in the columns of the runtime table,
/// and the report tables nsys has no table for that the report holds
/// (`HOST_MEMORY`, `SCHED_WAKEUPS`, ...: see [`copy::COPIED`]).
pub fn tables(report: &Container) -> Vec<String> {
    let mut out: Vec<String> = TABLES.iter().map(|t| t.to_string()).collect();
    out.extend(
        copy::COPIED
            .iter()
            .filter(|(t, _)| report.tables().any(|r| r == *t))
            .map(|(t, _)| copy::sql_name(t)),
    );
    out.extend(
        report
            .tables()
            .filter(|t| t.ends_with("_api") && !MAPPED_API_SOURCES.contains(t))
            .map(str::to_ascii_uppercase),
    );
    out
}

/// API tables of the report that are CUDA-runtime-like: nsys puts them in
/// CUPTI_ACTIVITY_KIND_RUNTIME (hggc is the PPU's runtime).
const RUNTIME_SOURCES: &[&str] = &["hggc_api", "cuda_api"];

/// nsys's ENUM_NSYS_EVENT_TYPE values for NVTX ranges.
const NVTX_PUSH_POP_RANGE: i64 = 59;
const NVTX_START_END_RANGE: i64 = 60;

/// CUPTI_ACTIVITY_MEMCPY_KIND from the cudaMemcpyKind the report keeps
/// (0 host-host, 1 host-device, 2 device-host, 3 device-device).
fn cupti_copy_kind(kind: Option<i32>) -> (i64, i64, i64) {
    // (copyKind, srcKind, dstKind); CUPTI_ACTIVITY_MEMORY_KIND 3 is device,
    // 0 unknown: asys does not know whether host memory was pinned.
    match kind {
        Some(0) => (9, 0, 0),
        Some(1) => (1, 0, 3),
        Some(2) => (2, 3, 0),
        Some(3) => (8, 3, 3),
        _ => (0, 0, 0),
    }
}

struct Writer<'a> {
    report: &'a Container,
    db: Connection,
    path: &'a Path,
    strings: StringTable,
    /// Every thread seen, for ThreadNames.
    threads: BTreeSet<(u32, u32)>,
    origin: i64,
}

impl Writer<'_> {
    fn sql(&self, e: rusqlite::Error) -> ExportError {
        ExportError::Sqlite {
            path: self.path.to_path_buf(),
            source: e,
        }
    }

    fn exec(&self, sql: &str) -> Result<(), ExportError> {
        self.db.execute_batch(sql).map_err(|e| self.sql(e))
    }

    fn t(&self, ns: i64) -> i64 {
        ns - self.origin
    }
}

/// Writes `tables` (all when None) of `report` into a new database at `path`
/// (which must not exist: the caller removed it or refused).
pub fn export(report: &Container, path: &Path, tables: &[&str]) -> Result<(), ExportError> {
    let db = Connection::open(path).map_err(|e| ExportError::Sqlite {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut w = Writer {
        report,
        db,
        path,
        strings: reader::string_table(report)?,
        threads: BTreeSet::new(),
        origin: report.metadata.start_monotonic_ns,
    };
    // One transaction: a crash leaves no half-written database behind as
    // if it were whole, and SQLite inserts are far faster inside one.
    w.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;")?;
    let want = |t: &str| tables.contains(&t);
    if want("TARGET_INFO_SESSION_START_TIME") {
        session_start(&w)?;
    }
    if want("CUPTI_ACTIVITY_KIND_RUNTIME") {
        api_table(&mut w, "CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_SOURCES)?;
    }
    if want("OSRT_API") {
        api_table(&mut w, "OSRT_API", &["osrt_api"])?;
    }
    for t in tables {
        let source = t.to_ascii_lowercase();
        if t.ends_with("_API") && *t != "OSRT_API" && w.report.tables().any(|r| r == source) {
            api_table(&mut w, t, &[&source])?;
        }
    }
    if want("CUPTI_ACTIVITY_KIND_KERNEL")
        || want("CUPTI_ACTIVITY_KIND_MEMCPY")
        || want("CUPTI_ACTIVITY_KIND_MEMSET")
    {
        activity(&mut w, &want)?;
    }
    if want("NVTX_EVENTS") {
        nvtx(&mut w)?;
    }
    if want("SCHED_EVENTS") {
        sched(&mut w)?;
    }
    if want("COMPOSITE_EVENTS") || want("SAMPLING_CALLCHAINS") {
        let ids = samples(
            &mut w,
            want("COMPOSITE_EVENTS"),
            want("SAMPLING_CALLCHAINS"),
        )?;
        if want("SAMPLING_CALLCHAINS") {
            callchains::callchains(&mut w, &ids)?;
        }
    }
    if want("GPU_METRICS") || want("TARGET_INFO_GPU_METRICS") {
        metrics::gpu_metrics(&w)?;
    }
    if [
        "NET_NIC_METRIC",
        "TARGET_INFO_NETWORK_METRICS",
        "TARGET_INFO_NIC_INFO",
        "NIC_ID_MAP",
    ]
    .iter()
    .any(|t| want(t))
    {
        metrics::nic_metrics(&w)?;
    }
    for (table, times) in copy::COPIED {
        if want(&copy::sql_name(table)) {
            copy::copy(&w, table, times)?;
        }
    }
    if want("ThreadNames") {
        thread_names(&mut w)?;
    }
    if want("ProcessStreams") {
        process_streams(&mut w)?;
    }
    // Last: the tables above add the strings they need.
    if want("StringIds") {
        string_ids(&w)?;
    }
    w.exec("COMMIT;")?;
    Ok(())
}

fn session_start(w: &Writer) -> Result<(), ExportError> {
    w.exec("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);")?;
    w.db.execute(
        "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?1, NULL, NULL)",
        params![w.report.metadata.start_realtime_ns],
    )
    .map_err(|e| w.sql(e))?;
    Ok(())
}

fn string_ids(w: &Writer) -> Result<(), ExportError> {
    w.exec("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);")?;
    let mut ins =
        w.db.prepare("INSERT INTO StringIds VALUES (?1, ?2)")
            .map_err(|e| w.sql(e))?;
    for (id, v) in w.strings.values().iter().enumerate() {
        ins.execute(params![id as i64, v]).map_err(|e| w.sql(e))?;
    }
    Ok(())
}

/// API calls of the report tables `sources` in one nsys-shaped table.
fn api_table(w: &mut Writer, name: &str, sources: &[&str]) -> Result<(), ExportError> {
    w.exec(&format!(
        "CREATE TABLE {name} (start INTEGER NOT NULL, end INTEGER NOT NULL, \
         eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, \
         nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);"
    ))?;
    // nsys's ENUM_NSYS_EVENT_CLASS: 1 is a CUDA runtime call, 27 an OS
    // runtime call; the other items' tables are asys's own, and say 1 too.
    let class = if name == "OSRT_API" { 27 } else { 1 };
    for source in sources {
        let rows = {
            let mut ins =
                w.db.prepare(&format!(
                    "INSERT INTO {name} VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL)"
                ))
                .map_err(|e| w.sql(e))?;
            let mut threads = Vec::new();
            let cols = [CallColumns::NAMES, &[api::CORRELATION_ID]].concat();
            for b in api::scan(w.report, source, &cols)? {
                let b = b?;
                let CallColumns {
                    start,
                    end,
                    pid,
                    tid,
                    name: name_id,
                    ret,
                } = CallColumns::of(&b)?;
                let corr = api::View(&b).correlation_id()?;
                for i in 0..b.num_rows() {
                    let c = (!arrow::array::Array::is_null(corr, i)).then(|| corr.value(i));
                    ins.execute(params![
                        start[i] - w.origin,
                        end[i] - w.origin,
                        class,
                        global_tid(pid[i], tid[i]),
                        c,
                        name_id[i],
                        ret[i]
                    ])
                    .map_err(|e| w.sql(e))?;
                    threads.push((pid[i], tid[i]));
                }
            }
            threads
        };
        w.threads.extend(rows);
    }
    Ok(())
}

/// The name nsys calls short: the demangled name without its arguments.
fn short_name(name: &str) -> &str {
    name.split_once('(').map_or(name, |(n, _)| n)
}

fn activity(w: &mut Writer, want: &dyn Fn(&str) -> bool) -> Result<(), ExportError> {
    const COMMON: &str = "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, \
        contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, \
        globalPid INTEGER";
    let (kernel, memcpy, memset) = (
        want("CUPTI_ACTIVITY_KIND_KERNEL"),
        want("CUPTI_ACTIVITY_KIND_MEMCPY"),
        want("CUPTI_ACTIVITY_KIND_MEMSET"),
    );
    if kernel {
        w.exec(&format!(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({COMMON}, demangledName INTEGER NOT NULL, \
             shortName INTEGER NOT NULL, mangledName INTEGER, gridX INTEGER, gridY INTEGER, \
             gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER, \
             staticSharedMemory INTEGER, dynamicSharedMemory INTEGER);"
        ))?;
    }
    if memcpy {
        w.exec(&format!(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY ({COMMON}, bytes INTEGER NOT NULL, \
             copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER, \
             srcDeviceId INTEGER, dstDeviceId INTEGER);"
        ))?;
    }
    if memset {
        w.exec(&format!(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET ({COMMON}, value INTEGER, \
             bytes INTEGER NOT NULL, memKind INTEGER);"
        ))?;
    }
    let names = crate::stats::api_sum::kernel_names(w.report)?;
    // Short names are interned once per full name.
    let mut shorts: HashMap<u32, u32> = HashMap::new();
    // (Borrowing the connection alone, as the loop interns strings.)
    let (db, path) = (&w.db, w.path);
    let prepare = |wanted: bool, sql: &str| {
        wanted
            .then(|| db.prepare(sql))
            .transpose()
            .map_err(|e| ExportError::Sqlite {
                path: path.to_path_buf(),
                source: e,
            })
    };
    let mut ins_kernel = prepare(
        kernel,
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES \
         (?1,?2,?3,?4,?5,?6,?7,?8,?9,NULL,?10,?11,?12,?13,?14,?15,NULL,?16)",
    )?;
    let mut ins_memcpy = prepare(
        memcpy,
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
    )?;
    let mut ins_memset = prepare(
        memset,
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?1,?2,?3,?4,?5,?6,?7,NULL,?8,3)",
    )?;
    for b in device_ops(w.report)? {
        let b = b?;
        for a in ops_of(&b)? {
            let common = (
                a.start - w.origin,
                a.end - w.origin,
                a.device,
                // One context per device and process: asys records none.
                0,
                a.stream,
                a.correlation,
                global_pid(a.pid),
            );
            let nbytes = a.bytes.map(|b| b as i64);
            match a.kind {
                Some(ActivityKind::Kernel) if kernel => {
                    let addr = a.kernel_addr;
                    let full = match addr.and_then(|addr| names.get(&(a.pid, addr))) {
                        Some(&id) => id,
                        // Not symbolized: the address, as stats names it.
                        None => w
                            .strings
                            .intern(&addr.map(|addr| format!("{addr:#x}")).unwrap_or_default()),
                    };
                    let short = match shorts.get(&full) {
                        Some(&s) => s,
                        None => {
                            let text = w.strings.get(full).unwrap_or_default().to_owned();
                            let s = w.strings.intern(short_name(&text));
                            shorts.insert(full, s);
                            s
                        }
                    };
                    ins_kernel
                        .as_mut()
                        .expect("prepared when the kernel table is wanted")
                        .execute(params![
                            common.0,
                            common.1,
                            common.2,
                            common.3,
                            common.4,
                            common.5,
                            common.6,
                            full,
                            short,
                            a.grid[0],
                            a.grid[1],
                            a.grid[2],
                            a.block[0],
                            a.block[1],
                            a.block[2],
                            a.shared_mem,
                        ])
                        .map_err(|e| w.sql(e))?;
                }
                Some(ActivityKind::Memcpy) if memcpy => {
                    let (k, src, dst) = cupti_copy_kind(a.copy_kind);
                    let dev = |side: i64| (side == 3).then_some(a.device);
                    ins_memcpy
                        .as_mut()
                        .expect("prepared when the memcpy table is wanted")
                        .execute(params![
                            common.0,
                            common.1,
                            common.2,
                            common.3,
                            common.4,
                            common.5,
                            common.6,
                            nbytes.unwrap_or(0),
                            k,
                            src,
                            dst,
                            dev(src),
                            dev(dst),
                        ])
                        .map_err(|e| w.sql(e))?;
                }
                Some(ActivityKind::Memset) if memset => {
                    ins_memset
                        .as_mut()
                        .expect("prepared when the memset table is wanted")
                        .execute(params![
                            common.0,
                            common.1,
                            common.2,
                            common.3,
                            common.4,
                            common.5,
                            common.6,
                            nbytes.unwrap_or(0),
                        ])
                        .map_err(|e| w.sql(e))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// hgtx and NVTX ranges (hgtx is the PPU's NVTX) as nsys's NVTX_EVENTS.
fn nvtx(w: &mut Writer) -> Result<(), ExportError> {
    w.exec(
        "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, \
         eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, \
         text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, \
         domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, \
         uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, \
         jsonText TEXT);",
    )?;
    // Domain ids by name, 0 the default domain (nsys's numbering is its
    // own; only equality between rows means anything).
    let mut domains: BTreeMap<String, i64> = BTreeMap::from([(String::new(), 0)]);
    for family in [hgtx::HGTX, hgtx::NVTX] {
        for r in hgtx::ranges(w.report, family)? {
            let next = domains.len() as i64;
            let domain = *domains.entry(r.domain.clone()).or_insert(next);
            let text_id = w.strings.intern(&r.name);
            let event_type = if r.push_pop {
                NVTX_PUSH_POP_RANGE
            } else {
                NVTX_START_END_RANGE
            };
            let gtid = global_tid(r.pid, r.tid);
            w.db.prepare_cached(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    w.t(r.start),
                    w.t(r.end),
                    event_type,
                    r.name,
                    gtid,
                    text_id,
                    domain
                ])
            })
            .map_err(|e| w.sql(e))?;
            w.threads.insert((r.pid, r.tid));
        }
    }
    Ok(())
}

fn sched(w: &mut Writer) -> Result<(), ExportError> {
    use schema::sched as s;
    // nsys: one row per switch in and one per switch out of a thread.
    w.exec(
        "CREATE TABLE SCHED_EVENTS (start INTEGER NOT NULL, cpu INTEGER NOT NULL, \
         isSchedIn INTEGER NOT NULL, globalTid INTEGER, threadState INTEGER, \
         threadBlock INTEGER);",
    )?;
    // The incoming thread's pid is not in the row: it is the one its tid
    // had when it last left a CPU, or unknown (the tid alone) before that.
    let mut pid_of: HashMap<u32, u32> = HashMap::new();
    let cols = [
        s::TS,
        s::CPU,
        s::PREV_PID,
        s::PREV_TID,
        s::PREV_STATE,
        s::NEXT_TID,
    ];
    for b in reader::scan(w.report, schema::SCHED, &cols)? {
        let b = b?;
        let ts = b.values::<Int64Type>(s::TS)?;
        let cpu = b.values::<UInt32Type>(s::CPU)?;
        let prev_pid = b.values::<UInt32Type>(s::PREV_PID)?;
        let prev_tid = b.values::<UInt32Type>(s::PREV_TID)?;
        let state = b.values::<Int64Type>(s::PREV_STATE)?;
        let next_tid = b.values::<UInt32Type>(s::NEXT_TID)?;
        for i in 0..b.num_rows() {
            pid_of.insert(prev_tid[i], prev_pid[i]);
            let mut ins =
                w.db.prepare_cached("INSERT INTO SCHED_EVENTS VALUES (?1, ?2, ?3, ?4, ?5, NULL)")
                    .map_err(|e| w.sql(e))?;
            ins.execute(params![
                ts[i] - w.origin,
                cpu[i],
                0,
                global_tid(prev_pid[i], prev_tid[i]),
                state[i]
            ])
            .map_err(|e| w.sql(e))?;
            let next_pid = pid_of.get(&next_tid[i]).copied().unwrap_or(0);
            ins.execute(params![
                ts[i] - w.origin,
                cpu[i],
                1,
                global_tid(next_pid, next_tid[i]),
                Option::<i64>::None
            ])
            .map_err(|e| w.sql(e))?;
        }
    }
    Ok(())
}

/// CPU samples as nsys's COMPOSITE_EVENTS (written when `write`), and each
/// sample's id by its thread and time when `ids` (for SAMPLING_CALLCHAINS,
/// whose rows refer to it).
fn samples(
    w: &mut Writer,
    write: bool,
    ids: bool,
) -> Result<HashMap<(u32, i64), i64>, ExportError> {
    use schema::cpu_samples as c;
    if write {
        w.exec(
            "CREATE TABLE COMPOSITE_EVENTS (id INTEGER NOT NULL PRIMARY KEY, \
             start INTEGER NOT NULL, cpu INTEGER, threadState INTEGER, globalTid INTEGER, \
             cpuCycles INTEGER NOT NULL);",
        )?;
    }
    let mut by_thread = HashMap::new();
    let mut id: i64 = 0;
    for b in reader::scan(
        w.report,
        schema::CPU_SAMPLES,
        &[c::TS, c::PID, c::TID, c::CPU],
    )? {
        let b = b?;
        let ts = b.values::<Int64Type>(c::TS)?;
        let pid = b.values::<UInt32Type>(c::PID)?;
        let tid = b.values::<UInt32Type>(c::TID)?;
        let cpu = b.values::<UInt32Type>(c::CPU)?;
        for i in 0..b.num_rows() {
            if ids {
                by_thread.insert((tid[i], ts[i]), id);
            }
            if write {
                w.db.prepare_cached(
                    "INSERT INTO COMPOSITE_EVENTS VALUES (?1, ?2, ?3, NULL, ?4, 0)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        id,
                        ts[i] - w.origin,
                        cpu[i],
                        global_tid(pid[i], tid[i])
                    ])
                })
                .map_err(|e| w.sql(e))?;
                w.threads.insert((pid[i], tid[i]));
            }
            id += 1;
        }
    }
    Ok(by_thread)
}

/// One row per thread seen in the exported tables, named by the command
/// the report saw it with (process events), or `[pid]` when it saw none.
fn thread_names(w: &mut Writer) -> Result<(), ExportError> {
    w.exec(
        "CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, \
         globalTid INTEGER);",
    )?;
    let commands = super::names::Commands::read(w.report)?;
    for &(pid, tid) in &w.threads.clone() {
        let name = match commands.thread(pid, tid) {
            Some(id) => id,
            None => w.strings.intern(&format!("[{pid}]")),
        };
        w.db.prepare_cached("INSERT INTO ThreadNames VALUES (?1, 0, ?2)")
            .and_then(|mut s| s.execute(params![name, global_tid(pid, tid)]))
            .map_err(|e| w.sql(e))?;
    }
    Ok(())
}

/// nsys's ProcessStreams: one row per standard stream of each traced
/// process, `filenameId` naming where it went (`processes.stdout` and
/// `stderr`: a file's path, `pipe:[N]`, a terminal). nsys copies the
/// stream's text into `contentId`; asys does not capture output, so it
/// points at the empty string. Reports from before those columns give none.
fn process_streams(w: &mut Writer) -> Result<(), ExportError> {
    use schema::processes as p;
    w.exec(
        "CREATE TABLE ProcessStreams (globalPid INTEGER NOT NULL, filenameId INTEGER NOT NULL, \
         contentId INTEGER NOT NULL);",
    )?;
    let Some(t) = reader::open(w.report, schema::PROCESSES)? else {
        return Ok(());
    };
    if !t.has_column(p::STDOUT) || !t.has_column(p::STDERR) {
        return Ok(());
    }
    let empty = w.strings.intern("");
    for b in t.scan(&[p::PID, p::STDOUT, p::STDERR], None)? {
        let b = b?;
        let pid = b.values::<UInt32Type>(p::PID)?;
        for column in [p::STDOUT, p::STDERR] {
            let files = b.strs(column)?;
            for (i, &pid) in pid.iter().enumerate() {
                if arrow::array::Array::is_null(files, i) {
                    continue;
                }
                let file = w.strings.intern(files.value(i));
                w.db.prepare_cached("INSERT INTO ProcessStreams VALUES (?1, ?2, ?3)")
                    .and_then(|mut s| s.execute(params![global_pid(pid), file, empty]))
                    .map_err(|e| w.sql(e))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_kinds_map_onto_cupti() {
        assert_eq!(cupti_copy_kind(Some(1)), (1, 0, 3));
        assert_eq!(cupti_copy_kind(Some(3)), (8, 3, 3));
        assert_eq!(cupti_copy_kind(None).0, 0);
        assert_eq!(short_name("k(int, float)"), "k");
    }
}
