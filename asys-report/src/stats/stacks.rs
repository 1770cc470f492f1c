//! hggc_api_backtrace: the call stacks recorded for hggc API calls
//! (`--hggc-backtrace`), one row per frame, innermost first.
use std::collections::HashMap;

use arrow::{
    array::Array,
    datatypes::{Int64Type, UInt32Type},
};

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, reader, schema};

pub fn api_backtrace(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let mut api_names: HashMap<(u32, i64), String> = HashMap::new();
    let columns = [schema::api::TID, schema::api::START, schema::api::NAME_ID];
    for b in schema::api::scan(report, schema::HGGC_API, &columns)? {
        let b = b?;
        let v = schema::api::View(&b);
        let (tid, start, name) = (v.tid()?, v.start()?, v.name_id()?);
        for i in 0..b.num_rows() {
            let n = strings.get(name[i]).unwrap_or("?").to_string();
            api_names.insert((tid[i], start[i]), n);
        }
    }
    // Stacks of user-defined probes' hits (`--probe-backtrace`) share the
    // table, keyed the same way: they are probe_trace's, not this report's.
    let mut probe_hits = std::collections::HashSet::new();
    for b in schema::probes::scan(report, &[schema::probes::TID, schema::probes::START])? {
        let b = b?;
        let v = schema::probes::View(&b);
        let (tid, start) = (v.tid()?, v.start()?);
        for i in 0..b.num_rows() {
            probe_hits.insert((tid[i], start[i]));
        }
    }
    let mut rows = Vec::new();
    let columns = [
        schema::api_stacks::PID,
        schema::api_stacks::TID,
        schema::api_stacks::CALL_START,
        schema::api_stacks::DEPTH,
        schema::api_stacks::FUNCTION_ID,
        schema::api_stacks::FILE_ID,
        schema::api_stacks::LINE,
        schema::api_stacks::MODULE_ID,
        schema::api_stacks::INLINED,
    ];
    for b in reader::scan(report, schema::API_STACKS, &columns)? {
        let b = b?;
        let (pid, tid) = (
            b.prim::<UInt32Type>(schema::api_stacks::PID)?,
            b.prim::<UInt32Type>(schema::api_stacks::TID)?,
        );
        let start = b.prim::<Int64Type>(schema::api_stacks::CALL_START)?;
        let depth = b.prim::<UInt32Type>(schema::api_stacks::DEPTH)?;
        let function = b.prim::<UInt32Type>(schema::api_stacks::FUNCTION_ID)?;
        let file = b.prim::<UInt32Type>(schema::api_stacks::FILE_ID)?;
        let line = b.prim::<UInt32Type>(schema::api_stacks::LINE)?;
        let module = b.prim::<UInt32Type>(schema::api_stacks::MODULE_ID)?;
        let inlined = b.bools(schema::api_stacks::INLINED)?;
        for i in 0..b.num_rows() {
            let key = (tid.value(i), start.value(i));
            if probe_hits.contains(&key) && !api_names.contains_key(&key) {
                continue;
            }
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
        stream: None,
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
