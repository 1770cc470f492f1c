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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::builder::ReportBuilder;

    /// An hgtx call: `name` (with the prefix), its times, return value,
    /// text and registers.
    pub(crate) fn call(
        b: &mut ReportBuilder,
        name: &str,
        (start, end): (i64, i64),
        tid: u32,
        ret: i64,
        text: Option<&str>,
        args: [u64; 8],
    ) -> ApiRow {
        ApiRow {
            start,
            end,
            pid: 5,
            tid,
            name_id: b.string(name),
            return_value: ret,
            text_id: text.map(|t| b.string(t)),
            args: Some(args),
            ..Default::default()
        }
    }

    /// Nested push/pop ranges on one thread, a start/end range ended on
    /// another thread, and a push in a named domain.
    pub(crate) fn report() -> (Container, Vec<ApiRow>) {
        let mut b = ReportBuilder::new().expect("builder");
        let no = [0; 8];
        let domain = 0xd0;
        let mut in_domain = no;
        in_domain[0] = domain;
        let mut end_of = no;
        end_of[0] = 7;
        let calls = vec![
            call(
                &mut b,
                "hgtxDomainCreateA",
                (1, 2),
                1,
                domain as i64,
                Some("io"),
                no,
            ),
            call(&mut b, "hgtxRangePushA", (10, 11), 1, 0, Some("outer"), no),
            call(&mut b, "hgtxRangePushA", (20, 21), 1, 1, Some("inner"), no),
            call(&mut b, "hgtxRangePop", (30, 31), 1, 1, None, no),
            call(&mut b, "hgtxRangePop", (40, 42), 1, 0, None, no),
            call(&mut b, "hgtxRangeStartA", (50, 51), 1, 7, Some("async"), no),
            call(
                &mut b,
                "hgtxDomainRangePushEx",
                (55, 56),
                2,
                0,
                Some("read"),
                in_domain,
            ),
            call(
                &mut b,
                "hgtxDomainRangePop",
                (60, 66),
                2,
                0,
                None,
                in_domain,
            ),
            call(&mut b, "hgtxRangeEnd", (70, 73), 2, 0, None, end_of),
        ];
        b.table::<api::Table>(HGTX.table, &calls).expect("hgtx_api");
        (b.finish_temporary().expect("report"), calls)
    }

    /// Each push ends at its pop, innermost first; a start ends at the end
    /// of its id on whatever thread; a domain's range carries its name.
    #[test]
    fn pushes_end_at_their_pops_and_starts_at_their_ends() {
        let (report, calls) = report();
        // start, end, thread, level, name, domain, push/pop.
        type Seen = (i64, i64, u32, Option<i64>, String, String, bool);
        let got: Vec<Seen> = ranges(&report, HGTX)
            .expect("ranges")
            .into_iter()
            .map(|r| (r.start, r.end, r.tid, r.level, r.name, r.domain, r.push_pop))
            .collect();
        // (push or start, its end): indices into `calls`.
        let range = |open: usize, close: usize, level, name: &str, domain: &str, push| {
            let (o, c) = (&calls[open], &calls[close]);
            (
                o.start,
                c.end,
                o.tid,
                level,
                name.into(),
                domain.into(),
                push,
            )
        };
        let mut want = vec![
            range(1, 4, Some(0), "outer", "", true),
            range(2, 3, Some(1), "inner", "", true),
            range(5, 8, None, "async", "", false),
            range(6, 7, Some(0), "read", "io", true),
        ];
        want.sort_by_key(|r| (r.0, r.1));
        assert_eq!(got, want);
    }
}
