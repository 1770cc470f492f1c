//! `libraries`: the libraries asys probed (the `libraries` table), with how
//! many recorded calls of each API table point to each by `libraryId`.
use std::collections::BTreeMap;

use arrow::array::Array;

use super::format::{Table, Value};
use crate::{
    report::{ReportError, container::Container, schema, schema::api},
    trace_items::TraceItem,
};

/// One row per probed library; a report written before the table existed
/// (or with no probed library) gives an empty table, not an error.
pub fn libraries(report: &Container) -> Result<Table, ReportError> {
    use schema::libraries as l;
    let mut calls: BTreeMap<u32, u64> = BTreeMap::new();
    for (_, item) in TraceItem::SUPPORTED {
        for b in api::scan(report, &item.table(), &[api::LIBRARY_ID])? {
            for &id in api::View(&b?).library_id()? {
                *calls.entry(id).or_default() += 1;
            }
        }
    }
    let mut rows = Vec::new();
    let columns = [l::ID, l::ITEMS, l::FUNCTIONS, l::BUILD_ID, l::PATH];
    for b in l::scan(report, &columns)? {
        let b = b?;
        let v = l::View(&b);
        let (id, functions) = (v.id()?, v.functions()?);
        let (items, build_id, path) = (v.items()?, v.build_id()?, v.path()?);
        for i in 0..b.num_rows() {
            rows.push(vec![
                Value::Int(id[i].into()),
                Value::Str(items.value(i).into()),
                Value::Int(functions[i].into()),
                Value::Int(calls.get(&id[i]).copied().unwrap_or(0) as i64),
                if build_id.is_null(i) {
                    Value::Null
                } else {
                    Value::Str(build_id.value(i).into())
                },
                Value::Str(path.value(i).into()),
            ]);
        }
    }
    Ok(Table {
        stream: None,
        title: "Probed Libraries (libraries)".into(),
        headers: vec!["Id", "Items", "Functions", "Calls", "Build Id", "Path"],
        rows,
    })
}
