//! `cuda_kern_exec_sum`, nsys's launch and execution summary: each kernel
//! joined to the CUDA runtime call that launched it (same process and
//! correlation id), per process, thread, device, call and kernel:
//! A the call's own time, Q the time queued from the call's end to the
//! kernel's start (0 when the kernel started first), K the kernel's time,
//! T from the call's start to the kernel's end.
use std::collections::HashMap;

use arrow::array::Array;

use super::{
    api_sum::{Summary, summarize},
    format::{Table, Value},
};
use crate::report::{
    ReportError,
    container::Container,
    read::{activity::each_kernel, api::PLACE_COLUMNS, symbols::kernel_names},
    reader,
    schema::api,
};

/// A kernel as this report needs it.
struct Kernel {
    start: i64,
    end: i64,
    device: u32,
    /// (pid, address or name id), named later.
    key: (u32, u64),
}

/// Group key: pid, tid, device, call name id, kernel key.
type Key = (u32, u32, u32, u32, (u32, u64));

#[derive(Default)]
struct Times {
    total: Vec<u64>,
    api: Vec<u64>,
    queue: Vec<u64>,
    kernel: Vec<u64>,
}

pub fn cuda_kern_exec_sum(report: &Container) -> Result<Table, ReportError> {
    kern_exec_sum(
        report,
        &crate::trace_items::TraceItem::Cuda.table(),
        "CUDA Kernel Launch & Exec Time Summary (cuda_kern_exec_sum)",
    )
}

fn kernels(report: &Container) -> Result<HashMap<(u32, u32), Kernel>, ReportError> {
    let mut out = HashMap::new();
    each_kernel(report, |k| {
        // Correlation 0: a kernel no recorded call launched.
        let Some(addr) = k.kernel_addr.filter(|_| k.correlation != 0) else {
            return;
        };
        out.insert(
            (k.pid, k.correlation),
            Kernel {
                start: k.start,
                end: k.end,
                device: k.device,
                key: (k.pid, addr),
            },
        );
    })?;
    Ok(out)
}

fn kern_exec_sum(report: &Container, table: &str, title: &str) -> Result<Table, ReportError> {
    let kernels = kernels(report)?;
    let mut groups: HashMap<Key, Times> = HashMap::new();
    if !kernels.is_empty() {
        let columns = [PLACE_COLUMNS, &[api::CORRELATION_ID]].concat();
        for b in api::scan(report, table, &columns)? {
            let b = b?;
            let v = api::View(&b);
            let (start, end) = (v.start()?, v.end()?);
            let (pid, tid, name) = (v.pid()?, v.tid()?, v.name_id()?);
            let corr = v.correlation_id()?;
            for i in 0..b.num_rows() {
                if corr.is_null(i) {
                    continue;
                }
                let Some(k) = kernels.get(&(pid[i], corr.value(i))) else {
                    continue;
                };
                let t = groups
                    .entry((pid[i], tid[i], k.device, name[i], k.key))
                    .or_default();
                t.total.push(super::duration(start[i], k.end));
                t.api.push(super::duration(start[i], end[i]));
                t.queue.push(super::duration(end[i], k.start));
                t.kernel.push(super::duration(k.start, k.end));
            }
        }
    }
    let strings = reader::string_table(report)?;
    let names = kernel_names(report, &strings)?;
    let mut rows: Vec<(Key, Times)> = groups.into_iter().collect();
    // By process and thread, then the most launched first.
    rows.sort_by_key(|(k, t)| (k.0, k.1, std::cmp::Reverse(t.kernel.len()), k.3, k.4));
    let stats = |s: Summary| {
        [
            Value::Float(s.avg),
            Value::Float(s.med),
            Value::Int(s.min as i64),
            Value::Int(s.max as i64),
            Value::Float(s.stddev),
        ]
    };
    let rows = rows
        .into_iter()
        .map(|((pid, tid, device, name, kernel), mut t)| {
            let queued = t.queue.iter().filter(|&&q| q > 0).count();
            let mut row = vec![
                Value::Int(pid as i64),
                Value::Int(tid as i64),
                Value::Int(device as i64),
                Value::Int(t.kernel.len() as i64),
                Value::Int(queued as i64),
            ];
            for v in [&mut t.total, &mut t.api, &mut t.queue, &mut t.kernel] {
                row.extend(stats(summarize(v)));
            }
            row.push(Value::Str(
                strings.get(name).unwrap_or_default().to_string(),
            ));
            row.push(Value::Str(
                names
                    .get(&kernel)
                    .cloned()
                    .unwrap_or_else(|| format!("{:#x}", kernel.1)),
            ));
            row
        })
        .collect();
    Ok(Table {
        stream: None,
        title: title.into(),
        headers: vec![
            "PID",
            "TID",
            "DevId",
            "Count",
            "QCount",
            "TAvg (ns)",
            "TMed (ns)",
            "TMin (ns)",
            "TMax (ns)",
            "TStdDev (ns)",
            "AAvg (ns)",
            "AMed (ns)",
            "AMin (ns)",
            "AMax (ns)",
            "AStdDev (ns)",
            "QAvg (ns)",
            "QMed (ns)",
            "QMin (ns)",
            "QMax (ns)",
            "QStdDev (ns)",
            "KAvg (ns)",
            "KMed (ns)",
            "KMin (ns)",
            "KMax (ns)",
            "KStdDev (ns)",
            "API Name",
            "Kernel Name",
        ],
        rows,
    })
}
