//! `asys analyze`: rules that look for known performance problems in a
//! report (asys's ppu_gaps and ppu_time_util, nsys's expert-system rules
//! adapted to hggc). Each rule gives a table of findings, printed with the
//! `stats` formats.
pub(crate) mod api_sync;
pub mod data;
pub(crate) mod memcpy_pageable;
pub(crate) mod memcpy_sync;
pub(crate) mod memset_sync;
pub(crate) mod pccl_late_rank;
pub(crate) mod ppu_gaps;
pub(crate) mod ppu_time_util;
pub(crate) mod spec;

use crate::{report::ReportError, stats::format::Table};
pub use spec::{Rule, RuleSpec};

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error("unknown rule '{0}' (available: {list})", list = Rule::names().join(", "))]
    UnknownRule(String),
    #[error("rule {rule}: {problem}")]
    BadArgument { rule: &'static str, problem: String },
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// Runs one rule over the report's data.
pub fn run(spec: &RuleSpec, data: &data::Data) -> Result<Table, ReportError> {
    let mut table = match spec.rule {
        Rule::PpuGaps => ppu_gaps::run(data, spec)?,
        Rule::PpuTimeUtil => ppu_time_util::run(data, spec)?,
        Rule::MemcpySync => memcpy_sync::run(data, spec),
        Rule::MemcpyPageable => memcpy_pageable::run(data, spec),
        Rule::MemsetSync => memset_sync::run(data, spec),
        Rule::ApiSync => api_sync::run(data, spec),
        Rule::PcclLateRank => pccl_late_rank::run(data, spec),
    };
    if let Some(n) = spec.rows {
        table.rows.truncate(n);
    }
    Ok(table)
}

/// The hint column shared by the rules: the same advice on every row.
pub(crate) fn hint(text: &str) -> crate::stats::format::Value {
    crate::stats::format::Value::Str(text.into())
}

/// The leading columns of a finding about one synchronous call (the sync
/// memcpy and memset rules): its times, process and thread, the device and
/// stream of the work it caused, and its bytes.
pub(crate) const CALL_HEADERS: [&str; 8] = [
    "Duration (ns)",
    "Start (ns)",
    "End (ns)",
    "PID",
    "TID",
    "Device ID",
    "Stream",
    "Bytes",
];

/// The values of [`CALL_HEADERS`] for `c`.
pub(crate) fn call_columns(data: &data::Data, c: &data::Call) -> Vec<crate::stats::format::Value> {
    use crate::stats::format::Value;
    let work = data.work_of(c);
    let c = &c.api;
    vec![
        Value::Int(c.end - c.start),
        Value::Int(c.start),
        Value::Int(c.end),
        Value::Int(c.pid.into()),
        Value::Int(c.tid.into()),
        work.map_or(Value::Null, |w| Value::Int(w.device.into())),
        work.map_or(Value::Null, |w| Value::Int(w.stream.into())),
        c.bytes.map_or(Value::Null, |b| Value::Int(b as i64)),
    ]
}

#[cfg(test)]
mod tests {
    use super::{data::*, *};
    use crate::{report::read::activity::Activity, stats::format::Value};

    fn work(start: i64, end: i64, stream: u32) -> Activity {
        Activity {
            start,
            end,
            pid: 7,
            stream,
            ..Default::default()
        }
    }

    fn int(v: &Value) -> i64 {
        match v {
            Value::Int(i) => *i,
            _ => panic!("{v:?}"),
        }
    }

    /// Work on another stream inside a gap closes it; only idle time of the
    /// whole device counts, longest first.
    #[test]
    fn gaps_are_device_idle_time() {
        let ms = 1_000_000;
        let data = Data::new(
            vec![
                work(0, 10 * ms, 1),
                work(12 * ms, 30 * ms, 2),
                work(15 * ms, 20 * ms, 1),
                work(50 * ms, 60 * ms, 1),
                work(70 * ms, 71 * ms, 1),
            ],
            vec![],
        );
        let mut spec = RuleSpec::parse("ppu_gaps:gap=5").unwrap();
        let t = run(&spec, &data).unwrap();
        let found: Vec<(i64, i64)> = t.rows.iter().map(|r| (int(&r[1]), int(&r[2]))).collect();
        assert_eq!(found, [(30 * ms, 50 * ms), (60 * ms, 70 * ms)]);
        spec.rows = Some(1);
        assert_eq!(run(&spec, &data).unwrap().rows.len(), 1);
    }

    /// CUDA's sync records are findings of the sync rule when a host thread
    /// blocked at least the threshold; a stream waiting on an event is not.
    #[test]
    fn api_sync_reports_cuptis_host_waits() {
        use crate::report::{read::cuda::NONE, rows::SyncRow};
        let ms = 1_000_000;
        let sync = |start: i64, len: i64, sync_type, stream| SyncRow {
            start,
            end: start + len,
            pid: 9,
            sync_type,
            stream,
            event: NONE,
            ..Default::default()
        };
        let mut data = Data::new(vec![], vec![]);
        data.syncs = vec![
            sync(0, 5 * ms, 3, 13),
            sync(10 * ms, 2 * ms, 4, NONE),
            sync(20 * ms, 9 * ms, 2, 13),
            sync(40 * ms, ms / 10, 3, 13),
        ];
        let spec = RuleSpec::parse("cuda_api_sync:threshold=1").unwrap();
        let t = run(&spec, &data).unwrap();
        let found: Vec<(i64, Value, Value)> = t
            .rows
            .iter()
            .map(|r| (int(&r[1]), r[5].clone(), r[6].clone()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    0,
                    Value::Str("13".into()),
                    Value::Str("cudaStreamSynchronize".into())
                ),
                (
                    10 * ms,
                    Value::Null,
                    Value::Str("cudaDeviceSynchronize".into())
                ),
            ]
        );
    }

    /// Utilisation per chunk is the union of busy time over the chunk.
    #[test]
    fn time_util_counts_overlap_once() {
        // 0..100: busy 0..40 on two streams at once, idle 40..90, busy 90..100.
        let data = Data::new(
            vec![work(0, 40, 1), work(0, 40, 2), work(90, 100, 1)],
            vec![],
        );
        let spec = RuleSpec::parse("ppu_time_util:threshold=50:chunks=2").unwrap();
        let t = run(&spec, &data).unwrap();
        // Chunk 0..50 is 80% busy (not reported), 50..100 is 20% busy.
        assert_eq!(t.rows.len(), 1);
        assert_eq!((int(&t.rows[0][1]), int(&t.rows[0][2])), (50, 100));
        assert_eq!(t.rows[0][3], Value::Fixed(20.0, 1));
    }

    /// A report of device work on two streams of one device, written in
    /// end order, and of a synchronous copy whose work is among it.
    fn report() -> (
        crate::report::container::Container,
        Vec<crate::report::rows::ActivityRow>,
    ) {
        use crate::report::{
            builder::ReportBuilder,
            rows::{ActivityRow, ApiRow},
            schema::{self, ActivityKind},
        };
        let ms = 1_000_000;
        let mut b = ReportBuilder::new().expect("builder");
        let work = |start: i64, end: i64, stream: u32, correlation: u32| ActivityRow {
            start: start * ms,
            end: end * ms,
            kind: ActivityKind::Kernel,
            pid: 7,
            device: 2,
            stream,
            correlation,
            ..Default::default()
        };
        let mut rows = vec![
            work(0, 10, 1, 1),
            work(15, 20, 1, 2),
            work(12, 30, 2, 3),
            work(50, 60, 1, 4),
            work(70, 71, 1, 5),
        ];
        rows[3].kind = ActivityKind::Memcpy;
        rows[3].bytes = Some(4096);
        rows.sort_by_key(|r| r.end);
        let memcpy = ApiRow {
            start: 49 * ms,
            end: 61 * ms,
            pid: 7,
            tid: 8,
            name_id: b.string("hggcMemcpy"),
            correlation: Some(4),
            bytes: Some(4096),
            copy_kind: Some(1),
            ..Default::default()
        };
        b.table::<schema::activity::Table>(schema::HGGC_ACTIVITY, &rows)
            .expect("activity");
        b.table::<schema::api::Table>(schema::HGGC_API, &[memcpy])
            .expect("hggc_api");
        (b.finish_temporary().expect("report"), rows)
    }

    /// Read from a report's table (in start order whatever the table's),
    /// the gaps are the stretches no written work covers.
    #[test]
    fn gaps_of_a_report_are_where_no_work_ran() {
        let (report, rows) = report();
        let spec = RuleSpec::parse("ppu_gaps:gap=5").unwrap();
        let data = Data::load_for(&report, &[spec.rule]).expect("data");
        let t = run(&spec, &data).unwrap();
        let got: Vec<(i64, i64)> = t.rows.iter().map(|r| (int(&r[1]), int(&r[2]))).collect();
        // The union of the work, then what lies between its pieces.
        let mut spans: Vec<(i64, i64)> = rows.iter().map(|r| (r.start, r.end)).collect();
        spans.sort();
        let mut union: Vec<(i64, i64)> = Vec::new();
        for (s, e) in spans {
            match union.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => union.push((s, e)),
            }
        }
        let mut want: Vec<(i64, i64)> = union
            .windows(2)
            .map(|w| (w[0].1, w[1].0))
            .filter(|(a, b)| b - a >= 5_000_000)
            .collect();
        want.sort_by_key(|&(a, b)| (std::cmp::Reverse(b - a), a));
        assert_eq!(got, want);
        assert!(!want.is_empty());
    }

    /// A synchronous copy's finding shows the device and stream of the
    /// work its correlation id names.
    #[test]
    fn a_sync_copy_is_joined_with_its_work() {
        let (report, rows) = report();
        let spec = RuleSpec::parse("hggc_memcpy_sync").unwrap();
        let data = Data::load_for(&report, &[spec.rule]).expect("data");
        let t = run(&spec, &data).unwrap();
        let work = rows.iter().find(|r| r.correlation == 4).unwrap();
        assert_eq!(t.rows.len(), 1);
        assert_eq!(int(&t.rows[0][5]), i64::from(work.device));
        assert_eq!(int(&t.rows[0][6]), i64::from(work.stream));
        assert_eq!(int(&t.rows[0][7]), 4096);
    }
}
