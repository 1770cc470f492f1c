//! Device records that never arrived. Every recorded hggc call that put work
//! on the device (a successful launch, copy or memset whose kind of activity
//! is recorded) should be followed by one activity record with its
//! correlation id. The injection library flushes records every 100 ms, at
//! `exit` and on fatal signals; a process that ends by `_exit`, SIGKILL or
//! `exec`, or whose flush failed, takes its last records with it. Such calls
//! are counted here (`device_activity_undelivered` in the report's drops)
//! instead of leaving the report silently short.
//!
//! Calls and records are matched as they arrive, per process (correlation
//! ids are per process: the runtime counts from 1 in each), so memory holds
//! only what is in flight: calls waiting for their record, and records that
//! came before their call's event (a synchronous copy's record can be
//! flushed before the call returns). A process's waiting calls are counted
//! when it exits or execs (its records can no longer come), the rest when a
//! report ends.
use std::collections::{HashMap, HashSet};

use asys_common::{ACTIVITY_FROM_CUPTI, ACTIVITY_KERNEL, ActivityEvent};

use crate::apis::{DeviceWork, HggcTraceSet, Signature};
use asys_report::report::rows::ApiRow;
use asys_report::trace_items::TraceItem;

#[derive(Debug, Default)]
struct Process {
    /// Correlation ids of recorded calls whose record has not come.
    waiting: HashSet<u32>,
    /// Correlation ids of records whose call has not come (yet).
    early: HashSet<u32>,
}

#[derive(Debug, Default)]
pub struct DeviceLedger {
    processes: HashMap<u32, Process>,
    /// Calls counted without their record since the tracer started (like
    /// the kernel's drop counters, it is not reset between reports).
    undelivered: u64,
}

/// The correlation id of a recorded call that must be followed by a device
/// record: an hggc call that succeeded, put work on the device, carries a
/// correlation id (the injection library is there), and whose kind of
/// activity `set` records.
pub fn expects(
    item: TraceItem,
    signature: &Signature,
    row: &ApiRow,
    set: &HggcTraceSet,
) -> Option<u32> {
    let work = signature.device_work?;
    (item == TraceItem::Hggc && row.return_value == 0 && set.wants_activity(work))
        .then_some(row.correlation)
        .flatten()
}

impl DeviceLedger {
    /// A recorded call that expects its record (see [`expects`]).
    pub fn call(&mut self, pid: u32, correlation: u32) {
        let p = self.processes.entry(pid).or_default();
        if !p.early.remove(&correlation) {
            p.waiting.insert(correlation);
        }
    }

    /// A device record arrived (recorded, or counted past
    /// `--max-report-size`: either way it was not lost on the way).
    pub fn record(&mut self, ev: &ActivityEvent, set: &HggcTraceSet) {
        // CUDA's records: no hggc call waits for them, and keeping their
        // ids would grow with every kernel of the process.
        if ev.record.kind & ACTIVITY_FROM_CUPTI != 0 {
            return;
        }
        let (pid, correlation) = (ev.header.pid, ev.record.correlation);
        if let Some(p) = self.processes.get_mut(&pid)
            && p.waiting.remove(&correlation)
        {
            return;
        }
        // Its call may still come, unless calls of its kind are not
        // recorded at all (keeping it would only cost memory).
        let work = if ev.record.kind == ACTIVITY_KERNEL {
            DeviceWork::Kernel
        } else {
            DeviceWork::Memory
        };
        if set.wants_calls_of(work) {
            self.processes
                .entry(pid)
                .or_default()
                .early
                .insert(correlation);
        }
    }

    /// `pid` exited or exec'd: what it still owes will never come.
    pub fn process_ended(&mut self, pid: u32) {
        if let Some(p) = self.processes.remove(&pid) {
            self.undelivered += p.waiting.len() as u64;
        }
    }

    /// A report ends: the calls still waiting are missing from it. Returns
    /// the calls counted without their record so far.
    pub fn end_report(&mut self) -> u64 {
        for (_, p) in self.processes.drain() {
            self.undelivered += p.waiting.len() as u64;
        }
        self.undelivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asys_common::{ACTIVITY_MEMCPY, ActivityRecord, EventHeader};

    fn record(pid: u32, correlation: u32, kind: u32) -> ActivityEvent {
        ActivityEvent {
            header: EventHeader {
                pid,
                ..Default::default()
            },
            record: ActivityRecord {
                kind,
                correlation,
                ..Default::default()
            },
        }
    }

    #[test]
    fn cuda_records_are_not_kept_waiting_for_a_call() {
        let set = HggcTraceSet::default();
        let mut l = DeviceLedger::default();
        l.record(&record(10, 7, ACTIVITY_KERNEL | ACTIVITY_FROM_CUPTI), &set);
        assert!(l.processes.is_empty());
        // An hggc record is kept until its call comes.
        l.record(&record(10, 7, ACTIVITY_KERNEL), &set);
        assert_eq!(l.processes[&10].early.len(), 1);
    }

    #[test]
    fn calls_and_records_match_in_either_order_per_process() {
        let set = HggcTraceSet::default();
        let mut l = DeviceLedger::default();
        l.call(10, 1);
        l.record(&record(10, 1, ACTIVITY_KERNEL), &set);
        // A record before its call's event.
        l.record(&record(10, 2, ACTIVITY_MEMCPY), &set);
        l.call(10, 2);
        // Same id, another process (a forked child counts from the same id).
        l.call(11, 1);
        l.call(10, 3);
        l.process_ended(10);
        assert_eq!(
            l.end_report(),
            2,
            "10's call 3 and 11's call 1 never got theirs"
        );
        // Counted once: a later report starts from what is left.
        assert_eq!(l.end_report(), 2);
    }

    #[test]
    fn only_successful_device_calls_of_recorded_kinds_expect_a_record() {
        let set = HggcTraceSet::parse("kernel-activity,kernel-api,memory-api").unwrap();
        let row = |ret, corr| ApiRow {
            return_value: ret,
            correlation: corr,
            ..Default::default()
        };
        let launch = crate::apis::signature("hggcLaunchKernel");
        let copy = crate::apis::signature("hggcMemcpyAsync");
        let malloc = crate::apis::signature("hggcMalloc");
        assert_eq!(
            expects(TraceItem::Hggc, &launch, &row(0, Some(5)), &set),
            Some(5)
        );
        assert_eq!(
            expects(TraceItem::Hggc, &launch, &row(1, Some(5)), &set),
            None
        );
        assert_eq!(expects(TraceItem::Hggc, &launch, &row(0, None), &set), None);
        assert_eq!(
            expects(TraceItem::Hggc, &copy, &row(0, Some(5)), &set),
            None
        );
        assert_eq!(
            expects(TraceItem::Hggc, &malloc, &row(0, Some(5)), &set),
            None
        );
        assert_eq!(
            expects(TraceItem::Cuda, &launch, &row(0, Some(5)), &set),
            None
        );
    }
}
