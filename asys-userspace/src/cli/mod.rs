//! Command-line arguments (clap) and the dispatch to one module per
//! subcommand. Arguments become plain settings before the core sees them.
pub mod analyze;
pub mod attach;
pub mod cancel;
pub mod capture;
pub mod collection;
mod device_advice;
pub mod dump;
pub mod entry;
pub mod environment;
pub mod export;
pub mod generate;
pub mod launch;
pub mod privileges;
pub mod profile;
pub mod rank_include;
pub mod ranks;
pub mod recover;
pub mod selftest;
pub mod session_args;
pub mod session_daemon;
pub mod sessions;
pub mod shutdown;
pub mod start;
pub mod stats;
pub mod status;
pub mod stop;
pub mod symbolize;
pub mod symbolize_addresses;
pub mod watchdog;

use clap::{ArgAction, Parser, Subcommand};

pub const USAGE: &str =
    "asys [--version] [--help] <command> [<args>] [application] [<application args>]";

const AFTER_HELP: &str =
    "Use 'asys --help <command>' for more information about a specific command.";

#[cfg(asys_ebpf_built)]
macro_rules! ebpf_programs {
    () => {
        "eBPF programs embedded"
    };
}
#[cfg(not(asys_ebpf_built))]
macro_rules! ebpf_programs {
    () => {
        "built without its eBPF programs: cannot record"
    };
}

/// `asys --version`: the version, the commit it was built from, the C
/// library it needs at least, and whether its eBPF programs are in it.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ASYS_COMMIT"),
    "; needs ",
    env!("ASYS_BASELINE"),
    " or later; ",
    ebpf_programs!(),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "asys",
    version = VERSION,
    disable_version_flag = true,
    override_usage = USAGE,
    subcommand_help_heading = "The most commonly used asys commands are",
    after_help = AFTER_HELP,
    help_template = "usage: {usage}\n\n{before-help}The most commonly used asys commands are:\n{subcommands}\n{after-help}"
)]
pub struct Cli {
    /// Print the version of asys.
    #[arg(short = 'v', long = "version", action = ArgAction::Version)]
    version: Option<bool>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run an application and capture its profile into a asysrep file.
    Profile(profile::ProfileArgs),
    /// Attach to process and capture its profile into a asysrep file.
    Attach(attach::AttachArgs),
    /// Launch an application ready to be profiled.
    Launch(launch::LaunchArgs),
    /// Start a profiling session.
    Start(start::StartArgs),
    /// Stop a profiling session and capture its profile into a asysrep file.
    Stop(stop::StopArgs),
    /// Cancel a profiling session and discard any collected data.
    Cancel(cancel::CancelArgs),
    /// Ask the running flight recorders (--always-on, --flight-recorder)
    /// for a report of their window now; prints each report's path.
    Dump(dump::DumpArgs),
    /// Disconnect launched processes from the profiler and shutdown the profiler.
    Shutdown(shutdown::ShutdownArgs),
    /// List active sessions.
    Sessions(sessions::SessionsArgs),
    /// Provide current status of CLI or the collection environment.
    Status(status::StatusArgs),
    /// Export asysrep file into another format.
    Export(export::ExportArgs),
    /// Make a report of a recording that did not finish (asys killed, disk full).
    Recover(recover::RecoverArgs),
    /// Name the frames a report left as addresses (stripped binaries), from
    /// debug files found by build id here or through debuginfod.
    Symbolize(symbolize::SymbolizeArgs),
    /// Generate statistics from an existing asysrep or SQLite file.
    Stats(stats::StatsArgs),
    /// Identify optimization opportunities in a asysrep file.
    Analyze(analyze::AnalyzeArgs),
    /// Check that asys works on this host: trace a small workload of its
    /// own through each capability the kernel has.
    Selftest(selftest::SelftestArgs),
    /// A session's daemon (started by launch and start, not by hand).
    #[command(name = "__session-daemon", hide = true)]
    SessionDaemon { name: String },
    /// The helper that continues stopped processes if asys dies (started
    /// by asys itself with the descriptors it hands over).
    #[command(name = "__watchdog", hide = true)]
    Watchdog { socket: i32, map: i32 },
    /// Names a binary's addresses (hex, one a line on stdin) as reports name
    /// sampled frames, in addr2line's format: for comparing and timing the
    /// two (tests, `cargo xtask bench-lines`).
    #[command(name = "__symbolize-addresses", hide = true)]
    SymbolizeAddresses { binary: std::path::PathBuf },
    /// Writes the man pages and shell completions into a folder (`cargo
    /// xtask dist`).
    #[command(name = "__generate", hide = true)]
    Generate { dir: std::path::PathBuf },
    /// The workload `asys selftest` traces (started by selftest itself).
    #[command(name = "__selftest-child", hide = true)]
    SelftestChild(selftest::ChildArgs),
}

/// Rewrites `asys --help CMD` (the guide's spelling) to `asys CMD --help`.
pub fn normalize(mut args: Vec<String>) -> Vec<String> {
    if args.len() >= 3 && matches!(args[1].as_str(), "--help" | "-h") && !args[2].starts_with('-') {
        args.swap(1, 2);
    }
    args
}

/// Fails if the first word after the options, taken as the application,
/// is an option asys does not know (the application's own options come
/// after it): `asys profile --bogus 1 ./app`.
pub fn not_an_option(app: &str, command: &str) -> anyhow::Result<()> {
    if app.starts_with('-') {
        anyhow::bail!("unknown option '{app}' (see 'asys --help {command}')");
    }
    Ok(())
}

/// Parses `true|false` style values as asys and nsys spell them.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("expected true or false, got '{s}'")),
    }
}

/// Parses a duration in seconds (fractions allowed); must be positive.
pub fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("expected seconds, got '{s}'"))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(format!("duration must be positive, got '{s}'"));
    }
    std::time::Duration::try_from_secs_f64(v).map_err(|_| format!("duration '{s}' is too long"))
}

/// The event buffer size in KiB, as bytes.
pub fn parse_buffer_kib(s: &str) -> Result<u32, String> {
    let kib: u32 = s.parse().map_err(|_| format!("expected KiB, got '{s}'"))?;
    if kib < 4 || !kib.is_power_of_two() || kib > 1 << 20 {
        return Err(format!(
            "must be a power of two between 4 and 1048576 KiB, got {kib}"
        ));
    }
    Ok(kib * 1024)
}

/// Runs the parsed command; returns the process exit code.
pub fn run(cli: Cli, argv: &[String]) -> anyhow::Result<u8> {
    match cli.command {
        Command::Profile(a) => profile::run(a, argv),
        Command::Attach(a) => attach::run(a, argv),
        Command::Stats(a) => stats::run(a),
        Command::Recover(a) => recover::run(a),
        Command::Symbolize(a) => symbolize::run(a),
        Command::Launch(a) => launch::run(a, argv),
        Command::Start(a) => start::run(a),
        Command::Stop(a) => stop::run(a),
        Command::Cancel(a) => cancel::run(a),
        Command::Dump(a) => dump::run(a),
        Command::Shutdown(a) => shutdown::run(a),
        Command::Sessions(a) => sessions::run(a),
        Command::SessionDaemon { name } => session_daemon::main(&name),
        Command::Watchdog { socket, map } => watchdog::main(socket, map),
        Command::SymbolizeAddresses { binary } => symbolize_addresses::main(&binary),
        Command::Generate { dir } => generate::main(&dir),
        Command::Selftest(a) => selftest::run(a),
        Command::SelftestChild(a) => selftest::child(a),
        Command::Status(a) => status::run(a),
        Command::Export(a) => export::run(a),
        Command::Analyze(a) => analyze::run(a),
    }
}

/// Prints where the report went and what was lost, as nsys does at the end.
/// How to get NVTX: it reaches asys only through its tool library, which the
/// application loads at its first NVTX call if NVTX_INJECTION64_PATH names it.
fn nvtx_advice() -> String {
    let lib = crate::install_layout::injection_library()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "libasys_inject.so (installed with asys)".into());
    format!(
        "NVTX ranges reach asys through its NVTX tool, which an application loads only if \
         NVTX_INJECTION64_PATH names it when it starts: run it under `asys profile -t nvtx` \
         or `asys launch -t nvtx`, or start it with NVTX_INJECTION64_PATH={lib} to attach \
         to it later"
    )
}

/// "asys: probed ...": the probes placed after the start-up line (all of a
/// launch's, whose libraries load once it runs); None if none were.
fn later_probes(outcome: &crate::record::Outcome) -> Option<String> {
    let later = crate::record::probed_since(&outcome.probed_at_start, &outcome.metadata.libraries);
    let line = crate::record::probe_summary(&later, !outcome.probed_at_start.is_empty())?;
    Some(format!("asys: {line}"))
}

/// What the finish line says of debuginfod: how many binaries' frames were
/// named from debug files a server gave (nothing when none).
pub fn debuginfod_note(binaries: usize) -> String {
    match binaries {
        0 => String::new(),
        1 => "; 1 binary named through debuginfod".to_string(),
        n => format!("; {n} binaries named through debuginfod"),
    }
}

/// The warning about lost events, with advice only where it helps: a larger
/// buffer prevents only the losses of a full ring buffer (not records the
/// application never sent, nor memory a probe could not read).
fn loss_warning(m: &asys_report::report::metadata::Metadata) -> Option<String> {
    if m.total_drops() == 0 {
        return None;
    }
    let mut line = format!("asys: warning: events were lost ({})", m.drops_by_source());
    if m.ring_full_drops() > 0 {
        line.push_str("; try a larger --event-buffer-size");
    }
    let python = asys_common::DropSource::PythonFrameUnreadable.name();
    if m.drops.get(python).is_some_and(|&n| n > 0) {
        line.push_str(&format!(
            "; {python}: a Python frame lay in memory the kernel could not read at the \
             sample (not touched yet, or paged out), so that sample's Python stack ends early"
        ));
    }
    Some(line)
}

/// What the kernel did not hand asys: switches of traced threads it
/// delivered to no tracer, and runs of asys's programs it skipped. Shown
/// apart from the events asys lost.
fn kernel_note(m: &asys_report::report::metadata::Metadata) -> Option<String> {
    let mut parts = Vec::new();
    if m.sched_switch_undelivered > 0 {
        parts.push(format!(
            "did not deliver {} context switches of traced threads (found by their sequence: \
             a thread left a CPU twice without arriving between, or arrived twice)",
            m.sched_switch_undelivered
        ));
    }
    let skipped = m.skipped_runs();
    if !skipped.is_empty() {
        // Mostly wake-ups of asys's own reader, raised while one of its
        // programs ran.
        parts.push(format!(
            "skipped runs of asys's programs while another BPF program or bpf() call held the \
             CPU ({skipped}), mostly wake-ups of asys itself; an event of a traced thread among \
             them is lost"
        ));
    }
    (!parts.is_empty()).then(|| format!("asys: note: the kernel {}", parts.join("; it ")))
}

/// `items_named`: whether `-t` was given; an item the default tried is not
/// warned about when no traced process loaded it.
pub fn print_outcome(outcome: &crate::record::Outcome, items_named: bool) {
    let m = &outcome.metadata;
    let calls = m.events.get("api_calls").copied().unwrap_or(0);
    eprintln!(
        "asys: collected {calls} API calls from {} process(es); {} events lost{}",
        m.pids.len(),
        m.total_drops(),
        debuginfod_note(m.debuginfod_build_ids.len())
    );
    if let Some(line) = later_probes(outcome) {
        eprintln!("{line}");
    }
    let undelivered = m.device_activity_undelivered();
    if let Some(line) = loss_warning(m) {
        eprintln!("{line}");
    }
    if let Some(line) = kernel_note(m) {
        eprintln!("{line}");
    }
    if undelivered > 0 {
        eprintln!(
            "asys: warning: {undelivered} device record(s) never arrived: their process ended \
             before the injection library could flush them (_exit, SIGKILL, exec), or the \
             collection ended first"
        );
    }
    if m.size_limited {
        eprintln!(
            "asys: warning: recording stopped at --max-report-size; the report holds only \
             what came before"
        );
    }
    if m.texts_unreadable() > 0 {
        eprintln!(
            "asys: warning: the text of {} call(s) (range or domain names) could not be read \
             (memory the application had not touched, even after the call); those calls have no text",
            m.texts_unreadable()
        );
    }
    if m.capture_texts_unreadable() > 0 {
        eprintln!(
            "asys: warning: -c hgtx could not read {} range or domain name(s) (memory the \
             application had not touched yet); those could not start the capture range",
            m.capture_texts_unreadable()
        );
    }
    if let Some(range) = m.capture_range.as_ref().filter(|_| m.capture_ranges == 0) {
        let what = match range.strip_prefix("hgtx:") {
            Some(t) => format!("no hgtx range matched '{t}'"),
            None => "no hggcProfilerStart/cudaProfilerStart was called".to_string(),
        };
        eprintln!(
            "asys: warning: the capture range never began ({what}); the report holds no calls"
        );
    }
    for item in m.items_not_found.iter().filter(|_| items_named) {
        eprintln!(
            "asys: warning: no traced process loaded a library with {item} functions; \
             nothing was recorded for -t {item}"
        );
        if item == "nvtx" {
            eprintln!("asys: {}", nvtx_advice());
        }
    }
    let hggc_calls = m.tables.get("hggc_api").copied().unwrap_or(0);
    let hggc_found =
        m.trace.iter().any(|t| t == "hggc") && !m.items_not_found.iter().any(|t| t == "hggc");
    if m.mode == asys_report::recorded_settings::Mode::Profile && hggc_found && !m.device_activity {
        if m.api_probes == asys_report::recorded_settings::ApiProbes::Site {
            eprintln!(
                "asys: warning: the runtime did not load asys's injection library; with \
                 --api-probes site no hggc API call or device activity was recorded"
            );
        } else if hggc_calls > 0 {
            eprintln!(
                "asys: warning: the runtime did not load asys's injection library; the report \
                 has API calls but no device activity"
            );
        }
    }
    if let Some(why) = device_advice::cuda_without_device_activity(m) {
        eprintln!("asys: warning: {why}");
    }
    eprintln!(
        "Generated:\n    {}",
        crate::sink::report_path::absolute(&outcome.report).display()
    );
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use asys_report::report::metadata::Metadata;

    fn with_drops(drops: &[(&str, u64)]) -> Metadata {
        let mut m = Metadata::default();
        for &(k, n) in drops {
            m.drops.insert(k.to_string(), n);
        }
        m
    }

    #[test]
    fn a_larger_buffer_is_advised_only_for_a_full_ring_buffer() {
        assert_eq!(loss_warning(&with_drops(&[("api_ring_full", 0)])), None);
        let full = loss_warning(&with_drops(&[("api_ring_full", 3)])).unwrap();
        assert_eq!(
            full,
            "asys: warning: events were lost (api_ring_full=3); try a larger --event-buffer-size"
        );
        let python = loss_warning(&with_drops(&[("python_frame_unreadable", 40)])).unwrap();
        assert!(python.starts_with("asys: warning: events were lost (python_frame_unreadable=40); python_frame_unreadable: "), "{python}");
        assert!(!python.contains("--event-buffer-size"), "{python}");
        let depth = loss_warning(&with_drops(&[("api_call_depth", 2)])).unwrap();
        assert!(!depth.contains("--event-buffer-size"), "{depth}");
        let both = loss_warning(&with_drops(&[
            ("python_frame_unreadable", 1),
            ("sample_ring_full", 1),
        ]))
        .unwrap();
        assert!(both.contains("--event-buffer-size"), "{both}");
    }

    #[test]
    fn the_final_probe_line_tells_what_the_start_up_line_did_not() {
        let libs = |l: &[(&str, usize)]| -> std::collections::BTreeMap<String, usize> {
            l.iter().map(|&(k, n)| (k.to_string(), n)).collect()
        };
        let metadata = Metadata {
            libraries: libs(&[
                ("/opt/x/libcudart.so.13", 312),
                ("/opt/x/libcublas.so.13", 1405),
            ]),
            ..Default::default()
        };
        // A launch: nothing at the start, all of it at the end.
        let launch = crate::record::Outcome {
            report: "r.asysrep".into(),
            exit_code: Some(0),
            metadata,
            probed_at_start: Default::default(),
        };
        assert_eq!(
            later_probes(&launch).unwrap(),
            "asys: probed 1,717 functions: libcublas.so.13 1,405, libcudart.so.13 312"
        );
        // An attach that probed libcudart at the start, libcublas later.
        let attach = crate::record::Outcome {
            probed_at_start: libs(&[("/opt/x/libcudart.so.13", 312)]),
            ..launch
        };
        assert_eq!(
            later_probes(&attach).unwrap(),
            "asys: probed 1,405 more functions, in libraries loaded later: libcublas.so.13 1,405"
        );
        // Nothing new: no line.
        let all = attach.metadata.libraries.clone();
        let settled = crate::record::Outcome {
            probed_at_start: all,
            ..attach
        };
        assert_eq!(later_probes(&settled), None);
    }
}
