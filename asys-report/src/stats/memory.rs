//! Device and pinned host memory reports: device_memory_usage_summary and
//! device_memory_usage_detail, from the allocation calls
//! ([`crate::report::read::device_memory`]).
use super::format::{Table, Value};
use crate::report::{
    ReportError,
    container::Container,
    read::device_memory::{changes, changes_and_usage},
};

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
                Value::Str(c.operation.into()),
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
