//! hggc_api_backtrace: the call stacks recorded for hggc API calls
//! (`--hggc-backtrace`), one row per frame, innermost first.
use std::collections::HashMap;

use arrow::{
    array::{Array, AsArray},
    datatypes::{Int64Type, UInt32Type},
};

use super::{
    api_sum::col,
    format::{Table, Value},
};
use crate::report::{ReportError, container::Container, reader, schema};

pub fn api_backtrace(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let mut api_names: HashMap<(u32, i64), String> = HashMap::new();
    for b in reader::batches(report, "hggc_api")? {
        let (tid, start, name) = (
            col::<UInt32Type>(&b, "tid"),
            col::<Int64Type>(&b, "start"),
            col::<UInt32Type>(&b, "nameId"),
        );
        for i in 0..b.num_rows() {
            let n = strings.get(name.value(i)).unwrap_or("?").to_string();
            api_names.insert((tid.value(i), start.value(i)), n);
        }
    }
    let mut rows = Vec::new();
    for b in reader::batches(report, schema::API_STACKS)? {
        let (pid, tid) = (col::<UInt32Type>(&b, "pid"), col::<UInt32Type>(&b, "tid"));
        let start = col::<Int64Type>(&b, "callStart");
        let depth = col::<UInt32Type>(&b, "depth");
        let function = col::<UInt32Type>(&b, "functionId");
        let file = col::<UInt32Type>(&b, "fileId");
        let line = col::<UInt32Type>(&b, "line");
        let module = col::<UInt32Type>(&b, "moduleId");
        let inlined = b.column_by_name("inlined").unwrap().as_boolean();
        for i in 0..b.num_rows() {
            let key = (tid.value(i), start.value(i));
            let module = strings.get(module.value(i)).unwrap_or("");
            rows.push(vec![
                Value::Int(start.value(i)),
                Value::Int(pid.value(i) as i64),
                Value::Int(tid.value(i) as i64),
                Value::Str(api_names.get(&key).cloned().unwrap_or_default()),
                Value::Int(depth.value(i) as i64),
                Value::Str(strings.get(function.value(i)).unwrap_or("?").to_string()),
                if file.is_null(i) {
                    Value::Null
                } else {
                    Value::Str(strings.get(file.value(i)).unwrap_or("").to_string())
                },
                if line.is_null(i) {
                    Value::Null
                } else {
                    Value::Int(line.value(i) as i64)
                },
                Value::Str(module.rsplit('/').next().unwrap_or(module).to_string()),
                Value::Str(if inlined.value(i) { "yes" } else { "" }.into()),
            ]);
        }
    }
    Ok(Table {
        title: "HGGC API Call Stacks (hggc_api_backtrace)".into(),
        headers: vec![
            "Start (ns)",
            "Pid",
            "Tid",
            "API",
            "Depth",
            "Function",
            "File",
            "Line",
            "Module",
            "Inlined",
        ],
        rows,
    })
}
