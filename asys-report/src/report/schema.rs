//! Table names and the declaration of every table of schema version
//! [`SCHEMA_VERSION`]: each `table!` below is the one place a table's columns
//! are listed (names, order, types, encodings, and how a row fills them).
//! Times are CLOCK_MONOTONIC nanoseconds; names are ids into `strings`.
#[allow(unused_imports)]
use super::columns::TableDef;
use super::columns::table;
use super::rows::{
    ActivityRow, ApiRow, GraphRow, HostMemoryRow, JitSymbolRow, KernelFrameRow, LibraryRow,
    ModuleRow, NicMetricRow, PpuMetricRow, ProbeRow, ProcessInfoRow, ProcessRow, PythonFrameRow,
    PythonThreadNameRow, RdmaCounterRow, SampleRow, SchedRow, StackFrameRow, StackRawRow,
    StringRow, SymbolRow, SyncRow, WakeupRow,
};

/// Bumped whenever a table or column changes meaning. 3: zstd-compressed
/// members; `args` is null except for the calls whose reports read it.
pub const SCHEMA_VERSION: u32 = 3;

pub const HGGC_API: &str = "hggc_api";
pub const HGGC_ACTIVITY: &str = "hggc_activity";
pub const PROCESS_EVENTS: &str = "process_events";
pub const MODULES: &str = "modules";
/// Functions JIT compilers named in their perf maps (`/tmp/perf-PID.map`).
pub const JIT_SYMBOLS: &str = "jit_symbols";
/// One row per traced process: its control group and container.
pub const PROCESSES: &str = "processes";
pub const SYMBOLS: &str = "symbols";
pub const STRINGS: &str = "strings";
/// The probed libraries that `libraryId` points into.
pub const LIBRARIES: &str = "libraries";
/// Raw stack copies, only in the recording folder (unwound by the symbolize
/// stage into API_STACKS, not packed into the report).
pub const STACKS_RAW: &str = "stacks_raw";
pub const API_STACKS: &str = "api_stacks";
pub const SCHED: &str = "sched";
/// Wake-ups (`sched_waking`), recorded with the context switches.
pub const SCHED_WAKEUPS: &str = "sched_wakeups";
/// Kernel stacks of CPU samples taken in the kernel and of switch-outs.
pub const KERNEL_STACKS: &str = "kernel_stacks";
/// Python frames of CPU samples (`--python-sampling`).
pub const PYTHON_FRAMES: &str = "python_frames";
/// Python frames of threads as they left the CPU to wait (`--python-sampling`
/// with `--cpuctxsw`).
pub const PYTHON_SWITCH_FRAMES: &str = "python_switch_frames";
/// Python names (`threading.Thread.name`) of sampled threads
/// (`--python-sampling`).
pub const PYTHON_THREAD_NAMES: &str = "python_thread_names";
/// CPU samples (`-s`), one row per sample.
pub const CPU_SAMPLES: &str = "cpu_samples";
/// Their raw stacks (recording folder only; `callStart` is the sample's time).
pub const SAMPLE_STACKS_RAW: &str = "sample_stacks_raw";
/// Their unwound stacks, one row per frame.
pub const CPU_SAMPLE_STACKS: &str = "cpu_sample_stacks";
/// Samples of the traced processes' memory (`--host-memory-sampling`).
pub const HOST_MEMORY: &str = "host_memory";
/// Samples of the network interfaces' counters (`--nic-metrics`).
pub const NIC_METRICS: &str = "nic_metrics";
/// Samples of the PPU devices' metrics (`--ppu-metrics-device`).
pub const PPU_METRICS: &str = "ppu_metrics";
/// Samples of the RDMA ports' hardware counters (`--nic-metrics`).
pub const RDMA_HW_COUNTERS: &str = "rdma_hw_counters";
/// CUDA synchronizations (CUPTI's synchronization activity).
pub const CUDA_SYNC: &str = "cuda_sync";
/// Whole CUDA graph executions (`--cuda-graph-trace graph`).
pub const CUDA_GRAPHS: &str = "cuda_graphs";
/// Hits of user-defined probes (`--probe`).
pub const PROBES: &str = "probes";
/// Every `kind` a `probes` row may have.
pub const PROBE_KINDS: &[&str] = &[
    "uprobe",
    "uretprobe",
    "ucall",
    "usdt",
    "kprobe",
    "kretprobe",
    "kcall",
    "tracepoint",
];

/// Whether the API table of `item` keeps the raw argument registers (`args`):
/// the range reports of hgtx and nvtx read them (domain handles, range ids),
/// and the Kineto export reads the element counts and datatypes of pccl's
/// and NCCL's collectives and their communicators' sizes (calls that run for
/// microseconds at least, so few rows); every other call stores a null there.
pub fn keeps_args(item: crate::trace_items::TraceItem) -> bool {
    use crate::trace_items::TraceItem;
    matches!(
        item,
        TraceItem::Hgtx | TraceItem::Nvtx | TraceItem::Pccl | TraceItem::Nccl
    )
}

table! {
    /// One row per completed call of a traced API; every trace item has its
    /// own table of this shape (`hggc_api`, `osrt_api`, `pccl_api`, ...).
    pub mod api by START for ApiRow {
        START / start = "start": i64, Delta, |r| r.start;
        END / end = "end": i64, Delta, |r| r.end;
        PID / pid = "pid": u32, Delta, |r| r.pid;
        TID / tid = "tid": u32, Delta, |r| r.tid;
        CPU / cpu = "cpu": u32, Delta, |r| r.cpu;
        NAME_ID / name_id = "nameId": u32, Delta, |r| r.name_id;
        LIBRARY_ID / library_id = "libraryId": u32, Delta, |r| r.library_id;
        RETURN_VALUE / return_value = "returnValue": i64, Delta, |r| r.return_value;
        CORRELATION_ID / correlation_id = "correlationId": opt_u32, Delta, |r| r.correlation;
        BYTES / bytes = "bytes": opt_u64, Dict, |r| r.bytes;
        COPY_KIND / copy_kind = "copyKind": opt_i32, Dict, |r| r.copy_kind;
        STREAM / stream = "stream": opt_u64, Dict, |r| r.stream;
        DEVICE / device = "device": opt_i32, Dict, |r| r.device;
        PTR / ptr = "ptr": opt_u64, Dict, |r| r.ptr;
        KERNEL_ADDR / kernel_addr = "kernelAddr": opt_u64, Dict, |r| r.kernel_addr;
        GRID_X / grid_x = "gridX": opt_u32, Dict, |r| r.grid.map(|g| g[0]);
        GRID_Y / grid_y = "gridY": opt_u32, Dict, |r| r.grid.map(|g| g[1]);
        GRID_Z / grid_z = "gridZ": opt_u32, Dict, |r| r.grid.map(|g| g[2]);
        BLOCK_X / block_x = "blockX": opt_u32, Dict, |r| r.block.map(|b| b[0]);
        BLOCK_Y / block_y = "blockY": opt_u32, Dict, |r| r.block.map(|b| b[1]);
        BLOCK_Z / block_z = "blockZ": opt_u32, Dict, |r| r.block.map(|b| b[2]);
        SHARED_MEM / shared_mem = "sharedMem": opt_u64, Dict, |r| r.shared_mem;
        /// Raw argument registers, for the items of [`keeps_args`](super::keeps_args).
        ARGS / args = "args": opt_u64x8, Dict, |r| r.args.as_ref();
        TEXT_ID / text_id = "textId": opt_u32, Dict, |r| r.text_id;
        TEXT_HANDLE / text_handle = "textHandle": opt_u64, Dict, |r| r.text_handle;
    }
}

/// What a row of `hggc_activity` is: its `kind`, stored as [`Self::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ActivityKind {
    #[default]
    Kernel,
    Memcpy,
    Memset,
}

impl ActivityKind {
    /// The string the table stores.
    pub const fn as_str(self) -> &'static str {
        match self {
            ActivityKind::Kernel => "kernel",
            ActivityKind::Memcpy => "memcpy",
            ActivityKind::Memset => "memset",
        }
    }

    /// The kind a stored string names; None for any other string.
    pub fn from_stored(s: &str) -> Option<Self> {
        [Self::Kernel, Self::Memcpy, Self::Memset]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// What a row of `process_events` is: its `kind`, stored as [`Self::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessKind {
    Fork,
    Exec,
    Exit,
}

impl ProcessKind {
    /// The string the table stores.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProcessKind::Fork => "fork",
            ProcessKind::Exec => "exec",
            ProcessKind::Exit => "exit",
        }
    }

    /// The kind a stored string names; None for any other string.
    pub fn from_stored(s: &str) -> Option<Self> {
        [Self::Fork, Self::Exec, Self::Exit]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// What a row of `kernel_stacks` is a frame of: its `source`, stored as
/// [`Self::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelStackSource {
    /// A CPU sample taken in the kernel.
    Sample,
    /// A switch-out.
    Switch,
    /// A wake-up the thread issued.
    Waking,
}

impl KernelStackSource {
    /// The string the table stores.
    pub const fn as_str(self) -> &'static str {
        match self {
            KernelStackSource::Sample => "sample",
            KernelStackSource::Switch => "switch",
            KernelStackSource::Waking => "waking",
        }
    }

    /// The source a stored string names; None for any other string.
    pub fn from_stored(s: &str) -> Option<Self> {
        [Self::Sample, Self::Switch, Self::Waking]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// Each row's kind, as `parse` reads the `kind` column's string; None for a
/// null or an unknown string.
fn kinds<K>(
    strs: Result<&arrow::array::StringArray, super::ReportError>,
    parse: impl Fn(&str) -> Option<K>,
) -> Result<Vec<Option<K>>, super::ReportError> {
    use arrow::array::Array;
    let a = strs?;
    Ok((0..a.len())
        .map(|i| {
            if a.is_valid(i) {
                parse(a.value(i))
            } else {
                None
            }
        })
        .collect())
}

impl activity::View<'_> {
    /// The `kind` column as [`ActivityKind`]s (None: a string no kind
    /// names).
    pub fn kinds(&self) -> Result<Vec<Option<ActivityKind>>, super::ReportError> {
        kinds(self.kind(), ActivityKind::from_stored)
    }
}

impl<'a> api::View<'a> {
    /// The `args` column's lists (for their nulls and offsets) and their
    /// registers, eight per row, as one flat array.
    pub fn args_registers(
        &self,
    ) -> Result<
        (
            &'a arrow::array::FixedSizeListArray,
            &'a arrow::array::UInt64Array,
        ),
        super::ReportError,
    > {
        self.0
            .fixed_list_items::<arrow::datatypes::UInt64Type>(api::ARGS, 8)
    }

    /// The `args` column as one row's eight registers at a time.
    pub fn registers(&self) -> Result<Registers<'a>, super::ReportError> {
        let (lists, items) = self.args_registers()?;
        Ok(Registers { lists, items })
    }
}

/// The `args` column of one batch of an API table ([`api::View::registers`]).
pub struct Registers<'a> {
    lists: &'a arrow::array::FixedSizeListArray,
    items: &'a arrow::array::UInt64Array,
}

impl Registers<'_> {
    /// Row `i`'s registers; None for a call recorded without them (a null,
    /// or a list that does not hold eight).
    pub fn get(&self, i: usize) -> Option<[u64; 8]> {
        use arrow::array::Array as _;
        if !self.lists.is_valid(i) {
            return None;
        }
        let at = usize::try_from(self.lists.value_offset(i)).ok()?;
        let regs = self.items.values().get(at..at.checked_add(8)?)?;
        regs.try_into().ok()
    }
}

impl kernel_stacks::View<'_> {
    /// The `source` column as [`KernelStackSource`]s (None: a null, or a
    /// string no source names).
    pub fn sources(&self) -> Result<Vec<Option<KernelStackSource>>, super::ReportError> {
        kinds(self.source(), KernelStackSource::from_stored)
    }
}

impl process_events::View<'_> {
    /// The `kind` column as [`ProcessKind`]s (None: a null, or a string no
    /// kind names).
    pub fn kinds(&self) -> Result<Vec<Option<ProcessKind>>, super::ReportError> {
        kinds(self.kind(), ProcessKind::from_stored)
    }
}

table! {
    /// Device activity: kernels, copies and memsets as the device ran them, on
    /// CLOCK_MONOTONIC; `kind` is an [`ActivityKind`].
    pub mod activity in HGGC_ACTIVITY by START for ActivityRow {
        START / start = "start": i64, Delta, |r| r.start;
        END / end = "end": i64, Delta, |r| r.end;
        KIND / kind = "kind": str, Dict, |r| r.kind.as_str();
        PID / pid = "pid": u32, Dict, |r| r.pid;
        DEVICE / device = "device": u32, Dict, |r| r.device;
        STREAM / stream = "stream": u32, Dict, |r| r.stream;
        CORRELATION_ID / correlation_id = "correlationId": u32, Delta, |r| r.correlation;
        BYTES / bytes = "bytes": opt_u64, Dict, |r| r.bytes;
        COPY_KIND / copy_kind = "copyKind": opt_i32, Dict, |r| r.copy_kind;
        KERNEL_ADDR / kernel_addr = "kernelAddr": opt_u64, Dict, |r| r.kernel_addr;
        GRID_X / grid_x = "gridX": opt_u32, Dict, |r| r.grid.map(|g| g[0]);
        GRID_Y / grid_y = "gridY": opt_u32, Dict, |r| r.grid.map(|g| g[1]);
        GRID_Z / grid_z = "gridZ": opt_u32, Dict, |r| r.grid.map(|g| g[2]);
        BLOCK_X / block_x = "blockX": opt_u32, Dict, |r| r.block.map(|b| b[0]);
        BLOCK_Y / block_y = "blockY": opt_u32, Dict, |r| r.block.map(|b| b[1]);
        BLOCK_Z / block_z = "blockZ": opt_u32, Dict, |r| r.block.map(|b| b[2]);
        SHARED_MEM / shared_mem = "sharedMem": opt_u32, Dict, |r| r.shared_mem;
        CLOCK_OFFSET / clock_offset = "clockOffset": i64, Dict, |r| r.clock_offset;
        SRC_KIND / src_kind = "srcKind": opt_i32, Dict, |r| r.src_kind;
        DST_KIND / dst_kind = "dstKind": opt_i32, Dict, |r| r.dst_kind;
        // CUPTI's kernel record (and a copy's or memset's context), with
        // nsys's names; null for HGPTI's records. Absent in reports written
        // before they were recorded: readers check for them
        // (`TableReader::has_column`) and read nulls. New columns, no new
        // meaning for the old ones: SCHEMA_VERSION stays.
        /// Registers per thread.
        REGISTERS_PER_THREAD / registers_per_thread = "registersPerThread": opt_u32, Dict, |r| r.kernel.map(|k| k.registers_per_thread);
        /// Static and dynamic shared memory per block (bytes); `sharedMem`
        /// is their sum for CUPTI's kernels.
        STATIC_SHARED_MEMORY / static_shared_memory = "staticSharedMemory": opt_u32, Dict, |r| r.kernel.map(|k| k.static_shared);
        DYNAMIC_SHARED_MEMORY / dynamic_shared_memory = "dynamicSharedMemory": opt_u32, Dict, |r| r.kernel.map(|k| k.dynamic_shared);
        /// Local memory per thread, and for the whole kernel (bytes).
        LOCAL_MEMORY_PER_THREAD / local_memory_per_thread = "localMemoryPerThread": opt_u32, Dict, |r| r.kernel.map(|k| k.local_per_thread);
        LOCAL_MEMORY_TOTAL / local_memory_total = "localMemoryTotal": opt_u32, Dict, |r| r.kernel.map(|k| k.local_total);
        CONTEXT_ID / context_id = "contextId": opt_u32, Dict, |r| r.context;
        /// Null where CUPTI's record has no green context field (CUDA 12).
        GREEN_CONTEXT_ID / green_context_id = "greenContextId": opt_u32, Dict, |r| r.kernel.and_then(|k| k.green_context);
        /// The graph and node a kernel ran as (`--cuda-graph-trace node`);
        /// 0 for a kernel launched on its own.
        GRAPH_ID / graph_id = "graphId": opt_u32, Dict, |r| r.kernel.map(|k| k.graph_id);
        GRAPH_NODE_ID / graph_node_id = "graphNodeId": opt_u64, Dict, |r| r.kernel.map(|k| k.graph_node_id);
    }
}

table! {
    /// CUDA synchronizations (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION): from
    /// `start` to `end` thread(s) of `pid` waited, as `syncType` says
    /// (1 event synchronize, 2 stream wait event, 3 stream synchronize,
    /// 4 context synchronize), for event `eventId` or stream `stream`
    /// (4294967295: none) of context `contextId`; `correlationId` is the
    /// API call's that waited.
    pub mod cuda_sync in CUDA_SYNC for SyncRow {
        START / start = "start": i64, Delta, |r| r.start;
        END / end = "end": i64, Delta, |r| r.end;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        SYNC_TYPE / sync_type = "syncType": u32, Dict, |r| r.sync_type;
        CONTEXT_ID / context_id = "contextId": u32, Dict, |r| r.context;
        STREAM / stream = "stream": u32, Dict, |r| r.stream;
        EVENT_ID / event_id = "eventId": u32, Dict, |r| r.event;
        CORRELATION_ID / correlation_id = "correlationId": u32, Delta, |r| r.correlation;
    }
}

table! {
    /// Whole CUDA graph executions (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, under
    /// `--cuda-graph-trace graph`): graph `graphId`, launched by the call of
    /// `correlationId` on `stream`, ran from `start` to `end`.
    pub mod cuda_graphs in CUDA_GRAPHS for GraphRow {
        START / start = "start": i64, Delta, |r| r.start;
        END / end = "end": i64, Delta, |r| r.end;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        DEVICE / device = "device": u32, Dict, |r| r.device;
        CONTEXT_ID / context_id = "contextId": u32, Dict, |r| r.context;
        STREAM / stream = "stream": u32, Dict, |r| r.stream;
        GRAPH_ID / graph_id = "graphId": u32, Dict, |r| r.graph_id;
        CORRELATION_ID / correlation_id = "correlationId": u32, Delta, |r| r.correlation;
    }
}

table! {
    /// Fork, exec and exit of traced processes; `kind` is a [`ProcessKind`].
    pub mod process_events in PROCESS_EVENTS for ProcessRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        KIND / kind = "kind": str, Dict, |r| r.kind.as_str();
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        CHILD_PID / child_pid = "childPid": u32, Dict, |r| r.child_pid;
        COMM_ID / comm_id = "commId": u32, Dict, |r| r.comm_id;
    }
}

table! {
    /// Context switches (`--cpuctxsw`): on `cpu` at `ts`, thread `prevTid` of
    /// process `prevPid` left in `prevState` (0 runnable, 1 S, 2 D, ...; the
    /// idle task is 0) and thread `nextTid` came in.
    pub mod sched in SCHED by TS for SchedRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        CPU / cpu = "cpu": u32, Dict, |r| r.cpu;
        PREV_PID / prev_pid = "prevPid": u32, Dict, |r| r.prev_pid;
        PREV_TID / prev_tid = "prevTid": u32, Dict, |r| r.prev_tid;
        PREV_STATE / prev_state = "prevState": i64, Dict, |r| r.prev_state;
        PREV_COMM_ID / prev_comm_id = "prevCommId": u32, Dict, |r| r.prev_comm;
        NEXT_TID / next_tid = "nextTid": u32, Dict, |r| r.next_tid;
        NEXT_COMM_ID / next_comm_id = "nextCommId": u32, Dict, |r| r.next_comm;
    }
}

table! {
    /// Hits of user-defined probes (`--probe`, docs/probes.md): one row per
    /// hit, a call probe's entry and return as one row (`start` its entry,
    /// `end` its return; the other kinds have `start` = `end`). `nameId` is
    /// the spec as given; `args` the arguments it asked for, as text.
    pub mod probes in PROBES for ProbeRow {
        START / start = "start": i64, Delta, |r| r.start;
        END / end = "end": i64, Delta, |r| r.end;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        CPU / cpu = "cpu": u32, Dict, |r| r.cpu;
        PROBE_ID / probe_id = "probeId": u32, Dict, |r| r.probe_id;
        NAME_ID / name_id = "nameId": u32, Dict, |r| r.name_id;
        KIND / kind = "kind": str, Dict, |r| r.kind;
        HAS_RETURN / has_return = "hasReturn": bool, Plain, |r| r.has_return;
        RETURN_VALUE / return_value = "returnValue": i64, Delta, |r| r.return_value;
        ARGS / args = "args": str, Plain, |r| r.args.as_str();
    }
}

table! {
    /// Wake-ups (`sched_waking`, with `--cpuctxsw`): at `ts`, thread
    /// `wakerTid` of `wakerPid`, running on `cpu`, woke thread `wakeeTid`
    /// onto `targetCpu`.
    pub mod sched_wakeups in SCHED_WAKEUPS by TS for WakeupRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        CPU / cpu = "cpu": u32, Dict, |r| r.cpu;
        WAKER_PID / waker_pid = "wakerPid": u32, Dict, |r| r.waker_pid;
        WAKER_TID / waker_tid = "wakerTid": u32, Dict, |r| r.waker_tid;
        WAKER_COMM_ID / waker_comm_id = "wakerCommId": u32, Dict, |r| r.waker_comm;
        WAKEE_TID / wakee_tid = "wakeeTid": u32, Dict, |r| r.wakee_tid;
        TARGET_CPU / target_cpu = "targetCpu": u32, Dict, |r| r.target_cpu;
    }
}

table! {
    /// Kernel stacks, one row per frame, innermost (depth 0) first: of the
    /// CPU sample (`source` sample), the switch-out (`source` switch) or the
    /// wake-up it issued (`source` waking; a [`KernelStackSource`]) of
    /// thread `tid` at `ts`; `nameId` is `function+0xoff` from
    /// /proc/kallsyms (`[module]` appended), or the hex address.
    pub mod kernel_stacks in KERNEL_STACKS by TS for KernelFrameRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        SOURCE / source = "source": str, Dict, |r| r.source.as_str();
        DEPTH / depth = "depth": u32, Dict, |r| r.depth;
        ADDR / addr = "addr": u64, Dict, |r| r.addr;
        NAME_ID / name_id = "nameId": u32, Dict, |r| r.name_id;
    }
}

table! {
    /// Python frames (CPython's `_PyInterpreterFrame`s) of the CPU sample
    /// of thread `tid` of process `pid` at `ts`, one row per frame,
    /// innermost (depth 0) first (`--python-sampling`): the code object at
    /// `code` names `functionId` (its qualified name) in `fileId`, running
    /// `line` (null where the code object or its line could not be read, or
    /// the code object was freed and its memory reused before it was read);
    /// `isEntry` marks the first frame one C-level call of the evaluator
    /// ran (the frames up to it ran in the innermost `_PyEval_EvalFrameDefault`
    /// native frame not yet matched, and so on outwards).
    pub mod python_frames in PYTHON_FRAMES by TS for PythonFrameRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        DEPTH / depth = "depth": u32, Dict, |r| r.depth;
        CODE / code = "code": u64, Dict, |r| r.code;
        FUNCTION_ID / function_id = "functionId": opt_u32, Dict, |r| r.function_id;
        FILE_ID / file_id = "fileId": opt_u32, Dict, |r| r.file_id;
        LINE / line = "line": opt_u32, Dict, |r| r.line;
        IS_ENTRY / is_entry = "isEntry": bool, Plain, |r| r.is_entry;
    }
}

table! {
    /// Python frames of thread `tid` of process `pid` as it left the CPU to
    /// wait (a `sched` switch-out at `ts` in state S or D; with
    /// `--python-sampling`, `--cpuctxsw` and `-s`), one row per frame,
    /// innermost (depth 0) first; the columns mean what `python_frames`'s
    /// do. Each thread's at most one per `--python-sampling-frequency`
    /// interval: a wait sooner after the last one has no rows.
    pub mod python_switch_frames in PYTHON_SWITCH_FRAMES by TS for PythonFrameRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        DEPTH / depth = "depth": u32, Dict, |r| r.depth;
        CODE / code = "code": u64, Dict, |r| r.code;
        FUNCTION_ID / function_id = "functionId": opt_u32, Dict, |r| r.function_id;
        FILE_ID / file_id = "fileId": opt_u32, Dict, |r| r.file_id;
        LINE / line = "line": opt_u32, Dict, |r| r.line;
        IS_ENTRY / is_entry = "isEntry": bool, Plain, |r| r.is_entry;
    }
}

table! {
    /// The Python name of thread `tid` of process `pid`
    /// (`threading.Thread.name`, read from the process's `threading`
    /// module), first seen at `ts` (`--python-sampling`): a row when a
    /// thread is first seen with a name, and another when it is seen with
    /// a new one (`t.name = ...`). Not placed in time by a window: a name
    /// seen before it still names the thread's samples in it.
    pub mod python_thread_names in PYTHON_THREAD_NAMES for PythonThreadNameRow {
        TS / ts = "ts": i64, Plain, |r| r.ts;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Plain, |r| r.tid;
        NAME_ID / name_id = "nameId": u32, Plain, |r| r.name_id;
    }
}

table! {
    /// Executable file mappings of traced processes, as seen at `ts`.
    pub mod modules in MODULES for ModuleRow {
        TS / ts = "ts": i64, Dict, |r| r.ts;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        START / start = "start": u64, Plain, |r| r.start;
        END / end = "end": u64, Plain, |r| r.end;
        FILE_OFFSET / file_offset = "fileOffset": u64, Dict, |r| r.file_offset;
        PATH_ID / path_id = "pathId": u32, Dict, |r| r.path_id;
        BUILD_ID / build_id = "buildId": opt_str, Dict, |r| r.build_id.as_deref();
    }
}

table! {
    /// The functions a process's JIT compiler listed in its perf map, read
    /// when the process exited or the recording ended: they name frames in
    /// anonymous executable memory. `sourceId` names the file read.
    pub mod jit_symbols in JIT_SYMBOLS for JitSymbolRow {
        PID / pid = "pid": u32, Dict, |r| r.pid;
        START / start = "start": u64, Plain, |r| r.start;
        SIZE / size = "size": u64, Plain, |r| r.size;
        NAME_ID / name_id = "nameId": u32, Plain, |r| r.name_id;
        SOURCE_ID / source_id = "sourceId": u32, Dict, |r| r.source_id;
    }
}

table! {
    /// Each traced process's control group and container, as read from
    /// /proc/PID/cgroup at `ts` (its first scan in this report), and its
    /// rank, from /proc/PID/environ at the same time.
    pub mod processes in PROCESSES for ProcessInfoRow {
        TS / ts = "ts": i64, Dict, |r| r.ts;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        CGROUP_PATH_ID / cgroup_path_id = "cgroupPathId": u32, Dict, |r| r.cgroup_path_id;
        CGROUP_V2 / cgroup_v2 = "cgroupV2": bool, Dict, |r| r.cgroup_v2;
        CGROUP_ID / cgroup_id = "cgroupId": opt_u64, Dict, |r| r.cgroup_id;
        CONTAINER_ID / container_id = "containerId": opt_str, Dict, |r| r.container_id.as_deref();
        CONTAINER_RUNTIME / container_runtime = "containerRuntime": opt_str, Dict, |r| r.container_runtime;
        /// Absent in reports written before ranks were recorded: readers
        /// check for it (`TableReader::has_column`) and read none.
        RANK / rank = "rank": opt_u32, Dict, |r| r.rank;
        /// Where its standard output and error went (absent in older
        /// reports, like `rank`).
        STDOUT / stdout = "stdout": opt_str, Dict, |r| r.stdout.as_deref();
        STDERR / stderr = "stderr": opt_str, Dict, |r| r.stderr.as_deref();
    }
}

table! {
    /// The libraries asys probed, one row each: `id` is what the API
    /// tables' `libraryId` holds. Calls recorded through the injection
    /// library's sites (`--api-probes site`) come from no probed library
    /// and carry `libraryId` 4294967295, which no row has.
    pub mod libraries in LIBRARIES for LibraryRow {
        ID / id = "id": u32, Plain, |r| r.id;
        PATH / path = "path": str, Plain, |r| r.path.as_str();
        BUILD_ID / build_id = "buildId": opt_str, Plain, |r| r.build_id.as_deref();
        ITEMS / items = "items": str, Dict, |r| r.items.as_str();
        FUNCTIONS / functions = "functions": u32, Plain, |r| r.functions;
    }
}

table! {
    /// Code addresses resolved to names by the symbolize stage.
    pub mod symbols in SYMBOLS for SymbolRow {
        PID / pid = "pid": u32, Dict, |r| r.pid;
        ADDR / addr = "addr": u64, Dict, |r| r.addr;
        NAME_ID / name_id = "nameId": u32, Dict, |r| r.name_id;
    }
}

table! {
    /// The string table, as nsys's StringIds.
    pub mod strings in STRINGS for StringRow {
        ID / id = "id": u32, Delta, |r| r.id;
        VALUE / value = "value": str, Plain, |r| r.value.as_str();
    }
}

table! {
    /// Raw stacks as the kernel copied them (recording folder only): the
    /// shape of both `stacks_raw` (API calls) and `sample_stacks_raw` (CPU
    /// samples, `callStart` the sample's time), so the scans take the name.
    pub mod stacks_raw by CALL_START for StackRawRow {
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        CALL_START / call_start = "callStart": i64, Plain, |r| r.call_start;
        IP / ip = "ip": u64, Plain, |r| r.ip;
        SP / sp = "sp": u64, Plain, |r| r.sp;
        BP / bp = "bp": u64, Plain, |r| r.bp;
        STACK / stack = "stack": bin, Plain, |r| r.stack.as_slice();
    }
}

table! {
    /// CPU samples: the thread on a CPU when its sampling timer fired;
    /// `kernelMode`: it was in the kernel (its stack is where it entered it).
    pub mod cpu_samples in CPU_SAMPLES by TS for SampleRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        CPU / cpu = "cpu": u32, Dict, |r| r.cpu;
        KERNEL_MODE / kernel_mode = "kernelMode": bool, Dict, |r| r.kernel_mode;
    }
}

table! {
    /// Call stacks of API calls, one row per frame, innermost (depth 0) first:
    /// the call is the one of that thread that started at `callStart` (or
    /// the `probes` hit of that thread and start: `--probe-backtrace`).
    pub mod api_stacks in API_STACKS for StackFrameRow {
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        CALL_START / call_start = "callStart": i64, Dict, |r| r.call_start;
        DEPTH / depth = "depth": u32, Dict, |r| r.depth;
        PC / pc = "pc": u64, Dict, |r| r.pc;
        FUNCTION_ID / function_id = "functionId": u32, Dict, |r| r.function_id;
        FILE_ID / file_id = "fileId": opt_u32, Dict, |r| r.file_id;
        LINE / line = "line": opt_u32, Dict, |r| r.line;
        MODULE_ID / module_id = "moduleId": u32, Dict, |r| r.module_id;
        INLINED / inlined = "inlined": bool, Dict, |r| r.inlined;
    }
}

table! {
    /// Call stacks of CPU samples, one row per frame, innermost (depth 0: the
    /// sampled instruction) first; the sample is that thread's at `ts`.
    /// The columns of `api_stacks`, with `ts` for `callStart`.
    pub mod cpu_sample_stacks in CPU_SAMPLE_STACKS for StackFrameRow {
        PID / pid = "pid": u32, Dict, |r| r.pid;
        TID / tid = "tid": u32, Dict, |r| r.tid;
        TS / ts = "ts": i64, Dict, |r| r.call_start;
        DEPTH / depth = "depth": u32, Dict, |r| r.depth;
        PC / pc = "pc": u64, Dict, |r| r.pc;
        FUNCTION_ID / function_id = "functionId": u32, Dict, |r| r.function_id;
        FILE_ID / file_id = "fileId": opt_u32, Dict, |r| r.file_id;
        LINE / line = "line": opt_u32, Dict, |r| r.line;
        MODULE_ID / module_id = "moduleId": u32, Dict, |r| r.module_id;
        INLINED / inlined = "inlined": bool, Dict, |r| r.inlined;
    }
}

table! {
    /// The memory of a traced process at `ts` (`--host-memory-sampling`),
    /// in bytes, as /proc/PID/status gives it: `rss` (VmRSS) is `anon`
    /// (RssAnon) + `file` (RssFile) + `shmem` (RssShmem).
    pub mod host_memory in HOST_MEMORY by TS for HostMemoryRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        RSS / rss = "rss": u64, Delta, |r| r.rss;
        ANON / anon = "anon": u64, Delta, |r| r.anon;
        FILE / file = "file": u64, Delta, |r| r.file;
        SHMEM / shmem = "shmem": u64, Delta, |r| r.shmem;
        VM_SIZE / vm_size = "vmSize": u64, Delta, |r| r.vm_size;
    }
}

table! {
    /// The counters of a network interface at `ts` (`--nic-metrics`): the
    /// kernel's totals since the interface came up (a rate is the
    /// difference of two rows of the same device over their time apart).
    pub mod nic_metrics in NIC_METRICS by TS for NicMetricRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        DEVICE_ID / device_id = "deviceId": u32, Dict, |r| r.device_id;
        RX_BYTES / rx_bytes = "rxBytes": u64, Delta, |r| r.rx_bytes;
        RX_PACKETS / rx_packets = "rxPackets": u64, Delta, |r| r.rx_packets;
        TX_BYTES / tx_bytes = "txBytes": u64, Delta, |r| r.tx_bytes;
        TX_PACKETS / tx_packets = "txPackets": u64, Delta, |r| r.tx_packets;
        RX_DROPPED / rx_dropped = "rxDropped": u64, Delta, |r| r.rx_dropped;
        TX_DROPPED / tx_dropped = "txDropped": u64, Delta, |r| r.tx_dropped;
    }
}

table! {
    /// A PPU device's metrics over the `intervalNs` before `ts`
    /// (`--ppu-metrics-device`), as process `pid`'s runtime published them:
    /// `busyNs` of the interval had an operation running (utilisation is
    /// their ratio), and at `ts` the SM clock, the power draw, the
    /// device memory in use and in all, and the memory clock (null where
    /// the device reports none, as the simulated ones).
    pub mod ppu_metrics in PPU_METRICS by TS for PpuMetricRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        PID / pid = "pid": u32, Dict, |r| r.pid;
        DEVICE / device = "device": u32, Dict, |r| r.device;
        INTERVAL_NS / interval_ns = "intervalNs": u64, Delta, |r| r.interval_ns;
        BUSY_NS / busy_ns = "busyNs": u64, Delta, |r| r.busy_ns;
        SM_CLOCK_MHZ / sm_clock_mhz = "smClockMhz": u32, Dict, |r| r.sm_clock_mhz;
        POWER_MW / power_mw = "powerMw": u64, Dict, |r| r.power_mw;
        MEMORY_USED / memory_used = "memoryUsed": u64, Delta, |r| r.memory_used;
        MEMORY_TOTAL / memory_total = "memoryTotal": u64, Dict, |r| r.memory_total;
        /// Absent in reports written before NVML was read: readers check
        /// for it (`TableReader::has_column`).
        MEM_CLOCK_MHZ / mem_clock_mhz = "memClockMhz": opt_u32, Dict, |r| r.mem_clock_mhz;
    }
}

table! {
    /// The hardware counters of an RDMA port at `ts` (`--nic-metrics`):
    /// each file of /sys/class/infiniband/DEV/ports/PORT/hw_counters, the
    /// driver's total since it loaded; which counters there are depends on
    /// the driver. `deviceId` names the port `DEV/PORT`.
    pub mod rdma_hw_counters in RDMA_HW_COUNTERS by TS for RdmaCounterRow {
        TS / ts = "ts": i64, Delta, |r| r.ts;
        DEVICE_ID / device_id = "deviceId": u32, Dict, |r| r.device_id;
        COUNTER_ID / counter_id = "counterId": u32, Dict, |r| r.counter_id;
        VALUE / value = "value": u64, Delta, |r| r.value;
    }
}

/// A packed table's declared columns, by its name (None for a name no
/// declaration has): how an export that writes tables to Parquet files of
/// its own encodes each column as the report does.
pub fn columns_of(table: &str) -> Option<&'static [super::columns::ColumnDef]> {
    macro_rules! by_name {
        ($($m:ident),* $(,)?) => {
            $(if table == $m::NAME {
                return Some(<$m::Table as TableDef>::COLUMNS);
            })*
        };
    }
    by_name!(
        activity,
        cuda_sync,
        cuda_graphs,
        process_events,
        sched,
        probes,
        sched_wakeups,
        kernel_stacks,
        python_frames,
        python_switch_frames,
        python_thread_names,
        modules,
        jit_symbols,
        processes,
        libraries,
        symbols,
        strings,
        cpu_samples,
        api_stacks,
        cpu_sample_stacks,
        host_memory,
        nic_metrics,
        ppu_metrics,
        rdma_hw_counters,
    );
    crate::trace_items::TraceItem::SUPPORTED
        .iter()
        .any(|(_, item)| item.table() == table)
        .then_some(<api::Table as TableDef>::COLUMNS)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::{report::ALL_TABLES, trace_items::TraceItem};

    /// `ALL_TABLES` (report/tables.rs) names, once each, every table whose
    /// name is declared above (read from this file, so that a new one is
    /// not missed) and every trace item's API table; not the recording
    /// folder's raw stacks, which are never packed.
    #[test]
    fn all_tables_names_every_table_once() {
        let mut declared: BTreeSet<String> = include_str!("schema.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("pub const ")?.split_once(": &str = \""))
            .filter_map(|(_, v)| v.strip_suffix("\";"))
            .map(String::from)
            .collect();
        assert!(declared.contains(STRINGS) && declared.contains(RDMA_HW_COUNTERS));
        assert!(declared.remove(STACKS_RAW) && declared.remove(SAMPLE_STACKS_RAW));
        declared.extend(TraceItem::SUPPORTED.iter().map(|(_, i)| i.table()));
        let listed: BTreeSet<String> = ALL_TABLES.iter().map(|t| t.to_string()).collect();
        assert_eq!(listed.len(), ALL_TABLES.len(), "a table listed twice");
        assert_eq!(listed, declared);
        // And each has its declared columns by name.
        for t in ALL_TABLES {
            assert!(columns_of(t).is_some_and(|c| !c.is_empty()), "{t}");
        }
        let same = |a: &[super::super::columns::ColumnDef],
                    b: &[super::super::columns::ColumnDef]| {
            a.iter().map(|c| c.name).eq(b.iter().map(|c| c.name))
        };
        assert!(same(
            columns_of(HGGC_ACTIVITY).unwrap(),
            activity::Table::COLUMNS
        ));
        assert!(same(columns_of("osrt_api").unwrap(), api::Table::COLUMNS));
        assert!(columns_of("no_such_table").is_none());
    }

    /// A table's view reads each column as its declaration types it, and
    /// its typed scan finds the table by its declared name.
    #[test]
    fn a_view_reads_the_declared_types() {
        use arrow::array::Array;

        use crate::report::{rows::ActivityRow, table_writer::TableWriter};
        let dir = std::env::temp_dir().join(format!("asys-view-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let rows = [
            ActivityRow {
                start: 5,
                end: 9,
                kind: ActivityKind::Kernel,
                pid: 7,
                kernel_addr: Some(0xabc),
                ..Default::default()
            },
            ActivityRow {
                start: 10,
                end: 12,
                kind: ActivityKind::Memcpy,
                pid: 8,
                bytes: Some(64),
                ..Default::default()
            },
        ];
        let mut w = TableWriter::create(
            &dir,
            activity::NAME,
            activity::Table::schema(),
            activity::Table::COLUMNS,
        )
        .expect("create");
        let batch = arrow::array::RecordBatch::try_new(
            activity::Table::schema(),
            activity::Table::to_columns(&rows),
        )
        .expect("batch");
        w.write(&batch).expect("write");
        w.close().expect("close");
        let cols = [
            activity::START,
            activity::KIND,
            activity::PID,
            activity::BYTES,
        ];
        let mut n = 0;
        for b in activity::scan_file(&dir, &cols).expect("scan") {
            let b = b.expect("batch");
            let v = activity::View(&b);
            assert_eq!(v.start().expect("start"), &[5, 10]);
            assert_eq!(v.pid().expect("pid"), &[7, 8]);
            assert_eq!(v.kind().expect("kind").value(1), "memcpy");
            let bytes = v.bytes().expect("bytes");
            assert!(bytes.is_null(0) && bytes.value(1) == 64);
            // Not scanned: missing, not a panic.
            assert!(v.end().is_err());
            n += v.num_rows();
        }
        assert_eq!(n, 2);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    /// Each kind reads back from the string it is stored as, and nothing
    /// else reads as a kind.
    #[test]
    fn kinds_read_back_from_their_strings() {
        for k in [
            ActivityKind::Kernel,
            ActivityKind::Memcpy,
            ActivityKind::Memset,
        ] {
            assert_eq!(ActivityKind::from_stored(k.as_str()), Some(k));
        }
        for k in [ProcessKind::Fork, ProcessKind::Exec, ProcessKind::Exit] {
            assert_eq!(ProcessKind::from_stored(k.as_str()), Some(k));
        }
        for k in [
            KernelStackSource::Sample,
            KernelStackSource::Switch,
            KernelStackSource::Waking,
        ] {
            assert_eq!(KernelStackSource::from_stored(k.as_str()), Some(k));
        }
        assert_eq!(KernelStackSource::from_stored("Sample"), None);
        assert_eq!(ActivityKind::from_stored("Kernel"), None);
        assert_eq!(ProcessKind::from_stored(""), None);
    }
}
