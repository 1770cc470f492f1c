//! One recording, start to finish, shared by `profile` and `attach`: load the
//! probes, reach the targets, collect until told to stop, detach, then run the
//! symbolize stage and pack the report.
pub mod activation;
pub mod salvage;
pub mod series;
#[cfg(test)]
mod tests;

use crate::sink::{
    disk, folder, journal,
    recorder::{self, Recorder},
};
use std::{path::PathBuf, time::Duration};

use crate::{
    clock::{monotonic_ns, realtime_ns},
    collect::{self as collector, Collector, Stop},
    kernel::Tracer,
    settings::{CaptureEnd, Kill, RecordSettings, Sampling, Wait},
    spawn::{self, Suspended},
    symbolize,
};
use asys_report::recorded_settings::{ApiProbes, Backtrace, Scope, Unwind};
use asys_report::report::{
    ReportError, container,
    metadata::{self, Metadata},
    schema,
};

impl Sampling {
    pub fn start(&mut self, tracer: &mut Tracer) -> Result<(), crate::kernel::TracerError> {
        if let Some(hz) = self.python_hz {
            if self.scope == asys_report::recorded_settings::Scope::None {
                eprintln!(
                    "asys: warning: --python-sampling needs CPU sampling (-s process-tree or system-wide); no Python stacks"
                );
            } else {
                tracer.read_python_stacks(hz, self.period_ns);
            }
        }
        match tracer.record_samples(self.scope.kernel(), self.period_ns, self.unwind.is_some()) {
            Err(e) if !self.explicit => {
                eprintln!(
                    "asys: warning: CPU sampling is not available here ({e}); recording without it"
                );
                self.scope = asys_report::recorded_settings::Scope::None;
                Ok(())
            }
            r => r,
        }
    }
}

pub enum Target {
    /// A child held before exec, and the program it will run.
    Launch {
        child: Suspended,
        program: PathBuf,
    },
    Attach {
        pids: Vec<u32>,
    },
    /// Every process on the machine, no application (`-s system-wide`).
    SystemWide,
}

pub struct Outcome {
    pub report: PathBuf,
    pub exit_code: Option<i32>,
    pub metadata: Metadata,
    /// The functions probed per library when the start-up line was printed
    /// (attach, system-wide; empty for a launch, whose libraries load
    /// after): the final line tells only what came after.
    pub probed_at_start: std::collections::BTreeMap<String, usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Tracer(#[from] crate::kernel::TracerError),
    #[error(transparent)]
    Collect(#[from] collector::CollectError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Launch(#[from] spawn::LaunchError),
    #[error("process {0} exited before asys could attach to it")]
    Gone(u32),
    #[error("removing the probes: {0}")]
    Detach(String),
    #[error(transparent)]
    Activation(#[from] activation::OpenError),
    #[error(
        "the disk is full ({error}): recording stopped; what was recorded up to {seconds:.1} s \
         after the start is in {report}"
    )]
    DiskFullRecovered {
        error: String,
        seconds: f64,
        report: PathBuf,
    },
    #[error(
        "the disk is full ({error}): recording stopped; what was recorded is kept in {dir}: \
         run `asys recover {dir}` once there is space"
    )]
    DiskFullKept { error: String, dir: PathBuf },
}

/// Removes the recording folder however recording ends, unless told to
/// keep it (a full disk: what it holds can still be recovered).
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    /// The folder is left where it is.
    pub(crate) fn keep(&mut self) {
        self.0 = PathBuf::new();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Loads the probes `settings` ask for.
pub(crate) fn load_tracer(settings: &RecordSettings) -> Result<Tracer, crate::kernel::TracerError> {
    let mut tracer = Tracer::load(&crate::kernel::LoadSettings {
        items: settings.items.clone(),
        event_buffer_bytes: settings.event_buffer_bytes,
        osrt_threshold_ns: settings.osrt_threshold_ns,
        api_via_sites: settings.api_probes == ApiProbes::Site,
        backtrace_threshold_ns: settings.backtrace_threshold_ns,
        hggc_set: settings.hggc_set,
        probes: settings.probes.clone(),
        probe_backtrace: settings.probe_backtrace,
    })?;
    tracer.filter_callers(!settings.trace_vendor_internal)?;
    Ok(tracer)
}

/// The folder a report at `output` goes to (its recording folder's file
/// system).
fn output_dir(output: &std::path::Path) -> std::path::PathBuf {
    match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// Records `target`: loads and arms the probes, reaches the target,
/// collects (writing each report of a series on the way), ends or leaves
/// the application, detaches, and writes the last report.
pub async fn record(mut settings: RecordSettings, target: Target) -> Result<Outcome, RecordError> {
    // Attach and system-wide open the window themselves, once every probe
    // is in place (see `open_window`).
    let opens_window = opens_window(&settings, &target);
    // Processes that ran before asys: what they did before is not seen.
    let reached_late = matches!(target, Target::Attach { .. } | Target::SystemWide);
    let mut tracer = match load_tracer(&settings) {
        Ok(t) => t,
        Err(e) => {
            abandon(target);
            return Err(e.into());
        }
    };
    if let Err(e) = arm(&mut tracer, &mut settings, opens_window) {
        abandon(target);
        return Err(e.into());
    }
    warn_of_unfinished(&settings.output);
    // The guard follows the live recorder's directory, so an error at any
    // point (also mid-repeat) leaves no table directory behind.
    let (mut rec, rec_guard) = recorder_for(&settings.output)?;
    let mut collector = start_collector(&settings, &mut tracer, &mut rec)?;
    let (mut start_realtime, mut start_monotonic) = (realtime_ns(), monotonic_ns());
    // The metrics' first sample, before the application runs: it used to
    // come while the loader hook held the application at its start, which
    // no longer stops it where nothing is probed (`-t none`).
    if settings.delay.is_none() && settings.capture.is_none() {
        collector.sample_metrics_now(&mut rec)?;
    }
    let mut reached = reach_targets(
        target,
        &settings,
        &mut tracer,
        &mut collector.state,
        &mut rec,
    )?;
    if opens_window {
        (start_realtime, start_monotonic) = match &settings.activation {
            Some(a) => activation::open_at(&mut tracer, a).await?,
            None => open_window(&mut tracer).await?,
        };
        collector.state.window.start = Some(start_monotonic as u64);
        // An aligned window ends exactly --duration after its instant.
        if let (Some(_), Some(d)) = (&settings.activation, settings.duration) {
            collector.state.window.end = Some(start_monotonic as u64 + d.as_nanos() as u64);
        }
    }
    if settings
        .items
        .contains(&asys_report::trace_items::TraceItem::Nvtx)
        && reached_late
    {
        read_registered_names(&mut collector.state, &reached);
    }
    announce_targets(&settings, &reached);
    let probed_at_start = announce_probed(&tracer, reached_late);

    let capture = Capture::begin(
        &settings,
        reached.root_pids.clone(),
        (rec, rec_guard),
        (start_realtime, start_monotonic),
    )?;
    let (mut capture, stop) = capture
        .collect(&mut tracer, &mut collector, &mut reached.app_exit)
        .await?;
    if opens_window && capture.disk_full.is_none() {
        // Closed here, then read to its end, before anything is detached.
        collector.settle(&mut tracer, &mut capture.rec).await?;
    }
    let exit_code = capture
        .end_application(stop, &mut tracer, &mut collector, reached.app_exit.as_mut())
        .await?;
    let (snapshot, detached) = start_detaching(tracer)?;
    let (report, metadata) =
        capture.finish(&mut collector.state, &snapshot, detached, exit_code)?;
    Ok(Outcome {
        report,
        exit_code,
        metadata,
        probed_at_start,
    })
}

/// Kills a launched child that was never started (recording gave up first).
fn abandon(target: Target) {
    if let Target::Launch { child, .. } = target {
        child.abandon();
    }
}

/// Arms the loaded probes: recording from the first call unless collection
/// starts after --delay or waits for a capture range (or the window opens
/// later), the capture range, context switches and CPU sampling (which
/// `settings` says is off where it is not available and was not asked for).
fn arm(
    tracer: &mut Tracer,
    settings: &mut RecordSettings,
    opens_window: bool,
) -> Result<(), crate::kernel::TracerError> {
    tracer
        .set_recording(settings.delay.is_none() && settings.capture.is_none() && !opens_window)?;
    if let Some(end) = settings.capture {
        tracer.arm_capture(settings.capture_hgtx.as_ref(), end)?;
    }
    tracer.record_sched(settings.sched.kernel())?;
    settings.sampling.start(tracer)
}

/// Names the recordings beside `output` that did not finish.
fn warn_of_unfinished(output: &std::path::Path) {
    for dir in folder::left_behind(output) {
        eprintln!(
            "asys: {} holds a recording that did not finish: `asys recover {}` makes a report of it",
            dir.display(),
            dir.display()
        );
    }
}

/// The collector of this recording, reading `tracer`'s events. No session
/// here: nothing but the application, time and signals ends it.
fn start_collector(
    settings: &RecordSettings,
    tracer: &mut Tracer,
    rec: &mut Recorder,
) -> Result<Collector<std::convert::Infallible>, RecordError> {
    let mut collector: Collector<std::convert::Infallible> = Collector::new(tracer.take_events()?)?;
    collector.metrics = collector::metrics::Sampler::new(&settings.metrics);
    if settings.sched != asys_report::recorded_settings::Scope::None
        || settings.sampling.scope != asys_report::recorded_settings::Scope::None
    {
        collector.state.preload_kernel_names();
    }
    if let Some(f) = &settings.flight {
        rec.fly(f.window, f.triggers.clone());
        collector.listen_for_sigusr1()?;
    }
    Ok(collector)
}

/// The processes a recording reached.
struct Reached {
    /// The processes launched or attached to (none system-wide).
    root_pids: Vec<u32>,
    /// The processes an attach reached below the given ones.
    descendants: Vec<u32>,
    /// The launched application's exit status, once it exits.
    app_exit: Option<tokio::sync::oneshot::Receiver<i32>>,
}

/// Reaches the target: the launched child, traced from its first
/// instruction; the processes attached to and what they forked before; or
/// every process system-wide. Each has its runtimes probed as it is reached.
fn reach_targets(
    target: Target,
    settings: &RecordSettings,
    tracer: &mut Tracer,
    state: &mut collector::State,
    rec: &mut Recorder,
) -> Result<Reached, RecordError> {
    let (root_pids, descendants, app_exit) = match target {
        Target::Launch { child, program } => {
            let (pid, rx) = start_launched(tracer, child, &program)?;
            state.tree.started(pid);
            (vec![pid], Vec::new(), Some(rx))
        }
        Target::Attach { pids } => {
            let descendants = attach_to(&pids, tracer, state, rec)?;
            (pids, descendants, None)
        }
        Target::SystemWide => {
            reach_system_wide(settings, tracer, rec)?;
            (Vec::new(), Vec::new(), None)
        }
    };
    Ok(Reached {
        root_pids,
        descendants,
        app_exit,
    })
}

/// Traces `pids`, then what they forked before the attach (what they fork
/// from now on, the kernel adds at the fork); returns the latter.
fn attach_to(
    pids: &[u32],
    tracer: &mut Tracer,
    state: &mut collector::State,
    rec: &mut Recorder,
) -> Result<Vec<u32>, RecordError> {
    for &pid in pids {
        tracer.trace(pid, true)?;
        collector::scan(pid, monotonic_ns() as u64, tracer, rec)?;
        if !crate::process::procfs::process_exists(pid) {
            return Err(RecordError::Gone(pid));
        }
        state.tree.saw(pid);
        state.look_at_python(pid, tracer);
    }
    let descendants = trace_descendants(tracer, pids);
    for &pid in &descendants {
        collector::scan(pid, monotonic_ns() as u64, tracer, rec)?;
        state.tree.started(pid);
        state.tree.saw(pid);
        state.look_at_python(pid, tracer);
    }
    Ok(descendants)
}

/// Traces every process (of the cgroup asked for) and probes the runtimes
/// each running one has mapped; later loads come through the loader hook.
fn reach_system_wide(
    settings: &RecordSettings,
    tracer: &mut Tracer,
    rec: &mut Recorder,
) -> Result<(), RecordError> {
    if let Some(filter) = &settings.cgroup {
        tracer.filter_cgroup(filter)?;
    }
    tracer.trace_system_wide()?;
    for pid in crate::process::procfs::all_pids() {
        if pid != std::process::id() && settings.cgroup.as_ref().is_none_or(|f| f.contains_pid(pid))
        {
            collector::scan(pid, monotonic_ns() as u64, tracer, rec)?;
        }
    }
    Ok(())
}

/// Reads the NVTX names the processes reached late registered before
/// recording was on. Called once recording is on: a registration from now
/// on is a recorded call, one before it is in the table.
fn read_registered_names(state: &mut collector::State, reached: &Reached) {
    let pids = if reached.root_pids.is_empty() {
        crate::process::procfs::all_pids()
    } else {
        reached
            .root_pids
            .iter()
            .chain(&reached.descendants)
            .copied()
            .collect()
    };
    for pid in pids {
        if let Some(r) = collector::registered_names::read(pid) {
            // Each registration's text and handle, held until the end.
            let cost = (r.strings.len() + r.domains.len()) as u64
                * (asys_common::NVTX_REGISTRY_TEXT as u64 + 16);
            if state.registration_budget.take(pid, cost) {
                state.registered.insert(pid, r);
            }
        }
    }
}

/// The start-up line: what is traced, and where.
fn announce_targets(settings: &RecordSettings, reached: &Reached) {
    if reached.root_pids.is_empty() {
        eprintln!(
            "asys: tracing {} system-wide{}",
            recorded_what(settings),
            match &settings.cgroup {
                Some(f) => match &f.container {
                    Some(id) => format!(" in container {id} (cgroup {})", f.path),
                    None => format!(" in cgroup {}", f.path),
                },
                None => String::new(),
            }
        );
    } else {
        eprintln!(
            "asys: tracing {} (pid {}{})",
            recorded_what(settings),
            reached
                .root_pids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            match reached.descendants.len() {
                0 => String::new(),
                1 => " and 1 descendant".to_string(),
                n => format!(" and {n} descendants"),
            }
        );
    }
}

/// What was probed in the processes reached so far, said on a start-up
/// line (a launched application has loaded nothing yet: its line comes at
/// the end).
fn announce_probed(
    tracer: &Tracer,
    reached_late: bool,
) -> std::collections::BTreeMap<String, usize> {
    let probed = if reached_late {
        tracer.probed_libraries()
    } else {
        Default::default()
    };
    if let Some(line) = probe_summary(&probed, false) {
        eprintln!("asys: {line}");
    }
    probed
}

/// The capture state machine's state, from collection's start to its last
/// report: the live recorder and the period it records, and the reports a
/// series (repeat, rotation, flight recorder) wrote so far.
struct Capture<'a> {
    settings: &'a RecordSettings,
    /// The processes launched or attached to: every report's roots.
    root_pids: Vec<u32>,
    rec: Recorder,
    /// Removes the live recorder's folder if recording fails.
    rec_guard: TempDir,
    period: Period,
    /// Repeat mode writes a report per capture range and goes on.
    written: Vec<(PathBuf, Metadata)>,
    /// Number of the last report written (reports are NAME.1, NAME.2, ...).
    next_index: u32,
    /// The flight recorder's reports so far; its runs share one --duration.
    flights: u32,
    /// Set when the disk filled up: collection ended there.
    disk_full: Option<String>,
}

impl<'a> Capture<'a> {
    /// The first period, beginning at `start` (realtime, monotonic); its
    /// `recording.json` is written.
    fn begin(
        settings: &'a RecordSettings,
        root_pids: Vec<u32>,
        (rec, rec_guard): (Recorder, TempDir),
        (start_realtime, start_monotonic): (i64, i64),
    ) -> Result<Self, RecordError> {
        let period = Period {
            start_realtime,
            start_monotonic,
            named: Period::named(settings),
        };
        describe(
            &rec,
            settings,
            &root_pids,
            (start_realtime, start_monotonic),
        )?;
        Ok(Self {
            settings,
            root_pids,
            rec,
            rec_guard,
            period,
            written: Vec::new(),
            next_index: 0,
            flights: 0,
            disk_full: None,
        })
    }

    /// Collects until collection ends for good, writing the reports of a
    /// series on the way; returns why it ended. By value: each new report of
    /// a series replaces the recorder (see [`Self::next_report`]).
    async fn collect(
        mut self,
        tracer: &mut Tracer,
        collector: &mut Collector<std::convert::Infallible>,
        app_exit: &mut Option<tokio::sync::oneshot::Receiver<i32>>,
    ) -> Result<(Self, Stop), RecordError> {
        let settings = self.settings;
        let collect_until = settings
            .duration
            .map(|d| tokio::time::Instant::now() + settings.delay.unwrap_or_default() + d);
        loop {
            let limits = self.limits(collect_until);
            let run = collector
                .run(tracer, &mut self.rec, app_exit.as_mut(), limits)
                .await;
            let stop = match run {
                Ok(stop) => stop,
                Err(e) if disk::failed_for_space(&e, &output_dir(&settings.output)) => {
                    // Ended as by Ctrl+C; what the last checkpoint holds is kept.
                    self.disk_full = Some(e.to_string());
                    return Ok((self, Stop::Interrupted));
                }
                Err(e) => return Err(e.into()),
            };
            if stop == Stop::Flight {
                self.write_flight_report(tracer, &collector.state)?;
                continue;
            }
            match series::after_stop(
                settings.capture,
                settings.rotation.is_some(),
                stop,
                collector.state.capture_ranges,
            ) {
                series::AfterStop::SameReport => {}
                series::AfterStop::Finish => return Ok((self, stop)),
                series::AfterStop::NextReport => self = self.next_report(tracer, collector)?,
            }
        }
    }

    /// The limits of the next run of the collector; `collect_until`: when
    /// the whole collection ends (--delay and --duration from its start).
    fn limits(&self, collect_until: Option<tokio::time::Instant>) -> collector::Limits {
        let settings = self.settings;
        collector::Limits {
            // Only the first period waits for --delay.
            delay: settings
                .delay
                .filter(|_| self.next_index == 0 && self.flights == 0),
            duration: match collect_until {
                Some(until) if self.flights > 0 => {
                    Some(until.saturating_duration_since(tokio::time::Instant::now()))
                }
                _ => settings.duration,
            },
            stop_at_capture_end: settings.capture.is_some_and(CaptureEnd::stops),
            wait_all: settings.wait == Wait::All,
            max_bytes: settings.max_bytes,
        }
    }

    /// The flight recorder's report of the window before its trigger, if it
    /// has one; recording goes on into the same recorder.
    fn write_flight_report(
        &mut self,
        tracer: &Tracer,
        state: &collector::State,
    ) -> Result<(), RecordError> {
        if let Some(trigger) = self.rec.take_flight_trigger() {
            self.flights += 1;
            let path = repeat_path(&self.settings.output, self.flights);
            let meta = flight_report(
                &mut self.rec,
                self.settings,
                (&tracer.snapshot(), state),
                (
                    &self.root_pids,
                    self.period.start_realtime,
                    self.period.start_monotonic,
                ),
                trigger,
                &path,
            )?;
            self.written.push((path, meta));
        }
        Ok(())
    }

    /// Writes this range's (or rotation period's) report and begins the
    /// next: a fresh recorder with the processes' mappings scanned again
    /// for its symbolize stage.
    fn next_report(
        mut self,
        tracer: &mut Tracer,
        collector: &mut Collector<std::convert::Infallible>,
    ) -> Result<Self, RecordError> {
        self.next_index += 1;
        let path = self
            .period
            .path(&self.settings.output, self.next_index, &self.written);
        let meta = finish_report(
            self.rec,
            self.settings,
            &tracer.snapshot(),
            &mut collector.state,
            (
                &self.root_pids,
                self.period.start_realtime,
                self.period.start_monotonic,
                None,
            ),
            &path,
        )?;
        self.written.push((path, meta));
        drop(self.rec_guard);
        // The next report counts its own events from its own start.
        collector.state.counts.clear();
        self.period = Period::begin(self.settings);
        // --trace-rotation N keeps the N newest reports (the last one counts).
        if let Some(keep) = self.settings.rotation {
            while self.written.len() >= keep as usize {
                let (old, _) = self.written.remove(0);
                let _ = std::fs::remove_file(&old);
            }
        }
        (self.rec, self.rec_guard) = recorder_for(&self.settings.output)?;
        collector.rescan(&self.root_pids, tracer, &mut self.rec)?;
        describe(
            &self.rec,
            self.settings,
            &self.root_pids,
            (self.period.start_realtime, self.period.start_monotonic),
        )?;
        Ok(self)
    }

    /// The launched application's exit status once collection ended: as it
    /// exited, or after asys ended it (None where it runs on, or was not
    /// launched).
    async fn end_application(
        &mut self,
        stop: Stop,
        tracer: &mut Tracer,
        collector: &mut Collector<std::convert::Infallible>,
        app_exit: Option<&mut tokio::sync::oneshot::Receiver<i32>>,
    ) -> Result<Option<i32>, RecordError> {
        let settings = self.settings;
        Ok(match (stop, app_exit) {
            (Stop::AppExited(code), _) => Some(code),
            (Stop::Duration, Some(_)) if settings.kill == Kill::None => {
                // --kill none: the application runs on without asys.
                None
            }
            (Stop::CaptureEnded, Some(_))
                if settings.capture.is_some_and(CaptureEnd::app_runs_on)
                    || settings.kill == Kill::None =>
            {
                None
            }
            (_, Some(rx)) => {
                // Collection ended first: end the application as nsys does
                // (--kill's signal after --duration, SIGINT on Ctrl+C), SIGKILL if it lingers.
                let sig = match (stop, settings.kill) {
                    (Stop::Duration | Stop::CaptureEnded, Kill::Signal(s)) => s,
                    _ => libc::SIGINT,
                };
                let code = series::end_application(tracer, self.root_pids[0], sig, rx).await;
                // The application's last calls, unless collection ended with a
                // capture range (what follows the range is not in the report)
                // or on a full disk.
                if stop != Stop::CaptureEnded && self.disk_full.is_none() {
                    collector.drain_now(tracer, &mut self.rec)?;
                }
                Some(code)
            }
            (_, None) => None,
        })
    }

    /// Writes what the last period holds while the probes are removed
    /// (`detached`), waits for them to be gone and names every report of the
    /// series; returns the last report. In repeat mode each closed range is
    /// already written; the recorder after the last one holds a range only
    /// if one opened (and the app ended in it). With rotation the last
    /// period always gets its report.
    fn finish(
        mut self,
        state: &mut collector::State,
        snapshot: &crate::kernel::Snapshot,
        detached: Detaching,
        exit_code: Option<i32>,
    ) -> Result<(PathBuf, Metadata), RecordError> {
        if let Some(error) = self.disk_full.take() {
            let numbered = matches!(self.settings.capture, Some(CaptureEnd::Repeat { .. }))
                || self.settings.rotation.is_some();
            let report = self.last_path(numbered);
            let e = keep_on_full_disk(self.rec, self.rec_guard, error, &report);
            detached.wait()?;
            return Err(e);
        }
        if self.settings.flight.is_some() {
            return self.last_flight_report(state, snapshot, detached);
        }
        self.last_report(state, snapshot, detached, exit_code)
    }

    /// Where the last period's report goes: the next of the series when
    /// `numbered`, else the output asked for.
    fn last_path(&self, numbered: bool) -> PathBuf {
        if numbered {
            self.period
                .path(&self.settings.output, self.next_index + 1, &self.written)
        } else {
            self.settings.output.clone()
        }
    }

    /// The flight recorder's last window, up to the end of the run.
    fn last_flight_report(
        mut self,
        state: &collector::State,
        snapshot: &crate::kernel::Snapshot,
        detached: Detaching,
    ) -> Result<(PathBuf, Metadata), RecordError> {
        let path = repeat_path(&self.settings.output, self.flights + 1);
        let end = state.window.end.map_or_else(monotonic_ns, |e| e as i64);
        let meta = flight_report(
            &mut self.rec,
            self.settings,
            (snapshot, state),
            (
                &self.root_pids,
                self.period.start_realtime,
                self.period.start_monotonic,
            ),
            (end, "end of the run".into()),
            &path,
        )?;
        drop(self.rec);
        drop(self.rec_guard);
        detached.wait()?;
        announce_generated(&self.written);
        Ok((path, meta))
    }

    /// The last report: the last range's, already written (repeat), or the
    /// recorder's; a full disk while packing it keeps the recording.
    fn last_report(
        mut self,
        state: &mut collector::State,
        snapshot: &crate::kernel::Snapshot,
        detached: Detaching,
        exit_code: Option<i32>,
    ) -> Result<(PathBuf, Metadata), RecordError> {
        let repeat = matches!(self.settings.capture, Some(CaptureEnd::Repeat { .. }));
        let open_range = state.capture_ranges as usize > self.written.len();
        let (report, meta) = if repeat && !open_range && !self.written.is_empty() {
            drop(self.rec);
            drop(self.rec_guard);
            self.written.pop().expect("not empty")
        } else {
            let report = self.last_path(
                (repeat && state.capture_ranges > 0) || self.settings.rotation.is_some(),
            );
            let dir = self.rec.dir().to_path_buf();
            let meta = match finish_report(
                self.rec,
                self.settings,
                snapshot,
                state,
                (
                    &self.root_pids,
                    self.period.start_realtime,
                    self.period.start_monotonic,
                    exit_code,
                ),
                &report,
            ) {
                Ok(meta) => meta,
                Err(e) if disk::failed_for_space(&e, &dir) => {
                    self.rec_guard.keep();
                    let e = recover_on_full_disk(&dir, e.to_string(), &report);
                    detached.wait()?;
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            drop(self.rec_guard);
            (report, meta)
        };
        // Every probe is gone before asys says it is done.
        detached.wait()?;
        announce_generated(&self.written);
        Ok((report, meta))
    }
}

/// Untraces every process and starts removing the probes; returns the
/// tracer's last facts. Untraced before the slow stages so attached
/// processes are no longer recorded; removing the probes waits for the
/// kernel (a grace period per link), so it runs beside the symbolize and
/// pack stages instead of before them, and asys exits once both are done.
fn start_detaching(
    mut tracer: Tracer,
) -> Result<(crate::kernel::Snapshot, Detaching), RecordError> {
    for pid in tracer.traced_pids() {
        tracer.untrace(pid);
    }
    let snapshot = tracer.snapshot();
    // Nothing is left stopped at a library load, whatever happens next.
    tracer.release_loader();
    let detached = Detaching(Some(
        std::thread::Builder::new()
            .name("asys-detach".into())
            .spawn(move || tracer.detach())
            .map_err(|e| RecordError::Detach(e.to_string()))?,
    ));
    Ok((snapshot, detached))
}

/// The reports a series wrote before its last.
fn announce_generated(written: &[(PathBuf, Metadata)]) {
    for (path, _) in written {
        eprintln!(
            "Generated:\n    {}",
            crate::sink::report_path::absolute(path).display()
        );
    }
}

/// What the start-up line says is recorded: the trace items, or with `-t
/// none` what else is ("nothing" when nothing is).
fn recorded_what(settings: &RecordSettings) -> String {
    if !settings.items.is_empty() {
        return settings
            .items
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
            .join(",");
    }
    let metrics = &settings.metrics;
    let others: Vec<&str> = [
        (settings.sampling.scope != Scope::None, "CPU samples"),
        (
            settings.sampling.scope != Scope::None && settings.sampling.python_hz.is_some(),
            "Python stacks",
        ),
        (settings.sched != Scope::None, "context switches"),
        (metrics.host_memory_hz.is_some(), "host memory"),
        (metrics.nic, "NIC counters"),
        (
            !matches!(metrics.ppu, crate::settings::PpuDevices::None),
            "PPU metrics",
        ),
    ]
    .into_iter()
    .filter_map(|(on, what)| on.then_some(what))
    .collect();
    if others.is_empty() {
        "nothing".to_string()
    } else {
        format!("no API calls; recording {}", others.join(", "))
    }
}

/// "probed 1,717 functions: libcublas.so.13 1,405, libcudart.so.13 312":
/// the functions probed in all, then per library (by file name, most
/// first); None when there are none. `later`: these came after the start-up
/// line ("probed 5 more functions, in libraries loaded later: ...").
pub fn probe_summary(
    libraries: &std::collections::BTreeMap<String, usize>,
    later: bool,
) -> Option<String> {
    let mut by_name: std::collections::BTreeMap<String, usize> = Default::default();
    for (path, &n) in libraries.iter().filter(|(_, n)| **n > 0) {
        let name = std::path::Path::new(path)
            .file_name()
            .map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
        *by_name.entry(name).or_default() += n;
    }
    let total: usize = by_name.values().sum();
    if total == 0 {
        return None;
    }
    let mut each: Vec<(String, usize)> = by_name.into_iter().collect();
    each.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let each: Vec<String> = each
        .iter()
        .map(|(name, n)| {
            format!(
                "{} {}",
                asys_report::text_safety::visible(name),
                grouped_thousands(*n)
            )
        })
        .collect();
    Some(format!(
        "probed {}{} function{}{}: {}",
        grouped_thousands(total),
        if later { " more" } else { "" },
        if total == 1 { "" } else { "s" },
        if later {
            ", in libraries loaded later"
        } else {
            ""
        },
        each.join(", ")
    ))
}

/// The functions probed in `now` that were not yet in `before`, per library.
pub fn probed_since(
    before: &std::collections::BTreeMap<String, usize>,
    now: &std::collections::BTreeMap<String, usize>,
) -> std::collections::BTreeMap<String, usize> {
    now.iter()
        .filter_map(|(lib, &n)| {
            let had = before.get(lib).copied().unwrap_or(0);
            (n > had).then(|| (lib.clone(), n - had))
        })
        .collect()
}

/// `n` with a comma every three digits (1,717).
fn grouped_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whether asys opens and closes the recorded window itself: attaching to
/// running processes and system-wide, the window is what asys chooses (not
/// the application's life, a --delay or a capture range), so its metadata
/// must say exactly when recording was on; and an aligned start (`-y
/// @TIME`, `/PERIOD`), whose window must be the same on every host.
fn opens_window(settings: &RecordSettings, target: &Target) -> bool {
    settings.activation.is_some()
        || matches!(target, Target::Attach { .. } | Target::SystemWide)
            && settings.delay.is_none()
            && settings.capture.is_none()
}

/// Traces what `roots` forked before the attach, and what those forked, and
/// so on; returns them (roots and the threads of each are not in it). Each
/// process is in `TRACED` before its children are read: a child it forks
/// after that is added by the kernel's fork tracepoint, one forked before is
/// in the list read after, so none is missed however the tree grows
/// meanwhile. One that cannot be added (gone, `TRACED` full) is left out.
fn trace_descendants(tracer: &mut Tracer, roots: &[u32]) -> Vec<u32> {
    let mut known: std::collections::HashSet<u32> = roots.iter().copied().collect();
    let mut to_read: Vec<u32> = roots.to_vec();
    let mut found = Vec::new();
    while let Some(parent) = to_read.pop() {
        for child in crate::process::procfs::children(parent) {
            // asys itself, where it runs under what it attaches to (a shell).
            if child == std::process::id() || !known.insert(child) {
                continue;
            }
            // A zombie has no exit to come that would take its key out.
            if crate::process::procfs::is_alive(child) && tracer.trace(child, true).is_ok() {
                found.push(child);
                to_read.push(child);
            }
        }
    }
    found.sort_unstable();
    found
}

/// Turns recording on, once every probe is in place, and returns the start
/// of the window (realtime, monotonic). A probe reads the recording flag
/// before it stamps its event: the start is read a moment after the flag
/// went on, so that every event stamped from then on was recorded (events
/// stamped before it are left out by the collector's window).
async fn open_window(tracer: &mut Tracer) -> Result<(i64, i64), RecordError> {
    tracer.set_recording(true)?;
    tokio::time::sleep(Duration::from_millis(1)).await;
    Ok((realtime_ns(), monotonic_ns()))
}

/// The thread removing the probes; waited for however recording ends (an
/// error on the way out too), so asys never exits with probes half removed.
struct Detaching(Option<std::thread::JoinHandle<()>>);

impl Detaching {
    fn wait(mut self) -> Result<(), RecordError> {
        match self.0.take().map(std::thread::JoinHandle::join) {
            Some(Err(_)) => Err(RecordError::Detach("the detaching thread panicked".into())),
            _ => Ok(()),
        }
    }
}

impl Drop for Detaching {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

/// Traces the held child from its first instruction (the loader hook for its
/// interpreter, its pid in `TRACED`), lets it exec, and waits for it on a
/// thread; the receiver gets its shell-style exit status.
pub(crate) fn start_launched(
    tracer: &mut Tracer,
    child: Suspended,
    program: &std::path::Path,
) -> Result<(u32, tokio::sync::oneshot::Receiver<i32>), RecordError> {
    let interp = crate::elf::interpreter(program)
        .unwrap_or_else(|| PathBuf::from("/lib64/ld-linux-x86-64.so.2"));
    if let Err(e) = tracer
        .hook_loader(&interp)
        .and_then(|_| tracer.trace(child.pid, true))
    {
        child.abandon();
        return Err(e.into());
    }
    let pid = child.release()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(spawn::wait(pid));
    });
    Ok((pid, rx))
}

/// A recorder writing into `dir` (which must not exist), and the guard that
/// removes the folder however recording ends.
pub(crate) fn fresh_recorder(dir: PathBuf) -> Result<(Recorder, TempDir), ReportError> {
    let rec = Recorder::create(dir.clone())?;
    Ok((rec, TempDir(dir)))
}

/// A recorder for the report `output`, in a fresh folder beside it
/// ([`folder::fresh`]), so packing never crosses file systems.
pub(crate) fn recorder_for(output: &std::path::Path) -> Result<(Recorder, TempDir), ReportError> {
    let dir = folder::fresh(output)?;
    match Recorder::create_in(dir.clone()) {
        Ok(rec) => Ok((rec, TempDir(dir))),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

/// Writes the recording's `recording.json` (what `asys recover` needs).
pub(crate) fn describe(
    rec: &Recorder,
    settings: &RecordSettings,
    root_pids: &[u32],
    (start_realtime, start_monotonic): (i64, i64),
) -> Result<(), ReportError> {
    rec.describe(&journal::Recording {
        // Absolute: recover may run from another folder.
        output: crate::sink::report_path::absolute(&settings.output),
        metadata: base_metadata(settings, root_pids, start_realtime, start_monotonic),
        backtrace_depth: settings.backtrace_depth,
        sample_depth: settings.sampling.depth,
        flight: settings.flight.is_some(),
    })
}

/// The disk filled up while recording: the chunks of every complete
/// checkpoint are kept and packed into `report` right away; if even that
/// does not fit, the folder stays for `asys recover`.
fn keep_on_full_disk(
    mut rec: Recorder,
    mut guard: TempDir,
    error: String,
    report: &std::path::Path,
) -> RecordError {
    rec.note_stopped(salvage::DISK_FULL);
    let dir = rec.dir().to_path_buf();
    drop(rec);
    guard.keep();
    recover_on_full_disk(&dir, error, report)
}

fn recover_on_full_disk(
    dir: &std::path::Path,
    error: String,
    report: &std::path::Path,
) -> RecordError {
    let options = salvage::Options {
        output: Some(report.to_path_buf()),
        force: true,
        reason: Some(salvage::DISK_FULL.into()),
    };
    match salvage::recover(dir, &options) {
        Ok(r) => RecordError::DiskFullRecovered {
            error,
            seconds: r.seconds,
            report: crate::sink::report_path::absolute(&r.report),
        },
        Err(_) => RecordError::DiskFullKept {
            error,
            dir: crate::sink::report_path::absolute(dir),
        },
    }
}

/// One report of a series (repeat, rotation): when it began, and its name if
/// the template gives each its own (`%t`).
struct Period {
    start_realtime: i64,
    start_monotonic: i64,
    named: Option<PathBuf>,
}

impl Period {
    fn begin(settings: &RecordSettings) -> Self {
        Self {
            start_realtime: realtime_ns(),
            start_monotonic: monotonic_ns(),
            named: Self::named(settings),
        }
    }

    /// The template expanded now, if it has `%t`.
    fn named(settings: &RecordSettings) -> Option<PathBuf> {
        let (template, pid) = settings.name_template.as_ref()?;
        if !template.contains("%t") {
            return None;
        }
        crate::sink::report_path::expand(template, *pid).ok()
    }

    /// Report `i` of the series: its `%t` name, or `NAME.i` (also when two
    /// reports began in the same second).
    fn path(&self, output: &std::path::Path, i: u32, written: &[(PathBuf, Metadata)]) -> PathBuf {
        match &self.named {
            Some(p) if !p.exists() && !written.iter().any(|(w, _)| w == p) => p.clone(),
            Some(p) => repeat_path(p, i),
            None => repeat_path(output, i),
        }
    }
}

/// `NAME.asysrep` of range `i` in repeat mode: `NAME.i.asysrep`.
pub(crate) fn repeat_path(output: &std::path::Path, i: u32) -> PathBuf {
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!("{stem}.{i}.{}", asys_report::report::EXTENSION))
}

/// Runs the symbolize stage over a finished recording and packs the report.
pub(crate) fn finish_report(
    mut rec: Recorder,
    settings: &RecordSettings,
    tracer: &crate::kernel::Snapshot,
    state: &mut collector::State,
    (root_pids, start_realtime, start_monotonic, exit_code): (&[u32], i64, i64, Option<i32>),
    report: &std::path::Path,
) -> Result<Metadata, RecordError> {
    // The window's end when asys closed it, else now.
    let end_monotonic = state.window.end.map_or_else(monotonic_ns, |e| e as i64);
    let progress = state.progress(tracer);
    let rank = metadata::report_rank(rec.ranks(), root_pids);
    // The perf maps of processes that did not exit during the recording.
    collector::jit_symbols::record_remaining(&mut rec)?;
    // What other users' processes fed past asys's budgets.
    use asys_report::untrusted::budget::{Budget, JitSymbols, NvtxRegistrations, PythonCode};
    let over_budget = [
        (Budget::<JitSymbols>::DROPS_SOURCE, rec.jit_budget.refused()),
        (Budget::<PythonCode>::DROPS_SOURCE, state.python_refused()),
        (
            Budget::<NvtxRegistrations>::DROPS_SOURCE,
            state.registration_budget.refused(),
        ),
        (metadata::PYTHON_NAMES_CUT, state.python_names_cut()),
    ];
    let recorded = rec.finish(progress.clone())?;
    let mut meta = base_metadata(settings, root_pids, start_realtime, start_monotonic);
    meta.rank = rank;
    complete(&mut meta, progress, end_monotonic);
    meta.drops = with_undelivered(&meta.drops, meta.device_activity, state);
    meta.sched_switch_undelivered = undelivered_switches(&meta.drops, state);
    for (source, n) in over_budget {
        if n > 0 {
            *meta.drops.entry(source.to_string()).or_default() += n;
        }
    }
    for (&pid, r) in &state.registered {
        meta.nvtx_registered_strings.insert(pid, r.strings.clone());
        meta.nvtx_registered_domains.insert(pid, r.domains.clone());
    }
    let unread: u64 = state.registered.values().map(|r| r.unread).sum();
    if unread > 0 {
        meta.drops
            .insert(metadata::NVTX_REGISTRATIONS_UNREAD.to_string(), unread);
    }
    if let Some(open) = state.calls_in_flight {
        meta.drops
            .insert(metadata::CALLS_IN_FLIGHT_AT_END.to_string(), open);
    }
    meta.exit_code = exit_code;
    symbolize_and_pack(
        recorded,
        &mut meta,
        (settings.backtrace_depth, settings.sampling.depth),
        report,
    )?;
    Ok(meta)
}

/// Runs the symbolize stage over recorded tables, then packs them with
/// `meta` (its `tables` filled in here) into `report` and removes the
/// folder. `depths`: most frames per API stack and per sampled stack.
pub(crate) fn symbolize_and_pack(
    mut recorded: recorder::Recorded,
    meta: &mut Metadata,
    (backtrace_depth, sample_depth): (usize, usize),
    report: &std::path::Path,
) -> Result<(), ReportError> {
    let symbols = symbolize::run(
        &recorded.dir,
        &recorded.kernels,
        &recorded.named_kernels,
        &mut recorded.strings,
    )?;
    recorded.add_symbols(symbols)?;
    let (stacks, mut rebuilt) = symbolize::unwind_stacks(
        &recorded.dir,
        schema::STACKS_RAW,
        (Unwind::Dwarf, false),
        &mut recorded.strings,
        (backtrace_depth, None),
    )?;
    recorded.add_api_stacks(stacks)?;
    if recorded.tables.contains_key(schema::CPU_SAMPLES) {
        // With -b none the stacks are empty: each sample gets its function.
        let how = match meta.sample_backtrace {
            Backtrace::Fp => Unwind::FramePointers,
            _ => Unwind::Dwarf,
        };
        // System-wide, source lines for the traced application's tree only
        // (none without one): see unwind_stacks.
        let roots = meta.root_pids.clone();
        let lines_for = (meta.sample == Scope::SystemWide).then_some(roots.as_slice());
        let (stacks, more) = symbolize::unwind_stacks(
            &recorded.dir,
            schema::SAMPLE_STACKS_RAW,
            (how, true),
            &mut recorded.strings,
            (sample_depth, lines_for),
        )?;
        recorded.add_sample_stacks(stacks)?;
        rebuilt.extend(more);
    }
    // Each rebuilt binary is warned about once, though both kinds of stack
    // may pass through it.
    rebuilt.sort_by(|a, b| a.path.cmp(&b.path));
    rebuilt.dedup_by(|a, b| a.path == b.path);
    for r in &rebuilt {
        eprintln!("asys: warning: {}", r.warning());
    }
    meta.rebuilt_binaries = rebuilt
        .into_iter()
        .map(|r| asys_report::report::metadata::RebuiltBinary {
            path: r.path,
            recorded_build_id: r.recorded,
            build_id: r.now,
            named_from: r.debug_file.map(|d| d.display().to_string()),
        })
        .collect();
    if !meta.library_table.is_empty() {
        recorded.add_libraries(std::mem::take(&mut meta.library_table))?;
    }
    recorded.write_strings()?;
    meta.tables = recorded.tables.clone();
    disk::ensure_space_to_pack(&recorded.dir, &recorded.members)?;
    container::pack(&recorded.dir, &recorded.members, meta, report)?;
    let _ = std::fs::remove_dir_all(&recorded.dir);
    Ok(())
}

/// A flight recorder's report: the window of `settings.flight` that ends at
/// the trigger, written to `report` while recording goes on.
fn flight_report(
    rec: &mut Recorder,
    settings: &RecordSettings,
    (tracer, state): (&crate::kernel::Snapshot, &collector::State),
    (root_pids, start_realtime, start_monotonic): (&[u32], i64, i64),
    (at, why): (i64, String),
    report: &std::path::Path,
) -> Result<Metadata, RecordError> {
    let window = settings
        .flight
        .as_ref()
        .map_or(Duration::ZERO, |f| f.window);
    let window_ns = i64::try_from(window.as_nanos()).unwrap_or(i64::MAX);
    // Every chunk closed, so that the window can be read from them.
    rec.checkpoint(state.progress(tracer))?;
    let lo = at.saturating_sub(window_ns);
    let recorded = rec.window((lo, at), report)?;
    let dir = recorded.dir.clone();
    let begin = lo.max(start_monotonic);
    let mut meta = base_metadata(
        settings,
        root_pids,
        start_realtime + (begin - start_monotonic),
        begin,
    );
    complete(&mut meta, state.progress(tracer), at);
    meta.rank = metadata::report_rank(rec.ranks(), root_pids);
    meta.flight = Some(metadata::FlightWindow {
        trigger: why.clone(),
        trigger_monotonic_ns: at,
        window_ns,
    });
    let packed = symbolize_and_pack(
        recorded,
        &mut meta,
        (settings.backtrace_depth, settings.sampling.depth),
        report,
    );
    if let Err(e) = packed {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e.into());
    }
    eprintln!(
        "asys: flight recorder ({why}): {} holds the {:.1} s before it",
        report.display(),
        window.as_secs_f64()
    );
    Ok(meta)
}

/// The metadata known when recording starts (`recording.json` holds it).
pub(crate) fn base_metadata(
    settings: &RecordSettings,
    root_pids: &[u32],
    start_realtime: i64,
    start_monotonic: i64,
) -> Metadata {
    Metadata {
        format: metadata::FORMAT.into(),
        schema_version: schema::SCHEMA_VERSION,
        asys_version: env!("CARGO_PKG_VERSION").into(),
        host: crate::sink::report_path::hostname(),
        kernel: kernel_release(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        command_line: settings.command_line.clone(),
        mode: settings.mode,
        trace: settings
            .items
            .iter()
            .map(|i| i.name().to_string())
            .collect(),
        root_pids: root_pids.to_vec(),
        pids: root_pids.to_vec(),
        start_realtime_ns: start_realtime,
        start_monotonic_ns: start_monotonic,
        api_probes: settings.api_probes,
        kernel_support: crate::kernel::features::support_of_this_run(),
        activation: settings.activation.as_ref().map(|a| {
            asys_report::report::metadata::Activation {
                spec: a.spec.clone(),
                realtime_ns: start_realtime,
            }
        }),
        capture_range: settings.capture.map(|_| match &settings.capture_hgtx {
            Some(r) => format!("hgtx:{}", r.template()),
            None => "hggcProfilerApi".to_string(),
        }),
        cpuctxsw: settings.sched,
        trace_vendor_internal: settings.trace_vendor_internal,
        sample: settings.sampling.scope,
        sample_period_ns: settings.sampling.period_ns,
        sample_backtrace: match settings.sampling.unwind {
            Some(Unwind::Dwarf) => Backtrace::Dwarf,
            Some(Unwind::FramePointers) => Backtrace::Fp,
            None => Backtrace::None,
        },
        clock: Some(crate::clock::sample()),
        cgroup_filter: settings
            .cgroup
            .as_ref()
            .map(|f| metadata::CgroupFilterInfo {
                path: f.path.clone(),
                id: f.id,
                container: f.container.clone(),
            }),
        ..Default::default()
    }
}

/// Fills in what collection counted up to `end_monotonic`.
pub(crate) fn complete(meta: &mut Metadata, progress: journal::Progress, end_monotonic: i64) {
    let mut pids = progress.pids;
    pids.extend(meta.root_pids.iter().copied());
    pids.sort_unstable();
    pids.dedup();
    meta.pids = pids;
    meta.end_monotonic_ns = end_monotonic;
    meta.events = progress.events;
    meta.drops = progress.drops;
    meta.kernel_skipped = progress.kernel_skipped;
    meta.libraries = progress.libraries;
    meta.library_table = progress.library_table;
    meta.items_not_found = progress.items_not_found;
    meta.device_activity = progress.device_activity;
    meta.device_clock_offsets = progress.device_clock_offsets;
    meta.capture_ranges = progress.capture_ranges;
    meta.size_limited = progress.size_limited;
}

/// The kernel's drop counts, and with device activity recorded, the calls
/// whose device record never arrived (see
/// [`metadata::DEVICE_ACTIVITY_UNDELIVERED`]).
fn with_undelivered(
    drops: &std::collections::BTreeMap<String, u64>,
    device_activity: bool,
    state: &mut collector::State,
) -> std::collections::BTreeMap<String, u64> {
    let mut drops = drops.clone();
    let undelivered = state.device.end_report();
    if device_activity {
        let in_kernel: u64 = [
            asys_common::DropSource::ActivityRingFull,
            asys_common::DropSource::ActivityLost,
        ]
        .iter()
        .filter_map(|s| drops.get(s.name()))
        .sum();
        drops.insert(
            metadata::DEVICE_ACTIVITY_UNDELIVERED.to_string(),
            undelivered.saturating_sub(in_kernel),
        );
    }
    drops
}

/// Context switches of traced threads the kernel did not deliver: broken
/// switch sequences beyond what its own drop counts explain (a switch lost
/// to a full ring or an unreadable record breaks up to two threads'
/// sequences).
fn undelivered_switches(
    drops: &std::collections::BTreeMap<String, u64>,
    state: &mut collector::State,
) -> u64 {
    let broken = state.switches.end_report();
    let in_kernel: u64 = [
        asys_common::DropSource::SchedRingFull,
        asys_common::DropSource::SchedUnreadable,
    ]
    .iter()
    .filter_map(|s| drops.get(s.name()))
    .sum();
    broken.saturating_sub(2 * in_kernel)
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
