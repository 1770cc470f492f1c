//! pccl_late_rank: collectives where one rank arrived `threshold=` ms or
//! more after the first: the others waited for it. Operations are matched
//! across ranks (processes, of one report or several) as the desync reports
//! match them ([`crate::report::read::collectives::operations`]).
use super::{RuleSpec, data::Data, hint};
use crate::{
    report::read::collectives::operations,
    stats::format::{Table, Value},
};

const HINT: &str = "The other ranks waited for this one: look at what it did before the \
                    collective (uneven work, data loading, a slow host) and balance it.";

pub fn run(data: &Data, spec: &RuleSpec) -> Table {
    let min_ns = (spec.threshold * 1e6) as i64;
    let mut rows = Vec::new();
    for op in operations(&data.collectives) {
        if op.calls.len() < 2 || op.spread() < min_ns {
            continue;
        }
        let Some(last) = op.last() else {
            continue;
        };
        rows.push((
            op.spread(),
            vec![
                Value::Int(op.spread()),
                Value::Int(op.first()),
                Value::Int(last.start),
                Value::Int(last.pid.into()),
                Value::Int(last.tid.into()),
                last.rank.map_or(Value::Null, |r| Value::Int(r.into())),
                data.reports
                    .get(last.report)
                    .map_or(Value::Null, |r| Value::Str(r.clone())),
                Value::Str(op.name.into()),
                Value::Int(op.instance as i64),
                Value::Int(op.calls.len() as i64),
                hint(HINT),
            ],
        ));
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    Table {
        stream: None,
        title: format!("Late Ranks (pccl_late_rank, >= {} ms)", spec.threshold),
        headers: vec![
            "Lateness (ns)",
            "First Arrival (ns)",
            "Late Arrival (ns)",
            "PID",
            "TID",
            "Rank",
            "Report",
            "Collective",
            "Instance",
            "Ranks",
            "Hint",
        ],
        rows: rows.into_iter().map(|r| r.1).collect(),
    }
}
