//! `--type arrow`: each table as an Arrow IPC file (the random-access
//! "Feather v2" format) in a folder, `BASE.arrow/TABLE.arrow`, with the
//! columns of docs/report-format.md. pyarrow (`pyarrow.ipc.open_file`,
//! `pyarrow.feather.read_table`), polars and DuckDB's arrow extension read
//! them; Arrow readers map them rather than parse them.
use std::{fs::File, path::Path};

use super::ExportError;
use crate::report::{container::Container, reader};

/// Writes `tables` of `report` into the folder `dir`, which the caller has
/// just made (empty, its own).
pub fn export(report: &Container, dir: &Path, tables: &[&str]) -> Result<(), ExportError> {
    use std::os::unix::fs::OpenOptionsExt;
    for &table in tables {
        let Some(t) = reader::open(report, table)? else {
            continue;
        };
        let arrow_err = |e| ExportError::Arrow {
            table: table.to_string(),
            source: e,
        };
        let path = dir.join(format!("{table}.arrow"));
        let file: File = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| ExportError::io(&path, e))?;
        let columns = t.column_names();
        let names: Vec<&str> = columns.iter().map(String::as_str).collect();
        // The file's schema is the first batch's (as read), or the table's
        // when it has none, so that an empty table still has its columns.
        let mut batches = t.scan(&names, None)?;
        let first = batches.next().transpose()?;
        let schema = match &first {
            Some(b) => b.record_batch().schema(),
            None => t.schema(),
        };
        let mut w = arrow::ipc::writer::FileWriter::try_new(std::io::BufWriter::new(file), &schema)
            .map_err(arrow_err)?;
        for b in first.into_iter().map(Ok).chain(batches) {
            w.write(b?.record_batch()).map_err(arrow_err)?;
        }
        w.finish().map_err(arrow_err)?;
    }
    Ok(())
}
