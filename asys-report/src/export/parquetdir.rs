//! `--type parquetdir`: the report's tables as plain Parquet files in a
//! hive-partitioned folder, `TABLE/host=H/rank=K/report=R/part-0.parquet`
//! for the rows of a process with a rank (`processes.rank`), and
//! `TABLE/host=H/pid=P/report=R/part-0.parquet` for the others (tables
//! without a `pid` column leave that level out), so the exports of many
//! reports into one folder are one dataset for DuckDB, pyarrow, DataFusion
//! or Spark.
//!
//! A column whose value is in the path is left out of the files (`pid`
//! under `pid=`, the processes table's `rank` under `rank=`): a column that
//! is both in the file and the path makes readers disagree on its type
//! (pyarrow refuses to merge them). Under `rank=` the `pid` column stays.
use std::{
    collections::HashMap,
    fs::File,
    path::{Path, PathBuf},
    sync::Arc,
};

use arrow::{
    array::{RecordBatch, UInt32Array},
    compute::filter_record_batch,
    datatypes::{Schema, UInt32Type},
};
use parquet::{
    arrow::ArrowWriter,
    basic::{Compression, ZstdLevel},
    file::properties::WriterProperties,
};

use super::ExportError;
use crate::report::{columns, container::Container, reader, schema};

const PID: &str = "pid";
const RANK: &str = "rank";

/// A hive partition value: bytes outside `[A-Za-z0-9._-]` are %XX-encoded,
/// so a name cannot add a folder level or an `=`.
fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    // "." and ".." would be folder names of their own.
    if out.chars().all(|c| c == '.') {
        out = out.replace('.', "%2E");
    }
    out
}

/// The folders this report's rows go to, before the pid level.
pub struct Layout {
    pub root: PathBuf,
    host: String,
    report: String,
    /// pid → rank of the report's processes with one.
    ranks: std::collections::BTreeMap<u32, u32>,
}

impl Layout {
    pub fn new(root: &Path, report: &Container) -> Self {
        let name = report
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self {
            root: root.to_path_buf(),
            host: format!("host={}", encode(&report.metadata.host)),
            report: format!("report={}", encode(&name)),
            // A processes table that cannot be read fails the export of
            // that table itself; its rows here would only name partitions.
            ranks: crate::report::read::processes::process_ranks(report).unwrap_or_default(),
        }
    }

    fn dir(&self, table: &str, pid: Option<u32>) -> PathBuf {
        let mut d = self.root.join(table).join(&self.host);
        match pid.map(|p| (p, self.ranks.get(&p))) {
            Some((_, Some(r))) => d.push(format!("rank={r}")),
            Some((p, None)) => d.push(format!("pid={p}")),
            None => {}
        }
        d.join(&self.report)
    }

    /// The partitions of `report` already in the folder (for `-f`, and to
    /// refuse without it). Found by walking the table and host levels, so
    /// pids the report does not hold are found too.
    pub fn existing(&self) -> Result<Vec<PathBuf>, ExportError> {
        let mut out = Vec::new();
        let tables = match std::fs::read_dir(&self.root) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(ExportError::io(&self.root, e)),
        };
        for t in tables {
            let host = t
                .map_err(|e| ExportError::io(&self.root, e))?
                .path()
                .join(&self.host);
            if !host.is_dir() {
                continue;
            }
            let direct = host.join(&self.report);
            if direct.symlink_metadata().is_ok() {
                out.push(direct);
            }
            for p in std::fs::read_dir(&host).map_err(|e| ExportError::io(&host, e))? {
                let p = p.map_err(|e| ExportError::io(&host, e))?.path();
                let r = p.join(&self.report);
                if r.symlink_metadata().is_ok() {
                    out.push(r);
                }
            }
        }
        Ok(out)
    }
}

/// Writer settings for `table`'s files: its columns encoded as the report
/// declares them (delta for times and ids: the hggc_api and hggc_activity
/// files are half the size with it), at the report's zstd level. Unlike
/// the report's members, they keep the default min/max statistics: engines
/// over a shared dataset use them to skip row groups.
fn properties(table: &str) -> WriterProperties {
    let level = ZstdLevel::try_new(columns::ZSTD_LEVEL).unwrap_or_default();
    let b = WriterProperties::builder().set_compression(Compression::ZSTD(level));
    columns::with_encodings(b, schema::columns_of(table).unwrap_or_default()).build()
}

/// Creates `dir` (and what is missing above it) and a new file in it,
/// never through a link someone else planted.
fn create(dir: &Path) -> Result<File, ExportError> {
    use std::os::unix::fs::OpenOptionsExt;
    crate::trusted_path::check(dir).map_err(|e| ExportError::io(dir, std::io::Error::other(e)))?;
    std::fs::create_dir_all(dir).map_err(|e| ExportError::io(dir, e))?;
    let path = dir.join("part-0.parquet");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| ExportError::io(&path, e))
}

/// Writes `tables` of `report` under `layout`. The caller has removed this
/// report's partitions (or refused). On failure (a table of a damaged
/// report that cannot be decoded, a full disk) the partitions written so
/// far are removed again, with the folders above them this export left
/// empty: no half-written dataset is left behind to be read as whole.
pub fn export(report: &Container, layout: &Layout, tables: &[&str]) -> Result<(), ExportError> {
    let root_existed = layout.root.symlink_metadata().is_ok();
    let mut created = Vec::new();
    let written = write_tables(report, layout, tables, &mut created);
    if written.is_err() {
        undo(layout, &created, root_existed);
    }
    written
}

/// Removes the partition folders `created` (asys made each, fresh) and
/// then every folder above them up to the root that is left empty; the
/// root itself only if this export made it. Best effort: the export has
/// already failed, and its error is the one to report.
fn undo(layout: &Layout, created: &[PathBuf], root_existed: bool) {
    for dir in created {
        let _ = std::fs::remove_dir_all(dir);
        let mut up = dir.parent();
        while let Some(d) = up {
            if d == layout.root || !d.starts_with(&layout.root) {
                break;
            }
            // remove_dir removes only an empty folder: others' partitions stay.
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            up = d.parent();
        }
    }
    if !root_existed {
        let _ = std::fs::remove_dir(&layout.root);
    }
}

fn write_tables(
    report: &Container,
    layout: &Layout,
    tables: &[&str],
    created: &mut Vec<PathBuf>,
) -> Result<(), ExportError> {
    for &table in tables {
        let Some(t) = reader::open(report, table)? else {
            continue;
        };
        let columns = t.column_names();
        let names: Vec<&str> = columns.iter().map(String::as_str).collect();
        let by_pid = names.contains(&PID);
        let kept: Vec<usize> = (0..names.len()).filter(|&i| names[i] != PID).collect();
        // Under rank= the pid stays in the file and the rank goes.
        let kept_ranked: Vec<usize> = (0..names.len()).filter(|&i| names[i] != RANK).collect();
        let mut writers: HashMap<Option<u32>, ArrowWriter<File>> = HashMap::new();
        let parquet = |e| ExportError::Parquet {
            table: table.to_string(),
            source: e,
        };
        let mut write = |pid: Option<u32>, batch: &RecordBatch| -> Result<(), ExportError> {
            let ranked = pid.is_some_and(|p| layout.ranks.contains_key(&p));
            let batch = batch
                .project(if ranked { &kept_ranked } else { &kept })
                .map_err(|e| ExportError::Arrow {
                    table: table.to_string(),
                    source: e,
                })?;
            if batch.num_rows() == 0 {
                return Ok(());
            }
            let w = match writers.entry(pid) {
                std::collections::hash_map::Entry::Occupied(w) => w.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let dir = layout.dir(table, pid);
                    let file = create(&dir)?;
                    created.push(dir);
                    let schema: Arc<Schema> = batch.schema();
                    v.insert(
                        ArrowWriter::try_new(file, schema, Some(properties(table)))
                            .map_err(parquet)?,
                    )
                }
            };
            w.write(&batch).map_err(parquet)
        };
        // A table with no rows still gets a file, so its columns are known.
        if t.num_rows() == 0 && !by_pid {
            let schema = Arc::new(t_schema(&t, &kept));
            write(None, &RecordBatch::new_empty(schema))?;
        }
        for b in t.scan(&names, None)? {
            let b = b?;
            let batch = b.record_batch();
            if !by_pid {
                write(None, batch)?;
                continue;
            }
            let pids = b.values::<UInt32Type>(PID)?;
            let mut distinct: Vec<u32> = pids.to_vec();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() == 1 {
                write(Some(distinct[0]), batch)?;
                continue;
            }
            let col = UInt32Array::from(pids.to_vec());
            for pid in distinct {
                let mask = arrow::compute::kernels::cmp::eq(&col, &UInt32Array::new_scalar(pid))
                    .map_err(|e| ExportError::Arrow {
                        table: table.to_string(),
                        source: e,
                    })?;
                let part = filter_record_batch(batch, &mask).map_err(|e| ExportError::Arrow {
                    table: table.to_string(),
                    source: e,
                })?;
                write(Some(pid), &part)?;
            }
        }
        for (_, w) in writers {
            w.close().map_err(parquet)?;
        }
    }
    Ok(())
}

fn t_schema<R: parquet::file::reader::ChunkReader + Clone + 'static>(
    t: &reader::TableReader<R>,
    kept: &[usize],
) -> Schema {
    t.schema().project(kept).unwrap_or_else(|_| Schema::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_cannot_add_levels() {
        assert_eq!(encode("node-1.example"), "node-1.example");
        assert_eq!(encode("a/b=c"), "a%2Fb%3Dc");
        assert_eq!(encode(".."), "%2E%2E");
    }
}
