//! What CUPTI records besides kernels, copies and memsets: its
//! synchronizations (`cuda_sync`) and whole CUDA graph executions
//! (`cuda_graphs`), read as the rows the recorder wrote.
use crate::report::{
    ReportError,
    container::Container,
    rows::{GraphRow, SyncRow},
    schema::{cuda_graphs as cg, cuda_sync as cs},
};

/// CUPTI's "no stream" / "no event" in a [`SyncRow`].
pub const NONE: u32 = u32::MAX;

/// CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: the device, not
/// the host, waits (a stream on an event); no host thread blocks.
pub const STREAM_WAIT_EVENT: u32 = 2;

impl SyncRow {
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
pub fn syncs(report: &Container) -> Result<Vec<SyncRow>, ReportError> {
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
    let mut out = super::collect(cs::scan(report, &columns)?, |b, out| {
        let v = cs::View(b);
        let (start, end, pid) = (v.start()?, v.end()?, v.pid()?);
        let (ty, ctx, stream) = (v.sync_type()?, v.context_id()?, v.stream()?);
        let (event, corr) = (v.event_id()?, v.correlation_id()?);
        out.extend((0..b.num_rows()).map(|i| SyncRow {
            start: start[i],
            end: end[i],
            pid: pid[i],
            sync_type: ty[i],
            context: ctx[i],
            stream: stream[i],
            event: event[i],
            correlation: corr[i],
        }));
        Ok(())
    })?;
    out.sort_by_key(|s| (s.start, s.correlation));
    Ok(out)
}

/// Every whole graph execution (`--cuda-graph-trace graph`), in table
/// order; none when the report has no `cuda_graphs` table.
pub fn graphs(report: &Container) -> Result<Vec<GraphRow>, ReportError> {
    let columns = [
        cg::START,
        cg::END,
        cg::PID,
        cg::DEVICE,
        cg::CONTEXT_ID,
        cg::STREAM,
        cg::GRAPH_ID,
        cg::CORRELATION_ID,
    ];
    super::collect(cg::scan(report, &columns)?, |b, out| {
        let v = cg::View(b);
        let (start, end, pid) = (v.start()?, v.end()?, v.pid()?);
        let (device, ctx, stream) = (v.device()?, v.context_id()?, v.stream()?);
        let (graph, corr) = (v.graph_id()?, v.correlation_id()?);
        out.extend((0..b.num_rows()).map(|i| GraphRow {
            start: start[i],
            end: end[i],
            pid: pid[i],
            device: device[i],
            context: ctx[i],
            stream: stream[i],
            graph_id: graph[i],
            correlation: corr[i],
        }));
        Ok(())
    })
}
