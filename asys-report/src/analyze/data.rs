//! What the rules read from a report, read once and shared by every rule:
//! the device activity the device rules stream in start order, and the hggc
//! calls (with the activity they caused) that the call rules look at.
//! Nothing is held that no requested rule reads: memory follows the
//! findings' inputs, not the report's length.
use std::{
    cell::OnceCell,
    collections::{BTreeMap, HashMap, HashSet},
};

use arrow::array::Array;

use crate::report::{
    ReportError,
    container::{Container, MemberReader},
    reader::{self, TableReader},
    schema,
    schema::activity as ac,
    schema::api,
    start_order::{self, Batches, HELD, Numbering, Ordered},
};

/// One kernel, copy or memset as the device ran it.
#[derive(Debug, Clone, Default)]
pub struct Activity {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub device: u32,
    pub stream: u32,
    pub correlation: u32,
    /// Copies only: the memory kinds of source and destination (CUPTI's
    /// numbers; None in reports older than these columns).
    pub src_kind: Option<i32>,
    pub dst_kind: Option<i32>,
    pub bytes: Option<u64>,
    pub copy_kind: Option<i32>,
}

/// What the device rules read of an activity: when and where it ran.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub device: u32,
    pub stream: u32,
}

/// CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE.
pub const MEMORY_PAGEABLE: i32 = 1;

/// One API call the rules look at.
#[derive(Debug, Clone)]
pub struct Call {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub tid: u32,
    /// One of [`CALLS`]: a static name, not a string per call (a large
    /// report holds millions of async copies).
    pub name: &'static str,
    pub correlation: Option<u32>,
    pub bytes: Option<u64>,
    pub copy_kind: Option<i32>,
    /// The stream argument (a handle; 0 is the default stream).
    pub stream: Option<u64>,
}

pub struct Data {
    /// pccl collectives of every rank, sorted by start (of every report,
    /// on one timeline, when several are analysed together).
    pub collectives: Vec<crate::stats::desync::Collective>,
    /// The names of the reports `Collective::report` indexes (empty for one).
    pub reports: Vec<String>,
    /// Activities the call rules join with, sorted by (start, end): those
    /// of the calls in `calls` and the pageable copies, when a rule reads
    /// them. Data built in memory ([`Data::new`]) holds every activity here,
    /// and the device rules read them from here.
    pub activities: Vec<Activity>,
    /// The calls the requested rules read (names of [`CALLS`]), sorted by
    /// (start, end).
    pub calls: Vec<Call>,
    /// CUDA's synchronizations as CUPTI recorded them (the api sync rule's
    /// findings for CUDA: its API table's calls are not among [`CALLS`]).
    pub syncs: Vec<crate::stats::sync::Sync>,
    /// The report's activity table, streamed in start order by the device
    /// rules (see [`Data::each_activity`]).
    device: Option<ActivityTable>,
    /// (pid, correlation id) → index into `activities`; built on first use.
    by_correlation: OnceCell<HashMap<(u32, u32), usize>>,
    /// (pid, correlation id) → index into `calls`; built on first use.
    call_by_correlation: OnceCell<HashMap<(u32, u32), usize>>,
}

/// The calls any rule reads; others are not kept.
const CALLS: &[&str] = &[
    "hggcMemcpy",
    "hggcMemcpyAsync",
    "hggcMemset",
    "hggcDeviceSynchronize",
    "hggcStreamSynchronize",
    "hggcEventSynchronize",
];

impl Data {
    /// What `rules` read of the report, and nothing else: a file read back
    /// from SQLite, which lacks some columns, serves the rules it can.
    pub fn load_for(report: &Container, rules: &[super::Rule]) -> Result<Self, ReportError> {
        use super::Rule;
        let needs = |r: Rule| rules.contains(&r);
        let pageable = needs(Rule::MemcpyPageable);
        // The calls each rule reads; the pageable copies' calls are those
        // their activities point to.
        let mut names: Vec<&'static str> = Vec::new();
        if needs(Rule::MemcpySync) {
            names.push("hggcMemcpy");
        }
        if needs(Rule::MemsetSync) {
            names.push("hggcMemset");
        }
        if needs(Rule::ApiSync) {
            names.extend(CALLS.iter().filter(|n| n.ends_with("Synchronize")));
        }
        let mut joined: HashSet<(u32, u32)> = HashSet::new();
        let mut activities = Vec::new();
        if pageable {
            activities = read_activities(report, true, |a| a.is_pageable_copy())?;
            joined.extend(activities.iter().map(|a| (a.pid, a.correlation)));
        }
        // (A rule that reads no call reads no column of the API table: a
        // file read back from SQLite lacks some.)
        let mut calls = if names.is_empty() && joined.is_empty() {
            Vec::new()
        } else {
            calls(report, |name, pid, corr| {
                names.contains(&name) || corr.is_some_and(|c| joined.contains(&(pid, c)))
            })?
        };
        calls.sort_by_key(|c| (c.start, c.end));
        // The work of the synchronous copies and memsets.
        let work: HashSet<(u32, u32)> = calls
            .iter()
            .filter(|c| matches!(c.name, "hggcMemcpy" | "hggcMemset"))
            .filter_map(|c| Some((c.pid, c.correlation?)))
            .collect();
        if !work.is_empty() {
            // Every activity of those calls, but the pageable copies read
            // above.
            activities.extend(read_activities(report, pageable, |a| {
                work.contains(&(a.pid, a.correlation)) && !(pageable && a.is_pageable_copy())
            })?);
        }
        activities.sort_by_key(|a| (a.start, a.end));
        let mut data = Self::new(activities, calls);
        if needs(Rule::PpuGaps) || needs(Rule::PpuTimeUtil) {
            data.device = ac::open(report)?.map(|t| ActivityTable {
                path: report.path.clone(),
                table: t,
            });
            // A report without device activity has nothing for them.
            if data.device.is_none() {
                data.activities.clear();
            }
        }
        if needs(Rule::ApiSync) {
            data.syncs = crate::stats::sync::read(report)?;
        }
        if needs(Rule::PcclLateRank) {
            let ranks = crate::report::set::process_ranks(report)?;
            data.collectives = crate::stats::desync::load(
                report,
                crate::stats::desync::Library::Pccl,
                0,
                0,
                &ranks,
            )?;
        }
        Ok(data)
    }

    /// The collectives of every report of `set` on its timeline (what the
    /// rules comparing ranks read); nothing else.
    pub fn collectives_of(set: &crate::report::set::ReportSet) -> Result<Self, ReportError> {
        let mut data = Self::new(Vec::new(), Vec::new());
        data.collectives =
            crate::stats::desync::load_set(set, crate::stats::desync::Library::Pccl)?;
        data.reports = set.members.iter().map(|m| m.name.clone()).collect();
        Ok(data)
    }

    /// From rows already read (both sorted by start).
    pub fn new(activities: Vec<Activity>, calls: Vec<Call>) -> Self {
        Self {
            collectives: Vec::new(),
            reports: Vec::new(),
            activities,
            calls,
            syncs: Vec::new(),
            device: None,
            by_correlation: OnceCell::new(),
            call_by_correlation: OnceCell::new(),
        }
    }

    /// The call that issued device work (same process and correlation id).
    pub fn call_of(&self, a: &Activity) -> Option<&Call> {
        let map = self.call_by_correlation.get_or_init(|| {
            self.calls
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some(((c.pid, c.correlation?), i)))
                .collect()
        });
        self.calls.get(*map.get(&(a.pid, a.correlation))?)
    }

    /// The device work a call issued (same process and correlation id).
    pub fn work_of(&self, call: &Call) -> Option<&Activity> {
        let map = self.by_correlation.get_or_init(|| {
            self.activities
                .iter()
                .enumerate()
                .map(|(i, a)| ((a.pid, a.correlation), i))
                .collect()
        });
        self.activities
            .get(*map.get(&(call.pid, call.correlation?))?)
    }

    /// Calls `f` with every device activity in (start, end) order (ties
    /// in table order): streamed from the report's table, or from
    /// `activities` for data built in memory.
    pub fn each_activity(&self, mut f: impl FnMut(&Work)) -> Result<(), ReportError> {
        match &self.device {
            Some(t) => {
                for w in start_order::in_order(t, HELD)? {
                    f(&w?.1);
                }
            }
            None => {
                for a in &self.activities {
                    f(&Work {
                        start: a.start,
                        end: a.end,
                        pid: a.pid,
                        device: a.device,
                        stream: a.stream,
                    });
                }
            }
        }
        Ok(())
    }

    /// The first start and the last end of the activity of each (pid,
    /// device), in that order.
    pub fn device_spans(&self) -> Result<DeviceSpans, ReportError> {
        let mut out = DeviceSpans::new();
        let mut take = |pid, device, start, end| {
            let s = out.entry((pid, device)).or_insert((start, end));
            *s = (s.0.min(start), s.1.max(end));
        };
        match &self.device {
            Some(t) => {
                for b in t
                    .table
                    .scan(&[ac::PID, ac::DEVICE, ac::START, ac::END], None)?
                {
                    let b = b?;
                    let v = ac::View(&b);
                    let (pid, device) = (v.pid()?, v.device()?);
                    let (start, end) = (v.start()?, v.end()?);
                    for i in 0..b.num_rows() {
                        take(pid[i], device[i], start[i], end[i]);
                    }
                }
            }
            None => {
                for a in &self.activities {
                    take(a.pid, a.device, a.start, a.end);
                }
            }
        }
        Ok(out)
    }
}

impl Activity {
    /// A copy from or to pageable host memory (known only where the report
    /// has the memory kinds).
    pub fn is_pageable_copy(&self) -> bool {
        self.src_kind.is_some()
            && (self.src_kind == Some(MEMORY_PAGEABLE) || self.dst_kind == Some(MEMORY_PAGEABLE))
    }
}

/// (pid, device) → (first start, last end).
pub type DeviceSpans = BTreeMap<(u32, u32), (i64, i64)>;

/// The report's activity table, read in (start, end) order.
struct ActivityTable {
    path: std::path::PathBuf,
    table: TableReader<MemberReader>,
}

/// An activity's place: start, end, row in the table.
type Key = (i64, i64, u64);

impl Ordered for ActivityTable {
    type Key = Key;
    type Item = (Key, Work);

    fn key(item: &(Key, Work)) -> Key {
        item.0
    }

    fn row(k: &Key) -> u64 {
        k.2
    }

    fn keys(&self) -> Result<Batches<'_, Key>, ReportError> {
        let mut rows = Numbering::new(None);
        Ok(Box::new(self.table.scan(&[ac::START, ac::END], None)?.map(
            move |b| {
                let b = b?;
                let v = ac::View(&b);
                let (start, end) = (v.start()?, v.end()?);
                let (first, picked) = rows.pick(b.num_rows());
                Ok(picked
                    .map(|i| (start[i], end[i], first + i as u64))
                    .collect())
            },
        )))
    }

    fn items(&self, only: Option<&[u64]>) -> Result<Batches<'_, (Key, Work)>, ReportError> {
        let mut rows = Numbering::new(only);
        let columns = [ac::START, ac::END, ac::PID, ac::DEVICE, ac::STREAM];
        Ok(Box::new(self.table.scan(&columns, None)?.map(move |b| {
            let b = b?;
            let (first, picked) = rows.pick(b.num_rows());
            let v = ac::View(&b);
            let (start, end) = (v.start()?, v.end()?);
            let (pid, device, stream) = (v.pid()?, v.device()?, v.stream()?);
            Ok(picked
                .map(|i| {
                    let w = Work {
                        start: start[i],
                        end: end[i],
                        pid: pid[i],
                        device: device[i],
                        stream: stream[i],
                    };
                    ((w.start, w.end, first + i as u64), w)
                })
                .collect())
        })))
    }

    fn path(&self) -> std::path::PathBuf {
        self.path.clone()
    }
}

/// The columns every activity has.
const DEVICE_COLUMNS: &[&str] = &[
    ac::START,
    ac::END,
    ac::PID,
    ac::DEVICE,
    ac::STREAM,
    ac::CORRELATION_ID,
    ac::BYTES,
    ac::COPY_KIND,
];

/// Calls `f` with each row of a batch of the activity table (`kinds`: the
/// batch has the memory-kind columns).
fn each_activity_of(
    b: &reader::Batch,
    kinds: bool,
    mut f: impl FnMut(usize, Activity),
) -> Result<(), ReportError> {
    let v = ac::View(b);
    let (src, dst) = if kinds {
        (Some(v.src_kind()?), Some(v.dst_kind()?))
    } else {
        (None, None)
    };
    let (bytes, copy) = (v.bytes()?, v.copy_kind()?);
    let (start, end) = (v.start()?, v.end()?);
    let (pid, device, stream) = (v.pid()?, v.device()?, v.stream()?);
    let corr = v.correlation_id()?;
    for i in 0..b.num_rows() {
        f(
            i,
            Activity {
                start: start[i],
                end: end[i],
                pid: pid[i],
                device: device[i],
                stream: stream[i],
                correlation: corr[i],
                src_kind: src.and_then(|a| (!a.is_null(i)).then(|| a.value(i))),
                dst_kind: dst.and_then(|a| (!a.is_null(i)).then(|| a.value(i))),
                bytes: (!bytes.is_null(i)).then(|| bytes.value(i)),
                copy_kind: (!copy.is_null(i)).then(|| copy.value(i)),
            },
        );
    }
    Ok(())
}

/// The device activities `keep` accepts, in table order; `kinds`: a rule
/// reads the memory kinds, which a report older than them lacks (read as
/// unknown) and a file read back from SQLite lacks (an error: it never says
/// which memory was pageable).
fn read_activities(
    report: &Container,
    kinds: bool,
    mut keep: impl FnMut(&Activity) -> bool,
) -> Result<Vec<Activity>, ReportError> {
    let mut out = Vec::new();
    let Some(table) = ac::open(report)? else {
        return Ok(out);
    };
    let has_kinds = table.has_column(ac::SRC_KIND) && table.has_column(ac::DST_KIND);
    if kinds && !has_kinds && !report.unavailable.is_empty() {
        return Err(ReportError::Column {
            path: report.path.clone(),
            table: ac::NAME.into(),
            column: ac::SRC_KIND.into(),
            problem: "missing",
        });
    }
    let kinds = has_kinds;
    let columns: Vec<&str> = if kinds {
        [DEVICE_COLUMNS, &[ac::SRC_KIND, ac::DST_KIND]].concat()
    } else {
        DEVICE_COLUMNS.to_vec()
    };
    for b in table.scan(&columns, None)? {
        each_activity_of(&b?, kinds, |_, a| {
            if keep(&a) {
                out.push(a);
            }
        })?;
    }
    Ok(out)
}

/// The calls of [`CALLS`] that `keep` accepts (by name, pid and
/// correlation id), in table order.
fn calls(
    report: &Container,
    mut keep: impl FnMut(&'static str, u32, Option<u32>) -> bool,
) -> Result<Vec<Call>, ReportError> {
    let strings = reader::string_table(report)?;
    // Name ids of the wanted calls: only those rows are decoded further.
    let wanted: HashMap<u32, &'static str> = (0..strings.values().len() as u32)
        .filter_map(|id| {
            let n = strings.get(id)?;
            CALLS.iter().find(|c| **c == n).map(|c| (id, *c))
        })
        .collect();
    let mut out = Vec::new();
    if wanted.is_empty() {
        return Ok(out);
    }
    let columns = [
        api::START,
        api::END,
        api::PID,
        api::TID,
        api::NAME_ID,
        api::CORRELATION_ID,
        api::BYTES,
        api::COPY_KIND,
        api::STREAM,
    ];
    for b in api::scan(report, schema::HGGC_API, &columns)? {
        let b = b?;
        let v = api::View(&b);
        let (name, start, end) = (v.name_id()?, v.start()?, v.end()?);
        let (pid, tid, corr) = (v.pid()?, v.tid()?, v.correlation_id()?);
        let (bytes, copy, stream) = (v.bytes()?, v.copy_kind()?, v.stream()?);
        for i in 0..b.num_rows() {
            let Some(&n) = wanted.get(&name[i]) else {
                continue;
            };
            let correlation = (!corr.is_null(i)).then(|| corr.value(i));
            if !keep(n, pid[i], correlation) {
                continue;
            }
            out.push(Call {
                start: start[i],
                end: end[i],
                pid: pid[i],
                tid: tid[i],
                name: n,
                correlation,
                bytes: (!bytes.is_null(i)).then(|| bytes.value(i)),
                copy_kind: (!copy.is_null(i)).then(|| copy.value(i)),
                stream: (!stream.is_null(i)).then(|| stream.value(i)),
            });
        }
    }
    Ok(out)
}
