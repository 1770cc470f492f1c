//! Device activity reports: hggc_ppu_trace, hggc_ppu_kern_sum,
//! hggc_ppu_mem_time_sum, hggc_ppu_mem_size_sum, and nsys's cuda_gpu_trace,
//! cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum and
//! cuda_kern_exec_sum. Both runtimes' records are in the one device activity
//! table (a process uses one runtime): each name reads all of it, with its
//! runtime's titles and operation names.
use std::collections::HashMap;

use super::{
    api_sum::{summarize_groups, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{
    ReportError,
    container::Container,
    read::{
        activity::{self, Activity, Details, copy_kind_name, each_kernel},
        symbols::kernel_names,
    },
    reader,
    schema::{ActivityKind, activity as ac},
};

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

/// The operation name memory reports group by.
fn operation(a: &Activity, runtime: Runtime) -> String {
    operation_name(runtime, a.kind == Some(ActivityKind::Memset), a.copy_kind)
}

/// Every device activity row and whole graph execution, in (start,
/// correlation) order, each with the name the trace shows.
fn trace_rows(
    report: &Container,
    runtime: Runtime,
) -> Result<Vec<(Activity, String)>, ReportError> {
    let strings = reader::string_table(report)?;
    let names = kernel_names(report, &strings)?;
    let mut out = Vec::new();
    for b in activity::scan_trace(report)? {
        for a in activity::rows(&b?)? {
            let name = if a.kind == Some(ActivityKind::Kernel) {
                a.kernel_addr
                    .map(|addr| {
                        names
                            .get(&(a.pid, addr))
                            .cloned()
                            .unwrap_or_else(|| format!("{addr:#x}"))
                    })
                    .unwrap_or_default()
            } else {
                operation(&a, runtime)
            };
            out.push((a, name));
        }
    }
    // Whole graph executions (`--cuda-graph-trace graph`): one row each,
    // where node mode has a row per kernel node.
    out.extend(graph_executions(report)?);
    out.sort_by_key(|(a, _)| (a.start, a.correlation));
    Ok(out)
}

/// The rows of `cuda_graphs`, as trace rows named `[CUDA graph N]`.
fn graph_executions(report: &Container) -> Result<Vec<(Activity, String)>, ReportError> {
    Ok(crate::report::read::cuda::graphs(report)?
        .into_iter()
        .map(|g| {
            let a = Activity {
                start: g.start,
                end: g.end,
                pid: g.pid,
                device: g.device,
                stream: g.stream,
                correlation: g.correlation,
                details: Details {
                    context: Some(g.context),
                    graph_id: Some(g.graph_id),
                    ..Default::default()
                },
                ..Default::default()
            };
            (a, format!("[CUDA graph {}]", g.graph_id))
        })
        .collect())
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
        let key = k.kernel_addr.map(|a| (k.pid, a));
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
        for a in activity::rows(&b?)? {
            if a.kind == Some(ActivityKind::Kernel) {
                continue;
            }
            let memset = a.kind == Some(ActivityKind::Memset);
            let op = (memset, a.copy_kind.filter(|_| !memset));
            let v = if bytes {
                a.bytes.unwrap_or(0)
            } else {
                a.duration()
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
    let rows = trace_rows(report, runtime)?
        .into_iter()
        .map(|(a, name)| {
            let dim = |d: Option<[u32; 3]>, i: usize| {
                d.map(|d| Value::Int(d[i] as i64)).unwrap_or(Value::Null)
            };
            // A launch's dimensions are recorded together, or not at all.
            let dims = |d: [Option<u32>; 3]| {
                d[0].map(|x| [x, d[1].unwrap_or_default(), d[2].unwrap_or_default()])
            };
            let (grid, block) = (dims(a.grid), dims(a.block));
            let throughput = match a.bytes {
                Some(b) if a.duration() > 0 => {
                    Value::Fixed(b as f64 / (a.duration() as f64 / 1e9) / 1e6, 3)
                }
                _ => Value::Null,
            };
            let d = &a.details;
            let mut row = vec![
                Value::Int(a.start),
                Value::Int(a.duration() as i64),
                Value::Int(a.correlation as i64),
                dim(grid, 0),
                dim(grid, 1),
                dim(grid, 2),
                dim(block, 0),
                dim(block, 1),
                dim(block, 2),
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
