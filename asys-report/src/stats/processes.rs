//! `processes`: each traced process's control group, container and rank,
//! from the report's `processes` table (a report from before the table
//! lists none).
use arrow::{
    array::Array,
    datatypes::{Int64Type, UInt32Type, UInt64Type},
};

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, reader, schema::processes as p};

pub fn processes(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    // Reports from before the rank column have none.
    let ranks = crate::report::set::process_ranks(report)?;
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
    for b in reader::scan(report, crate::report::schema::PROCESSES, &columns)? {
        let b = b?;
        let ts = b.prim::<Int64Type>(p::TS)?;
        let pid = b.prim::<UInt32Type>(p::PID)?;
        let path = b.prim::<UInt32Type>(p::CGROUP_PATH_ID)?;
        let v2 = b.bools(p::CGROUP_V2)?;
        let id = b.prim::<UInt64Type>(p::CGROUP_ID)?;
        let container = b.strs(p::CONTAINER_ID)?;
        let runtime = b.strs(p::CONTAINER_RUNTIME)?;
        let opt_str = |a: &arrow::array::StringArray, i: usize| {
            if a.is_valid(i) {
                Value::Str(a.value(i).to_string())
            } else {
                Value::Null
            }
        };
        for i in 0..b.num_rows() {
            rows.push((
                (pid.value(i), ts.value(i)),
                vec![
                    Value::Int(pid.value(i).into()),
                    Value::Str(
                        strings
                            .get(path.value(i))
                            .unwrap_or("[unknown]")
                            .to_string(),
                    ),
                    Value::Int(if v2.value(i) { 2 } else { 1 }),
                    if id.is_valid(i) {
                        Value::Int(id.value(i) as i64)
                    } else {
                        Value::Null
                    },
                    opt_str(container, i),
                    opt_str(runtime, i),
                    ranks
                        .get(&pid.value(i))
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
