//! hggc_api_sync: calls that wait for the device (device, stream and event
//! synchronize) longer than `threshold=` ms (nsys cuda_api_sync).
use super::{RuleSpec, data::Data, hint};
use crate::stats::format::{Table, Value};

const HINT: &str = "The thread waited for the device: synchronize less often, or wait on an \
                    event for only the work whose results are needed.";

pub fn run(data: &Data, spec: &RuleSpec) -> Table {
    let min_ns = (spec.threshold * 1e6) as i64;
    let rows = data
        .calls
        .iter()
        .filter(|c| c.name.ends_with("Synchronize") && c.end - c.start >= min_ns)
        .map(|c| {
            vec![
                Value::Int(c.end - c.start),
                Value::Int(c.start),
                Value::Int(c.end),
                Value::Int(c.pid.into()),
                Value::Int(c.tid.into()),
                // The stream argument of hggcStreamSynchronize (0: default);
                // the other calls wait for no one stream.
                c.stream
                    .map_or(Value::Null, |s| Value::Str(format!("{s:#x}"))),
                Value::Str(c.name.into()),
                hint(HINT),
            ]
        })
        .collect();
    Table {
        stream: None,
        title: format!(
            "Synchronizing API Calls (hggc_api_sync, >= {} ms)",
            spec.threshold
        ),
        headers: vec![
            "Duration (ns)",
            "Start (ns)",
            "End (ns)",
            "PID",
            "TID",
            "Stream",
            "Name",
            "Hint",
        ],
        rows,
    }
}
