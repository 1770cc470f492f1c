//! Device and pinned host memory over time, from the recorded hggc
//! allocation calls (hggcMalloc/hggcFree, hggcMallocHost/hggcFreeHost):
//! device_memory_usage_summary and device_memory_usage_detail.
use std::collections::{BTreeMap, HashMap};

use arrow::array::Array;

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, reader, schema};

/// One change of allocated bytes.
pub struct Change {
    /// When the allocating or freeing call returned.
    pub time: i64,
    pub pid: u32,
    /// `device` or `pinned` (host memory from hggcMallocHost).
    pub kind: &'static str,
    /// The device; -1 for pinned host memory.
    pub device: i32,
    pub operation: String,
    pub bytes: i64,
    /// Bytes in use of this (pid, kind, device) after the change.
    pub total: i64,
}

#[derive(Default)]
struct Usage {
    allocations: u64,
    frees: u64,
    current: i64,
    peak: i64,
    largest: u64,
}

/// Usage per (pid, kind, device; -1 for pinned host memory).
type UsageByKey = BTreeMap<(u32, &'static str, i32), Usage>;

/// Every change of memory in use, in time order (what the detail report
/// lists; the Perfetto export draws it as counters).
pub fn changes(report: &Container) -> Result<Vec<Change>, ReportError> {
    Ok(changes_and_usage(report)?.0)
}

fn changes_and_usage(report: &Container) -> Result<(Vec<Change>, UsageByKey), ReportError> {
    let strings = reader::string_table(report)?;
    struct Call {
        start: i64,
        end: i64,
        pid: u32,
        tid: u32,
        name: String,
        ret: i64,
        bytes: Option<u64>,
        ptr: Option<u64>,
        device: Option<i32>,
    }
    let mut calls = Vec::new();
    let columns = [
        schema::api::START,
        schema::api::END,
        schema::api::PID,
        schema::api::TID,
        schema::api::NAME_ID,
        schema::api::RETURN_VALUE,
        schema::api::BYTES,
        schema::api::PTR,
        schema::api::DEVICE,
    ];
    for b in schema::api::scan(report, schema::HGGC_API, &columns)? {
        let b = b?;
        let v = schema::api::View(&b);
        let (start, end, ret) = (v.start()?, v.end()?, v.return_value()?);
        let (pid, tid, name) = (v.pid()?, v.tid()?, v.name_id()?);
        let (bytes, ptr, device) = (v.bytes()?, v.ptr()?, v.device()?);
        for i in 0..b.num_rows() {
            let n = strings.get(name[i]).unwrap_or("");
            if !matches!(
                n,
                "hggcMalloc" | "hggcFree" | "hggcMallocHost" | "hggcFreeHost" | "hggcSetDevice"
            ) {
                continue;
            }
            calls.push(Call {
                start: start[i],
                end: end[i],
                pid: pid[i],
                tid: tid[i],
                name: n.to_string(),
                ret: ret[i],
                bytes: (!bytes.is_null(i)).then(|| bytes.value(i)),
                ptr: (!ptr.is_null(i)).then(|| ptr.value(i)),
                device: (!device.is_null(i)).then(|| device.value(i)),
            });
        }
    }
    calls.sort_by_key(|c| (c.end, c.start));
    let mut device_of_thread: HashMap<(u32, u32), i32> = HashMap::new();
    let mut live: HashMap<(u32, u64), (u64, &'static str, i32)> = HashMap::new();
    let mut usage = UsageByKey::new();
    let mut out = Vec::new();
    for c in calls.into_iter().filter(|c| c.ret == 0) {
        let device = *device_of_thread.get(&(c.pid, c.tid)).unwrap_or(&0);
        let (kind, delta, dev) = match c.name.as_str() {
            "hggcSetDevice" => {
                device_of_thread.insert((c.pid, c.tid), c.device.unwrap_or(0));
                continue;
            }
            "hggcMalloc" | "hggcMallocHost" => {
                let (Some(ptr), Some(bytes)) = (c.ptr, c.bytes) else {
                    continue;
                };
                if ptr == 0 {
                    continue;
                }
                let kind = if c.name == "hggcMalloc" {
                    "device"
                } else {
                    "pinned"
                };
                let dev = if kind == "device" { device } else { -1 };
                live.insert((c.pid, ptr), (bytes, kind, dev));
                let u = usage.entry((c.pid, kind, dev)).or_default();
                u.allocations += 1;
                u.largest = u.largest.max(bytes);
                (kind, i64::try_from(bytes).unwrap_or(i64::MAX), dev)
            }
            _ => {
                let Some((bytes, kind, dev)) = c.ptr.and_then(|p| live.remove(&(c.pid, p))) else {
                    continue;
                };
                usage.entry((c.pid, kind, dev)).or_default().frees += 1;
                (kind, -i64::try_from(bytes).unwrap_or(i64::MAX), dev)
            }
        };
        let u = usage.entry((c.pid, kind, dev)).or_default();
        u.current = u.current.saturating_add(delta);
        u.peak = u.peak.max(u.current);
        out.push(Change {
            time: c.end,
            pid: c.pid,
            kind,
            device: dev,
            operation: c.name,
            bytes: delta,
            total: u.current,
        });
    }
    Ok((out, usage))
}

fn device_value(d: i32) -> Value {
    if d < 0 {
        Value::Null
    } else {
        Value::Int(d as i64)
    }
}

pub fn summary(report: &Container) -> Result<Table, ReportError> {
    let (_, usage) = changes_and_usage(report)?;
    let rows = usage
        .into_iter()
        .map(|((pid, kind, dev), u)| {
            vec![
                Value::Int(pid as i64),
                Value::Str(kind.into()),
                device_value(dev),
                Value::Int(u.allocations as i64),
                Value::Int(u.frees as i64),
                Value::Int(u.peak),
                Value::Int(u.current),
                Value::Int(u.largest as i64),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: "Device Memory Usage Summary (device_memory_usage_summary)".into(),
        headers: vec![
            "Pid",
            "Kind",
            "Device",
            "Allocations",
            "Frees",
            "Peak (B)",
            "At End (B)",
            "Largest (B)",
        ],
        rows,
    })
}

pub fn detail(report: &Container) -> Result<Table, ReportError> {
    let changes = changes(report)?;
    let rows = changes
        .into_iter()
        .map(|c| {
            vec![
                Value::Int(c.time),
                Value::Int(c.pid as i64),
                Value::Str(c.kind.into()),
                device_value(c.device),
                Value::Str(c.operation),
                Value::Int(c.bytes),
                Value::Int(c.total),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: "Device Memory Usage Detail (device_memory_usage_detail)".into(),
        headers: vec![
            "Time (ns)",
            "Pid",
            "Kind",
            "Device",
            "Operation",
            "Change (B)",
            "Total (B)",
        ],
        rows,
    })
}
