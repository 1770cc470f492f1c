//! A time window applied while a report's tables are read (`asys stats
//! --filter-time`, `--filter-hgtx`, `--filter-nvtx`): every reader of the
//! report sees only the rows inside it, so each report computes over the
//! window without knowing of it.
//!
//! A row with a time range (API calls, device activity) is inside when its
//! whole `[start, end]` lies within one span of the window; a row with one
//! time (context switches, CPU samples, stack frames of calls and samples)
//! when that time does. Tables with no time of their own (strings, symbols,
//! libraries, modules, processes, process events) are never filtered: they
//! describe what the rows refer to.
use arrow::{
    array::{Array, AsArray, BooleanArray, RecordBatch},
    datatypes::Int64Type,
};

use super::schema;

/// Spans of CLOCK_MONOTONIC ns, each inclusive at both ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    spans: Vec<(i64, i64)>,
}

/// The columns that place a table's rows in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    /// `[start, end]` columns.
    Range(&'static str, &'static str),
    /// One time column.
    Point(&'static str),
}

impl Times {
    pub fn columns(self) -> Vec<&'static str> {
        match self {
            Times::Range(a, b) => vec![a, b],
            Times::Point(a) => vec![a],
        }
    }
}

/// How rows of `table` are placed in time; None for tables that are not
/// filtered.
pub fn times_of(table: &str) -> Option<Times> {
    match table {
        schema::HGGC_ACTIVITY => Some(Times::Range(schema::activity::START, schema::activity::END)),
        schema::SCHED => Some(Times::Point(schema::sched::TS)),
        schema::CPU_SAMPLES => Some(Times::Point(schema::cpu_samples::TS)),
        schema::HOST_MEMORY => Some(Times::Point(schema::host_memory::TS)),
        schema::NIC_METRICS => Some(Times::Point(schema::nic_metrics::TS)),
        schema::PPU_METRICS => Some(Times::Point(schema::ppu_metrics::TS)),
        schema::CUDA_SYNC => Some(Times::Range(
            schema::cuda_sync::START,
            schema::cuda_sync::END,
        )),
        schema::CUDA_GRAPHS => Some(Times::Range(
            schema::cuda_graphs::START,
            schema::cuda_graphs::END,
        )),
        schema::RDMA_HW_COUNTERS => Some(Times::Point(schema::rdma_hw_counters::TS)),
        schema::CPU_SAMPLE_STACKS => Some(Times::Point(schema::cpu_sample_stacks::TS)),
        schema::API_STACKS => Some(Times::Point(schema::api_stacks::CALL_START)),
        t if t.ends_with("_api") => Some(Times::Range(schema::api::START, schema::api::END)),
        _ => None,
    }
}

impl Window {
    /// The window of `spans` (each `(start, end)`, start ≤ end).
    pub fn new(mut spans: Vec<(i64, i64)>) -> Self {
        spans.retain(|(a, b)| a <= b);
        spans.sort_unstable();
        Self { spans }
    }

    /// Whether `[start, end]` lies within one span.
    pub fn holds(&self, start: i64, end: i64) -> bool {
        // Spans are sorted by start: only those starting at or before
        // `start` can hold it.
        let n = self.spans.partition_point(|(a, _)| *a <= start);
        self.spans[..n].iter().any(|&(_, b)| end <= b)
    }

    /// Which rows of `batch` (holding the columns of `times`) are inside.
    /// A null time (never written by asys) reads as outside.
    pub fn mask(&self, batch: &RecordBatch, times: Times) -> Option<BooleanArray> {
        let col = |name: &str| batch.column_by_name(name)?.as_primitive_opt::<Int64Type>();
        Some(match times {
            Times::Range(a, b) => {
                let (a, b) = (col(a)?, col(b)?);
                (0..batch.num_rows())
                    .map(|i| {
                        Some(a.is_valid(i) && b.is_valid(i) && self.holds(a.value(i), b.value(i)))
                    })
                    .collect()
            }
            Times::Point(t) => {
                let t = col(t)?;
                (0..batch.num_rows())
                    .map(|i| Some(t.is_valid(i) && self.holds(t.value(i), t.value(i))))
                    .collect()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_inside_only_when_whole_within_one_span() {
        let w = Window::new(vec![(100, 200), (300, 400)]);
        assert!(w.holds(100, 200));
        assert!(w.holds(150, 150));
        assert!(!w.holds(99, 150));
        assert!(!w.holds(150, 201));
        // Across the gap between two spans: in neither whole.
        assert!(!w.holds(150, 350));
        assert!(w.holds(300, 400));
        assert!(!w.holds(401, 401));
    }

    #[test]
    fn tables_without_times_are_not_filtered() {
        assert_eq!(times_of(schema::STRINGS), None);
        assert_eq!(times_of(schema::PROCESS_EVENTS), None);
        assert_eq!(times_of(schema::LIBRARIES), None);
        assert!(matches!(times_of("pccl_api"), Some(Times::Range(..))));
        assert!(matches!(times_of(schema::SCHED), Some(Times::Point(_))));
    }
}
