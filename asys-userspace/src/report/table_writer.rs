//! Streams one table to a Parquet file, a row group at a time, so memory stays
//! bounded however long the recording runs.
use std::{fs::File, path::Path};

use arrow::{array::RecordBatch, datatypes::SchemaRef};
use parquet::{arrow::ArrowWriter, file::properties::WriterProperties};

use super::ReportError;

/// Rows per row group: large enough for good scans, small enough that the
/// writer's buffer stays a few MiB.
const ROW_GROUP_ROWS: usize = 65536;

pub struct TableWriter {
    name: String,
    writer: ArrowWriter<File>,
    rows: u64,
}

impl TableWriter {
    pub fn create(dir: &Path, name: &str, schema: SchemaRef) -> Result<Self, ReportError> {
        let path = dir.join(format!("{name}.parquet"));
        let file = File::create(&path).map_err(|e| ReportError::io(&path, e))?;
        let props = WriterProperties::builder()
            .set_max_row_group_size(ROW_GROUP_ROWS)
            .build();
        let writer = ArrowWriter::try_new(file, schema, Some(props)).map_err(|source| {
            ReportError::Parquet {
                path,
                table: name.into(),
                source,
            }
        })?;
        Ok(Self {
            name: name.into(),
            writer,
            rows: 0,
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), ReportError> {
        self.rows += batch.num_rows() as u64;
        self.writer
            .write(batch)
            .map_err(|source| self.error(source))
    }

    /// Encoded bytes so far: written, and buffered for the open row group.
    pub fn size(&self) -> u64 {
        (self.writer.bytes_written() + self.writer.in_progress_size()) as u64
    }

    pub fn close(self) -> Result<u64, ReportError> {
        let rows = self.rows;
        let name = self.name.clone();
        self.writer.close().map_err(|source| ReportError::Parquet {
            path: name.clone().into(),
            table: name,
            source,
        })?;
        Ok(rows)
    }

    fn error(&self, source: parquet::errors::ParquetError) -> ReportError {
        ReportError::Parquet {
            path: self.name.clone().into(),
            table: self.name.clone(),
            source,
        }
    }
}
