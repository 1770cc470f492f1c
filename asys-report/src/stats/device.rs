//! Device activity reports: hggc_ppu_trace, hggc_ppu_kern_sum,
//! hggc_ppu_mem_time_sum, hggc_ppu_mem_size_sum, and nsys's cuda_gpu_trace,
//! cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum and
//! cuda_kern_exec_sum. Both runtimes' records are in the one device activity
//! table (a process uses one runtime): each name reads all of it, with its
//! runtime's titles and operation names.
use std::collections::HashMap;

use arrow::{
    array::Array,
    datatypes::{Int32Type, Int64Type, UInt32Type, UInt64Type},
};

use super::{
    api_sum::{summarize_groups, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{
    ReportError, container::Container, reader, schema, schema::activity as ac, strings::StringTable,
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

/// One device activity row, as the reports need it.
struct Activity {
    start: i64,
    end: i64,
    kind: String,
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
}

impl Activity {
    fn duration(&self) -> u64 {
        super::duration(self.start, self.end)
    }

    /// The operation name memory reports group by.
    fn operation(&self, runtime: Runtime) -> String {
        operation_name(runtime, self.kind == "memset", self.copy_kind)
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
    let columns = [
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
    for b in reader::scan(report, schema::HGGC_ACTIVITY, &columns)? {
        let b = b?;
        let kind = b.strs(ac::KIND)?;
        let (start, end) = (
            b.prim::<Int64Type>(ac::START)?,
            b.prim::<Int64Type>(ac::END)?,
        );
        let (pid, device, stream) = (
            b.prim::<UInt32Type>(ac::PID)?,
            b.prim::<UInt32Type>(ac::DEVICE)?,
            b.prim::<UInt32Type>(ac::STREAM)?,
        );
        let corr = b.prim::<UInt32Type>(ac::CORRELATION_ID)?;
        let bytes = b.prim::<UInt64Type>(ac::BYTES)?;
        let copy = b.prim::<Int32Type>(ac::COPY_KIND)?;
        let addr = b.prim::<UInt64Type>(ac::KERNEL_ADDR)?;
        let shared = b.prim::<UInt32Type>(ac::SHARED_MEM)?;
        let grid = [ac::GRID_X, ac::GRID_Y, ac::GRID_Z].map(|n| b.prim::<UInt32Type>(n));
        let block = [ac::BLOCK_X, ac::BLOCK_Y, ac::BLOCK_Z].map(|n| b.prim::<UInt32Type>(n));
        let [gx, gy, gz] = grid;
        let [bx, by, bz] = block;
        let grid = [gx?, gy?, gz?];
        let block = [bx?, by?, bz?];
        let dims = |c: &[&arrow::array::PrimitiveArray<UInt32Type>; 3], i: usize| {
            (!c[0].is_null(i)).then(|| [c[0].value(i), c[1].value(i), c[2].value(i)])
        };
        for i in 0..b.num_rows() {
            let opt64 =
                |a: &arrow::array::PrimitiveArray<UInt64Type>| (!a.is_null(i)).then(|| a.value(i));
            out.push(Activity {
                start: start.value(i),
                end: end.value(i),
                kind: kind.value(i).to_string(),
                pid: pid.value(i),
                device: device.value(i),
                stream: stream.value(i),
                correlation: corr.value(i),
                bytes: opt64(bytes),
                copy_kind: (!copy.is_null(i)).then(|| copy.value(i)),
                kernel: opt64(addr).map(|a| {
                    names
                        .get(&(pid.value(i), a))
                        .cloned()
                        .unwrap_or_else(|| format!("{a:#x}"))
                }),
                grid: dims(&grid, i),
                block: dims(&block, i),
                shared_mem: (!shared.is_null(i)).then(|| shared.value(i)),
            });
        }
    }
    out.sort_by_key(|a| (a.start, a.correlation));
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
    let columns = [ac::KIND, ac::START, ac::END, ac::PID, ac::KERNEL_ADDR];
    for b in reader::scan(report, schema::HGGC_ACTIVITY, &columns)? {
        let b = b?;
        let kind = b.strs(ac::KIND)?;
        let start = b.values::<Int64Type>(ac::START)?;
        let end = b.values::<Int64Type>(ac::END)?;
        let pid = b.values::<UInt32Type>(ac::PID)?;
        let addr = b.prim::<UInt64Type>(ac::KERNEL_ADDR)?;
        for i in 0..b.num_rows() {
            if kind.value(i) != "kernel" {
                continue;
            }
            let key = (!addr.is_null(i)).then(|| (pid[i], addr.value(i)));
            by_kernel
                .entry(key)
                .or_default()
                .push(super::duration(start[i], end[i]));
        }
    }
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
    for b in reader::scan(report, schema::HGGC_ACTIVITY, &columns)? {
        let b = b?;
        let kind = b.strs(ac::KIND)?;
        let start = b.values::<Int64Type>(ac::START)?;
        let end = b.values::<Int64Type>(ac::END)?;
        let copy = b.prim::<Int32Type>(ac::COPY_KIND)?;
        let size = b.prim::<UInt64Type>(ac::BYTES)?;
        for i in 0..b.num_rows() {
            let k = kind.value(i);
            if k == "kernel" {
                continue;
            }
            let memset = k == "memset";
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
            let name = if a.kind == "kernel" {
                a.kernel.clone().unwrap_or_default()
            } else {
                a.operation(runtime)
            };
            vec![
                Value::Int(a.start),
                Value::Int(a.duration() as i64),
                Value::Int(a.correlation as i64),
                dim(a.grid, 0),
                dim(a.grid, 1),
                dim(a.grid, 2),
                dim(a.block, 0),
                dim(a.block, 1),
                dim(a.block, 2),
                a.shared_mem
                    .map(|s| Value::Int(s as i64))
                    .unwrap_or(Value::Null),
                a.bytes.map(|b| Value::Int(b as i64)).unwrap_or(Value::Null),
                throughput,
                a.copy_kind
                    .map(|k| Value::Str(copy_kind_name(k).into()))
                    .unwrap_or(Value::Null),
                Value::Int(a.device as i64),
                Value::Int(a.stream as i64),
                Value::Int(a.pid as i64),
                Value::Str(name),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: match runtime {
            Runtime::Hggc => "PPU Trace (hggc_ppu_trace)".into(),
            Runtime::Cuda => "CUDA GPU Trace (cuda_gpu_trace)".into(),
        },
        headers: vec![
            "Start (ns)",
            "Duration (ns)",
            "CorrId",
            "GrdX",
            "GrdY",
            "GrdZ",
            "BlkX",
            "BlkY",
            "BlkZ",
            "DymSMem (B)",
            "Bytes (B)",
            "Throughput (MB/s)",
            "CopyKind",
            "Device",
            "Strm",
            "Pid",
            "Name",
        ],
        rows,
    })
}
