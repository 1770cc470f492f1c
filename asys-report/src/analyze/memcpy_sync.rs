//! hggc_memcpy_sync: hggcMemcpy calls, which block the host until the copy
//! is done (nsys cuda_memcpy_sync).
use super::{CALL_HEADERS, RuleSpec, call_columns, data::Data, hint};
use crate::{
    report::read::activity::copy_kind_name,
    stats::format::{Table, Value},
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
            let mut row = call_columns(data, c);
            row.extend([
                c.api
                    .copy_kind
                    .map_or(Value::Null, |k| Value::Str(copy_kind_name(k).into())),
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
        title: "Synchronous Memcpy (hggc_memcpy_sync)".into(),
        headers: CALL_HEADERS
            .into_iter()
            .chain(["Copy Kind", "CorrId", "Hint"])
            .collect(),
        rows,
    }
}
