//! hggc_memset_sync: hggcMemset calls, which block the host until the
//! device has written the memory (nsys cuda_memset_sync).
use super::{RuleSpec, data::Data, hint};
use crate::stats::format::{Table, Value};

const HINT: &str = "A synchronous memset blocks the thread until the device is done: use \
                    hggcMemsetAsync on a stream.";

pub fn run(data: &Data, _spec: &RuleSpec) -> Table {
    let rows = data
        .calls
        .iter()
        .filter(|c| c.name == "hggcMemset")
        .map(|c| {
            let work = data.work_of(c);
            vec![
                Value::Int(c.end - c.start),
                Value::Int(c.start),
                Value::Int(c.end),
                Value::Int(c.pid.into()),
                Value::Int(c.tid.into()),
                work.map_or(Value::Null, |w| Value::Int(w.device.into())),
                work.map_or(Value::Null, |w| Value::Int(w.stream.into())),
                c.bytes.map_or(Value::Null, |b| Value::Int(b as i64)),
                c.correlation.map_or(Value::Null, |v| Value::Int(v.into())),
                hint(HINT),
            ]
        })
        .collect();
    Table {
        title: "Synchronous Memset (hggc_memset_sync)".into(),
        headers: vec![
            "Duration (ns)",
            "Start (ns)",
            "End (ns)",
            "PID",
            "TID",
            "Device ID",
            "Stream",
            "Bytes",
            "CorrId",
            "Hint",
        ],
        rows,
    }
}
