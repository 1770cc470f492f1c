//! The `pccl_desync_sum` / `pccl_desync_trace` reports (and nccl's): how
//! far apart the ranks arrived at each collective operation
//! ([`crate::report::read::collectives`]), over one report holding several
//! ranks or several reports.
use std::collections::BTreeMap;

use super::format::{Table, Value};
use crate::report::{
    ReportError,
    read::collectives::{Collective, Library, Operation, load_set, operations},
    set::ReportSet,
};

fn rank_value(c: &Collective) -> Value {
    c.rank.map_or(Value::Null, |r| Value::Int(r.into()))
}

/// `pccl_desync_trace`: every rank's arrival at every operation.
pub fn desync_trace(set: &ReportSet, lib: Library) -> Result<Table, ReportError> {
    let calls = load_set(set, lib)?;
    let mut rows = Vec::new();
    for op in operations(&calls) {
        let (first, spread) = (op.first(), op.spread());
        let n = op.calls.len();
        for (i, c) in op.calls.iter().enumerate() {
            rows.push(vec![
                Value::Str(op.name.into()),
                Value::Int(op.instance as i64),
                Value::Str(set.members[c.report].name.clone()),
                rank_value(c),
                Value::Int(c.pid.into()),
                Value::Int(c.tid.into()),
                Value::Int(c.start),
                Value::Int(c.start - first),
                Value::Int(spread),
                Value::Int(i64::from(i + 1 == n && n > 1)),
            ]);
        }
    }
    let p = lib.prefix();
    Ok(Table {
        stream: None,
        title: format!(
            "{} Collective Arrivals ({p}_desync_trace)",
            p.to_ascii_uppercase()
        ),
        headers: vec![
            "Collective",
            "Instance",
            "Report",
            "Rank",
            "PID",
            "TID",
            "Arrival (ns)",
            "Behind First (ns)",
            "Spread (ns)",
            "Last",
        ],
        rows,
    })
}

/// `pccl_desync_sum`: per collective name, how far apart the ranks arrived
/// and who was last most often.
pub fn desync_sum(set: &ReportSet, lib: Library) -> Result<Table, ReportError> {
    let calls = load_set(set, lib)?;
    let mut by_name: BTreeMap<&str, Vec<Operation>> = BTreeMap::new();
    for op in operations(&calls) {
        if op.calls.len() > 1 {
            by_name.entry(op.name).or_default().push(op);
        }
    }
    let mut rows = Vec::new();
    for (name, ops) in &by_name {
        let mut spreads: Vec<i64> = ops.iter().map(Operation::spread).collect();
        spreads.sort_unstable();
        let mean = spreads.iter().map(|&s| s as f64).sum::<f64>() / spreads.len() as f64;
        let median = if spreads.len() % 2 == 1 {
            spreads[spreads.len() / 2] as f64
        } else {
            (spreads[spreads.len() / 2 - 1] + spreads[spreads.len() / 2]) as f64 / 2.0
        };
        // Who was last, by (report, pid); the first of equals wins.
        let mut last: BTreeMap<(usize, u32), (usize, &Collective)> = BTreeMap::new();
        for l in ops.iter().filter_map(Operation::last) {
            last.entry((l.report, l.pid)).or_insert((0, l)).0 += 1;
        }
        let Some((times, who)) = last.values().max_by_key(|(n, _)| *n).copied() else {
            continue;
        };
        rows.push(vec![
            Value::Str((*name).into()),
            Value::Int(ops.len() as i64),
            Value::Int(ops.iter().map(|o| o.calls.len()).max().unwrap_or(0) as i64),
            Value::Float(mean),
            Value::Float(median),
            Value::Int(*spreads.last().unwrap_or(&0)),
            Value::Str(set.members[who.report].name.clone()),
            rank_value(who),
            Value::Int(who.pid.into()),
            Value::Int(times as i64),
        ]);
    }
    let p = lib.prefix();
    Ok(Table {
        stream: None,
        title: format!(
            "{} Collective Desynchronisation Summary ({p}_desync_sum)",
            p.to_ascii_uppercase()
        ),
        headers: vec![
            "Collective",
            "Operations",
            "Ranks",
            "Mean Spread (ns)",
            "Median Spread (ns)",
            "Max Spread (ns)",
            "Most Often Last Report",
            "Most Often Last Rank",
            "Most Often Last PID",
            "Times Last",
        ],
        rows,
    })
}

/// Computes one report from a set of reports aligned on one timeline.
pub type SetReportFn = fn(&ReportSet) -> Result<Table, ReportError>;

/// The reports computed over a whole set at once (the others are computed
/// per report); `*_desync_summary` is the asys guide's spelling.
pub const SET_REPORTS: &[(&str, SetReportFn)] = &[
    ("pccl_desync_sum", |s| desync_sum(s, Library::Pccl)),
    ("pccl_desync_summary", |s| desync_sum(s, Library::Pccl)),
    ("pccl_desync_trace", |s| desync_trace(s, Library::Pccl)),
    ("nccl_desync_sum", |s| desync_sum(s, Library::Nccl)),
    ("nccl_desync_summary", |s| desync_sum(s, Library::Nccl)),
    ("nccl_desync_trace", |s| desync_trace(s, Library::Nccl)),
];

pub fn find(name: &str) -> Option<SetReportFn> {
    SET_REPORTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
}
