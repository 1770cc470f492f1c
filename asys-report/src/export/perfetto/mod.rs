//! `--type perfetto`: the report as a native Perfetto trace (`BASE.pftrace`,
//! a protobuf `Trace` of `TracePacket`s) that the Perfetto UI and
//! trace_processor open. See docs/export.md for what goes on which track.
//!
//! Packets are written as the tables are read, a batch at a time; what is
//! kept is the tracks and interned names seen so far, and, for the CPU
//! samples, the interned callstack of each sample (an id, not its frames).
//! One packet sequence carries everything: Perfetto sorts a file's events by
//! time, and keeps the file's order between events of the same time on one
//! sequence, which is what orders a slice's begin before its end when both
//! are at the same nanosecond.
mod metrics;
pub(crate) mod proto;

use std::{
    collections::{BTreeMap, HashMap},
    io::Write,
    path::Path,
};

use arrow::array::Array;
use prost::Message;

use self::proto::{Data, DebugAnnotation, InternedData, TracePacket, TrackDescriptor, TrackEvent};
use super::ExportError;
use crate::{
    report::schema::ActivityKind,
    report::{
        container::Container,
        read::{
            activity, api::CallColumns, device_memory as memory, processes::Commands,
            python_frames, python_thread_names::ThreadNames, ranges as hgtx,
            sched::for_each_switch_batch, symbols::kernel_name_ids,
        },
        reader,
        schema::{self, api},
        strings::StringTable,
    },
};

/// The maps looked up once or more per event: foldhash, as in
/// collect/process_tree.rs (std's SipHash costs more than the rest).
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The one packet sequence the export writes.
const SEQUENCE: u32 = 1;
/// sched_switch's priority when the report has none (the kernel's default
/// for a normal task).
const DEFAULT_PRIO: i32 = 120;

/// What a slice is, as a Perfetto category: the report table it came from.
fn category_of(table: &str) -> &str {
    table
}

/// What each track is, so each is described once.
#[derive(Clone, PartialEq, Eq, Hash)]
enum TrackKey {
    Process(u32),
    Thread(u32, u32),
    /// A thread's calls of hgtx or nvtx themselves (their ranges are on the
    /// thread's own track, and share its begin and end times).
    RangeCalls(u32, u32, &'static str),
    /// (pid, device, stream).
    Stream(u32, u32, u32),
    /// Start/end ranges of a process: they may overlap, so each lane holds
    /// ranges that do not. (pid, family label, lane).
    RangeLane(u32, &'static str, usize),
    /// Memory in use: (pid, kind, device; -1 pinned host memory).
    Memory(u32, &'static str, i32),
    /// A sampled metric (docs/metrics.md): its track's name, and the
    /// process it is under (None: a track of its own, for a NIC).
    Metric(Option<u32>, String),
}

struct Trace<'a, W: Write> {
    report: &'a Container,
    out: W,
    path: &'a Path,
    buf: Vec<u8>,
    strings: StringTable,
    commands: Commands,
    /// Python threads' names (`python_thread_names`): a thread's track is
    /// named with the last one, then its command.
    python_names: ThreadNames,
    tracks: Map<TrackKey, u64>,
    next_uuid: u64,
    event_names: Map<String, u64>,
    /// Event names of report string ids (API names), so a call's name is
    /// looked up by its id, not its text.
    id_names: Map<u32, u64>,
    annotation_names: Map<&'static str, u64>,
    categories: Map<String, u64>,
    /// Interned data for the next packet, which is the first to use it.
    pending: InternedData,
    first: bool,
}

impl<W: Write> Trace<'_, W> {
    fn io(&self, e: std::io::Error) -> ExportError {
        ExportError::io(self.path, e)
    }

    /// Writes one packet: field 1 of `Trace`, length-delimited.
    fn packet(&mut self, timestamp: Option<i64>, data: Data) -> Result<(), ExportError> {
        let interned = std::mem::take(&mut self.pending);
        let flags = if self.first {
            proto::SEQ_INCREMENTAL_STATE_CLEARED
        } else {
            proto::SEQ_NEEDS_INCREMENTAL_STATE
        };
        let packet = TracePacket {
            // Report times are CLOCK_MONOTONIC; a negative one cannot be.
            timestamp: timestamp.map(|t| t.max(0) as u64),
            timestamp_clock_id: timestamp.map(|_| proto::CLOCK_MONOTONIC),
            trusted_packet_sequence_id: Some(SEQUENCE),
            interned_data: (interned != InternedData::default()).then_some(interned),
            sequence_flags: Some(flags),
            first_packet_on_sequence: self.first.then_some(true),
            data: Some(data),
        };
        self.first = false;
        self.buf.clear();
        self.buf.push(0x0a);
        packet
            .encode_length_delimited(&mut self.buf)
            .map_err(|e| self.io(std::io::Error::other(e)))?;
        let buf = std::mem::take(&mut self.buf);
        let written = self.out.write_all(&buf);
        self.buf = buf;
        written.map_err(|e| self.io(e))
    }

    fn describe(&mut self, key: TrackKey, d: TrackDescriptor) -> Result<u64, ExportError> {
        if let Some(&uuid) = self.tracks.get(&key) {
            return Ok(uuid);
        }
        self.next_uuid += 1;
        let uuid = self.next_uuid;
        self.tracks.insert(key, uuid);
        self.packet(
            None,
            Data::TrackDescriptor(TrackDescriptor {
                uuid: Some(uuid),
                ..d
            }),
        )?;
        Ok(uuid)
    }

    fn command(&self, id: Option<u32>, pid: u32) -> String {
        id.and_then(|id| self.strings.get(id))
            .map(str::to_owned)
            .unwrap_or_else(|| format!("[{pid}]"))
    }

    fn process(&mut self, pid: u32) -> Result<u64, ExportError> {
        if let Some(&uuid) = self.tracks.get(&TrackKey::Process(pid)) {
            return Ok(uuid);
        }
        let name = self.command(self.commands.process(pid), pid);
        self.describe(
            TrackKey::Process(pid),
            TrackDescriptor {
                process: Some(proto::ProcessDescriptor {
                    pid: Some(pid as i32),
                    process_name: Some(name),
                }),
                ..Default::default()
            },
        )
    }

    fn thread(&mut self, pid: u32, tid: u32) -> Result<u64, ExportError> {
        self.thread_named(pid, tid, None)
    }

    /// A thread's track; `seen` is a command the caller saw it run (a
    /// context switch's), for a thread the process events do not name.
    fn thread_named(&mut self, pid: u32, tid: u32, seen: Option<u32>) -> Result<u64, ExportError> {
        if let Some(&uuid) = self.tracks.get(&TrackKey::Thread(pid, tid)) {
            return Ok(uuid);
        }
        let parent = self.process(pid)?;
        let mut name = self.command(self.commands.thread(pid, tid).or(seen), pid);
        // `worker-3 (python3.11)`, as a thread of a process is named
        // `name (command)` where the command alone does not tell threads
        // apart.
        if let Some(python) = self
            .python_names
            .last(pid, tid)
            .and_then(|id| self.strings.get(id))
        {
            name = format!("{python} ({name})");
        }
        self.describe(
            TrackKey::Thread(pid, tid),
            TrackDescriptor {
                parent_uuid: Some(parent),
                thread: Some(proto::ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(i64::from(tid)),
                    thread_name: Some(name),
                }),
                ..Default::default()
            },
        )
    }

    /// A named track under `parent` (a process or thread track).
    /// (`name` is made only for a track not yet described.)
    fn child(
        &mut self,
        key: TrackKey,
        parent: u64,
        name: impl FnOnce() -> String,
    ) -> Result<u64, ExportError> {
        if let Some(&uuid) = self.tracks.get(&key) {
            return Ok(uuid);
        }
        self.describe(
            key,
            TrackDescriptor {
                parent_uuid: Some(parent),
                name: Some(name()),
                ..Default::default()
            },
        )
    }

    fn name_iid(&mut self, name: &str) -> u64 {
        if let Some(&iid) = self.event_names.get(name) {
            return iid;
        }
        let iid = self.event_names.len() as u64 + 1;
        self.event_names.insert(name.to_owned(), iid);
        self.pending.event_names.push(proto::EventName {
            iid: Some(iid),
            name: Some(name.to_owned()),
        });
        iid
    }

    /// The event name of a report string id.
    fn name_iid_of(&mut self, id: u32) -> u64 {
        if let Some(&iid) = self.id_names.get(&id) {
            return iid;
        }
        let name = self.strings.get(id).unwrap_or("[unknown]").to_owned();
        let iid = self.name_iid(&name);
        self.id_names.insert(id, iid);
        iid
    }

    fn annotation_iid(&mut self, name: &'static str) -> u64 {
        if let Some(&iid) = self.annotation_names.get(name) {
            return iid;
        }
        let iid = self.annotation_names.len() as u64 + 1;
        self.annotation_names.insert(name, iid);
        self.pending
            .debug_annotation_names
            .push(proto::DebugAnnotationName {
                iid: Some(iid),
                name: Some(name.to_owned()),
            });
        iid
    }

    fn category_iid(&mut self, category: &str) -> u64 {
        if let Some(&iid) = self.categories.get(category) {
            return iid;
        }
        let iid = self.categories.len() as u64 + 1;
        self.categories.insert(category.to_owned(), iid);
        self.pending.event_categories.push(proto::EventCategory {
            iid: Some(iid),
            name: Some(category.to_owned()),
        });
        iid
    }

    /// A slice as its begin and end events, one right after the other.
    fn slice(&mut self, s: Slice) -> Result<(), ExportError> {
        let category = self.category_iid(s.category);
        let args = s
            .args
            .into_iter()
            .map(|(name, value)| {
                let name_iid = Some(self.annotation_iid(name));
                match value {
                    Arg::Int(v) => DebugAnnotation {
                        name_iid,
                        int_value: Some(v),
                        ..Default::default()
                    },
                    Arg::Uint(v) => DebugAnnotation {
                        name_iid,
                        uint_value: Some(v),
                        ..Default::default()
                    },
                    Arg::Str(v) => DebugAnnotation {
                        name_iid,
                        string_value: Some(v),
                        ..Default::default()
                    },
                }
            })
            .collect();
        self.packet(
            Some(s.start),
            Data::TrackEvent(TrackEvent {
                category_iids: vec![category],
                name_iid: Some(s.name),
                r#type: Some(proto::TYPE_SLICE_BEGIN),
                track_uuid: Some(s.track),
                flow_ids: s.flow.into_iter().collect(),
                terminating_flow_ids: s.terminating_flow.into_iter().collect(),
                debug_annotations: args,
                ..Default::default()
            }),
        )?;
        self.packet(
            Some(s.end.max(s.start)),
            Data::TrackEvent(TrackEvent {
                r#type: Some(proto::TYPE_SLICE_END),
                track_uuid: Some(s.track),
                ..Default::default()
            }),
        )
    }
}

struct Slice<'s> {
    track: u64,
    start: i64,
    end: i64,
    /// Its interned name.
    name: u64,
    category: &'s str,
    flow: Option<u64>,
    terminating_flow: Option<u64>,
    args: Vec<(&'static str, Arg)>,
}

/// A slice's argument (a debug annotation in Perfetto).
enum Arg {
    Int(i64),
    Uint(u64),
    Str(String),
}

/// The flow from a runtime call to its device activity: correlation ids
/// are the runtime's, one sequence per process.
fn flow_id(pid: u32, correlation: u32) -> u64 {
    (u64::from(pid) << 32) | u64::from(correlation)
}

/// Which parts of the trace `--tables` asked for, by the report tables
/// they are read from.
pub struct Parts<'t> {
    tables: &'t [&'t str],
}

impl Parts<'_> {
    fn want(&self, table: &str) -> bool {
        self.tables.contains(&table)
    }
}

/// Writes `report` as a Perfetto trace to `out` (`path` names it in
/// errors). `tables` are the report tables to read (`--tables`).
pub fn export(
    report: &Container,
    tables: &[&str],
    out: impl Write,
    path: &Path,
) -> Result<(), ExportError> {
    let mut t = Trace {
        report,
        out,
        path,
        buf: Vec::new(),
        strings: reader::string_table(report)?,
        commands: Commands::read(report)?,
        python_names: ThreadNames::read(report)?,
        tracks: Map::default(),
        next_uuid: 0,
        event_names: Map::default(),
        id_names: Map::default(),
        annotation_names: Map::default(),
        categories: Map::default(),
        pending: InternedData::default(),
        first: true,
    };
    let parts = Parts { tables };
    clock_snapshot(&mut t)?;
    for family in [hgtx::HGTX, hgtx::NVTX] {
        if parts.want(family.table) {
            ranges(&mut t, family)?;
        }
    }
    let api_tables: Vec<String> = report
        .tables()
        .filter(|n| n.ends_with("_api") && parts.want(n))
        .map(str::to_owned)
        .collect();
    for table in &api_tables {
        calls(&mut t, table)?;
    }
    if parts.want(schema::HGGC_ACTIVITY) {
        activity(&mut t)?;
    }
    if parts.want(schema::HGGC_API) {
        memory_counters(&mut t)?;
    }
    if parts.want(schema::CPU_SAMPLES) {
        samples(
            &mut t,
            parts.want(schema::CPU_SAMPLE_STACKS),
            parts.want(schema::PYTHON_FRAMES),
        )?;
    }
    if parts.want(schema::HOST_MEMORY) {
        metrics::host_memory(&mut t)?;
    }
    if parts.want(schema::PPU_METRICS) {
        metrics::ppu_metrics(&mut t)?;
    }
    if parts.want(schema::NIC_METRICS) {
        metrics::nic_metrics(&mut t)?;
    }
    if parts.want(schema::RDMA_HW_COUNTERS) {
        metrics::rdma_hw_counters(&mut t)?;
    }
    // The wake-ups name each wakee by the command the switches saw it run
    // with: taken from the switches' own pass where they are exported.
    let comms = if parts.want(schema::SCHED) {
        Some(sched(&mut t)?)
    } else {
        None
    };
    if parts.want(schema::SCHED_WAKEUPS) {
        let comms = match comms {
            Some(c) => c,
            None => next_comms(t.report)?,
        };
        wakeups(&mut t, &comms)?;
    }
    if parts.want(schema::PROBES) {
        probes(&mut t)?;
    }
    t.out.flush().map_err(|e| t.io(e))
}

/// Report times are CLOCK_MONOTONIC, and the trace says so: Perfetto keeps
/// its timeline on that clock, and the real-time clock of the session start
/// gives it wall times. Boot time is stated to be the same as monotonic
/// (asys does not read it; they differ by time spent suspended), because
/// Perfetto takes ftrace's sched_switch times to be boot times.
fn clock_snapshot<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    let m = &t.report.metadata;
    let mono = m.start_monotonic_ns.max(0) as u64;
    let clock = |id, ts| proto::Clock {
        clock_id: Some(id),
        timestamp: Some(ts),
    };
    let snapshot = proto::ClockSnapshot {
        clocks: vec![
            clock(proto::CLOCK_MONOTONIC, mono),
            clock(proto::CLOCK_BOOTTIME, mono),
            clock(proto::CLOCK_REALTIME, m.start_realtime_ns.max(0) as u64),
        ],
        primary_trace_clock: Some(proto::CLOCK_MONOTONIC),
    };
    t.packet(Some(m.start_monotonic_ns), Data::ClockSnapshot(snapshot))
}

/// hgtx/nvtx ranges, as `asys stats` rebuilds them: push/pop ranges nest on
/// their thread's track; start/end ranges may overlap and cross threads, so
/// they go on lanes of their process, each lane a track of ranges that do
/// not overlap.
fn ranges<W: Write>(t: &mut Trace<W>, family: hgtx::Family) -> Result<(), ExportError> {
    let category = family.table;
    // Lane ends per (pid): ranges come sorted by start.
    let mut lanes: HashMap<u32, Vec<i64>> = HashMap::new();
    for r in hgtx::ranges(t.report, family)? {
        let name = if r.domain.is_empty() {
            r.name.clone()
        } else {
            format!("{}@{}", r.name, r.domain)
        };
        let track = if r.push_pop {
            t.thread(r.pid, r.tid)?
        } else {
            let ends = lanes.entry(r.pid).or_default();
            let lane = match ends.iter().position(|&end| end <= r.start) {
                Some(l) => {
                    ends[l] = r.end;
                    l
                }
                None => {
                    ends.push(r.end);
                    ends.len() - 1
                }
            };
            let parent = t.process(r.pid)?;
            t.child(
                TrackKey::RangeLane(r.pid, family.label, lane),
                parent,
                || format!("{} start/end ranges", family.label),
            )?
        };
        let mut args = Vec::new();
        if let Some(level) = r.level {
            args.push(("level", Arg::Int(level)));
        }
        args.push(("tid", Arg::Uint(u64::from(r.tid))));
        let name = t.name_iid(&name);
        t.slice(Slice {
            track,
            start: r.start,
            end: r.end,
            name,
            category,
            flow: None,
            terminating_flow: None,
            args,
        })?;
    }
    Ok(())
}

/// One API table's calls, on their threads' tracks (hgtx and nvtx calls
/// on a track of their own under the thread), each call that has a
/// correlation id starting the flow to its device activity.
fn calls<W: Write>(t: &mut Trace<W>, table: &str) -> Result<(), ExportError> {
    let ranges_table = [hgtx::HGTX, hgtx::NVTX]
        .into_iter()
        .find(|f| f.table == table);
    let cols = [CallColumns::NAMES, &[api::CORRELATION_ID, api::BYTES]].concat();
    let category = category_of(table).to_owned();
    for b in api::scan(t.report, table, &cols)? {
        let b = b?;
        let CallColumns {
            start,
            end,
            pid,
            tid,
            name,
            ret,
        } = CallColumns::of(&b)?;
        let v = api::View(&b);
        let (corr, bytes) = (v.correlation_id()?, v.bytes()?);
        for i in 0..b.num_rows() {
            let thread = t.thread(pid[i], tid[i])?;
            let track = match ranges_table {
                Some(f) => t.child(
                    TrackKey::RangeCalls(pid[i], tid[i], f.label),
                    thread,
                    || format!("{} calls", f.label),
                )?,
                None => thread,
            };
            let c = (!corr.is_null(i)).then(|| corr.value(i));
            let mut args = vec![("returnValue", Arg::Int(ret[i]))];
            if let Some(c) = c {
                args.push(("correlationId", Arg::Uint(u64::from(c))));
            }
            if !bytes.is_null(i) {
                args.push(("bytes", Arg::Uint(bytes.value(i))));
            }
            let call_name = t.name_iid_of(name[i]);
            t.slice(Slice {
                track,
                start: start[i],
                end: end[i],
                name: call_name,
                category: &category,
                flow: c.map(|c| flow_id(pid[i], c)),
                terminating_flow: None,
                args,
            })?;
        }
    }
    Ok(())
}

/// Hits of user-defined probes (`--probe`) as slices on their thread,
/// named by the spec, category `probes`, with the arguments (as text) and
/// the return value as args; a hit of a kind without a duration is a
/// slice of zero length.
fn probes<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    use schema::probes as p;
    let cols = [
        p::START,
        p::END,
        p::PID,
        p::TID,
        p::NAME_ID,
        p::HAS_RETURN,
        p::RETURN_VALUE,
        p::ARGS,
    ];
    for b in p::scan(t.report, &cols)? {
        let b = b?;
        let v = p::View(&b);
        let (start, end, pid, tid) = (v.start()?, v.end()?, v.pid()?, v.tid()?);
        let (name, has_ret, ret, args) =
            (v.name_id()?, v.has_return()?, v.return_value()?, v.args()?);
        for i in 0..b.num_rows() {
            let track = t.thread(pid[i], tid[i])?;
            let mut a = vec![("args", Arg::Str(args.value(i).to_string()))];
            if has_ret.value(i) {
                a.push(("returnValue", Arg::Int(ret[i])));
            }
            let name = t.name_iid_of(name[i]);
            t.slice(Slice {
                track,
                start: start[i],
                end: end[i],
                name,
                category: "probes",
                flow: None,
                terminating_flow: None,
                args: a,
            })?;
        }
    }
    Ok(())
}

/// The name of a copy as nsys draws it (Kineto's names start the same).
pub(crate) fn copy_name(kind: Option<i32>) -> &'static str {
    match kind {
        Some(0) => "Memcpy HtoH",
        Some(1) => "Memcpy HtoD",
        Some(2) => "Memcpy DtoH",
        Some(3) => "Memcpy DtoD",
        _ => "Memcpy",
    }
}

/// Kernels, copies and memsets on a track per device stream, under their
/// process; each ends the flow its runtime call started.
fn activity<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    let names = kernel_name_ids(t.report)?;
    for b in activity::scan_trace(t.report)? {
        let b = b?;
        for (a, stored_kind) in activity::rows_with_stored_kind(&b)? {
            let parent = t.process(a.pid)?;
            let track = t.child(TrackKey::Stream(a.pid, a.device, a.stream), parent, || {
                format!("PPU {} stream {}", a.device, a.stream)
            })?;
            let name = match a.kind {
                Some(ActivityKind::Kernel) => {
                    match a.kernel_addr.and_then(|addr| names.get(&(a.pid, addr))) {
                        Some(&id) => t.name_iid_of(id),
                        // Not symbolized: the address, as stats names it.
                        None => t.name_iid(
                            &a.kernel_addr
                                .map(|addr| format!("{addr:#x}"))
                                .unwrap_or_default(),
                        ),
                    }
                }
                Some(ActivityKind::Memcpy) => t.name_iid(copy_name(a.copy_kind)),
                Some(ActivityKind::Memset) => t.name_iid("Memset"),
                None => t.name_iid(stored_kind),
            };
            let mut args = vec![("correlationId", Arg::Uint(u64::from(a.correlation)))];
            if let Some(bytes) = a.bytes {
                args.push(("bytes", Arg::Uint(bytes)));
            }
            // CUPTI's kernel record, where recorded (nsys's names).
            let d = &a.details;
            for (key, v) in [
                ("contextId", d.context),
                ("registersPerThread", d.registers_per_thread),
                ("staticSharedMemory", d.static_shared),
                ("dynamicSharedMemory", d.dynamic_shared),
                ("graphId", d.graph_id.filter(|&g| g != 0)),
            ] {
                if let Some(v) = v {
                    args.push((key, Arg::Uint(u64::from(v))));
                }
            }
            if let Some(n) = d.graph_node_id.filter(|&n| n != 0) {
                args.push(("graphNodeId", Arg::Uint(n)));
            }
            t.slice(Slice {
                track,
                start: a.start,
                end: a.end,
                name,
                category: stored_kind,
                flow: None,
                terminating_flow: Some(flow_id(a.pid, a.correlation)),
                args,
            })?;
        }
    }
    Ok(())
}

/// Device (and pinned host) memory in use, per process and device, as
/// `device_memory_usage_detail` computes it from the allocation calls.
fn memory_counters<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    for c in memory::changes(t.report)? {
        let parent = t.process(c.pid)?;
        let key = TrackKey::Memory(c.pid, c.kind, c.device);
        let track = match t.tracks.get(&key) {
            Some(&uuid) => uuid,
            None => {
                let name = if c.device < 0 {
                    "Pinned host memory in use".to_owned()
                } else {
                    format!("PPU {} memory in use", c.device)
                };
                t.describe(
                    key,
                    TrackDescriptor {
                        parent_uuid: Some(parent),
                        name: Some(name),
                        counter: Some(proto::CounterDescriptor {
                            unit: Some(proto::UNIT_SIZE_BYTES),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                )?
            }
        };
        t.packet(
            Some(c.time),
            Data::TrackEvent(TrackEvent {
                r#type: Some(proto::TYPE_COUNTER),
                track_uuid: Some(track),
                counter_value: Some(c.total),
                ..Default::default()
            }),
        )?;
    }
    Ok(())
}

/// A frame of a sample's stack: a native one by (function, module) string
/// ids, or a Python one (`--python-sampling`) by its qualified name, file
/// and line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum StackFrame {
    Native(u32, u32),
    Python(Option<u32>, Option<u32>, Option<u32>),
}

/// What names a frame: a native function's string id, or a Python
/// frame's (function, file, line).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum FunctionKey {
    Native(u32),
    Python(Option<u32>, Option<u32>, Option<u32>),
}

/// A frame's mapping: a native module's string id, or a Python file.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum MappingKey {
    Native(u32),
    Python(Option<u32>),
}

/// The mapping of Python frames whose code object was unreadable.
const PYTHON_MAPPING: &str = "[python]";

/// Interned callstacks of the samples: frames by (function, module), or
/// by Python function, file and line, one callstack per distinct list of
/// frames.
#[derive(Default)]
struct Stacks {
    functions: HashMap<FunctionKey, u64>,
    mappings: HashMap<MappingKey, u64>,
    frames: HashMap<StackFrame, u64>,
    callstacks: HashMap<Vec<u64>, u64>,
}

impl Stacks {
    /// Interns one sample's frames (innermost first), adding what is new
    /// to `pending`. A Python frame is named `function (file:line)`, as the
    /// collapsed export and py-spy name it, in a mapping named by its file.
    fn intern(
        &mut self,
        strings: &StringTable,
        frames: &[StackFrame],
        pending: &mut InternedData,
    ) -> u64 {
        let text = |id: u32| {
            crate::text_safety::escaped_name(strings.get(id).unwrap_or("[unknown]")).into_owned()
        };
        let mut ids = Vec::with_capacity(frames.len());
        // Perfetto lists a callstack's frames outermost first.
        for &frame in frames.iter().rev() {
            let (fkey, mkey) = match frame {
                StackFrame::Native(f, m) => (FunctionKey::Native(f), MappingKey::Native(m)),
                StackFrame::Python(f, file, line) => {
                    (FunctionKey::Python(f, file, line), MappingKey::Python(file))
                }
            };
            let next = self.functions.len() as u64 + 1;
            let fname = *self.functions.entry(fkey).or_insert_with(|| {
                let name = match fkey {
                    FunctionKey::Native(f) => text(f),
                    FunctionKey::Python(function, file, line) => {
                        let py = python_frames::PyFrame {
                            function,
                            file,
                            line,
                            is_entry: false,
                        };
                        python_frames::frame_name(&py, strings)
                    }
                };
                pending.function_names.push(proto::InternedString {
                    iid: Some(next),
                    str: Some(name.into()),
                });
                next
            });
            let next = self.mappings.len() as u64 + 1;
            let mapping = *self.mappings.entry(mkey).or_insert_with(|| {
                let path = match mkey {
                    MappingKey::Native(m) => text(m),
                    MappingKey::Python(Some(file)) => text(file),
                    MappingKey::Python(None) => PYTHON_MAPPING.into(),
                };
                // The mapping's path: one interned string per mapping.
                pending.mapping_paths.push(proto::InternedString {
                    iid: Some(next),
                    str: Some(path.into()),
                });
                pending.mappings.push(proto::Mapping {
                    iid: Some(next),
                    path_string_ids: vec![next],
                });
                next
            });
            let next = self.frames.len() as u64 + 1;
            let frame = *self.frames.entry(frame).or_insert_with(|| {
                pending.frames.push(proto::Frame {
                    iid: Some(next),
                    function_name_id: Some(fname),
                    mapping_id: Some(mapping),
                    rel_pc: Some(0),
                });
                next
            });
            ids.push(frame);
        }
        let next = self.callstacks.len() as u64 + 1;
        *self.callstacks.entry(ids.clone()).or_insert_with(|| {
            pending.callstacks.push(proto::Callstack {
                iid: Some(next),
                frame_ids: ids,
            });
            next
        })
    }
}

/// The Python frames of the samples (`--python-sampling`), put into their
/// native stacks as `cpu_sample_sum` and the collapsed export put them:
/// each `_PyEval_EvalFrameDefault` frame replaced by the Python frames it
/// ran ([`python_frames::merge`]).
struct PythonStacks {
    /// Each sample's Python frames, by (tid, ts), taken when used.
    frames: HashMap<(u32, i64), Vec<python_frames::PyFrame>>,
    /// The string ids of the evaluator's function.
    eval: Vec<u32>,
}

impl PythonStacks {
    fn read(report: &Container, strings: &StringTable) -> Result<Self, ExportError> {
        let frames = python_frames::sample_python_frames(report)?;
        let eval = if frames.is_empty() {
            Vec::new()
        } else {
            (0..strings.values().len() as u32)
                .filter(|&id| strings.get(id) == Some(python_frames::EVAL_FRAME))
                .collect()
        };
        Ok(Self { frames, eval })
    }

    /// The frames of sample `key` (natives innermost first), with its
    /// Python frames where the evaluator ran them.
    fn merged(&mut self, key: SampleKey, natives: &[(u32, u32)]) -> Vec<StackFrame> {
        let native = |&(f, m): &(u32, u32)| StackFrame::Native(f, m);
        let Some(py) = self.frames.remove(&(key.1, key.2)) else {
            return natives.iter().map(native).collect();
        };
        python_frames::merge(natives.iter(), |(f, _)| self.eval.contains(f), &py)
            .into_iter()
            .map(|m| match m {
                python_frames::Merged::Native(n) => native(n),
                python_frames::Merged::Python(p) => StackFrame::Python(p.function, p.file, p.line),
            })
            .collect()
    }
}

/// A sample: (pid, tid, ts).
type SampleKey = (u32, u32, i64);
/// One row of `cpu_sample_stacks`: its sample, depth, function, module.
type FrameRow = (SampleKey, u32, u32, u32);

/// The rows of `cpu_sample_stacks` as one (sample, frames) a sample: the
/// symbolize stage writes each sample's frames together.
struct StackRuns<I: Iterator<Item = Result<FrameRow, ExportError>>> {
    rows: std::iter::Peekable<I>,
}

impl<I: Iterator<Item = Result<FrameRow, ExportError>>> Iterator for StackRuns<I> {
    /// The sample and its frames, innermost first: (function, module).
    type Item = Result<(SampleKey, Vec<(u32, u32)>), ExportError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (key, depth, f, m) = match self.rows.next()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let mut frames = vec![(depth, f, m)];
        while let Some(Ok((k, depth, f, m))) = self.rows.peek() {
            if *k != key {
                break;
            }
            frames.push((*depth, *f, *m));
            self.rows.next();
        }
        frames.sort_unstable_by_key(|&(depth, _, _)| depth);
        Some(Ok((
            key,
            frames.into_iter().map(|(_, f, m)| (f, m)).collect(),
        )))
    }
}

/// Finds each sample's stack while both tables are read once, side by
/// side. Stacks come in the samples' order, so the one wanted is the next;
/// one read ahead of its sample (another order, or a sample with no
/// stack) waits in `ahead` until its sample comes. Memory stays that of
/// the stacks out of order, none when the orders agree.
struct StackJoin<I: Iterator<Item = Result<FrameRow, ExportError>>> {
    runs: StackRuns<I>,
    ahead: HashMap<SampleKey, u64>,
}

impl<I: Iterator<Item = Result<FrameRow, ExportError>>> StackJoin<I> {
    fn new(rows: I) -> Self {
        Self {
            runs: StackRuns {
                rows: rows.peekable(),
            },
            ahead: HashMap::new(),
        }
    }

    /// The callstack of `sample` (interned by `intern`, given the sample
    /// whose frames it interns), if it has one.
    fn stack_of(
        &mut self,
        sample: SampleKey,
        mut intern: impl FnMut(SampleKey, &[(u32, u32)]) -> u64,
    ) -> Result<Option<u64>, ExportError> {
        if let Some(iid) = self.ahead.remove(&sample) {
            return Ok(Some(iid));
        }
        for run in self.runs.by_ref() {
            let (key, frames) = run?;
            let iid = intern(key, &frames);
            if key == sample {
                return Ok(Some(iid));
            }
            self.ahead.insert(key, iid);
        }
        Ok(None)
    }
}

/// The rows of one batch of `cpu_sample_stacks`.
fn frame_rows(
    b: Result<reader::Batch, crate::report::ReportError>,
) -> Vec<Result<FrameRow, ExportError>> {
    use schema::cpu_sample_stacks as st;
    let rows = || -> Result<Vec<Result<FrameRow, ExportError>>, ExportError> {
        let b = b?;
        let v = st::View(&b);
        let (pid, tid, ts) = (v.pid()?, v.tid()?, v.ts()?);
        let (depth, f, m) = (v.depth()?, v.function_id()?, v.module_id()?);
        Ok((0..b.num_rows())
            .map(|i| Ok(((pid[i], tid[i], ts[i]), depth[i], f[i], m[i])))
            .collect())
    };
    rows().unwrap_or_else(|e| vec![Err(e)])
}

/// CPU samples as PerfSample packets with interned callstacks (the
/// Perfetto UI draws them per thread and as a flame graph of a selection),
/// with their Python frames (`with_python`) where the evaluator ran them.
fn samples<W: Write>(
    t: &mut Trace<W>,
    with_stacks: bool,
    with_python: bool,
) -> Result<(), ExportError> {
    use schema::{cpu_sample_stacks as st, cpu_samples as cs};
    let mut stacks = Stacks::default();
    let mut python = if with_python {
        PythonStacks::read(t.report, &t.strings)?
    } else {
        PythonStacks {
            frames: HashMap::new(),
            eval: Vec::new(),
        }
    };
    let cols = [
        st::PID,
        st::TID,
        st::TS,
        st::DEPTH,
        st::FUNCTION_ID,
        st::MODULE_ID,
    ];
    let rows: Box<dyn Iterator<Item = Result<FrameRow, ExportError>>> = if with_stacks {
        Box::new(st::scan(t.report, &cols)?.flat_map(frame_rows))
    } else {
        Box::new(std::iter::empty())
    };
    let mut join = StackJoin::new(rows);
    let cols = [cs::TS, cs::PID, cs::TID, cs::CPU, cs::KERNEL_MODE];
    for b in cs::scan(t.report, &cols)? {
        let b = b?;
        let v = cs::View(&b);
        let (ts, pid, tid) = (v.ts()?, v.pid()?, v.tid()?);
        let (cpu, kernel) = (v.cpu()?, v.kernel_mode()?);
        for i in 0..b.num_rows() {
            // The sampled thread's tracks name it in the UI.
            t.thread(pid[i], tid[i])?;
            let key = (pid[i], tid[i], ts[i]);
            let mut callstack = join.stack_of(key, |key, natives| {
                let frames = python.merged(key, natives);
                stacks.intern(&t.strings, &frames, &mut t.pending)
            })?;
            if callstack.is_none() && python.frames.contains_key(&(key.1, key.2)) {
                // No native stack (not unwound, or not exported): the
                // Python frames alone.
                let frames = python.merged(key, &[]);
                callstack = Some(stacks.intern(&t.strings, &frames, &mut t.pending));
            }
            let mode = if kernel.value(i) {
                proto::MODE_KERNEL
            } else {
                proto::MODE_USER
            };
            t.packet(
                Some(ts[i]),
                Data::PerfSample(proto::PerfSample {
                    cpu: Some(cpu[i]),
                    pid: Some(pid[i]),
                    tid: Some(tid[i]),
                    cpu_mode: Some(mode),
                    callstack_iid: callstack,
                }),
            )?;
        }
    }
    Ok(())
}

/// Each switched-in thread's command id, the last one it ran with.
type NextComms = HashMap<u32, u32>;

/// Context switches as ftrace sched_switch events, from which Perfetto
/// draws CPU tracks and each thread's running and sleeping states; returns
/// each thread's command as the switches last saw it run with.
fn sched<W: Write>(t: &mut Trace<W>) -> Result<NextComms, ExportError> {
    let mut comms = NextComms::new();
    for_each_switch_batch(t.report, |switches| {
        // One bundle per CPU and batch, its events in the table's order.
        let mut bundles: BTreeMap<u32, Vec<proto::FtraceEvent>> = BTreeMap::new();
        for s in switches {
            comms.insert(s.next_tid, s.next_comm);
            if s.prev_pid != 0 {
                // The switched-out thread's process, so its states are
                // under it in the UI.
                t.thread_named(s.prev_pid, s.prev_tid, Some(s.prev_comm))?;
            }
            let comm = |id: u32| t.strings.get(id).unwrap_or("").to_owned();
            bundles.entry(s.cpu).or_default().push(proto::FtraceEvent {
                timestamp: Some(s.ts.max(0) as u64),
                pid: Some(s.prev_tid),
                event: Some(proto::FtraceKind::SchedSwitch(proto::SchedSwitch {
                    prev_comm: Some(comm(s.prev_comm)),
                    prev_pid: Some(s.prev_tid as i32),
                    prev_prio: Some(DEFAULT_PRIO),
                    prev_state: Some(s.prev_state),
                    next_comm: Some(comm(s.next_comm)),
                    next_pid: Some(s.next_tid as i32),
                    next_prio: Some(DEFAULT_PRIO),
                })),
            });
        }
        for (cpu, event) in bundles {
            t.packet(
                None,
                Data::FtraceEvents(proto::FtraceEventBundle {
                    cpu: Some(cpu),
                    event,
                }),
            )?;
        }
        Ok::<_, ExportError>(())
    })?;
    Ok(comms)
}

/// [`NextComms`] where the switches are not exported: the same reader and
/// the same rule as [`sched`]'s pass, with nothing written.
fn next_comms(report: &Container) -> Result<NextComms, ExportError> {
    let mut comms = NextComms::new();
    for_each_switch_batch(report, |switches| {
        comms.extend(switches.iter().map(|s| (s.next_tid, s.next_comm)));
        Ok::<_, ExportError>(())
    })?;
    Ok(comms)
}

/// Wake-ups (`sched_wakeups`) as ftrace `sched_waking` events on the
/// waker's CPU: trace_processor ties each to the wakee's next running
/// state, and the UI shows who woke a thread ("Wakeup from"). The wakee's
/// command is the one the context switches saw it run with.
fn wakeups<W: Write>(t: &mut Trace<W>, comms: &NextComms) -> Result<(), ExportError> {
    use schema::sched_wakeups as w;
    let cols = [w::TS, w::CPU, w::WAKER_TID, w::WAKEE_TID, w::TARGET_CPU];
    for b in w::scan(t.report, &cols)? {
        let b = b?;
        let v = w::View(&b);
        let (ts, cpu, waker) = (v.ts()?, v.cpu()?, v.waker_tid()?);
        let (wakee, target) = (v.wakee_tid()?, v.target_cpu()?);
        let mut bundles: BTreeMap<u32, Vec<proto::FtraceEvent>> = BTreeMap::new();
        for i in 0..b.num_rows() {
            let comm = comms
                .get(&wakee[i])
                .and_then(|&id| t.strings.get(id))
                .unwrap_or("")
                .to_owned();
            bundles.entry(cpu[i]).or_default().push(proto::FtraceEvent {
                timestamp: Some(ts[i].max(0) as u64),
                pid: Some(waker[i]),
                event: Some(proto::FtraceKind::SchedWaking(proto::SchedWaking {
                    comm: Some(comm),
                    pid: Some(wakee[i] as i32),
                    prio: Some(DEFAULT_PRIO),
                    success: Some(1),
                    target_cpu: Some(target[i] as i32),
                })),
            });
        }
        for (cpu, event) in bundles {
            t.packet(
                None,
                Data::FtraceEvents(proto::FtraceEventBundle {
                    cpu: Some(cpu),
                    event,
                }),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_of_two_processes_do_not_meet() {
        assert_ne!(flow_id(1, 7), flow_id(2, 7));
        assert_eq!(flow_id(3, 7) >> 32, 3);
    }

    #[test]
    fn a_packet_is_field_one_of_trace() {
        let p = TracePacket {
            timestamp: Some(5),
            ..Default::default()
        };
        let mut buf = vec![0x0a];
        p.encode_length_delimited(&mut buf).unwrap();
        // 0x0a = field 1, length-delimited; then the length, then field 8.
        assert_eq!(buf, [0x0a, 2, 8 << 3, 5]);
    }

    #[test]
    fn stacks_join_their_samples_in_either_order() {
        let row = |ts: i64, depth: u32, f: u32| Ok(((1, 2, ts), depth, f, 0));
        // Sample 10 has two frames (listed outermost first), 20 one; 30 none.
        let rows = vec![row(10, 1, 7), row(10, 0, 8), row(20, 0, 9)];
        let mut got = Vec::new();
        let mut join = StackJoin::new(rows.into_iter());
        for ts in [20, 30, 10] {
            let s = join
                .stack_of((1, 2, ts), |_, frames| {
                    got.push(frames.to_vec());
                    got.len() as u64
                })
                .unwrap();
            got.push(vec![(s.unwrap_or(0) as u32, 0)]);
        }
        // 10's stack was read ahead (innermost first) and kept for it; 30
        // has none.
        assert_eq!(
            got,
            [
                vec![(8, 0), (7, 0)],
                vec![(9, 0)],
                vec![(2, 0)],
                vec![(0, 0)],
                vec![(1, 0)],
            ]
        );
        assert!(join.ahead.is_empty());
    }

    #[test]
    fn callstacks_are_interned_outermost_first() {
        let mut strings = StringTable::default();
        let (main, f, exe) = (
            strings.intern("main"),
            strings.intern("f"),
            strings.intern("/bin/a"),
        );
        let mut stacks = Stacks::default();
        let mut pending = InternedData::default();
        // Innermost first, as the report's depth orders them.
        let frames = [StackFrame::Native(f, exe), StackFrame::Native(main, exe)];
        let a = stacks.intern(&strings, &frames, &mut pending);
        let b = stacks.intern(&strings, &frames, &mut pending);
        assert_eq!(a, b);
        assert_eq!(pending.callstacks.len(), 1);
        assert_eq!(pending.mappings.len(), 1);
        let root = pending.callstacks[0].frame_ids[0];
        let frame = pending.frames.iter().find(|x| x.iid == Some(root)).unwrap();
        let name = pending
            .function_names
            .iter()
            .find(|n| n.iid == frame.function_name_id)
            .unwrap();
        assert_eq!(name.str.as_deref(), Some(&b"main"[..]));
    }

    #[test]
    fn python_frames_take_the_evaluators_place_in_a_callstack() {
        let mut strings = StringTable::default();
        let (main, eval, call, clock, exe, lib) = (
            strings.intern("main"),
            strings.intern(python_frames::EVAL_FRAME),
            strings.intern("PyObject_Call"),
            strings.intern("clock_gettime"),
            strings.intern("/usr/bin/python3"),
            strings.intern("/usr/lib/libpython3.so"),
        );
        let (module, spin, file) = (
            strings.intern("<module>"),
            strings.intern("\\x00x"),
            strings.intern("/tmp/odd.py"),
        );
        let py = |f, line, is_entry| python_frames::PyFrame {
            function: Some(f),
            file: Some(file),
            line: Some(line),
            is_entry,
        };
        let mut python = PythonStacks {
            frames: HashMap::from([((2, 10), vec![py(spin, 3, true), py(module, 9, true)])]),
            eval: vec![eval],
        };
        // Innermost first: clock_gettime, eval (runs spin), PyObject_Call,
        // eval (runs <module>), main.
        let natives = [
            (clock, lib),
            (eval, lib),
            (call, lib),
            (eval, lib),
            (main, exe),
        ];
        let frames = python.merged((1, 2, 10), &natives);
        assert_eq!(
            frames,
            [
                StackFrame::Native(clock, lib),
                StackFrame::Python(Some(spin), Some(file), Some(3)),
                StackFrame::Native(call, lib),
                StackFrame::Python(Some(module), Some(file), Some(9)),
                StackFrame::Native(main, exe),
            ]
        );
        assert!(python.frames.is_empty(), "taken when used");
        let mut stacks = Stacks::default();
        let mut pending = InternedData::default();
        stacks.intern(&strings, &frames, &mut pending);
        let names: Vec<String> = pending.callstacks[0]
            .frame_ids
            .iter()
            .map(|id| {
                let f = pending.frames.iter().find(|x| x.iid == Some(*id)).unwrap();
                let n = pending
                    .function_names
                    .iter()
                    .find(|n| n.iid == f.function_name_id)
                    .unwrap();
                String::from_utf8(n.str.clone().unwrap().to_vec()).unwrap()
            })
            .collect();
        assert_eq!(
            names,
            [
                "main",
                "<module> (/tmp/odd.py:9)",
                "PyObject_Call",
                "\\x00x (/tmp/odd.py:3)",
                "clock_gettime",
            ]
        );
        // Python frames are in a mapping named by their file.
        assert!(
            pending
                .mapping_paths
                .iter()
                .any(|p| p.str.as_deref() == Some(&b"/tmp/odd.py"[..]))
        );
    }
}
