//! Joins a table's chunk files into one Parquet file without decoding them:
//! the column chunks are copied row group by row group and a new footer is
//! written (as the parquet crate's `parquet-concat` does), so the report
//! holds one file per table as before and every reader stays unchanged.
use std::{fs::File, path::Path, sync::Arc};

use parquet::{
    column::writer::ColumnCloseResult,
    file::{
        metadata::ParquetMetaDataReader, properties::WriterProperties, writer::SerializedFileWriter,
    },
};

use crate::report::ReportError;

/// Joins `chunks` (files in `dir`, in order, at least one) into
/// `dir/TABLE.parquet`, removes them, and returns the rows joined. One chunk
/// is renamed, not copied.
pub fn join(dir: &Path, chunks: &[String], table: &str) -> Result<u64, ReportError> {
    let out_path = dir.join(format!("{table}.parquet"));
    let perr = |path: &Path, source| ReportError::Parquet {
        path: path.to_path_buf(),
        table: table.into(),
        source,
    };
    let [first, ..] = chunks else {
        return Err(perr(
            &out_path,
            parquet::errors::ParquetError::General("no chunk to join".into()),
        ));
    };
    if chunks.len() == 1 {
        let path = dir.join(first);
        let rows = rows_of(&path, table)?;
        std::fs::rename(&path, &out_path).map_err(|e| ReportError::io(&out_path, e))?;
        return Ok(rows);
    }
    let mut inputs = Vec::with_capacity(chunks.len());
    for c in chunks {
        let path = dir.join(c);
        let f = File::open(&path).map_err(|e| ReportError::io(&path, e))?;
        let meta = ParquetMetaDataReader::new()
            .parse_and_finish(&f)
            .map_err(|e| perr(&path, e))?;
        inputs.push((path, f, meta));
    }
    let first_meta = inputs[0].2.file_metadata();
    let schema = first_meta.schema_descr().root_schema_ptr();
    // The Arrow schema (ARROW:schema) and anything else the writer noted.
    let props = WriterProperties::builder()
        .set_key_value_metadata(first_meta.key_value_metadata().cloned())
        .build();
    let out = super::files::create_new(&out_path).map_err(|e| ReportError::io(&out_path, e))?;
    let result = (|| {
        let mut writer = SerializedFileWriter::new(out, schema.clone(), Arc::new(props))
            .map_err(|e| perr(&out_path, e))?;
        let mut rows = 0u64;
        for (path, input, meta) in &inputs {
            if meta.file_metadata().schema_descr().root_schema_ptr() != schema {
                return Err(perr(
                    path,
                    parquet::errors::ParquetError::General(
                        "the chunk's schema differs from the table's".into(),
                    ),
                ));
            }
            for rg in meta.row_groups() {
                let mut rg_out = writer.next_row_group().map_err(|e| perr(&out_path, e))?;
                for column in rg.columns() {
                    let result = ColumnCloseResult {
                        bytes_written: column.compressed_size() as _,
                        rows_written: rg.num_rows() as _,
                        metadata: column.clone(),
                        bloom_filter: None,
                        column_index: None,
                        offset_index: None,
                    };
                    rg_out
                        .append_column(input, result)
                        .map_err(|e| perr(path, e))?;
                }
                rg_out.close().map_err(|e| perr(&out_path, e))?;
                rows += rg.num_rows() as u64;
            }
        }
        writer.close().map_err(|e| perr(&out_path, e))?;
        Ok(rows)
    })();
    match result {
        Ok(rows) => {
            for (path, _, _) in &inputs {
                std::fs::remove_file(path).map_err(|e| ReportError::io(path, e))?;
            }
            Ok(rows)
        }
        Err(e) => {
            // Nothing half-joined is left; the chunks are all still there.
            let _ = std::fs::remove_file(&out_path);
            Err(e)
        }
    }
}

/// Rows in a Parquet file, from its footer.
pub fn rows_of(path: &Path, table: &str) -> Result<u64, ReportError> {
    let f = File::open(path).map_err(|e| ReportError::io(path, e))?;
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(&f)
        .map_err(|source| ReportError::Parquet {
            path: path.to_path_buf(),
            table: table.into(),
            source,
        })?;
    Ok(meta.file_metadata().num_rows() as u64)
}
