//! Device and pinned host memory over time, from the recorded hggc
//! allocation calls (hggcMalloc/hggcFree, hggcMallocHost/hggcFreeHost):
//! what the device memory reports and the Perfetto export's counters read.
use std::collections::{BTreeMap, HashMap};

use super::api::{ApiRows, CallColumns};
use crate::report::{
    ReportError,
    container::Container,
    reader,
    rows::ApiRow,
    schema::{self, api},
};

/// The calls that change the memory in use, and hggcSetDevice (which picks
/// the device a thread's later allocations are on).
const CALLS: [&str; 5] = [
    "hggcMalloc",
    "hggcFree",
    "hggcMallocHost",
    "hggcFreeHost",
    "hggcSetDevice",
];

/// One change of allocated bytes.
pub struct Change {
    /// When the allocating or freeing call returned.
    pub time: i64,
    pub pid: u32,
    /// `device` or `pinned` (host memory from hggcMallocHost).
    pub kind: &'static str,
    /// The device; -1 for pinned host memory.
    pub device: i32,
    /// The call: hggcMalloc, hggcFree, hggcMallocHost or hggcFreeHost.
    pub operation: &'static str,
    pub bytes: i64,
    /// Bytes in use of this (pid, kind, device) after the change.
    pub total: i64,
}

/// Allocations of one (pid, kind, device).
#[derive(Default)]
pub struct Usage {
    pub allocations: u64,
    pub frees: u64,
    /// Bytes in use at the end, and at most.
    pub current: i64,
    pub peak: i64,
    /// The largest allocation.
    pub largest: u64,
}

/// Usage per (pid, kind, device; -1 for pinned host memory).
pub type UsageByKey = BTreeMap<(u32, &'static str, i32), Usage>;

/// Every change of memory in use, in time order (what the detail report
/// lists; the Perfetto export draws it as counters).
pub fn changes(report: &Container) -> Result<Vec<Change>, ReportError> {
    Ok(changes_and_usage(report)?.0)
}

/// Every change ([`changes`]), and the usage per (pid, kind, device) they
/// add up to.
pub fn changes_and_usage(report: &Container) -> Result<(Vec<Change>, UsageByKey), ReportError> {
    let strings = reader::string_table(report)?;
    let columns = [CallColumns::NAMES, &[api::BYTES, api::PTR, api::DEVICE]].concat();
    // The calls that allocate, free or pick a device, with their names.
    let mut calls: Vec<(ApiRow, &'static str)> = Vec::new();
    for b in api::scan(report, schema::HGGC_API, &columns)? {
        let b = b?;
        let rows = ApiRows::of(&b)?;
        // By name first: only these calls are read further.
        for (i, &id) in api::View(&b).name_id()?.iter().enumerate() {
            let n = strings.get(id).unwrap_or("");
            if let Some(&name) = CALLS.iter().find(|&&m| m == n) {
                calls.push((rows.get(i), name));
            }
        }
    }
    calls.sort_by_key(|(c, _)| (c.end, c.start));
    let mut device_of_thread: HashMap<(u32, u32), i32> = HashMap::new();
    let mut live: HashMap<(u32, u64), (u64, &'static str, i32)> = HashMap::new();
    let mut usage = UsageByKey::new();
    let mut out = Vec::new();
    for (c, name) in calls.into_iter().filter(|(c, _)| c.return_value == 0) {
        let device = *device_of_thread.get(&(c.pid, c.tid)).unwrap_or(&0);
        let (kind, delta, dev) = match name {
            "hggcSetDevice" => {
                device_of_thread.insert((c.pid, c.tid), c.device.unwrap_or(0));
                continue;
            }
            "hggcMalloc" | "hggcMallocHost" => {
                let (Some(ptr), Some(bytes)) = (c.ptr, c.bytes) else {
                    continue;
                };
                if ptr == 0 {
                    continue;
                }
                let kind = if name == "hggcMalloc" {
                    "device"
                } else {
                    "pinned"
                };
                let dev = if kind == "device" { device } else { -1 };
                live.insert((c.pid, ptr), (bytes, kind, dev));
                let u = usage.entry((c.pid, kind, dev)).or_default();
                u.allocations += 1;
                u.largest = u.largest.max(bytes);
                (kind, i64::try_from(bytes).unwrap_or(i64::MAX), dev)
            }
            _ => {
                let Some((bytes, kind, dev)) = c.ptr.and_then(|p| live.remove(&(c.pid, p))) else {
                    continue;
                };
                usage.entry((c.pid, kind, dev)).or_default().frees += 1;
                (kind, -i64::try_from(bytes).unwrap_or(i64::MAX), dev)
            }
        };
        let u = usage.entry((c.pid, kind, dev)).or_default();
        u.current = u.current.saturating_add(delta);
        u.peak = u.peak.max(u.current);
        out.push(Change {
            time: c.end,
            pid: c.pid,
            kind,
            device: dev,
            operation: name,
            bytes: delta,
            total: u.current,
        });
    }
    Ok((out, usage))
}
