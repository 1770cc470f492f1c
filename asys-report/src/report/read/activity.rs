//! Device activity (`hggc_activity`): kernels, copies and memsets as the
//! device ran them, read as [`Activity`], the one reader view of the
//! table's rows (the trace and summary reports, the analyze rules and the
//! exports all read it).
//!
//! The recorder writes [`ActivityRow`](crate::report::rows::ActivityRow)s;
//! a row read back differs in two ways, so the view is its own type: every
//! column reads on its own (a report written before CUPTI's kernel columns
//! existed, or read back from an SQLite export, has some and not others:
//! those it lacks read as None), and a kind no [`ActivityKind`] names is
//! kept as None rather than refused.
//!
//! A reader scans the columns it needs (a named set below, or its own);
//! any column the scan did not ask for reads as its default (0, None).
use arrow::array::StringArray;

use super::{opt_in, scanned};
use crate::report::{
    ReportError,
    container::Container,
    reader::{Batch, Batches},
    schema::{ActivityKind, activity as ac},
};

/// One row of the device activity table, as read back.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Activity {
    /// None: a stored kind no [`ActivityKind`] names (see
    /// [`rows_with_stored_kind`]), or the kind was not scanned.
    pub kind: Option<ActivityKind>,
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    pub device: u32,
    pub stream: u32,
    pub correlation: u32,
    pub bytes: Option<u64>,
    pub copy_kind: Option<i32>,
    pub kernel_addr: Option<u64>,
    /// A launch's dimensions, each as stored.
    pub grid: [Option<u32>; 3],
    pub block: [Option<u32>; 3],
    pub shared_mem: Option<u32>,
    pub clock_offset: i64,
    /// Memory kinds of a copy's source and destination (a memset's
    /// destination): CUPTI's numbers, [`MEMORY_PAGEABLE`] and on; None in
    /// reports older than these columns.
    pub src_kind: Option<i32>,
    pub dst_kind: Option<i32>,
    /// CUPTI's kernel record and context (None for HGPTI's records, and
    /// in reports written before they were recorded).
    pub details: Details,
}

/// What CUPTI adds to a device row: nsys's kernel record columns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Details {
    pub registers_per_thread: Option<u32>,
    pub static_shared: Option<u32>,
    pub dynamic_shared: Option<u32>,
    pub local_per_thread: Option<u32>,
    pub local_total: Option<u32>,
    pub context: Option<u32>,
    pub green_context: Option<u32>,
    pub graph_id: Option<u32>,
    pub graph_node_id: Option<u64>,
}

/// CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE.
pub const MEMORY_PAGEABLE: i32 = 1;

impl Activity {
    pub fn duration(&self) -> u64 {
        super::duration(self.start, self.end)
    }

    /// A copy from or to pageable host memory (known only where the report
    /// has the memory kinds).
    pub fn is_pageable_copy(&self) -> bool {
        self.src_kind.is_some()
            && (self.src_kind == Some(MEMORY_PAGEABLE) || self.dst_kind == Some(MEMORY_PAGEABLE))
    }
}

/// A copy's direction, by its `copyKind`.
pub fn copy_kind_name(kind: i32) -> &'static str {
    match kind {
        0 => "Host-to-Host",
        1 => "Host-to-Device",
        2 => "Device-to-Host",
        3 => "Device-to-Device",
        4 => "Peer-to-Peer",
        _ => "Unknown",
    }
}

/// When and where an activity ran: what the device rules of `analyze`
/// read of each.
pub const PLACE_COLUMNS: &[&str] = &[ac::START, ac::END, ac::PID, ac::DEVICE, ac::STREAM];

/// The columns of an activity that every report has: what the trace
/// report and the exports show of each row (with [`DETAIL_COLUMNS`]).
pub const TRACE_COLUMNS: &[&str] = &[
    ac::KIND,
    ac::START,
    ac::END,
    ac::PID,
    ac::DEVICE,
    ac::STREAM,
    ac::CORRELATION_ID,
    ac::BYTES,
    ac::COPY_KIND,
    ac::KERNEL_ADDR,
    ac::SHARED_MEM,
    ac::GRID_X,
    ac::GRID_Y,
    ac::GRID_Z,
    ac::BLOCK_X,
    ac::BLOCK_Y,
    ac::BLOCK_Z,
];

/// The columns of [`Details`], read where the report has them.
pub const DETAIL_COLUMNS: &[&str] = &[
    ac::REGISTERS_PER_THREAD,
    ac::STATIC_SHARED_MEMORY,
    ac::DYNAMIC_SHARED_MEMORY,
    ac::LOCAL_MEMORY_PER_THREAD,
    ac::LOCAL_MEMORY_TOTAL,
    ac::CONTEXT_ID,
    ac::GREEN_CONTEXT_ID,
    ac::GRAPH_ID,
    ac::GRAPH_NODE_ID,
];

/// What the kernel reports read of a kernel.
pub const KERNEL_COLUMNS: &[&str] = &[
    ac::KIND,
    ac::START,
    ac::END,
    ac::PID,
    ac::DEVICE,
    ac::CORRELATION_ID,
    ac::KERNEL_ADDR,
];

/// Every row in [`TRACE_COLUMNS`] and the [`DETAIL_COLUMNS`] the report
/// has (a report older than the kernel record's columns lacks them: its
/// rows read them as None), to read with [`rows`].
pub fn scan_trace(report: &Container) -> Result<Batches, ReportError> {
    let mut columns = TRACE_COLUMNS.to_vec();
    if let Some(t) = ac::open(report)? {
        columns.extend(DETAIL_COLUMNS.iter().filter(|c| t.has_column(c)));
    }
    ac::scan(report, &columns)
}

/// One batch of the activity table, read a row at a time as
/// [`Activity`]s: the columns the scan asked for, every other one as its
/// default.
pub struct ActivityRows<'a> {
    rows: usize,
    kinds: Option<Vec<Option<ActivityKind>>>,
    stored: Option<&'a StringArray>,
    start: Option<&'a [i64]>,
    end: Option<&'a [i64]>,
    pid: Option<&'a [u32]>,
    device: Option<&'a [u32]>,
    stream: Option<&'a [u32]>,
    correlation: Option<&'a [u32]>,
    clock_offset: Option<&'a [i64]>,
    bytes: Option<&'a arrow::array::UInt64Array>,
    copy_kind: Option<&'a arrow::array::Int32Array>,
    kernel_addr: Option<&'a arrow::array::UInt64Array>,
    grid: [Option<&'a arrow::array::UInt32Array>; 3],
    block: [Option<&'a arrow::array::UInt32Array>; 3],
    shared_mem: Option<&'a arrow::array::UInt32Array>,
    src_kind: Option<&'a arrow::array::Int32Array>,
    dst_kind: Option<&'a arrow::array::Int32Array>,
    /// [`Details`]' columns, in its order (the node id apart).
    details: [Option<&'a arrow::array::UInt32Array>; 8],
    graph_node_id: Option<&'a arrow::array::UInt64Array>,
}

impl<'a> ActivityRows<'a> {
    pub fn of(b: &'a Batch) -> Result<Self, ReportError> {
        let v = ac::View(b);
        Ok(Self {
            rows: b.num_rows(),
            kinds: scanned(b, ac::KIND, || v.kinds())?,
            stored: scanned(b, ac::KIND, || v.kind())?,
            start: scanned(b, ac::START, || v.start())?,
            end: scanned(b, ac::END, || v.end())?,
            pid: scanned(b, ac::PID, || v.pid())?,
            device: scanned(b, ac::DEVICE, || v.device())?,
            stream: scanned(b, ac::STREAM, || v.stream())?,
            correlation: scanned(b, ac::CORRELATION_ID, || v.correlation_id())?,
            clock_offset: scanned(b, ac::CLOCK_OFFSET, || v.clock_offset())?,
            bytes: scanned(b, ac::BYTES, || v.bytes())?,
            copy_kind: scanned(b, ac::COPY_KIND, || v.copy_kind())?,
            kernel_addr: scanned(b, ac::KERNEL_ADDR, || v.kernel_addr())?,
            grid: [
                scanned(b, ac::GRID_X, || v.grid_x())?,
                scanned(b, ac::GRID_Y, || v.grid_y())?,
                scanned(b, ac::GRID_Z, || v.grid_z())?,
            ],
            block: [
                scanned(b, ac::BLOCK_X, || v.block_x())?,
                scanned(b, ac::BLOCK_Y, || v.block_y())?,
                scanned(b, ac::BLOCK_Z, || v.block_z())?,
            ],
            shared_mem: scanned(b, ac::SHARED_MEM, || v.shared_mem())?,
            src_kind: scanned(b, ac::SRC_KIND, || v.src_kind())?,
            dst_kind: scanned(b, ac::DST_KIND, || v.dst_kind())?,
            details: [
                scanned(b, ac::REGISTERS_PER_THREAD, || v.registers_per_thread())?,
                scanned(b, ac::STATIC_SHARED_MEMORY, || v.static_shared_memory())?,
                scanned(b, ac::DYNAMIC_SHARED_MEMORY, || v.dynamic_shared_memory())?,
                scanned(b, ac::LOCAL_MEMORY_PER_THREAD, || {
                    v.local_memory_per_thread()
                })?,
                scanned(b, ac::LOCAL_MEMORY_TOTAL, || v.local_memory_total())?,
                scanned(b, ac::CONTEXT_ID, || v.context_id())?,
                scanned(b, ac::GREEN_CONTEXT_ID, || v.green_context_id())?,
                scanned(b, ac::GRAPH_ID, || v.graph_id())?,
            ],
            graph_node_id: scanned(b, ac::GRAPH_NODE_ID, || v.graph_node_id())?,
        })
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Row `i`'s kind alone (None: unknown, or not scanned), to pick rows
    /// before reading them whole.
    #[inline]
    pub fn kind(&self, i: usize) -> Option<ActivityKind> {
        self.kinds.as_ref().and_then(|k| k[i])
    }

    /// Row `i`. Inlined into its reader's loop, where the fields that
    /// reader does not look at are never built.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Activity {
        let d = |k: usize| opt_in(self.details[k], i);
        Activity {
            kind: self.kinds.as_ref().and_then(|k| k[i]),
            start: value_in(self.start, i),
            end: value_in(self.end, i),
            pid: value_in(self.pid, i),
            device: value_in(self.device, i),
            stream: value_in(self.stream, i),
            correlation: value_in(self.correlation, i),
            bytes: opt_in(self.bytes, i),
            copy_kind: opt_in(self.copy_kind, i),
            kernel_addr: opt_in(self.kernel_addr, i),
            grid: dims_in(&self.grid, i),
            block: dims_in(&self.block, i),
            shared_mem: opt_in(self.shared_mem, i),
            clock_offset: value_in(self.clock_offset, i),
            src_kind: opt_in(self.src_kind, i),
            dst_kind: opt_in(self.dst_kind, i),
            details: Details {
                registers_per_thread: d(0),
                static_shared: d(1),
                dynamic_shared: d(2),
                local_per_thread: d(3),
                local_total: d(4),
                context: d(5),
                green_context: d(6),
                graph_id: d(7),
                graph_node_id: opt_in(self.graph_node_id, i),
            },
        }
    }
}

/// Row `i` of a column the scan may not have asked for: its default when
/// not scanned.
#[inline(always)]
fn value_in<T: Copy + Default>(c: Option<&[T]>, i: usize) -> T {
    c.map_or(T::default(), |c| c[i])
}

/// Row `i` of a launch's three dimensions, each as stored.
#[inline(always)]
fn dims_in(c: &[Option<&arrow::array::UInt32Array>; 3], i: usize) -> [Option<u32>; 3] {
    [opt_in(c[0], i), opt_in(c[1], i), opt_in(c[2], i)]
}

/// The rows of a batch of the activity table in order, each inlined into
/// its reader's loop (a mapped range kept each whole row).
struct Rows<'a> {
    rows: ActivityRows<'a>,
    at: usize,
}

impl Iterator for Rows<'_> {
    type Item = Activity;

    #[inline(always)]
    fn next(&mut self) -> Option<Activity> {
        let i = self.at;
        if i >= self.rows.rows {
            return None;
        }
        self.at += 1;
        Some(self.rows.get(i))
    }
}

/// The rows of a batch of the activity table, in the columns it has.
pub fn rows(b: &Batch) -> Result<impl Iterator<Item = Activity> + '_, ReportError> {
    Ok(Rows {
        rows: ActivityRows::of(b)?,
        at: 0,
    })
}

/// The rows of a batch, each with its kind as stored (what names a row of
/// a kind no [`ActivityKind`] names; empty when the kind was not scanned).
pub fn rows_with_stored_kind(
    b: &Batch,
) -> Result<impl Iterator<Item = (Activity, &str)> + '_, ReportError> {
    let rows = Rows {
        rows: ActivityRows::of(b)?,
        at: 0,
    };
    let stored = rows.rows.stored;
    Ok(rows
        .enumerate()
        .map(move |(i, a)| (a, stored.map_or("", |s| s.value(i)))))
}

/// Calls `f` with each kernel of the device activity table (its other
/// rows are copies and memsets) in [`KERNEL_COLUMNS`], a batch at a time:
/// a 10 M-event report's kernels are never all in memory.
pub fn each_kernel(report: &Container, mut f: impl FnMut(Activity)) -> Result<(), ReportError> {
    for b in ac::scan(report, KERNEL_COLUMNS)? {
        let b = b?;
        let rows = ActivityRows::of(&b)?;
        for i in 0..rows.len() {
            if rows.kind(i) == Some(ActivityKind::Kernel) {
                f(rows.get(i));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{
        builder::ReportBuilder,
        columns::TableDef,
        rows::{ActivityRow, KernelDetails},
        schema::HGGC_ACTIVITY,
    };

    /// A kernel with CUPTI's record, a copy of pageable memory and a
    /// memset, written in end order (as the recorder writes them).
    fn written() -> Vec<ActivityRow> {
        vec![
            ActivityRow {
                start: 300,
                end: 340,
                kind: ActivityKind::Memset,
                pid: 8,
                device: 1,
                stream: 4,
                correlation: 12,
                bytes: Some(4096),
                clock_offset: -5,
                dst_kind: Some(3),
                context: Some(2),
                ..Default::default()
            },
            ActivityRow {
                start: 100,
                end: 400,
                kind: ActivityKind::Kernel,
                pid: 7,
                device: 0,
                stream: 3,
                correlation: 10,
                kernel_addr: Some(0xabc0),
                grid: Some([64, 2, 1]),
                block: Some([256, 1, 1]),
                shared_mem: Some(1024),
                context: Some(1),
                kernel: Some(KernelDetails {
                    registers_per_thread: 32,
                    static_shared: 512,
                    dynamic_shared: 512,
                    local_per_thread: 16,
                    local_total: 4096,
                    green_context: None,
                    graph_id: 5,
                    graph_node_id: 9,
                }),
                ..Default::default()
            },
            ActivityRow {
                start: 200,
                end: 450,
                kind: ActivityKind::Memcpy,
                pid: 7,
                device: 0,
                stream: 3,
                correlation: 11,
                bytes: Some(1 << 20),
                copy_kind: Some(1),
                src_kind: Some(MEMORY_PAGEABLE),
                dst_kind: Some(3),
                ..Default::default()
            },
        ]
    }

    /// What the view of a written row holds, field by field.
    fn view_of(r: &ActivityRow) -> Activity {
        let k = r.kernel;
        let dims = |d: Option<[u32; 3]>| match d {
            Some(d) => d.map(Some),
            None => [None; 3],
        };
        Activity {
            kind: Some(r.kind),
            start: r.start,
            end: r.end,
            pid: r.pid,
            device: r.device,
            stream: r.stream,
            correlation: r.correlation,
            bytes: r.bytes,
            copy_kind: r.copy_kind,
            kernel_addr: r.kernel_addr,
            grid: dims(r.grid),
            block: dims(r.block),
            shared_mem: r.shared_mem,
            clock_offset: r.clock_offset,
            src_kind: r.src_kind,
            dst_kind: r.dst_kind,
            details: Details {
                registers_per_thread: k.map(|k| k.registers_per_thread),
                static_shared: k.map(|k| k.static_shared),
                dynamic_shared: k.map(|k| k.dynamic_shared),
                local_per_thread: k.map(|k| k.local_per_thread),
                local_total: k.map(|k| k.local_total),
                context: r.context,
                green_context: k.and_then(|k| k.green_context),
                graph_id: k.map(|k| k.graph_id),
                graph_node_id: k.map(|k| k.graph_node_id),
            },
        }
    }

    fn report(rows: &[ActivityRow]) -> Container {
        let mut b = ReportBuilder::new().expect("builder");
        b.table::<ac::Table>(HGGC_ACTIVITY, rows).expect("table");
        b.finish_temporary().expect("report")
    }

    /// Every column reads back as written, in table order.
    #[test]
    fn every_column_reads_back_as_written() {
        let rows = written();
        let report = report(&rows);
        let all: Vec<&str> = ac::Table::COLUMNS.iter().map(|c| c.name).collect();
        let mut read = Vec::new();
        for b in ac::scan(&report, &all).expect("scan") {
            read.extend(
                rows_with_stored_kind(&b.expect("batch"))
                    .expect("rows")
                    .map(|(a, stored)| {
                        assert_eq!(Some(stored), a.kind.map(ActivityKind::as_str));
                        a
                    }),
            );
        }
        let want: Vec<Activity> = rows.iter().map(view_of).collect();
        assert_eq!(read, want);
        assert!(read[2].is_pageable_copy() && !read[0].is_pageable_copy());
        assert_eq!(read[1].duration(), 300);
    }

    /// A scan of some columns reads those, the rest as their defaults:
    /// the kernels' columns give each kernel's times, process, device,
    /// correlation and address, and nothing of its launch.
    #[test]
    fn a_narrow_scan_reads_the_columns_it_asked_for() {
        let written = written();
        let report = report(&written);
        let mut kernels = Vec::new();
        each_kernel(&report, |k| kernels.push(k)).expect("kernels");
        let want: Vec<Activity> = written
            .iter()
            .filter(|r| r.kind == ActivityKind::Kernel)
            .map(|r| Activity {
                kind: Some(r.kind),
                start: r.start,
                end: r.end,
                pid: r.pid,
                device: r.device,
                correlation: r.correlation,
                kernel_addr: r.kernel_addr,
                ..Default::default()
            })
            .collect();
        assert_eq!(kernels, want);
        // The trace's scan has every column of the trace and CUPTI's.
        let mut traced = Vec::new();
        for b in scan_trace(&report).expect("scan") {
            traced.extend(rows(&b.expect("batch")).expect("rows"));
        }
        let want: Vec<Activity> = written
            .iter()
            .map(|r| Activity {
                clock_offset: 0,
                src_kind: None,
                dst_kind: None,
                ..view_of(r)
            })
            .collect();
        assert_eq!(traced, want);
    }
}
