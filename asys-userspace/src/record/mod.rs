//! One recording, start to finish, shared by `profile` and `attach`: load the
//! probes, reach the targets, collect until told to stop, detach, then run the
//! symbolize stage and pack the report.
pub mod recorder;
pub mod table_writer;
#[cfg(test)]
mod tests;

use recorder::Recorder;
use std::{path::PathBuf, time::Duration};

use crate::{
    clock::{monotonic_ns, realtime_ns},
    collect::{self as collector, Collector, Stop},
    kernel::Tracer,
    launch::{self, Suspended},
    report::{
        ReportError, container,
        metadata::{self, Metadata},
        schema,
    },
    settings::{ApiProbes, Backtrace, CaptureEnd, Kill, RecordSettings, Sampling, Unwind, Wait},
    symbolize,
};

impl Sampling {
    pub fn start(&mut self, tracer: &mut Tracer) -> Result<(), crate::kernel::TracerError> {
        match tracer.record_samples(self.scope.kernel(), self.period_ns, self.unwind.is_some()) {
            Err(e) if !self.explicit => {
                eprintln!(
                    "asys: warning: CPU sampling is not available here ({e}); recording without it"
                );
                self.scope = crate::settings::Scope::None;
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
    Launch(#[from] launch::LaunchError),
    #[error("process {0} exited before asys could attach to it")]
    Gone(u32),
    #[error("removing the probes: {0}")]
    Detach(String),
}

/// Removes the temporary table folder however recording ends.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Loads the probes `settings` ask for.
pub(crate) fn load_tracer(settings: &RecordSettings) -> Result<Tracer, crate::kernel::TracerError> {
    Tracer::load(
        &settings.items,
        settings.event_buffer_bytes,
        settings.osrt_threshold_ns,
        settings.api_probes == ApiProbes::Site,
        settings.backtrace_threshold_ns,
        settings.hggc_set,
    )
}

pub async fn record(mut settings: RecordSettings, target: Target) -> Result<Outcome, RecordError> {
    let mut tracer = match load_tracer(&settings) {
        Ok(t) => t,
        Err(e) => {
            if let Target::Launch { child, .. } = target {
                child.abandon();
            }
            return Err(e.into());
        }
    };
    // Record from the first call unless collection starts after --delay or
    // waits for a capture range.
    let armed = tracer
        .set_recording(settings.delay.is_none() && settings.capture.is_none())
        .and_then(|_| match settings.capture {
            Some(end) => tracer.arm_capture(settings.capture_hgtx.as_ref(), end),
            None => Ok(()),
        });
    let armed = armed
        .and_then(|_| tracer.record_sched(settings.sched.kernel()))
        .and_then(|_| settings.sampling.start(&mut tracer));
    if let Err(e) = armed {
        if let Target::Launch { child, .. } = target {
            child.abandon();
        }
        return Err(e.into());
    }
    let tmp = table_dir(&settings.output);
    // The guard follows the live recorder's directory, so an error at any
    // point (also mid-repeat) leaves no table directory behind.
    let (mut rec, mut _rec_guard) = fresh_recorder(tmp.clone())?;
    // No session here: nothing but the application, time and signals ends it.
    let mut collector: Collector<std::convert::Infallible> = Collector::new(tracer.take_events()?)?;
    let start_realtime = realtime_ns();
    let start_monotonic = monotonic_ns();

    let (root_pids, mut app_exit) = match target {
        Target::Launch { child, program } => {
            let (pid, rx) = start_launched(&mut tracer, child, &program)?;
            collector.state.tree.started(pid);
            (vec![pid], Some(rx))
        }
        Target::Attach { pids } => {
            for &pid in &pids {
                tracer.trace(pid, true)?;
                collector::scan(pid, start_monotonic as u64, &mut tracer, &mut rec)?;
                if !crate::procfs::process_exists(pid) {
                    return Err(RecordError::Gone(pid));
                }
                collector.state.tree.saw(pid);
            }
            (pids, None)
        }
        Target::SystemWide => {
            tracer.trace_system_wide()?;
            // Probe the runtimes every running process has mapped; later
            // loads come through the loader hook.
            for pid in crate::procfs::all_pids() {
                if pid != std::process::id() {
                    collector::scan(pid, start_monotonic as u64, &mut tracer, &mut rec)?;
                }
            }
            (Vec::new(), None)
        }
    };
    if root_pids.is_empty() {
        eprintln!(
            "asys: tracing {} system-wide",
            settings
                .items
                .iter()
                .map(|i| i.name())
                .collect::<Vec<_>>()
                .join(",")
        );
    } else {
        eprintln!(
            "asys: tracing {} (pid {})",
            settings
                .items
                .iter()
                .map(|i| i.name())
                .collect::<Vec<_>>()
                .join(","),
            root_pids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    }

    let mut period = Period {
        start_realtime,
        start_monotonic,
        named: Period::named(&settings),
    };
    // Repeat mode writes a report per capture range and goes on.
    let mut written: Vec<(PathBuf, Metadata)> = Vec::new();
    // Number of the last report written (reports are NAME.1, NAME.2, ...).
    let mut next_index: u32 = 0;
    let stop = loop {
        let stop = collector
            .run(
                &mut tracer,
                &mut rec,
                app_exit.as_mut(),
                collector::Limits {
                    // Only the first period waits for --delay.
                    delay: settings.delay.filter(|_| next_index == 0),
                    duration: settings.duration,
                    stop_at_capture_end: settings.capture.is_some_and(CaptureEnd::stops),
                    wait_all: settings.wait == Wait::All,
                    max_bytes: settings.max_bytes,
                },
            )
            .await?;
        // merge:N goes on in the same report until the Nth range closed.
        if let Some(end @ CaptureEnd::Merge { .. }) = settings.capture
            && stop == Stop::CaptureEnded
            && end.wants_more(collector.state.capture_ranges)
        {
            continue;
        }
        let next_report = match (settings.capture, settings.rotation) {
            (Some(end @ CaptureEnd::Repeat { .. }), _) => {
                stop == Stop::CaptureEnded && end.wants_more(collector.state.capture_ranges)
            }
            // --trace-rotation: every --duration a new report.
            (None, Some(_)) => stop == Stop::Duration,
            _ => false,
        };
        if !next_report {
            break stop;
        }
        // This range's report; the next range gets a fresh recorder with the
        // processes' mappings scanned again for its symbolize stage.
        next_index += 1;
        let path = period.path(&settings.output, next_index, &written);
        let meta = finish_report(
            rec,
            &settings,
            &tracer.snapshot(),
            &collector.state,
            (
                &root_pids,
                period.start_realtime,
                period.start_monotonic,
                None,
            ),
            &path,
        )?;
        written.push((path, meta));
        // The next report counts its own events from its own start.
        collector.state.counts.clear();
        period = Period::begin(&settings);
        // --trace-rotation N keeps the N newest reports (the last one counts).
        if let Some(keep) = settings.rotation {
            while written.len() >= keep as usize {
                let (old, _) = written.remove(0);
                let _ = std::fs::remove_file(&old);
            }
        }
        (rec, _rec_guard) = fresh_recorder(tmp.with_extension(format!("r{next_index}")))?;
        collector.rescan(&root_pids, &mut tracer, &mut rec)?;
    };

    let exit_code = match (stop, app_exit.as_mut()) {
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
            let pid = root_pids[0] as i32;
            // A process stopped at a library load would hold the signal.
            tracer.release_loader();
            // SAFETY: kill has no memory effects; pid is the application we launched.
            unsafe { libc::kill(pid, sig) };
            let code = match tokio::time::timeout(Duration::from_secs(5), &mut *rx).await {
                Ok(code) => code.unwrap_or(-1),
                Err(_) => {
                    // SAFETY: as above; it is not reaped until rx resolves.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    rx.await.unwrap_or(-1)
                }
            };
            // The application's last calls, unless collection ended with a
            // capture range: what follows the range is not in the report.
            if stop != Stop::CaptureEnded {
                collector.drain_now(&mut tracer, &mut rec)?;
            }
            Some(code)
        }
        (_, None) => None,
    };
    // Untrace before the slow stages so attached processes are no longer
    // recorded; removing the probes waits for the kernel (a grace period
    // per link), so it runs beside the symbolize and pack stages instead
    // of before them, and asys exits once both are done.
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
    // In repeat mode each closed range is already written; the recorder after
    // the last one holds a range only if one opened (and the app ended in it).
    // With rotation the last period always gets its report.
    let repeat = matches!(settings.capture, Some(CaptureEnd::Repeat { .. }));
    let open_range = collector.state.capture_ranges as usize > written.len();
    let (report, meta) = if repeat && !open_range && !written.is_empty() {
        drop(rec);
        written.pop().expect("not empty")
    } else {
        let report =
            if (repeat && collector.state.capture_ranges > 0) || settings.rotation.is_some() {
                period.path(&settings.output, next_index + 1, &written)
            } else {
                settings.output.clone()
            };
        let meta = finish_report(
            rec,
            &settings,
            &snapshot,
            &collector.state,
            (
                &root_pids,
                period.start_realtime,
                period.start_monotonic,
                exit_code,
            ),
            &report,
        )?;
        (report, meta)
    };
    // Every probe is gone before asys says it is done.
    detached.wait()?;
    for (path, _) in &written {
        eprintln!(
            "Generated:\n    {}",
            crate::output::absolute(path).display()
        );
    }
    Ok(Outcome {
        report,
        exit_code,
        metadata: meta,
    })
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
    let interp = crate::symbolize::elf::interpreter(program)
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
        let _ = tx.send(launch::wait(pid));
    });
    Ok((pid, rx))
}

/// A recorder writing into `dir` (cleared first), and the guard that removes
/// the folder however recording ends.
pub(crate) fn fresh_recorder(dir: PathBuf) -> Result<(Recorder, TempDir), ReportError> {
    let _ = std::fs::remove_dir_all(&dir);
    let rec = Recorder::create(dir.clone())?;
    Ok((rec, TempDir(dir)))
}

/// Where the tables of the report `output` are written before it is packed:
/// beside it, so packing never crosses file systems.
pub(crate) fn table_dir(output: &std::path::Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!(".{name}.tables-{}", std::process::id()))
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
        crate::output::expand(template, *pid).ok()
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
    output.with_file_name(format!("{stem}.{i}.{}", crate::report::EXTENSION))
}

/// Runs the symbolize stage over a finished recording and packs the report.
pub(crate) fn finish_report(
    rec: Recorder,
    settings: &RecordSettings,
    tracer: &crate::kernel::Snapshot,
    state: &collector::State,
    (root_pids, start_realtime, start_monotonic, exit_code): (&[u32], i64, i64, Option<i32>),
    report: &std::path::Path,
) -> Result<Metadata, RecordError> {
    let end_monotonic = monotonic_ns();
    let mut recorded = rec.finish()?;
    let symbols = symbolize::run(&recorded.dir, &recorded.kernels, &mut recorded.strings)?;
    recorded.add_symbols(symbols)?;
    let stacks = symbolize::unwind_stacks(
        &recorded.dir,
        schema::STACKS_RAW,
        (Unwind::Dwarf, false),
        &mut recorded.strings,
        settings.backtrace_depth,
    )?;
    recorded.add_api_stacks(stacks)?;
    if recorded.tables.contains_key(schema::CPU_SAMPLES) {
        let s = settings.sampling;
        // With -b none the stacks are empty: each sample gets its function.
        let how = s.unwind.unwrap_or(Unwind::Dwarf);
        let stacks = symbolize::unwind_stacks(
            &recorded.dir,
            schema::SAMPLE_STACKS_RAW,
            (how, true),
            &mut recorded.strings,
            s.depth,
        )?;
        recorded.add_sample_stacks(stacks)?;
    }
    recorded.write_strings()?;

    let mut pids: Vec<u32> = state.tree.seen().collect();
    pids.extend(root_pids.iter().copied());
    pids.sort_unstable();
    pids.dedup();
    let meta = Metadata {
        format: metadata::FORMAT.into(),
        schema_version: schema::SCHEMA_VERSION,
        asys_version: env!("CARGO_PKG_VERSION").into(),
        host: crate::output::hostname(),
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
        pids,
        start_realtime_ns: start_realtime,
        start_monotonic_ns: start_monotonic,
        end_monotonic_ns: end_monotonic,
        exit_code,
        events: state.counts.to_map(),
        drops: tracer.drops.clone(),
        tables: recorded.tables.clone(),
        libraries: tracer.libraries.clone(),
        items_not_found: tracer.items_not_found.clone(),
        device_activity: tracer.device_activity,
        api_probes: settings.api_probes,
        device_clock_offsets: state.clock_offsets.clone(),
        capture_range: settings.capture.map(|_| match &settings.capture_hgtx {
            Some(r) => format!("hgtx:{}", r.template()),
            None => "hggcProfilerApi".to_string(),
        }),
        capture_ranges: state.capture_ranges,
        size_limited: state.size_limited,
        cpuctxsw: settings.sched,
        sample: settings.sampling.scope,
        sample_period_ns: settings.sampling.period_ns,
        sample_backtrace: match settings.sampling.unwind {
            Some(Unwind::Dwarf) => Backtrace::Dwarf,
            Some(Unwind::FramePointers) => Backtrace::Fp,
            None => Backtrace::None,
        },
        // Filled in by pack, which reads the members.
        members: Default::default(),
        recovered: None,
    };
    container::pack(&recorded.dir, &recorded.members, &meta, report)?;
    let _ = std::fs::remove_dir_all(&recorded.dir);
    Ok(meta)
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
