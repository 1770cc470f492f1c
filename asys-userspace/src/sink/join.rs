//! Joins a table's chunk files into one Parquet file without decoding them:
//! the column chunks are copied row group by row group and a new footer is
//! written (as the parquet crate's `parquet-concat` does), so the report
//! holds one file per table as before and every reader stays unchanged.
//! Only row groups much smaller than a full one (a checkpoint's leftovers, a
//! low-rate table) are decoded and encoded again, together.
use std::{fs::File, path::Path, sync::Arc};

use arrow::{array::RecordBatch, datatypes::SchemaRef};
use parquet::{
    column::writer::ColumnCloseResult,
    errors::ParquetError,
    file::{
        metadata::ParquetMetaDataReader, properties::WriterProperties, writer::SerializedFileWriter,
    },
};

use asys_report::report::ReportError;

/// Row groups smaller than this are decoded and joined with their
/// neighbours into full ones (when the table's encodings are known): a long
/// recording at a low rate would otherwise hold two tiny row groups a second,
/// whose footer entries outweigh their data and slow every reader.
const SMALL_GROUP: i64 = (asys_report::report::columns::ROW_GROUP_ROWS / 4) as i64;

/// How the table is encoded, to re-encode small row groups; without it every
/// row group is copied as it is.
pub type Encoding<'a> = Option<(&'a WriterProperties, &'a SchemaRef)>;

/// Joins `chunks` (files in `dir`, in order, at least one) into
/// `dir/TABLE.parquet`, removes them, and returns the rows joined. One chunk
/// is renamed, not copied. Chunks are opened one at a time.
pub fn join(
    dir: &Path,
    chunks: &[String],
    table: &str,
    encoding: Encoding<'_>,
) -> Result<u64, ReportError> {
    let out_path = dir.join(format!("{table}.parquet"));
    let [first, ..] = chunks else {
        return Err(perr(
            &out_path,
            table,
            ParquetError::General("no chunk to join".into()),
        ));
    };
    if chunks.len() == 1 {
        let path = dir.join(first);
        let rows = rows_of(&path, table)?;
        std::fs::rename(&path, &out_path).map_err(|e| ReportError::io(&out_path, e))?;
        return Ok(rows);
    }
    let result = join_into(dir, chunks, table, &out_path, encoding);
    match result {
        Ok(rows) => {
            for c in chunks {
                let path = dir.join(c);
                std::fs::remove_file(&path).map_err(|e| ReportError::io(&path, e))?;
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

fn perr(path: &Path, table: &str, source: ParquetError) -> ReportError {
    ReportError::Parquet {
        path: path.to_path_buf(),
        table: table.into(),
        source,
    }
}

fn join_into(
    dir: &Path,
    chunks: &[String],
    table: &str,
    out_path: &Path,
    encoding: Encoding<'_>,
) -> Result<u64, ReportError> {
    let mut writer: Option<SerializedFileWriter<File>> = None;
    let mut schema = None;
    let mut pending = Pending::default();
    let mut rows = 0u64;
    for c in chunks {
        let path = dir.join(c);
        let input = File::open(&path).map_err(|e| ReportError::io(&path, e))?;
        let meta = ParquetMetaDataReader::new()
            .parse_and_finish(&input)
            .map_err(|e| perr(&path, table, e))?;
        let file_meta = meta.file_metadata();
        let w = match &mut writer {
            Some(w) => {
                if Some(file_meta.schema_descr().root_schema_ptr()) != schema {
                    return Err(perr(
                        &path,
                        table,
                        ParquetError::General("the chunk's schema differs from the table's".into()),
                    ));
                }
                w
            }
            None => {
                schema = Some(file_meta.schema_descr().root_schema_ptr());
                // The Arrow schema (ARROW:schema) and anything else the
                // writer noted, with the table's encodings.
                let props = encoding
                    .map(|(p, _)| p.clone().into_builder())
                    .unwrap_or_else(WriterProperties::builder)
                    .set_key_value_metadata(file_meta.key_value_metadata().cloned())
                    .build();
                let out =
                    super::disk::create_new(out_path).map_err(|e| ReportError::io(out_path, e))?;
                let w = SerializedFileWriter::new(
                    out,
                    file_meta.schema_descr().root_schema_ptr(),
                    Arc::new(props),
                )
                .map_err(|e| perr(out_path, table, e))?;
                writer.insert(w)
            }
        };
        for (i, rg) in meta.row_groups().iter().enumerate() {
            rows += rg.num_rows() as u64;
            if let Some((_, arrow_schema)) = encoding
                && rg.num_rows() < SMALL_GROUP
            {
                pending
                    .read(&input, i, arrow_schema)
                    .map_err(|e| perr(&path, table, e))?;
                if pending.rows >= asys_report::report::columns::ROW_GROUP_ROWS {
                    pending
                        .encode(w, arrow_schema)
                        .map_err(|e| perr(out_path, table, e))?;
                }
                continue;
            }
            if let Some((_, arrow_schema)) = encoding {
                pending
                    .encode(w, arrow_schema)
                    .map_err(|e| perr(out_path, table, e))?;
            }
            let mut rg_out = w.next_row_group().map_err(|e| perr(out_path, table, e))?;
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
                    .append_column(&input, result)
                    .map_err(|e| perr(&path, table, e))?;
            }
            rg_out.close().map_err(|e| perr(out_path, table, e))?;
        }
    }
    let mut w = writer.ok_or_else(|| {
        perr(
            out_path,
            table,
            ParquetError::General("no chunk to join".into()),
        )
    })?;
    if let Some((_, arrow_schema)) = encoding {
        pending
            .encode(&mut w, arrow_schema)
            .map_err(|e| perr(out_path, table, e))?;
    }
    w.close().map_err(|e| perr(out_path, table, e))?;
    Ok(rows)
}

/// Small row groups read back, waiting to be encoded as one.
#[derive(Default)]
struct Pending {
    batches: Vec<RecordBatch>,
    rows: usize,
}

impl Pending {
    fn read(&mut self, input: &File, group: usize, schema: &SchemaRef) -> Result<(), ParquetError> {
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let reader = ParquetRecordBatchReaderBuilder::try_new(input.try_clone()?)?
            .with_row_groups(vec![group])
            .with_batch_size(asys_report::report::columns::ROW_GROUP_ROWS)
            .build()?;
        for b in reader {
            let b = b.map_err(|e| ParquetError::External(Box::new(e)))?;
            // The table's own schema (the reader's may differ in metadata).
            let b = RecordBatch::try_new(schema.clone(), b.columns().to_vec())
                .map_err(|e| ParquetError::External(Box::new(e)))?;
            self.rows += b.num_rows();
            self.batches.push(b);
        }
        Ok(())
    }

    /// Encodes what is pending as one row group of `w`.
    fn encode(
        &mut self,
        w: &mut SerializedFileWriter<File>,
        schema: &SchemaRef,
    ) -> Result<(), ParquetError> {
        use parquet::arrow::arrow_writer::{compute_leaves, get_column_writers};
        if self.rows == 0 {
            return Ok(());
        }
        let mut writers = get_column_writers(w.schema_descr(), w.properties(), schema)?;
        for batch in self.batches.drain(..) {
            let mut next = writers.iter_mut();
            for (field, column) in schema.fields().iter().zip(batch.columns()) {
                for leaf in compute_leaves(field, column)? {
                    next.next()
                        .ok_or_else(|| ParquetError::General("more leaves than columns".into()))?
                        .write(&leaf)?;
                }
            }
        }
        self.rows = 0;
        let mut rg = w.next_row_group()?;
        for c in writers {
            c.close()?.append_to_row_group(&mut rg)?;
        }
        rg.close()?;
        Ok(())
    }
}

/// Rows in a Parquet file, from its footer.
pub fn rows_of(path: &Path, table: &str) -> Result<u64, ReportError> {
    let f = File::open(path).map_err(|e| ReportError::io(path, e))?;
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(&f)
        .map_err(|e| perr(path, table, e))?;
    Ok(meta.file_metadata().num_rows() as u64)
}
