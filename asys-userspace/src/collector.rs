//! Reads the ring buffer and turns raw events into report rows. Also reacts
//! to the loader hook: new libraries get probes before the stopped process is
//! allowed to continue.
use std::{collections::BTreeMap, time::Duration};

use asys_common::{
    ACTIVITY_KERNEL, ACTIVITY_MEMCPY, ActivityEvent, ApiCallEvent, ApiNameEvent, ApiStackEvent,
    ApiTextEvent, COOKIE_ID_MASK, COOKIE_SITE, CaptureEvent, CpuSampleEvent, CpuSampleStackEvent,
    EventHeader, EventKind, LibraryLoadEvent, ProcessEvent, SchedEvent,
};
use aya::maps::{MapData, RingBuf};
use tokio::io::unix::AsyncFd;

use crate::{
    apis, procfs,
    report::recorder::{
        ActivityRow, ApiRow, ModuleRow, ProcessRow, Recorder, SampleRow, SchedRow, StackRawRow,
    },
    tracer::Tracer,
};

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("event buffer: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    #[error(transparent)]
    Tracer(#[from] crate::tracer::TracerError),
}

/// Why collection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The launched application exited; its wait status.
    AppExited(i32),
    Duration,
    Interrupted,
    /// The capture range closed (`--capture-range-end stop|stop-shutdown`).
    CaptureEnded,
    /// A session's request arrived; it is in [`Collector::command`].
    Command,
}

/// Events read per turn of the collection loop.
const DRAIN_BATCH: usize = 65536;

/// When collection starts and ends, besides the application exiting.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub delay: Option<Duration>,
    pub duration: Option<Duration>,
    /// The end of a capture range ends collection.
    pub stop_at_capture_end: bool,
    /// `--wait all`: after the launched application exits, go on until every
    /// process of its tree (daemons included) has exited.
    pub wait_all: bool,
    /// `--max-report-size`: recording stops for good once the report would
    /// be this large (bytes); collection goes on until the application ends.
    pub max_bytes: Option<u64>,
}

pub struct Collector {
    events: AsyncFd<RingBuf<MapData>>,
    sigint: tokio::signal::unix::Signal,
    sigterm: tokio::signal::unix::Signal,
    /// Events recorded per source.
    pub counts: BTreeMap<String, u64>,
    /// Every pid seen or traced.
    pub pids: std::collections::BTreeSet<u32>,
    /// The device-to-host clock offset last used per process (device minus
    /// CLOCK_MONOTONIC, ns).
    pub clock_offsets: BTreeMap<u32, i64>,
    /// Names of site-recorded APIs per (pid, id), from the injection library.
    site_names: SiteNames,
    /// Processes of the traced tree that have not exited yet.
    pub live: std::collections::BTreeSet<u32>,
    /// Capture ranges opened so far, and whether the last one closed.
    pub capture_ranges: u32,
    capture_closed: bool,
    /// Recording stopped at `--max-report-size` (`max_bytes`).
    pub size_limited: bool,
    max_bytes: Option<u64>,
    /// Events read since the report's size was last looked at (across
    /// drains, which may each read only a few).
    unchecked: u32,
    /// A session daemon's requests, which interrupt collection.
    pub commands: Option<tokio::sync::mpsc::Receiver<crate::session::server::Job>>,
    /// The request that ended the last run.
    pub command: Option<crate::session::server::Job>,
}

/// API names the injection library announced, per process; a forked child
/// starts with its parent's.
#[derive(Default)]
pub struct SiteNames(std::collections::HashMap<u32, std::collections::HashMap<u32, String>>);

impl SiteNames {
    fn insert(&mut self, pid: u32, id: u32, name: String) {
        self.0.entry(pid).or_default().insert(id, name);
    }

    fn get(&self, pid: u32, id: u32) -> Option<&str> {
        self.0.get(&pid)?.get(&id).map(String::as_str)
    }

    fn inherit(&mut self, parent: u32, child: u32) {
        if let Some(names) = self.0.get(&parent).cloned() {
            self.0.insert(child, names);
        }
    }
}

impl Collector {
    /// Must be called inside the tokio runtime; from then on SIGINT and
    /// SIGTERM end collection instead of killing asys.
    pub fn new(events: RingBuf<MapData>) -> Result<Self, CollectError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            // SAFETY: the ring buffer owns its map fd for as long as the AsyncFd
            // owns the ring buffer, and never swaps it.
            events: unsafe { AsyncFd::register(events) }.map_err(std::io::Error::from)?,
            sigint: signal(SignalKind::interrupt())?,
            sigterm: signal(SignalKind::terminate())?,
            counts: BTreeMap::new(),
            pids: Default::default(),
            clock_offsets: BTreeMap::new(),
            site_names: SiteNames::default(),
            live: Default::default(),
            capture_ranges: 0,
            capture_closed: false,
            size_limited: false,
            max_bytes: None,
            unchecked: 0,
            commands: None,
            command: None,
        })
    }

    /// Collects until the app exits, the duration passes or the user
    /// interrupts, then drains what is left in the buffer.
    pub async fn run(
        &mut self,
        tracer: &mut Tracer,
        rec: &mut Recorder,
        app_exit: Option<&mut tokio::sync::oneshot::Receiver<i32>>,
        limits: Limits,
    ) -> Result<Stop, CollectError> {
        let Limits {
            delay,
            duration,
            stop_at_capture_end,
            wait_all,
            max_bytes,
        } = limits;
        self.max_bytes = max_bytes;
        // The launched application's status once it exited, while its
        // descendants still run (--wait all).
        let mut primary_exit: Option<i32> = None;
        // A range that closed ended the previous run (repeat mode).
        self.capture_closed = false;
        // Recording starts after the delay; the duration counts from then.
        let start_at = tokio::time::Instant::now() + delay.unwrap_or_default();
        // Without a delay the recording flag is already on (set before the
        // targets were reached); with one, it goes on when the delay is over.
        let mut recording = delay.is_none();
        let delay_over = tokio::time::sleep_until(start_at);
        tokio::pin!(delay_over);
        let deadline = async {
            match duration {
                Some(d) => tokio::time::sleep_until(start_at + d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let app_exit = async {
            match app_exit {
                Some(rx) => rx.await.unwrap_or(-1),
                None => std::future::pending().await,
            }
        };
        tokio::pin!(app_exit);
        let mut commands = self.commands.take();
        // Boxed, so that it can be dropped (giving the receiver back) below.
        let mut next_command = Box::pin(async {
            match commands.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        });
        // API events do not wake the reader until the buffer is a quarter full
        // (see asys-ebpf maps.rs); a short tick bounds how stale it gets.
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let stop = loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.drain_up_to(tracer, rec, DRAIN_BATCH, stop_at_capture_end)?;
                    if stop_at_capture_end && self.capture_closed {
                        break Stop::CaptureEnded;
                    }
                    if primary_exit.is_some() {
                        // An exit event can be lost (buffer full): ask /proc too.
                        self.live.retain(|&p| procfs::is_alive(p));
                    }
                    if let Some(status) = primary_exit.filter(|_| self.live.is_empty()) {
                        break Stop::AppExited(status);
                    }
                }
                _ = &mut delay_over, if !recording => {
                    tracer.set_recording(true)?;
                    recording = true;
                }
                guard = self.events.readable_mut() => {
                    // Clear readiness first, then drain: data that arrives
                    // meanwhile makes the fd ready again, so nothing waits.
                    guard?.clear_ready();
                    self.drain_up_to(tracer, rec, DRAIN_BATCH, stop_at_capture_end)?;
                    if stop_at_capture_end && self.capture_closed {
                        break Stop::CaptureEnded;
                    }
                    if let Some(status) = primary_exit.filter(|_| self.live.is_empty()) {
                        break Stop::AppExited(status);
                    }
                }
                status = &mut app_exit, if primary_exit.is_none() => {
                    // Its exit event may still be in the buffer, or lost:
                    // drain, then keep only processes /proc says still run.
                    self.drain_now(tracer, rec)?;
                    self.live.retain(|&p| procfs::is_alive(p));
                    if !wait_all || self.live.is_empty() {
                        break Stop::AppExited(status);
                    }
                    primary_exit = Some(status);
                }
                _ = &mut deadline => break Stop::Duration,
                job = &mut next_command => match job {
                    Some(job) => {
                        self.command = Some(job);
                        break Stop::Command;
                    }
                    // Nobody can ask any more: the session is over.
                    None => break Stop::Interrupted,
                },
                _ = self.sigint.recv() => break Stop::Interrupted,
                _ = self.sigterm.recv() => break Stop::Interrupted,
            }
        };
        drop(next_command);
        self.commands = commands;
        // After a range's end, the rest belongs to what comes next.
        if stop != Stop::CaptureEnded {
            self.drain_now(tracer, rec)?;
        }
        Ok(stop)
    }

    /// Scans every live process of the tree, and `roots`, into `rec`: a new
    /// report needs the mappings of what runs now for its symbolize stage.
    pub fn rescan(
        &self,
        roots: &[u32],
        tracer: &mut Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        let mut pids: Vec<u32> = self.live.iter().chain(roots).copied().collect();
        pids.sort_unstable();
        pids.dedup();
        let now = crate::recording::clock_ns(libc::CLOCK_MONOTONIC) as u64;
        for pid in pids {
            scan(pid, now, tracer, rec)?;
        }
        Ok(())
    }

    /// Reads everything the kernel has submitted so far.
    pub fn drain_now(
        &mut self,
        tracer: &mut Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        self.drain_up_to(tracer, rec, usize::MAX, false)
    }

    /// Reads at most `max` events, so that a producer faster than asys
    /// cannot keep the collection loop from its timers and signals; what is
    /// left is read on the next turn (the tick comes every 50 ms).
    /// With `split`, reading stops at the end of a capture range, so that
    /// what follows goes to the next report (repeat, stop).
    fn drain_up_to(
        &mut self,
        tracer: &mut Tracer,
        rec: &mut Recorder,
        max: usize,
        split: bool,
    ) -> Result<(), CollectError> {
        let mut st = DrainState {
            counts: &mut self.counts,
            pids: &mut self.pids,
            clock_offsets: &mut self.clock_offsets,
            site_names: &mut self.site_names,
            capture_ranges: &mut self.capture_ranges,
            capture_closed: &mut self.capture_closed,
            live: &mut self.live,
            size_limited: &mut self.size_limited,
            max_bytes: self.max_bytes,
            unchecked: &mut self.unchecked,
            split,
        };
        drain(self.events.get_mut(), tracer, rec, &mut st, max)
    }
}

/// What draining updates besides the report.
struct DrainState<'a> {
    counts: &'a mut BTreeMap<String, u64>,
    pids: &'a mut std::collections::BTreeSet<u32>,
    clock_offsets: &'a mut BTreeMap<u32, i64>,
    site_names: &'a mut SiteNames,
    capture_ranges: &'a mut u32,
    capture_closed: &'a mut bool,
    live: &'a mut std::collections::BTreeSet<u32>,
    size_limited: &'a mut bool,
    max_bytes: Option<u64>,
    unchecked: &'a mut u32,
    /// Stop at the end of a capture range.
    split: bool,
}

fn drain(
    ring: &mut RingBuf<MapData>,
    tracer: &mut Tracer,
    rec: &mut Recorder,
    st: &mut DrainState<'_>,
    max: usize,
) -> Result<(), CollectError> {
    let DrainState {
        counts,
        pids,
        clock_offsets,
        site_names,
        capture_ranges,
        capture_closed,
        live,
        size_limited,
        max_bytes,
        unchecked,
        split,
    } = st;
    let mut n = 0;
    while n < max
        && let Some(item) = ring.next()
    {
        n += 1;
        **unchecked += 1;
        if **unchecked >= 4096 {
            **unchecked = 0;
            if let Some(max) = max_bytes.filter(|_| !**size_limited)
                && over_size(rec, max)?
            {
                tracer.stop_recording_for_good()?;
                **size_limited = true;
                eprintln!(
                    "asys: the report reached --max-report-size ({} MiB): recording stopped; \
                     collection ends with the application",
                    max >> 20
                );
            }
        }
        let bytes: &[u8] = &item;
        if bytes.len() < size_of::<EventHeader>() {
            continue;
        }
        let header: EventHeader = read(bytes);
        let kind = EventKind::from_u32(header.kind);
        // Past --max-report-size: what the kernel sent before it stopped
        // recording is counted, not written.
        if **size_limited
            && matches!(
                kind,
                Some(
                    EventKind::ApiCall
                        | EventKind::ApiCallShort
                        | EventKind::ApiCallText
                        | EventKind::ApiStack
                        | EventKind::DeviceActivity
                        | EventKind::SchedSwitch
                        | EventKind::CpuSample
                        | EventKind::CpuSampleStack
                )
            )
        {
            *counts.entry("past_max_report_size".into()).or_default() += 1;
            continue;
        }
        match kind {
            Some(kind @ (EventKind::ApiCall | EventKind::ApiCallShort))
                if bytes.len() >= short_or_full_size(kind) =>
            {
                let ev: ApiCallEvent = if kind == EventKind::ApiCallShort {
                    read::<asys_common::ApiCallShortEvent>(bytes).widen()
                } else {
                    read(bytes)
                };
                drop(item);
                pids.insert(ev.header.pid);
                *counts.entry("api_calls".into()).or_default() += 1;
                if ev.cookie & COOKIE_SITE != 0 {
                    site_api_call(&ev, site_names, tracer.hggc_set(), rec)?;
                } else {
                    api_call(&ev, None, tracer, rec)?;
                }
            }
            Some(EventKind::ApiCallText) if bytes.len() >= size_of::<ApiTextEvent>() => {
                let ev: ApiTextEvent = read(bytes);
                drop(item);
                pids.insert(ev.call.header.pid);
                *counts.entry("api_calls".into()).or_default() += 1;
                api_call(&ev.call, Some(&ev), tracer, rec)?;
            }
            Some(
                kind @ (EventKind::ProcessFork | EventKind::ProcessExec | EventKind::ProcessExit),
            ) if bytes.len() >= size_of::<ProcessEvent>() => {
                let ev: ProcessEvent = read(bytes);
                drop(item);
                *counts.entry("process_events".into()).or_default() += 1;
                match kind {
                    EventKind::ProcessFork if procfs::is_process(ev.child_pid) => {
                        site_names.inherit(ev.header.pid, ev.child_pid);
                        live.insert(ev.child_pid);
                    }
                    EventKind::ProcessExit => {
                        live.remove(&ev.child_pid);
                    }
                    _ => {}
                }
                process_event(kind, &ev, tracer, rec, pids)?;
            }
            Some(EventKind::DeviceActivity) if bytes.len() >= size_of::<ActivityEvent>() => {
                let ev: ActivityEvent = read(bytes);
                drop(item);
                *counts.entry("device_activity".into()).or_default() += 1;
                clock_offsets.insert(ev.header.pid, ev.record.clock_offset);
                rec.activity(activity_row(&ev))?;
            }
            Some(EventKind::ApiStack) if bytes.len() >= size_of::<ApiStackEvent>() => {
                let ev: ApiStackEvent = read(bytes);
                drop(item);
                *counts.entry("api_stacks".into()).or_default() += 1;
                let len = (ev.len as usize).min(ev.stack.len());
                rec.stack(StackRawRow {
                    pid: ev.header.pid,
                    tid: ev.header.tid,
                    call_start: ev.call_start as i64,
                    ip: ev.ip,
                    sp: ev.sp,
                    bp: ev.bp,
                    stack: ev.stack[..len].to_vec(),
                })?;
            }
            Some(EventKind::SchedSwitch) if bytes.len() >= size_of::<SchedEvent>() => {
                let ev: SchedEvent = read(bytes);
                drop(item);
                *counts.entry("context_switches".into()).or_default() += 1;
                let prev_comm = rec.strings.intern(&comm_text(&ev.prev_comm));
                let next_comm = rec.strings.intern(&comm_text(&ev.next_comm));
                rec.sched(SchedRow {
                    ts: ev.header.ts as i64,
                    cpu: ev.header.cpu,
                    prev_pid: ev.header.pid,
                    prev_tid: ev.header.tid,
                    prev_state: ev.prev_state,
                    prev_comm,
                    next_tid: ev.next_tid,
                    next_comm,
                })?;
            }
            Some(EventKind::CpuSample) if bytes.len() >= size_of::<CpuSampleEvent>() => {
                let ev: CpuSampleEvent = read(bytes);
                drop(item);
                *counts.entry("cpu_samples".into()).or_default() += 1;
                cpu_sample(&ev, &[], rec)?;
            }
            Some(EventKind::CpuSampleStack) if bytes.len() >= size_of::<CpuSampleStackEvent>() => {
                let ev: CpuSampleStackEvent = read(bytes);
                drop(item);
                *counts.entry("cpu_samples".into()).or_default() += 1;
                let len = (ev.len as usize).min(ev.stack.len());
                cpu_sample(&ev.sample, &ev.stack[..len], rec)?;
            }
            Some(EventKind::Capture) if bytes.len() >= size_of::<CaptureEvent>() => {
                let ev: CaptureEvent = read(bytes);
                drop(item);
                if ev.started != 0 {
                    **capture_ranges += 1;
                    **capture_closed = false;
                } else {
                    **capture_closed = true;
                    // What follows the end of a range is not this range's:
                    // leave it in the buffer for the next report (repeat).
                    if *split {
                        return Ok(());
                    }
                }
            }
            Some(EventKind::ApiName) if bytes.len() >= size_of::<ApiNameEvent>() => {
                let ev: ApiNameEvent = read(bytes);
                drop(item);
                let len = ev
                    .name
                    .iter()
                    .position(|&c| c == 0)
                    .unwrap_or(ev.name.len());
                let name = String::from_utf8_lossy(&ev.name[..len]).into_owned();
                site_names.insert(ev.header.pid, ev.id, name);
            }
            Some(EventKind::LibraryLoad) if bytes.len() >= size_of::<LibraryLoadEvent>() => {
                let ev: LibraryLoadEvent = read(bytes);
                drop(item);
                *counts.entry("loader_events".into()).or_default() += 1;
                // Probe first, then let the process go: no call is missed.
                let scanned = scan(ev.header.pid, ev.header.ts, tracer, rec);
                if ev.stopped != 0 {
                    tracer.resume(ev.header.pid);
                }
                scanned?;
            }
            _ => {
                *counts.entry("unknown_events".into()).or_default() += 1;
            }
        }
    }
    Ok(())
}

fn read<T: Copy>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= size_of::<T>());
    // Ring buffer records are 8-byte aligned, but read unaligned to be safe.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}

/// The size of a call event of `kind` (the kernel sends calls whose
/// signature reads no argument without them).
fn short_or_full_size(kind: EventKind) -> usize {
    if kind == EventKind::ApiCallShort {
        size_of::<asys_common::ApiCallShortEvent>()
    } else {
        size_of::<ApiCallEvent>()
    }
}

fn api_call(
    ev: &ApiCallEvent,
    text: Option<&ApiTextEvent>,
    tracer: &Tracer,
    rec: &mut Recorder,
) -> Result<(), CollectError> {
    let Some(probe) = tracer.probe(ev.cookie) else {
        return Ok(());
    };
    let name_id = rec.strings.intern(&probe.name);
    let mut row = ApiRow {
        start: ev.start as i64,
        end: ev.header.ts as i64,
        pid: ev.header.pid,
        tid: ev.header.tid,
        cpu: ev.header.cpu,
        name_id,
        library_id: probe.library,
        correlation: (ev.correlation != 0).then_some(ev.correlation as u32),
        ..Default::default()
    };
    apis::decode(&probe.signature, &ev.args, ev.out0, ev.ret, &mut row);
    if let Some(t) = text {
        if t.text_handle != 0 {
            row.text_handle = Some(t.text_handle);
        } else {
            row.text_id = Some(rec.strings.intern(&decode_text(&t.text, t.text_wide != 0)));
        }
    }
    rec.api(probe.item, row)?;
    Ok(())
}

/// A call recorded through the injection library's sites: the hggc API,
/// named by the id the library announced.
fn site_api_call(
    ev: &ApiCallEvent,
    names: &SiteNames,
    set: &apis::HggcTraceSet,
    rec: &mut Recorder,
) -> Result<(), CollectError> {
    let id = (ev.cookie & COOKIE_ID_MASK) as u32;
    let name = names
        .get(ev.header.pid, id)
        .map(str::to_string)
        .unwrap_or_else(|| format!("hggc-api-{id}"));
    // The library reports every call; --hggc-trace-set applies here.
    if !set.wants_api(&name) {
        return Ok(());
    }
    let signature = apis::signature(&name);
    let mut row = ApiRow {
        start: ev.start as i64,
        end: ev.header.ts as i64,
        pid: ev.header.pid,
        tid: ev.header.tid,
        cpu: ev.header.cpu,
        name_id: rec.strings.intern(&name),
        library_id: u32::MAX,
        correlation: (ev.correlation != 0).then_some(ev.correlation as u32),
        ..Default::default()
    };
    // The kernel read *args[0] for every call; keep it where it means something.
    let out0 = if signature.reads_out0() { ev.out0 } else { 0 };
    apis::decode(&signature, &ev.args, out0, ev.ret, &mut row);
    rec.api(apis::TraceItem::Hggc, row)?;
    Ok(())
}

fn activity_row(ev: &ActivityEvent) -> ActivityRow {
    let r = &ev.record;
    let mut row = ActivityRow {
        start: r.start as i64,
        end: r.end as i64,
        pid: ev.header.pid,
        device: r.device,
        stream: r.stream,
        correlation: r.correlation,
        clock_offset: r.clock_offset,
        ..Default::default()
    };
    match r.kind {
        ACTIVITY_KERNEL => {
            row.kind = "kernel";
            row.kernel_addr = Some(r.func);
            row.grid = Some(r.grid);
            row.block = Some(r.block);
            row.shared_mem = Some(r.shared_mem);
        }
        ACTIVITY_MEMCPY => {
            row.kind = "memcpy";
            row.bytes = Some(r.bytes);
            row.copy_kind = Some(r.copy_kind as i32);
        }
        _ => {
            row.kind = "memset";
            row.bytes = Some(r.bytes);
        }
    }
    row
}

/// A captured C string, or UTF-32 (`wchar_t`) text, up to its first NUL.
fn decode_text(bytes: &[u8], wide: bool) -> String {
    if wide {
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .take_while(|&c| c != 0)
            .map(|c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    } else {
        let len = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..len]).into_owned()
    }
}

/// Whether the report would pass `max` bytes. The cheap estimate runs high;
/// encoding what is pending tells. An eighth is left for what packing adds
/// (symbols, modules, strings).
fn over_size(rec: &mut Recorder, max: u64) -> Result<bool, CollectError> {
    let limit = max / 8 * 7;
    Ok(rec.size_estimate() >= limit && rec.encoded_size()? >= limit)
}

/// Records a CPU sample and its stack; a process seen for the first time (one
/// outside the traced tree, with `-s system-wide`) gets its mappings recorded
/// so that the symbolize stage can name its frames.
fn cpu_sample(ev: &CpuSampleEvent, stack: &[u8], rec: &mut Recorder) -> Result<(), CollectError> {
    let h = ev.header;
    if !rec.has_mappings(h.pid) {
        scan_mappings(h.pid, h.ts, rec)?;
    }
    rec.sample(
        SampleRow {
            ts: h.ts as i64,
            pid: h.pid,
            tid: h.tid,
            cpu: h.cpu,
            kernel_mode: ev.kernel != 0,
        },
        StackRawRow {
            pid: h.pid,
            tid: h.tid,
            call_start: h.ts as i64,
            ip: ev.ip,
            sp: ev.sp,
            bp: ev.bp,
            stack: stack.to_vec(),
        },
    )?;
    Ok(())
}

/// Records the executable mappings of `pid` (only for naming frames: nothing
/// is probed). A process already gone is marked all the same, so that its
/// remaining samples do not try again.
fn scan_mappings(pid: u32, ts: u64, rec: &mut Recorder) -> Result<(), CollectError> {
    rec.mark_mapped(pid);
    record_mappings(pid, ts, rec, |_| Ok(None))
}

/// A task's command name, as the kernel keeps it (NUL-padded).
fn comm_text(comm: &[u8; 16]) -> String {
    let len = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..len]).into_owned()
}

fn process_event(
    kind: EventKind,
    ev: &ProcessEvent,
    tracer: &mut Tracer,
    rec: &mut Recorder,
    pids: &mut std::collections::BTreeSet<u32>,
) -> Result<(), CollectError> {
    let comm_id = rec.strings.intern(&comm_text(&ev.comm));
    let kind_name = match kind {
        EventKind::ProcessFork => "fork",
        EventKind::ProcessExec => "exec",
        _ => "exit",
    };
    rec.process(ProcessRow {
        ts: ev.header.ts as i64,
        kind: kind_name,
        pid: ev.header.pid,
        tid: ev.header.tid,
        child_pid: ev.child_pid,
        comm_id,
    })?;
    match kind {
        // Threads come through here too; only new processes have their own maps.
        EventKind::ProcessFork if procfs::is_process(ev.child_pid) => {
            pids.insert(ev.child_pid);
            scan(ev.child_pid, ev.header.ts, tracer, rec)?;
        }
        EventKind::ProcessExec => {
            pids.insert(ev.child_pid);
            scan(ev.child_pid, ev.header.ts, tracer, rec)?;
        }
        _ => {}
    }
    Ok(())
}

/// Examines every executable mapping of `pid` (probing new runtimes) and
/// records the mappings for the symbolize stage. A process that is already
/// gone has nothing to scan.
pub fn scan(
    pid: u32,
    ts: u64,
    tracer: &mut Tracer,
    rec: &mut Recorder,
) -> Result<(), CollectError> {
    record_mappings(pid, ts, rec, |m| {
        let id = tracer.examine(&m.path)?;
        Ok(id.and_then(|id| tracer.library(id).build_id.clone()))
    })
}

/// Records `pid`'s executable mappings, and its vDSO, for the symbolize
/// stage; `look_at` sees each mapping first (and may probe it) and gives its
/// build id.
fn record_mappings(
    pid: u32,
    ts: u64,
    rec: &mut Recorder,
    mut look_at: impl FnMut(&procfs::Mapping) -> Result<Option<String>, CollectError>,
) -> Result<(), CollectError> {
    let Ok((maps, vdso)) = procfs::mappings_and_vdso(pid) else {
        return Ok(());
    };
    for m in maps.iter().filter(|m| m.executable) {
        let build_id = look_at(m)?;
        let path_id = rec.strings.intern(&m.path.display().to_string());
        rec.module(ModuleRow {
            ts: ts as i64,
            pid,
            start: m.start,
            end: m.end,
            file_offset: m.offset,
            path_id,
            build_id,
        })?;
    }
    // The vDSO as a module too: the symbolize stage reads asys's own copy
    // (the same kernel's), so samples and stacks in it are named and unwound.
    if let Some((start, end)) = vdso {
        let path_id = rec.strings.intern(procfs::VDSO);
        rec.module(ModuleRow {
            ts: ts as i64,
            pid,
            start,
            end,
            file_offset: 0,
            path_id,
            build_id: None,
        })?;
    }
    Ok(())
}
