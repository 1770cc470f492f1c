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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{builder::ReportBuilder, schema};

    /// Switches and wake-ups read back as written, in table order, a
    /// batch at a time or all at once.
    #[test]
    fn switches_and_wakeups_read_back_as_written() {
        let mut b = ReportBuilder::new().expect("builder");
        let comm = b.string("worker");
        let switches: Vec<SchedRow> = (0..5)
            .map(|i| SchedRow {
                ts: 100 - i * 10,
                cpu: i as u32 % 2,
                prev_pid: 50,
                prev_tid: 50 + i as u32,
                prev_state: i,
                prev_comm: comm,
                next_tid: 60 + i as u32,
                next_comm: comm,
            })
            .collect();
        let wakeups = vec![WakeupRow {
            ts: 42,
            cpu: 1,
            waker_pid: 70,
            waker_tid: 71,
            waker_comm: comm,
            wakee_tid: 51,
            target_cpu: 0,
        }];
        b.table::<schema::sched::Table>(schema::SCHED, &switches)
            .expect("sched");
        b.table::<schema::sched_wakeups::Table>(schema::SCHED_WAKEUPS, &wakeups)
            .expect("wakeups");
        let report = b.finish_temporary().expect("report");
        let read = self::switches(&report).expect("switches");
        assert_eq!(format!("{read:?}"), format!("{switches:?}"));
        let mut batches = 0;
        for_each_switch_batch(&report, |batch| {
            batches += 1;
            assert_eq!(batch.len(), switches.len());
            Ok::<_, ReportError>(())
        })
        .expect("batches");
        assert_eq!(batches, 1);
        let read = self::wakeups(&report).expect("wakeups");
        assert_eq!(format!("{read:?}"), format!("{wakeups:?}"));
    }
}
