//! Reading tables back, by column name: a reader asks for the columns it
//! needs (the rest are never decoded) and gets the table a row group at a
//! time, so memory stays bounded by what the reader itself keeps.
use std::{path::Path, sync::Arc};

use arrow::{
    array::{
        Array, AsArray, BooleanArray, FixedSizeListArray, PrimitiveArray, RecordBatch, StringArray,
    },
    datatypes::ArrowPrimitiveType,
};
use parquet::{
    arrow::{
        ProjectionMask,
        arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder},
    },
    file::reader::ChunkReader,
};

use super::{
    ReportError,
    container::Container,
    decode_guard, schema,
    strings::StringTable,
    window::{Times, Window},
};

/// Rows per decoded batch (the row group size, so one batch per group).
const BATCH_ROWS: usize = super::columns::ROW_GROUP_ROWS;

/// Where a batch came from, for errors.
#[derive(Clone)]
struct Origin {
    path: Arc<Path>,
    table: Arc<str>,
}

/// One decoded batch of a table, its columns looked up by name.
pub struct Batch {
    batch: RecordBatch,
    origin: Origin,
}

impl Batch {
    pub fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The decoded columns as one Arrow batch (for exports that pass whole
    /// rows on).
    pub fn record_batch(&self) -> &RecordBatch {
        &self.batch
    }

    fn error(&self, column: &str, problem: &'static str) -> ReportError {
        ReportError::Column {
            path: self.origin.path.to_path_buf(),
            table: self.origin.table.to_string(),
            column: column.into(),
            problem,
        }
    }

    /// Whether the batch has column `name` (the scan asked for it).
    pub fn has(&self, name: &str) -> bool {
        self.batch.column_by_name(name).is_some()
    }

    fn get(&self, name: &str) -> Result<&dyn Array, ReportError> {
        self.batch
            .column_by_name(name)
            .map(|c| c.as_ref())
            .ok_or_else(|| self.error(name, "missing"))
    }

    /// A primitive column of type `T`.
    pub fn prim<T: ArrowPrimitiveType>(
        &self,
        name: &str,
    ) -> Result<&PrimitiveArray<T>, ReportError> {
        self.get(name)?
            .as_primitive_opt::<T>()
            .ok_or_else(|| self.error(name, "has another type"))
    }

    /// A non-nullable primitive column: its values (a null there is an error,
    /// not a zero).
    pub fn values<T: ArrowPrimitiveType>(&self, name: &str) -> Result<&[T::Native], ReportError> {
        let a = self.prim::<T>(name)?;
        if a.null_count() > 0 {
            return Err(self.error(name, "has nulls where none may be"));
        }
        Ok(a.values())
    }

    pub fn strs(&self, name: &str) -> Result<&StringArray, ReportError> {
        self.get(name)?
            .as_string_opt::<i32>()
            .ok_or_else(|| self.error(name, "has another type"))
    }

    pub fn bins(&self, name: &str) -> Result<&arrow::array::BinaryArray, ReportError> {
        self.get(name)?
            .as_binary_opt::<i32>()
            .ok_or_else(|| self.error(name, "has another type"))
    }

    pub fn bools(&self, name: &str) -> Result<&BooleanArray, ReportError> {
        self.get(name)?
            .as_boolean_opt()
            .ok_or_else(|| self.error(name, "has another type"))
    }

    pub fn fixed_list(&self, name: &str) -> Result<&FixedSizeListArray, ReportError> {
        self.get(name)?
            .as_fixed_size_list_opt()
            .ok_or_else(|| self.error(name, "has another type"))
    }

    /// A fixed-size list column's items as one flat primitive array
    /// (`size` items per row), and the list array for its nulls.
    pub fn fixed_list_items<T: ArrowPrimitiveType>(
        &self,
        name: &str,
        size: i32,
    ) -> Result<(&FixedSizeListArray, &PrimitiveArray<T>), ReportError> {
        let list = self.fixed_list(name)?;
        if list.value_length() != size {
            return Err(self.error(name, "has another list size"));
        }
        let items = list
            .values()
            .as_primitive_opt::<T>()
            .ok_or_else(|| self.error(name, "has another item type"))?;
        Ok((list, items))
    }
}

/// An opened table of a report or of a recording folder.
pub struct TableReader<R: ChunkReader + 'static> {
    source: R,
    meta: ArrowReaderMetadata,
    origin: Origin,
    /// Rows outside this window are dropped as they are decoded.
    window: Option<(Arc<Window>, Times)>,
}

/// A table the decoder refused (`cause`) or panicked on (None).
fn undecodable(origin: &Origin, cause: Option<&dyn std::fmt::Display>) -> ReportError {
    ReportError::Undecodable {
        path: origin.path.to_path_buf(),
        table: origin.table.to_string(),
        detail: cause.map(|c| format!(" ({c})")).unwrap_or_default(),
    }
}

/// Reads the footer of a table and bounds it (see [`super::footer_bounds`])
/// before the Parquet crate sizes anything from it.
fn check_footer<R: ChunkReader>(source: &R) -> Result<(), super::footer_bounds::OutOfBounds> {
    use super::footer_bounds::OutOfBounds;
    let n = source.len();
    if n < 12 {
        return Err(OutOfBounds("no Parquet footer".into()));
    }
    let tail = source
        .get_bytes(n - 8, 8)
        .map_err(|_| OutOfBounds("the footer cannot be read".into()))?;
    if &tail[4..] != b"PAR1" {
        return Err(OutOfBounds("no Parquet footer".into()));
    }
    let len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if len > n - 12 {
        return Err(OutOfBounds("footer longer than the file".into()));
    }
    let footer = source
        .get_bytes(n - 8 - len, len as usize)
        .map_err(|_| OutOfBounds("the footer cannot be read".into()))?;
    super::footer_bounds::check_footer(&footer)
}

/// Runs one call into the Parquet or Arrow decoder behind the panic
/// boundary; a refusal or a panic both name the table.
fn decode<T, E: std::fmt::Display>(
    origin: &Origin,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, ReportError> {
    match decode_guard::decoding(f) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(undecodable(origin, Some(&e))),
        Err(decode_guard::Panicked) => Err(undecodable(origin, None)),
    }
}

impl<R: ChunkReader + Clone + 'static> TableReader<R> {
    fn open(source: R, path: &Path, table: &str) -> Result<Self, ReportError> {
        let origin = Origin {
            path: path.into(),
            table: table.into(),
        };
        check_footer(&source).map_err(|why| undecodable(&origin, Some(&why.0)))?;
        let meta = decode(&origin, || {
            ArrowReaderMetadata::load(&source, Default::default())
        })?;
        Ok(Self {
            source,
            meta,
            origin,
            window: None,
        })
    }

    /// Reads only the rows inside `window` (tables without times of their
    /// own are read whole).
    fn with_window(mut self, window: Option<Arc<Window>>) -> Self {
        self.window = window.and_then(|w| Some((w, super::window::times_of(&self.origin.table)?)));
        self
    }

    /// Rows of the table, from its footer (nothing decoded).
    pub fn num_rows(&self) -> u64 {
        self.meta.metadata().file_metadata().num_rows().max(0) as u64
    }

    /// The table's Arrow schema.
    pub fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.meta.schema().clone()
    }

    /// The table's column names, in order.
    pub fn column_names(&self) -> Vec<String> {
        self.meta
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    pub fn num_row_groups(&self) -> usize {
        self.meta.metadata().num_row_groups()
    }

    /// Whether the table has column `name` (one added after its report was
    /// written is absent).
    pub fn has_column(&self, name: &str) -> bool {
        self.meta.schema().fields().iter().any(|f| f.name() == name)
    }

    /// The leaf columns that make up `columns` (a missing name is an error).
    fn projection(&self, columns: &[&str]) -> Result<ProjectionMask, ReportError> {
        let fields = self.meta.schema().fields();
        let mut roots = Vec::with_capacity(columns.len());
        for &c in columns {
            match fields.iter().position(|f| f.name() == c) {
                Some(i) => roots.push(i),
                None => {
                    return Err(ReportError::Column {
                        path: self.origin.path.to_path_buf(),
                        table: self.origin.table.to_string(),
                        column: c.into(),
                        problem: "missing",
                    });
                }
            }
        }
        Ok(ProjectionMask::roots(self.meta.parquet_schema(), roots))
    }

    /// The batches of `columns` (only those are decoded), of the row groups
    /// `groups` (all when None), one row group at a time.
    pub fn scan(
        &self,
        columns: &[&str],
        groups: Option<Vec<usize>>,
    ) -> Result<impl Iterator<Item = Result<Batch, ReportError>> + Send + use<R>, ReportError>
    where
        R: Send,
    {
        // A window needs the time columns decoded too; they are dropped
        // again from what the caller sees.
        let window = self.window.clone();
        let mut wanted: Vec<&str> = columns.to_vec();
        if let Some((_, times)) = &window {
            for c in times.columns() {
                if !wanted.contains(&c) {
                    wanted.push(c);
                }
            }
        }
        let mask = self.projection(&wanted)?;
        let extra = wanted.len() > columns.len();
        let keep: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        let origin = self.origin.clone();
        let mut reader = decode(&origin, || {
            let mut b = ParquetRecordBatchReaderBuilder::new_with_metadata(
                self.source.clone(),
                self.meta.clone(),
            )
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS);
            if let Some(g) = groups {
                b = b.with_row_groups(g);
            }
            b.build()
        })?;
        // After a failure the decoder's state is not to be trusted: the
        // iterator ends with the error.
        let mut failed = false;
        Ok(std::iter::from_fn(move || {
            if failed {
                return None;
            }
            let mut next = decode(&origin, || reader.next().transpose()).transpose()?;
            if let (Ok(batch), Some((w, times))) = (&next, &window) {
                next = inside(batch, w, *times, extra.then_some(&keep[..]))
                    .map_err(|e| undecodable(&origin, Some(&e)));
            }
            failed = next.is_err();
            Some(next.map(|batch| Batch {
                batch,
                origin: origin.clone(),
            }))
        }))
    }

    /// Folds every batch of `columns` into a state per thread, with up to
    /// `threads` threads each decoding every `threads`-th row group; gives
    /// the states back in thread order (thread k had groups k, k+threads, ...).
    pub fn fold_parallel<S: Send>(
        &self,
        columns: &[&str],
        threads: usize,
        init: impl Fn() -> S + Sync,
        fold: impl Fn(&mut S, &Batch) -> Result<(), ReportError> + Sync,
    ) -> Result<Vec<S>, ReportError>
    where
        R: Send + Sync,
    {
        let groups = self.num_row_groups();
        let threads = threads.clamp(1, groups.max(1));
        let scan_part = |k: usize| -> Result<S, ReportError> {
            let mine: Vec<usize> = (k..groups).step_by(threads).collect();
            let mut state = init();
            for b in self.scan(columns, Some(mine))? {
                fold(&mut state, &b?)?;
            }
            Ok(state)
        };
        if threads == 1 {
            return Ok(vec![scan_part(0)?]);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = (1..threads)
                .map(|k| s.spawn(move || scan_part(k)))
                .collect();
            let mut out = vec![scan_part(0)?];
            for h in handles {
                // A panicking decoder thread is a bug, not bad input: pass it on.
                out.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?);
            }
            Ok(out)
        })
    }
}

/// The rows of `batch` inside `window`, with only the columns `keep` (all
/// when None).
fn inside(
    batch: &RecordBatch,
    window: &Window,
    times: Times,
    keep: Option<&[String]>,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let Some(mask) = window.mask(batch, times) else {
        return Err(arrow::error::ArrowError::SchemaError(format!(
            "time columns {:?} are not 64-bit integers",
            times.columns()
        )));
    };
    let batch = arrow::compute::filter_record_batch(batch, &mask)?;
    match keep {
        None => Ok(batch),
        Some(keep) => {
            let schema = batch.schema();
            let at: Vec<usize> = (0..schema.fields().len())
                .filter(|&i| keep.contains(schema.field(i).name()))
                .collect();
            batch.project(&at)
        }
    }
}

/// `table` of a report; None when the report has none.
pub fn open(
    report: &Container,
    table: &str,
) -> Result<Option<TableReader<super::container::MemberReader>>, ReportError> {
    if report.unavailable.contains(&table) {
        return Err(ReportError::Unavailable {
            path: report.path.clone(),
            table: table.into(),
        });
    }
    report
        .table(table)
        .map(|m| {
            TableReader::open(m, &report.path, table).map(|t| t.with_window(report.window.clone()))
        })
        .transpose()
}

/// `table` of a recording folder (`dir/table.parquet`); None when it was
/// never created (an item that made no calls).
pub fn open_file(
    dir: &Path,
    table: &str,
) -> Result<Option<TableReader<bytes_file::SharedFile>>, ReportError> {
    open_path(&dir.join(format!("{table}.parquet")), table)
}

/// The Parquet file `path` holding rows of `table`; None if it is not there.
pub fn open_path(
    path: &Path,
    table: &str,
) -> Result<Option<TableReader<bytes_file::SharedFile>>, ReportError> {
    match std::fs::File::open(path) {
        Ok(f) => TableReader::open(bytes_file::SharedFile(Arc::new(f)), path, table).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ReportError::io(path, e)),
    }
}

/// The batches of a scan, streamed.
pub type Batches = Box<dyn Iterator<Item = Result<Batch, ReportError>> + Send>;

/// Every batch of `columns` of a report's `table`, streamed; an absent table
/// reads as empty.
pub fn scan(report: &Container, table: &str, columns: &[&str]) -> Result<Batches, ReportError> {
    match open(report, table)? {
        Some(t) => Ok(Box::new(t.scan(columns, None)?)),
        None => Ok(Box::new(std::iter::empty())),
    }
}

/// Like [`scan`], for a table of a recording folder.
pub fn scan_file(dir: &Path, table: &str, columns: &[&str]) -> Result<Batches, ReportError> {
    match open_file(dir, table)? {
        Some(t) => Ok(Box::new(t.scan(columns, None)?)),
        None => Ok(Box::new(std::iter::empty())),
    }
}

pub(crate) mod bytes_file {
    use std::{fs::File, sync::Arc};

    use bytes::Bytes;
    use parquet::file::reader::{ChunkReader, Length};

    use crate::report::container::Pread;

    /// A file the Parquet reader can share between scans and threads.
    #[derive(Clone)]
    pub struct SharedFile(pub Arc<File>);

    impl Length for SharedFile {
        fn len(&self) -> u64 {
            self.0.metadata().map(|m| m.len()).unwrap_or(0)
        }
    }

    impl ChunkReader for SharedFile {
        type T = Pread;

        fn get_read(&self, start: u64) -> parquet::errors::Result<Pread> {
            Ok(Pread::new(self.0.clone(), start, self.len()))
        }

        fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
            use std::os::unix::fs::FileExt;
            // As for a report's member: a range past the end is an error, not
            // an allocation of what a damaged footer claims.
            if start
                .checked_add(length as u64)
                .is_none_or(|end| end > self.len())
            {
                return Err(parquet::errors::ParquetError::EOF(format!(
                    "{length} bytes at {start} are past the end of the file"
                )));
            }
            let mut buf = vec![0; length];
            self.0.read_exact_at(&mut buf, start)?;
            Ok(buf.into())
        }
    }
}

pub fn string_table(report: &Container) -> Result<StringTable, ReportError> {
    use schema::strings as s;
    let mut values: Vec<(u32, String)> = Vec::new();
    for b in s::scan(report, &[s::ID, s::VALUE])? {
        let b = b?;
        let v = s::View(&b);
        let (ids, vals) = (v.id()?, v.value()?);
        for (i, &id) in ids.iter().enumerate() {
            if vals.is_valid(i) {
                values.push((id, vals.value(i).to_owned()));
            }
        }
    }
    values.sort_by_key(|(id, _)| *id);
    // The recorder numbers strings 0, 1, 2, ...: an id out of place would
    // give every later id another string's text.
    if let Some((i, (id, _))) = values
        .iter()
        .enumerate()
        .find(|(i, (id, _))| usize::try_from(*id).ok() != Some(*i))
    {
        return Err(ReportError::damaged(
            &report.path,
            format!("string {id} is at place {i} of the string table"),
        ));
    }
    Ok(StringTable::from_values(
        values.into_iter().map(|(_, v)| v).collect(),
    ))
}
