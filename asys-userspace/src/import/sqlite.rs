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
use crate::{
    record::table_writer::TableWriter,
    report::{
        columns::{self, TableDef},
        container::{self, Container},
        metadata::{FORMAT, Metadata},
        rows::{ActivityRow, ApiRow, SampleRow, SchedRow, StringRow, SymbolRow},
        schema,
    },
};

/// Report tables an SQLite export has nothing for: the hgtx/NVTX API calls
/// (NVTX_EVENTS holds the ranges, not the calls they were rebuilt from),
/// stacks, process events, control groups, probed libraries and mappings.
pub const UNAVAILABLE: &[&str] = &[
    "hgtx_api",
    "nvtx_api",
    schema::API_STACKS,
    schema::CPU_SAMPLE_STACKS,
    schema::PROCESS_EVENTS,
    schema::PROCESSES,
    schema::LIBRARIES,
    schema::MODULES,
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

struct Import<'a> {
    db: Connection,
    path: &'a Path,
    dir: &'a Path,
    tables: BTreeMap<String, u64>,
    members: Vec<String>,
}

impl Import<'_> {
    fn sql(&self, e: rusqlite::Error) -> ImportError {
        // A damaged file shows as "malformed" or "not a database" on read.
        match e {
            rusqlite::Error::SqliteFailure(f, m)
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
                ) =>
            {
                ImportError::Damaged {
                    path: self.path.to_path_buf(),
                    problem: m.unwrap_or_else(|| f.to_string()),
                }
            }
            e => ImportError::Sqlite {
                path: self.path.to_path_buf(),
                source: e,
            },
        }
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

    /// Writes `rows` as report table `name`, with only the columns `keep`.
    fn write<T: TableDef>(
        &mut self,
        name: &str,
        rows: &[T::Row],
        keep: Option<&[&str]>,
    ) -> Result<(), ImportError> {
        let all = T::to_columns(rows);
        let (defs, arrays): (Vec<_>, Vec<_>) = T::COLUMNS
            .iter()
            .cloned()
            .zip(all)
            .filter(|(d, _)| keep.is_none_or(|k| k.contains(&d.name)))
            .unzip();
        let schema = columns::schema(&defs);
        let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(|source| {
            crate::report::ReportError::Arrow {
                table: name.into(),
                source,
            }
        })?;
        let mut w = TableWriter::create(self.dir, name, schema, &defs)?;
        w.write(&batch)?;
        w.close()?;
        self.tables.insert(name.into(), rows.len() as u64);
        self.members.push(format!("{name}.parquet"));
        Ok(())
    }

    fn strings(&mut self) -> Result<Vec<String>, ImportError> {
        if !self.has("StringIds")? {
            return Err(ImportError::NotAnExport(self.path.to_path_buf()));
        }
        let mut st = self
            .db
            .prepare("SELECT id, value FROM StringIds ORDER BY id")
            .map_err(|e| self.sql(e))?;
        let rows: Vec<(i64, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|m| m.collect())
            .map_err(|e| self.sql(e))?;
        drop(st);
        // The report's ids are places in its string table: 0, 1, 2, ...
        if let Some((i, (id, _))) = rows
            .iter()
            .enumerate()
            .find(|(i, (id, _))| *id != *i as i64)
        {
            return Err(ImportError::Damaged {
                path: self.path.to_path_buf(),
                problem: format!("string id {id} is at place {i} of StringIds"),
            });
        }
        Ok(rows.into_iter().map(|(_, v)| v).collect())
    }

    /// The calls of `table` (an nsys-shaped API table), in start order.
    fn calls(&self, table: &str) -> Result<Vec<ApiRow>, ImportError> {
        let mut st = self
            .db
            .prepare(&format!(
                "SELECT start, end, globalTid, correlationId, nameId, returnValue \
                 FROM \"{table}\" ORDER BY start, end"
            ))
            .map_err(|e| self.sql(e))?;
        st.query_map([], |r| {
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
        })
        .and_then(|m| m.collect())
        .map_err(|e| self.sql(e))
    }

    fn activity(&self) -> Result<(Vec<ActivityRow>, Vec<SymbolRow>), ImportError> {
        const COMMON: &str = "start, end, deviceId, streamId, correlationId, globalPid";
        let mut rows = Vec::new();
        let mut symbols = std::collections::BTreeSet::new();
        let common = |r: &rusqlite::Row, kind: &'static str| -> rusqlite::Result<ActivityRow> {
            Ok(ActivityRow {
                start: r.get(0)?,
                end: r.get(1)?,
                kind,
                device: r.get::<_, i64>(2)? as u32,
                stream: r.get::<_, i64>(3)? as u32,
                correlation: r.get::<_, Option<i64>>(4)?.unwrap_or(0) as u32,
                pid: unpack(r.get::<_, Option<i64>>(5)?.unwrap_or(0)).0,
                ..Default::default()
            })
        };
        let opt = |r: &rusqlite::Row, i: usize| -> rusqlite::Result<Option<u32>> {
            Ok(r.get::<_, Option<i64>>(i)?.map(|v| v as u32))
        };
        if self.has("CUPTI_ACTIVITY_KIND_KERNEL")? {
            let mut st = self
                .db
                .prepare(&format!(
                    "SELECT {COMMON}, demangledName, gridX, gridY, gridZ, blockX, blockY, \
                     blockZ, dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL"
                ))
                .map_err(|e| self.sql(e))?;
            let got: Vec<ActivityRow> = st
                .query_map([], |r| {
                    let mut a = common(r, "kernel")?;
                    let name = r.get::<_, i64>(6)? as u64;
                    // The name's string id stands for the kernel's address;
                    // a symbol row per process names it.
                    a.kernel_addr = Some(name);
                    let d = [opt(r, 7)?, opt(r, 8)?, opt(r, 9)?];
                    let b = [opt(r, 10)?, opt(r, 11)?, opt(r, 12)?];
                    a.grid = d[0].zip(d[1]).zip(d[2]).map(|((x, y), z)| [x, y, z]);
                    a.block = b[0].zip(b[1]).zip(b[2]).map(|((x, y), z)| [x, y, z]);
                    a.shared_mem = opt(r, 13)?;
                    Ok(a)
                })
                .and_then(|m| m.collect())
                .map_err(|e| self.sql(e))?;
            for a in &got {
                symbols.insert((a.pid, a.kernel_addr.unwrap_or(0)));
            }
            rows.extend(got);
        }
        if self.has("CUPTI_ACTIVITY_KIND_MEMCPY")? {
            let mut st = self
                .db
                .prepare(&format!(
                    "SELECT {COMMON}, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
                ))
                .map_err(|e| self.sql(e))?;
            let got: Vec<ActivityRow> = st
                .query_map([], |r| {
                    let mut a = common(r, "memcpy")?;
                    a.bytes = Some(r.get::<_, i64>(6)? as u64);
                    a.copy_kind = copy_kind(r.get(7)?);
                    Ok(a)
                })
                .and_then(|m| m.collect())
                .map_err(|e| self.sql(e))?;
            rows.extend(got);
        }
        if self.has("CUPTI_ACTIVITY_KIND_MEMSET")? {
            let mut st = self
                .db
                .prepare(&format!(
                    "SELECT {COMMON}, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET"
                ))
                .map_err(|e| self.sql(e))?;
            let got: Vec<ActivityRow> = st
                .query_map([], |r| {
                    let mut a = common(r, "memset")?;
                    a.bytes = Some(r.get::<_, i64>(6)? as u64);
                    Ok(a)
                })
                .and_then(|m| m.collect())
                .map_err(|e| self.sql(e))?;
            rows.extend(got);
        }
        rows.sort_by_key(|a| (a.start, a.end));
        let symbols = symbols
            .into_iter()
            .map(|(pid, addr)| SymbolRow {
                pid,
                addr,
                name_id: addr as u32,
            })
            .collect();
        Ok((rows, symbols))
    }

    /// SCHED_EVENTS holds a switch as two rows at one time and CPU: the
    /// thread out (isSchedIn 0, with its state), then the thread in.
    fn sched(&self) -> Result<Vec<SchedRow>, ImportError> {
        let mut st = self
            .db
            .prepare(
                "SELECT start, cpu, isSchedIn, globalTid, threadState FROM SCHED_EVENTS \
                 ORDER BY rowid",
            )
            .map_err(|e| self.sql(e))?;
        let events: Vec<(i64, i64, i64, i64, Option<i64>)> = st
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .and_then(|m| m.collect())
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::with_capacity(events.len() / 2);
        let mut it = events.into_iter();
        while let Some(o) = it.next() {
            let i = it.next();
            match i {
                Some(i) if o.2 == 0 && i.2 == 1 && i.0 == o.0 && i.1 == o.1 => {
                    let (pp, pt) = unpack(o.3);
                    out.push(SchedRow {
                        ts: o.0,
                        cpu: o.1 as u32,
                        prev_pid: pp,
                        prev_tid: pt,
                        prev_state: o.4.unwrap_or(0),
                        prev_comm: 0,
                        next_tid: unpack(i.3).1,
                        next_comm: 0,
                    });
                }
                _ => {
                    return Err(ImportError::Damaged {
                        path: self.path.to_path_buf(),
                        problem: format!(
                            "SCHED_EVENTS at {} on CPU {} is not a switch out followed by a switch in",
                            o.0, o.1
                        ),
                    });
                }
            }
        }
        Ok(out)
    }

    fn samples(&self) -> Result<Vec<SampleRow>, ImportError> {
        let mut st = self
            .db
            .prepare("SELECT start, globalTid, cpu FROM COMPOSITE_EVENTS ORDER BY start")
            .map_err(|e| self.sql(e))?;
        st.query_map([], |r| {
            let (pid, tid) = unpack(r.get::<_, Option<i64>>(1)?.unwrap_or(0));
            Ok(SampleRow {
                ts: r.get(0)?,
                pid,
                tid,
                cpu: r.get::<_, Option<i64>>(2)?.unwrap_or(0) as u32,
                kernel_mode: false,
            })
        })
        .and_then(|m| m.collect())
        .map_err(|e| self.sql(e))
    }

    /// The `ITEM_API` tables of the items nsys has no table for.
    fn item_tables(&self) -> Result<Vec<String>, ImportError> {
        let mut st = self
            .db
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%\\_API' ESCAPE '\\' ORDER BY name")
            .map_err(|e| self.sql(e))?;
        let names: Vec<String> = st
            .query_map([], |r| r.get(0))
            .and_then(|m| m.collect())
            .map_err(|e| self.sql(e))?;
        Ok(names.into_iter().filter(|n| n != "OSRT_API").collect())
    }
}

/// Reads the SQLite export at `path` into a temporary report and opens it.
pub fn import(path: &Path) -> Result<Container, ImportError> {
    let open_err = |e| ImportError::Sqlite {
        path: path.to_path_buf(),
        source: e,
    };
    let db = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(open_err)?;
    let tmp = TempDir::new()?;
    let mut im = Import {
        db,
        path,
        dir: tmp.path(),
        tables: BTreeMap::new(),
        members: Vec::new(),
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
    let string_rows: Vec<StringRow> = strings
        .iter()
        .enumerate()
        .map(|(id, value)| StringRow {
            id: id as u32,
            value: value.clone(),
        })
        .collect();
    im.write::<schema::strings::Table>(schema::STRINGS, &string_rows, None)?;
    let mut end = 0i64;
    if im.has("CUPTI_ACTIVITY_KIND_RUNTIME")? {
        // The export puts hggc (the PPU's runtime) and CUDA calls in one
        // table; their names tell them apart.
        let (cuda, hggc): (Vec<ApiRow>, Vec<ApiRow>) = im
            .calls("CUPTI_ACTIVITY_KIND_RUNTIME")?
            .into_iter()
            .partition(|c| {
                strings
                    .get(c.name_id as usize)
                    .is_some_and(|n| n.starts_with("cuda"))
            });
        for (table, rows) in [("hggc_api", hggc), ("cuda_api", cuda)] {
            if !rows.is_empty() {
                end = end.max(rows.iter().map(|r| r.end).max().unwrap_or(0));
                im.write::<schema::api::Table>(table, &rows, Some(API_COLUMNS))?;
            }
        }
    }
    for t in std::iter::once("OSRT_API".to_string()).chain(im.item_tables()?) {
        if im.has(&t)? {
            let rows = im.calls(&t)?;
            end = end.max(rows.iter().map(|r| r.end).max().unwrap_or(0));
            im.write::<schema::api::Table>(&t.to_ascii_lowercase(), &rows, Some(API_COLUMNS))?;
        }
    }
    let (activity, symbols) = im.activity()?;
    if !activity.is_empty() {
        end = end.max(activity.iter().map(|r| r.end).max().unwrap_or(0));
        im.write::<schema::activity::Table>(
            schema::HGGC_ACTIVITY,
            &activity,
            Some(ACTIVITY_COLUMNS),
        )?;
        im.write::<schema::symbols::Table>(schema::SYMBOLS, &symbols, None)?;
    }
    if im.has("SCHED_EVENTS")? {
        let rows = im.sched()?;
        im.write::<schema::sched::Table>(schema::SCHED, &rows, Some(SCHED_COLUMNS))?;
    }
    if im.has("COMPOSITE_EVENTS")? {
        let rows = im.samples()?;
        im.write::<schema::cpu_samples::Table>(schema::CPU_SAMPLES, &rows, Some(SAMPLE_COLUMNS))?;
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
        end_monotonic_ns: end,
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
