//! The recording driver: one recording, start to finish, for `profile`,
//! `attach` and system-wide runs (`record`), and the steps a session's
//! daemon drives itself (`start`'s [`Recording`], `report`'s writers):
//! load and arm the probes, reach the targets, collect until told to stop,
//! detach, then run the symbolize stage and pack the report.
pub mod activation;
mod announce;
mod capture;
mod detach;
pub mod flight_registration;
mod injection;
mod reach;
pub mod salvage;
pub mod series;
mod start;
#[cfg(test)]
mod tests;
pub mod writing;

use std::path::PathBuf;

use asys_report::{
    report::{ReportError, metadata::Metadata},
    trace_items::TraceItem,
};

use crate::{
    clock::{monotonic_ns, realtime_ns},
    collect as collector,
    settings::RecordSettings,
    spawn::{self, Suspended},
};
pub(crate) use announce::{probe_summary, probed_since};
use capture::Capture;
pub(crate) use reach::start_launched;
pub(crate) use start::{Arming, Recording};

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

/// Records `target`: loads and arms the probes, reaches the target,
/// collects (writing each report of a series on the way), ends or leaves
/// the application, detaches, and writes the last report.
pub async fn record(mut settings: RecordSettings, target: Target) -> Result<Outcome, RecordError> {
    // Attach and system-wide open the window themselves, once every probe
    // is in place (see `open_window`).
    let opens_window = reach::opens_window(&settings, &target);
    // Processes that ran before asys: what they did before is not seen.
    let reached_late = matches!(target, Target::Attach { .. } | Target::SystemWide);
    let capture_hgtx = settings.capture_hgtx.clone();
    let arming = match settings.capture {
        Some(end) => Arming::AtCapture(capture_hgtx.as_ref(), end),
        None if settings.delay.is_none() && !opens_window => Arming::Now,
        None => Arming::Later,
    };
    let Recording {
        mut tracer,
        mut collector,
    } = match Recording::<std::convert::Infallible>::start(&mut settings, arming) {
        Ok(r) => r,
        Err(e) => {
            reach::abandon(target);
            return Err(e);
        }
    };
    announce::warn_of_unfinished(&settings.output);
    // The guard follows the live recorder's directory, so an error at any
    // point (also mid-repeat) leaves no table directory behind.
    let (mut rec, rec_guard) = writing::recorder_for(&settings.output)?;
    if let Some(f) = &settings.flight {
        rec.fly(f.window, f.triggers.clone());
        collector.listen_for_sigusr1()?;
    }
    let (mut start_realtime, mut start_monotonic) = (realtime_ns(), monotonic_ns());
    // The metrics' first sample, before the application runs: it used to
    // come while the loader hook held the application at its start, which
    // no longer stops it where nothing is probed (`-t none`).
    if settings.delay.is_none() && settings.capture.is_none() {
        collector.sample_metrics_now(&mut rec)?;
    }
    let mut reached = reach::reach_targets(
        target,
        &settings,
        &mut tracer,
        &mut collector.state,
        &mut rec,
    )?;
    if opens_window {
        (start_realtime, start_monotonic) = match &settings.activation {
            Some(a) => activation::open_at(&mut tracer, a).await?,
            None => reach::open_window(&mut tracer).await?,
        };
        collector.state.window.start = Some(start_monotonic as u64);
        // The window ends exactly --duration after it opened (an aligned
        // one after its instant), however late a collector that fell
        // behind gets to its deadline: under a loaded emulator a `-d 5`
        // window came out 36 s long. A rotation's --duration is each
        // report's, and a capture range ends its own.
        if let Some(d) = settings.duration
            && settings.rotation.is_none()
            && settings.capture.is_none()
        {
            collector.state.window.end = Some(start_monotonic as u64 + d.as_nanos() as u64);
        }
    }
    if settings.items.contains(&TraceItem::Nvtx) && reached_late {
        reach::read_registered_names(&mut collector.state, &reached);
    }
    let injections = injection::inject_into_targets(&settings, &reached, &mut tracer, &mut rec);
    announce::announce_targets(&settings, &reached);
    let probed_at_start = announce::announce_probed(&tracer, reached_late);

    let mut capture = Capture::begin(
        &settings,
        reached.root_pids.clone(),
        (rec, rec_guard),
        (start_realtime, start_monotonic),
    )?;
    if opens_window && settings.activation.is_none() {
        capture.duration_from = Some(start_monotonic);
    }
    let (mut capture, stop) = capture
        .collect(&mut tracer, &mut collector, &mut reached.app_exit)
        .await?;
    // Before the window closes: the last records come while it is open.
    injection::quiesce(injections);
    if opens_window && capture.disk_full.is_none() {
        // Closed here, then read to its end, before anything is detached.
        collector.settle(&mut tracer, &mut capture.rec).await?;
    }
    let exit_code = capture
        .end_application(stop, &mut tracer, &mut collector, reached.app_exit.as_mut())
        .await?;
    let (snapshot, detached) = detach::start_detaching(tracer)?;
    let (report, metadata) =
        capture.finish(&mut collector.state, &snapshot, detached, exit_code)?;
    Ok(Outcome {
        report,
        exit_code,
        metadata,
        probed_at_start,
    })
}
