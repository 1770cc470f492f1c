//! hggc_memset_sync: hggcMemset calls, which block the host until the
//! device has written the memory (nsys cuda_memset_sync).
use super::{CALL_HEADERS, RuleSpec, call_columns, data::Data, hint};
use crate::stats::format::{Table, Value};

const HINT: &str = "A synchronous memset blocks the thread until the device is done: use \
                    hggcMemsetAsync on a stream.";

pub fn run(data: &Data, _spec: &RuleSpec) -> Table {
    let rows = data
        .calls
        .iter()
        .filter(|c| c.name == "hggcMemset")
        .map(|c| {
            let mut row = call_columns(data, c);
            row.extend([
                c.api
                    .correlation
                    .map_or(Value::Null, |v| Value::Int(v.into())),
                hint(HINT),
            ]);
            row
        })
        .collect();
    Table {
        stream: None,
        title: "Synchronous Memset (hggc_memset_sync)".into(),
        headers: CALL_HEADERS.into_iter().chain(["CorrId", "Hint"]).collect(),
        rows,
    }
}
