//! Reading tables back as Arrow record batches.
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::UInt32Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::{ReportError, container::Container, schema, strings::StringTable};

/// Every batch of `table`; an absent table reads as empty.
pub fn batches(report: &Container, table: &str) -> Result<Vec<RecordBatch>, ReportError> {
    let Some(member) = report.table(table) else {
        return Ok(Vec::new());
    };
    let perr = |source| ReportError::Parquet {
        path: report.path.clone(),
        table: table.into(),
        source,
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(member)
        .map_err(perr)?
        .with_batch_size(65536)
        .build()
        .map_err(perr)?;
    reader
        .map(|b| {
            b.map_err(|source| ReportError::Arrow {
                table: table.into(),
                source,
            })
        })
        .collect()
}

pub fn string_table(report: &Container) -> Result<StringTable, ReportError> {
    let mut values: Vec<(u32, String)> = Vec::new();
    for batch in batches(report, schema::STRINGS)? {
        let ids = batch.column(0).as_primitive::<UInt32Type>();
        let vals = batch.column(1).as_string::<i32>();
        for i in 0..batch.num_rows() {
            if !ids.is_null(i) {
                values.push((ids.value(i), vals.value(i).to_owned()));
            }
        }
    }
    values.sort_by_key(|(id, _)| *id);
    Ok(StringTable::from_values(
        values.into_iter().map(|(_, v)| v).collect(),
    ))
}
