//! API summaries and traces (hggc_api_sum, osrt_sum, ...): any trace item's
//! table of API calls.
use std::collections::HashMap;

use arrow::{
    array::{Array, AsArray, PrimitiveArray},
    datatypes::{ArrowPrimitiveType, Int32Type, Int64Type, UInt32Type, UInt64Type},
};

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, reader, schema};

/// Summary statistics of a set of durations, as nsys computes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub total: u64,
    pub count: u64,
    pub avg: f64,
    pub med: f64,
    pub min: u64,
    pub max: u64,
    /// Sample standard deviation (n - 1); 0 for a single value.
    pub stddev: f64,
}

pub fn summarize(mut v: Vec<u64>) -> Summary {
    v.sort_unstable();
    let n = v.len();
    let total: u64 = v.iter().sum();
    let avg = total as f64 / n as f64;
    let med = if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
    };
    let stddev = if n > 1 {
        (v.iter().map(|&x| (x as f64 - avg).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    Summary {
        total,
        count: n as u64,
        avg,
        med,
        min: v[0],
        max: v[n - 1],
        stddev,
    }
}

/// The timing columns every `*_sum` report starts with, for one group.
pub fn time_columns(s: &Summary, grand_total: u64) -> Vec<Value> {
    let pct = if grand_total > 0 {
        s.total as f64 * 100.0 / grand_total as f64
    } else {
        0.0
    };
    vec![
        Value::Float(pct),
        Value::Int(s.total as i64),
        Value::Int(s.count as i64),
        Value::Float(s.avg),
        Value::Float(s.med),
        Value::Int(s.min as i64),
        Value::Int(s.max as i64),
        Value::Float(s.stddev),
    ]
}

/// Headers of [`time_columns`]; `count` names the third column.
pub fn time_headers(count: &'static str) -> Vec<&'static str> {
    vec![
        "Time (%)",
        "Total Time (ns)",
        count,
        "Avg (ns)",
        "Med (ns)",
        "Min (ns)",
        "Max (ns)",
        "StdDev (ns)",
    ]
}

/// Summaries of grouped durations, longest total first (ties by key), with
/// the grand total the percentages are of.
pub fn summarize_groups<K: Ord>(groups: HashMap<K, Vec<u64>>) -> (Vec<(K, Summary)>, u64) {
    let mut sums: Vec<(K, Summary)> = groups.into_iter().map(|(k, v)| (k, summarize(v))).collect();
    let grand = sums.iter().map(|(_, s)| s.total).sum();
    sums.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(&b.0)));
    (sums, grand)
}

pub fn col<'a, T: ArrowPrimitiveType>(
    b: &'a arrow::array::RecordBatch,
    name: &str,
) -> &'a PrimitiveArray<T> {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("column {name} missing from schema"))
        .as_primitive::<T>()
}

pub fn api_sum(report: &Container, table: &str, title: &str) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let mut by_name: HashMap<u32, Vec<u64>> = HashMap::new();
    for b in reader::batches(report, table)? {
        let (start, end) = (col::<Int64Type>(&b, "start"), col::<Int64Type>(&b, "end"));
        let name = col::<UInt32Type>(&b, "nameId");
        for i in 0..b.num_rows() {
            let d = (end.value(i) - start.value(i)).max(0) as u64;
            by_name.entry(name.value(i)).or_default().push(d);
        }
    }
    let named = by_name
        .into_iter()
        .map(|(id, v)| (strings.get(id).unwrap_or("?").to_string(), v))
        .collect();
    let (sums, grand) = summarize_groups(named);
    let rows = sums
        .into_iter()
        .map(|(name, s)| {
            let mut row = time_columns(&s, grand);
            row.push(Value::Str(name));
            row
        })
        .collect();
    let mut headers = time_headers("Num Calls");
    headers.push("Name");
    Ok(Table {
        title: title.into(),
        headers,
        rows,
    })
}

pub fn api_trace(report: &Container, table: &str, title: &str) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let mut kernel_names: HashMap<(u32, u64), u32> = HashMap::new();
    for b in reader::batches(report, schema::SYMBOLS)? {
        let (pid, addr, name) = (
            col::<UInt32Type>(&b, "pid"),
            col::<UInt64Type>(&b, "addr"),
            col::<UInt32Type>(&b, "nameId"),
        );
        for i in 0..b.num_rows() {
            kernel_names.insert((pid.value(i), addr.value(i)), name.value(i));
        }
    }
    let mut rows = Vec::new();
    for b in reader::batches(report, table)? {
        let (start, end) = (col::<Int64Type>(&b, "start"), col::<Int64Type>(&b, "end"));
        let (pid, tid) = (col::<UInt32Type>(&b, "pid"), col::<UInt32Type>(&b, "tid"));
        let name = col::<UInt32Type>(&b, "nameId");
        let ret = col::<Int64Type>(&b, "returnValue");
        let corr = col::<UInt32Type>(&b, "correlationId");
        let bytes = col::<UInt64Type>(&b, "bytes");
        let kind = col::<Int32Type>(&b, "copyKind");
        let stream = col::<UInt64Type>(&b, "stream");
        let ptr = col::<UInt64Type>(&b, "ptr");
        let kaddr = col::<UInt64Type>(&b, "kernelAddr");
        let grid = ["gridX", "gridY", "gridZ"].map(|c| col::<UInt32Type>(&b, c));
        let block = ["blockX", "blockY", "blockZ"].map(|c| col::<UInt32Type>(&b, c));
        let opt_u = |a: &PrimitiveArray<UInt64Type>, i| {
            if a.is_null(i) {
                Value::Null
            } else {
                Value::Int(a.value(i) as i64)
            }
        };
        for i in 0..b.num_rows() {
            let dims = |d: &[&PrimitiveArray<UInt32Type>; 3]| {
                if d[0].is_null(i) {
                    Value::Null
                } else {
                    Value::Str(format!(
                        "{},{},{}",
                        d[0].value(i),
                        d[1].value(i),
                        d[2].value(i)
                    ))
                }
            };
            let kernel = if kaddr.is_null(i) {
                Value::Null
            } else {
                let addr = kaddr.value(i);
                Value::Str(
                    kernel_names
                        .get(&(pid.value(i), addr))
                        .and_then(|&id| strings.get(id))
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("{addr:#x}")),
                )
            };
            rows.push(vec![
                Value::Int(start.value(i)),
                Value::Int(end.value(i) - start.value(i)),
                Value::Str(strings.get(name.value(i)).unwrap_or("?").into()),
                Value::Int(ret.value(i)),
                if corr.is_null(i) {
                    Value::Null
                } else {
                    Value::Int(corr.value(i) as i64)
                },
                Value::Int(pid.value(i) as i64),
                Value::Int(tid.value(i) as i64),
                opt_u(bytes, i),
                if kind.is_null(i) {
                    Value::Null
                } else {
                    Value::Int(kind.value(i) as i64)
                },
                opt_u(stream, i),
                opt_u(ptr, i),
                kernel,
                dims(&[grid[0], grid[1], grid[2]]),
                dims(&[block[0], block[1], block[2]]),
            ]);
        }
    }
    rows.sort_by_key(|r| match r[0] {
        Value::Int(v) => v,
        _ => 0,
    });
    Ok(Table {
        title: title.into(),
        headers: vec![
            "Start (ns)",
            "Duration (ns)",
            "Name",
            "Result",
            "CorrId",
            "Pid",
            "Tid",
            "Bytes",
            "Copy Kind",
            "Stream",
            "Pointer",
            "Kernel",
            "Grid",
            "Block",
        ],
        rows,
    })
}

/// pccl operations: time and bytes per operation over all ranks.
pub fn pccl_op_sum(report: &Container) -> Result<Table, ReportError> {
    const OPS: &[&str] = &[
        "pcclAllReduce",
        "pcclAllGather",
        "pcclBroadcast",
        "pcclReduceScatter",
        "pcclSend",
        "pcclRecv",
    ];
    let strings = reader::string_table(report)?;
    let mut by_op: HashMap<String, (Vec<u64>, u64, std::collections::BTreeSet<u32>)> =
        HashMap::new();
    for b in reader::batches(report, "pccl_api")? {
        let (start, end) = (col::<Int64Type>(&b, "start"), col::<Int64Type>(&b, "end"));
        let name = col::<UInt32Type>(&b, "nameId");
        let bytes = col::<UInt64Type>(&b, "bytes");
        let pid = col::<UInt32Type>(&b, "pid");
        for i in 0..b.num_rows() {
            let n = strings.get(name.value(i)).unwrap_or("?");
            if !OPS.contains(&n) {
                continue;
            }
            let e = by_op.entry(n.to_string()).or_default();
            e.0.push((end.value(i) - start.value(i)).max(0) as u64);
            e.1 += if bytes.is_null(i) { 0 } else { bytes.value(i) };
            e.2.insert(pid.value(i));
        }
    }
    let grand: u64 = by_op.values().map(|v| v.0.iter().sum::<u64>()).sum();
    let mut rows: Vec<(u64, Vec<Value>)> = by_op
        .into_iter()
        .map(|(name, (durations, bytes, pids))| {
            let s = summarize(durations);
            let mut row = time_columns(&s, grand);
            row.extend([
                Value::Int(bytes as i64),
                Value::Int(pids.len() as i64),
                Value::Str(name),
            ]);
            (s.total, row)
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    Ok(Table {
        title: "PCCL Operation Summary (pccl_op_sum)".into(),
        headers: {
            let mut h = time_headers("Num Calls");
            h.extend(["Total Bytes", "Processes", "Name"]);
            h
        },
        rows: rows.into_iter().map(|(_, r)| r).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_hand_computation() {
        let s = summarize(vec![4, 1, 3, 2]);
        assert_eq!((s.total, s.count, s.min, s.max), (10, 4, 1, 4));
        assert_eq!(s.avg, 2.5);
        assert_eq!(s.med, 2.5);
        assert!((s.stddev - 1.2909944).abs() < 1e-6);
        let one = summarize(vec![7]);
        assert_eq!((one.med, one.stddev), (7.0, 0.0));
    }
}
