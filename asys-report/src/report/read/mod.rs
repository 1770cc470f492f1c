//! Typed readers of a report's tables, one file per table or family of
//! tables: what `stats`, `analyze` and the exports read rows through.
//!
//! Each table's columns are declared once (`report::schema`); its reader
//! here reads a batch of them into the table's row type, which is the row
//! the recorder writes (`report::rows`) wherever the two can be one. A
//! reader scans only the columns it is asked for, so that a report of ten
//! million events is read a row group at a time and never whole; rows are
//! built from one batch's columns into one reused buffer, never allocated
//! one by one.
//!
//! - [`api`]: the API tables (`hggc_api`, `osrt_api`, ...) as
//!   [`ApiRow`](super::rows::ApiRow)s, and the columns every call has.
//! - [`activity`]: device activity (`hggc_activity`) as
//!   [`Activity`](activity::Activity)s, the one reader view of its rows.
//! - [`cuda`]: CUPTI's synchronizations and graph executions.
//! - [`sched`]: context switches and wake-ups.
//! - [`stacks`]: the kernel stacks of samples, switch-outs and wake-ups.
//! - [`python_frames`]: the Python frames of samples and where they go in
//!   a native stack.
//! - [`python_thread_names`]: the Python names of sampled threads.
//! - [`metrics`]: host memory, NIC, RDMA and PPU metric samples.
//! - [`processes`]: commands and ranks of processes.
//! - [`symbols`]: kernel names.
//! - [`ranges`], [`collectives`], `device_memory`: what the API tables
//!   say once calls are paired up: hgtx/nvtx ranges, collective operations
//!   across ranks, device memory in use.
pub mod activity;
pub mod api;
pub mod collectives;
pub mod cuda;
pub(crate) mod device_memory;
pub mod metrics;
pub mod processes;
pub mod python_frames;
pub mod python_thread_names;
pub mod ranges;
pub mod sched;
pub mod stacks;
pub mod symbols;

use arrow::{
    array::{Array, PrimitiveArray},
    datatypes::ArrowPrimitiveType,
};

use super::{
    ReportError,
    reader::{Batch, Batches},
};

/// `end - start` in ns, 0 when the end is before the start; no overflow
/// whatever two times a (damaged) report holds.
pub fn duration(start: i64, end: i64) -> u64 {
    u64::try_from(i128::from(end) - i128::from(start)).unwrap_or(0)
}

/// `end - start` as a signed column value, saturated at the ends of i64.
pub fn signed_duration(start: i64, end: i64) -> i64 {
    end.saturating_sub(start)
}

/// Row `i` of a nullable column: None for a null.
#[inline(always)]
pub(crate) fn opt<T: ArrowPrimitiveType>(a: &PrimitiveArray<T>, i: usize) -> Option<T::Native> {
    a.is_valid(i).then(|| a.value(i))
}

/// Row `i` of a nullable column that the scan may not have asked for: None
/// for a null and for a column not scanned.
#[inline(always)]
pub(crate) fn opt_in<T: ArrowPrimitiveType>(
    a: Option<&PrimitiveArray<T>>,
    i: usize,
) -> Option<T::Native> {
    a.and_then(|a| opt(a, i))
}

/// `get`'s column where batch `b` has column `name`; None where the scan
/// did not ask for it (a reader that reads what it was given).
#[inline]
pub(crate) fn scanned<T>(
    b: &Batch,
    name: &str,
    get: impl FnOnce() -> Result<T, ReportError>,
) -> Result<Option<T>, ReportError> {
    b.has(name).then(get).transpose()
}

/// Streams `batches` a batch at a time: `read` turns one batch into rows
/// (into a buffer reused from batch to batch), `each` gets them. By batch,
/// not all at once, because the exports stream the rows a report's stats
/// collect; one reader serves both.
pub(crate) fn for_each_batch<R, E: From<ReportError>>(
    batches: Batches,
    mut read: impl FnMut(&Batch, &mut Vec<R>) -> Result<(), ReportError>,
    mut each: impl FnMut(&[R]) -> Result<(), E>,
) -> Result<(), E> {
    let mut rows = Vec::new();
    for b in batches {
        rows.clear();
        read(&b?, &mut rows)?;
        each(&rows)?;
    }
    Ok(())
}

/// Every row `read` gives of `batches`, in table order.
pub(crate) fn collect<R>(
    batches: Batches,
    read: impl FnMut(&Batch, &mut Vec<R>) -> Result<(), ReportError>,
) -> Result<Vec<R>, ReportError> {
    let mut out = Vec::new();
    let mut read = read;
    for b in batches {
        read(&b?, &mut out)?;
    }
    Ok(out)
}
