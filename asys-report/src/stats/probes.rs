//! `probe_sum` and `probe_trace`: the hits of user-defined probes
//! (`--probe`, the `probes` table). A call probe's duration is its return
//! less its entry; any other probe's hits take no time (duration 0), so
//! its summary is a count.
use std::collections::HashMap;

use super::{
    api_sum::{summarize_groups, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{ReportError, container::Container, reader, schema::probes as p};

/// One hit, as the reports show it.
struct Hit {
    start: i64,
    end: i64,
    pid: u32,
    tid: u32,
    name: String,
    kind: String,
    ret: Option<i64>,
    args: String,
}

fn hits(report: &Container) -> Result<Vec<Hit>, ReportError> {
    let strings = reader::string_table(report)?;
    let columns = [
        p::START,
        p::END,
        p::PID,
        p::TID,
        p::NAME_ID,
        p::KIND,
        p::HAS_RETURN,
        p::RETURN_VALUE,
        p::ARGS,
    ];
    let mut out = Vec::new();
    for b in p::scan(report, &columns)? {
        let b = b?;
        let v = p::View(&b);
        let (start, end, pid, tid) = (v.start()?, v.end()?, v.pid()?, v.tid()?);
        let (name, kind, has_ret, ret, args) = (
            v.name_id()?,
            v.kind()?,
            v.has_return()?,
            v.return_value()?,
            v.args()?,
        );
        for i in 0..b.num_rows() {
            out.push(Hit {
                start: start[i],
                end: end[i],
                pid: pid[i],
                tid: tid[i],
                name: strings.get(name[i]).unwrap_or("[unknown]").to_string(),
                kind: kind.value(i).to_string(),
                ret: has_ret.value(i).then_some(ret[i]),
                args: args.value(i).to_string(),
            });
        }
    }
    Ok(out)
}

/// Per probe: hits, and the total, average, median, minimum and maximum
/// duration (call probes; 0 for the others), most total time first.
pub fn probe_sum(report: &Container) -> Result<Table, ReportError> {
    let mut groups: HashMap<(String, String), Vec<u64>> = HashMap::new();
    for h in hits(report)? {
        groups
            .entry((h.name, h.kind))
            .or_default()
            .push(super::duration(h.start, h.end));
    }
    let (sums, grand) = summarize_groups(groups);
    let mut headers = time_headers("Count");
    headers.extend(["Kind", "Probe"]);
    Ok(Table {
        stream: None,
        title: "User Probe Summary (probe_sum)".into(),
        headers,
        rows: sums
            .into_iter()
            .map(|((name, kind), s)| {
                let mut row = time_columns(&s, grand);
                row.extend([Value::Str(kind), Value::Str(name)]);
                row
            })
            .collect(),
    })
}

/// Frames (depth, function name) by the thread and start of their hit.
type Stacks = HashMap<(u32, i64), Vec<(u32, String)>>;

/// The user stacks of hits (`--probe-backtrace`), by thread and start:
/// the function names, innermost first (`api_stacks` rows keyed as an API
/// call's stack is).
fn stacks(report: &Container) -> Result<Stacks, ReportError> {
    use crate::report::schema::api_stacks as a;
    let strings = reader::string_table(report)?;
    let mut out = Stacks::new();
    for b in a::scan(report, &[a::TID, a::CALL_START, a::DEPTH, a::FUNCTION_ID])? {
        let b = b?;
        let v = a::View(&b);
        let (tid, start, depth, function) =
            (v.tid()?, v.call_start()?, v.depth()?, v.function_id()?);
        for i in 0..b.num_rows() {
            out.entry((tid[i], start[i])).or_default().push((
                depth[i],
                strings.get(function[i]).unwrap_or("[unknown]").to_string(),
            ));
        }
    }
    Ok(out)
}

/// Every hit in start order, with its arguments, return value and, with
/// `--probe-backtrace`, the user stack above it (callers, innermost first).
pub fn probe_trace(report: &Container) -> Result<Table, ReportError> {
    let mut hits = hits(report)?;
    hits.sort_by_key(|h| (h.start, h.end));
    let mut stacks = if hits.is_empty() {
        HashMap::new()
    } else {
        stacks(report)?
    };
    Ok(Table {
        stream: None,
        title: "User Probe Trace (probe_trace)".into(),
        headers: vec![
            "Start (ns)",
            "Duration (ns)",
            "Pid",
            "Tid",
            "Kind",
            "Probe",
            "Result",
            "Arguments",
            "Stack",
        ],
        rows: hits
            .into_iter()
            .map(|h| {
                let stack = stacks
                    .remove(&(h.tid, h.start))
                    .map_or(String::new(), |mut f| {
                        f.sort_by_key(|(d, _)| *d);
                        f.into_iter()
                            .map(|(_, n)| n)
                            .collect::<Vec<_>>()
                            .join(" <- ")
                    });
                vec![
                    Value::Int(h.start),
                    Value::Int(super::duration(h.start, h.end) as i64),
                    Value::Int(h.pid.into()),
                    Value::Int(h.tid.into()),
                    Value::Str(h.kind),
                    Value::Str(h.name),
                    h.ret.map_or(Value::Null, Value::Int),
                    Value::Str(h.args),
                    Value::Str(stack),
                ]
            })
            .collect(),
    })
}
