//! `asys profile`: launch an application under tracing.
use clap::Args;

use crate::{
    cli::privileges,
    record::{
        Target,
        activation::{self, DelaySpec},
    },
    settings::{CaptureEnd, Kill, Wait},
    sink::report_path,
    spawn,
};
use asys_report::recorded_settings::{Mode, Scope};
use asys_report::trace_items::TraceItem;

#[derive(Args, Debug)]
#[command(override_usage = "asys profile [<args>] <application> [<application args>]")]
pub struct ProfileArgs {
    #[command(flatten)]
    pub common: super::collection::CollectionArgs,

    /// Seconds between the application's start and the start of collection;
    /// or @TIME (HH:MM:SS or YYYY-MM-DDTHH:MM:SS, local) or /PERIOD (the
    /// next multiple of PERIOD since the epoch, e.g. /10s): collection
    /// starts at that wall-clock instant, the same on every host.
    #[arg(short = 'y', long = "delay", value_name = "seconds|@TIME|/PERIOD", value_parser = parse_delay)]
    pub delay: Option<DelaySpec>,

    /// Signal for the application when collection ends first (--duration):
    /// none, sigterm, sigkill, or a signal number.
    #[arg(long = "kill", default_value = "sigterm", value_name = "signal", value_parser = parse_kill)]
    pub kill: Kill,

    #[command(flatten)]
    pub capture: super::capture::CaptureArgs,

    /// When the application is done: when the launched process exits
    /// (primary), or when every process of its tree has (all: daemons too).
    #[arg(long = "wait", default_value = "all", value_enum)]
    pub wait: Wait,

    /// With --duration: a new report every duration, keeping the N newest
    /// (NAME.1.asysrep, NAME.2.asysrep, ...).
    #[arg(long = "trace-rotation", value_name = "N")]
    pub trace_rotation: Option<u32>,

    #[command(flatten)]
    pub env: super::environment::EnvArgs,

    /// System-wide mode (`-s system-wide`, no application): only the
    /// processes of this cgroup v2 and the cgroups below it, as a path in the
    /// hierarchy (`/system.slice/x.service`) or under its mount point.
    #[arg(long = "cgroup", value_name = "path", conflicts_with = "container")]
    pub cgroup: Option<String>,

    /// System-wide mode: only the processes of this container (docker,
    /// containerd, CRI-O, podman, Kubernetes), by its id or a unique prefix.
    #[arg(long = "container", value_name = "id")]
    pub container: Option<String>,

    /// Under a job launcher, trace only if asys's rank (OMPI_COMM_WORLD_RANK,
    /// SLURM_PROCID, RANK or PMI_RANK) is one of these (`0,2,4-7`); other
    /// ranks run the application untraced.
    #[arg(long = "process-rank-include", value_name = "rank[,rank-rank...]", value_parser = super::rank_include::parse)]
    pub process_rank_include: Option<super::rank_include::RankSet>,

    /// The application and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "application"
    )]
    pub command: Vec<String>,
}

pub fn run(mut args: ProfileArgs, argv: &[String]) -> anyhow::Result<u8> {
    args.common.apply_always_on()?;
    if args.common.ppu_help() {
        return Ok(0);
    }
    if let Some(set) = &args.process_rank_include {
        super::rank_include::run_untraced_if_excluded(set, &args.command)?;
    }
    // Where NOP5 sites are not optimized (before Linux 6.18, or the
    // `entry-probes` fallback forced) `--api-probes site` records with entry
    // probes: decided before the application's environment is built.
    if args.common.api_probes == asys_report::recorded_settings::ApiProbes::Site
        && !crate::kernel::features::sites_usable()?
    {
        args.common.api_probes = asys_report::recorded_settings::ApiProbes::Entry;
    }
    let items = args.common.trace_items();
    args.capture.check(&items, &args.common)?;
    let capture = args.capture.enabled();
    if let Some(n) = args.trace_rotation {
        if n == 0 {
            anyhow::bail!("--trace-rotation needs at least 1 report to keep, got 0");
        }
        if args.common.duration.is_none() {
            anyhow::bail!("--trace-rotation needs --duration (the length of each report)");
        }
        if capture {
            anyhow::bail!("--trace-rotation cannot be used with --capture-range");
        }
    }
    if args.common.max_report_size.is_some()
        && (args.trace_rotation.is_some()
            || matches!(args.capture.capture_range_end, CaptureEnd::Repeat { .. }) && capture)
    {
        anyhow::bail!(
            "--max-report-size cannot be used with --trace-rotation or --capture-range-end repeat"
        );
    }
    if args.common.flight_recorder.is_some()
        && (capture || args.trace_rotation.is_some() || args.common.max_report_size.is_some())
    {
        anyhow::bail!(
            "--flight-recorder cannot be used with --capture-range, --trace-rotation or --max-report-size"
        );
    }
    if matches!(args.delay, Some(DelaySpec::Aligned(_))) && args.trace_rotation.is_some() {
        anyhow::bail!("-y @TIME or /PERIOD cannot be used with --trace-rotation");
    }
    if capture && args.delay.is_some() {
        anyhow::bail!("--delay and --capture-range cannot be used together");
    }
    if args.common.sample_scope(Scope::ProcessTree) == Scope::SystemWide && args.command.is_empty()
    {
        return system_wide(args, items, argv);
    }
    if args.cgroup.is_some() || args.container.is_some() {
        anyhow::bail!(
            "--cgroup and --container select the processes of system-wide mode: \
             `asys profile -s system-wide` with no application"
        );
    }
    let Some(app) = args.command.first() else {
        anyhow::bail!(
            "no application given (usage: asys profile [<args>] <application> [<application args>])"
        );
    };
    super::not_an_option(app, "profile")?;
    let program = spawn::resolve(app, std::env::var_os("PATH").as_deref())?;
    privileges::check()?;
    // Check the destination before starting anything; %p is known only later.
    let early = report_path::expand(&args.common.out.output, Some(0))?;
    report_path::check_destination(
        &early,
        args.common.out.force_overwrite || args.common.out.output.contains("%p"),
    )?;

    let env = args.env.build(&items, &args.common)?;
    let child = spawn::spawn_suspended(&program, &args.command, &env, args.env.stdio())?;
    let out = match report_path::expand(&args.common.out.output, Some(child.pid)).and_then(|p| {
        report_path::check_destination(&p, args.common.out.force_overwrite).map(|_| p)
    }) {
        Ok(p) => p,
        Err(e) => {
            child.abandon();
            return Err(e.into());
        }
    };
    // `sessions list` shows it as profile-<pid>-<application>.
    let app_name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let session = format!("profile-{}-{app_name}", child.pid);
    // Its socket file goes when the profile ends.
    let _announced = crate::session::check_name(&session)
        .ok()
        .and_then(|()| crate::session::server::announce_profile(&session, child.pid));
    let mut settings = args.common.settings(items, out, Mode::Profile, argv);
    settings.sched = sched_default(&args);
    apply_delay(&args, &mut settings);
    settings.kill = args.kill;
    args.capture.apply(&mut settings);
    settings.wait = args.wait;
    settings.rotation = args.trace_rotation;
    settings.name_template = Some((args.common.out.output.clone(), Some(child.pid)));
    let outcome = args
        .common
        .record(settings, Target::Launch { child, program })?;
    let code = outcome.exit_code.unwrap_or(0);
    Ok(code.clamp(0, 255) as u8)
}

/// `-s system-wide` with no application: every process that uses a traced
/// runtime, until --duration or Ctrl+C.
fn system_wide(args: ProfileArgs, items: Vec<TraceItem>, argv: &[String]) -> anyhow::Result<u8> {
    if args.capture.enabled() {
        anyhow::bail!("-c cannot be used with -s system-wide in this version");
    }
    privileges::check()?;
    let out = report_path::expand(&args.common.out.output, None)?;
    report_path::check_destination(&out, args.common.out.force_overwrite)?;
    let cgroup = match (&args.cgroup, &args.container) {
        (Some(path), _) => Some(crate::process::cgroup::CgroupFilter::for_path(path)?),
        (None, Some(id)) => Some(crate::process::cgroup::CgroupFilter::for_container(id)?),
        (None, None) => None,
    };
    let mut settings = args.common.settings(items, out, Mode::SystemWide, argv);
    settings.sched = sched_default(&args);
    settings.cgroup = cgroup;
    apply_delay(&args, &mut settings);
    args.common.record(settings, Target::SystemWide)?;
    Ok(0)
}

/// `--cpuctxsw`, or what `-s` implies: context switches of the process tree,
/// of the whole machine with `-s system-wide`, none with `-s none`.
fn sched_default(args: &ProfileArgs) -> Scope {
    let common = &args.common;
    common
        .cpuctxsw
        .unwrap_or(common.sample_scope(Scope::ProcessTree))
}

/// `-y`: seconds, `@TIME` or `/PERIOD` (resolved now, when asys starts:
/// every host started within the same period gets the same instant).
fn parse_delay(s: &str) -> Result<DelaySpec, String> {
    activation::parse(s, crate::clock::realtime_ns()).map_err(|e| e.to_string())
}

/// `-y` into the settings: a delay after the start, or an aligned start.
fn apply_delay(args: &ProfileArgs, settings: &mut crate::settings::RecordSettings) {
    match &args.delay {
        Some(DelaySpec::After(d)) => settings.delay = Some(*d),
        Some(DelaySpec::Aligned(a)) => settings.activation = Some(a.clone()),
        None => {}
    }
}

/// `--kill`: none, sigterm, sigkill or a signal number.
pub fn parse_kill(s: &str) -> Result<Kill, String> {
    Ok(match s {
        "none" => Kill::None,
        "sigterm" => Kill::Signal(libc::SIGTERM),
        "sigkill" => Kill::Signal(libc::SIGKILL),
        n => match n.parse::<i32>() {
            Ok(sig) if (1..=64).contains(&sig) => Kill::Signal(sig),
            _ => {
                return Err(format!(
                    "expected none, sigterm, sigkill or a signal number, got '{s}'"
                ));
            }
        },
    })
}
