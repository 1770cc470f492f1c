//! HGTX and NVTX ranges rebuilt from the recorded API calls: *_sum,
//! *_pushpop_trace, *_startend_trace (nsys: nvtx_sum, nvtx_pushpop_trace).
//!
//! Push/pop ranges nest per thread and domain; a push returns its level and
//! its range ends at the matching pop. Start/end ranges are matched by the id
//! the start returned, on any thread. Domain and registered-string handles are
//! resolved from the calls that created them, per process.
use std::collections::HashMap;

use arrow::array::Array;

use super::{
    api_sum::{CallColumns, summarize_groups, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{ReportError, container::Container, reader, schema::api};

struct Call {
    name: String,
    start: i64,
    end: i64,
    pid: u32,
    tid: u32,
    ret: i64,
    args: [u64; 8],
    text: Option<String>,
    text_handle: Option<u64>,
}

/// One rebuilt range.
pub struct Range {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub tid: u32,
    pub level: Option<i64>,
    pub name: String,
    pub domain: String,
    pub push_pop: bool,
}

/// A push waiting for its pop: (start, level, name).
type OpenPush = (i64, i64, String);

/// Which family: hgtx (the simulated library) or nvtx (NVTX v3 through asys's
/// tool). Names are matched without the prefix.
#[derive(Clone, Copy)]
pub struct Family {
    pub table: &'static str,
    pub prefix: &'static str,
    pub label: &'static str,
}

pub const HGTX: Family = Family {
    table: "hgtx_api",
    prefix: "hgtx",
    label: "HGTX",
};
pub const NVTX: Family = Family {
    table: "nvtx_api",
    prefix: "nvtx",
    label: "NVTX",
};

fn calls(report: &Container, family: Family) -> Result<Vec<Call>, ReportError> {
    let strings = reader::string_table(report)?;
    let mut out = Vec::new();
    let extra = [api::TEXT_ID, api::TEXT_HANDLE, api::ARGS];
    for b in api::scan(report, family.table, &[CallColumns::NAMES, &extra].concat())? {
        let b = b?;
        let CallColumns {
            start,
            end,
            pid,
            tid,
            name,
            ret,
        } = CallColumns::of(&b)?;
        let v = api::View(&b);
        let (text, handle) = (v.text_id()?, v.text_handle()?);
        let registers = v.registers()?;
        for i in 0..b.num_rows() {
            // A call recorded without its registers reads as zeros.
            let regs = registers.get(i).unwrap_or_default();
            let full = strings.get(name[i]).unwrap_or("?");
            out.push(Call {
                name: full.strip_prefix(family.prefix).unwrap_or(full).to_string(),
                start: start[i],
                end: end[i],
                pid: pid[i],
                tid: tid[i],
                ret: ret[i],
                args: regs,
                text: (!text.is_null(i))
                    .then(|| strings.get(text.value(i)).unwrap_or("").to_string()),
                text_handle: (!handle.is_null(i)).then(|| handle.value(i)),
            });
        }
    }
    out.sort_by_key(|c| (c.start, c.end));
    Ok(out)
}

/// Every push/pop and start/end range of the report.
pub fn ranges(report: &Container, family: Family) -> Result<Vec<Range>, ReportError> {
    let calls = calls(report, family)?;
    let mut domains: HashMap<(u32, u64), String> = HashMap::new();
    let mut registered: HashMap<(u32, u64), String> = HashMap::new();
    if family.prefix == NVTX.prefix {
        // What processes registered before asys reached them (attach).
        let meta = &report.metadata;
        let flat = |m: &std::collections::BTreeMap<
            u32,
            std::collections::BTreeMap<u64, String>,
        >| {
            m.iter()
                .flat_map(|(&pid, names)| names.iter().map(move |(&h, n)| ((pid, h), n.clone())))
                .collect::<Vec<_>>()
        };
        domains.extend(flat(&meta.nvtx_registered_domains));
        registered.extend(flat(&meta.nvtx_registered_strings));
    }
    // Open push ranges per (pid, tid, domain handle); open start ranges per (pid, id).
    let mut stacks: HashMap<(u32, u32, u64), Vec<OpenPush>> = HashMap::new();
    let mut started: HashMap<(u32, u64), (i64, u32, String, u64)> = HashMap::new();
    let mut out = Vec::new();
    let message = |c: &Call, registered: &HashMap<(u32, u64), String>| {
        c.text.clone().or_else(|| {
            c.text_handle
                .and_then(|h| registered.get(&(c.pid, h)).cloned())
        })
    };
    for c in &calls {
        // Domain functions take the domain handle first; 0 is the default domain.
        let domain = if c.name.starts_with("Domain") {
            c.args[0]
        } else {
            0
        };
        let domain_name = |h: u64| domains.get(&(c.pid, h)).cloned().unwrap_or_default();
        match c.name.as_str() {
            "DomainCreateA" => {
                domains.insert((c.pid, c.ret as u64), c.text.clone().unwrap_or_default());
            }
            "DomainRegisterStringA" => {
                registered.insert((c.pid, c.ret as u64), c.text.clone().unwrap_or_default());
            }
            "RangePushA" | "RangePushW" | "RangePushEx" | "DomainRangePushEx" if c.ret >= 0 => {
                let name = message(c, &registered).unwrap_or_default();
                stacks
                    .entry((c.pid, c.tid, domain))
                    .or_default()
                    .push((c.start, c.ret, name));
            }
            "RangePop" | "DomainRangePop" if c.ret >= 0 => {
                if let Some((start, level, name)) =
                    stacks.get_mut(&(c.pid, c.tid, domain)).and_then(Vec::pop)
                {
                    out.push(Range {
                        start,
                        end: c.end,
                        pid: c.pid,
                        tid: c.tid,
                        level: Some(level),
                        name,
                        domain: domain_name(domain),
                        push_pop: true,
                    });
                }
            }
            "RangeStartA" | "RangeStartEx" | "DomainRangeStartEx" if c.ret != 0 => {
                let name = message(c, &registered).unwrap_or_default();
                started.insert((c.pid, c.ret as u64), (c.start, c.tid, name, domain));
            }
            "RangeEnd" | "DomainRangeEnd" => {
                let id = if c.name == "RangeEnd" {
                    c.args[0]
                } else {
                    c.args[1]
                };
                if let Some((start, tid, name, d)) = started.remove(&(c.pid, id)) {
                    out.push(Range {
                        start,
                        end: c.end,
                        pid: c.pid,
                        tid,
                        level: None,
                        name,
                        domain: domain_name(d),
                        push_pop: false,
                    });
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|r| (r.start, r.end));
    Ok(out)
}

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
