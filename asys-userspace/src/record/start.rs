//! How every recording begins, whoever drives it (`profile`, `attach`,
//! system-wide, a session's `launch`): the probes loaded and armed, context
//! switches and CPU sampling on, and the collector reading their events.
//! A change to how a recording starts is made here once.
use asys_report::recorded_settings::{ApiProbes, Scope};

use crate::{
    apis::HgtxRange,
    collect::{self as collector, Collector},
    kernel::{LoadSettings, Tracer, TracerError},
    settings::{CaptureEnd, RecordSettings, Sampling},
};

use super::RecordError;

/// When the loaded probes start recording.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arming<'a> {
    /// From the first event.
    Now,
    /// Not yet: a --delay, a window asys opens itself, or a session that
    /// was not started collecting turns recording on later.
    Later,
    /// When a capture range opens (`-c hggcProfilerApi`, or an hgtx range
    /// when one is named), until `end` says.
    AtCapture(Option<&'a HgtxRange>, CaptureEnd),
}

/// A started recording: its probes, and the collector reading their
/// events. `J` is what a session's requests look like (they end a run of
/// the collector too); a recording without a session has none.
pub(crate) struct Recording<J> {
    pub tracer: Tracer,
    pub collector: Collector<J>,
}

impl<J> Recording<J> {
    /// Loads the probes `settings` ask for and arms them as `arming` says,
    /// turns on context switches and CPU sampling (`settings.sampling` says
    /// afterwards whether sampling is on: it is turned off where this host
    /// cannot sample and it was not asked for explicitly), and starts the
    /// collector with its metrics sampler.
    pub(crate) fn start(
        settings: &mut RecordSettings,
        arming: Arming<'_>,
    ) -> Result<Self, RecordError> {
        let mut tracer = load_tracer(settings)?;
        match arming {
            Arming::Now => tracer.control.set_recording(true)?,
            Arming::Later => tracer.control.set_recording(false)?,
            Arming::AtCapture(hgtx, end) => {
                tracer.control.set_recording(false)?;
                tracer.control.arm_capture(hgtx, end)?;
            }
        }
        tracer.record_sched(
            settings.sched.kernel(),
            python_walks(settings) & asys_common::PYTHON_WALK_WAITS != 0,
        )?;
        start_sampling(&mut settings.sampling, &mut tracer)?;
        if std::env::var_os(VERIFIER_WORK_ENV).is_some() {
            for (name, n) in tracer.verifier_work() {
                eprintln!("asys: verifier: {name}: {n} instructions processed");
            }
        }
        let mut collector = Collector::new(tracer.take_events()?)?;
        collector.metrics = collector::metrics::Sampler::new(&settings.metrics);
        if settings.sched != Scope::None || settings.sampling.scope != Scope::None {
            collector.state.preload_kernel_names();
        }
        Ok(Self { tracer, collector })
    }
}

/// Set, a recording prints how much verifier work each loaded program took
/// (docs/kernels.md: what brings a program near an older kernel's limit).
const VERIFIER_WORK_ENV: &str = "ASYS_VERIFIER_WORK";

/// Loads the probes `settings` ask for.
fn load_tracer(settings: &RecordSettings) -> Result<Tracer, TracerError> {
    let mut tracer = Tracer::load(&LoadSettings {
        items: settings.items.clone(),
        event_buffer_bytes: settings.event_buffer_bytes,
        osrt_threshold_ns: settings.osrt_threshold_ns,
        api_via_sites: settings.api_probes == ApiProbes::Site,
        backtrace_threshold_ns: settings.backtrace_threshold_ns,
        hggc_set: settings.hggc_set,
        probes: settings.probes.clone(),
        probe_backtrace: settings.probe_backtrace,
        python_walks: python_walks(settings),
    })?;
    tracer.filter_callers(!settings.trace_vendor_internal)?;
    Ok(tracer)
}

/// The Python stack walks the programs need: at samples with
/// `--python-sampling` and sampling on, and at waits with `--cpuctxsw` too.
fn python_walks(settings: &RecordSettings) -> u32 {
    let sampling = &settings.sampling;
    if sampling.python_hz.is_none() || sampling.scope == Scope::None {
        return 0;
    }
    asys_common::PYTHON_WALK_SAMPLES
        | match settings.sched {
            Scope::None => 0,
            _ => asys_common::PYTHON_WALK_WAITS,
        }
}

/// Starts CPU sampling (and the Python stacks of the samples) as `sampling`
/// asks. Where this host cannot sample and sampling was on by default, it
/// says so and records without it (`sampling.scope` becomes None); asked
/// for explicitly, that is an error.
fn start_sampling(sampling: &mut Sampling, tracer: &mut Tracer) -> Result<(), TracerError> {
    if let Some(hz) = sampling.python_hz {
        if sampling.scope == Scope::None {
            eprintln!(
                "asys: warning: --python-sampling needs CPU sampling (-s process-tree or system-wide); no Python stacks"
            );
        } else {
            tracer.processes.read_python_stacks(hz, sampling.period_ns);
        }
    }
    let python = sampling.python_hz.is_some() && sampling.scope != Scope::None;
    match tracer.record_samples(
        sampling.scope.kernel(),
        sampling.period_ns,
        sampling.unwind.is_some(),
        python,
    ) {
        Err(e) if !sampling.explicit => {
            eprintln!(
                "asys: warning: CPU sampling is not available here ({e}); recording without it"
            );
            sampling.scope = Scope::None;
            Ok(())
        }
        r => r,
    }
}
