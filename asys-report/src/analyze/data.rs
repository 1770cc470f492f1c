//! What the rules read from a report: device activity and the hggc calls
//! that matter to them, read once and shared by every rule.
use std::{cell::OnceCell, collections::HashMap};

use arrow::{
    array::Array,
    datatypes::{Int32Type, Int64Type, UInt32Type, UInt64Type},
};

use crate::report::{
    ReportError, container::Container, reader, schema, schema::activity as ac, schema::api,
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
    /// Sorted by start.
    pub activities: Vec<Activity>,
    /// Calls of the names in [`CALLS`], sorted by start.
    pub calls: Vec<Call>,
    /// (pid, correlation id) → index into `activities`; built on first
    /// use, as only the rules that join calls with their work need it (on
    /// a 10 M-event report it is ~100 MB).
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
        let needs = |these: &[Rule]| rules.iter().any(|r| these.contains(r));
        let calls = if needs(&[
            Rule::MemcpySync,
            Rule::MemcpyPageable,
            Rule::MemsetSync,
            Rule::ApiSync,
        ]) {
            calls(report)?
        } else {
            Vec::new()
        };
        let mut data = Self::new(activities(report, needs(&[Rule::MemcpyPageable]))?, calls);
        if needs(&[Rule::PcclLateRank]) {
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

    /// Activities by (pid, device), each group sorted by start.
    pub fn by_device(&self) -> std::collections::BTreeMap<(u32, u32), Vec<&Activity>> {
        let mut out: std::collections::BTreeMap<(u32, u32), Vec<&Activity>> = Default::default();
        for a in &self.activities {
            out.entry((a.pid, a.device)).or_default().push(a);
        }
        out
    }
}

/// The device activities; `kinds`: a rule reads the memory kinds, which a
/// report older than them lacks (read as unknown) and a file read back from
/// SQLite lacks (an error: it never says which memory was pageable).
fn activities(report: &Container, kinds: bool) -> Result<Vec<Activity>, ReportError> {
    let columns = [
        ac::START,
        ac::END,
        ac::PID,
        ac::DEVICE,
        ac::STREAM,
        ac::CORRELATION_ID,
        ac::BYTES,
        ac::COPY_KIND,
    ];
    let mut out = Vec::new();
    let Some(table) = reader::open(report, schema::HGGC_ACTIVITY)? else {
        return Ok(out);
    };
    let has_kinds = table.has_column(ac::SRC_KIND) && table.has_column(ac::DST_KIND);
    if kinds && !has_kinds && !report.unavailable.is_empty() {
        return Err(ReportError::Column {
            path: report.path.clone(),
            table: schema::HGGC_ACTIVITY.into(),
            column: ac::SRC_KIND.into(),
            problem: "missing",
        });
    }
    let kinds = has_kinds;
    let columns: Vec<&str> = if kinds {
        [&columns[..], &[ac::SRC_KIND, ac::DST_KIND]].concat()
    } else {
        columns.to_vec()
    };
    for b in table.scan(&columns, None)? {
        let b = b?;
        let opt = |name| -> Result<Option<&arrow::array::PrimitiveArray<Int32Type>>, ReportError> {
            if kinds {
                b.prim::<Int32Type>(name).map(Some)
            } else {
                Ok(None)
            }
        };
        let (src, dst) = (opt(ac::SRC_KIND)?, opt(ac::DST_KIND)?);
        let bytes = b.prim::<UInt64Type>(ac::BYTES)?;
        let copy = b.prim::<Int32Type>(ac::COPY_KIND)?;
        let start = b.values::<Int64Type>(ac::START)?;
        let end = b.values::<Int64Type>(ac::END)?;
        let pid = b.values::<UInt32Type>(ac::PID)?;
        let device = b.values::<UInt32Type>(ac::DEVICE)?;
        let stream = b.values::<UInt32Type>(ac::STREAM)?;
        let corr = b.values::<UInt32Type>(ac::CORRELATION_ID)?;
        for i in 0..b.num_rows() {
            out.push(Activity {
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
            });
        }
    }
    out.sort_by_key(|a| (a.start, a.end));
    Ok(out)
}

fn calls(report: &Container) -> Result<Vec<Call>, ReportError> {
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
    for b in reader::scan(report, schema::HGGC_API, &columns)? {
        let b = b?;
        let name = b.values::<UInt32Type>(api::NAME_ID)?;
        let start = b.values::<Int64Type>(api::START)?;
        let end = b.values::<Int64Type>(api::END)?;
        let pid = b.values::<UInt32Type>(api::PID)?;
        let tid = b.values::<UInt32Type>(api::TID)?;
        let corr = b.prim::<UInt32Type>(api::CORRELATION_ID)?;
        let bytes = b.prim::<UInt64Type>(api::BYTES)?;
        let copy = b.prim::<Int32Type>(api::COPY_KIND)?;
        let stream = b.prim::<UInt64Type>(api::STREAM)?;
        for i in 0..b.num_rows() {
            let Some(n) = wanted.get(&name[i]) else {
                continue;
            };
            out.push(Call {
                start: start[i],
                end: end[i],
                pid: pid[i],
                tid: tid[i],
                name: n,
                correlation: (!corr.is_null(i)).then(|| corr.value(i)),
                bytes: (!bytes.is_null(i)).then(|| bytes.value(i)),
                copy_kind: (!copy.is_null(i)).then(|| copy.value(i)),
                stream: (!stream.is_null(i)).then(|| stream.value(i)),
            });
        }
    }
    out.sort_by_key(|c| (c.start, c.end));
    Ok(out)
}
