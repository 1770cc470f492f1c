//! hggc_memcpy_sync: hggcMemcpy calls, which block the host until the copy
//! is done (nsys cuda_memcpy_sync).
use super::{RuleSpec, data::Data, hint};
use crate::stats::{
    device::copy_kind_name,
    format::{Table, Value},
};

const HINT: &str = "A synchronous copy blocks the thread until the device is done: use \
                    hggcMemcpyAsync on a stream, from pinned memory (hggcMallocHost), and \
                    synchronize only where the data is needed.";

pub fn run(data: &Data, _spec: &RuleSpec) -> Table {
    let rows = data
        .calls
        .iter()
        .filter(|c| c.name == "hggcMemcpy")
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
                c.copy_kind
                    .map_or(Value::Null, |k| Value::Str(copy_kind_name(k).into())),
                c.correlation.map_or(Value::Null, |v| Value::Int(v.into())),
                hint(HINT),
            ]
        })
        .collect();
    Table {
        title: "Synchronous Memcpy (hggc_memcpy_sync)".into(),
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
            "CorrId",
            "Hint",
        ],
        rows,
    }
}
