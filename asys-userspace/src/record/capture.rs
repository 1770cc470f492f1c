//! The capture state machine: from collection's start to its last report,
//! the live recorder and the period it records, and the reports a series
//! (repeat, rotation, flight recorder) wrote on the way.
use std::path::PathBuf;

use asys_report::report::metadata::Metadata;

use crate::{
    clock::{monotonic_ns, realtime_ns},
    collect::{self as collector, Collector, Stop},
    kernel::{Snapshot, Tracer},
    settings::{CaptureEnd, Kill, RecordSettings, Wait},
    sink::{disk, recorder::Recorder},
};

use super::{
    RecordError, announce,
    detach::Detaching,
    series,
    writing::{
        TempDir, begin_next_report, describe, finish_report, flight_report, keep_on_full_disk,
        recover_on_full_disk, repeat_path,
    },
};

/// The capture state machine's state, from collection's start to its last
/// report: the live recorder and the period it records, and the reports a
/// series (repeat, rotation, flight recorder) wrote so far.
pub(super) struct Capture<'a> {
    pub(super) settings: &'a RecordSettings,
    /// The processes launched or attached to: every report's roots.
    pub(super) root_pids: Vec<u32>,
    pub(super) rec: Recorder,
    /// Removes the live recorder's folder if recording fails.
    pub(super) rec_guard: TempDir,
    pub(super) period: Period,
    /// Repeat mode writes a report per capture range and goes on.
    pub(super) written: Vec<(PathBuf, Metadata)>,
    /// Number of the last report written (reports are NAME.1, NAME.2, ...).
    pub(super) next_index: u32,
    /// The flight recorder's reports so far; its runs share one --duration.
    pub(super) flights: u32,
    /// The flight recorder's note for `asys dump` (removed on drop).
    registration: Option<super::flight_registration::Registration>,
    /// Set when the disk filled up: collection ended there.
    pub(super) disk_full: Option<String>,
    /// Where asys opened the window before collecting (attach,
    /// system-wide): its start (monotonic ns), from which `--duration`
    /// counts, so that the set-up between (announcing the targets,
    /// injecting, the report's folder: seconds under emulation) does not
    /// lengthen a `-d` window.
    pub(super) duration_from: Option<i64>,
}

impl<'a> Capture<'a> {
    /// The first period, beginning at `start` (realtime, monotonic); its
    /// `recording.json` is written.
    pub(super) fn begin(
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
            registration: settings.flight.as_ref().and_then(|_| {
                super::flight_registration::Registration::register(&settings.output)
                    .map_err(|e| {
                        eprintln!(
                            "asys: warning: `asys dump` cannot find this flight recorder: {e}"
                        )
                    })
                    .ok()
            }),
            disk_full: None,
            duration_from: None,
        })
    }

    /// Collects until collection ends for good, writing the reports of a
    /// series on the way; returns why it ended. By value: each new report of
    /// a series replaces the recorder (see [`Self::next_report`]).
    pub(super) async fn collect(
        mut self,
        tracer: &mut Tracer,
        collector: &mut Collector<std::convert::Infallible>,
        app_exit: &mut Option<tokio::sync::oneshot::Receiver<i32>>,
    ) -> Result<(Self, Stop), RecordError> {
        let settings = self.settings;
        let begun = match self.duration_from {
            Some(start) => {
                let since = (monotonic_ns() - start).max(0) as u64;
                let now = tokio::time::Instant::now();
                now.checked_sub(std::time::Duration::from_nanos(since))
                    .unwrap_or(now)
            }
            None => tokio::time::Instant::now() + settings.delay.unwrap_or_default(),
        };
        let collect_until = settings.duration.map(|d| begun + d);
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
                Some(until) if self.flights > 0 || self.duration_from.is_some() => {
                    Some(until.saturating_duration_since(tokio::time::Instant::now()))
                }
                _ => settings.duration,
            },
            stop_at_capture_end: settings.capture.is_some_and(CaptureEnd::stops),
            wait_all: settings.wait == Wait::All,
            max_bytes: settings.max_bytes,
            checkpoint_every: settings.checkpoint_every,
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
            if let Some(r) = &mut self.registration
                && let Err(e) = r.wrote(&path)
            {
                eprintln!(
                    "asys: warning: `asys dump` cannot be told of {}: {e}",
                    path.display()
                );
            }
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
        self.period = Period::begin(self.settings);
        // --trace-rotation N keeps the N newest reports (the last one counts).
        if let Some(keep) = self.settings.rotation {
            while self.written.len() >= keep as usize {
                let (old, _) = self.written.remove(0);
                let _ = std::fs::remove_file(&old);
            }
        }
        (self.rec, self.rec_guard) = begin_next_report(
            self.settings,
            &self.root_pids,
            (self.period.start_realtime, self.period.start_monotonic),
            tracer,
            collector,
        )?;
        Ok(self)
    }

    /// The launched application's exit status once collection ended: as it
    /// exited, or after asys ended it (None where it runs on, or was not
    /// launched).
    pub(super) async fn end_application(
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
    pub(super) fn finish(
        mut self,
        state: &mut collector::State,
        snapshot: &Snapshot,
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
        snapshot: &Snapshot,
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
        announce::announce_generated(&self.written);
        Ok((path, meta))
    }

    /// The last report: the last range's, already written (repeat), or the
    /// recorder's; a full disk while packing it keeps the recording.
    fn last_report(
        mut self,
        state: &mut collector::State,
        snapshot: &Snapshot,
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
        announce::announce_generated(&self.written);
        Ok((report, meta))
    }
}

/// One report of a series (repeat, rotation): when it began, and its name if
/// the template gives each its own (`%t`).
pub(super) struct Period {
    start_realtime: i64,
    start_monotonic: i64,
    named: Option<PathBuf>,
}

impl Period {
    pub(super) fn begin(settings: &RecordSettings) -> Self {
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

/// The folder a report at `output` goes to (its recording folder's file
/// system).
pub(super) fn output_dir(output: &std::path::Path) -> std::path::PathBuf {
    match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}
