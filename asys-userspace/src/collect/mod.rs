//! The collect stage: reads the ring buffer, decodes each record
//! ([`decode`]), keeps the process tree ([`process_tree`]), reacts to the
//! loader hook (new libraries get probes before the stopped process goes on),
//! counts ([`counters`]) and turns events into report rows ([`rows`]).
pub mod build_ids;
pub mod counters;
pub mod decode;
pub mod device_ledger;
pub mod event_rows;
pub mod jit_symbols;
pub mod kallsyms;
pub mod mappings;
pub mod metrics;
pub mod process_info;
pub mod process_tree;
pub mod python_code;
pub mod python_stacks;
pub mod python_thread_names;
pub mod python_thread_naming;
pub mod python_threads;
pub mod registered_names;
pub mod switch_sequence;

use std::{collections::BTreeMap, time::Duration};

use asys_common::Cookie;
use aya::maps::{MapData, RingBuf};
use tokio::io::unix::AsyncFd;

pub use counters::{Counter, Counters};
use decode::{Event, ProcessKind, StackView};
pub use mappings::scan;
use process_tree::ProcessTree;
use python_stacks::PythonStackOf;

use crate::{
    kernel::Tracer,
    process::procfs,
    sink::{journal::Progress, recorder::Recorder},
};
use asys_report::report::rows::{
    KernelFrameRow, ProcessRow, SampleRow, SchedRow, StackRawRow, WakeupRow,
};

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("event buffer: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Report(#[from] asys_report::report::ReportError),
    #[error(transparent)]
    Tracer(#[from] crate::kernel::TracerError),
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
    /// The flight recorder wants a report (SIGUSR1 or a trigger); the
    /// recorder holds when and why ([`Recorder::take_flight_trigger`]).
    Flight,
}

/// Events read per turn of the collection loop.
const DRAIN_BATCH: usize = 65536;

/// Time between two checkpoints of the recording (see
/// [`Recorder::checkpoint`]) unless the settings say otherwise: what a
/// killed asys loses is at most this, plus what the kernel had not handed
/// over yet.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// How long closing a window waits for the calls that started in it to
/// return (see [`Collector::settle`]); those still running then are counted.
pub const SETTLE_LIMIT: Duration = Duration::from_millis(250);

/// Events between two looks at the report's size (`--max-report-size`).
const SIZE_CHECK_EVENTS: u32 = 4096;

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
    /// Time between two checkpoints; None: [`CHECKPOINT_EVERY`].
    pub checkpoint_every: Option<Duration>,
}

/// What decides, during one run of the collector, whether reading stops it.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// A capture range's end stops collection.
    stop_at_capture_end: bool,
    /// The launched application's status once it exited, while its
    /// descendants still run (`--wait all`).
    primary_exit: Option<i32>,
}

/// What collection knows besides the rows it wrote.
#[derive(Default)]
pub struct State {
    /// Events per kind, for the current report.
    pub counts: Counters,
    pub tree: ProcessTree,
    /// The device-to-host clock offset last used per process (device minus
    /// CLOCK_MONOTONIC, ns).
    pub clock_offsets: BTreeMap<u32, i64>,
    /// Capture ranges opened so far, and whether the last one closed.
    pub capture_ranges: u32,
    capture_closed: bool,
    /// Recording stopped at `--max-report-size` (`max_bytes`).
    pub size_limited: bool,
    max_bytes: Option<u64>,
    /// This run's time between two checkpoints (`Limits::checkpoint_every`).
    checkpoint_every: Duration,
    /// Events read since the report's size was last looked at (across
    /// drains, which may each read only a few).
    unchecked: u32,
    site_apis: event_rows::SiteApis,
    name_ids: event_rows::NameIds,
    /// Recorded calls still owed their device record.
    pub device: device_ledger::DeviceLedger,
    /// Traced threads' switches in and out, for the ones the kernel did not
    /// deliver.
    pub switches: switch_sequence::SwitchSequence,
    /// The recorded window (CLOCK_MONOTONIC ns) when asys opened and closed
    /// it itself (attach, system-wide): what the kernel sent from outside
    /// it (a probe that read the recording flag just before it changed) is
    /// left out, so that the report holds exactly the window its metadata
    /// claims.
    pub window: RecordingWindow,
    /// Calls of the window still running when it was closed and asys
    /// detached ([`Collector::settle`]); None when asys did not close it.
    pub calls_in_flight: Option<u64>,
    /// NVTX names processes registered before asys reached them, by pid
    /// ([`registered_names`]).
    pub registered: BTreeMap<u32, registered_names::Registered>,
    /// What [`Self::registered`] may hold, per process and in all.
    pub registration_budget:
        asys_report::untrusted::budget::Budget<asys_report::untrusted::budget::NvtxRegistrations>,
    /// Names of kernel stack frames (/proc/kallsyms).
    kernel_names: kallsyms::KernelNames,
    /// Python stacks of samples (`--python-sampling`).
    python: python_stacks::PythonStacks,
    /// Python names of the threads with Python stacks.
    python_thread_names: python_thread_naming::PythonThreadNaming,
}

/// The bounds of the recorded window, once known.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordingWindow {
    pub start: Option<u64>,
    pub end: Option<u64>,
}

impl RecordingWindow {
    /// Whether an event stamped `t` lies outside the window.
    fn excludes(&self, t: u64) -> bool {
        self.start.is_some_and(|s| t < s) || self.end.is_some_and(|e| t > e)
    }
}

/// Reads and turns events into rows until something ends collection;
/// `J` is what a session's requests look like (they end it too).
pub struct Collector<J> {
    events: AsyncFd<RingBuf<MapData>>,
    sigint: tokio::signal::unix::Signal,
    sigterm: tokio::signal::unix::Signal,
    /// SIGUSR1 asks the flight recorder for a report (only in that mode:
    /// elsewhere the signal keeps its default action).
    sigusr1: Option<tokio::signal::unix::Signal>,
    pub state: State,
    /// A session daemon's requests, which interrupt collection.
    pub commands: Option<tokio::sync::mpsc::Receiver<J>>,
    /// The request that ended the last run.
    pub command: Option<J>,
    /// The periodic samplers (host memory, NIC counters), when asked for.
    pub metrics: Option<metrics::Sampler>,
}

impl<J> Collector<J> {
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
            sigusr1: None,
            state: State::default(),
            commands: None,
            command: None,
            metrics: None,
        })
    }

    /// From now on SIGUSR1 ends a run with [`Stop::Flight`].
    pub fn listen_for_sigusr1(&mut self) -> Result<(), CollectError> {
        use tokio::signal::unix::{SignalKind, signal};
        self.sigusr1 = Some(signal(SignalKind::user_defined1())?);
        Ok(())
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
            checkpoint_every,
        } = limits;
        self.state.max_bytes = max_bytes;
        self.state.checkpoint_every = checkpoint_every.unwrap_or(CHECKPOINT_EVERY);
        // The launched application's status once it exited, while its
        // descendants still run (--wait all).
        let mut primary_exit: Option<i32> = None;
        // A range that closed ended the previous run (repeat mode).
        self.state.capture_closed = false;
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
        let mut checkpointed = tokio::time::Instant::now();
        // The samplers' timer; its first tick (at once) samples the start.
        let mut metrics_tick = tokio::time::interval(
            self.metrics
                .as_ref()
                .map_or(Duration::from_secs(1), metrics::Sampler::tick),
        );
        metrics_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = loop {
            tokio::select! {
                _ = tick.tick() => {
                    let run = Run { stop_at_capture_end, primary_exit };
                    if let Some(stop) = self.on_tick(tracer, rec, run, &mut checkpointed)? {
                        break stop;
                    }
                }
                _ = metrics_tick.tick(), if recording && self.metrics.is_some() => {
                    self.sample_metrics(rec, false)?;
                }
                _ = &mut delay_over, if !recording => {
                    tracer.control.set_recording(true)?;
                    self.state.switches.restart();
                    recording = true;
                }
                guard = self.events.readable_mut() => {
                    // Clear readiness first, then drain: data that arrives
                    // meanwhile makes the fd ready again, so nothing waits.
                    guard?.clear_ready();
                    self.drain_up_to(tracer, rec, DRAIN_BATCH, stop_at_capture_end)?;
                    let run = Run { stop_at_capture_end, primary_exit };
                    if let Some(stop) = self.stop_after_reading(rec, run) {
                        break stop;
                    }
                }
                status = &mut app_exit, if primary_exit.is_none() => {
                    if self.app_exited(tracer, rec, wait_all)? {
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
                _ = async {
                    match self.sigusr1.as_mut() {
                        Some(s) => s.recv().await,
                        None => std::future::pending().await,
                    }
                } => {
                    rec.trigger_flight(crate::clock::monotonic_ns(), "SIGUSR1".into());
                    break Stop::Flight;
                }
                _ = self.sigint.recv() => break Stop::Interrupted,
                _ = self.sigterm.recv() => break Stop::Interrupted,
            }
        };
        drop(next_command);
        self.commands = commands;
        self.end_run(tracer, rec, stop, recording)
    }

    /// What ends every run: the last metrics sample, and the buffer read to
    /// its end unless what follows belongs elsewhere.
    fn end_run(
        &mut self,
        tracer: &mut Tracer,
        rec: &mut Recorder,
        stop: Stop,
        recording: bool,
    ) -> Result<Stop, CollectError> {
        // The last sample ends where the collection does (a NIC's totals
        // count up to here).
        if recording {
            self.sample_metrics(rec, true)?;
        }
        // After a range's end, the rest belongs to what comes next. A window
        // asys opened is closed first and then read to its end
        // ([`Self::settle`]): reading a full buffer can take a while, and the
        // window must end when the collection did (`--duration`).
        let settles = self.state.window.start.is_some() && stop != Stop::Flight;
        if stop != Stop::CaptureEnded && !settles {
            self.drain_now(tracer, rec)?;
        }
        Ok(stop)
    }

    /// The launched application exited: whether that ends the run (its
    /// tree is gone, or only it was waited for). Its exit event may still
    /// be in the buffer, or lost: the buffer is read, then only processes
    /// /proc says still run are kept.
    fn app_exited(
        &mut self,
        tracer: &mut Tracer,
        rec: &mut Recorder,
        wait_all: bool,
    ) -> Result<bool, CollectError> {
        self.drain_now(tracer, rec)?;
        self.state.tree.retain_live(|&p| procfs::is_alive(p));
        Ok(!wait_all || self.state.tree.all_exited())
    }

    /// The collector's tick: reads what the events have not woken it for,
    /// handles the loads the ring had no room for, writes a checkpoint when
    /// one is due, and says whether the run stops.
    fn on_tick(
        &mut self,
        tracer: &mut Tracer,
        rec: &mut Recorder,
        run: Run,
        checkpointed: &mut tokio::time::Instant,
    ) -> Result<Option<Stop>, CollectError> {
        self.drain_up_to(tracer, rec, DRAIN_BATCH, run.stop_at_capture_end)?;
        self.state.unannounced_loads(tracer, rec)?;
        if checkpointed.elapsed() >= self.state.checkpoint_every {
            rec.checkpoint(self.state.progress(&tracer.snapshot()))?;
            *checkpointed = tokio::time::Instant::now();
        }
        if run.primary_exit.is_some() {
            // An exit event can be lost (buffer full): ask /proc too.
            self.state.tree.retain_live(|&p| procfs::is_alive(p));
        }
        Ok(self.stop_after_reading(rec, run))
    }

    /// Whether what was just read stops the run: a capture range closed
    /// (when its end stops collection), a flight recorder's trigger, or the
    /// last process of a tree whose launched process already exited.
    fn stop_after_reading(&self, rec: &Recorder, run: Run) -> Option<Stop> {
        if run.stop_at_capture_end && self.state.capture_closed {
            return Some(Stop::CaptureEnded);
        }
        if rec.flight_pending() {
            return Some(Stop::Flight);
        }
        run.primary_exit
            .filter(|_| self.state.tree.all_exited())
            .map(Stop::AppExited)
    }

    /// Samples every metrics source that is due (all of them, before the
    /// first sample): the start of a recording.
    pub fn sample_metrics_now(&mut self, rec: &mut Recorder) -> Result<(), CollectError> {
        self.sample_metrics(rec, false)
    }

    /// Samples what is due of the metrics sources (everything with
    /// `force`), unless the window asys opened excludes now.
    fn sample_metrics(&mut self, rec: &mut Recorder, force: bool) -> Result<(), CollectError> {
        let Some(sampler) = &mut self.metrics else {
            return Ok(());
        };
        let now = crate::clock::monotonic_ns() as u64;
        if self.state.window.excludes(now) {
            return Ok(());
        }
        sampler.sample(now, force, self.state.tree.seen(), rec)?;
        Ok(())
    }

    /// Scans every live process of the tree, and `roots`, into `rec`: a new
    /// report needs the mappings of what runs now for its symbolize stage.
    pub fn rescan(
        &self,
        roots: &[u32],
        tracer: &mut Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        let mut pids: Vec<u32> = self
            .state
            .tree
            .live()
            .chain(roots.iter().copied())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        let now = crate::clock::monotonic_ns() as u64;
        for pid in pids {
            scan(pid, now, tracer, rec)?;
        }
        Ok(())
    }

    /// Closes the window asys opened ([`State::window`]) at `end`: turns
    /// recording off, then reads until every call that started in the window
    /// has returned and been read (at most [`SETTLE_LIMIT`]), so that the
    /// report holds the whole window before anything is detached. Calls
    /// still running then are counted in [`State::calls_in_flight`].
    pub async fn settle(
        &mut self,
        tracer: &mut Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        // The end first, then the flag: a call that started by `end` read the
        // flag before it went off, so it is recorded; one recorded after
        // `end` (it read the flag just before) is left out by the window.
        // A window planned to end earlier (an aligned start's --duration)
        // ends there.
        let now = crate::clock::monotonic_ns() as u64;
        let end = self
            .state
            .window
            .end
            .map_or(now, |planned| planned.min(now));
        tracer.control.set_recording(false)?;
        self.state.window.end = Some(end);
        let start = self.state.window.start.unwrap_or(0);
        let give_up = tokio::time::Instant::now() + SETTLE_LIMIT;
        let open = loop {
            self.drain_now(tracer, rec)?;
            let open = tracer.calls_in_flight(start, end)?;
            if open == 0 || tokio::time::Instant::now() >= give_up {
                break open;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        // The return probe pops a call before it submits it: give the last
        // ones the moment they need, then read them.
        tokio::time::sleep(Duration::from_millis(2)).await;
        self.drain_now(tracer, rec)?;
        self.state.calls_in_flight = Some(open);
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
        let ring = self.events.get_mut();
        let st = &mut self.state;
        let mut n = 0;
        while n < max
            && let Some(item) = ring.next()
        {
            n += 1;
            st.check_size(tracer, rec)?;
            let event = match decode::decode(&item) {
                Ok(e) => e,
                Err(_) => {
                    st.counts.add(Counter::UnknownEvents, 1);
                    continue;
                }
            };
            if event.window_time().is_some_and(|t| st.window.excludes(t)) {
                continue;
            }
            // Past --max-report-size: what the kernel sent before it stopped
            // recording is counted, not written.
            if st.size_limited && event.is_data() && st.wanted(&event, tracer) {
                st.counts.add(Counter::PastMaxReportSize, 1);
                // Arrived, though not written: its call is not owed it.
                if let Event::DeviceActivity(ev) = &event {
                    st.device.record(ev, tracer.probes.hggc_set());
                }
                continue;
            }
            // A site's report of a runtime not asked for (an hggc process
            // while tracing cuda, or the reverse) is none of this report's.
            if !st.wanted(&event, tracer) {
                continue;
            }
            if st.handle(event, tracer, rec)? == Flow::RangeEnded && split {
                // What follows the end of a range is not this range's:
                // leave it in the buffer for the next report (repeat).
                return Ok(());
            }
        }
        Ok(())
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Next,
    /// A capture range closed.
    RangeEnded,
}

impl State {
    /// Whether `event` belongs to an item asked for: device records by the
    /// runtime they came from, site-recorded calls by their API's item.
    fn wanted(&self, event: &Event<'_>, tracer: &Tracer) -> bool {
        match event {
            Event::DeviceActivity(ev) => tracer.probes.traces(event_rows::activity_item(ev)),
            Event::ApiCall(ev) if Cookie(ev.cookie).has(Cookie::SITE) => self
                .tree
                .site_api(ev.header.pid, Cookie(ev.cookie).id())
                .is_none_or(|i| tracer.probes.traces(self.site_apis.get(i).item)),
            _ => true,
        }
    }

    /// A process traced before its first sample (attach): whether its
    /// Python frames are read is settled now, not when its first sample is
    /// read from the ring (a batch later, its first samples without them).
    pub fn look_at_python(&mut self, pid: u32, tracer: &mut Tracer) {
        self.python.sampled(pid, tracer);
    }

    /// The counts a checkpoint (and the report's metadata) holds.
    /// Starts reading kallsyms now, for a recording that will name kernel
    /// stacks (`--cpuctxsw`, `-s`).
    pub fn preload_kernel_names(&mut self) {
        self.kernel_names.preload();
    }

    /// Python frames left unnamed because their process's names passed
    /// asys's budget.
    pub fn python_refused(&self) -> u64 {
        self.python.refused() + self.python_thread_names.refused()
    }

    /// Python thread names asys could not read.
    pub fn python_thread_names_unread(&self) -> u64 {
        self.python_thread_names.unread()
    }

    /// Python code objects read whose names were cut at asys's length.
    pub fn python_names_cut(&self) -> u64 {
        self.python.names_cut()
    }

    pub fn progress(&self, tracer: &crate::kernel::Snapshot) -> Progress {
        Progress {
            events: self.counts.to_map(),
            drops: tracer.drops.clone(),
            kernel_skipped: tracer.kernel_skipped.clone(),
            pids: self.tree.seen().collect(),
            libraries: tracer.libraries.clone(),
            library_table: tracer.library_table.clone(),
            items_not_found: tracer.items_not_found.clone(),
            device_activity: tracer.device_activity,
            device_clock_offsets: self.clock_offsets.clone(),
            capture_ranges: self.capture_ranges,
            size_limited: self.size_limited,
        }
    }

    /// Every `SIZE_CHECK_EVENTS` events, whether the report reached
    /// `--max-report-size`; recording then stops for good.
    #[inline]
    fn check_size(&mut self, tracer: &mut Tracer, rec: &mut Recorder) -> Result<(), CollectError> {
        self.unchecked += 1;
        if self.unchecked < SIZE_CHECK_EVENTS {
            return Ok(());
        }
        self.unchecked = 0;
        if let Some(max) = self.max_bytes.filter(|_| !self.size_limited)
            && over_size(rec, max)?
        {
            tracer.control.stop_recording_for_good()?;
            self.size_limited = true;
            eprintln!(
                "asys: the report reached --max-report-size ({} MiB): recording stopped; \
                 collection ends with the application",
                max >> 20
            );
        }
        Ok(())
    }

    fn handle(
        &mut self,
        event: Event<'_>,
        tracer: &mut Tracer,
        rec: &mut Recorder,
    ) -> Result<Flow, CollectError> {
        match event {
            Event::ApiCall(ev) => self.api_call(&ev, tracer, rec)?,
            Event::LockWait(ev) => self.lock_wait(&ev, tracer, rec)?,
            Event::ApiCallText(ev) => self.api_call_text(&ev, tracer, rec)?,
            Event::Process(kind, ev) => self.process_event(kind, &ev, tracer, rec)?,
            Event::DeviceActivity(ev) => {
                self.counts.add(Counter::DeviceActivity, 1);
                self.clock_offsets
                    .insert(ev.header.pid, ev.record.clock_offset);
                self.device.record(&ev, tracer.probes.hggc_set());
                match ev.record.kind & asys_common::ACTIVITY_KIND_MASK {
                    asys_common::ACTIVITY_SYNC => rec.sync(event_rows::sync_row(&ev))?,
                    asys_common::ACTIVITY_GRAPH => rec.graph(event_rows::graph_row(&ev))?,
                    _ => rec.activity(event_rows::activity_row(&ev))?,
                }
            }
            Event::ApiStack(view) => {
                self.counts.add(Counter::ApiStacks, 1);
                rec.stack(raw_stack(&view))?;
            }
            Event::SchedSwitch(ev) => self.sched_switch(&ev, tracer, rec)?,
            Event::SchedWaking(ev) => sched_waking(&ev, rec)?,
            Event::KernelStack(ev) => self.kernel_stack(&ev, rec)?,
            Event::CpuSample(ev, view) => self.cpu_sample(&ev, &view, tracer, rec)?,
            Event::PythonStack(ev) => {
                self.python.record(&ev, PythonStackOf::Sample, rec)?;
                self.name_python_thread(&ev, rec)?;
            }
            Event::PythonSwitchStack(ev) => {
                self.python.record(&ev, PythonStackOf::Wait, rec)?;
                // A thread that only waits is named too (the wall-time view
                // shows it).
                self.name_python_thread(&ev, rec)?;
            }
            Event::ProbeHit(ev) => self.probe_hit(&ev, tracer, rec)?,
            Event::Capture(ev) => return Ok(self.capture(&ev)),
            Event::ApiName(ev) => self.api_name(&ev, tracer, rec),
            Event::LibraryLoad(ev) => {
                self.counts.add(Counter::LoaderEvents, 1);
                self.python.loaded(ev.header.pid);
                // Probe first, then let the process go: no call is missed.
                let scanned = scan(ev.header.pid, ev.header.ts, tracer, rec);
                if ev.stopped != 0 {
                    tracer.stops.resume(ev.header.pid);
                }
                scanned?;
            }
        }
        Ok(Flow::Next)
    }

    /// A thread with Python frames: its Python name is read when it is new
    /// (and again when the process's names are due).
    fn name_python_thread(
        &mut self,
        ev: &asys_common::PythonStackEvent,
        rec: &mut Recorder,
    ) -> Result<(), asys_report::report::ReportError> {
        if ev.depth == 0 {
            return Ok(());
        }
        self.python_thread_names
            .sampled(ev.header.pid, ev.header.tid, ev.owner_ts as i64, rec)
    }

    /// Does what the loader hook's events would have for the loads it could
    /// not announce (the ring was full): probes and continues each process
    /// it stopped all the same, and scans each it could not stop
    /// (system-wide), late. Looked for at each tick: a stopped process
    /// waits at most that long.
    fn unannounced_loads(
        &mut self,
        tracer: &mut Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        for pid in tracer.stops.unannounced_stops() {
            self.counts.add(Counter::UnannouncedLoads, 1);
            self.python.loaded(pid);
            let now = crate::clock::monotonic_ns() as u64;
            let scanned = scan(pid, now, tracer, rec);
            tracer.stops.resume(pid);
            scanned?;
        }
        for pid in tracer.stops.take_unannounced_loads() {
            self.counts.add(Counter::LateLoadScans, 1);
            self.python.loaded(pid);
            scan(pid, crate::clock::monotonic_ns() as u64, tracer, rec)?;
        }
        Ok(())
    }

    /// A call a uprobe or an injection library's site recorded.
    fn api_call(
        &mut self,
        ev: &asys_common::ApiCallEvent,
        tracer: &Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        if self.tree.saw(ev.header.pid) && !rec.described(ev.header.pid) {
            // A process never scanned (forked system-wide by an
            // untraced parent): its cgroup, while it still runs.
            process_info::describe(ev.header.pid, ev.header.ts, rec)?;
        }
        self.counts.add(Counter::ApiCalls, 1);
        let cookie = Cookie(ev.cookie);
        let expected = if cookie.has(Cookie::SITE) {
            let index = self.tree.site_api(ev.header.pid, cookie.id());
            let api = index.map(|i| self.site_apis.get(i));
            let set = tracer.probes.hggc_set();
            event_rows::site_api_call(ev, (api, index), set, &mut self.name_ids, rec)?
        } else {
            event_rows::api_call(ev, None, tracer, &mut self.name_ids, rec)?
        };
        if let Some(correlation) = expected {
            self.device.call(ev.header.pid, correlation);
        }
        Ok(())
    }

    /// A hit of a user-defined probe: its row, arguments as text.
    fn probe_hit(
        &mut self,
        ev: &asys_common::ProbeHitEvent,
        tracer: &Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        let Some(site) = tracer.user_probe(ev.probe) else {
            return Ok(());
        };
        if self.tree.saw(ev.header.pid) && !rec.described(ev.header.pid) {
            process_info::describe(ev.header.pid, ev.header.ts, rec)?;
        }
        self.counts.add(Counter::ProbeHits, 1);
        let name_id = rec.strings.intern(&site.name);
        rec.probe(asys_report::report::rows::ProbeRow {
            start: ev.start as i64,
            end: ev.header.ts as i64,
            pid: ev.header.pid,
            tid: ev.header.tid,
            cpu: ev.header.cpu,
            probe_id: ev.probe,
            name_id,
            kind: site.kind.name(),
            has_return: ev.flags & asys_common::HIT_HAS_RET != 0,
            return_value: ev.ret as i64,
            args: crate::kernel::user_probes::format_args(site, ev),
        })?;
        Ok(())
    }

    /// A lock library's futex wait (osrt): a call of the lock function
    /// that waited, or none of the program's (see kernel/osrt.rs).
    fn lock_wait(
        &mut self,
        ev: &asys_common::LockWaitEvent,
        tracer: &Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        let pid = ev.call.header.pid;
        if self.tree.saw(pid) && !rec.described(pid) {
            process_info::describe(pid, ev.call.header.ts, rec)?;
        }
        if let Some(call) = tracer.probes.name_lock_wait(ev) {
            self.counts.add(Counter::ApiCalls, 1);
            event_rows::api_call(&call, None, tracer, &mut self.name_ids, rec)?;
        }
        Ok(())
    }

    /// A call with the text of its argument.
    fn api_call_text(
        &mut self,
        ev: &asys_common::ApiTextEvent,
        tracer: &Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        self.tree.saw(ev.call.header.pid);
        self.counts.add(Counter::ApiCalls, 1);
        if let Some(correlation) =
            event_rows::api_call(&ev.call, Some(ev), tracer, &mut self.name_ids, rec)?
        {
            self.device.call(ev.call.header.pid, correlation);
        }
        Ok(())
    }

    /// A fork, exec or exit: its row, then what follows for the tracer and
    /// the process tree.
    fn process_event(
        &mut self,
        kind: ProcessKind,
        ev: &asys_common::ProcessEvent,
        tracer: &mut Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        self.counts.add(Counter::ProcessEvents, 1);
        let comm_id = rec.strings.intern(&event_rows::c_text(&ev.comm));
        rec.process(ProcessRow {
            ts: ev.header.ts as i64,
            kind,
            pid: ev.header.pid,
            tid: ev.header.tid,
            child_pid: ev.child_pid,
            comm_id,
        })?;
        // Before the child's own events (osrt names its lock waits
        // by where its parent's libc is, or its new image's).
        match kind {
            ProcessKind::Fork => tracer.probes.forked(ev.header.pid, ev.child_pid),
            ProcessKind::Exec => tracer.probes.executed(ev.child_pid),
            ProcessKind::Exit => {}
        }
        match kind {
            // Threads come through here too; only new processes have
            // their own maps.
            ProcessKind::Fork if procfs::is_process(ev.child_pid) => {
                self.tree.forked(ev.header.pid, ev.child_pid);
                self.tree.saw(ev.child_pid);
                scan(ev.child_pid, ev.header.ts, tracer, rec)?;
            }
            ProcessKind::Exec => {
                self.python.exec(ev.child_pid, tracer);
                self.python_thread_names.forget(ev.child_pid);
                // The old image's unflushed records went with it.
                self.device.process_ended(ev.child_pid);
                // A thread that execs takes the main thread's id: the
                // sequences start again.
                self.switches.forget_process(ev.child_pid);
                self.tree.saw(ev.child_pid);
                scan(ev.child_pid, ev.header.ts, tracer, rec)?;
            }
            ProcessKind::Exit => {
                jit_symbols::record(ev.child_pid, rec)?;
                self.python.exited(ev.child_pid);
                self.python_thread_names.forget(ev.child_pid);
                self.tree.exited(ev.child_pid);
                // Its threads' last switches are not all recorded (the
                // kernel stops at the group's exit).
                self.switches.forget_process(ev.child_pid);
                self.device.process_ended(ev.child_pid);
            }
            ProcessKind::Fork => {}
        }
        Ok(())
    }

    /// A context switch.
    fn sched_switch(
        &mut self,
        ev: &asys_common::SchedEvent,
        tracer: &Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        self.counts.add(Counter::ContextSwitches, 1);
        let traced = self.tree.is_live(ev.header.pid);
        self.switches
            .switch(ev.header.tid, ev.header.pid, traced, ev.next_tid);
        let prev_comm = rec.strings.intern(&event_rows::c_text(&ev.prev_comm));
        let next_comm = rec.strings.intern(&event_rows::c_text(&ev.next_comm));
        rec.sched(SchedRow {
            ts: ev.header.ts as i64,
            cpu: ev.header.cpu,
            prev_pid: ev.header.pid,
            prev_tid: ev.header.tid,
            // The kernel's bits, in the encoding the report documents.
            prev_state: tracer.task_states().normalize(ev.prev_state),
            prev_comm,
            next_tid: ev.next_tid,
            next_comm,
        })?;
        Ok(())
    }

    /// The kernel stack of a sample or a switch: a row per frame, named.
    fn kernel_stack(
        &mut self,
        ev: &asys_common::KernelStackEvent,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        use asys_report::report::schema::KernelStackSource;
        let source = match ev.source {
            asys_common::KSTACK_SWITCH => KernelStackSource::Switch,
            asys_common::KSTACK_WAKING => KernelStackSource::Waking,
            _ => KernelStackSource::Sample,
        };
        let depth = (ev.depth as usize).min(ev.ips.len());
        for (d, &addr) in ev.ips[..depth].iter().enumerate() {
            let name_id = rec.strings.intern(self.kernel_names.name(addr));
            rec.kernel_frame(KernelFrameRow {
                ts: ev.owner_ts as i64,
                tid: ev.header.tid,
                source,
                depth: d as u32,
                addr,
                name_id,
            })?;
        }
        Ok(())
    }

    /// A CPU sample and its user stack.
    fn cpu_sample(
        &mut self,
        ev: &asys_common::CpuSampleEvent,
        view: &StackView<'_>,
        tracer: &mut Tracer,
        rec: &mut Recorder,
    ) -> Result<(), CollectError> {
        self.counts.add(Counter::CpuSamples, 1);
        let h = ev.header;
        // A process seen for the first time (one outside the traced
        // tree, with -s system-wide) gets its mappings recorded so
        // that the symbolize stage can name its frames.
        if !rec.has_mappings(h.pid) {
            mappings::scan_for_names(h.pid, h.ts, rec)?;
        }
        self.python.sampled(h.pid, tracer);
        rec.sample(
            SampleRow {
                ts: h.ts as i64,
                pid: h.pid,
                tid: h.tid,
                cpu: h.cpu,
                kernel_mode: ev.kernel != 0,
            },
            raw_stack(view),
        )?;
        Ok(())
    }

    /// A capture range opened or closed.
    fn capture(&mut self, ev: &asys_common::CaptureEvent) -> Flow {
        // Switches outside the range were not recorded.
        self.switches.restart();
        if ev.started != 0 {
            self.capture_ranges += 1;
            self.capture_closed = false;
            Flow::Next
        } else {
            self.capture_closed = true;
            Flow::RangeEnded
        }
    }

    /// A name: a device kernel's, or a site API's for its id.
    fn api_name(&mut self, ev: &asys_common::ApiNameEvent, tracer: &Tracer, rec: &mut Recorder) {
        if ev.id & asys_common::KERNEL_NAME_BIT != 0 {
            rec.kernel_name(
                ev.header.pid,
                u64::from(ev.id),
                &event_rows::c_text(&ev.name),
            );
        } else if ev.name[0] != 0 {
            let name = event_rows::c_text(&ev.name);
            let index = self.site_apis.index(&name, tracer.probes.hggc_set());
            self.tree.name_site_api(ev.header.pid, ev.id, index);
        }
        // Else a name the probe could not read: its calls keep their id's
        // placeholder name rather than an empty one.
    }
}

/// A wakeup (`sched_waking`).
fn sched_waking(ev: &asys_common::WakingEvent, rec: &mut Recorder) -> Result<(), CollectError> {
    let waker_comm = rec.strings.intern(&event_rows::c_text(&ev.waker_comm));
    rec.wakeup(WakeupRow {
        ts: ev.header.ts as i64,
        cpu: ev.header.cpu,
        waker_pid: ev.header.pid,
        waker_tid: ev.header.tid,
        waker_comm,
        wakee_tid: ev.wakee_tid,
        target_cpu: ev.target_cpu,
    })?;
    Ok(())
}

/// A raw stack row: registers and the copied stack, for the symbolize stage.
fn raw_stack(view: &StackView<'_>) -> StackRawRow {
    StackRawRow {
        pid: view.header.pid,
        tid: view.header.tid,
        call_start: view.key as i64,
        ip: view.ip,
        sp: view.sp,
        bp: view.bp,
        stack: view.stack.to_vec(),
    }
}

/// Whether the report would pass `max` bytes. The cheap estimate runs high;
/// encoding what is pending tells. An eighth is left for what packing adds
/// (symbols, modules, strings).
fn over_size(rec: &mut Recorder, max: u64) -> Result<bool, CollectError> {
    let limit = max / 8 * 7;
    Ok(rec.size_estimate() >= limit && rec.encoded_size()? >= limit)
}

#[cfg(test)]
mod tests {
    use super::RecordingWindow;

    #[test]
    fn a_window_keeps_its_edges_and_leaves_out_what_lies_past_them() {
        let w = RecordingWindow {
            start: Some(100),
            end: Some(200),
        };
        assert!(w.excludes(99));
        assert!(!w.excludes(100));
        assert!(!w.excludes(200));
        assert!(w.excludes(201));
        // Not opened by asys (profile): nothing is left out.
        assert!(!RecordingWindow::default().excludes(0));
        // Open, not closed yet: only what came before the start.
        let open = RecordingWindow {
            start: Some(100),
            end: None,
        };
        assert!(open.excludes(50) && !open.excludes(u64::MAX));
    }
}
