//! Collectives across ranks (`pccl_api`, `nccl_api`): which calls are one
//! operation, over one report holding several ranks or several reports
//! (what the desync reports and the late-rank rule read).
//!
//! Every rank calls the collectives in the same order, so the n-th call of
//! one name in each rank is one operation. A rank is a process: within a
//! report its pid tells it from the others, across reports the report too.
//! The library's communicator handle is not recorded (calls keep no
//! arguments), so a job using several communicators at once has their
//! calls of one name counted as one sequence.
use std::collections::BTreeMap;

use crate::report::{
    ReportError, container::Container, reader, schema::api, set::Member, set::ReportSet,
};

/// The collective operations (after the library's prefix) every rank of a
/// communicator calls in the same order.
/// `Bcast` is NCCL's older name of Broadcast (its own sequence: the names
/// differ); AlltoAll, Gather and Scatter are NCCL 2.28's.
const OPERATIONS: &[&str] = &[
    "AllReduce",
    "AllGather",
    "Broadcast",
    "Bcast",
    "ReduceScatter",
    "Reduce",
    "AlltoAll",
    "Gather",
    "Scatter",
];

/// A collective library asys traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    Pccl,
    Nccl,
}

impl Library {
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Pccl => "pccl",
            Self::Nccl => "nccl",
        }
    }

    fn table(self) -> &'static str {
        match self {
            Self::Pccl => "pccl_api",
            Self::Nccl => "nccl_api",
        }
    }
}

/// One collective call of one rank.
#[derive(Debug, Clone)]
pub struct Collective {
    /// When the call began (the rank's arrival), on the set's timeline.
    pub start: i64,
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    /// Which report of the set it is from (0 for a single report).
    pub report: usize,
    /// The process's rank, when it recorded one.
    pub rank: Option<u32>,
}

/// The collective calls of `lib` in `report`, their times moved by
/// `offset_ns` onto a set's timeline, sorted by start.
pub fn load(
    report: &Container,
    lib: Library,
    index: usize,
    offset_ns: i64,
    ranks: &BTreeMap<u32, u32>,
) -> Result<Vec<Collective>, ReportError> {
    let strings = reader::string_table(report)?;
    let columns = [api::START, api::PID, api::TID, api::NAME_ID];
    let mut out = Vec::new();
    for b in api::scan(report, lib.table(), &columns)? {
        let b = b?;
        let v = api::View(&b);
        let (name, start) = (v.name_id()?, v.start()?);
        let (pid, tid) = (v.pid()?, v.tid()?);
        for i in 0..b.num_rows() {
            let Some(n) = strings.get(name[i]).filter(|n| {
                n.strip_prefix(lib.prefix())
                    .is_some_and(|op| OPERATIONS.contains(&op))
            }) else {
                continue;
            };
            out.push(Collective {
                start: start[i].saturating_add(offset_ns),
                pid: pid[i],
                tid: tid[i],
                name: n.to_string(),
                report: index,
                rank: ranks.get(&pid[i]).copied(),
            });
        }
    }
    out.sort_by_key(|c| (c.start, c.pid));
    Ok(out)
}

/// The collective calls of every report of `set`, on its timeline.
pub fn load_set(set: &ReportSet, lib: Library) -> Result<Vec<Collective>, ReportError> {
    let mut all = Vec::new();
    for (
        i,
        Member {
            report,
            offset_ns,
            ranks,
            ..
        },
    ) in set.members.iter().enumerate()
    {
        all.extend(load(report, lib, i, *offset_ns, ranks)?);
    }
    all.sort_by_key(|c| (c.start, c.report, c.pid));
    Ok(all)
}

/// One collective operation: the same call of every rank.
pub struct Operation<'a> {
    pub name: &'a str,
    /// 1 for the first call of the name, 2 for the second...
    pub instance: usize,
    /// Each rank's call, in order of arrival.
    pub calls: Vec<&'a Collective>,
}

impl Operation<'_> {
    pub fn first(&self) -> i64 {
        self.calls.first().map_or(0, |c| c.start)
    }

    /// The rank that arrived last (the others waited for it).
    pub fn last(&self) -> Option<&Collective> {
        self.calls.last().copied()
    }

    /// Last arrival minus first.
    pub fn spread(&self) -> i64 {
        self.last().map_or(0, |l| l.start - self.first())
    }
}

/// `calls` (sorted by start) grouped into operations, in order of first
/// arrival.
pub fn operations(calls: &[Collective]) -> Vec<Operation<'_>> {
    let mut ops: BTreeMap<(&str, usize), Vec<&Collective>> = BTreeMap::new();
    let mut seen: BTreeMap<(usize, u32, &str), usize> = BTreeMap::new();
    for c in calls {
        let n = seen.entry((c.report, c.pid, c.name.as_str())).or_default();
        *n += 1;
        ops.entry((c.name.as_str(), *n)).or_default().push(c);
    }
    let mut out: Vec<Operation> = ops
        .into_iter()
        .map(|((name, instance), mut calls)| {
            // Ties go to the later report and pid, so one is always last.
            calls.sort_by_key(|c| (c.start, c.report, c.pid));
            Operation {
                name,
                instance,
                calls,
            }
        })
        .collect();
    out.sort_by_key(|o| (o.first(), o.name, o.instance));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start: i64, report: usize, pid: u32, name: &str) -> Collective {
        Collective {
            start,
            pid,
            tid: pid,
            name: name.into(),
            report,
            rank: Some(report as u32),
        }
    }

    /// The n-th call of a name in each rank is one operation, whatever the
    /// pids (two reports may hold the same pid).
    #[test]
    fn nth_calls_of_a_name_form_an_operation() {
        let mut calls = vec![
            call(10, 0, 7, "pcclAllReduce"),
            call(12, 1, 7, "pcclAllReduce"),
            call(30, 0, 7, "pcclBroadcast"),
            call(40, 0, 7, "pcclAllReduce"),
            call(45, 1, 7, "pcclBroadcast"),
            call(70, 1, 7, "pcclAllReduce"),
        ];
        calls.sort_by_key(|c| c.start);
        let ops = operations(&calls);
        let got: Vec<(&str, usize, i64, usize)> = ops
            .iter()
            .map(|o| (o.name, o.instance, o.spread(), o.last().unwrap().report))
            .collect();
        assert_eq!(
            got,
            [
                ("pcclAllReduce", 1, 2, 1),
                ("pcclBroadcast", 1, 15, 1),
                ("pcclAllReduce", 2, 30, 1)
            ]
        );
    }
}
