//! The scheduler's events (`--cpuctxsw`): context switches (`sched`) and
//! wake-ups (`sched_wakeups`), read as the rows the recorder wrote.
use super::for_each_batch;
use crate::report::{
    ReportError,
    container::Container,
    reader::Batch,
    rows::{SchedRow, WakeupRow},
    schema::{sched as s, sched_wakeups as w},
};

/// Every context switch of the report, one batch at a time in table order.
pub fn for_each_switch_batch<E: From<ReportError>>(
    report: &Container,
    each: impl FnMut(&[SchedRow]) -> Result<(), E>,
) -> Result<(), E> {
    let columns = [
        s::TS,
        s::CPU,
        s::PREV_PID,
        s::PREV_TID,
        s::PREV_STATE,
        s::PREV_COMM_ID,
        s::NEXT_TID,
        s::NEXT_COMM_ID,
    ];
    for_each_batch(s::scan(report, &columns)?, switch_rows, each)
}

fn switch_rows(b: &Batch, out: &mut Vec<SchedRow>) -> Result<(), ReportError> {
    let v = s::View(b);
    let (ts, cpu) = (v.ts()?, v.cpu()?);
    let (pp, pt, state) = (v.prev_pid()?, v.prev_tid()?, v.prev_state()?);
    let (comm, next, next_comm) = (v.prev_comm_id()?, v.next_tid()?, v.next_comm_id()?);
    out.extend((0..b.num_rows()).map(|i| SchedRow {
        ts: ts[i],
        cpu: cpu[i],
        prev_pid: pp[i],
        prev_tid: pt[i],
        prev_state: state[i],
        prev_comm: comm[i],
        next_tid: next[i],
        next_comm: next_comm[i],
    }));
    Ok(())
}

/// Every context switch of the report, in table order.
pub fn switches(report: &Container) -> Result<Vec<SchedRow>, ReportError> {
    let mut switches = Vec::new();
    for_each_switch_batch(report, |batch| {
        switches.extend_from_slice(batch);
        Ok::<_, ReportError>(())
    })?;
    Ok(switches)
}

/// Every wake-up of the report, in table order.
pub fn wakeups(report: &Container) -> Result<Vec<WakeupRow>, ReportError> {
    let columns = [
        w::TS,
        w::CPU,
        w::WAKER_PID,
        w::WAKER_TID,
        w::WAKER_COMM_ID,
        w::WAKEE_TID,
        w::TARGET_CPU,
    ];
    super::collect(w::scan(report, &columns)?, |b, out| {
        let v = w::View(b);
        let (ts, cpu, target) = (v.ts()?, v.cpu()?, v.target_cpu()?);
        let (pid, tid, comm) = (v.waker_pid()?, v.waker_tid()?, v.waker_comm_id()?);
        let wakee = v.wakee_tid()?;
        out.extend((0..b.num_rows()).map(|i| WakeupRow {
            ts: ts[i],
            cpu: cpu[i],
            waker_pid: pid[i],
            waker_tid: tid[i],
            waker_comm: comm[i],
            wakee_tid: wakee[i],
            target_cpu: target[i],
        }));
        Ok(())
    })
}
