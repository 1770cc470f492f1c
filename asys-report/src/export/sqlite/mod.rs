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
pub(crate) mod tables;
mod target_info;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::Path,
};

use rusqlite::{Connection, Statement};
use tables::{
    ApiCall, CompositeEvent, GraphEvent, GraphNodeEvent, GraphTrace, Kernel, Memcpy, Memset,
    NvtxEvent, ProcessStream, SchedEvent, SessionStartTime, SqlTable, StringIds, Synchronization,
    ThreadName,
};

use super::{ExportError, global_pid, global_tid};
use crate::{
    report::schema::ActivityKind,
    report::{
        container::Container,
        read::{
            activity::{self, Activity},
            api::CallColumns,
            processes::Commands,
            ranges as hgtx,
            sched::for_each_switch_batch,
            symbols::kernel_name_ids,
        },
        reader,
        schema::{self, api},
        strings::StringTable,
    },
};

/// Every table this export can write, nsys's names first (each declared
/// in [`tables`]).
pub const TABLES: &[&str] = &[
    StringIds::NAME,
    SessionStartTime::NAME,
    ThreadName::NAME,
    ProcessStream::NAME,
    ApiCall::NAME,
    Kernel::NAME,
    Memcpy::NAME,
    Memset::NAME,
    Synchronization::NAME,
    SYNC_TYPE_ENUM,
    GraphTrace::NAME,
    GraphEvent::NAME,
    GraphNodeEvent::NAME,
    NvtxEvent::NAME,
    OSRT_API,
    SchedEvent::NAME,
    CompositeEvent::NAME,
    tables::SamplingCallchain::NAME,
    tables::GpuMetric::NAME,
    tables::GpuMetricInfo::NAME,
    tables::NicMetric::NAME,
    tables::NetworkMetricInfo::NAME,
    tables::NicInfo::NAME,
    tables::NicIdMap::NAME,
    target_info::MEMCPY_OPER_TABLE,
    target_info::MEM_KIND_TABLE,
    target_info::EVENT_TYPE_TABLE,
    target_info::EVENT_CLASS_TABLE,
    tables::GpuInfo::NAME,
    tables::CudaDevice::NAME,
    tables::CudaStream::NAME,
    tables::SystemEnv::NAME,
    target_info::META_DATA_CAPTURE,
    tables::MetaData::NAME,
    tables::ProbeHit::NAME,
];

/// nsys's enum of [`Synchronization`]'s `syncType` (CUPTI's numbers).
const SYNC_TYPE_ENUM: &str = "ENUM_CUPTI_SYNC_TYPE";
const SYNC_TYPES: &[(i64, &str, &str)] = &[
    (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
    (
        1,
        "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE",
        "Event sync",
    ),
    (
        2,
        "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT",
        "Stream wait event",
    ),
    (
        3,
        "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE",
        "Stream sync",
    ),
    (
        4,
        "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE",
        "Context sync",
    ),
];

/// CUPTI's synchronizations into [`Synchronization`], and its enum: written
/// for every report (without rows where it has no `cuda_sync`: no CUDA),
/// so that queries of them run.
fn synchronizations(w: &mut Writer, rows: bool, names: bool) -> Result<(), ExportError> {
    if rows {
        let syncs = crate::report::read::cuda::syncs(w.report)?;
        let mut ins = w.table::<Synchronization>()?;
        let id = |v: u32| (v != crate::report::read::cuda::NONE).then_some(i64::from(v));
        for s in syncs {
            let row = Synchronization {
                start: s.start - w.origin,
                end: s.end - w.origin,
                contextId: i64::from(s.context),
                streamId: id(s.stream),
                correlationId: Some(i64::from(s.correlation)),
                globalPid: Some(global_pid(s.pid)),
                syncType: i64::from(s.sync_type),
                eventId: id(s.event),
                ..Default::default()
            };
            insert(&mut ins, w.path, &row)?;
        }
    }
    if names {
        let values = SYNC_TYPES
            .iter()
            .map(|&(id, name, label)| (id, name.to_owned(), label.to_owned()));
        target_info::enum_table(w, SYNC_TYPE_ENUM, values)?;
    }
    Ok(())
}

/// nsys's three CUDA graph tables. CUPTI_ACTIVITY_KIND_GRAPH_TRACE has a
/// row per whole graph execution the report has (`cuda_graphs`, recorded
/// under `--cuda-graph-trace graph`). CUDA_GRAPH_EVENTS and
/// CUDA_GRAPH_NODE_EVENTS are nsys's record of the calls that create,
/// clone and instantiate graphs and their nodes, which asys does not
/// trace: they are written without rows, so that readers' queries of them
/// run and find nothing rather than failing on a missing table. (Under
/// `--cuda-graph-trace node` the graph and node ids are in the kernel
/// table, on each kernel a node ran.)
fn graphs(w: &Writer, want: &dyn Fn(&str) -> bool) -> Result<(), ExportError> {
    if want(GraphTrace::NAME) {
        let graphs = crate::report::read::cuda::graphs(w.report)?;
        let mut ins = w.table::<GraphTrace>()?;
        for g in graphs {
            let row = GraphTrace {
                start: g.start - w.origin,
                end: g.end - w.origin,
                deviceId: i64::from(g.device),
                contextId: i64::from(g.context),
                streamId: i64::from(g.stream),
                correlationId: Some(i64::from(g.correlation)),
                globalPid: Some(global_pid(g.pid)),
                graphId: i64::from(g.graph_id),
                ..Default::default()
            };
            insert(&mut ins, w.path, &row)?;
        }
    }
    if want(GraphEvent::NAME) {
        w.exec(&tables::create_sql::<GraphEvent>(GraphEvent::NAME))?;
    }
    if want(GraphNodeEvent::NAME) {
        w.exec(&tables::create_sql::<GraphNodeEvent>(GraphNodeEvent::NAME))?;
    }
    Ok(())
}

/// nsys's table of OS runtime calls, in the shape of [`ApiCall`].
const OSRT_API: &str = "OSRT_API";

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

/// nsys's ENUM_CUDA_MEM_KIND value of device memory.
const MEM_KIND_DEVICE: i64 = 2;

/// (copyKind, srcKind, dstKind) of a copy from the cudaMemcpyKind the
/// report keeps (0 host-host, 1 host-device, 2 device-host, 3
/// device-device): copyKind is ENUM_CUDA_MEMCPY_OPER (CUPTI's
/// CUpti_ActivityMemcpyKind), the kinds are ENUM_CUDA_MEM_KIND, NULL for
/// host memory, as asys does not know whether it was pageable or pinned.
fn copy_kinds(kind: Option<i32>) -> (i64, Option<i64>, Option<i64>) {
    let device = Some(MEM_KIND_DEVICE);
    match kind {
        Some(0) => (9, None, None),
        Some(1) => (1, None, device),
        Some(2) => (2, device, None),
        Some(3) => (8, device, device),
        _ => (0, None, None),
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
        sql_error(self.path, e)
    }

    fn exec(&self, sql: &str) -> Result<(), ExportError> {
        self.db.execute_batch(sql).map_err(|e| self.sql(e))
    }

    fn t(&self, ns: i64) -> i64 {
        ns - self.origin
    }

    /// Creates table `T` (under its own name) and prepares its insert.
    fn table<T: SqlTable>(&self) -> Result<Statement<'_>, ExportError> {
        self.table_named::<T>(T::NAME)
    }

    /// Creates table `T` under `name` and prepares its insert.
    fn table_named<T: SqlTable>(&self, name: &str) -> Result<Statement<'_>, ExportError> {
        self.exec(&tables::create_sql::<T>(name))?;
        prepare::<T>(&self.db, self.path, name)
    }
}

fn sql_error(path: &Path, e: rusqlite::Error) -> ExportError {
    ExportError::Sqlite {
        path: path.to_path_buf(),
        source: e,
    }
}

/// The insert of declared table `T` under `name`.
fn prepare<'c, T: SqlTable>(
    db: &'c Connection,
    path: &Path,
    name: &str,
) -> Result<Statement<'c>, ExportError> {
    db.prepare(&tables::insert_sql::<T>(name))
        .map_err(|e| sql_error(path, e))
}

/// Inserts `row` through `ins`.
fn insert<T: SqlTable>(ins: &mut Statement, path: &Path, row: &T) -> Result<(), ExportError> {
    row.insert(ins).map(drop).map_err(|e| sql_error(path, e))
}

/// Writes `tables` (all when None) of `report` into a new database at `path`
/// (which must not exist: the caller removed it or refused).
pub fn export(report: &Container, path: &Path, tables: &[&str]) -> Result<(), ExportError> {
    let db = Connection::open(path).map_err(|e| sql_error(path, e))?;
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
    if want(SessionStartTime::NAME) {
        session_start(&w)?;
    }
    if want(ApiCall::NAME) {
        api_table(&mut w, ApiCall::NAME, RUNTIME_SOURCES)?;
    }
    if want(OSRT_API) {
        api_table(&mut w, OSRT_API, &["osrt_api"])?;
    }
    for t in tables {
        let source = t.to_ascii_lowercase();
        if t.ends_with("_API") && *t != OSRT_API && w.report.tables().any(|r| r == source) {
            api_table(&mut w, t, &[&source])?;
        }
    }
    // The devices and streams the target-info tables list, from the device
    // tables' pass where there is one.
    let mut device_use = None;
    if want(Kernel::NAME) || want(Memcpy::NAME) || want(Memset::NAME) {
        device_use = Some(activity(&mut w, &want)?);
    }
    if [GraphTrace::NAME, GraphEvent::NAME, GraphNodeEvent::NAME]
        .iter()
        .any(|t| want(t))
    {
        graphs(&w, &want)?;
    }
    if want(Synchronization::NAME) || want(SYNC_TYPE_ENUM) {
        synchronizations(&mut w, want(Synchronization::NAME), want(SYNC_TYPE_ENUM))?;
    }
    if want(NvtxEvent::NAME) {
        nvtx(&mut w)?;
    }
    if want(SchedEvent::NAME) {
        sched(&mut w)?;
    }
    if want(CompositeEvent::NAME) || want(tables::SamplingCallchain::NAME) {
        let ids = samples(
            &mut w,
            want(CompositeEvent::NAME),
            want(tables::SamplingCallchain::NAME),
        )?;
        if want(tables::SamplingCallchain::NAME) {
            callchains::callchains(&mut w, &ids)?;
        }
    }
    if want(tables::GpuMetric::NAME) || want(tables::GpuMetricInfo::NAME) {
        metrics::gpu_metrics(&w)?;
    }
    if [
        tables::NicMetric::NAME,
        tables::NetworkMetricInfo::NAME,
        tables::NicInfo::NAME,
        tables::NicIdMap::NAME,
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
    if target_info::ENUM_TABLES.iter().any(|t| want(t)) {
        let items = w
            .report
            .tables()
            .filter_map(target_info::item_of_table)
            .collect();
        target_info::enums(&w, &items)?;
    }
    if [
        tables::GpuInfo::NAME,
        tables::CudaDevice::NAME,
        tables::CudaStream::NAME,
    ]
    .iter()
    .any(|t| want(t))
    {
        target_info::devices_and_streams(&w, device_use.take())?;
    }
    if want(tables::SystemEnv::NAME) {
        target_info::system_env(&w)?;
    }
    if want(target_info::META_DATA_CAPTURE) || want(tables::MetaData::NAME) {
        target_info::meta_data(&w)?;
    }
    if want(tables::ProbeHit::NAME) {
        probes(&mut w)?;
    }
    if want(ThreadName::NAME) {
        thread_names(&mut w)?;
    }
    if want(ProcessStream::NAME) {
        process_streams(&mut w)?;
    }
    // Last: the tables above add the strings they need.
    if want(StringIds::NAME) {
        string_ids(&w)?;
    }
    w.exec("COMMIT;")?;
    Ok(())
}

fn session_start(w: &Writer) -> Result<(), ExportError> {
    let mut ins = w.table::<SessionStartTime>()?;
    let row = SessionStartTime {
        utcEpochNs: Some(w.report.metadata.start_realtime_ns),
        ..Default::default()
    };
    insert(&mut ins, w.path, &row)
}

fn string_ids(w: &Writer) -> Result<(), ExportError> {
    let mut ins = w.table::<StringIds>()?;
    for (id, v) in w.strings.values().iter().enumerate() {
        let row = StringIds {
            id: id as i64,
            value: v.clone(),
        };
        insert(&mut ins, w.path, &row)?;
    }
    Ok(())
}

/// API calls of the report tables `sources` in one nsys-shaped table.
fn api_table(w: &mut Writer, name: &str, sources: &[&str]) -> Result<(), ExportError> {
    let mut threads = Vec::new();
    // ENUM_NSYS_EVENT_CLASS by the call's item and name, once per name.
    let mut classes: HashMap<(usize, u32), i64> = HashMap::new();
    {
        let mut ins = w.table_named::<ApiCall>(name)?;
        let cols = [CallColumns::NAMES, &[api::CORRELATION_ID]].concat();
        for (k, source) in sources.iter().enumerate() {
            let item = target_info::item_of_table(source);
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
                    let class = *classes.entry((k, name_id[i])).or_insert_with(|| {
                        let name = w.strings.get(name_id[i]).unwrap_or_default();
                        target_info::event_class(item, name)
                    });
                    let row = ApiCall {
                        start: start[i] - w.origin,
                        end: end[i] - w.origin,
                        eventClass: class,
                        globalTid: Some(global_tid(pid[i], tid[i])),
                        correlationId: (!arrow::array::Array::is_null(corr, i))
                            .then(|| i64::from(corr.value(i))),
                        nameId: i64::from(name_id[i]),
                        returnValue: ret[i],
                        callchainId: None,
                    };
                    insert(&mut ins, w.path, &row)?;
                    threads.push((pid[i], tid[i]));
                }
            }
        }
    }
    w.threads.extend(threads);
    Ok(())
}

/// The name nsys calls short: the demangled name without its arguments.
fn short_name(name: &str) -> &str {
    name.split_once('(').map_or(name, |(n, _)| n)
}

/// The inserts of the device tables the export wants (None: not wanted).
struct DeviceTables<'c> {
    kernel: Option<Statement<'c>>,
    memcpy: Option<Statement<'c>>,
    memset: Option<Statement<'c>>,
}

/// A kernel's name ids: the full (demangled) name and the short one, each
/// short name interned once per full name.
struct KernelNames {
    full: HashMap<(u32, u64), u32>,
    shorts: HashMap<u32, u32>,
}

impl KernelNames {
    /// (demangledName, shortName) of the kernel at `addr` of `pid`.
    fn ids(&mut self, strings: &mut StringTable, pid: u32, addr: Option<u64>) -> (u32, u32) {
        let full = match addr.and_then(|addr| self.full.get(&(pid, addr))) {
            Some(&id) => id,
            // Not symbolized: the address, as stats names it.
            None => strings.intern(&addr.map(|addr| format!("{addr:#x}")).unwrap_or_default()),
        };
        let short = *self.shorts.entry(full).or_insert_with(|| {
            let text = strings.get(full).unwrap_or_default().to_owned();
            strings.intern(short_name(&text))
        });
        (full, short)
    }
}

/// Kernels, copies and memsets, each into its CUPTI table if wanted.
/// The kernel, memcpy and memset tables (those wanted); returns which
/// devices each process and stream used ([`target_info::DeviceUse`]).
fn activity(
    w: &mut Writer,
    want: &dyn Fn(&str) -> bool,
) -> Result<target_info::DeviceUse, ExportError> {
    let mut names = KernelNames {
        full: kernel_name_ids(w.report)?,
        shorts: HashMap::new(),
    };
    // (Borrowing the connection alone, as the loop interns strings.)
    let Writer {
        report,
        db,
        path,
        strings,
        origin,
        ..
    } = w;
    let (path, origin) = (*path, *origin);
    let mut t = DeviceTables {
        kernel: device_table::<Kernel>(db, path, want)?,
        memcpy: device_table::<Memcpy>(db, path, want)?,
        memset: device_table::<Memset>(db, path, want)?,
    };
    let mut used = target_info::DeviceUse::default();
    for b in activity::scan_trace(report)? {
        let b = b?;
        for a in activity::rows(&b)? {
            used.add(a.device, a.pid, a.stream);
            device_row(&mut t, &mut names, strings, path, origin, &a)?;
        }
    }
    Ok(used)
}

/// Creates device table `T` and prepares its insert, if it is wanted.
fn device_table<'c, T: SqlTable>(
    db: &'c Connection,
    path: &Path,
    want: &dyn Fn(&str) -> bool,
) -> Result<Option<Statement<'c>>, ExportError> {
    if !want(T::NAME) {
        return Ok(None);
    }
    db.execute_batch(&tables::create_sql::<T>(T::NAME))
        .map_err(|e| sql_error(path, e))?;
    prepare::<T>(db, path, T::NAME).map(Some)
}

/// One device operation into the table of its kind, if that is wanted.
// The locals are the columns they fill, by nsys's names.
#[allow(non_snake_case)]
fn device_row(
    t: &mut DeviceTables,
    names: &mut KernelNames,
    strings: &mut StringTable,
    path: &Path,
    origin: i64,
    a: &Activity,
) -> Result<(), ExportError> {
    let (start, end, deviceId, streamId) = (
        a.start - origin,
        a.end - origin,
        i64::from(a.device),
        i64::from(a.stream),
    );
    // CUPTI's context id where recorded; HGPTI's records and reports older
    // than the column have none (0, as before).
    let d = &a.details;
    let contextId = d.context.map_or(0, i64::from);
    let greenContextId = d.green_context.map(i64::from);
    let correlationId = Some(i64::from(a.correlation));
    let globalPid = Some(global_pid(a.pid));
    let bytes = a.bytes.map_or(0, |b| b as i64);
    match (a.kind, t) {
        (
            Some(ActivityKind::Kernel),
            DeviceTables {
                kernel: Some(ins), ..
            },
        ) => {
            let (full, short) = names.ids(strings, a.pid, a.kernel_addr);
            let dim = |v: [Option<u32>; 3], k: usize| v[k].map(i64::from);
            let row = Kernel {
                start,
                end,
                deviceId,
                contextId,
                streamId,
                correlationId,
                globalPid,
                demangledName: i64::from(full),
                shortName: i64::from(short),
                gridX: dim(a.grid, 0),
                gridY: dim(a.grid, 1),
                gridZ: dim(a.grid, 2),
                blockX: dim(a.block, 0),
                blockY: dim(a.block, 1),
                blockZ: dim(a.block, 2),
                // CUPTI's own split; otherwise (HGPTI, older reports) the
                // one figure recorded, which is the launch's dynamic part.
                dynamicSharedMemory: d.dynamic_shared.or(a.shared_mem).map(i64::from),
                staticSharedMemory: d.static_shared.map(i64::from),
                registersPerThread: d.registers_per_thread.map(i64::from),
                localMemoryPerThread: d.local_per_thread.map(i64::from),
                localMemoryTotal: d.local_total.map(i64::from),
                greenContextId,
                // CUPTI's 0 is "not a graph's": nsys leaves those null.
                graphId: d.graph_id.filter(|&g| g != 0).map(i64::from),
                graphNodeId: d.graph_node_id.filter(|&n| n != 0).map(|n| n as i64),
                ..Default::default()
            };
            insert(ins, path, &row)
        }
        (
            Some(ActivityKind::Memcpy),
            DeviceTables {
                memcpy: Some(ins), ..
            },
        ) => {
            let (copyKind, srcKind, dstKind) = copy_kinds(a.copy_kind);
            let dev = |side: Option<i64>| (side == Some(MEM_KIND_DEVICE)).then_some(deviceId);
            let row = Memcpy {
                start,
                end,
                deviceId,
                contextId,
                greenContextId,
                streamId,
                correlationId,
                globalPid,
                bytes,
                copyKind,
                srcKind,
                dstKind,
                srcDeviceId: dev(srcKind),
                dstDeviceId: dev(dstKind),
                ..Default::default()
            };
            insert(ins, path, &row)
        }
        (
            Some(ActivityKind::Memset),
            DeviceTables {
                memset: Some(ins), ..
            },
        ) => {
            let row = Memset {
                start,
                end,
                deviceId,
                contextId,
                greenContextId,
                streamId,
                correlationId,
                globalPid,
                value: None,
                bytes,
                memKind: Some(MEM_KIND_DEVICE),
                ..Default::default()
            };
            insert(ins, path, &row)
        }
        _ => Ok(()),
    }
}

/// hgtx and NVTX ranges (hgtx is the PPU's NVTX) as nsys's NVTX_EVENTS.
fn nvtx(w: &mut Writer) -> Result<(), ExportError> {
    w.exec(&tables::create_sql::<NvtxEvent>(NvtxEvent::NAME))?;
    // Domain ids by name, 0 the default domain (nsys's numbering is its
    // own; only equality between rows means anything).
    let mut domains: BTreeMap<String, i64> = BTreeMap::from([(String::new(), 0)]);
    let mut rows = Vec::new();
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
            w.threads.insert((r.pid, r.tid));
            rows.push(NvtxEvent {
                start: w.t(r.start),
                end: Some(w.t(r.end)),
                eventType: event_type,
                text: Some(r.name),
                globalTid: Some(global_tid(r.pid, r.tid)),
                textId: Some(i64::from(text_id)),
                domainId: Some(domain),
                ..Default::default()
            });
        }
    }
    let mut ins = prepare::<NvtxEvent>(&w.db, w.path, NvtxEvent::NAME)?;
    for row in &rows {
        insert(&mut ins, w.path, row)?;
    }
    Ok(())
}

fn sched(w: &mut Writer) -> Result<(), ExportError> {
    // nsys: one row per switch in and one per switch out of a thread.
    let mut ins = w.table::<SchedEvent>()?;
    // The incoming thread's pid is not in the row: it is the one its tid
    // had when it last left a CPU, or unknown (the tid alone) before that.
    let mut pid_of: HashMap<u32, u32> = HashMap::new();
    for_each_switch_batch(w.report, |switches| {
        for sw in switches {
            pid_of.insert(sw.prev_tid, sw.prev_pid);
            let out = SchedEvent {
                start: sw.ts - w.origin,
                cpu: i64::from(sw.cpu),
                isSchedIn: 0,
                globalTid: Some(global_tid(sw.prev_pid, sw.prev_tid)),
                threadState: Some(sw.prev_state),
                threadBlock: None,
            };
            insert(&mut ins, w.path, &out)?;
            let next_pid = pid_of.get(&sw.next_tid).copied().unwrap_or(0);
            let into = SchedEvent {
                isSchedIn: 1,
                globalTid: Some(global_tid(next_pid, sw.next_tid)),
                threadState: None,
                ..out
            };
            insert(&mut ins, w.path, &into)?;
        }
        Ok::<_, ExportError>(())
    })
}

/// Hits of user-defined probes (`--probe`) as `PROBES`.
fn probes(w: &mut Writer) -> Result<(), ExportError> {
    use schema::probes as p;
    let mut ins = w.table::<tables::ProbeHit>()?;
    let cols = [
        p::START,
        p::END,
        p::PID,
        p::TID,
        p::PROBE_ID,
        p::NAME_ID,
        p::KIND,
        p::HAS_RETURN,
        p::RETURN_VALUE,
        p::ARGS,
    ];
    let mut threads = Vec::new();
    for b in p::scan(w.report, &cols)? {
        let b = b?;
        let v = p::View(&b);
        let (start, end, pid, tid) = (v.start()?, v.end()?, v.pid()?, v.tid()?);
        let (id, name, kind) = (v.probe_id()?, v.name_id()?, v.kind()?);
        let (has_ret, ret, args) = (v.has_return()?, v.return_value()?, v.args()?);
        for i in 0..b.num_rows() {
            threads.push((pid[i], tid[i]));
            let row = tables::ProbeHit {
                start: start[i] - w.origin,
                end: end[i] - w.origin,
                globalTid: global_tid(pid[i], tid[i]),
                probeId: i64::from(id[i]),
                nameId: i64::from(name[i]),
                kind: kind.value(i).to_string(),
                returnValue: has_ret.value(i).then_some(ret[i]),
                args: args.value(i).to_string(),
            };
            insert(&mut ins, w.path, &row)?;
        }
    }
    drop(ins);
    w.threads.extend(threads);
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
    let mut ins = write.then(|| w.table::<CompositeEvent>()).transpose()?;
    let mut by_thread = HashMap::new();
    let mut threads = BTreeSet::new();
    let mut id: i64 = 0;
    for b in c::scan(w.report, &[c::TS, c::PID, c::TID, c::CPU])? {
        let b = b?;
        let v = c::View(&b);
        let (ts, pid, tid, cpu) = (v.ts()?, v.pid()?, v.tid()?, v.cpu()?);
        for i in 0..b.num_rows() {
            if ids {
                by_thread.insert((tid[i], ts[i]), id);
            }
            if let Some(ins) = &mut ins {
                let row = CompositeEvent {
                    id,
                    start: ts[i] - w.origin,
                    cpu: Some(i64::from(cpu[i])),
                    threadState: None,
                    globalTid: Some(global_tid(pid[i], tid[i])),
                    cpuCycles: 0,
                };
                insert(ins, w.path, &row)?;
                threads.insert((pid[i], tid[i]));
            }
            id += 1;
        }
    }
    drop(ins);
    w.threads.extend(threads);
    Ok(by_thread)
}

/// One row per thread seen in the exported tables, named by the command
/// the report saw it with (process events), or `[pid]` when it saw none.
fn thread_names(w: &mut Writer) -> Result<(), ExportError> {
    let commands = Commands::read(w.report)?;
    let mut rows = Vec::new();
    for &(pid, tid) in &w.threads.clone() {
        let name = match commands.thread(pid, tid) {
            Some(id) => id,
            None => w.strings.intern(&format!("[{pid}]")),
        };
        rows.push(ThreadName {
            nameId: i64::from(name),
            priority: Some(0),
            globalTid: Some(global_tid(pid, tid)),
        });
    }
    let mut ins = w.table::<ThreadName>()?;
    for row in &rows {
        insert(&mut ins, w.path, row)?;
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
    w.exec(&tables::create_sql::<ProcessStream>(ProcessStream::NAME))?;
    let Some(t) = p::open(w.report)? else {
        return Ok(());
    };
    if !t.has_column(p::STDOUT) || !t.has_column(p::STDERR) {
        return Ok(());
    }
    let empty = w.strings.intern("");
    let mut rows = Vec::new();
    for b in t.scan(&[p::PID, p::STDOUT, p::STDERR], None)? {
        let b = b?;
        let v = p::View(&b);
        let pid = v.pid()?;
        for files in [v.stdout()?, v.stderr()?] {
            for (i, &pid) in pid.iter().enumerate() {
                if arrow::array::Array::is_null(files, i) {
                    continue;
                }
                rows.push(ProcessStream {
                    globalPid: global_pid(pid),
                    filenameId: i64::from(w.strings.intern(files.value(i))),
                    contentId: i64::from(empty),
                });
            }
        }
    }
    let mut ins = prepare::<ProcessStream>(&w.db, w.path, ProcessStream::NAME)?;
    for row in &rows {
        insert(&mut ins, w.path, row)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_kinds_map_onto_cupti() {
        assert_eq!(copy_kinds(Some(1)), (1, None, Some(MEM_KIND_DEVICE)));
        assert_eq!(copy_kinds(Some(3)), (8, Some(2), Some(2)));
        assert_eq!(copy_kinds(None), (0, None, None));
        assert_eq!(short_name("k(int, float)"), "k");
    }

    /// Each whole graph execution of the report is a row of
    /// CUPTI_ACTIVITY_KIND_GRAPH_TRACE, times from the session start; the
    /// two tables of graph and node creation calls are there, empty.
    #[test]
    fn graph_executions_fill_the_graph_trace_table() {
        use crate::report::{builder::ReportBuilder, rows::GraphRow};
        let rows = [
            GraphRow {
                start: 1_500,
                end: 4_000,
                pid: 42,
                device: 1,
                context: 3,
                stream: 7,
                graph_id: 9,
                correlation: 56,
            },
            GraphRow {
                start: 5_000,
                end: 6_000,
                pid: 43,
                device: 0,
                context: 1,
                stream: 13,
                graph_id: 2,
                correlation: 80,
            },
        ];
        let mut b = ReportBuilder::new().expect("builder");
        b.metadata().start_monotonic_ns = 1_000;
        b.table::<schema::cuda_graphs::Table>(schema::CUDA_GRAPHS, &rows)
            .expect("graphs");
        let report = b.finish_temporary().expect("report");
        let dir = crate::report::files::TempDir::new("sqlite-graphs").expect("dir");
        let db = dir.path().join("g.sqlite");
        let all = tables(&report);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        export(&report, &db, &all).expect("export");
        let conn = Connection::open(&db).expect("db");
        let got: Vec<Vec<Option<i64>>> = conn
            .prepare(
                "SELECT start, end, deviceId, contextId, greenContextId, streamId, \
                 correlationId, globalPid, graphId, graphExecId \
                 FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE ORDER BY start",
            )
            .expect("select")
            .query_map([], |r| (0..10).map(|i| r.get(i)).collect())
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows");
        let want: Vec<Vec<Option<i64>>> = rows
            .iter()
            .map(|g| {
                vec![
                    Some(g.start - 1_000),
                    Some(g.end - 1_000),
                    Some(i64::from(g.device)),
                    Some(i64::from(g.context)),
                    None,
                    Some(i64::from(g.stream)),
                    Some(i64::from(g.correlation)),
                    Some(global_pid(g.pid)),
                    Some(i64::from(g.graph_id)),
                    None,
                ]
            })
            .collect();
        assert_eq!(got, want);
        for t in ["CUDA_GRAPH_EVENTS", "CUDA_GRAPH_NODE_EVENTS"] {
            let n: i64 = conn
                .query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
                .expect(t);
            assert_eq!(n, 0, "{t}");
        }
    }
}
