//! An SQLite export (`asys export --type sqlite`, nsys's table and column
//! names) read back into the tables of a report.
//!
//! What the SQLite file holds, and so what reports can be computed on it:
//! API calls (CUPTI_ACTIVITY_KIND_RUNTIME split into hggc_api and cuda_api by
//! name, OSRT_API, and the `ITEM_API` tables) with their times, threads,
//! names, return values and correlation ids; device kernels, copies and
//! memsets; context switches; CPU sample times; the string table. Columns
//! the export does not write (an API call's bytes, stream or arguments, a
//! switch's command names, a sample's stack) are left out of the imported
//! tables, so a report that needs one fails naming it rather than printing
//! wrong numbers; tables with no counterpart at all are listed in
//! [`UNAVAILABLE`]. Times in the file are ns since the session start, and
//! stay so: the imported report's session starts at 0.
use std::{collections::BTreeMap, path::Path};

use arrow::array::RecordBatch;

use rusqlite::{Connection, OpenFlags};

use super::{ImportError, TempDir};
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

    /// Runs `sql` and hands each row, made by `row`, to `each`.
    fn each<R>(
        &self,
        sql: &str,
        row: impl FnMut(&rusqlite::Row) -> rusqlite::Result<R>,
        mut each: impl FnMut(R) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        let mut st = self.db.prepare(sql).map_err(|e| self.sql(e))?;
        let rows = st.query_map([], row).map_err(|e| self.sql(e))?;
        for r in rows {
            each(r.map_err(|e| sql_error(self.path, e))?)?;
        }
        Ok(())
    }

    fn strings(&mut self) -> Result<Vec<String>, ImportError> {
        if !self.has("StringIds")? {
            return Err(ImportError::NotAnExport(self.path.to_path_buf()));
        }
        let mut values = Vec::new();
        let path = self.path;
        self.each(
            "SELECT id, value FROM StringIds ORDER BY id",
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
            |(id, v)| {
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
        let sql = format!(
            "SELECT start, end, globalTid, correlationId, nameId, returnValue \
             FROM \"{table}\" ORDER BY start, end"
        );
        let (dir, mut end) = (self.dir, self.end);
        self.each(
            &sql,
            |r| {
                let (pid, tid) = unpack(r.get::<_, Option<i64>>(2)?.unwrap_or(0));
                Ok(ApiRow {
                    start: r.get(0)?,
                    end: r.get(1)?,
                    pid,
                    tid,
                    correlation: r.get::<_, Option<i64>>(3)?.map(|c| c as u32),
                    name_id: r.get::<_, i64>(4)? as u32,
                    return_value: r.get(5)?,
                    ..Default::default()
                })
            },
            |row| {
                end = end.max(row.end);
                let i = to(row.name_id);
                sinks[i].push(dir, row)
            },
        )?;
        self.end = end;
        Ok(())
    }

    /// Kernels, copies and memsets in one pass, in start order; and a
    /// symbol row per (process, kernel name).
    fn activity(&mut self) -> Result<(), ImportError> {
        const COMMON: &str = "start, end, deviceId, streamId, correlationId, globalPid";
        let mut parts = Vec::new();
        if self.has("CUPTI_ACTIVITY_KIND_KERNEL")? {
            parts.push(format!(
                "SELECT {COMMON}, 'kernel', demangledName, gridX, gridY, gridZ, blockX, blockY, \
                 blockZ, dynamicSharedMemory, NULL, NULL FROM CUPTI_ACTIVITY_KIND_KERNEL"
            ));
        }
        if self.has("CUPTI_ACTIVITY_KIND_MEMCPY")? {
            parts.push(format!(
                "SELECT {COMMON}, 'memcpy', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                 bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
            ));
        }
        if self.has("CUPTI_ACTIVITY_KIND_MEMSET")? {
            parts.push(format!(
                "SELECT {COMMON}, 'memset', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                 bytes, NULL FROM CUPTI_ACTIVITY_KIND_MEMSET"
            ));
        }
        if parts.is_empty() {
            return Ok(());
        }
        let sql = format!("{} ORDER BY 1, 2", parts.join(" UNION ALL "));
        let mut sink =
            Sink::<schema::activity::Table>::new(schema::HGGC_ACTIVITY, Some(ACTIVITY_COLUMNS));
        let mut symbols = std::collections::BTreeSet::new();
        let (dir, mut end) = (self.dir, self.end);
        let opt = |r: &rusqlite::Row, i: usize| -> rusqlite::Result<Option<u32>> {
            Ok(r.get::<_, Option<i64>>(i)?.map(|v| v as u32))
        };
        self.each(
            &sql,
            |r| {
                // What is neither a kernel nor a copy was a memset.
                let kind = schema::ActivityKind::from_stored(&r.get::<_, String>(6)?)
                    .unwrap_or(schema::ActivityKind::Memset);
                let mut a = ActivityRow {
                    start: r.get(0)?,
                    end: r.get(1)?,
                    kind,
                    device: r.get::<_, i64>(2)? as u32,
                    stream: r.get::<_, i64>(3)? as u32,
                    correlation: r.get::<_, Option<i64>>(4)?.unwrap_or(0) as u32,
                    pid: unpack(r.get::<_, Option<i64>>(5)?.unwrap_or(0)).0,
                    ..Default::default()
                };
                // A kernel's name (its string id) stands for its address; a
                // symbol row per process names it.
                a.kernel_addr = r.get::<_, Option<i64>>(7)?.map(|n| n as u64);
                let d = [opt(r, 8)?, opt(r, 9)?, opt(r, 10)?];
                let b = [opt(r, 11)?, opt(r, 12)?, opt(r, 13)?];
                a.grid = d[0].zip(d[1]).zip(d[2]).map(|((x, y), z)| [x, y, z]);
                a.block = b[0].zip(b[1]).zip(b[2]).map(|((x, y), z)| [x, y, z]);
                a.shared_mem = opt(r, 14)?;
                a.bytes = r.get::<_, Option<i64>>(15)?.map(|v| v as u64);
                a.copy_kind = r.get::<_, Option<i64>>(16)?.and_then(copy_kind);
                Ok(a)
            },
            |a| {
                end = end.max(a.end);
                if let Some(addr) = a.kernel_addr {
                    symbols.insert((a.pid, addr));
                }
                sink.push(dir, a)
            },
        )?;
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
        self.each(
            "SELECT start, cpu, isSchedIn, globalTid, threadState FROM SCHED_EVENTS ORDER BY rowid",
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                    r.get::<_, Option<i64>>(4)?,
                ))
            },
            |(ts, cpu, is_in, gtid, state)| match (out.take(), is_in) {
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
            },
        )?;
        if let Some((ts, cpu, ..)) = out {
            return Err(unpaired(ts, cpu));
        }
        sink.finish(self)
    }

    fn samples(&mut self) -> Result<(), ImportError> {
        let mut sink =
            Sink::<schema::cpu_samples::Table>::new(schema::CPU_SAMPLES, Some(SAMPLE_COLUMNS));
        let dir = self.dir;
        self.each(
            "SELECT start, globalTid, cpu FROM COMPOSITE_EVENTS ORDER BY start",
            |r| {
                let (pid, tid) = unpack(r.get::<_, Option<i64>>(1)?.unwrap_or(0));
                Ok(SampleRow {
                    ts: r.get(0)?,
                    pid,
                    tid,
                    cpu: r.get::<_, Option<i64>>(2)?.unwrap_or(0) as u32,
                    kernel_mode: false,
                })
            },
            |row| sink.push(dir, row),
        )?;
        sink.finish(self)
    }

    /// The `ITEM_API` tables of the items nsys has no table for.
    fn item_tables(&self) -> Result<Vec<String>, ImportError> {
        let mut names = Vec::new();
        self.each(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%\\_API' ESCAPE '\\' ORDER BY name",
            |r| r.get::<_, String>(0),
            |n| {
                if n != "OSRT_API" {
                    names.push(n);
                }
                Ok(())
            },
        )?;
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
    let tmp = TempDir::new()?;
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
    if im.has("CUPTI_ACTIVITY_KIND_RUNTIME")? {
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
        im.calls("CUPTI_ACTIVITY_KIND_RUNTIME", &mut sinks, |id| {
            usize::from(cuda(id))
        })?;
        for s in sinks {
            s.finish(&mut im)?;
        }
    }
    for t in std::iter::once("OSRT_API".to_string()).chain(im.item_tables()?) {
        if im.has(&t)? {
            let mut sinks = [Sink::new(&t.to_ascii_lowercase(), Some(API_COLUMNS))];
            im.calls(&t, &mut sinks, |_| 0)?;
            let [s] = sinks;
            s.finish(&mut im)?;
        }
    }
    im.activity()?;
    if im.has("SCHED_EVENTS")? {
        im.sched()?;
    }
    if im.has("COMPOSITE_EVENTS")? {
        im.samples()?;
    }
    let start_realtime_ns = if im.has("TARGET_INFO_SESSION_START_TIME")? {
        im.db
            .query_row(
                "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .map_err(|e| im.sql(e))?
            .unwrap_or(0)
    } else {
        0
    };
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
        let d = TempDir::new().unwrap();
        let db = d.path().join("x.sqlite");
        Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        let e = import(&db).err().expect("refused");
        assert!(matches!(e, ImportError::NotAnExport(_)), "{e}");
    }
}
