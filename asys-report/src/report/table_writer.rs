//! Writes one table to a single Parquet file: the tables of a report read
//! back from an SQLite export (`crate::import`), and in the tests files
//! shaped differently from what the recorder writes.
use std::{fs::File, path::Path};

use arrow::{array::RecordBatch, datatypes::SchemaRef};
use parquet::arrow::ArrowWriter;

use crate::report::{ReportError, columns::ColumnDef};

pub struct TableWriter {
    name: String,
    writer: ArrowWriter<File>,
    rows: u64,
}

impl TableWriter {
    /// A writer of `name.parquet` in `dir`, with the declared columns'
    /// encodings (`schema` is the columns' schema).
    pub fn create(
        dir: &Path,
        name: &str,
        schema: SchemaRef,
        columns: &[ColumnDef],
    ) -> Result<Self, ReportError> {
        let path = dir.join(format!("{name}.parquet"));
        let file = super::files::create_new(&path).map_err(|e| ReportError::io(&path, e))?;
        let props = crate::report::columns::writer_properties(columns);
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
