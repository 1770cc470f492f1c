//! API traces (hggc_api_trace, osrt_trace, cuda_api_trace, ...): every call
//! of one API table in start order (ties in table order), streamed through
//! [`start_order`]: memory stays a heap's worth of calls however long the
//! table is.
use std::{collections::HashMap, sync::Arc};

use arrow::{
    array::{Array, PrimitiveArray},
    datatypes::{Int32Type, UInt32Type, UInt64Type},
};

use super::{
    api_sum::{CallColumns, kernel_names},
    format::{RowIter, RowSource, Table, Value},
};
use crate::report::{
    ReportError,
    container::{Container, MemberReader},
    reader::{Batch, TableReader},
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

/// The columns a trace row shows: [`CallColumns`]' and these.
const COLUMNS: &[&str] = &[
    api::START,
    api::END,
    api::PID,
    api::TID,
    api::NAME_ID,
    api::RETURN_VALUE,
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
            kernels: kernel_names(report)?,
        }),
    };
    // A column the table lacks (an SQLite export's) is an error now, while
    // nothing is printed, not half-way through the trace.
    drop(calls.scan(COLUMNS)?);
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
}

/// A call's place in the order: its start, then its row in the table.
type Key = (i64, u64);

/// One call, as much as its row shows.
struct Call {
    key: Key,
    end: i64,
    pid: u32,
    tid: u32,
    name: u32,
    ret: i64,
    corr: Option<u32>,
    bytes: Option<u64>,
    copy_kind: Option<i32>,
    stream: Option<u64>,
    ptr: Option<u64>,
    kernel: Option<u64>,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
}

/// One batch's columns, for reading calls out of it.
struct Columns<'a> {
    calls: CallColumns<'a>,
    corr: &'a PrimitiveArray<UInt32Type>,
    bytes: &'a PrimitiveArray<UInt64Type>,
    copy_kind: &'a PrimitiveArray<Int32Type>,
    stream: &'a PrimitiveArray<UInt64Type>,
    ptr: &'a PrimitiveArray<UInt64Type>,
    kernel: &'a PrimitiveArray<UInt64Type>,
    grid: [&'a PrimitiveArray<UInt32Type>; 3],
    block: [&'a PrimitiveArray<UInt32Type>; 3],
}

fn opt<T: arrow::datatypes::ArrowPrimitiveType>(
    a: &PrimitiveArray<T>,
    i: usize,
) -> Option<T::Native> {
    a.is_valid(i).then(|| a.value(i))
}

impl<'a> Columns<'a> {
    fn of(b: &'a Batch) -> Result<Self, ReportError> {
        let v = api::View(b);
        Ok(Self {
            calls: CallColumns::of(b)?,
            corr: v.correlation_id()?,
            bytes: v.bytes()?,
            copy_kind: v.copy_kind()?,
            stream: v.stream()?,
            ptr: v.ptr()?,
            kernel: v.kernel_addr()?,
            grid: [v.grid_x()?, v.grid_y()?, v.grid_z()?],
            block: [v.block_x()?, v.block_y()?, v.block_z()?],
        })
    }

    /// Row `i`, the table's row `row`.
    fn call(&self, i: usize, row: u64) -> Call {
        let c = &self.calls;
        let dims = |d: &[&PrimitiveArray<UInt32Type>; 3]| {
            d[0].is_valid(i)
                .then(|| [d[0].value(i), d[1].value(i), d[2].value(i)])
        };
        Call {
            key: (c.start[i], row),
            end: c.end[i],
            pid: c.pid[i],
            tid: c.tid[i],
            name: c.name[i],
            ret: c.ret[i],
            corr: opt(self.corr, i),
            bytes: opt(self.bytes, i),
            copy_kind: opt(self.copy_kind, i),
            stream: opt(self.stream, i),
            ptr: opt(self.ptr, i),
            kernel: opt(self.kernel, i),
            grid: dims(&self.grid),
            block: dims(&self.block),
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
        let kernel = c.kernel.map_or(Value::Null, |addr| {
            Value::Str(
                self.kernels
                    .get(&(c.pid, addr))
                    .and_then(|&id| self.strings.get(id))
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{addr:#x}")),
            )
        });
        vec![
            Value::Int(c.key.0),
            Value::Int(super::signed_duration(c.key.0, c.end)),
            Value::Str(self.strings.get(c.name).unwrap_or("?").into()),
            Value::Int(c.ret),
            int(c.corr.map(i64::from)),
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
        c.key
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
        Ok(Box::new(self.scan(COLUMNS)?.map(move |b| {
            let b = b?;
            let (first, picked) = rows.pick(b.num_rows());
            // A batch without a wanted row (the stragglers are few) is not
            // looked at further.
            if picked.len() == 0 {
                return Ok(Vec::new());
            }
            let cols = Columns::of(&b)?;
            Ok(picked.map(|i| cols.call(i, first + i as u64)).collect())
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
