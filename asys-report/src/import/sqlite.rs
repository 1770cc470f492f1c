//! An SQLite export (`asys export --type sqlite`, nsys's table and column
//! names) read back into the tables of a report.
//!
//! What the SQLite file holds, and so what reports can be computed on it:
//! API calls (CUPTI_ACTIVITY_KIND_RUNTIME split into hggc_api and cuda_api by
//! name, OSRT_API, and the `ITEM_API` tables) with their times, threads,
//! names, return values and correlation ids; device kernels, copies and
//! memsets; context switches; CPU sample times; user-defined probes' hits
//! (PROBES, without their CPU); the string table. Columns
//! the export does not write (an API call's bytes, stream or arguments, a
//! switch's command names, a sample's stack) are left out of the imported
//! tables, so a report that needs one fails naming it rather than printing
//! wrong numbers; tables with no counterpart at all are listed in
//! [`UNAVAILABLE`]. Times in the file are ns since the session start, and
//! stay so: the imported report's session starts at 0.
use std::{collections::BTreeMap, path::Path};

use arrow::array::RecordBatch;

use rusqlite::{Connection, OpenFlags};

use super::ImportError;
use crate::export::sqlite::tables::{
    self, ApiCall, CompositeEvent, Kernel, Memcpy, Memset, MissingColumn, SchedEvent,
    SessionStartTime, SqlTable, StringIds,
};
use crate::report::files::TempDir;
use crate::report::{
    columns::{self, TableDef},
    container::{self, Container},
    metadata::{FORMAT, Metadata},
    rows::{ActivityRow, ApiRow, SampleRow, SchedRow, StringRow, SymbolRow},
    schema,
    table_writer::TableWriter,
};

/// Report tables an SQLite export has nothing for: the hgtx/NVTX API calls
/// (NVTX_EVENTS holds the ranges, not the calls they were rebuilt from),
/// stacks, process events, control groups, probed libraries, mappings and
/// JIT symbols.
pub const UNAVAILABLE: &[&str] = &[
    "hgtx_api",
    "nvtx_api",
    schema::API_STACKS,
    schema::CPU_SAMPLE_STACKS,
    schema::PROCESS_EVENTS,
    schema::PROCESSES,
    schema::LIBRARIES,
    schema::MODULES,
    schema::JIT_SYMBOLS,
];

/// The API columns the export writes.
const API_COLUMNS: &[&str] = &[
    schema::api::START,
    schema::api::END,
    schema::api::PID,
    schema::api::TID,
    schema::api::NAME_ID,
    schema::api::RETURN_VALUE,
    schema::api::CORRELATION_ID,
];

/// The activity columns the export writes (`kernelAddr` stands for the
/// kernel's name, which the imported `symbols` table resolves).
const ACTIVITY_COLUMNS: &[&str] = &[
    schema::activity::START,
    schema::activity::END,
    schema::activity::KIND,
    schema::activity::PID,
    schema::activity::DEVICE,
    schema::activity::STREAM,
    schema::activity::CORRELATION_ID,
    schema::activity::BYTES,
    schema::activity::COPY_KIND,
    schema::activity::KERNEL_ADDR,
    schema::activity::GRID_X,
    schema::activity::GRID_Y,
    schema::activity::GRID_Z,
    schema::activity::BLOCK_X,
    schema::activity::BLOCK_Y,
    schema::activity::BLOCK_Z,
    schema::activity::SHARED_MEM,
];

const SCHED_COLUMNS: &[&str] = &[
    schema::sched::TS,
    schema::sched::CPU,
    schema::sched::PREV_PID,
    schema::sched::PREV_TID,
    schema::sched::PREV_STATE,
    schema::sched::NEXT_TID,
];

const SAMPLE_COLUMNS: &[&str] = &[
    schema::cpu_samples::TS,
    schema::cpu_samples::PID,
    schema::cpu_samples::TID,
    schema::cpu_samples::CPU,
];

/// nsys's table of OS runtime calls (an [`ApiCall`] table).
const OSRT_API: &str = "OSRT_API";

/// nsys's thread id unpacked: (pid, tid).
fn unpack(global_tid: i64) -> (u32, u32) {
    (
        ((global_tid >> 24) & 0xff_ffff) as u32,
        (global_tid & 0xff_ffff) as u32,
    )
}

/// The cudaMemcpyKind the report keeps, from CUPTI's copy kind (the
/// inverse of the export's mapping).
fn copy_kind(cupti: i64) -> Option<i32> {
    match cupti {
        9 => Some(0),
        1 => Some(1),
        2 => Some(2),
        8 => Some(3),
        _ => None,
    }
}

/// The fields of a device row that every kind has.
fn device_row(
    kind: schema::ActivityKind,
    (start, end, device, stream): (i64, i64, i64, i64),
    correlation: Option<i64>,
    global_pid: Option<i64>,
) -> ActivityRow {
    ActivityRow {
        start,
        end,
        kind,
        device: device as u32,
        stream: stream as u32,
        correlation: correlation.unwrap_or(0) as u32,
        pid: unpack(global_pid.unwrap_or(0)).0,
        ..Default::default()
    }
}

impl From<Kernel> for ActivityRow {
    fn from(k: Kernel) -> Self {
        let times = (k.start, k.end, k.deviceId, k.streamId);
        let mut a = device_row(
            schema::ActivityKind::Kernel,
            times,
            k.correlationId,
            k.globalPid,
        );
        // A kernel's name (its string id) stands for its address; a symbol
        // row per process names it.
        a.kernel_addr = Some(k.demangledName as u64);
        let dim = |x: Option<i64>, y: Option<i64>, z: Option<i64>| {
            Some([x? as u32, y? as u32, z? as u32])
        };
        a.grid = dim(k.gridX, k.gridY, k.gridZ);
        a.block = dim(k.blockX, k.blockY, k.blockZ);
        a.shared_mem = k.dynamicSharedMemory.map(|v| v as u32);
        a
    }
}

impl From<Memcpy> for ActivityRow {
    fn from(m: Memcpy) -> Self {
        let times = (m.start, m.end, m.deviceId, m.streamId);
        let mut a = device_row(
            schema::ActivityKind::Memcpy,
            times,
            m.correlationId,
            m.globalPid,
        );
        a.bytes = Some(m.bytes as u64);
        a.copy_kind = copy_kind(m.copyKind);
        a
    }
}

impl From<Memset> for ActivityRow {
    fn from(m: Memset) -> Self {
        let times = (m.start, m.end, m.deviceId, m.streamId);
        let mut a = device_row(
            schema::ActivityKind::Memset,
            times,
            m.correlationId,
            m.globalPid,
        );
        a.bytes = Some(m.bytes as u64);
        a
    }
}

/// One imported table being written: rows are gathered a row group at a
/// time and written as one batch, so memory stays bounded whatever the
/// size of the SQLite file. The file is created with the first row (a
/// table with none is left out, and reads as empty).
struct Sink<T: TableDef> {
    name: String,
    keep: Option<&'static [&'static str]>,
    rows: Vec<T::Row>,
    writer: Option<TableWriter>,
    count: u64,
}

impl<T: TableDef> Sink<T> {
    fn new(name: &str, keep: Option<&'static [&'static str]>) -> Self {
        Self {
            name: name.into(),
            keep,
            rows: Vec::new(),
            writer: None,
            count: 0,
        }
    }

    fn push(&mut self, dir: &Path, row: T::Row) -> Result<(), ImportError> {
        self.rows.push(row);
        if self.rows.len() >= columns::ROW_GROUP_ROWS {
            self.flush(dir)?;
        }
        Ok(())
    }

    fn flush(&mut self, dir: &Path) -> Result<(), ImportError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let all = T::to_columns(&self.rows);
        let keep = self.keep;
        let (defs, arrays): (Vec<_>, Vec<_>) = T::COLUMNS
            .iter()
            .cloned()
            .zip(all)
            .filter(|(d, _)| keep.is_none_or(|k| k.contains(&d.name)))
            .unzip();
        let schema = columns::schema(&defs);
        let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(|source| {
            crate::report::ReportError::Arrow {
                table: self.name.clone(),
                source,
            }
        })?;
        let writer = match &mut self.writer {
            Some(w) => w,
            None => self
                .writer
                .insert(TableWriter::create(dir, &self.name, schema, &defs)?),
        };
        writer.write(&batch)?;
        self.count += self.rows.len() as u64;
        self.rows.clear();
        Ok(())
    }

    /// Writes what is left and closes the file; records the table in `im`.
    fn finish(mut self, im: &mut Import) -> Result<(), ImportError> {
        self.flush(im.dir)?;
        if let Some(w) = self.writer.take() {
            w.close()?;
            im.tables.insert(self.name.clone(), self.count);
            im.members.push(format!("{}.parquet", self.name));
        }
        Ok(())
    }
}

struct Import<'a> {
    db: Connection,
    path: &'a Path,
    dir: &'a Path,
    tables: BTreeMap<String, u64>,
    members: Vec<String>,
    /// The latest end of anything imported: the session's end.
    end: i64,
}

impl Import<'_> {
    fn sql(&self, e: rusqlite::Error) -> ImportError {
        sql_error(self.path, e)
    }

    fn has(&self, table: &str) -> Result<bool, ImportError> {
        self.db
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
            .map_err(|e| self.sql(e))
    }

    /// The select of every column of declared table `T` from `table`
    /// (which the file has), then `tail`.
    fn select<T: SqlTable>(&self, table: &str, tail: &str) -> Result<String, ImportError> {
        tables::select_sql::<T>(&self.db, table, tail).map_err(|e| match e {
            MissingColumn::Sql(e) => self.sql(e),
            e @ MissingColumn::Missing { .. } => ImportError::Damaged {
                path: self.path.to_path_buf(),
                problem: e.to_string(),
            },
        })
    }

    /// Hands each row of declared table `T`, read from `table` in the
    /// order `tail` gives, to `each`.
    fn rows<T: SqlTable>(
        &self,
        table: &str,
        tail: &str,
        mut each: impl FnMut(T) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        let sql = self.select::<T>(table, tail)?;
        let mut st = self.db.prepare(&sql).map_err(|e| self.sql(e))?;
        let rows = st.query_map([], T::from_row).map_err(|e| self.sql(e))?;
        for r in rows {
            each(r.map_err(|e| sql_error(self.path, e))?)?;
        }
        Ok(())
    }

    /// The names of the file's tables that match the LIKE `pattern`.
    fn table_names(&self, pattern: &str) -> Result<Vec<String>, ImportError> {
        let mut st = self
            .db
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?1 \
                 ESCAPE '\\' ORDER BY name",
            )
            .map_err(|e| self.sql(e))?;
        let names = st
            .query_map([pattern], |r| r.get::<_, String>(0))
            .map_err(|e| self.sql(e))?;
        names.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    fn strings(&mut self) -> Result<Vec<String>, ImportError> {
        if !self.has(StringIds::NAME)? {
            return Err(ImportError::NotAnExport(self.path.to_path_buf()));
        }
        let mut values = Vec::new();
        let path = self.path;
        self.rows::<StringIds>(
            StringIds::NAME,
            "ORDER BY id",
            |StringIds { id, value: v }| {
                // The report's ids are places in its string table: 0, 1, 2, ...
                if id != values.len() as i64 {
                    return Err(ImportError::Damaged {
                        path: path.to_path_buf(),
                        problem: format!(
                            "string id {id} is at place {} of StringIds",
                            values.len()
                        ),
                    });
                }
                values.push(v);
                Ok(())
            },
        )?;
        let mut sink = Sink::<schema::strings::Table>::new(schema::STRINGS, None);
        for (id, value) in values.iter().enumerate() {
            sink.push(
                self.dir,
                StringRow {
                    id: id as u32,
                    value: value.clone(),
                },
            )?;
        }
        sink.finish(self)?;
        Ok(values)
    }

    /// The calls of nsys-shaped API table `table`, in start order, each to
    /// the sink `to` picks by its name.
    fn calls(
        &mut self,
        table: &str,
        sinks: &mut [Sink<schema::api::Table>],
        to: impl Fn(u32) -> usize,
    ) -> Result<(), ImportError> {
        let (dir, mut end) = (self.dir, self.end);
        self.rows::<ApiCall>(table, "ORDER BY start, end", |c| {
            let (pid, tid) = unpack(c.globalTid.unwrap_or(0));
            let row = ApiRow {
                start: c.start,
                end: c.end,
                pid,
                tid,
                correlation: c.correlationId.map(|c| c as u32),
                name_id: c.nameId as u32,
                return_value: c.returnValue,
                ..Default::default()
            };
            end = end.max(row.end);
            let i = to(row.name_id);
            sinks[i].push(dir, row)
        })?;
        self.end = end;
        Ok(())
    }

    /// The rows of declared device table `T`, if the file has it, in start
    /// order, as activity rows.
    fn device_rows<T: SqlTable + Into<ActivityRow>>(
        &self,
    ) -> Result<Option<rusqlite::Statement<'_>>, ImportError> {
        if !self.has(T::NAME)? {
            return Ok(None);
        }
        let sql = self.select::<T>(T::NAME, "ORDER BY start, end")?;
        self.db.prepare(&sql).map(Some).map_err(|e| self.sql(e))
    }

    /// Kernels, copies and memsets in one pass, in start order (the three
    /// tables merged); and a symbol row per (process, kernel name).
    fn activity(&mut self) -> Result<(), ImportError> {
        let mut kernels = self.device_rows::<Kernel>()?;
        let mut memcpys = self.device_rows::<Memcpy>()?;
        let mut memsets = self.device_rows::<Memset>()?;
        type Rows<'s> = Box<dyn Iterator<Item = rusqlite::Result<ActivityRow>> + 's>;
        fn rows_of<'s, T: SqlTable + Into<ActivityRow> + 'static>(
            st: &'s mut Option<rusqlite::Statement<'_>>,
        ) -> rusqlite::Result<Option<Rows<'s>>> {
            let Some(st) = st else { return Ok(None) };
            let rows = st.query_map([], T::from_row)?;
            Ok(Some(Box::new(rows.map(|r| r.map(T::into)))))
        }
        // In the tables' order, so that rows at one time and end come as
        // the union of the three in that order gave them.
        let parts: Vec<Rows> = [
            rows_of::<Kernel>(&mut kernels),
            rows_of::<Memcpy>(&mut memcpys),
            rows_of::<Memset>(&mut memsets),
        ]
        .into_iter()
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(|e| sql_error(self.path, e))?
        .into_iter()
        .flatten()
        .collect();
        let mut parts: Vec<std::iter::Peekable<Rows>> =
            parts.into_iter().map(Iterator::peekable).collect();
        let mut sink =
            Sink::<schema::activity::Table>::new(schema::HGGC_ACTIVITY, Some(ACTIVITY_COLUMNS));
        let mut symbols = std::collections::BTreeSet::new();
        let (dir, mut end) = (self.dir, self.end);
        loop {
            // The part whose next row starts (then ends) first; an error
            // is taken at once.
            let mut first: Option<(usize, (i64, i64))> = None;
            for (i, p) in parts.iter_mut().enumerate() {
                let key = match p.peek() {
                    None => continue,
                    Some(Err(_)) => (i64::MIN, i64::MIN),
                    Some(Ok(a)) => (a.start, a.end),
                };
                if first.is_none_or(|(_, k)| key < k) {
                    first = Some((i, key));
                }
            }
            let Some((i, _)) = first else { break };
            let a = parts[i]
                .next()
                .expect("peeked")
                .map_err(|e| sql_error(self.path, e))?;
            end = end.max(a.end);
            if let Some(addr) = a.kernel_addr {
                symbols.insert((a.pid, addr));
            }
            sink.push(dir, a)?;
        }
        drop(parts);
        drop((kernels, memcpys, memsets));
        self.end = end;
        sink.finish(self)?;
        let mut sink = Sink::<schema::symbols::Table>::new(schema::SYMBOLS, None);
        for (pid, addr) in symbols {
            sink.push(
                self.dir,
                SymbolRow {
                    pid,
                    addr,
                    name_id: addr as u32,
                },
            )?;
        }
        sink.finish(self)
    }

    /// SCHED_EVENTS holds a switch as two rows at one time and CPU: the
    /// thread out (isSchedIn 0, with its state), then the thread in.
    fn sched(&mut self) -> Result<(), ImportError> {
        let mut sink = Sink::<schema::sched::Table>::new(schema::SCHED, Some(SCHED_COLUMNS));
        let (dir, path) = (self.dir, self.path);
        let mut out: Option<(i64, i64, i64, Option<i64>)> = None;
        let unpaired = |ts: i64, cpu: i64| ImportError::Damaged {
            path: path.to_path_buf(),
            problem: format!(
                "SCHED_EVENTS at {ts} on CPU {cpu} is not a switch out followed by a switch in"
            ),
        };
        self.rows::<SchedEvent>(SchedEvent::NAME, "ORDER BY rowid", |e| {
            let (ts, cpu, is_in) = (e.start, e.cpu, e.isSchedIn);
            let (gtid, state) = (e.globalTid.unwrap_or(0), e.threadState);
            match (out.take(), is_in) {
                (None, 0) => {
                    out = Some((ts, cpu, gtid, state));
                    Ok(())
                }
                (Some((ots, ocpu, ogtid, ostate)), 1) if ots == ts && ocpu == cpu => {
                    let (prev_pid, prev_tid) = unpack(ogtid);
                    sink.push(
                        dir,
                        SchedRow {
                            ts,
                            cpu: cpu as u32,
                            prev_pid,
                            prev_tid,
                            prev_state: ostate.unwrap_or(0),
                            prev_comm: 0,
                            next_tid: unpack(gtid).1,
                            next_comm: 0,
                        },
                    )
                }
                _ => Err(unpaired(ts, cpu)),
            }
        })?;
        if let Some((ts, cpu, ..)) = out {
            return Err(unpaired(ts, cpu));
        }
        sink.finish(self)
    }

    fn samples(&mut self) -> Result<(), ImportError> {
        let mut sink =
            Sink::<schema::cpu_samples::Table>::new(schema::CPU_SAMPLES, Some(SAMPLE_COLUMNS));
        let dir = self.dir;
        self.rows::<CompositeEvent>(CompositeEvent::NAME, "ORDER BY start", |e| {
            let (pid, tid) = unpack(e.globalTid.unwrap_or(0));
            let row = SampleRow {
                ts: e.start,
                pid,
                tid,
                cpu: e.cpu.unwrap_or(0) as u32,
                kernel_mode: false,
            };
            sink.push(dir, row)
        })?;
        sink.finish(self)
    }

    /// Hits of user-defined probes (`PROBES`), back into `probes`; a kind
    /// asys does not know reads as `unknown`.
    fn probes(&mut self) -> Result<(), ImportError> {
        let mut sink = Sink::<schema::probes::Table>::new(schema::PROBES, None);
        let dir = self.dir;
        let mut end = self.end;
        self.rows::<tables::ProbeHit>(tables::ProbeHit::NAME, "ORDER BY start", |e| {
            let (pid, tid) = unpack(e.globalTid);
            end = end.max(e.end);
            let row = crate::report::rows::ProbeRow {
                start: e.start,
                end: e.end,
                pid,
                tid,
                cpu: 0,
                probe_id: e.probeId as u32,
                name_id: e.nameId as u32,
                kind: schema::PROBE_KINDS
                    .iter()
                    .find(|k| **k == e.kind)
                    .copied()
                    .unwrap_or("unknown"),
                has_return: e.returnValue.is_some(),
                return_value: e.returnValue.unwrap_or(0),
                args: e.args,
            };
            sink.push(dir, row)
        })?;
        self.end = end;
        sink.finish(self)
    }

    /// The `ITEM_API` tables of the items nsys has no table for.
    fn item_tables(&self) -> Result<Vec<String>, ImportError> {
        let mut names = self.table_names("%\\_API")?;
        names.retain(|n| n != OSRT_API);
        Ok(names)
    }
}

/// A damaged file shows as "malformed" or "not a database" on read.
fn sql_error(path: &Path, e: rusqlite::Error) -> ImportError {
    match e {
        rusqlite::Error::SqliteFailure(f, m)
            if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
            ) =>
        {
            ImportError::Damaged {
                path: path.to_path_buf(),
                problem: m.unwrap_or_else(|| f.to_string()),
            }
        }
        e => ImportError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// The `file:` URI that opens `path` as an immutable, read-only database.
///
/// `mode=ro` alone is not enough: to read a WAL-mode file SQLite still
/// creates `NAME-shm` beside it, and the first reader after a crash applies
/// (checkpoints) a leftover `NAME-wal` into the file. `immutable=1` tells
/// SQLite that nothing changes the file while it is read, so it takes no
/// locks and opens, creates, applies or removes no file beside it: the input
/// and its folder are left exactly as they were. What a `-wal` beside it
/// holds is not read ([`unapplied_wal`]).
///
/// The path is made absolute and percent-encoded byte by byte (every byte
/// but unreserved characters and '/'), so `?`, `#`, `%` and non-UTF-8 bytes
/// in a file name stay part of the name.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    // "file://" and an empty authority, then the absolute path.
    let mut uri = String::from("file://");
    for &b in absolute.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?mode=ro&immutable=1");
    uri
}

/// A non-empty `NAME-wal` beside the input: changes a writer had not yet
/// checkpointed into the file, which an immutable open does not read.
pub fn unapplied_wal(path: &Path) -> Option<std::path::PathBuf> {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    let wal = std::path::PathBuf::from(name);
    // symlink_metadata: only looked at, never followed or opened.
    let meta = wal.symlink_metadata().ok()?;
    (meta.is_file() && meta.len() > 0).then_some(wal)
}

/// Reads the SQLite export at `path` into a temporary report and opens it.
/// The file is opened immutable ([`immutable_uri`]): nothing beside it is
/// created or changed.
pub fn import(path: &Path) -> Result<Container, ImportError> {
    let db = Connection::open_with_flags(
        immutable_uri(path),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sql_error(path, e))?;
    let tmp = TempDir::new("asys-import")?;
    let mut im = Import {
        db,
        path,
        dir: tmp.path(),
        tables: BTreeMap::new(),
        members: Vec::new(),
        end: 0,
    };
    // A whole-file check first: a truncated or overwritten file is refused
    // instead of giving the rows that happen to be readable.
    let check: String = im
        .db
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| im.sql(e))?;
    if check != "ok" {
        return Err(ImportError::Damaged {
            path: path.to_path_buf(),
            problem: check.replace('\n', "; "),
        });
    }
    let strings = im.strings()?;
    if im.has(ApiCall::NAME)? {
        // The export puts hggc (the PPU's runtime) and CUDA calls in one
        // table; their names tell them apart.
        let mut sinks = [
            Sink::new(schema::HGGC_API, Some(API_COLUMNS)),
            Sink::new("cuda_api", Some(API_COLUMNS)),
        ];
        let cuda = |id: u32| {
            strings
                .get(id as usize)
                .is_some_and(|n| n.starts_with("cuda"))
        };
        im.calls(ApiCall::NAME, &mut sinks, |id| usize::from(cuda(id)))?;
        for s in sinks {
            s.finish(&mut im)?;
        }
    }
    for t in std::iter::once(OSRT_API.to_string()).chain(im.item_tables()?) {
        if im.has(&t)? {
            let mut sinks = [Sink::new(&t.to_ascii_lowercase(), Some(API_COLUMNS))];
            im.calls(&t, &mut sinks, |_| 0)?;
            let [s] = sinks;
            s.finish(&mut im)?;
        }
    }
    im.activity()?;
    if im.has(SchedEvent::NAME)? {
        im.sched()?;
    }
    if im.has(CompositeEvent::NAME)? {
        im.samples()?;
    }
    if im.has(tables::ProbeHit::NAME)? {
        im.probes()?;
    }
    let mut start_realtime_ns = 0;
    if im.has(SessionStartTime::NAME)? {
        im.rows::<SessionStartTime>(SessionStartTime::NAME, "LIMIT 1", |t| {
            start_realtime_ns = t.utcEpochNs.unwrap_or(0);
            Ok(())
        })?;
    }
    let meta = Metadata {
        format: FORMAT.into(),
        schema_version: schema::SCHEMA_VERSION,
        start_realtime_ns,
        start_monotonic_ns: 0,
        end_monotonic_ns: im.end,
        tables: im.tables.clone(),
        ..Default::default()
    };
    let dest = tmp.path().join("imported.asysrep");
    container::pack(tmp.path(), &im.members, &meta, &dest)?;
    let mut report = Container::open(&dest)?;
    // The report stays readable through its open file once the folder is
    // gone; what it says names the SQLite file the user gave.
    report.path = path.to_path_buf();
    report.unavailable = UNAVAILABLE;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_kinds_invert_the_exports() {
        // (cudaMemcpyKind → CUPTI) as export::sqlite writes it.
        for (ours, cupti) in [(0, 9), (1, 1), (2, 2), (3, 8)] {
            assert_eq!(copy_kind(cupti), Some(ours));
        }
        assert_eq!(copy_kind(0), None);
    }

    #[test]
    fn thread_ids_unpack_as_nsys_packs_them() {
        assert_eq!(unpack((1234 << 24) | 1240), (1234, 1240));
    }

    #[test]
    fn a_database_without_string_ids_is_not_an_export() {
        let d = TempDir::new("asys-import").unwrap();
        let db = d.path().join("x.sqlite");
        Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        let e = import(&db).err().expect("refused");
        assert!(matches!(e, ImportError::NotAnExport(_)), "{e}");
    }
}
