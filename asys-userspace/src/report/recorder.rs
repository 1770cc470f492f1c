//! The recording side of a report: rows arrive one by one, are buffered into
//! Arrow batches of [`BATCH_ROWS`] and streamed to each table's Parquet file in
//! a temporary folder beside the final report.
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use arrow::{
    array::{
        ArrayRef, BinaryBuilder, BooleanBuilder, FixedSizeListBuilder, Int32Builder, Int64Builder,
        RecordBatch, StringBuilder, UInt32Builder, UInt64Builder,
    },
    datatypes::SchemaRef,
};

use super::{ReportError, schema, strings::StringTable, table_writer::TableWriter};

const BATCH_ROWS: usize = 8192;

/// One completed API call, decoded.
#[derive(Debug, Clone, Default)]
pub struct ApiRow {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub name_id: u32,
    pub library_id: u32,
    pub return_value: i64,
    pub correlation: Option<u32>,
    pub bytes: Option<u64>,
    pub copy_kind: Option<i32>,
    pub stream: Option<u64>,
    pub device: Option<i32>,
    pub ptr: Option<u64>,
    pub kernel_addr: Option<u64>,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub shared_mem: Option<u64>,
    /// The raw argument registers (rdi, rsi, rdx, rcx, r8, r9, two stack slots).
    pub args: [u64; 8],
    /// Text captured from an argument (range names, marks), as a string id.
    pub text_id: Option<u32>,
    /// A registered-string handle given instead of text.
    pub text_handle: Option<u64>,
}

/// One device activity record.
#[derive(Debug, Clone, Default)]
pub struct ActivityRow {
    pub start: i64,
    pub end: i64,
    pub kind: &'static str,
    pub pid: u32,
    pub device: u32,
    pub stream: u32,
    pub correlation: u32,
    pub bytes: Option<u64>,
    pub copy_kind: Option<i32>,
    pub kernel_addr: Option<u64>,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub shared_mem: Option<u32>,
    pub clock_offset: i64,
}

#[derive(Debug, Clone)]
pub struct ProcessRow {
    pub ts: i64,
    pub kind: &'static str,
    pub pid: u32,
    pub tid: u32,
    pub child_pid: u32,
    pub comm_id: u32,
}

#[derive(Debug, Clone)]
pub struct SchedRow {
    pub ts: i64,
    pub cpu: u32,
    pub prev_pid: u32,
    pub prev_tid: u32,
    pub prev_state: i64,
    pub prev_comm: u32,
    pub next_tid: u32,
    pub next_comm: u32,
}

#[derive(Debug, Clone)]
pub struct ModuleRow {
    pub ts: i64,
    pub pid: u32,
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub path_id: u32,
    pub build_id: Option<String>,
}

/// Buffers rows of one table and writes them out in batches.
struct Buffered<R> {
    rows: Vec<R>,
    writer: TableWriter,
    schema: SchemaRef,
    to_columns: fn(&[R]) -> Vec<ArrayRef>,
}

impl<R> Buffered<R> {
    fn new(
        dir: &Path,
        name: &str,
        schema: SchemaRef,
        to_columns: fn(&[R]) -> Vec<ArrayRef>,
    ) -> Result<Self, ReportError> {
        Ok(Self {
            rows: Vec::with_capacity(BATCH_ROWS),
            writer: TableWriter::create(dir, name, schema.clone())?,
            schema,
            to_columns,
        })
    }

    /// About how many bytes this table takes so far (rows not yet encoded
    /// count at their in-memory size, which is more than they will take).
    fn size(&self) -> u64 {
        self.writer.size() + (self.rows.len() * std::mem::size_of::<R>()) as u64
    }

    fn push(&mut self, row: R) -> Result<(), ReportError> {
        self.rows.push(row);
        if self.rows.len() >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ReportError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let batch = RecordBatch::try_new(self.schema.clone(), (self.to_columns)(&self.rows))
            .map_err(|source| ReportError::Arrow {
                table: "batch".into(),
                source,
            })?;
        self.rows.clear();
        self.writer.write(&batch)
    }

    fn close(mut self) -> Result<u64, ReportError> {
        self.flush()?;
        self.writer.close()
    }
}

macro_rules! column {
    ($builder:ty, $rows:expr, $f:expr) => {{
        let mut b = <$builder>::with_capacity($rows.len());
        for r in $rows {
            b.append_option($f(r));
        }
        Arc::new(b.finish()) as ArrayRef
    }};
}

fn api_columns(rows: &[ApiRow]) -> Vec<ArrayRef> {
    let g = |i: usize| move |r: &ApiRow| r.grid.map(|g| g[i]);
    let b = |i: usize| move |r: &ApiRow| r.block.map(|b| b[i]);
    vec![
        column!(Int64Builder, rows, |r: &ApiRow| Some(r.start)),
        column!(Int64Builder, rows, |r: &ApiRow| Some(r.end)),
        column!(UInt32Builder, rows, |r: &ApiRow| Some(r.pid)),
        column!(UInt32Builder, rows, |r: &ApiRow| Some(r.tid)),
        column!(UInt32Builder, rows, |r: &ApiRow| Some(r.cpu)),
        column!(UInt32Builder, rows, |r: &ApiRow| Some(r.name_id)),
        column!(UInt32Builder, rows, |r: &ApiRow| Some(r.library_id)),
        column!(Int64Builder, rows, |r: &ApiRow| Some(r.return_value)),
        column!(UInt32Builder, rows, |r: &ApiRow| r.correlation),
        column!(UInt64Builder, rows, |r: &ApiRow| r.bytes),
        column!(Int32Builder, rows, |r: &ApiRow| r.copy_kind),
        column!(UInt64Builder, rows, |r: &ApiRow| r.stream),
        column!(Int32Builder, rows, |r: &ApiRow| r.device),
        column!(UInt64Builder, rows, |r: &ApiRow| r.ptr),
        column!(UInt64Builder, rows, |r: &ApiRow| r.kernel_addr),
        column!(UInt32Builder, rows, g(0)),
        column!(UInt32Builder, rows, g(1)),
        column!(UInt32Builder, rows, g(2)),
        column!(UInt32Builder, rows, b(0)),
        column!(UInt32Builder, rows, b(1)),
        column!(UInt32Builder, rows, b(2)),
        column!(UInt64Builder, rows, |r: &ApiRow| r.shared_mem),
        {
            let mut b = FixedSizeListBuilder::with_capacity(UInt64Builder::new(), 8, rows.len())
                .with_field(Arc::new(arrow::datatypes::Field::new(
                    "item",
                    arrow::datatypes::DataType::UInt64,
                    false,
                )));
            for r in rows {
                b.values().append_slice(&r.args);
                b.append(true);
            }
            Arc::new(b.finish()) as ArrayRef
        },
        column!(UInt32Builder, rows, |r: &ApiRow| r.text_id),
        column!(UInt64Builder, rows, |r: &ApiRow| r.text_handle),
    ]
}

fn activity_columns(rows: &[ActivityRow]) -> Vec<ArrayRef> {
    let g = |i: usize| move |r: &ActivityRow| r.grid.map(|g| g[i]);
    let b = |i: usize| move |r: &ActivityRow| r.block.map(|b| b[i]);
    let mut kind = StringBuilder::new();
    for r in rows {
        kind.append_value(r.kind);
    }
    vec![
        column!(Int64Builder, rows, |r: &ActivityRow| Some(r.start)),
        column!(Int64Builder, rows, |r: &ActivityRow| Some(r.end)),
        Arc::new(kind.finish()),
        column!(UInt32Builder, rows, |r: &ActivityRow| Some(r.pid)),
        column!(UInt32Builder, rows, |r: &ActivityRow| Some(r.device)),
        column!(UInt32Builder, rows, |r: &ActivityRow| Some(r.stream)),
        column!(UInt32Builder, rows, |r: &ActivityRow| Some(r.correlation)),
        column!(UInt64Builder, rows, |r: &ActivityRow| r.bytes),
        column!(Int32Builder, rows, |r: &ActivityRow| r.copy_kind),
        column!(UInt64Builder, rows, |r: &ActivityRow| r.kernel_addr),
        column!(UInt32Builder, rows, g(0)),
        column!(UInt32Builder, rows, g(1)),
        column!(UInt32Builder, rows, g(2)),
        column!(UInt32Builder, rows, b(0)),
        column!(UInt32Builder, rows, b(1)),
        column!(UInt32Builder, rows, b(2)),
        column!(UInt32Builder, rows, |r: &ActivityRow| r.shared_mem),
        column!(Int64Builder, rows, |r: &ActivityRow| Some(r.clock_offset)),
    ]
}

fn process_columns(rows: &[ProcessRow]) -> Vec<ArrayRef> {
    let mut kind = StringBuilder::new();
    for r in rows {
        kind.append_value(r.kind);
    }
    vec![
        column!(Int64Builder, rows, |r: &ProcessRow| Some(r.ts)),
        Arc::new(kind.finish()),
        column!(UInt32Builder, rows, |r: &ProcessRow| Some(r.pid)),
        column!(UInt32Builder, rows, |r: &ProcessRow| Some(r.tid)),
        column!(UInt32Builder, rows, |r: &ProcessRow| Some(r.child_pid)),
        column!(UInt32Builder, rows, |r: &ProcessRow| Some(r.comm_id)),
    ]
}

fn sched_columns(rows: &[SchedRow]) -> Vec<ArrayRef> {
    vec![
        column!(Int64Builder, rows, |r: &SchedRow| Some(r.ts)),
        column!(UInt32Builder, rows, |r: &SchedRow| Some(r.cpu)),
        column!(UInt32Builder, rows, |r: &SchedRow| Some(r.prev_pid)),
        column!(UInt32Builder, rows, |r: &SchedRow| Some(r.prev_tid)),
        column!(Int64Builder, rows, |r: &SchedRow| Some(r.prev_state)),
        column!(UInt32Builder, rows, |r: &SchedRow| Some(r.prev_comm)),
        column!(UInt32Builder, rows, |r: &SchedRow| Some(r.next_tid)),
        column!(UInt32Builder, rows, |r: &SchedRow| Some(r.next_comm)),
    ]
}

fn module_columns(rows: &[ModuleRow]) -> Vec<ArrayRef> {
    let mut build = StringBuilder::new();
    for r in rows {
        build.append_option(r.build_id.as_deref());
    }
    vec![
        column!(Int64Builder, rows, |r: &ModuleRow| Some(r.ts)),
        column!(UInt32Builder, rows, |r: &ModuleRow| Some(r.pid)),
        column!(UInt64Builder, rows, |r: &ModuleRow| Some(r.start)),
        column!(UInt64Builder, rows, |r: &ModuleRow| Some(r.end)),
        column!(UInt64Builder, rows, |r: &ModuleRow| Some(r.file_offset)),
        column!(UInt32Builder, rows, |r: &ModuleRow| Some(r.path_id)),
        Arc::new(build.finish()),
    ]
}

/// One CPU sample.
#[derive(Debug, Clone)]
pub struct SampleRow {
    pub ts: i64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub kernel_mode: bool,
}

fn sample_columns(rows: &[SampleRow]) -> Vec<ArrayRef> {
    let mut kernel = BooleanBuilder::new();
    for r in rows {
        kernel.append_value(r.kernel_mode);
    }
    vec![
        column!(Int64Builder, rows, |r: &SampleRow| Some(r.ts)),
        column!(UInt32Builder, rows, |r: &SampleRow| Some(r.pid)),
        column!(UInt32Builder, rows, |r: &SampleRow| Some(r.tid)),
        column!(UInt32Builder, rows, |r: &SampleRow| Some(r.cpu)),
        Arc::new(kernel.finish()),
    ]
}

/// A stack copied by the kernel at the return of a slow API call.
#[derive(Debug, Clone)]
pub struct StackRawRow {
    pub pid: u32,
    pub tid: u32,
    pub call_start: i64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub stack: Vec<u8>,
}

fn stack_raw_columns(rows: &[StackRawRow]) -> Vec<ArrayRef> {
    let mut stack = BinaryBuilder::new();
    for r in rows {
        stack.append_value(&r.stack);
    }
    vec![
        column!(UInt32Builder, rows, |r: &StackRawRow| Some(r.pid)),
        column!(UInt32Builder, rows, |r: &StackRawRow| Some(r.tid)),
        column!(Int64Builder, rows, |r: &StackRawRow| Some(r.call_start)),
        column!(UInt64Builder, rows, |r: &StackRawRow| Some(r.ip)),
        column!(UInt64Builder, rows, |r: &StackRawRow| Some(r.sp)),
        column!(UInt64Builder, rows, |r: &StackRawRow| Some(r.bp)),
        Arc::new(stack.finish()),
    ]
}

/// One frame of an API call's or a CPU sample's stack (`call_start`: the
/// sample's time).
#[derive(Debug, Clone)]
pub struct StackFrameRow {
    pub pid: u32,
    pub tid: u32,
    pub call_start: i64,
    pub depth: u32,
    pub pc: u64,
    pub function_id: u32,
    pub file_id: Option<u32>,
    pub line: Option<u32>,
    pub module_id: u32,
    pub inlined: bool,
}

fn stack_frame_columns(rows: &[StackFrameRow]) -> Vec<ArrayRef> {
    let mut inlined = BooleanBuilder::new();
    for r in rows {
        inlined.append_value(r.inlined);
    }
    vec![
        column!(UInt32Builder, rows, |r: &StackFrameRow| Some(r.pid)),
        column!(UInt32Builder, rows, |r: &StackFrameRow| Some(r.tid)),
        column!(Int64Builder, rows, |r: &StackFrameRow| Some(r.call_start)),
        column!(UInt32Builder, rows, |r: &StackFrameRow| Some(r.depth)),
        column!(UInt64Builder, rows, |r: &StackFrameRow| Some(r.pc)),
        column!(UInt32Builder, rows, |r: &StackFrameRow| Some(r.function_id)),
        column!(UInt32Builder, rows, |r: &StackFrameRow| r.file_id),
        column!(UInt32Builder, rows, |r: &StackFrameRow| r.line),
        column!(UInt32Builder, rows, |r: &StackFrameRow| Some(r.module_id)),
        Arc::new(inlined.finish()),
    ]
}

#[derive(Debug, Clone)]
pub struct SymbolRow {
    pub pid: u32,
    pub addr: u64,
    pub name_id: u32,
}

fn symbol_columns(rows: &[SymbolRow]) -> Vec<ArrayRef> {
    vec![
        column!(UInt32Builder, rows, |r: &SymbolRow| Some(r.pid)),
        column!(UInt64Builder, rows, |r: &SymbolRow| Some(r.addr)),
        column!(UInt32Builder, rows, |r: &SymbolRow| Some(r.name_id)),
    ]
}

/// The tables being recorded, in a private folder until [`Recorder::finish`].
pub struct Recorder {
    dir: PathBuf,
    pub strings: StringTable,
    /// One table per trace item, created on its first call.
    api: std::collections::BTreeMap<crate::apis::TraceItem, Buffered<ApiRow>>,
    activity: Buffered<ActivityRow>,
    stacks: Buffered<StackRawRow>,
    processes: Buffered<ProcessRow>,
    modules: Buffered<ModuleRow>,
    /// Created on the first context switch (`--cpuctxsw`).
    sched: Option<Buffered<SchedRow>>,
    /// Created on the first CPU sample (`-s`), with their raw stacks.
    samples: Option<(Buffered<SampleRow>, Buffered<StackRawRow>)>,
    /// Processes whose mappings this recording holds.
    mapped: std::collections::HashSet<u32>,
    /// Unique per recorder in this process: what was resolved against one
    /// recorder's string table (API name ids) is not reused with another.
    serial: u64,
}

/// What recording left behind: table files in `dir`, ready to be symbolized
/// and packed.
pub struct Recorded {
    pub dir: PathBuf,
    pub members: Vec<String>,
    pub tables: std::collections::BTreeMap<String, u64>,
    pub strings: StringTable,
}

impl Recorder {
    /// This recorder's serial number (see the field).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// How large the report would be now, more closely than
    /// [`Self::size_estimate`]: pending rows are encoded first.
    pub fn encoded_size(&mut self) -> Result<u64, ReportError> {
        for t in self.api.values_mut() {
            t.flush()?;
        }
        self.activity.flush()?;
        self.stacks.flush()?;
        self.processes.flush()?;
        self.modules.flush()?;
        if let Some(t) = &mut self.sched {
            t.flush()?;
        }
        if let Some((t, raw)) = &mut self.samples {
            t.flush()?;
            raw.flush()?;
        }
        Ok(self.size_estimate())
    }

    /// About how large the report would be now (`--max-report-size`): the
    /// tables' encoded bytes and the strings; rows not encoded yet count at
    /// their in-memory size, more than they will take.
    pub fn size_estimate(&self) -> u64 {
        self.api.values().map(Buffered::size).sum::<u64>()
            + self.activity.size()
            + self.stacks.size()
            + self.processes.size()
            + self.modules.size()
            + self.sched.as_ref().map_or(0, Buffered::size)
            + self
                .samples
                .as_ref()
                .map_or(0, |(t, raw)| t.size() + raw.size())
            + self.strings.bytes()
    }

    /// `dir` must not exist; it is created and owned by the recorder.
    pub fn create(dir: PathBuf) -> Result<Self, ReportError> {
        std::fs::create_dir(&dir).map_err(|e| ReportError::io(&dir, e))?;
        Ok(Self {
            api: Default::default(),
            activity: Buffered::new(
                &dir,
                schema::HGGC_ACTIVITY,
                schema::hggc_activity(),
                activity_columns,
            )?,
            stacks: Buffered::new(
                &dir,
                schema::STACKS_RAW,
                schema::stacks_raw(),
                stack_raw_columns,
            )?,
            processes: Buffered::new(
                &dir,
                schema::PROCESS_EVENTS,
                schema::process_events(),
                process_columns,
            )?,
            modules: Buffered::new(&dir, schema::MODULES, schema::modules(), module_columns)?,
            sched: None,
            samples: None,
            mapped: Default::default(),
            serial: {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            strings: StringTable::default(),
            dir,
        })
    }

    pub fn api(&mut self, item: crate::apis::TraceItem, row: ApiRow) -> Result<(), ReportError> {
        if !self.api.contains_key(&item) {
            let t = Buffered::new(&self.dir, &item.table(), schema::api_calls(), api_columns)?;
            self.api.insert(item, t);
        }
        self.api.get_mut(&item).expect("inserted above").push(row)
    }

    pub fn activity(&mut self, row: ActivityRow) -> Result<(), ReportError> {
        self.activity.push(row)
    }

    pub fn stack(&mut self, row: StackRawRow) -> Result<(), ReportError> {
        self.stacks.push(row)
    }

    pub fn process(&mut self, row: ProcessRow) -> Result<(), ReportError> {
        self.processes.push(row)
    }

    pub fn module(&mut self, row: ModuleRow) -> Result<(), ReportError> {
        self.mapped.insert(row.pid);
        self.modules.push(row)
    }

    /// `pid`'s mappings were looked for (whether or not it still ran).
    pub fn mark_mapped(&mut self, pid: u32) {
        self.mapped.insert(pid);
    }

    /// Whether this recording holds (or looked for) mappings of `pid`.
    pub fn has_mappings(&self, pid: u32) -> bool {
        self.mapped.contains(&pid)
    }

    /// A CPU sample and its registers and stack (empty with `-b none`).
    pub fn sample(&mut self, row: SampleRow, stack: StackRawRow) -> Result<(), ReportError> {
        if self.samples.is_none() {
            self.samples = Some((
                Buffered::new(
                    &self.dir,
                    schema::CPU_SAMPLES,
                    schema::cpu_samples(),
                    sample_columns,
                )?,
                Buffered::new(
                    &self.dir,
                    schema::SAMPLE_STACKS_RAW,
                    schema::stacks_raw(),
                    stack_raw_columns,
                )?,
            ));
        }
        let (t, raw) = self.samples.as_mut().expect("created above");
        t.push(row)?;
        raw.push(stack)
    }

    pub fn sched(&mut self, row: SchedRow) -> Result<(), ReportError> {
        if self.sched.is_none() {
            self.sched = Some(Buffered::new(
                &self.dir,
                schema::SCHED,
                schema::sched(),
                sched_columns,
            )?);
        }
        self.sched.as_mut().expect("created above").push(row)
    }

    pub fn finish(self) -> Result<Recorded, ReportError> {
        let mut tables = std::collections::BTreeMap::new();
        for (item, t) in self.api {
            tables.insert(item.table(), t.close()?);
        }
        tables.insert(schema::HGGC_ACTIVITY.to_string(), self.activity.close()?);
        // Raw stacks stay in the folder for the symbolize stage only.
        self.stacks.close()?;
        tables.insert(schema::PROCESS_EVENTS.to_string(), self.processes.close()?);
        tables.insert(schema::MODULES.to_string(), self.modules.close()?);
        if let Some(t) = self.sched {
            tables.insert(schema::SCHED.to_string(), t.close()?);
        }
        if let Some((t, raw)) = self.samples {
            tables.insert(schema::CPU_SAMPLES.to_string(), t.close()?);
            // Like the API's raw stacks: for the symbolize stage only.
            raw.close()?;
        }
        Ok(Recorded {
            members: tables.keys().map(|t| format!("{t}.parquet")).collect(),
            dir: self.dir,
            tables,
            strings: self.strings,
        })
    }
}

impl Recorded {
    /// Writes the symbols table (from the symbolize stage) and the strings.
    pub fn add_symbols(&mut self, rows: Vec<SymbolRow>) -> Result<(), ReportError> {
        let mut t = Buffered::new(
            &self.dir,
            schema::SYMBOLS,
            schema::symbols(),
            symbol_columns,
        )?;
        for r in rows {
            t.push(r)?;
        }
        self.tables.insert(schema::SYMBOLS.into(), t.close()?);
        self.members.push(format!("{}.parquet", schema::SYMBOLS));
        Ok(())
    }

    /// Writes unwound, named stacks (from the symbolize stage) as `table`
    /// (`api_stacks`, `cpu_sample_stacks`).
    pub fn add_stacks(
        &mut self,
        table: &str,
        schema: SchemaRef,
        rows: Vec<StackFrameRow>,
    ) -> Result<(), ReportError> {
        let mut t = Buffered::new(&self.dir, table, schema, stack_frame_columns)?;
        for r in rows {
            t.push(r)?;
        }
        self.tables.insert(table.into(), t.close()?);
        self.members.push(format!("{table}.parquet"));
        Ok(())
    }

    pub fn write_strings(&mut self) -> Result<(), ReportError> {
        let mut w = TableWriter::create(&self.dir, schema::STRINGS, schema::strings())?;
        for (chunk_no, chunk) in self.strings.values().chunks(BATCH_ROWS).enumerate() {
            let base = (chunk_no * BATCH_ROWS) as u32;
            let ids: UInt32Builder = (0..chunk.len() as u32).fold(
                UInt32Builder::with_capacity(chunk.len()),
                |mut b, i| {
                    b.append_value(base + i);
                    b
                },
            );
            let mut ids = ids;
            let mut vals = StringBuilder::new();
            for v in chunk {
                vals.append_value(v);
            }
            let batch = RecordBatch::try_new(
                schema::strings(),
                vec![Arc::new(ids.finish()), Arc::new(vals.finish())],
            )
            .map_err(|source| ReportError::Arrow {
                table: schema::STRINGS.into(),
                source,
            })?;
            w.write(&batch)?;
        }
        self.tables.insert(schema::STRINGS.into(), w.close()?);
        self.members.push(format!("{}.parquet", schema::STRINGS));
        Ok(())
    }
}
