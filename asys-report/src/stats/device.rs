//! Device activity reports: hggc_ppu_trace, hggc_ppu_kern_sum,
//! hggc_ppu_mem_time_sum, hggc_ppu_mem_size_sum, and nsys's cuda_gpu_trace,
//! cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum and
//! cuda_kern_exec_sum. Both runtimes' records are in the one device activity
//! table (a process uses one runtime): each name reads all of it, with its
//! runtime's titles and operation names.
use std::collections::HashMap;

use arrow::array::Array;

use super::{
    api_sum::{summarize_groups, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{
    ReportError,
    container::Container,
    reader::{self, Batch, Batches},
    schema::{ActivityKind, activity as ac},
    strings::StringTable,
};

/// One row of the device activity table, every column (as the trace
/// report and the exports read it).
pub(crate) struct DeviceOp<'a> {
    /// None: a kind no [`ActivityKind`] names, stored as `stored_kind`.
    pub kind: Option<ActivityKind>,
    pub stored_kind: &'a str,
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub device: u32,
    pub stream: u32,
    pub correlation: u32,
    pub bytes: Option<u64>,
    pub copy_kind: Option<i32>,
    pub kernel_addr: Option<u64>,
    pub grid: [Option<u32>; 3],
    pub block: [Option<u32>; 3],
    pub shared_mem: Option<u32>,
    /// CUPTI's kernel record and context (null for HGPTI's records, and
    /// in reports written before they were recorded).
    pub details: Details,
}

/// What CUPTI adds to a device row: nsys's kernel record columns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Details {
    pub registers_per_thread: Option<u32>,
    pub static_shared: Option<u32>,
    pub dynamic_shared: Option<u32>,
    pub local_per_thread: Option<u32>,
    pub local_total: Option<u32>,
    pub context: Option<u32>,
    pub green_context: Option<u32>,
    pub graph_id: Option<u32>,
    pub graph_node_id: Option<u64>,
}

/// The columns of [`Details`], read where the report has them.
const DETAIL_COLUMNS: &[&str] = &[
    ac::REGISTERS_PER_THREAD,
    ac::STATIC_SHARED_MEMORY,
    ac::DYNAMIC_SHARED_MEMORY,
    ac::LOCAL_MEMORY_PER_THREAD,
    ac::LOCAL_MEMORY_TOTAL,
    ac::CONTEXT_ID,
    ac::GREEN_CONTEXT_ID,
    ac::GRAPH_ID,
    ac::GRAPH_NODE_ID,
];

/// The columns [`DeviceOp`] holds.
const OP_COLUMNS: &[&str] = &[
    ac::KIND,
    ac::START,
    ac::END,
    ac::PID,
    ac::DEVICE,
    ac::STREAM,
    ac::CORRELATION_ID,
    ac::BYTES,
    ac::COPY_KIND,
    ac::KERNEL_ADDR,
    ac::SHARED_MEM,
    ac::GRID_X,
    ac::GRID_Y,
    ac::GRID_Z,
    ac::BLOCK_X,
    ac::BLOCK_Y,
    ac::BLOCK_Z,
];

/// The device activity table's batches, to read with [`ops_of`].
pub(crate) fn device_ops(report: &Container) -> Result<Batches, ReportError> {
    let mut columns = OP_COLUMNS.to_vec();
    // A report older than the kernel record's columns lacks them: its rows
    // read them as null.
    if let Some(t) = ac::open(report)? {
        columns.extend(DETAIL_COLUMNS.iter().filter(|c| t.has_column(c)));
    }
    ac::scan(report, &columns)
}

/// The rows of a batch of [`device_ops`].
pub(crate) fn ops_of(b: &Batch) -> Result<impl Iterator<Item = DeviceOp<'_>>, ReportError> {
    let v = ac::View(b);
    let (stored, kinds) = (v.kind()?, v.kinds()?);
    let (start, end) = (v.start()?, v.end()?);
    let (pid, device, stream) = (v.pid()?, v.device()?, v.stream()?);
    let corr = v.correlation_id()?;
    let (bytes, copy, addr, shared) = (
        v.bytes()?,
        v.copy_kind()?,
        v.kernel_addr()?,
        v.shared_mem()?,
    );
    let grid = [v.grid_x()?, v.grid_y()?, v.grid_z()?];
    let block = [v.block_x()?, v.block_y()?, v.block_z()?];
    use arrow::datatypes::{UInt32Type, UInt64Type};
    // Each detail column only where the batch has it.
    let present = |name: &str| b.record_batch().column_by_name(name).is_some();
    let u32s = |name: &str| -> Result<_, ReportError> {
        present(name)
            .then(|| b.prim::<UInt32Type>(name))
            .transpose()
    };
    let regs = u32s(ac::REGISTERS_PER_THREAD)?;
    let stc = u32s(ac::STATIC_SHARED_MEMORY)?;
    let dym = u32s(ac::DYNAMIC_SHARED_MEMORY)?;
    let local = u32s(ac::LOCAL_MEMORY_PER_THREAD)?;
    let local_total = u32s(ac::LOCAL_MEMORY_TOTAL)?;
    let ctx = u32s(ac::CONTEXT_ID)?;
    let green = u32s(ac::GREEN_CONTEXT_ID)?;
    let graph = u32s(ac::GRAPH_ID)?;
    let node = present(ac::GRAPH_NODE_ID)
        .then(|| b.prim::<UInt64Type>(ac::GRAPH_NODE_ID))
        .transpose()?;
    fn opt<T: arrow::datatypes::ArrowPrimitiveType>(
        a: &arrow::array::PrimitiveArray<T>,
        i: usize,
    ) -> Option<T::Native> {
        (!a.is_null(i)).then(|| a.value(i))
    }
    Ok((0..b.num_rows()).map(move |i| DeviceOp {
        kind: kinds[i],
        stored_kind: stored.value(i),
        start: start[i],
        end: end[i],
        pid: pid[i],
        device: device[i],
        stream: stream[i],
        correlation: corr[i],
        bytes: opt(bytes, i),
        copy_kind: opt(copy, i),
        kernel_addr: opt(addr, i),
        grid: grid.map(|c| opt(c, i)),
        block: block.map(|c| opt(c, i)),
        shared_mem: opt(shared, i),
        details: Details {
            registers_per_thread: regs.and_then(|a| opt(a, i)),
            static_shared: stc.and_then(|a| opt(a, i)),
            dynamic_shared: dym.and_then(|a| opt(a, i)),
            local_per_thread: local.and_then(|a| opt(a, i)),
            local_total: local_total.and_then(|a| opt(a, i)),
            context: ctx.and_then(|a| opt(a, i)),
            green_context: green.and_then(|a| opt(a, i)),
            graph_id: graph.and_then(|a| opt(a, i)),
            graph_node_id: node.and_then(|a| opt(a, i)),
        },
    }))
}

/// One kernel of the device activity table, as the kernel reports read it.
pub(crate) struct KernelRun {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub device: u32,
    pub correlation: u32,
    pub addr: Option<u64>,
}

/// Calls `f` with each kernel of the device activity table (its other
/// rows are copies and memsets), a batch at a time in the columns needed:
/// a 10 M-event report's kernels are never all in memory.
pub(crate) fn each_kernel(
    report: &Container,
    mut f: impl FnMut(KernelRun),
) -> Result<(), ReportError> {
    let columns = [
        ac::KIND,
        ac::START,
        ac::END,
        ac::PID,
        ac::DEVICE,
        ac::CORRELATION_ID,
        ac::KERNEL_ADDR,
    ];
    for b in ac::scan(report, &columns)? {
        let b = b?;
        let v = ac::View(&b);
        let kind = v.kinds()?;
        let (start, end) = (v.start()?, v.end()?);
        let (pid, device, corr) = (v.pid()?, v.device()?, v.correlation_id()?);
        let addr = v.kernel_addr()?;
        for i in 0..b.num_rows() {
            if kind[i] != Some(ActivityKind::Kernel) {
                continue;
            }
            f(KernelRun {
                start: start[i],
                end: end[i],
                pid: pid[i],
                device: device[i],
                correlation: corr[i],
                addr: (!addr.is_null(i)).then(|| addr.value(i)),
            });
        }
    }
    Ok(())
}

/// Whose names and titles a device report takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    Hggc,
    Cuda,
}

impl Runtime {
    /// The report's title: `what` (e.g. "Kernel Summary") and its name.
    fn title(self, what: &str, report: &str) -> String {
        match self {
            Self::Hggc => format!("PPU {what} (hggc_ppu_{report})"),
            Self::Cuda => format!("CUDA GPU {what} (cuda_gpu_{report})"),
        }
    }

    /// The bracketed prefix of memory operation names, as nsys writes them.
    fn operations(self) -> &'static str {
        match self {
            Self::Hggc => "HGGC",
            Self::Cuda => "CUDA",
        }
    }
}

/// One device activity row, as the reports need it.
struct Activity {
    start: i64,
    end: i64,
    kind: Option<ActivityKind>,
    pid: u32,
    device: u32,
    stream: u32,
    correlation: u32,
    bytes: Option<u64>,
    copy_kind: Option<i32>,
    kernel: Option<String>,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    shared_mem: Option<u32>,
    details: Details,
    /// A whole CUDA graph's execution (`cuda_graphs`): its name in the
    /// trace, in place of a kernel's or an operation's.
    graph: Option<String>,
}

impl Activity {
    fn duration(&self) -> u64 {
        super::duration(self.start, self.end)
    }

    /// The operation name memory reports group by.
    fn operation(&self, runtime: Runtime) -> String {
        operation_name(
            runtime,
            self.kind == Some(ActivityKind::Memset),
            self.copy_kind,
        )
    }
}

pub fn copy_kind_name(kind: i32) -> &'static str {
    match kind {
        0 => "Host-to-Host",
        1 => "Host-to-Device",
        2 => "Device-to-Host",
        3 => "Device-to-Device",
        4 => "Peer-to-Peer",
        _ => "Unknown",
    }
}

/// Kernel names per (pid, address), from the symbolize stage.
pub fn kernel_names(
    report: &Container,
    strings: &StringTable,
) -> Result<HashMap<(u32, u64), String>, ReportError> {
    Ok(super::api_sum::kernel_names(report)?
        .into_iter()
        .filter_map(|(k, id)| strings.get(id).map(|n| (k, n.to_string())))
        .collect())
}

fn activities(report: &Container) -> Result<Vec<Activity>, ReportError> {
    let strings = reader::string_table(report)?;
    let names = kernel_names(report, &strings)?;
    let mut out = Vec::new();
    for b in device_ops(report)? {
        let b = b?;
        for a in ops_of(&b)? {
            // A launch's dimensions are recorded together, or not at all.
            let dims = |d: [Option<u32>; 3]| {
                d[0].map(|x| [x, d[1].unwrap_or_default(), d[2].unwrap_or_default()])
            };
            out.push(Activity {
                start: a.start,
                end: a.end,
                kind: a.kind,
                pid: a.pid,
                device: a.device,
                stream: a.stream,
                correlation: a.correlation,
                bytes: a.bytes,
                copy_kind: a.copy_kind,
                kernel: a.kernel_addr.map(|addr| {
                    names
                        .get(&(a.pid, addr))
                        .cloned()
                        .unwrap_or_else(|| format!("{addr:#x}"))
                }),
                grid: dims(a.grid),
                block: dims(a.block),
                shared_mem: a.shared_mem,
                details: a.details,
                graph: None,
            });
        }
    }
    // Whole graph executions (`--cuda-graph-trace graph`): one row each,
    // where node mode has a row per kernel node.
    out.extend(graph_executions(report)?);
    out.sort_by_key(|a| (a.start, a.correlation));
    Ok(out)
}

/// The rows of `cuda_graphs`, as trace rows named `[CUDA graph N]`.
fn graph_executions(report: &Container) -> Result<Vec<Activity>, ReportError> {
    use crate::report::schema::cuda_graphs as cg;
    let columns = [
        cg::START,
        cg::END,
        cg::PID,
        cg::DEVICE,
        cg::CONTEXT_ID,
        cg::STREAM,
        cg::GRAPH_ID,
        cg::CORRELATION_ID,
    ];
    let mut out = Vec::new();
    for b in cg::scan(report, &columns)? {
        let b = b?;
        let v = cg::View(&b);
        let (start, end, pid) = (v.start()?, v.end()?, v.pid()?);
        let (device, ctx, stream) = (v.device()?, v.context_id()?, v.stream()?);
        let (graph, corr) = (v.graph_id()?, v.correlation_id()?);
        for i in 0..b.num_rows() {
            out.push(Activity {
                start: start[i],
                end: end[i],
                kind: None,
                pid: pid[i],
                device: device[i],
                stream: stream[i],
                correlation: corr[i],
                bytes: None,
                copy_kind: None,
                kernel: None,
                grid: None,
                block: None,
                shared_mem: None,
                details: Details {
                    context: Some(ctx[i]),
                    graph_id: Some(graph[i]),
                    ..Default::default()
                },
                graph: Some(format!("[CUDA graph {}]", graph[i])),
            });
        }
    }
    Ok(out)
}

fn summary_rows(groups: HashMap<String, Vec<u64>>) -> Vec<Vec<Value>> {
    let (sums, grand) = summarize_groups(groups);
    sums.into_iter()
        .map(|(name, s)| {
            let mut row = time_columns(&s, grand);
            row.push(Value::Str(name));
            row
        })
        .collect()
}

pub fn kern_sum(report: &Container, runtime: Runtime) -> Result<Table, ReportError> {
    // Durations per (pid, kernel address), read a batch at a time in the
    // five columns needed: a 10 M-event report's kernels need their
    // durations in memory (for the medians), not whole activity rows.
    let mut by_kernel: HashMap<Option<(u32, u64)>, Vec<u64>> = HashMap::new();
    each_kernel(report, |k| {
        let key = k.addr.map(|a| (k.pid, a));
        by_kernel
            .entry(key)
            .or_default()
            .push(super::duration(k.start, k.end));
    })?;
    let strings = reader::string_table(report)?;
    let names = kernel_names(report, &strings)?;
    // Kernels of one name in several processes are one row.
    let mut groups: HashMap<String, Vec<u64>> = HashMap::new();
    for (key, mut d) in by_kernel {
        let name = key
            .map(|k| {
                names
                    .get(&k)
                    .cloned()
                    .unwrap_or_else(|| format!("{:#x}", k.1))
            })
            .unwrap_or_default();
        groups.entry(name).or_default().append(&mut d);
    }
    let mut headers = time_headers("Instances");
    headers.push("Name");
    Ok(Table {
        stream: None,
        title: runtime.title("Kernel Summary", "kern_sum"),
        headers,
        rows: summary_rows(groups),
    })
}

/// Per memory operation (see [`Activity::operation`]), the durations of
/// the copies and memsets, or their bytes when `bytes`; read a batch at a
/// time in the columns needed.
fn memory_groups(
    report: &Container,
    runtime: Runtime,
    bytes: bool,
) -> Result<HashMap<String, Vec<u64>>, ReportError> {
    let mut by_op: HashMap<(bool, Option<i32>), Vec<u64>> = HashMap::new();
    let columns = [ac::KIND, ac::START, ac::END, ac::COPY_KIND, ac::BYTES];
    for b in ac::scan(report, &columns)? {
        let b = b?;
        let v = ac::View(&b);
        let kind = v.kinds()?;
        let (start, end) = (v.start()?, v.end()?);
        let (copy, size) = (v.copy_kind()?, v.bytes()?);
        for i in 0..b.num_rows() {
            let k = kind[i];
            if k == Some(ActivityKind::Kernel) {
                continue;
            }
            let memset = k == Some(ActivityKind::Memset);
            let op = (memset, (!memset && !copy.is_null(i)).then(|| copy.value(i)));
            let v = if bytes {
                if size.is_null(i) { 0 } else { size.value(i) }
            } else {
                super::duration(start[i], end[i])
            };
            by_op.entry(op).or_default().push(v);
        }
    }
    Ok(by_op
        .into_iter()
        .map(|((memset, copy), v)| (operation_name(runtime, memset, copy), v))
        .collect())
}

/// The operation name memory reports group by.
fn operation_name(runtime: Runtime, memset: bool, copy_kind: Option<i32>) -> String {
    let r = runtime.operations();
    match (memset, copy_kind) {
        (true, _) => format!("[{r} memset]"),
        (_, Some(k)) => format!("[{r} memcpy {}]", copy_kind_name(k)),
        _ => format!("[{r} memcpy]"),
    }
}

pub fn mem_time_sum(report: &Container, runtime: Runtime) -> Result<Table, ReportError> {
    let groups = memory_groups(report, runtime, false)?;
    let mut headers = time_headers("Count");
    headers.push("Operation");
    Ok(Table {
        stream: None,
        title: runtime.title("Memory Time Summary", "mem_time_sum"),
        headers,
        rows: summary_rows(groups),
    })
}

pub fn mem_size_sum(report: &Container, runtime: Runtime) -> Result<Table, ReportError> {
    let groups = memory_groups(report, runtime, true)?;
    let mb = |v: f64| Value::Fixed(v / 1e6, 3);
    let (sums, _) = summarize_groups(groups);
    let rows = sums
        .into_iter()
        .map(|(op, s)| {
            vec![
                mb(s.total as f64),
                Value::Int(s.count as i64),
                mb(s.avg),
                mb(s.med),
                mb(s.min as f64),
                mb(s.max as f64),
                mb(s.stddev),
                Value::Str(op),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: runtime.title("Memory Size Summary", "mem_size_sum"),
        headers: vec![
            "Total (MB)",
            "Count",
            "Avg (MB)",
            "Med (MB)",
            "Min (MB)",
            "Max (MB)",
            "StdDev (MB)",
            "Operation",
        ],
        rows,
    })
}

pub fn ppu_trace(report: &Container, runtime: Runtime) -> Result<Table, ReportError> {
    let cuda = runtime == Runtime::Cuda;
    let int = |v: Option<u32>| v.map(|v| Value::Int(v as i64)).unwrap_or(Value::Null);
    let mb = |v: Option<u32>| {
        v.map(|v| Value::Fixed(v as f64 / 1e6, 3))
            .unwrap_or(Value::Null)
    };
    let rows = activities(report)?
        .into_iter()
        .map(|a| {
            let dim = |d: Option<[u32; 3]>, i: usize| {
                d.map(|d| Value::Int(d[i] as i64)).unwrap_or(Value::Null)
            };
            let throughput = match a.bytes {
                Some(b) if a.duration() > 0 => {
                    Value::Fixed(b as f64 / (a.duration() as f64 / 1e9) / 1e6, 3)
                }
                _ => Value::Null,
            };
            let name = if let Some(g) = &a.graph {
                g.clone()
            } else if a.kind == Some(ActivityKind::Kernel) {
                a.kernel.clone().unwrap_or_default()
            } else {
                a.operation(runtime)
            };
            let d = &a.details;
            let mut row = vec![
                Value::Int(a.start),
                Value::Int(a.duration() as i64),
                Value::Int(a.correlation as i64),
                dim(a.grid, 0),
                dim(a.grid, 1),
                dim(a.grid, 2),
                dim(a.block, 0),
                dim(a.block, 1),
                dim(a.block, 2),
            ];
            if cuda {
                // nsys's kernel columns; a report older than them (or a
                // record without them) has only the shared memory's sum,
                // shown as the dynamic part as before.
                row.extend([
                    int(d.registers_per_thread),
                    mb(d.static_shared),
                    mb(d.dynamic_shared.or(a.shared_mem)),
                ]);
            } else {
                row.push(int(a.shared_mem));
            }
            row.extend([
                a.bytes.map(|b| Value::Int(b as i64)).unwrap_or(Value::Null),
                throughput,
                a.copy_kind
                    .map(|k| Value::Str(copy_kind_name(k).into()))
                    .unwrap_or(Value::Null),
                Value::Int(a.device as i64),
            ]);
            if cuda {
                row.extend([int(d.context), int(d.green_context)]);
            }
            row.push(Value::Int(a.stream as i64));
            if cuda {
                row.extend([
                    int(d.graph_id),
                    d.graph_node_id
                        .map(|v| Value::Int(v as i64))
                        .unwrap_or(Value::Null),
                ]);
            }
            row.extend([Value::Int(a.pid as i64), Value::Str(name)]);
            row
        })
        .collect();
    let mut headers = vec![
        "Start (ns)",
        "Duration (ns)",
        "CorrId",
        "GrdX",
        "GrdY",
        "GrdZ",
        "BlkX",
        "BlkY",
        "BlkZ",
    ];
    if cuda {
        headers.extend(["Reg/Trd", "StcSMem (MB)", "DymSMem (MB)"]);
    } else {
        headers.push("DymSMem (B)");
    }
    headers.extend(["Bytes (B)", "Throughput (MB/s)", "CopyKind", "Device"]);
    if cuda {
        headers.extend(["Ctx", "GreenCtx"]);
    }
    headers.push("Strm");
    if cuda {
        headers.extend(["GraphId", "GraphNodeId"]);
    }
    headers.extend(["Pid", "Name"]);
    Ok(Table {
        stream: None,
        title: match runtime {
            Runtime::Hggc => "PPU Trace (hggc_ppu_trace)".into(),
            Runtime::Cuda => "CUDA GPU Trace (cuda_gpu_trace)".into(),
        },
        headers,
        rows,
    })
}
