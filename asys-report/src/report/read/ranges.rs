//! HGTX and NVTX ranges rebuilt from the recorded API calls (`hgtx_api`,
//! `nvtx_api`): what the range reports, the range filters and the exports
//! read.
//!
//! Push/pop ranges nest per thread and domain; a push returns its level and
//! its range ends at the matching pop. Start/end ranges are matched by the id
//! the start returned, on any thread. Domain and registered-string handles are
//! resolved from the calls that created them, per process.
use std::collections::HashMap;

use super::api::{ApiRows, CallColumns};
use crate::report::{ReportError, container::Container, reader, rows::ApiRow, schema::api};

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

/// The calls of `family`'s table in (start, end) order, with their text
/// and registers.
fn calls(report: &Container, family: Family) -> Result<Vec<ApiRow>, ReportError> {
    let extra = [api::TEXT_ID, api::TEXT_HANDLE, api::ARGS];
    let columns = [CallColumns::NAMES, &extra].concat();
    let mut out = super::collect(api::scan(report, family.table, &columns)?, |b, out| {
        out.extend(ApiRows::of(b)?.iter());
        Ok(())
    })?;
    out.sort_by_key(|c| (c.start, c.end));
    Ok(out)
}

/// Every push/pop and start/end range of the report.
pub fn ranges(report: &Container, family: Family) -> Result<Vec<Range>, ReportError> {
    let strings = reader::string_table(report)?;
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
    for c in &calls {
        let full = strings.get(c.name_id).unwrap_or("?");
        let name = full.strip_prefix(family.prefix).unwrap_or(full);
        let ret = c.return_value;
        // A call recorded without its registers reads as zeros.
        let args = c.args.unwrap_or_default();
        let text = c.text_id.map(|id| strings.get(id).unwrap_or(""));
        let message = |registered: &HashMap<(u32, u64), String>| {
            text.map(str::to_string).or_else(|| {
                c.text_handle
                    .and_then(|h| registered.get(&(c.pid, h)).cloned())
            })
        };
        // Domain functions take the domain handle first; 0 is the default domain.
        let domain = if name.starts_with("Domain") {
            args[0]
        } else {
            0
        };
        let domain_name = |h: u64| domains.get(&(c.pid, h)).cloned().unwrap_or_default();
        match name {
            "DomainCreateA" => {
                domains.insert((c.pid, ret as u64), text.unwrap_or_default().to_string());
            }
            "DomainRegisterStringA" => {
                registered.insert((c.pid, ret as u64), text.unwrap_or_default().to_string());
            }
            "RangePushA" | "RangePushW" | "RangePushEx" | "DomainRangePushEx" if ret >= 0 => {
                let name = message(&registered).unwrap_or_default();
                stacks
                    .entry((c.pid, c.tid, domain))
                    .or_default()
                    .push((c.start, ret, name));
            }
            "RangePop" | "DomainRangePop" if ret >= 0 => {
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
            "RangeStartA" | "RangeStartEx" | "DomainRangeStartEx" if ret != 0 => {
                let name = message(&registered).unwrap_or_default();
                started.insert((c.pid, ret as u64), (c.start, c.tid, name, domain));
            }
            "RangeEnd" | "DomainRangeEnd" => {
                let id = if name == "RangeEnd" { args[0] } else { args[1] };
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
