//! hggc_memcpy_pageable: copies from or to pageable host memory (malloc,
//! the stack), which the runtime stages through a pinned buffer: slower, and
//! an "async" copy of it does not overlap the host (nsys cuda_memcpy_async).
use super::{RuleSpec, data::Data, hint};
use crate::{
    report::read::activity::copy_kind_name,
    stats::format::{Table, Value},
};

const HINT: &str = "Copies of pageable host memory are staged and do not overlap the host: \
                    allocate the host buffer with hggcMallocHost (pinned).";

fn memory(kind: Option<i32>) -> Value {
    Value::Str(
        match kind {
            Some(1) => "Pageable",
            Some(2) => "Pinned",
            Some(3) => "Device",
            _ => "Unknown",
        }
        .into(),
    )
}

pub fn run(data: &Data, _spec: &RuleSpec) -> Table {
    let rows = data
        .activities
        .iter()
        // Only copies carry a source kind.
        .filter(|a| a.is_pageable_copy())
        .map(|a| {
            let call = data.call_of(a);
            vec![
                Value::Int(a.end - a.start),
                Value::Int(a.start),
                Value::Int(a.end),
                Value::Int(a.pid.into()),
                call.map_or(Value::Null, |c| Value::Int(c.api.tid.into())),
                Value::Int(a.device.into()),
                Value::Int(a.stream.into()),
                a.bytes.map_or(Value::Null, |b| Value::Int(b as i64)),
                a.copy_kind
                    .map_or(Value::Null, |k| Value::Str(copy_kind_name(k).into())),
                memory(a.src_kind),
                memory(a.dst_kind),
                call.map_or(Value::Null, |c| Value::Str(c.name.into())),
                Value::Int(a.correlation.into()),
                hint(HINT),
            ]
        })
        .collect();
    Table {
        stream: None,
        title: "Pageable Memory Copies (hggc_memcpy_pageable)".into(),
        headers: vec![
            "Duration (ns)",
            "Start (ns)",
            "End (ns)",
            "PID",
            "TID",
            "Device ID",
            "Stream",
            "Bytes",
            "Copy Kind",
            "Src Kind",
            "Dst Kind",
            "API",
            "CorrId",
            "Hint",
        ],
        rows,
    }
}
