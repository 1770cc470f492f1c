//! The rows of each table, as the stages fill them: the collect stage makes
//! API, activity, process, scheduling, module and sample rows, the symbolize
//! stage stack-frame and symbol rows. `schema.rs` declares how each becomes
//! columns.

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
    /// The raw argument registers (rdi, rsi, rdx, rcx, r8, r9, two stack
    /// slots), kept only for the trace items whose reports read them
    /// ([`schema::keeps_args`]); None (stored as null) for every other call.
    pub args: Option<[u64; 8]>,
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
    pub kind: super::schema::ActivityKind,
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
    /// Memory kinds of a copy's source and destination (a memset's
    /// destination): CUPTI's numbers, 1 pageable, 2 pinned, 3 device.
    pub src_kind: Option<i32>,
    pub dst_kind: Option<i32>,
    /// CUPTI's context id (kernels, copies, memsets); None for HGPTI's.
    pub context: Option<u32>,
    /// The rest of CUPTI's kernel record; None for other rows and HGPTI's.
    pub kernel: Option<KernelDetails>,
}

/// What CUPTI's kernel record adds to a kernel row (nsys's columns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelDetails {
    pub registers_per_thread: u32,
    pub static_shared: u32,
    pub dynamic_shared: u32,
    pub local_per_thread: u32,
    pub local_total: u32,
    pub green_context: Option<u32>,
    pub graph_id: u32,
    pub graph_node_id: u64,
}

/// A CUDA synchronization (`cuda_sync`).
#[derive(Debug, Clone, Default)]
pub struct SyncRow {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub sync_type: u32,
    pub context: u32,
    pub stream: u32,
    pub event: u32,
    pub correlation: u32,
}

/// A whole CUDA graph execution (`cuda_graphs`).
#[derive(Debug, Clone, Default)]
pub struct GraphRow {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub graph_id: u32,
    pub correlation: u32,
}

#[derive(Debug, Clone)]
pub struct ProcessRow {
    pub ts: i64,
    pub kind: super::schema::ProcessKind,
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

/// A hit of a user-defined probe (`--probe`); a call pair is one row.
#[derive(Debug, Clone)]
pub struct ProbeRow {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// The probe's site id (one spec may have several sites: SDT notes).
    pub probe_id: u32,
    /// The spec as given, a `strings` id.
    pub name_id: u32,
    /// uprobe, uretprobe, ucall, usdt, kprobe, kretprobe, kcall, tracepoint.
    pub kind: &'static str,
    pub has_return: bool,
    pub return_value: i64,
    /// The arguments asked for, as text (`1, -2, "name", 0x7f00`).
    pub args: String,
}

/// A wake-up (`sched_waking`).
#[derive(Debug, Clone)]
pub struct WakeupRow {
    pub ts: i64,
    pub cpu: u32,
    pub waker_pid: u32,
    pub waker_tid: u32,
    pub waker_comm: u32,
    pub wakee_tid: u32,
    pub target_cpu: u32,
}

/// One frame of a kernel stack of a sample or a switch-out.
#[derive(Debug, Clone)]
pub struct KernelFrameRow {
    pub ts: i64,
    pub tid: u32,
    pub source: super::schema::KernelStackSource,
    pub depth: u32,
    pub addr: u64,
    pub name_id: u32,
}

/// One Python frame of a CPU sample (`--python-sampling`).
#[derive(Debug, Clone)]
pub struct PythonFrameRow {
    pub ts: i64,
    pub pid: u32,
    pub tid: u32,
    pub depth: u32,
    pub code: u64,
    pub function_id: Option<u32>,
    pub file_id: Option<u32>,
    pub line: Option<u32>,
    pub is_entry: bool,
}

/// A Python thread's name, first seen at `ts` (`python_thread_names`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonThreadNameRow {
    pub ts: i64,
    pub pid: u32,
    pub tid: u32,
    pub name_id: u32,
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

/// A function of a JIT's perf map (`jit_symbols`).
#[derive(Debug, Clone)]
pub struct JitSymbolRow {
    pub pid: u32,
    pub start: u64,
    pub size: u64,
    pub name_id: u32,
    pub source_id: u32,
}

/// A traced process's control group and container (`processes`).
#[derive(Debug, Clone)]
pub struct ProcessInfoRow {
    pub ts: i64,
    pub pid: u32,
    /// Its cgroup path (strings): the v2 path, else the v1 one.
    pub cgroup_path_id: u32,
    pub cgroup_v2: bool,
    /// The v2 directory's inode, what the kernel's cgroup ids are.
    pub cgroup_id: Option<u64>,
    pub container_id: Option<String>,
    pub container_runtime: Option<&'static str>,
    /// Its rank in a parallel job, from its environment (see
    /// `crate::procfs::rank_of`); None when it has none.
    pub rank: Option<u32>,
    /// Where its standard output and error went (a file's path, `pipe:[N]`,
    /// a terminal), as /proc/PID/fd/1 and 2 named them.
    pub stdout: Option<String>,
    pub stderr: Option<String>,
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

#[derive(Debug, Clone)]
pub struct SymbolRow {
    pub pid: u32,
    pub addr: u64,
    pub name_id: u32,
}

/// One library asys probed (the `libraries` table): what the API tables'
/// `libraryId` points to.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LibraryRow {
    /// The id API rows carry: asys's number for the file, the same in every
    /// report of one run.
    pub id: u32,
    /// The path it was probed through, as the traced process mapped it.
    pub path: String,
    pub build_id: Option<String>,
    /// The trace items whose functions it exports, by their `-t` names,
    /// comma separated (`cuda`, or `hggc,hgtx` for a library serving two).
    pub items: String,
    /// How many of its functions are probed.
    pub functions: u32,
}

/// One entry of the string table.
#[derive(Debug, Clone)]
pub struct StringRow {
    pub id: u32,
    pub value: String,
}

/// One sample of a traced process's memory (`--host-memory-sampling`),
/// from /proc/PID/status, in bytes.
#[derive(Debug, Clone)]
pub struct HostMemoryRow {
    pub ts: i64,
    pub pid: u32,
    pub rss: u64,
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    /// Virtual size (VmSize).
    pub vm_size: u64,
}

/// One sample of a network interface's counters (`--nic-metrics`): the
/// totals the kernel kept since the interface came up, as read at `ts`.
#[derive(Debug, Clone)]
pub struct NicMetricRow {
    pub ts: i64,
    /// The interface's name, as a string id.
    pub device_id: u32,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

/// One sample of one of an RDMA port's hardware counters (`--nic-metrics`,
/// /sys/class/infiniband/DEV/ports/PORT/hw_counters): the driver's total,
/// as read at `ts`.
#[derive(Debug, Clone)]
pub struct RdmaCounterRow {
    pub ts: i64,
    /// The port, `DEV/PORT` (`mlx5_0/1`), as a string id.
    pub device_id: u32,
    /// The counter's file name, as a string id.
    pub counter_id: u32,
    pub value: u64,
}

/// One sample of a PPU device's metrics (`--ppu-metrics-device`), for the
/// interval of `intervalNs` ending at `ts`.
#[derive(Debug, Clone)]
pub struct PpuMetricRow {
    pub ts: i64,
    /// The process whose runtime reported the device.
    pub pid: u32,
    pub device: u32,
    pub interval_ns: u64,
    /// Time in the interval during which the device ran something.
    pub busy_ns: u64,
    pub sm_clock_mhz: u32,
    pub power_mw: u64,
    pub memory_used: u64,
    pub memory_total: u64,
    /// The memory clock, where the device reports one (NVML); the
    /// simulated devices have none.
    pub mem_clock_mhz: Option<u32>,
}
