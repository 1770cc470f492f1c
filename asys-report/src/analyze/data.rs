//! What the rules read from a report, read once and shared by every rule:
//! the device activity the device rules stream in start order, and the hggc
//! calls (with the activity they caused) that the call rules look at.
//! Nothing is held that no requested rule reads: memory follows the
//! findings' inputs, not the report's length.
use std::{
    cell::OnceCell,
    collections::{BTreeMap, HashMap, HashSet},
};

use crate::report::{
    ReportError,
    container::{Container, MemberReader},
    read::{
        activity::{self, Activity},
        api::{ApiRows, PLACE_COLUMNS},
        collectives::{self, Collective},
    },
    reader::{self, TableReader},
    rows::{ApiRow, SyncRow},
    schema,
    schema::activity as ac,
    schema::api,
    start_order::{self, Batches, HELD, Numbering, Ordered},
};

pub use crate::report::read::activity::MEMORY_PAGEABLE;

/// One API call the rules look at: its row, and its name, one of the
/// hggc calls a rule reads (a static name, not a string per call: a large report holds
/// millions of async copies).
#[derive(Debug, Clone)]
pub struct Call {
    pub name: &'static str,
    pub api: ApiRow,
}

pub struct Data {
    /// pccl collectives of every rank, sorted by start (of every report,
    /// on one timeline, when several are analysed together).
    pub collectives: Vec<Collective>,
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
    pub syncs: Vec<SyncRow>,
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
        calls.sort_by_key(|c| (c.api.start, c.api.end));
        // The work of the synchronous copies and memsets.
        let work: HashSet<(u32, u32)> = calls
            .iter()
            .filter(|c| matches!(c.name, "hggcMemcpy" | "hggcMemset"))
            .filter_map(|c| Some((c.api.pid, c.api.correlation?)))
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
            data.syncs = crate::report::read::cuda::syncs(report)?;
        }
        if needs(Rule::PcclLateRank) {
            let ranks = crate::report::read::processes::process_ranks(report)?;
            data.collectives = collectives::load(report, collectives::Library::Pccl, 0, 0, &ranks)?;
        }
        Ok(data)
    }

    /// The collectives of every report of `set` on its timeline (what the
    /// rules comparing ranks read); nothing else.
    pub fn collectives_of(set: &crate::report::set::ReportSet) -> Result<Self, ReportError> {
        let mut data = Self::new(Vec::new(), Vec::new());
        data.collectives = collectives::load_set(set, collectives::Library::Pccl)?;
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
                .filter_map(|(i, c)| Some(((c.api.pid, c.api.correlation?), i)))
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
            .get(*map.get(&(call.api.pid, call.api.correlation?))?)
    }

    /// Calls `f` with every device activity in (start, end) order (ties
    /// in table order): streamed from the report's table, or from
    /// `activities` for data built in memory. An activity of the report's
    /// table has only the columns of [`activity::PLACE_COLUMNS`].
    pub fn each_activity(&self, mut f: impl FnMut(&Activity)) -> Result<(), ReportError> {
        match &self.device {
            Some(t) => {
                for w in start_order::in_order(t, HELD)? {
                    let ((start, end, _), [pid, device, stream]) = w?;
                    f(&Activity {
                        start,
                        end,
                        pid,
                        device,
                        stream,
                        ..Default::default()
                    });
                }
            }
            None => self.activities.iter().for_each(f),
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
                    for a in activity::rows(&b?)? {
                        take(a.pid, a.device, a.start, a.end);
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

/// (pid, device) → (first start, last end).
pub type DeviceSpans = BTreeMap<(u32, u32), (i64, i64)>;

/// The report's activity table, read in (start, end) order.
struct ActivityTable {
    path: std::path::PathBuf,
    table: TableReader<MemberReader>,
}

/// An activity's place: start, end, row in the table.
type Key = (i64, i64, u64);

/// An activity as the order carries it: its place, and the pid, device
/// and stream it ran on (32 bytes a row, where an [`Activity`] is 240: the
/// order sorts and moves every row of the table).
type Placed = (Key, [u32; 3]);

impl Ordered for ActivityTable {
    type Key = Key;
    type Item = Placed;

    fn key(item: &Placed) -> Key {
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

    fn items(&self, only: Option<&[u64]>) -> Result<Batches<'_, Placed>, ReportError> {
        let mut rows = Numbering::new(only);
        Ok(Box::new(
            self.table
                .scan(activity::PLACE_COLUMNS, None)?
                .map(move |b| {
                    let b = b?;
                    let (first, picked) = rows.pick(b.num_rows());
                    let rows = activity::ActivityRows::of(&b)?;
                    Ok(picked
                        .map(|i| {
                            let a = rows.get(i);
                            let place = [a.pid, a.device, a.stream];
                            ((a.start, a.end, first + i as u64), place)
                        })
                        .collect())
                }),
        ))
    }

    fn path(&self) -> std::path::PathBuf {
        self.path.clone()
    }
}

/// The columns every activity has that the call rules read besides
/// [`activity::PLACE_COLUMNS`].
const JOIN_COLUMNS: &[&str] = &[ac::CORRELATION_ID, ac::BYTES, ac::COPY_KIND];

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
        [
            activity::PLACE_COLUMNS,
            JOIN_COLUMNS,
            &[ac::SRC_KIND, ac::DST_KIND],
        ]
        .concat()
    } else {
        [activity::PLACE_COLUMNS, JOIN_COLUMNS].concat()
    };
    for b in table.scan(&columns, None)? {
        out.extend(activity::rows(&b?)?.filter(|a| keep(a)));
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
    let more = [api::CORRELATION_ID, api::BYTES, api::COPY_KIND, api::STREAM];
    let columns = [PLACE_COLUMNS, &more].concat();
    for b in api::scan(report, schema::HGGC_API, &columns)? {
        let b = b?;
        let rows = ApiRows::of(&b)?;
        let v = api::View(&b);
        let (name, pid, corr) = (v.name_id()?, v.pid()?, v.correlation_id()?);
        for i in 0..b.num_rows() {
            let Some(&n) = wanted.get(&name[i]) else {
                continue;
            };
            if keep(n, pid[i], crate::report::read::opt(corr, i)) {
                out.push(Call {
                    name: n,
                    api: rows.get(i),
                });
            }
        }
    }
    Ok(out)
}
