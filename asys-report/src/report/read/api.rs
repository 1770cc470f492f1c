//! The API tables (`hggc_api`, `osrt_api`, `pccl_api`, ...: one per trace
//! item, all of one shape): calls read back as the
//! [`ApiRow`]s the recorder wrote ([`ApiRows`]), and the columns every call
//! has as one batch's slices ([`CallColumns`]), for the readers that go
//! through a table column by column.
//!
//! A reader scans the columns it needs; any column the scan did not ask
//! for reads as its default (0, None).
use arrow::array::{Int32Array, UInt32Array, UInt64Array};

use super::{opt_in, scanned};
use crate::report::{
    ReportError,
    reader::Batch,
    rows::ApiRow,
    schema::{Registers, api},
};

/// What places a call: when, in which thread, which function. The readers
/// of calls start from these (decoding a column costs, so each adds only
/// what it reads; [`CallColumns::NAMES`] adds the return value).
pub const PLACE_COLUMNS: &[&str] = &[api::START, api::END, api::PID, api::TID, api::NAME_ID];

/// The columns every API call has, in one batch of an API table.
pub struct CallColumns<'a> {
    pub start: &'a [i64],
    pub end: &'a [i64],
    pub pid: &'a [u32],
    pub tid: &'a [u32],
    pub name: &'a [u32],
    pub ret: &'a [i64],
}

impl<'a> CallColumns<'a> {
    /// Their names, to read with others: `[CallColumns::NAMES, &[...]].concat()`.
    pub const NAMES: &'static [&'static str] = &[
        api::START,
        api::END,
        api::PID,
        api::TID,
        api::NAME_ID,
        api::RETURN_VALUE,
    ];

    pub fn of(b: &'a Batch) -> Result<Self, ReportError> {
        let v = api::View(b);
        Ok(Self {
            start: v.start()?,
            end: v.end()?,
            pid: v.pid()?,
            tid: v.tid()?,
            name: v.name_id()?,
            ret: v.return_value()?,
        })
    }
}

/// One batch of an API table, read a row at a time as [`ApiRow`]s: the
/// columns the scan asked for, every other one as its default.
pub struct ApiRows<'a> {
    rows: usize,
    start: Option<&'a [i64]>,
    end: Option<&'a [i64]>,
    pid: Option<&'a [u32]>,
    tid: Option<&'a [u32]>,
    cpu: Option<&'a [u32]>,
    name_id: Option<&'a [u32]>,
    library_id: Option<&'a [u32]>,
    return_value: Option<&'a [i64]>,
    correlation: Option<&'a UInt32Array>,
    bytes: Option<&'a UInt64Array>,
    copy_kind: Option<&'a Int32Array>,
    stream: Option<&'a UInt64Array>,
    device: Option<&'a Int32Array>,
    ptr: Option<&'a UInt64Array>,
    kernel_addr: Option<&'a UInt64Array>,
    grid: [Option<&'a UInt32Array>; 3],
    block: [Option<&'a UInt32Array>; 3],
    shared_mem: Option<&'a UInt64Array>,
    args: Option<Registers<'a>>,
    text_id: Option<&'a UInt32Array>,
    text_handle: Option<&'a UInt64Array>,
}

impl<'a> ApiRows<'a> {
    pub fn of(b: &'a Batch) -> Result<Self, ReportError> {
        let v = api::View(b);
        Ok(Self {
            rows: b.num_rows(),
            start: scanned(b, api::START, || v.start())?,
            end: scanned(b, api::END, || v.end())?,
            pid: scanned(b, api::PID, || v.pid())?,
            tid: scanned(b, api::TID, || v.tid())?,
            cpu: scanned(b, api::CPU, || v.cpu())?,
            name_id: scanned(b, api::NAME_ID, || v.name_id())?,
            library_id: scanned(b, api::LIBRARY_ID, || v.library_id())?,
            return_value: scanned(b, api::RETURN_VALUE, || v.return_value())?,
            correlation: scanned(b, api::CORRELATION_ID, || v.correlation_id())?,
            bytes: scanned(b, api::BYTES, || v.bytes())?,
            copy_kind: scanned(b, api::COPY_KIND, || v.copy_kind())?,
            stream: scanned(b, api::STREAM, || v.stream())?,
            device: scanned(b, api::DEVICE, || v.device())?,
            ptr: scanned(b, api::PTR, || v.ptr())?,
            kernel_addr: scanned(b, api::KERNEL_ADDR, || v.kernel_addr())?,
            grid: [
                scanned(b, api::GRID_X, || v.grid_x())?,
                scanned(b, api::GRID_Y, || v.grid_y())?,
                scanned(b, api::GRID_Z, || v.grid_z())?,
            ],
            block: [
                scanned(b, api::BLOCK_X, || v.block_x())?,
                scanned(b, api::BLOCK_Y, || v.block_y())?,
                scanned(b, api::BLOCK_Z, || v.block_z())?,
            ],
            shared_mem: scanned(b, api::SHARED_MEM, || v.shared_mem())?,
            args: scanned(b, api::ARGS, || v.registers())?,
            text_id: scanned(b, api::TEXT_ID, || v.text_id())?,
            text_handle: scanned(b, api::TEXT_HANDLE, || v.text_handle())?,
        })
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Row `i`. A launch's dimensions are there when its x is (all three
    /// are recorded together). Inlined into its reader's loop, where the
    /// fields that reader does not look at are never built.
    #[inline(always)]
    pub fn get(&self, i: usize) -> ApiRow {
        let time = |c: Option<&[i64]>| c.map_or(0, |c| c[i]);
        let id = |c: Option<&[u32]>| c.map_or(0, |c| c[i]);
        // y and z as stored beside a value of x (a null reads as its slot).
        let dims = |d: &[Option<&UInt32Array>; 3]| {
            let stored = |k: usize| d[k].map_or(0, |c| c.value(i));
            opt_in(d[0], i).map(|x| [x, stored(1), stored(2)])
        };
        ApiRow {
            start: time(self.start),
            end: time(self.end),
            pid: id(self.pid),
            tid: id(self.tid),
            cpu: id(self.cpu),
            name_id: id(self.name_id),
            library_id: id(self.library_id),
            return_value: time(self.return_value),
            correlation: opt_in(self.correlation, i),
            bytes: opt_in(self.bytes, i),
            copy_kind: opt_in(self.copy_kind, i),
            stream: opt_in(self.stream, i),
            device: opt_in(self.device, i),
            ptr: opt_in(self.ptr, i),
            kernel_addr: opt_in(self.kernel_addr, i),
            grid: dims(&self.grid),
            block: dims(&self.block),
            shared_mem: opt_in(self.shared_mem, i),
            args: self.args.as_ref().and_then(|r| r.get(i)),
            text_id: opt_in(self.text_id, i),
            text_handle: opt_in(self.text_handle, i),
        }
    }

    /// Every row, in table order.
    pub fn iter(&self) -> impl Iterator<Item = ApiRow> + '_ {
        Rows { rows: self, at: 0 }
    }
}

/// The rows of an [`ApiRows`] in order, each inlined into its reader's
/// loop.
struct Rows<'r, 'a> {
    rows: &'r ApiRows<'a>,
    at: usize,
}

impl Iterator for Rows<'_, '_> {
    type Item = ApiRow;

    #[inline(always)]
    fn next(&mut self) -> Option<ApiRow> {
        let i = self.at;
        if i >= self.rows.rows {
            return None;
        }
        self.at += 1;
        Some(self.rows.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{builder::ReportBuilder, columns::TableDef, schema::HGGC_API};

    fn call(start: i64, name_id: u32) -> ApiRow {
        ApiRow {
            start,
            end: start + 7,
            pid: 40,
            tid: 41,
            cpu: 2,
            name_id,
            library_id: 3,
            return_value: -1,
            ..Default::default()
        }
    }

    /// Each column reads back as written, with the other columns' defaults
    /// when a scan leaves them out.
    #[test]
    fn calls_read_back_as_written() {
        let mut b = ReportBuilder::new().expect("builder");
        let (launch, copy) = (b.string("hggcLaunchKernel"), b.string("hggcMemcpy"));
        let rows = vec![
            ApiRow {
                correlation: Some(5),
                stream: Some(0x10),
                kernel_addr: Some(0xabc0),
                grid: Some([8, 4, 2]),
                block: Some([128, 1, 1]),
                shared_mem: Some(64),
                args: Some([1, 2, 3, 4, 5, 6, 7, 8]),
                ..call(100, launch)
            },
            ApiRow {
                correlation: Some(6),
                bytes: Some(4096),
                copy_kind: Some(1),
                device: Some(0),
                ptr: Some(0x7f00),
                text_id: Some(launch),
                text_handle: Some(77),
                ..call(200, copy)
            },
            call(300, copy),
        ];
        b.table::<api::Table>(HGGC_API, &rows).expect("table");
        let report = b.finish_temporary().expect("report");
        let all: Vec<&str> = api::Table::COLUMNS.iter().map(|c| c.name).collect();
        let mut read = Vec::new();
        for b in api::scan(&report, HGGC_API, &all).expect("scan") {
            read.extend(ApiRows::of(&b.expect("batch")).expect("rows").iter());
        }
        assert_eq!(format!("{read:?}"), format!("{rows:?}"));
        // The columns every call has: the rest reads as its default.
        let mut read = Vec::new();
        for b in api::scan(&report, HGGC_API, CallColumns::NAMES).expect("scan") {
            read.extend(ApiRows::of(&b.expect("batch")).expect("rows").iter());
        }
        let want: Vec<ApiRow> = rows
            .iter()
            .map(|r| ApiRow {
                cpu: 0,
                library_id: 0,
                ..call(r.start, r.name_id)
            })
            .collect();
        assert_eq!(format!("{read:?}"), format!("{want:?}"));
    }
}
