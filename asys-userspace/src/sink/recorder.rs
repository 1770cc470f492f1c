//! The recording side of a report: rows arrive one by one, are buffered into
//! Arrow batches of [`BATCH_ROWS`] and streamed to each table's Parquet chunks
//! in the recording folder beside the final report. A checkpoint
//! ([`Recorder::checkpoint`]) closes every open chunk and notes them in the
//! journal, so a recording that is killed can be recovered up to it.
use std::path::{Path, PathBuf};

use std::collections::{BTreeMap, BTreeSet, HashSet};

use arrow::{array::RecordBatch, datatypes::SchemaRef};

use super::{
    chunked::{Chunk, ChunkedTable},
    journal::{Journal, Progress, Recording},
};
use asys_report::report::{
    ReportError,
    columns::{RowBuilder, TableDef},
    rows::*,
    schema::{
        self, activity, api, cpu_samples, cuda_graphs, cuda_sync, host_memory, jit_symbols,
        kernel_stacks, modules, nic_metrics, ppu_metrics, probes, process_events,
        processes as process_info, python_frames, python_switch_frames, python_thread_names,
        rdma_hw_counters, sched, sched_wakeups, stacks_raw,
    },
    strings::StringTable,
};

use asys_report::report::columns::BATCH_ROWS;

/// Buffers rows of one declared table and writes them out in batches.
struct Buffered<T: TableDef> {
    /// The batch being built, column by column.
    builders: T::Builders,
    rows: usize,
    writer: ChunkedTable,
    schema: SchemaRef,
}

impl<T: TableDef> Buffered<T> {
    fn new(dir: &Path, name: &str) -> Result<Self, ReportError> {
        let schema = T::schema();
        Ok(Self {
            builders: Default::default(),
            rows: 0,
            writer: ChunkedTable::new(dir, name, schema.clone(), T::COLUMNS),
            schema,
        })
    }

    #[inline]
    fn push(&mut self, row: T::Row) -> Result<(), ReportError> {
        self.builders.push(&row);
        self.rows += 1;
        if self.rows >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }
}

/// A table being recorded, whatever its rows: what checkpoints, size
/// estimates, the flight ring, windows and the finish do alike to every
/// table of [`every_table!`].
trait AnyTable {
    /// Writes the rows pending in the builders.
    fn flush(&mut self) -> Result<(), ReportError>;
    /// About how many bytes this table takes so far (rows not yet encoded
    /// count at their in-memory size, which is more than they will take).
    fn size(&self) -> u64;
    /// Writes what is pending and closes the open chunk.
    fn checkpoint(&mut self) -> Result<Option<Chunk>, ReportError>;
    /// Writes what is pending and joins the chunks into the table's file
    /// (the table is done with after this).
    fn close(&mut self) -> Result<u64, ReportError>;
    fn writer(&self) -> &ChunkedTable;
    fn writer_mut(&mut self) -> &mut ChunkedTable;
    /// The column that places its rows in time, as declared
    /// ([`TableDef::TIME`]); None: a window copies it whole.
    fn time(&self) -> Option<&'static str>;
}

impl<T: TableDef> AnyTable for Buffered<T> {
    fn flush(&mut self) -> Result<(), ReportError> {
        if self.rows == 0 {
            return Ok(());
        }
        self.rows = 0;
        let batch = RecordBatch::try_new(self.schema.clone(), self.builders.finish()).map_err(
            |source| ReportError::Arrow {
                table: "batch".into(),
                source,
            },
        )?;
        self.writer.write(&batch)
    }

    fn size(&self) -> u64 {
        self.writer.size() + (self.rows * std::mem::size_of::<T::Row>()) as u64
    }

    fn checkpoint(&mut self) -> Result<Option<Chunk>, ReportError> {
        self.flush()?;
        self.writer.checkpoint()
    }

    fn close(&mut self) -> Result<u64, ReportError> {
        self.flush()?;
        self.writer.finish()
    }

    fn writer(&self) -> &ChunkedTable {
        &self.writer
    }

    fn writer_mut(&mut self) -> &mut ChunkedTable {
        &mut self.writer
    }

    fn time(&self) -> Option<&'static str> {
        T::TIME
    }
}

/// Whether the flight ring drops a table's chunks older than its window.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ring {
    Pruned,
    /// Kept whole: the process, module and JIT tables, which the rows of
    /// any window may need. (The wake-up, kernel-stack and Python-frame
    /// tables are stamped like the samples and switches they belong to, so
    /// they are pruned with them: kept whole, they grew on disk for as long
    /// as the flight recorder ran.)
    Whole,
}

/// Every table the recorder has created, in one list and one order (the
/// journal's, a window's and the finish's), each with what the flight ring
/// does with it: `every_table!(r)` borrows them, `every_table!(r, mut)`
/// mutably. A new table is added here, as a field and its row method;
/// checkpoints, size estimates, the flight ring, windows and the finish
/// then take it along. What a table is besides (its time column, whether
/// a report holds it) comes from its declaration.
macro_rules! every_table {
    ($r:expr $(, $m:tt)?) => {{
        let r = $r;
        let mut v: Vec<(&$($m)? dyn AnyTable, Ring)> = Vec::new();
        for (_, t) in &$($m)? r.api {
            v.push((t, Ring::Pruned));
        }
        v.push((&$($m)? r.activity, Ring::Pruned));
        v.push((&$($m)? r.stacks, Ring::Pruned));
        v.push((&$($m)? r.processes, Ring::Whole));
        v.push((&$($m)? r.modules, Ring::Whole));
        v.push((&$($m)? r.process_info, Ring::Whole));
        if let Some(t) = &$($m)? r.sched {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.jit {
            v.push((t, Ring::Whole));
        }
        if let Some(t) = &$($m)? r.wakeups {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.kernel_stacks {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.python_frames {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.python_switch_frames {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.python_thread_names {
            v.push((t, Ring::Whole));
        }
        if let Some((t, raw)) = &$($m)? r.samples {
            v.push((t, Ring::Pruned));
            v.push((raw, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.host_memory {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.nic_metrics {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.ppu_metrics {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.rdma_hw_counters {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.cuda_sync {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.cuda_graphs {
            v.push((t, Ring::Pruned));
        }
        if let Some(t) = &$($m)? r.probes {
            v.push((t, Ring::Pruned));
        }
        v
    }};
}

/// The optional table of `slot`, created on its first row (a recording
/// without, say, context switches has no such table at all).
fn created<'a, T: TableDef>(
    slot: &'a mut Option<Buffered<T>>,
    dir: &Path,
    name: &str,
) -> Result<&'a mut Buffered<T>, ReportError> {
    match slot {
        Some(t) => Ok(t),
        None => Ok(slot.insert(Buffered::new(dir, name)?)),
    }
}

/// Whether a table is a member of the report (its name is declared in
/// [`ALL_TABLES`](asys_report::report::ALL_TABLES)), not the recording folder's
/// raw stacks, which are for the symbolize stage only.
fn is_member(table: &str) -> bool {
    asys_report::report::ALL_TABLES.contains(&table)
}

/// The tables being recorded, in a private folder until [`Recorder::finish`].
pub struct Recorder {
    dir: PathBuf,
    pub strings: StringTable,
    /// One table per trace item, created on its first call.
    api: BTreeMap<asys_report::trace_items::TraceItem, Buffered<api::Table>>,
    activity: Buffered<activity::Table>,
    stacks: Buffered<stacks_raw::Table>,
    processes: Buffered<process_events::Table>,
    modules: Buffered<modules::Table>,
    /// Each process's cgroup and container (`processes`).
    process_info: Buffered<process_info::Table>,
    /// Processes `process_info` has a row for.
    described: HashSet<u32>,
    /// The ranks of the processes described so far (pid → rank), for the
    /// report-level rank of the metadata.
    ranks: std::collections::BTreeMap<u32, u32>,
    /// Created on the first context switch (`--cpuctxsw`).
    sched: Option<Buffered<sched::Table>>,
    /// Created on the first wake-up.
    wakeups: Option<Buffered<sched_wakeups::Table>>,
    /// Created on the first hit of a user-defined probe (`--probe`).
    probes: Option<Buffered<probes::Table>>,
    /// Created on the first kernel stack.
    kernel_stacks: Option<Buffered<kernel_stacks::Table>>,
    /// Created on the first Python stack (`--python-sampling`).
    python_frames: Option<Buffered<python_frames::Table>>,
    python_switch_frames: Option<Buffered<python_switch_frames::Table>>,
    /// Created on the first Python thread name read.
    python_thread_names: Option<Buffered<python_thread_names::Table>>,
    /// Created on the first CPU sample (`-s`), with their raw stacks.
    samples: Option<(Buffered<cpu_samples::Table>, Buffered<stacks_raw::Table>)>,
    /// Created on the first sample of each metrics source (`collect::metrics`).
    host_memory: Option<Buffered<host_memory::Table>>,
    nic_metrics: Option<Buffered<nic_metrics::Table>>,
    ppu_metrics: Option<Buffered<ppu_metrics::Table>>,
    /// Created on the first CUDA synchronization / graph execution record.
    cuda_sync: Option<Buffered<cuda_sync::Table>>,
    cuda_graphs: Option<Buffered<cuda_graphs::Table>>,
    rdma_hw_counters: Option<Buffered<rdma_hw_counters::Table>>,
    /// Processes whose mappings this recording holds.
    mapped: HashSet<u32>,
    /// Created on the first JIT perf map read.
    jit: Option<Buffered<jit_symbols::Table>>,
    /// Processes whose perf map was looked for (whether or not there was one).
    jit_read: HashSet<u32>,
    /// Where each process's jitdump may be: the folders it worked in when
    /// scanned, and the file itself once seen mapped.
    jit_places: std::collections::HashMap<u32, BTreeSet<PathBuf>>,
    /// Each process's user when last scanned: its JIT files must be its
    /// own, also once it is gone and /proc cannot say.
    jit_owners: std::collections::HashMap<u32, u32>,
    /// What the JIT maps and dumps of traced processes may make asys hold.
    pub jit_budget:
        asys_report::untrusted::budget::Budget<asys_report::untrusted::budget::JitSymbols>,
    /// Every (pid, kernel function address) of the recorded launches and
    /// kernels, for the symbolize stage (which then never reads the tables
    /// back). Kernels are few; a launch loop repeats the same few addresses.
    kernels: HashSet<(u32, u64)>,
    /// Kernels the runtime named itself (CUPTI's kernel names), (pid, name
    /// id) → string id: the symbolize stage takes these as they are.
    named_kernels: BTreeMap<(u32, u64), u32>,
    /// Unique per recorder in this process: what was resolved against one
    /// recorder's string table (API name ids) is not reused with another.
    serial: u64,
    journal: Journal,
    /// The strings the journal's chunks hold (the first ones of `strings`).
    strings_saved: usize,
    /// The string table's chunks (new strings at each checkpoint), for
    /// `asys recover` only: a finished recording writes the whole table.
    string_chunks: ChunkedTable,
    /// Set in flight recorder mode.
    flight: Option<FlightRing>,
}

/// The flight recorder's side of the recorder: chunks older than the window
/// are dropped at each checkpoint (process and module tables and the
/// strings are kept whole: the rest cannot be read without them), and the
/// first trigger seen waits to be taken.
struct FlightRing {
    window_ns: i64,
    triggers: Vec<crate::settings::FlightTrigger>,
    pending: Option<(i64, String)>,
}

/// What recording left behind: table files in `dir`, ready to be symbolized
/// and packed.
pub struct Recorded {
    pub dir: PathBuf,
    pub members: Vec<String>,
    pub tables: BTreeMap<String, u64>,
    pub strings: StringTable,
    /// The kernel addresses to name, by process, sorted.
    pub kernels: BTreeSet<(u32, u64)>,
    /// Those the runtime named (string ids), not to be looked up.
    pub named_kernels: BTreeMap<(u32, u64), u32>,
}

impl Recorder {
    /// This recorder's serial number (see the field).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// How large the report would be now, more closely than
    /// [`Self::size_estimate`]: pending rows are encoded first.
    pub fn encoded_size(&mut self) -> Result<u64, ReportError> {
        for (t, _) in every_table!(&mut *self, mut) {
            t.flush()?;
        }
        Ok(self.size_estimate())
    }

    /// About how large the report would be now (`--max-report-size`): the
    /// tables' encoded bytes and the strings; rows not encoded yet count at
    /// their in-memory size, more than they will take.
    pub fn size_estimate(&self) -> u64 {
        every_table!(self)
            .into_iter()
            .map(|(t, _)| t.size())
            .sum::<u64>()
            + self.strings.bytes()
    }

    /// `dir` must not exist; it is created (0700, with its README and
    /// journal) and owned by the recorder.
    pub fn create(dir: PathBuf) -> Result<Self, ReportError> {
        super::folder::create(&dir)?;
        Self::create_in(dir)
    }

    /// A recorder in `dir`, a fresh folder made by [`super::folder`].
    pub fn create_in(dir: PathBuf) -> Result<Self, ReportError> {
        Ok(Self {
            journal: Journal::create(&dir)?,
            strings_saved: 0,
            string_chunks: ChunkedTable::new(
                &dir,
                super::journal::SAVED_STRINGS,
                schema::strings::Table::schema(),
                schema::strings::Table::COLUMNS,
            ),
            api: Default::default(),
            activity: Buffered::new(&dir, schema::HGGC_ACTIVITY)?,
            stacks: Buffered::new(&dir, schema::STACKS_RAW)?,
            processes: Buffered::new(&dir, schema::PROCESS_EVENTS)?,
            modules: Buffered::new(&dir, schema::MODULES)?,
            process_info: Buffered::new(&dir, schema::PROCESSES)?,
            described: Default::default(),
            ranks: Default::default(),
            sched: None,
            wakeups: None,
            probes: None,
            kernel_stacks: None,
            python_frames: None,
            python_switch_frames: None,
            python_thread_names: None,
            samples: None,
            host_memory: None,
            nic_metrics: None,
            ppu_metrics: None,
            cuda_sync: None,
            cuda_graphs: None,
            rdma_hw_counters: None,
            mapped: Default::default(),
            jit: None,
            jit_read: Default::default(),
            jit_places: Default::default(),
            jit_owners: Default::default(),
            jit_budget: Default::default(),
            kernels: Default::default(),
            named_kernels: Default::default(),
            flight: None,
            serial: {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            strings: StringTable::default(),
            dir,
        })
    }

    /// The folder the tables are written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `recording.json`: what `asys recover` needs besides the
    /// journal.
    pub fn describe(&self, recording: &Recording) -> Result<(), ReportError> {
        recording.write(&self.dir)
    }

    /// Closes every table's open chunk and writes the strings interned
    /// since the last checkpoint as a chunk too, syncs them, then appends
    /// the checkpoint to the journal: everything recorded so far can be
    /// recovered from then on.
    pub fn checkpoint(&mut self, progress: Progress) -> Result<(), ReportError> {
        let mut chunks = Vec::new();
        for (t, _) in every_table!(&mut *self, mut) {
            chunks.extend(t.checkpoint()?);
        }
        if let Some(window_ns) = self.flight.as_ref().map(|f| f.window_ns) {
            // The ring: what is older than the window goes. Nothing is
            // journaled (the chunks it would name go too).
            // A second more than the window: a report's window ends at its
            // trigger, which may be a little before its checkpoint.
            let before = crate::clock::monotonic_ns() - window_ns - 1_000_000_000;
            for (t, ring) in every_table!(&mut *self, mut) {
                if ring == Ring::Pruned {
                    t.writer_mut().prune(before)?;
                }
            }
            return Ok(());
        }
        let values = self.strings.values();
        if values.len() > self.strings_saved {
            let mut b = <schema::strings::Table as TableDef>::Builders::default();
            for (id, v) in values.iter().enumerate().skip(self.strings_saved) {
                b.push(&StringRow {
                    id: id as u32,
                    value: v.clone(),
                });
            }
            let batch = RecordBatch::try_new(schema::strings::Table::schema(), b.finish())
                .map_err(|source| ReportError::Arrow {
                    table: super::journal::SAVED_STRINGS.into(),
                    source,
                })?;
            self.string_chunks.write(&batch)?;
            chunks.extend(self.string_chunks.checkpoint()?);
            self.strings_saved = values.len();
        }
        // The chunks' names are on disk before the journal names them.
        super::disk::sync_dir(&self.dir).map_err(|e| ReportError::io(&self.dir, e))?;
        self.journal
            .append(crate::clock::monotonic_ns(), chunks, progress)
    }

    /// Flight recorder mode: only the last `window` is kept (from the next
    /// checkpoint on), and `triggers` are watched for in the API calls.
    pub fn fly(
        &mut self,
        window: std::time::Duration,
        triggers: Vec<crate::settings::FlightTrigger>,
    ) {
        self.flight = Some(FlightRing {
            window_ns: i64::try_from(window.as_nanos()).unwrap_or(i64::MAX),
            triggers,
            pending: None,
        });
    }

    /// A flight report is wanted for the window ending at `at` (the first
    /// trigger wins until it is taken).
    pub fn trigger_flight(&mut self, at: i64, why: String) {
        if let Some(f) = &mut self.flight {
            f.pending.get_or_insert((at, why));
        }
    }

    /// The trigger waiting for its report, if any.
    pub fn take_flight_trigger(&mut self) -> Option<(i64, String)> {
        self.flight.as_mut().and_then(|f| f.pending.take())
    }

    pub fn flight_pending(&self) -> bool {
        self.flight.as_ref().is_some_and(|f| f.pending.is_some())
    }

    /// Whether `row` (of `item`) fires a flight trigger.
    #[cold]
    fn check_triggers(&mut self, item: asys_report::trace_items::TraceItem, row: &ApiRow) {
        use crate::settings::FlightTrigger;
        let Some(f) = &self.flight else { return };
        if f.pending.is_some() {
            return;
        }
        let name = self.strings.get(row.name_id).unwrap_or("?");
        let mut why = None;
        for t in &f.triggers {
            match *t {
                FlightTrigger::ApiError if failed(item, name, row.return_value) => {
                    why = Some(format!("{name} returned {}", row.return_value));
                }
                FlightTrigger::Slow(ns) if row.end.saturating_sub(row.start) > ns as i64 => {
                    why = Some(format!("{name} took {} ns", row.end - row.start));
                }
                _ => {}
            }
        }
        if let Some(why) = why {
            self.trigger_flight(row.end, why);
        }
    }

    /// Writes the rows of `[lo, hi]` (CLOCK_MONOTONIC) of every table (the
    /// process and module tables whole) into a fresh folder for `report`,
    /// after a checkpoint closed every chunk. Recording goes on.
    pub fn window(&mut self, (lo, hi): (i64, i64), report: &Path) -> Result<Recorded, ReportError> {
        let dir = super::folder::fresh(report)?;
        let r = self.copy_window(&dir, (lo, hi));
        if r.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        r
    }

    fn copy_window(&self, dir: &Path, w: (i64, i64)) -> Result<Recorded, ReportError> {
        let mut tables = BTreeMap::new();
        for (t, _) in every_table!(self) {
            let n = t.writer().copy_window(dir, t.time(), w)?;
            // Raw stacks are for the symbolize stage only.
            if is_member(t.writer().name()) {
                tables.insert(t.writer().name().to_string(), n);
            }
        }
        Ok(Recorded {
            members: tables.keys().map(|t| format!("{t}.parquet")).collect(),
            dir: dir.to_path_buf(),
            tables,
            strings: self.strings.clone(),
            kernels: self.kernels.iter().copied().collect(),
            named_kernels: self.named_kernels.clone(),
        })
    }

    /// Notes in the journal why recording stopped early (best effort).
    pub fn note_stopped(&mut self, why: &str) {
        self.journal.stopped(why);
    }

    pub fn api(
        &mut self,
        item: asys_report::trace_items::TraceItem,
        row: ApiRow,
    ) -> Result<(), ReportError> {
        // The kernels of hggc launches are named (as the symbolize stage
        // always did); other items' launch addresses stay addresses.
        if let (Some(addr), asys_report::trace_items::TraceItem::Hggc) = (row.kernel_addr, item) {
            self.kernels.insert((row.pid, addr));
        }
        if self.flight.is_some() {
            self.check_triggers(item, &row);
        }
        let t = match self.api.entry(item) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Buffered::new(&self.dir, &item.table())?)
            }
        };
        t.push(row)
    }

    /// A kernel name the runtime gave (CUPTI's, mangled): `id` is what the
    /// process's kernel records carry in place of an address.
    pub fn kernel_name(&mut self, pid: u32, id: u64, mangled: &str) {
        let name = crate::elf::demangle::demangle(mangled);
        let name_id = self.strings.intern(&name);
        self.named_kernels.insert((pid, id), name_id);
    }

    pub fn activity(&mut self, row: ActivityRow) -> Result<(), ReportError> {
        if let Some(addr) = row.kernel_addr {
            self.kernels.insert((row.pid, addr));
        }
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

    /// A process's cgroup and container; one row per process per report
    /// (later calls for the same pid are ignored).
    pub fn process_info(&mut self, row: ProcessInfoRow) -> Result<(), ReportError> {
        if self.described.insert(row.pid) {
            if let Some(rank) = row.rank {
                self.ranks.insert(row.pid, rank);
            }
            self.process_info.push(row)?;
        }
        Ok(())
    }

    /// The ranks recorded so far, pid → rank.
    pub fn ranks(&self) -> &std::collections::BTreeMap<u32, u32> {
        &self.ranks
    }

    /// Whether this recording has `pid`'s cgroup (or looked for it).
    pub fn described(&self, pid: u32) -> bool {
        self.described.contains(&pid)
    }

    /// `pid`'s cgroup was looked for, and it was gone.
    pub fn mark_described(&mut self, pid: u32) {
        self.described.insert(pid);
    }

    /// `pid`'s mappings were looked for (whether or not it still ran).
    pub fn mark_mapped(&mut self, pid: u32) {
        self.mapped.insert(pid);
    }

    /// Whether this recording holds (or looked for) mappings of `pid`.
    pub fn has_mappings(&self, pid: u32) -> bool {
        self.mapped.contains(&pid)
    }

    /// Processes whose mappings this recording holds, and whose JIT perf
    /// map has not been looked for yet.
    pub fn jit_unread(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.mapped.difference(&self.jit_read).copied().collect();
        pids.sort_unstable();
        pids
    }

    /// Whether `pid`'s perf map is still to be looked for (true once: the
    /// caller looks now).
    pub fn take_jit(&mut self, pid: u32) -> bool {
        self.mapped.contains(&pid) && self.jit_read.insert(pid)
    }

    /// `path` may hold `pid`'s jitdump (a folder it worked in, or the file).
    pub fn note_jit_place(&mut self, pid: u32, path: PathBuf) {
        self.jit_places.entry(pid).or_default().insert(path);
    }

    /// `pid` ran as `uid` when scanned.
    pub fn note_jit_owner(&mut self, pid: u32, uid: u32) {
        self.jit_owners.insert(pid, uid);
    }

    /// The user `pid` ran as when last scanned.
    pub fn jit_owner(&self, pid: u32) -> Option<u32> {
        self.jit_owners.get(&pid).copied()
    }

    /// Where `pid`'s jitdump may be ([`Self::note_jit_place`]).
    pub fn jit_places(&self, pid: u32) -> Vec<PathBuf> {
        self.jit_places
            .get(&pid)
            .map(|p| p.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A function of a JIT's perf map.
    pub fn jit_symbol(&mut self, row: JitSymbolRow) -> Result<(), ReportError> {
        created(&mut self.jit, &self.dir, schema::JIT_SYMBOLS)?.push(row)
    }

    /// A CPU sample and its registers and stack (empty with `-b none`).
    pub fn sample(&mut self, row: SampleRow, stack: StackRawRow) -> Result<(), ReportError> {
        let (t, raw) = match &mut self.samples {
            Some(s) => s,
            None => self.samples.insert((
                Buffered::new(&self.dir, schema::CPU_SAMPLES)?,
                Buffered::new(&self.dir, schema::SAMPLE_STACKS_RAW)?,
            )),
        };
        t.push(row)?;
        raw.push(stack)
    }

    pub fn wakeup(&mut self, row: WakeupRow) -> Result<(), ReportError> {
        created(&mut self.wakeups, &self.dir, schema::SCHED_WAKEUPS)?.push(row)
    }

    pub fn probe(&mut self, row: ProbeRow) -> Result<(), ReportError> {
        created(&mut self.probes, &self.dir, schema::PROBES)?.push(row)
    }

    pub fn kernel_frame(&mut self, row: KernelFrameRow) -> Result<(), ReportError> {
        created(&mut self.kernel_stacks, &self.dir, schema::KERNEL_STACKS)?.push(row)
    }

    pub fn python_frame(&mut self, row: PythonFrameRow) -> Result<(), ReportError> {
        created(&mut self.python_frames, &self.dir, schema::PYTHON_FRAMES)?.push(row)
    }

    /// The Python frames of a thread as it left the CPU to wait.
    pub fn python_switch_frame(&mut self, row: PythonFrameRow) -> Result<(), ReportError> {
        created(
            &mut self.python_switch_frames,
            &self.dir,
            schema::PYTHON_SWITCH_FRAMES,
        )?
        .push(row)
    }

    /// A Python thread's name, when first seen (`--python-sampling`).
    pub fn python_thread_name(&mut self, row: PythonThreadNameRow) -> Result<(), ReportError> {
        created(
            &mut self.python_thread_names,
            &self.dir,
            schema::PYTHON_THREAD_NAMES,
        )?
        .push(row)
    }

    pub fn sched(&mut self, row: SchedRow) -> Result<(), ReportError> {
        created(&mut self.sched, &self.dir, schema::SCHED)?.push(row)
    }

    /// A sample of a traced process's memory.
    pub fn host_memory(&mut self, row: HostMemoryRow) -> Result<(), ReportError> {
        created(&mut self.host_memory, &self.dir, schema::HOST_MEMORY)?.push(row)
    }

    /// A sample of one of an RDMA port's hardware counters.
    pub fn rdma_hw_counter(&mut self, row: RdmaCounterRow) -> Result<(), ReportError> {
        created(
            &mut self.rdma_hw_counters,
            &self.dir,
            schema::RDMA_HW_COUNTERS,
        )?
        .push(row)
    }

    /// A sample of a network interface's counters.
    pub fn nic_metric(&mut self, row: NicMetricRow) -> Result<(), ReportError> {
        created(&mut self.nic_metrics, &self.dir, schema::NIC_METRICS)?.push(row)
    }

    /// A CUDA synchronization record.
    pub fn sync(&mut self, row: SyncRow) -> Result<(), ReportError> {
        created(&mut self.cuda_sync, &self.dir, schema::CUDA_SYNC)?.push(row)
    }

    /// A whole CUDA graph's execution.
    pub fn graph(&mut self, row: GraphRow) -> Result<(), ReportError> {
        created(&mut self.cuda_graphs, &self.dir, schema::CUDA_GRAPHS)?.push(row)
    }

    /// A sample of a PPU device's metrics.
    pub fn ppu_metric(&mut self, row: PpuMetricRow) -> Result<(), ReportError> {
        created(&mut self.ppu_metrics, &self.dir, schema::PPU_METRICS)?.push(row)
    }

    /// A last checkpoint, then every table's chunks joined into its file.
    pub fn finish(mut self, progress: Progress) -> Result<Recorded, ReportError> {
        self.checkpoint(progress)?;
        // The whole string table is written after the symbolize stage.
        self.string_chunks.remove_chunks()?;
        let mut tables = BTreeMap::new();
        for (t, _) in every_table!(&mut self, mut) {
            let rows = t.close()?;
            // Raw stacks stay in the folder for the symbolize stage only.
            if is_member(t.writer().name()) {
                tables.insert(t.writer().name().to_string(), rows);
            }
        }
        Ok(Recorded {
            members: tables.keys().map(|t| format!("{t}.parquet")).collect(),
            dir: self.dir,
            tables,
            strings: self.strings,
            kernels: self.kernels.into_iter().collect(),
            named_kernels: self.named_kernels,
        })
    }
}

impl Recorded {
    /// Writes the symbols table (from the symbolize stage) and the strings.
    pub fn add_symbols(&mut self, rows: Vec<SymbolRow>) -> Result<(), ReportError> {
        self.add::<schema::symbols::Table>(schema::SYMBOLS, rows)
    }

    /// Writes unwound, named stacks (from the symbolize stage) as `api_stacks`.
    pub fn add_api_stacks(&mut self, rows: Vec<StackFrameRow>) -> Result<(), ReportError> {
        self.add::<schema::api_stacks::Table>(schema::API_STACKS, rows)
    }

    /// Writes unwound, named stacks of CPU samples as `cpu_sample_stacks`.
    pub fn add_sample_stacks(&mut self, rows: Vec<StackFrameRow>) -> Result<(), ReportError> {
        self.add::<schema::cpu_sample_stacks::Table>(schema::CPU_SAMPLE_STACKS, rows)
    }

    /// Writes the `libraries` table.
    pub fn add_libraries(&mut self, rows: Vec<LibraryRow>) -> Result<(), ReportError> {
        self.add::<schema::libraries::Table>(schema::LIBRARIES, rows)
    }

    fn add<T: TableDef>(&mut self, table: &str, rows: Vec<T::Row>) -> Result<(), ReportError> {
        let mut t = Buffered::<T>::new(&self.dir, table)?;
        for r in rows {
            t.push(r)?;
        }
        self.tables.insert(table.into(), t.close()?);
        self.members.push(format!("{table}.parquet"));
        Ok(())
    }

    pub fn write_strings(&mut self) -> Result<(), ReportError> {
        let rows = self
            .strings
            .values()
            .iter()
            .enumerate()
            .map(|(id, v)| StringRow {
                id: id as u32,
                value: v.clone(),
            })
            .collect();
        self.add::<schema::strings::Table>(schema::STRINGS, rows)
    }
}

/// Whether an hggc or CUDA call failed, as `api-error` counts it: a
/// non-zero result, but not "not ready" (600 in both runtimes: a stream or
/// event query's answer while work runs), nor the calls that report an
/// earlier call's error (they did not fail).
fn failed(item: asys_report::trace_items::TraceItem, name: &str, result: i64) -> bool {
    use asys_report::trace_items::TraceItem;
    const NOT_READY: i64 = 600;
    matches!(item, TraceItem::Hggc | TraceItem::Cuda)
        && result != 0
        && result != NOT_READY
        && !name.ends_with("GetLastError")
        && !name.ends_with("PeekAtLastError")
}

#[cfg(test)]
mod trigger_tests {
    use super::failed;
    use asys_report::trace_items::TraceItem;

    #[test]
    fn api_error_is_a_failing_call_not_a_query_answer_nor_a_report_of_one() {
        assert!(failed(TraceItem::Hggc, "hggcSetDevice", 101));
        assert!(failed(TraceItem::Cuda, "cudaMalloc", 2));
        assert!(!failed(TraceItem::Hggc, "hggcStreamQuery", 600));
        assert!(!failed(TraceItem::Cuda, "cudaEventQuery", 600));
        assert!(!failed(TraceItem::Cuda, "cudaGetLastError", 700));
        assert!(!failed(TraceItem::Hggc, "hggcPeekAtLastError", 700));
        assert!(!failed(TraceItem::Hggc, "hggcMalloc", 0));
        assert!(!failed(TraceItem::Osrt, "read", -1));
    }
}
