//! `processes`: each traced process's control group, container and rank,
//! from the report's `processes` table (a report from before the table
//! lists none).
use arrow::array::Array;

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, reader, schema::processes as p};

pub fn processes(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    // Reports from before the rank column have none.
    let ranks = crate::report::read::processes::process_ranks(report)?;
    let columns = [
        p::TS,
        p::PID,
        p::CGROUP_PATH_ID,
        p::CGROUP_V2,
        p::CGROUP_ID,
        p::CONTAINER_ID,
        p::CONTAINER_RUNTIME,
    ];
    let mut rows = Vec::new();
    for b in p::scan(report, &columns)? {
        let b = b?;
        let v = p::View(&b);
        let (ts, pid, path) = (v.ts()?, v.pid()?, v.cgroup_path_id()?);
        let (v2, id) = (v.cgroup_v2()?, v.cgroup_id()?);
        let (container, runtime) = (v.container_id()?, v.container_runtime()?);
        let opt_str = |a: &arrow::array::StringArray, i: usize| {
            if a.is_valid(i) {
                Value::Str(a.value(i).to_string())
            } else {
                Value::Null
            }
        };
        for i in 0..b.num_rows() {
            rows.push((
                (pid[i], ts[i]),
                vec![
                    Value::Int(pid[i].into()),
                    Value::Str(strings.get(path[i]).unwrap_or("[unknown]").to_string()),
                    Value::Int(if v2.value(i) { 2 } else { 1 }),
                    if id.is_valid(i) {
                        Value::Int(id.value(i) as i64)
                    } else {
                        Value::Null
                    },
                    opt_str(container, i),
                    opt_str(runtime, i),
                    ranks
                        .get(&pid[i])
                        .map_or(Value::Null, |r| Value::Int((*r).into())),
                ],
            ));
        }
    }
    rows.sort_by_key(|(key, _)| *key);
    Ok(Table {
        stream: None,
        title: "Processes (processes)".into(),
        headers: vec![
            "Pid",
            "Cgroup",
            "Cgroup Version",
            "Cgroup ID",
            "Container ID",
            "Container Runtime",
            "Rank",
        ],
        rows: rows.into_iter().map(|(_, r)| r).collect(),
    })
}
