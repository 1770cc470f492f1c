//! `--type jsonlines`: every row of every table as one JSON object a line
//! (`BASE.jsonl`), the table's name under `"table"` and the columns of
//! docs/report-format.md under their own names; null columns are left
//! out. Tables follow one another in the report's order.
use std::{io::Write, path::Path, sync::Arc};

use arrow::{
    array::{ArrayRef, RecordBatch, StringArray},
    datatypes::{DataType, Field, Schema},
};

use super::ExportError;
use crate::report::{container::Container, reader};

/// The key each line names its table with.
pub const TABLE_KEY: &str = "table";

/// Writes the rows of `tables` to `out` (`path` names it in errors).
pub fn export(
    report: &Container,
    tables: &[&str],
    out: impl Write,
    path: &Path,
) -> Result<(), ExportError> {
    let arrow_err = |table: &str| {
        let table = table.to_string();
        move |e| ExportError::Arrow {
            table: table.clone(),
            source: e,
        }
    };
    let mut writer = arrow::json::LineDelimitedWriter::new(out);
    for &table in tables {
        let Some(t) = reader::open(report, table)? else {
            continue;
        };
        let columns = t.column_names();
        let names: Vec<&str> = columns.iter().map(String::as_str).collect();
        for b in t.scan(&names, None)? {
            let b = b?;
            let batch = b.record_batch();
            // The table's name first, as a column of its own.
            let mut fields = vec![Arc::new(Field::new(TABLE_KEY, DataType::Utf8, false))];
            fields.extend(batch.schema().fields().iter().cloned());
            let mut arrays: Vec<ArrayRef> =
                vec![Arc::new(StringArray::from(vec![table; batch.num_rows()]))];
            arrays.extend(batch.columns().iter().cloned());
            let with_table = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
                .map_err(arrow_err(table))?;
            writer.write(&with_table).map_err(arrow_err(table))?;
        }
    }
    writer.finish().map_err(arrow_err("(end)"))?;
    writer
        .into_inner()
        .flush()
        .map_err(|e| ExportError::io(path, e))
}
