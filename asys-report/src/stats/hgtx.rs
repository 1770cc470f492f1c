//! HGTX and NVTX range reports: *_sum, *_pushpop_trace, *_startend_trace
//! (nsys: nvtx_sum, nvtx_pushpop_trace), over the ranges
//! [`crate::report::read::ranges`] rebuilds from the recorded API calls.
use std::collections::HashMap;

use super::{
    api_sum::{summarize_groups, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{
    ReportError,
    container::Container,
    read::ranges::{Family, HGTX, NVTX, Range, ranges},
};

fn label(r: &Range) -> String {
    if r.domain.is_empty() {
        r.name.clone()
    } else {
        format!("{}@{}", r.name, r.domain)
    }
}

pub fn hgtx_sum(report: &Container) -> Result<Table, ReportError> {
    range_sum(report, HGTX)
}

pub fn nvtx_sum(report: &Container) -> Result<Table, ReportError> {
    range_sum(report, NVTX)
}

pub fn hgtx_pushpop_trace(report: &Container) -> Result<Table, ReportError> {
    pushpop_trace(report, HGTX)
}

pub fn nvtx_pushpop_trace(report: &Container) -> Result<Table, ReportError> {
    pushpop_trace(report, NVTX)
}

pub fn hgtx_startend_trace(report: &Container) -> Result<Table, ReportError> {
    startend_trace(report, HGTX)
}

pub fn nvtx_startend_trace(report: &Container) -> Result<Table, ReportError> {
    startend_trace(report, NVTX)
}

fn range_sum(report: &Container, family: Family) -> Result<Table, ReportError> {
    let mut groups: HashMap<(String, &'static str), Vec<u64>> = HashMap::new();
    for r in ranges(report, family)? {
        let style = if r.push_pop { "PushPop" } else { "StartEnd" };
        groups
            .entry((label(&r), style))
            .or_default()
            .push(super::duration(r.start, r.end));
    }
    let (sums, grand) = summarize_groups(groups);
    let rows = sums
        .into_iter()
        .map(|((range, style), s)| {
            let mut row = time_columns(&s, grand);
            row.extend([Value::Str(style.into()), Value::Str(range)]);
            row
        })
        .collect();
    Ok(Table {
        stream: None,
        title: format!("{} Range Summary ({}_sum)", family.label, family.prefix),
        headers: {
            let mut h = time_headers("Instances");
            h.extend(["Style", "Range"]);
            h
        },
        rows,
    })
}

fn pushpop_trace(report: &Container, family: Family) -> Result<Table, ReportError> {
    let rows = ranges(report, family)?
        .into_iter()
        .filter(|r| r.push_pop)
        .map(|r| {
            vec![
                Value::Int(r.start),
                Value::Int(r.end),
                Value::Int(super::signed_duration(r.start, r.end)),
                r.level.map(Value::Int).unwrap_or(Value::Null),
                Value::Str(r.name.clone()),
                Value::Str(r.domain.clone()),
                Value::Int(r.pid as i64),
                Value::Int(r.tid as i64),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: format!(
            "{} Push/Pop Range Trace ({}_pushpop_trace)",
            family.label, family.prefix
        ),
        headers: vec![
            "Start (ns)",
            "End (ns)",
            "Duration (ns)",
            "Lvl",
            "Name",
            "Domain",
            "Pid",
            "Tid",
        ],
        rows,
    })
}

fn startend_trace(report: &Container, family: Family) -> Result<Table, ReportError> {
    let rows = ranges(report, family)?
        .into_iter()
        .filter(|r| !r.push_pop)
        .map(|r| {
            vec![
                Value::Int(r.start),
                Value::Int(r.end),
                Value::Int(super::signed_duration(r.start, r.end)),
                Value::Str(r.name.clone()),
                Value::Str(r.domain.clone()),
                Value::Int(r.pid as i64),
                Value::Int(r.tid as i64),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: format!(
            "{} Start/End Range Trace ({}_startend_trace)",
            family.label, family.prefix
        ),
        headers: vec![
            "Start (ns)",
            "End (ns)",
            "Duration (ns)",
            "Name",
            "Domain",
            "Pid",
            "Start Tid",
        ],
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(v: &Value) -> i64 {
        match v {
            Value::Int(i) => *i,
            v => panic!("{v:?}"),
        }
    }

    /// The summary has one row per range name (and domain) and style, of
    /// the ranges' durations; the traces list each range once, push/pop
    /// and start/end apart.
    #[test]
    fn range_reports_add_up_the_ranges() {
        let (report, _) = crate::report::read::ranges::tests::report();
        let all = ranges(&report, HGTX).expect("ranges");
        let t = hgtx_sum(&report).expect("hgtx_sum");
        let mut got: Vec<(String, i64, i64)> = t
            .column("Range")
            .into_iter()
            .zip(
                t.column("Total Time (ns)")
                    .into_iter()
                    .zip(t.column("Instances")),
            )
            .map(|(r, (total, n))| match r {
                Value::Str(r) => (r.clone(), int(total), int(n)),
                v => panic!("{v:?}"),
            })
            .collect();
        got.sort();
        let mut want: Vec<(String, i64, i64)> =
            all.iter().map(|r| (label(r), r.end - r.start, 1)).collect();
        want.sort();
        assert_eq!(got, want);
        assert!(want.iter().any(|(l, _, _)| l == "read@io"));
        let pushpop = hgtx_pushpop_trace(&report).expect("pushpop");
        let want: Vec<i64> = all.iter().filter(|r| r.push_pop).map(|r| r.start).collect();
        assert_eq!(
            pushpop
                .column("Start (ns)")
                .into_iter()
                .map(int)
                .collect::<Vec<_>>(),
            want
        );
        let startend = hgtx_startend_trace(&report).expect("startend");
        let want: Vec<i64> = all.iter().filter(|r| !r.push_pop).map(|r| r.end).collect();
        assert_eq!(
            startend
                .column("End (ns)")
                .into_iter()
                .map(int)
                .collect::<Vec<_>>(),
            want
        );
    }
}
