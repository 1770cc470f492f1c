//! hggc_api_sync: calls that wait for the device (device, stream and event
//! synchronize) longer than `threshold=` ms (nsys cuda_api_sync): hggc's
//! from its API table, CUDA's from CUPTI's synchronization records
//! (`cuda_sync`), which say what was waited on whichever API (runtime,
//! driver, a library's static runtime) made the call.
use super::{RuleSpec, data::Data, hint};
use crate::stats::format::{Table, Value};

const HINT: &str = "The thread waited for the device: synchronize less often, or wait on an \
                    event for only the work whose results are needed.";

pub fn run(data: &Data, spec: &RuleSpec) -> Table {
    let min_ns = (spec.threshold * 1e6) as i64;
    let rows = data
        .calls
        .iter()
        .filter(|c| c.name.ends_with("Synchronize") && c.api.end - c.api.start >= min_ns)
        .map(|call| {
            let c = &call.api;
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
                Value::Str(call.name.into()),
                hint(HINT),
            ]
        });
    // A stream waiting on an event blocks no host thread: not a finding.
    let syncs = data
        .syncs
        .iter()
        .filter(|s| s.blocks_host() && s.duration() as i64 >= min_ns)
        .map(|s| {
            vec![
                Value::Int(s.duration() as i64),
                Value::Int(s.start),
                Value::Int(s.end),
                Value::Int(s.pid.into()),
                // CUPTI's record names no thread.
                Value::Null,
                if s.stream == crate::report::read::cuda::NONE {
                    Value::Null
                } else {
                    Value::Str(s.stream.to_string())
                },
                Value::Str(s.call_name().into()),
                hint(HINT),
            ]
        });
    let mut rows: Vec<Vec<Value>> = rows.chain(syncs).collect();
    // In time order across both sources.
    rows.sort_by_key(|r| match r[1] {
        Value::Int(t) => t,
        _ => 0,
    });
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
