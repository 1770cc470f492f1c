//! One table written as a series of self-contained Parquet files ("chunks"):
//! each checkpoint closes the open chunk (footer written, data synced), so a
//! recording killed at any moment leaves every checkpointed row readable. At a
//! normal finish the chunks are joined into one file ([`super::join`]).
use std::{
    fs::File,
    path::{Path, PathBuf},
};

use arrow::{array::RecordBatch, datatypes::SchemaRef};
use parquet::{arrow::ArrowWriter, file::properties::WriterProperties};
use serde::{Deserialize, Serialize};

use asys_report::report::{ReportError, columns::ColumnDef};

/// A closed chunk, as the journal names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Chunk {
    pub table: String,
    pub file: String,
    pub rows: u64,
}

/// The chunk file `seq` of `table`.
pub fn chunk_file(table: &str, seq: u32) -> String {
    format!("{table}.{seq:06}.chunk.parquet")
}

struct Open {
    file: String,
    writer: ArrowWriter<File>,
    rows: u64,
}

pub struct ChunkedTable {
    dir: PathBuf,
    name: String,
    schema: SchemaRef,
    props: WriterProperties,
    open: Option<Open>,
    next: u32,
    /// Every chunk closed so far (and not pruned), in order, with the
    /// CLOCK_MONOTONIC time it was closed: its rows are all older.
    closed: Vec<Chunk>,
    closed_at: Vec<i64>,
    closed_bytes: u64,
    rows: u64,
}

impl ChunkedTable {
    /// A table `name` in `dir`; nothing is created until rows come or a
    /// checkpoint asks for the table's (empty) first chunk.
    pub fn new(dir: &Path, name: &str, schema: SchemaRef, columns: &[ColumnDef]) -> Self {
        Self {
            dir: dir.to_path_buf(),
            name: name.into(),
            schema,
            props: asys_report::report::columns::writer_properties(columns),
            open: None,
            next: 0,
            closed: Vec::new(),
            closed_at: Vec::new(),
            closed_bytes: 0,
            rows: 0,
        }
    }

    fn error(&self, file: &str, source: parquet::errors::ParquetError) -> ReportError {
        ReportError::Parquet {
            path: self.dir.join(file),
            table: self.name.clone(),
            source,
        }
    }

    fn open_chunk(&mut self) -> Result<&mut Open, ReportError> {
        if self.open.is_none() {
            let file = chunk_file(&self.name, self.next);
            let path = self.dir.join(&file);
            let f = super::disk::create_new(&path).map_err(|e| ReportError::io(&path, e))?;
            let writer = ArrowWriter::try_new(f, self.schema.clone(), Some(self.props.clone()))
                .map_err(|e| self.error(&file, e))?;
            self.next += 1;
            self.open = Some(Open {
                file,
                writer,
                rows: 0,
            });
        }
        Ok(self.open.as_mut().expect("opened above"))
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), ReportError> {
        let n = batch.num_rows() as u64;
        let open = self.open_chunk()?;
        open.rows += n;
        let r = open.writer.write(batch);
        let file = open.file.clone();
        r.map_err(|e| self.error(&file, e))?;
        self.rows += n;
        Ok(())
    }

    /// Encoded bytes so far: closed chunks, and the open one's written and
    /// buffered bytes.
    pub fn size(&self) -> u64 {
        self.closed_bytes
            + self.open.as_ref().map_or(0, |o| {
                (o.writer.bytes_written() + o.writer.in_progress_size()) as u64
            })
    }

    /// Closes the open chunk (footer written, data on disk) and returns it.
    /// A table that has no chunk yet gets an empty one, so that every table
    /// the recording created has its schema on disk.
    pub fn checkpoint(&mut self) -> Result<Option<Chunk>, ReportError> {
        if self.open.is_none() && self.next == 0 {
            self.open_chunk()?;
        }
        let Some(mut open) = self.open.take() else {
            return Ok(None);
        };
        open.writer
            .finish()
            .map_err(|e| self.error(&open.file, e))?;
        let f = open.writer.inner();
        f.sync_data()
            .map_err(|e| ReportError::io(self.dir.join(&open.file), e))?;
        self.closed_bytes += open.writer.bytes_written() as u64;
        let chunk = Chunk {
            table: self.name.clone(),
            file: open.file,
            rows: open.rows,
        };
        self.closed.push(chunk.clone());
        self.closed_at.push(crate::clock::monotonic_ns());
        Ok(Some(chunk))
    }

    /// Removes the chunks closed before `before` (CLOCK_MONOTONIC): none of
    /// their rows is that recent (the flight recorder's ring).
    pub fn prune(&mut self, before: i64) -> Result<(), ReportError> {
        let n = self.closed_at.iter().take_while(|&&t| t < before).count();
        for c in self.closed.drain(..n) {
            let path = self.dir.join(&c.file);
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            std::fs::remove_file(&path).map_err(|e| ReportError::io(&path, e))?;
            self.closed_bytes = self.closed_bytes.saturating_sub(len);
        }
        self.closed_at.drain(..n);
        Ok(())
    }

    /// Writes the rows of the closed chunks whose `time` column lies in
    /// `[lo, hi]` (every row when `time` is None) to `out/NAME.parquet`;
    /// returns how many. The chunks stay.
    pub fn copy_window(
        &self,
        out: &Path,
        time: Option<&str>,
        (lo, hi): (i64, i64),
    ) -> Result<u64, ReportError> {
        use arrow::{array::AsArray, datatypes::Int64Type};
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let path = out.join(format!("{}.parquet", self.name));
        let arrow_err = |source| ReportError::Arrow {
            table: self.name.clone(),
            source,
        };
        let f = super::disk::create_new(&path).map_err(|e| ReportError::io(&path, e))?;
        let mut w = ArrowWriter::try_new(f, self.schema.clone(), Some(self.props.clone()))
            .map_err(|e| self.error(&path.to_string_lossy(), e))?;
        let mut rows = 0u64;
        for c in &self.closed {
            let chunk = self.dir.join(&c.file);
            let f = File::open(&chunk).map_err(|e| ReportError::io(&chunk, e))?;
            let batches = ParquetRecordBatchReaderBuilder::try_new(f)
                .and_then(|b| {
                    b.with_batch_size(asys_report::report::columns::BATCH_ROWS)
                        .build()
                })
                .map_err(|e| self.error(&c.file, e))?;
            for batch in batches {
                let batch = batch.map_err(arrow_err)?;
                let batch = match time {
                    Some(col) => {
                        let Some(t) = batch
                            .column_by_name(col)
                            .and_then(|a| a.as_primitive_opt::<Int64Type>())
                        else {
                            return Err(ReportError::Column {
                                path: chunk,
                                table: self.name.clone(),
                                column: col.into(),
                                problem: "missing or not i64",
                            });
                        };
                        let keep: arrow::array::BooleanArray = t
                            .values()
                            .iter()
                            .map(|&v| Some(v >= lo && v <= hi))
                            .collect();
                        arrow::compute::filter_record_batch(&batch, &keep).map_err(arrow_err)?
                    }
                    None => batch,
                };
                if batch.num_rows() == 0 {
                    continue;
                }
                // The writer's schema (the reader's may differ in metadata).
                let batch = RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())
                    .map_err(arrow_err)?;
                rows += batch.num_rows() as u64;
                w.write(&batch).map_err(|e| self.error(&c.file, e))?;
            }
        }
        w.close()
            .map_err(|e| self.error(&path.to_string_lossy(), e))?;
        Ok(rows)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Removes the chunks (a table kept for recovery only).
    pub fn remove_chunks(&mut self) -> Result<(), ReportError> {
        let open = self.open.take().map(|o| o.file);
        for file in std::mem::take(&mut self.closed)
            .into_iter()
            .map(|c| c.file)
            .chain(open)
        {
            let path = self.dir.join(file);
            std::fs::remove_file(&path).map_err(|e| ReportError::io(&path, e))?;
        }
        Ok(())
    }

    /// Closes the last chunk and joins them all into `NAME.parquet`; returns
    /// the rows. The chunks are removed once the joined file is whole.
    pub fn finish(&mut self) -> Result<u64, ReportError> {
        self.checkpoint()?;
        let files: Vec<String> = self.closed.iter().map(|c| c.file.clone()).collect();
        super::join::join(
            &self.dir,
            &files,
            &self.name,
            Some((&self.props, &self.schema)),
        )?;
        Ok(self.rows)
    }
}
