//! CUDA synchronizations as CUPTI recorded them (`cuda_sync`): the
//! `cuda_gpu_sync` trace, and the waits `analyze`'s sync rule reports.
use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, schema::cuda_sync as cs};

/// One synchronization: a host thread waited from `start` to `end`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sync {
    pub start: i64,
    pub end: i64,
    pub pid: u32,
    /// CUpti_ActivitySynchronizationType.
    pub sync_type: u32,
    pub context: u32,
    /// u32::MAX: none (a context or event synchronize).
    pub stream: u32,
    /// u32::MAX: none.
    pub event: u32,
    pub correlation: u32,
}

/// CUPTI's "no stream" / "no event".
pub const NONE: u32 = u32::MAX;

/// CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: the device, not
/// the host, waits (a stream on an event); no host thread blocks.
pub const STREAM_WAIT_EVENT: u32 = 2;

impl Sync {
    /// The runtime call that makes this kind of wait, as nsys names the
    /// sync type.
    pub fn call_name(&self) -> &'static str {
        match self.sync_type {
            1 => "cudaEventSynchronize",
            STREAM_WAIT_EVENT => "cudaStreamWaitEvent",
            3 => "cudaStreamSynchronize",
            4 => "cudaDeviceSynchronize",
            _ => "Unknown",
        }
    }

    /// Whether a host thread blocked (every type but stream wait event).
    pub fn blocks_host(&self) -> bool {
        self.sync_type != STREAM_WAIT_EVENT
    }

    pub fn duration(&self) -> u64 {
        super::duration(self.start, self.end)
    }
}

/// Every synchronization of the report, in start order; none when the
/// report has no `cuda_sync` table (no CUDA, or written before it).
pub fn read(report: &Container) -> Result<Vec<Sync>, ReportError> {
    let columns = [
        cs::START,
        cs::END,
        cs::PID,
        cs::SYNC_TYPE,
        cs::CONTEXT_ID,
        cs::STREAM,
        cs::EVENT_ID,
        cs::CORRELATION_ID,
    ];
    let mut out = Vec::new();
    for b in cs::scan(report, &columns)? {
        let b = b?;
        let v = cs::View(&b);
        let (start, end, pid) = (v.start()?, v.end()?, v.pid()?);
        let (ty, ctx, stream) = (v.sync_type()?, v.context_id()?, v.stream()?);
        let (event, corr) = (v.event_id()?, v.correlation_id()?);
        for i in 0..b.num_rows() {
            out.push(Sync {
                start: start[i],
                end: end[i],
                pid: pid[i],
                sync_type: ty[i],
                context: ctx[i],
                stream: stream[i],
                event: event[i],
                correlation: corr[i],
            });
        }
    }
    out.sort_by_key(|s| (s.start, s.correlation));
    Ok(out)
}

/// `cuda_gpu_sync`: every synchronization, in start order.
pub fn cuda_gpu_sync(report: &Container) -> Result<Table, ReportError> {
    Ok(trace_table(&read(report)?))
}

fn id(v: u32) -> Value {
    if v == NONE {
        Value::Null
    } else {
        Value::Int(v.into())
    }
}

pub(crate) fn trace_table(syncs: &[Sync]) -> Table {
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

    #[test]
    fn types_name_their_calls_and_none_reads_as_null() {
        let s = |sync_type, stream| Sync {
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
