//! hggc_api_backtrace: the call stacks recorded for hggc API calls
//! (`--hggc-backtrace`), one row per frame, innermost first.
use std::collections::HashMap;

use arrow::array::Array;

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
    use schema::api_stacks as st;
    let columns = [
        st::PID,
        st::TID,
        st::CALL_START,
        st::DEPTH,
        st::FUNCTION_ID,
        st::FILE_ID,
        st::LINE,
        st::MODULE_ID,
        st::INLINED,
    ];
    for b in st::scan(report, &columns)? {
        let b = b?;
        let v = st::View(&b);
        let (pid, tid, start, depth) = (v.pid()?, v.tid()?, v.call_start()?, v.depth()?);
        let (function, file, line) = (v.function_id()?, v.file_id()?, v.line()?);
        let (module, inlined) = (v.module_id()?, v.inlined()?);
        for i in 0..b.num_rows() {
            let key = (tid[i], start[i]);
            if probe_hits.contains(&key) && !api_names.contains_key(&key) {
                continue;
            }
            let module = strings.get(module[i]).unwrap_or("");
            rows.push(vec![
                Value::Int(start[i]),
                Value::Int(pid[i] as i64),
                Value::Int(tid[i] as i64),
                Value::Str(api_names.get(&key).cloned().unwrap_or_default()),
                Value::Int(depth[i] as i64),
                Value::Str(strings.get(function[i]).unwrap_or("?").to_string()),
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
