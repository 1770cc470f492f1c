//! pccl_late_rank: collectives where one rank arrived `threshold=` ms or
//! more after the first: the others waited for it. Every rank calls the
//! collectives in the same order, so the n-th call of a name in each rank
//! (process) is one operation.
use std::collections::BTreeMap;

use super::{RuleSpec, data::Data, hint};
use crate::stats::format::{Table, Value};

const HINT: &str = "The other ranks waited for this one: look at what it did before the \
                    collective (uneven work, data loading, a slow host) and balance it.";

pub fn run(data: &Data, spec: &RuleSpec) -> Table {
    let min_ns = (spec.threshold * 1e6) as i64;
    // (name, n) → each rank's n-th call of that name.
    let mut ops: BTreeMap<(&str, usize), Vec<&super::data::Collective>> = BTreeMap::new();
    let mut seen: BTreeMap<(u32, &str), usize> = BTreeMap::new();
    for c in &data.collectives {
        let n = seen.entry((c.pid, c.name.as_str())).or_default();
        ops.entry((c.name.as_str(), *n)).or_default().push(c);
        *n += 1;
    }
    let mut rows = Vec::new();
    for ((name, n), calls) in ops {
        if calls.len() < 2 {
            continue;
        }
        let first = calls.iter().map(|c| c.start).min().unwrap_or(0);
        let Some(last) = calls.iter().max_by_key(|c| (c.start, c.pid)) else {
            continue;
        };
        if last.start - first < min_ns {
            continue;
        }
        rows.push((
            last.start - first,
            vec![
                Value::Int(last.start - first),
                Value::Int(first),
                Value::Int(last.start),
                Value::Int(last.pid.into()),
                Value::Int(last.tid.into()),
                Value::Str(name.into()),
                Value::Int(n as i64 + 1),
                Value::Int(calls.len() as i64),
                hint(HINT),
            ],
        ));
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    Table {
        title: format!("Late Ranks (pccl_late_rank, >= {} ms)", spec.threshold),
        headers: vec![
            "Lateness (ns)",
            "First Arrival (ns)",
            "Late Arrival (ns)",
            "PID",
            "TID",
            "Collective",
            "Instance",
            "Ranks",
            "Hint",
        ],
        rows: rows.into_iter().map(|r| r.1).collect(),
    }
}
