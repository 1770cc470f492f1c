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
        opt,
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

/// Every device activity row and whole graph execution (in table order,
/// the graphs last), each with the name the trace shows.
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
    Ok(out)
}

/// The order the trace lists `rows` in: by (start, correlation), ties in
/// table order. As indices: sorting the rows themselves moves 264 bytes a
/// row, a tenth of the trace's time on a 1 M-row table.
fn trace_order(rows: &[(Activity, String)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| (rows[i].0.start, rows[i].0.correlation));
    order
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
    // Column by column (the table's typed view): a whole Activity a row
    // cost this loop a fifth more time.
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
            let op = (memset, opt(copy, i).filter(|_| !memset));
            let v = if bytes {
                opt(size, i).unwrap_or(0)
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
    let mut all = trace_rows(report, runtime)?;
    let rows = trace_order(&all)
        .into_iter()
        .map(|i| {
            let (a, name) = (all[i].0, std::mem::take(&mut all[i].1));
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::report::{
        builder::ReportBuilder,
        rows::{ActivityRow, SymbolRow},
        schema::{self, HGGC_ACTIVITY},
    };

    fn kernel(start: i64, end: i64, pid: u32, addr: u64) -> ActivityRow {
        ActivityRow {
            start,
            end,
            kind: ActivityKind::Kernel,
            pid,
            correlation: start as u32,
            kernel_addr: Some(addr),
            ..Default::default()
        }
    }

    fn copy(start: i64, end: i64, copy_kind: Option<i32>, bytes: u64) -> ActivityRow {
        ActivityRow {
            start,
            end,
            kind: ActivityKind::Memcpy,
            pid: 7,
            correlation: start as u32,
            copy_kind,
            bytes: Some(bytes),
            ..Default::default()
        }
    }

    /// Kernels of two processes (one name in both, one kernel never
    /// symbolized), copies and a memset; the kernels' names by (pid,
    /// address).
    fn report() -> (Container, Vec<ActivityRow>, BTreeMap<(u32, u64), String>) {
        let mut b = ReportBuilder::new().expect("builder");
        let names = BTreeMap::from([
            ((7, 0x100), "gemm".to_string()),
            ((8, 0x100), "gemm".to_string()),
            ((7, 0x200), "relu".to_string()),
        ]);
        let symbols: Vec<SymbolRow> = names
            .iter()
            .map(|(&(pid, addr), n)| SymbolRow {
                pid,
                addr,
                name_id: b.string(n),
            })
            .collect();
        let rows = vec![
            kernel(100, 110, 7, 0x100),
            kernel(50, 80, 7, 0x100),
            kernel(120, 140, 8, 0x100),
            kernel(60, 65, 7, 0x200),
            kernel(200, 207, 7, 0x300),
            copy(10, 30, Some(1), 1 << 20),
            copy(40, 44, Some(1), 1 << 10),
            copy(70, 71, Some(2), 100),
            ActivityRow {
                start: 90,
                end: 99,
                kind: ActivityKind::Memset,
                pid: 7,
                bytes: Some(64),
                ..Default::default()
            },
        ];
        b.table::<schema::symbols::Table>(schema::SYMBOLS, &symbols)
            .expect("symbols");
        b.table::<ac::Table>(HGGC_ACTIVITY, &rows)
            .expect("activity");
        (b.finish_temporary().expect("report"), rows, names)
    }

    fn ints(t: &Table, header: &str) -> Vec<i64> {
        t.column(header)
            .into_iter()
            .map(|v| match v {
                Value::Int(i) => *i,
                v => panic!("{header}: {v:?}"),
            })
            .collect()
    }

    fn strs(t: &Table, header: &str) -> Vec<String> {
        t.column(header)
            .into_iter()
            .map(|v| match v {
                Value::Str(s) => s.clone(),
                v => panic!("{header}: {v:?}"),
            })
            .collect()
    }

    /// Per name (over every process): the kernels' count, total, minimum
    /// and maximum duration, longest total first; an unnamed kernel goes by
    /// its address.
    #[test]
    fn kernel_summary_adds_up_each_names_kernels() {
        let (report, rows, names) = report();
        let mut want: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for r in rows.iter().filter(|r| r.kind == ActivityKind::Kernel) {
            let addr = r.kernel_addr.unwrap();
            let name = names
                .get(&(r.pid, addr))
                .cloned()
                .unwrap_or(format!("{addr:#x}"));
            want.entry(name).or_default().push(r.end - r.start);
        }
        let mut want: Vec<(String, Vec<i64>)> = want.into_iter().collect();
        want.sort_by_key(|(_, d)| std::cmp::Reverse(d.iter().sum::<i64>()));
        let t = kern_sum(&report, Runtime::Hggc).expect("kern_sum");
        assert_eq!(
            strs(&t, "Name"),
            want.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()
        );
        let each = |f: fn(&Vec<i64>) -> i64| want.iter().map(|(_, d)| f(d)).collect::<Vec<_>>();
        assert_eq!(ints(&t, "Total Time (ns)"), each(|d| d.iter().sum()));
        assert_eq!(ints(&t, "Instances"), each(|d| d.len() as i64));
        assert_eq!(ints(&t, "Min (ns)"), each(|d| *d.iter().min().unwrap()));
        assert_eq!(ints(&t, "Max (ns)"), each(|d| *d.iter().max().unwrap()));
    }

    /// Copies by direction and memsets, each operation's count, total time
    /// and (by size) bytes.
    #[test]
    fn memory_summaries_group_by_operation() {
        let (report, rows, _) = report();
        let mut time: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        let mut bytes: BTreeMap<String, u64> = BTreeMap::new();
        for r in rows.iter().filter(|r| r.kind != ActivityKind::Kernel) {
            let op = match r.kind {
                ActivityKind::Memset => "[CUDA memset]".to_string(),
                _ => format!("[CUDA memcpy {}]", copy_kind_name(r.copy_kind.unwrap())),
            };
            time.entry(op.clone()).or_default().push(r.end - r.start);
            *bytes.entry(op).or_default() += r.bytes.unwrap();
        }
        let t = mem_time_sum(&report, Runtime::Cuda).expect("mem_time_sum");
        let got: BTreeMap<String, (i64, i64)> = strs(&t, "Operation")
            .into_iter()
            .zip(
                ints(&t, "Total Time (ns)")
                    .into_iter()
                    .zip(ints(&t, "Count")),
            )
            .collect();
        let want: BTreeMap<String, (i64, i64)> = time
            .iter()
            .map(|(op, d)| (op.clone(), (d.iter().sum(), d.len() as i64)))
            .collect();
        assert_eq!(got, want);
        let t = mem_size_sum(&report, Runtime::Cuda).expect("mem_size_sum");
        let got: BTreeMap<String, f64> = strs(&t, "Operation")
            .into_iter()
            .zip(t.column("Total (MB)").into_iter().map(|v| match v {
                Value::Fixed(mb, 3) => *mb,
                v => panic!("{v:?}"),
            }))
            .collect();
        let want: BTreeMap<String, f64> = bytes
            .iter()
            .map(|(op, &b)| (op.clone(), b as f64 / 1e6))
            .collect();
        assert_eq!(got, want);
    }

    /// Every row in start order, kernels by name and the others by
    /// operation, with their correlation ids and copies' bytes.
    #[test]
    fn trace_lists_every_row_in_start_order() {
        let (report, rows, names) = report();
        let mut want: Vec<&ActivityRow> = rows.iter().collect();
        want.sort_by_key(|r| r.start);
        let t = ppu_trace(&report, Runtime::Hggc).expect("ppu_trace");
        assert_eq!(
            ints(&t, "Start (ns)"),
            want.iter().map(|r| r.start).collect::<Vec<_>>()
        );
        assert_eq!(
            ints(&t, "Duration (ns)"),
            want.iter().map(|r| r.end - r.start).collect::<Vec<_>>()
        );
        assert_eq!(
            ints(&t, "CorrId"),
            want.iter()
                .map(|r| r.correlation as i64)
                .collect::<Vec<_>>()
        );
        let name = |r: &ActivityRow| match (r.kind, r.kernel_addr) {
            (ActivityKind::Kernel, Some(addr)) => names
                .get(&(r.pid, addr))
                .cloned()
                .unwrap_or(format!("{addr:#x}")),
            (ActivityKind::Memset, _) => "[HGGC memset]".into(),
            _ => format!("[HGGC memcpy {}]", copy_kind_name(r.copy_kind.unwrap())),
        };
        assert_eq!(
            strs(&t, "Name"),
            want.iter().map(|r| name(r)).collect::<Vec<_>>()
        );
        let bytes: Vec<Value> = want
            .iter()
            .map(|r| r.bytes.map_or(Value::Null, |b| Value::Int(b as i64)))
            .collect();
        assert_eq!(t.column("Bytes (B)"), bytes.iter().collect::<Vec<_>>());
    }
}
