//! The tables of the SQLite export, by nsys's names (its "Exporter Data
//! Model"), each declared once here: a row struct whose fields are the
//! columns, by nsys's names and in nsys's order. The declaration gives the
//! `CREATE TABLE` text, the insert (bound by field, never by a hand-counted
//! `?N`), and the typed read that `import/sqlite.rs` uses, so the writer
//! and the reader cannot disagree on a column. The Rust type says the SQL
//! type: `i64` is `INTEGER NOT NULL`, `Option<i64>` a nullable `INTEGER`,
//! `String`/`Option<String>` `TEXT`, `f64`/`Option<f64>` `REAL`.
//!
//! Report tables nsys has no table for are not declared here: `copy.rs`
//! takes their columns from the report's own declarations.
#![allow(non_snake_case)]

use rusqlite::{Connection, Statement, ToSql, types::FromSql};

/// One column of a declared table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// nsys's name of the column.
    pub name: &'static str,
    /// Its SQL type and nullness (`INTEGER NOT NULL`).
    pub decl: &'static str,
    /// Whether it may be NULL.
    pub nullable: bool,
}

/// A Rust type that a declared column may have, and the SQL it stands for.
pub trait SqlValue: ToSql + FromSql {
    const DECL: &'static str;
    const NULLABLE: bool;
}

macro_rules! sql_value {
    ($($t:ty => $decl:literal, $nullable:literal;)*) => {
        $(impl SqlValue for $t {
            const DECL: &'static str = $decl;
            const NULLABLE: bool = $nullable;
        })*
    };
}
sql_value! {
    i64 => "INTEGER NOT NULL", false;
    Option<i64> => "INTEGER", true;
    String => "TEXT NOT NULL", false;
    Option<String> => "TEXT", true;
    f64 => "REAL NOT NULL", false;
    Option<f64> => "REAL", true;
}

/// A declared table ([`sql_table!`]).
pub trait SqlTable: Sized {
    /// nsys's name of the table (for the API tables, which share one shape
    /// under several names, the runtime's).
    const NAME: &'static str;
    const COLUMNS: &'static [Column];
    /// Table constraints after the columns (a primary key).
    const CONSTRAINTS: &'static str;

    /// Inserts the row through `insert`, a statement from [`insert_sql`].
    fn insert(&self, insert: &mut Statement) -> rusqlite::Result<usize>;

    /// The row read from a statement from [`select_sql`].
    fn from_row(row: &rusqlite::Row) -> rusqlite::Result<Self>;
}

/// `CREATE TABLE name (...)` of `T` under `name`.
pub fn create_sql<T: SqlTable>(name: &str) -> String {
    let mut parts: Vec<String> = T::COLUMNS
        .iter()
        .map(|c| format!("{} {}", c.name, c.decl))
        .collect();
    if !T::CONSTRAINTS.is_empty() {
        parts.push(T::CONSTRAINTS.to_owned());
    }
    format!("CREATE TABLE {name} ({});", parts.join(", "))
}

/// The insert of one row of `T` into `name`, every column named.
pub fn insert_sql<T: SqlTable>(name: &str) -> String {
    let names: Vec<&str> = T::COLUMNS.iter().map(|c| c.name).collect();
    let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO {name} ({}) VALUES ({})",
        names.join(", "),
        marks.join(", ")
    )
}

/// A select of every column of `T` from `name` in the database `db`, in
/// declared order, for [`SqlTable::from_row`]. A nullable column that the
/// file lacks (an export from before it was added, or another tool's)
/// reads as NULL; a missing column that may not be NULL is an error
/// naming it. `tail` follows (an `ORDER BY`).
pub fn select_sql<T: SqlTable>(
    db: &Connection,
    name: &str,
    tail: &str,
) -> Result<String, MissingColumn> {
    let present = table_columns(db, name).map_err(MissingColumn::Sql)?;
    let mut parts = Vec::with_capacity(T::COLUMNS.len());
    for c in T::COLUMNS {
        if present.iter().any(|p| p.eq_ignore_ascii_case(c.name)) {
            parts.push(format!("\"{}\"", c.name));
        } else if c.nullable {
            parts.push(format!("NULL AS \"{}\"", c.name));
        } else {
            return Err(MissingColumn::Missing {
                table: name.to_owned(),
                column: c.name,
            });
        }
    }
    Ok(format!(
        "SELECT {} FROM \"{name}\" {tail}",
        parts.join(", ")
    ))
}

/// The columns the table `name` of `db` has.
fn table_columns(db: &Connection, name: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = db.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = st.query_map([name], |r| r.get::<_, String>(0))?;
    names.collect()
}

/// Why a declared table could not be read from a file.
#[derive(Debug, thiserror::Error)]
pub enum MissingColumn {
    #[error("table {table} has no column {column}")]
    Missing { table: String, column: &'static str },
    #[error(transparent)]
    Sql(rusqlite::Error),
}

/// Declares a table: `sql_table! { /// doc  pub struct Row in "NAME" {
/// column: Type, ... } }`, with an optional `key "PRIMARY KEY (...)"`
/// after the name. Field names are nsys's column names.
macro_rules! sql_table {
    (
        $(#[$m:meta])*
        pub struct $Row:ident in $name:literal $(key $key:literal)? {
            $( $(#[$cm:meta])* $col:ident : $ty:ty, )*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $Row {
            $( $(#[$cm])* pub $col: $ty, )*
        }

        impl $crate::export::sqlite::tables::SqlTable for $Row {
            const NAME: &'static str = $name;
            const COLUMNS: &'static [$crate::export::sqlite::tables::Column] = &[
                $( $crate::export::sqlite::tables::Column {
                    name: stringify!($col),
                    decl: <$ty as $crate::export::sqlite::tables::SqlValue>::DECL,
                    nullable: <$ty as $crate::export::sqlite::tables::SqlValue>::NULLABLE,
                }, )*
            ];
            const CONSTRAINTS: &'static str = concat!("" $(, $key)?);

            fn insert(&self, insert: &mut rusqlite::Statement) -> rusqlite::Result<usize> {
                insert.execute(rusqlite::params![ $( self.$col ),* ])
            }

            fn from_row(row: &rusqlite::Row) -> rusqlite::Result<Self> {
                // The select lists the columns in declared order.
                let mut i = 0usize;
                let mut next = || {
                    i += 1;
                    i - 1
                };
                Ok(Self { $( $col: row.get(next())?, )* })
            }
        }
    };
}

sql_table! {
    /// Every string the other tables point at by id.
    pub struct StringIds in "StringIds" key "PRIMARY KEY (id)" {
        id: i64,
        value: String,
    }
}

sql_table! {
    /// When the session started, on the wall clock: times in every other
    /// table are nanoseconds since then.
    pub struct SessionStartTime in "TARGET_INFO_SESSION_START_TIME" {
        utcEpochNs: Option<i64>,
        utcTime: Option<String>,
        localTime: Option<String>,
    }
}

sql_table! {
    /// An API call: nsys's CUPTI_ACTIVITY_KIND_RUNTIME and OSRT_API, and
    /// asys's `ITEM_API` tables of the items nsys has no table for.
    pub struct ApiCall in "CUPTI_ACTIVITY_KIND_RUNTIME" {
        start: i64,
        end: i64,
        /// ENUM_NSYS_EVENT_CLASS.
        eventClass: i64,
        globalTid: Option<i64>,
        correlationId: Option<i64>,
        nameId: i64,
        returnValue: i64,
        callchainId: Option<i64>,
    }
}

// The four CUPTI activity tables below (kernel, memcpy, memset,
// synchronization) and the three graph tables list every column nsys
// writes, in nsys's order: NVIDIA Nsight Systems' documentation, "SQLite
// Schema Reference", as of its 2026.4 release (export schema version
// 3.28.1). A column asys has no value for is NULL, even where nsys
// declares it NOT NULL, so that the reader sees "unknown" rather than a
// made-up 0.

sql_table! {
    /// A kernel's execution. Columns asys has no source for (launch type,
    /// cache config, grid id, the QMD and cluster columns, ...) are NULL:
    /// see docs/export.md.
    pub struct Kernel in "CUPTI_ACTIVITY_KIND_KERNEL" {
        start: i64,
        end: i64,
        deviceId: i64,
        contextId: i64,
        greenContextId: Option<i64>,
        streamId: i64,
        correlationId: Option<i64>,
        globalPid: Option<i64>,
        demangledName: i64,
        shortName: i64,
        mangledName: Option<i64>,
        /// ENUM_CUDA_KERNEL_LAUNCH_TYPE.
        launchType: Option<i64>,
        /// ENUM_CUDA_FUNC_CACHE_CONFIG.
        cacheConfig: Option<i64>,
        registersPerThread: Option<i64>,
        gridX: Option<i64>,
        gridY: Option<i64>,
        gridZ: Option<i64>,
        blockX: Option<i64>,
        blockY: Option<i64>,
        blockZ: Option<i64>,
        staticSharedMemory: Option<i64>,
        dynamicSharedMemory: Option<i64>,
        localMemoryPerThread: Option<i64>,
        localMemoryTotal: Option<i64>,
        gridId: Option<i64>,
        sharedMemoryExecuted: Option<i64>,
        graphNodeId: Option<i64>,
        /// ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG.
        sharedMemoryLimitConfig: Option<i64>,
        qmdBulkReleaseDone: Option<i64>,
        qmdPreexitDone: Option<i64>,
        qmdLastCtaDone: Option<i64>,
        graphId: Option<i64>,
        clusterX: Option<i64>,
        clusterY: Option<i64>,
        clusterZ: Option<i64>,
        clusterSchedulingPolicy: Option<i64>,
        maxPotentialClusterSize: Option<i64>,
        maxActiveClusters: Option<i64>,
        sharedMemoryRequestedPercentage: Option<i64>,
        tensorSizeMinusOneElements: Option<String>,
    }
}

sql_table! {
    /// A copy.
    pub struct Memcpy in "CUPTI_ACTIVITY_KIND_MEMCPY" {
        start: i64,
        end: i64,
        deviceId: i64,
        contextId: i64,
        greenContextId: Option<i64>,
        streamId: i64,
        correlationId: Option<i64>,
        globalPid: Option<i64>,
        bytes: i64,
        /// ENUM_CUDA_MEMCPY_OPER.
        copyKind: i64,
        deprecatedSrcId: Option<i64>,
        /// ENUM_CUDA_MEM_KIND.
        srcKind: Option<i64>,
        dstKind: Option<i64>,
        srcDeviceId: Option<i64>,
        srcContextId: Option<i64>,
        dstDeviceId: Option<i64>,
        dstContextId: Option<i64>,
        /// ENUM_CUDA_UNIF_MEM_MIGRATION.
        migrationCause: Option<i64>,
        graphNodeId: Option<i64>,
        virtualAddress: Option<i64>,
        copyCount: Option<i64>,
    }
}

sql_table! {
    /// A memset.
    pub struct Memset in "CUPTI_ACTIVITY_KIND_MEMSET" {
        start: i64,
        end: i64,
        deviceId: i64,
        contextId: i64,
        greenContextId: Option<i64>,
        streamId: i64,
        correlationId: Option<i64>,
        globalPid: Option<i64>,
        value: Option<i64>,
        bytes: i64,
        graphNodeId: Option<i64>,
        /// ENUM_CUDA_MEM_KIND.
        memKind: Option<i64>,
    }
}

sql_table! {
    /// A CUDA synchronization (CUPTI's record, the report's `cuda_sync`).
    pub struct Synchronization in "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" {
        start: i64,
        end: i64,
        /// CUPTI's record names no device (its context does).
        deviceId: Option<i64>,
        contextId: i64,
        greenContextId: Option<i64>,
        /// NULL: no stream (a context or event synchronize).
        streamId: Option<i64>,
        correlationId: Option<i64>,
        globalPid: Option<i64>,
        /// nsys keeps it for older reports; asys writes `syncType`.
        deprecatedSyncType: Option<i64>,
        /// ENUM_CUPTI_SYNC_TYPE.
        syncType: i64,
        /// NULL: no event.
        eventId: Option<i64>,
        eventSyncId: Option<i64>,
    }
}

sql_table! {
    /// A whole CUDA graph execution (CUPTI's graph-trace record, the
    /// report's `cuda_graphs`, `--cuda-graph-trace graph`).
    pub struct GraphTrace in "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" {
        start: i64,
        end: i64,
        deviceId: i64,
        contextId: i64,
        greenContextId: Option<i64>,
        streamId: i64,
        correlationId: Option<i64>,
        globalPid: Option<i64>,
        /// CUPTI's id of the launched graph, as the record gives it (the
        /// number node-mode kernels carry as their `graphId`).
        graphId: i64,
        /// NULL: CUPTI's record gives one id; nsys takes the executable
        /// graph's own from the instantiation call, which asys does not trace.
        graphExecId: Option<i64>,
    }
}

sql_table! {
    /// A graph creation, clone or instantiation call (nsys's
    /// CUDA_GRAPH_EVENTS). asys traces none: written empty, so that
    /// queries of it run.
    pub struct GraphEvent in "CUDA_GRAPH_EVENTS" {
        start: i64,
        end: i64,
        /// ENUM_NSYS_EVENT_CLASS.
        eventClass: i64,
        globalTid: Option<i64>,
        nameId: i64,
        graphId: Option<i64>,
        originalGraphId: Option<i64>,
        graphExecId: Option<i64>,
    }
}

sql_table! {
    /// A graph node's creation or clone (nsys's CUDA_GRAPH_NODE_EVENTS).
    /// asys traces none: written empty, so that queries of it run.
    pub struct GraphNodeEvent in "CUDA_GRAPH_NODE_EVENTS" {
        start: i64,
        end: i64,
        /// ENUM_NSYS_EVENT_CLASS.
        eventClass: i64,
        globalTid: Option<i64>,
        nameId: i64,
        graphNodeId: i64,
        originalGraphNodeId: Option<i64>,
    }
}

sql_table! {
    /// An NVTX (or hgtx) range.
    pub struct NvtxEvent in "NVTX_EVENTS" {
        start: i64,
        end: Option<i64>,
        /// ENUM_NSYS_EVENT_TYPE.
        eventType: i64,
        rangeId: Option<i64>,
        category: Option<i64>,
        color: Option<i64>,
        text: Option<String>,
        globalTid: Option<i64>,
        endGlobalTid: Option<i64>,
        textId: Option<i64>,
        domainId: Option<i64>,
        uint64Value: Option<i64>,
        int64Value: Option<i64>,
        doubleValue: Option<f64>,
        uint32Value: Option<i64>,
        int32Value: Option<i64>,
        floatValue: Option<f64>,
        jsonTextId: Option<i64>,
        jsonText: Option<String>,
    }
}

sql_table! {
    /// A thread switched onto (`isSchedIn` 1) or off a CPU.
    pub struct SchedEvent in "SCHED_EVENTS" {
        start: i64,
        cpu: i64,
        isSchedIn: i64,
        globalTid: Option<i64>,
        threadState: Option<i64>,
        threadBlock: Option<i64>,
    }
}

sql_table! {
    /// A CPU sample.
    pub struct CompositeEvent in "COMPOSITE_EVENTS" key "PRIMARY KEY (id)" {
        id: i64,
        start: i64,
        cpu: Option<i64>,
        threadState: Option<i64>,
        globalTid: Option<i64>,
        cpuCycles: i64,
    }
}

sql_table! {
    /// One frame of a CPU sample's stack, `stackDepth` 0 innermost.
    pub struct SamplingCallchain in "SAMPLING_CALLCHAINS" key "PRIMARY KEY (id, stackDepth)" {
        id: i64,
        symbol: i64,
        module: i64,
        kernelMode: Option<i64>,
        thumbCode: Option<i64>,
        unresolved: Option<i64>,
        specialEntry: Option<i64>,
        originalIP: Option<i64>,
        unwindMethod: Option<i64>,
        stackDepth: i64,
    }
}

sql_table! {
    /// A thread's name.
    pub struct ThreadName in "ThreadNames" {
        nameId: i64,
        priority: Option<i64>,
        globalTid: Option<i64>,
    }
}

sql_table! {
    /// Where a process's standard stream went.
    pub struct ProcessStream in "ProcessStreams" {
        globalPid: i64,
        filenameId: i64,
        contentId: i64,
    }
}

sql_table! {
    /// One metric of one device sample.
    pub struct GpuMetric in "GPU_METRICS" {
        timestamp: Option<i64>,
        typeId: i64,
        metricId: i64,
        value: i64,
        globalPid: Option<i64>,
    }
}

sql_table! {
    /// The names of the devices' metrics.
    pub struct GpuMetricInfo in "TARGET_INFO_GPU_METRICS" {
        typeId: i64,
        sourceId: i64,
        typeName: String,
        metricId: i64,
        metricName: String,
    }
}

sql_table! {
    /// One counter of an interface or RDMA port over one interval.
    pub struct NicMetric in "NET_NIC_METRIC" {
        start: i64,
        end: i64,
        globalId: i64,
        portId: i64,
        metricsListId: i64,
        metricsIdx: i64,
        value: i64,
    }
}

sql_table! {
    /// The names of the NIC counters.
    pub struct NetworkMetricInfo in "TARGET_INFO_NETWORK_METRICS" {
        metricsListId: i64,
        metricsIdx: i64,
        name: String,
        description: String,
        unit: String,
    }
}

sql_table! {
    /// An interface or RDMA device.
    pub struct NicInfo in "TARGET_INFO_NIC_INFO" {
        globalId: Option<i64>,
        stateName: String,
        nicId: i64,
        name: String,
        deviceId: i64,
        vendorId: i64,
        linkLayer: i64,
    }
}

sql_table! {
    /// NIC ids to global ids.
    pub struct NicIdMap in "NIC_ID_MAP" {
        nicId: i64,
        globalId: i64,
    }
}

sql_table! {
    /// One value of one of nsys's enumerations: every `ENUM_*` table has
    /// this shape (`ENUM_CUDA_MEMCPY_OPER`, `ENUM_CUDA_MEM_KIND`,
    /// `ENUM_NSYS_EVENT_CLASS`, `ENUM_NSYS_EVENT_TYPE`).
    pub struct EnumValue in "ENUM_CUDA_MEMCPY_OPER" key "PRIMARY KEY (id)" {
        id: i64,
        name: String,
        label: Option<String>,
    }
}

sql_table! {
    /// A device of the session. `id` is the `deviceId` of the activity
    /// tables.
    pub struct GpuInfo in "TARGET_INFO_GPU" {
        vmId: Option<i64>,
        id: i64,
        name: Option<String>,
        busLocation: Option<String>,
        isDiscrete: Option<i64>,
        l2CacheSize: Option<i64>,
        totalMemory: Option<i64>,
        memoryBandwidth: Option<i64>,
        clockRate: Option<i64>,
        smCount: Option<i64>,
        pwGpuId: Option<i64>,
        uuid: Option<String>,
        luid: Option<i64>,
        chipName: Option<String>,
        cuDevice: Option<i64>,
        ctxId: Option<i64>,
    }
}

sql_table! {
    /// A device as one process's runtime saw it.
    pub struct CudaDevice in "TARGET_INFO_CUDA_DEVICE" {
        gpuId: i64,
        cudaId: i64,
        pid: i64,
        uuid: Option<String>,
        numMultiprocessors: Option<i64>,
    }
}

sql_table! {
    /// A stream of a process on a device.
    pub struct CudaStream in "TARGET_INFO_CUDA_STREAM" {
        streamId: i64,
        hwId: Option<i64>,
        vmId: Option<i64>,
        processId: i64,
        contextId: i64,
        priority: Option<i64>,
        /// ENUM_CUPTI_STREAM_TYPE.
        flag: Option<i64>,
    }
}

sql_table! {
    /// A fact about the machine the session ran on (`Hostname`, ...).
    pub struct SystemEnv in "TARGET_INFO_SYSTEM_ENV" {
        globalVid: Option<i64>,
        devStateName: Option<String>,
        name: String,
        nameEnum: Option<i64>,
        value: Option<String>,
    }
}

sql_table! {
    /// A name and value about the capture or the export: nsys's
    /// `META_DATA_CAPTURE` and `META_DATA_EXPORT` have this shape.
    pub struct MetaData in "META_DATA_EXPORT" {
        name: String,
        value: Option<String>,
    }
}

sql_table! {
    /// A hit of a user-defined probe (`--probe`; nsys has no such table):
    /// the report's `probes` rows, a call probe's entry and return as one.
    pub struct ProbeHit in "PROBES" {
        start: i64,
        end: i64,
        globalTid: i64,
        /// The site (one spec may have several: SDT notes).
        probeId: i64,
        /// The spec as given (StringIds).
        nameId: i64,
        kind: String,
        /// Return and call probes' result; NULL for the other kinds.
        returnValue: Option<i64>,
        args: String,
    }
}

/// Every declared table: its name (under which the export writes it, or
/// the first of several) and its columns (the tests check each against
/// nsys's schema).
#[cfg(test)]
pub const DECLARED: &[(&str, &[Column])] = &[
    (StringIds::NAME, StringIds::COLUMNS),
    (SessionStartTime::NAME, SessionStartTime::COLUMNS),
    (ApiCall::NAME, ApiCall::COLUMNS),
    (Kernel::NAME, Kernel::COLUMNS),
    (Memcpy::NAME, Memcpy::COLUMNS),
    (Memset::NAME, Memset::COLUMNS),
    (NvtxEvent::NAME, NvtxEvent::COLUMNS),
    (SchedEvent::NAME, SchedEvent::COLUMNS),
    (CompositeEvent::NAME, CompositeEvent::COLUMNS),
    (SamplingCallchain::NAME, SamplingCallchain::COLUMNS),
    (ThreadName::NAME, ThreadName::COLUMNS),
    (ProcessStream::NAME, ProcessStream::COLUMNS),
    (GpuMetric::NAME, GpuMetric::COLUMNS),
    (GpuMetricInfo::NAME, GpuMetricInfo::COLUMNS),
    (NicMetric::NAME, NicMetric::COLUMNS),
    (NetworkMetricInfo::NAME, NetworkMetricInfo::COLUMNS),
    (NicInfo::NAME, NicInfo::COLUMNS),
    (NicIdMap::NAME, NicIdMap::COLUMNS),
    (EnumValue::NAME, EnumValue::COLUMNS),
    (GpuInfo::NAME, GpuInfo::COLUMNS),
    (CudaDevice::NAME, CudaDevice::COLUMNS),
    (CudaStream::NAME, CudaStream::COLUMNS),
    (SystemEnv::NAME, SystemEnv::COLUMNS),
    (MetaData::NAME, MetaData::COLUMNS),
    (ProbeHit::NAME, ProbeHit::COLUMNS),
    (Synchronization::NAME, Synchronization::COLUMNS),
    (GraphTrace::NAME, GraphTrace::COLUMNS),
    (GraphEvent::NAME, GraphEvent::COLUMNS),
    (GraphNodeEvent::NAME, GraphNodeEvent::COLUMNS),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/export.md names every declared table and each of its columns
    /// (in backquotes), so that a column added here is documented there.
    #[test]
    fn the_export_page_names_every_declared_table_and_column() {
        // DECLARED lists every declaration of this file.
        let declarations = include_str!("tables.rs")
            .lines()
            .filter(|l| l.starts_with("sql_table! {"))
            .count();
        assert_eq!(
            DECLARED.len(),
            declarations,
            "a table missing from DECLARED"
        );
        let page = include_str!("../../../../docs/export.md");
        let sqlite = &page[page.find("## SQLite").expect("the SQLite section")..];
        for (table, columns) in DECLARED {
            assert!(
                sqlite.contains(&format!("`{table}")),
                "{table} is not in docs/export.md"
            );
            // A row `NAME (a, b, c)` lists its columns; others are named
            // in backquotes (the kernel's column table).
            let listed = sqlite
                .find(&format!("`{table} ("))
                .map(|at| &sqlite[at..at + sqlite[at..].find(')').unwrap_or(0)])
                .unwrap_or_default();
            for c in *columns {
                let named = sqlite.contains(&format!("`{}`", c.name))
                    || listed.split([',', '(', ' ']).any(|w| w == c.name);
                assert!(named, "{table}.{} is not in docs/export.md", c.name);
            }
        }
    }

    /// A row written through its declaration reads back equal, by its
    /// declared select, and a file lacking a nullable column reads it as
    /// NULL while one lacking a column that may not be NULL is refused.
    #[test]
    fn a_row_reads_back_as_written_and_missing_columns_are_handled() {
        let db = Connection::open_in_memory().expect("db");
        db.execute_batch(&create_sql::<Memcpy>(Memcpy::NAME))
            .expect("create");
        let row = Memcpy {
            start: 5,
            end: 9,
            deviceId: 1,
            streamId: 7,
            correlationId: Some(3),
            bytes: 4096,
            copyKind: 1,
            dstKind: Some(3),
            ..Default::default()
        };
        let mut ins = db
            .prepare(&insert_sql::<Memcpy>(Memcpy::NAME))
            .expect("ins");
        row.insert(&mut ins).expect("insert");
        let sql = select_sql::<Memcpy>(&db, Memcpy::NAME, "").expect("select");
        let back = db.query_row(&sql, [], Memcpy::from_row).expect("read");
        assert_eq!(back, row);

        db.execute_batch("CREATE TABLE old (start INTEGER, end INTEGER, value INTEGER)")
            .expect("old");
        let err = select_sql::<Memset>(&db, "old", "").expect_err("deviceId is missing");
        assert_eq!(err.to_string(), "table old has no column deviceId");
        db.execute_batch(
            "CREATE TABLE older (start INTEGER, end INTEGER, deviceId INTEGER, \
             contextId INTEGER, streamId INTEGER, bytes INTEGER); \
             INSERT INTO older VALUES (1, 2, 0, 0, 4, 16);",
        )
        .expect("older");
        let sql = select_sql::<Memset>(&db, "older", "").expect("select");
        let back = db.query_row(&sql, [], Memset::from_row).expect("read");
        assert_eq!((back.bytes, back.streamId, back.memKind), (16, 4, None));
    }

    #[test]
    fn the_create_text_follows_the_declaration() {
        assert_eq!(
            create_sql::<StringIds>("StringIds"),
            "CREATE TABLE StringIds (id INTEGER NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id));"
        );
        assert_eq!(
            insert_sql::<ThreadName>("ThreadNames"),
            "INSERT INTO ThreadNames (nameId, priority, globalTid) VALUES (?1, ?2, ?3)"
        );
    }
}
