//! API traces (hggc_api_trace, osrt_trace, cuda_api_trace, ...): every call
//! of one API table in start order (ties in table order), streamed through
//! [`start_order`]: memory stays a heap's worth of calls however long the
//! table is.
use std::{collections::HashMap, sync::Arc};

use super::format::{RowIter, RowSource, Table, Value};
use crate::report::{
    ReportError,
    container::{Container, MemberReader},
    read::{
        api::{ApiRows, CallColumns},
        symbols::kernel_name_ids,
    },
    reader::{Batch, TableReader},
    rows::ApiRow,
    schema::api,
    start_order::{self, Batches, HELD, Numbering, Ordered},
    strings::StringTable,
};

const HEADERS: &[&str] = &[
    "Start (ns)",
    "Duration (ns)",
    "Name",
    "Result",
    "CorrId",
    "Pid",
    "Tid",
    "Bytes",
    "Copy Kind",
    "Stream",
    "Pointer",
    "Kernel",
    "Grid",
    "Block",
];

/// The columns a trace row shows besides [`CallColumns`]'.
const MORE_COLUMNS: &[&str] = &[
    api::CORRELATION_ID,
    api::BYTES,
    api::COPY_KIND,
    api::STREAM,
    api::PTR,
    api::KERNEL_ADDR,
    api::GRID_X,
    api::GRID_Y,
    api::GRID_Z,
    api::BLOCK_X,
    api::BLOCK_Y,
    api::BLOCK_Z,
];

/// Every call of `table` in start order.
pub fn api_trace(report: &Container, table: &str, title: &str) -> Result<Table, ReportError> {
    let calls = Calls {
        path: report.path.clone(),
        reader: crate::report::reader::open(report, table)?,
        names: Arc::new(Names {
            strings: crate::report::reader::string_table(report)?,
            kernels: kernel_name_ids(report)?,
        }),
        columns: [CallColumns::NAMES, MORE_COLUMNS].concat(),
    };
    // A column the table lacks (an SQLite export's) is an error now, while
    // nothing is printed, not half-way through the trace.
    drop(calls.scan(&calls.columns)?);
    Ok(Table::streamed(title, HEADERS.to_vec(), calls))
}

/// Where a row's names come from.
struct Names {
    strings: StringTable,
    /// (pid, kernel address) → name id.
    kernels: HashMap<(u32, u64), u32>,
}

struct Calls {
    /// The report's path, for errors.
    path: std::path::PathBuf,
    reader: Option<TableReader<MemberReader>>,
    names: Arc<Names>,
    /// The columns a row shows.
    columns: Vec<&'static str>,
}

/// A call's place in the order: its start, then its row in the table.
type Key = (i64, u64);

/// A call as the trace's order carries it: its row in the table and the
/// [`ApiRow`] columns the trace prints. Not the whole ApiRow (280 bytes,
/// against 176 here): the order moves every call of the table through its
/// buffer, and those copies are most of its time (hggc_api_trace of a
/// 1 M-call report, release: 0.85-1.2 s with this, 1.2-1.8 s with ApiRows).
struct Call {
    row: u64,
    start: i64,
    end: i64,
    pid: u32,
    tid: u32,
    name_id: u32,
    return_value: i64,
    correlation: Option<u32>,
    bytes: Option<u64>,
    copy_kind: Option<i32>,
    stream: Option<u64>,
    ptr: Option<u64>,
    kernel_addr: Option<u64>,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
}

impl Call {
    /// Call `c`, row `row` of the table.
    #[inline]
    fn of(row: u64, c: ApiRow) -> Self {
        Self {
            row,
            start: c.start,
            end: c.end,
            pid: c.pid,
            tid: c.tid,
            name_id: c.name_id,
            return_value: c.return_value,
            correlation: c.correlation,
            bytes: c.bytes,
            copy_kind: c.copy_kind,
            stream: c.stream,
            ptr: c.ptr,
            kernel_addr: c.kernel_addr,
            grid: c.grid,
            block: c.block,
        }
    }
}

impl Names {
    /// A call's row as the trace prints it.
    fn row(&self, c: &Call) -> Vec<Value> {
        let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
        let dims = |d: Option<[u32; 3]>| {
            d.map_or(Value::Null, |[x, y, z]| Value::Str(format!("{x},{y},{z}")))
        };
        let kernel = c.kernel_addr.map_or(Value::Null, |addr| {
            Value::Str(
                self.kernels
                    .get(&(c.pid, addr))
                    .and_then(|&id| self.strings.get(id))
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{addr:#x}")),
            )
        });
        vec![
            Value::Int(c.start),
            Value::Int(super::signed_duration(c.start, c.end)),
            Value::Str(self.strings.get(c.name_id).unwrap_or("?").into()),
            Value::Int(c.return_value),
            int(c.correlation.map(i64::from)),
            Value::Int(c.pid as i64),
            Value::Int(c.tid as i64),
            int(c.bytes.map(|v| v as i64)),
            int(c.copy_kind.map(i64::from)),
            int(c.stream.map(|v| v as i64)),
            int(c.ptr.map(|v| v as i64)),
            kernel,
            dims(c.grid),
            dims(c.block),
        ]
    }
}

impl Calls {
    fn scan(
        &self,
        columns: &[&str],
    ) -> Result<Box<dyn Iterator<Item = Result<Batch, ReportError>> + Send>, ReportError> {
        match &self.reader {
            Some(r) => Ok(Box::new(r.scan(columns, None)?)),
            None => Ok(Box::new(std::iter::empty())),
        }
    }
}

impl Ordered for Calls {
    type Key = Key;
    type Item = Call;

    fn key(c: &Call) -> Key {
        (c.start, c.row)
    }

    fn row(k: &Key) -> u64 {
        k.1
    }

    fn keys(&self) -> Result<Batches<'_, Key>, ReportError> {
        let mut rows = Numbering::new(None);
        Ok(Box::new(self.scan(&[api::START])?.map(move |b| {
            let b = b?;
            let start = api::View(&b).start()?;
            let (first, picked) = rows.pick(b.num_rows());
            Ok(picked.map(|i| (start[i], first + i as u64)).collect())
        })))
    }

    fn items(&self, only: Option<&[u64]>) -> Result<Batches<'_, Call>, ReportError> {
        let mut rows = Numbering::new(only);
        Ok(Box::new(self.scan(&self.columns)?.map(move |b| {
            let b = b?;
            let (first, picked) = rows.pick(b.num_rows());
            // A batch without a wanted row (the stragglers are few) is not
            // looked at further.
            if picked.len() == 0 {
                return Ok(Vec::new());
            }
            let rows = ApiRows::of(&b)?;
            Ok(picked
                .map(|i| Call::of(first + i as u64, rows.get(i)))
                .collect())
        })))
    }

    fn path(&self) -> std::path::PathBuf {
        self.path.clone()
    }
}

impl RowSource for Calls {
    fn rows(&self) -> Result<RowIter<'_>, ReportError> {
        let names = self.names.clone();
        Ok(Box::new(
            start_order::in_order(self, HELD)?.map(move |c| c.map(|c| names.row(&c))),
        ))
    }
}
