//! `cuda_gpu_sync`: the CUDA synchronizations as CUPTI recorded them
//! (`cuda_sync`, read by [`crate::report::read::cuda`]).
use super::format::{Table, Value};
use crate::report::{
    ReportError,
    container::Container,
    read::cuda::{NONE, syncs},
    rows::SyncRow,
};

/// `cuda_gpu_sync`: every synchronization, in start order.
pub fn cuda_gpu_sync(report: &Container) -> Result<Table, ReportError> {
    Ok(trace_table(&syncs(report)?))
}

fn id(v: u32) -> Value {
    if v == NONE {
        Value::Null
    } else {
        Value::Int(v.into())
    }
}

pub(crate) fn trace_table(syncs: &[SyncRow]) -> Table {
    let rows = syncs
        .iter()
        .map(|s| {
            vec![
                Value::Int(s.start),
                Value::Int(s.duration() as i64),
                Value::Int(s.correlation.into()),
                Value::Str(s.call_name().into()),
                Value::Int(s.context.into()),
                id(s.stream),
                id(s.event),
                Value::Int(s.pid.into()),
            ]
        })
        .collect();
    Table {
        stream: None,
        title: "CUDA GPU Synchronization Trace (cuda_gpu_sync)".into(),
        headers: vec![
            "Start (ns)",
            "Duration (ns)",
            "CorrId",
            "Type",
            "Ctx",
            "Strm",
            "Event",
            "Pid",
        ],
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::read::cuda::STREAM_WAIT_EVENT;

    #[test]
    fn types_name_their_calls_and_none_reads_as_null() {
        let s = |sync_type, stream| SyncRow {
            start: 10,
            end: 25,
            sync_type,
            stream,
            event: NONE,
            correlation: 4,
            ..Default::default()
        };
        let t = trace_table(&[s(3, 7), s(4, NONE), s(1, NONE), s(2, 7)]);
        let names: Vec<&Value> = t.rows.iter().map(|r| &r[3]).collect();
        assert_eq!(
            names,
            [
                "cudaStreamSynchronize",
                "cudaDeviceSynchronize",
                "cudaEventSynchronize",
                "cudaStreamWaitEvent"
            ]
            .map(|n| Value::Str(n.into()))
            .iter()
            .collect::<Vec<_>>()
        );
        assert_eq!(t.rows[0][1], Value::Int(15));
        assert_eq!(t.rows[0][5], Value::Int(7));
        assert_eq!(t.rows[1][5], Value::Null);
        assert_eq!(t.rows[0][6], Value::Null);
        assert!(s(3, 7).blocks_host() && !s(STREAM_WAIT_EVENT, 7).blocks_host());
    }
}
