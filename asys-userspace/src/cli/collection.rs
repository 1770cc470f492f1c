//! Options that every collecting command (profile, attach) takes.
use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::Args;

use crate::{
    record::{self, Outcome, Target},
    settings::{Kill, RecordSettings, Sampling, TraceItems, Wait},
};
use asys_report::{
    recorded_settings::{ApiProbes, Backtrace, Mode, Scope},
    trace_items::TraceItem,
};

/// `--sample-period`'s default: 1 kHz.
const DEFAULT_SAMPLE_PERIOD_NS: u64 = 1_000_000;
/// `--python-sampling-frequency`'s default.
const DEFAULT_PYTHON_HZ: u32 = 1000;

/// What `--always-on` sets, each chosen for cost (docs/always-on.md).
pub mod always_on {
    use std::time::Duration;

    use asys_report::{recorded_settings::Scope, trace_items::TraceItem};

    use crate::settings::FlightTrigger;

    /// The API items of both runtimes (nsys's default set, and the
    /// simulated runtime's): only those a process loads are probed, and
    /// the others are not warned about.
    pub const ITEMS: [TraceItem; 5] = [
        TraceItem::Hggc,
        TraceItem::Hgtx,
        TraceItem::Cuda,
        TraceItem::Nvtx,
        TraceItem::Osrt,
    ];
    /// The traced processes' threads are sampled (attach too).
    pub const SAMPLE_SCOPE: Scope = Scope::ProcessTree;
    /// 99 Hz, perf's and py-spy-like rates of continuous profilers: a
    /// tenth of the 1 kHz default's sampling cost; off the kernel's tick
    /// so that samples do not lock step with periodic work.
    pub const SAMPLE_PERIOD_NS: u64 = 10_101_010;
    /// Python stacks at the CPU sampling rate.
    pub const PYTHON_HZ: u32 = 99;
    /// The flight recorder keeps the last minute.
    pub const WINDOW: Duration = Duration::from_secs(60);
    /// Checkpoints every 2 s instead of 500 ms: each closes, compresses and
    /// syncs every table's open chunk, a third of asys's CPU at the
    /// default interval under a PyTorch loop (1.8 % of a core, 1.15 % at
    /// 2 s); a killed asys then loses up to 2 s.
    pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(2);
    /// A call blocked this long is a hang in the making, and no step of
    /// an ordinary training loop waits so long in one call.
    pub const SLOW_CALL_NS: u64 = 5_000_000_000;

    /// The flight recorder's triggers besides SIGUSR1 and `asys dump`.
    pub fn triggers() -> Vec<FlightTrigger> {
        vec![FlightTrigger::ApiError, FlightTrigger::Slow(SLOW_CALL_NS)]
    }
}

/// `--inject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Inject {
    /// Load the injection library into running processes.
    Running,
    /// Record their host calls only.
    None,
}

#[derive(Args, Debug)]
pub struct CollectionArgs {
    /// Trace items, comma separated: hggc, hgtx, acblas, acdnn, pccl, osrt,
    /// cuda, nvtx, cublas, cudnn, nccl; none. Default: hggc (not warned
    /// about when no traced process loads it).
    #[arg(
        short = 't',
        long = "trace",
        value_name = "items",
        value_parser = TraceItems::parse
    )]
    pub trace: Option<TraceItems>,

    #[command(flatten)]
    pub out: OutputArgs,

    /// Collection duration in seconds (profile: the application is then sent SIGTERM).
    #[arg(short = 'd', long = "duration", value_name = "seconds", value_parser = super::parse_seconds)]
    pub duration: Option<Duration>,

    /// Size of the kernel-to-asys event buffer in KiB (power of two).
    #[arg(long = "event-buffer-size", default_value = "8192", value_name = "KiB", value_parser = super::parse_buffer_kib)]
    pub event_buffer_size: u32,

    /// OS runtime calls shorter than this many ns are not recorded.
    #[arg(
        long = "osrt-threshold",
        default_value = "1000",
        value_name = "nanoseconds"
    )]
    pub osrt_threshold: u64,

    /// Also record the calls a vendor's libraries make of their own item
    /// (libcudnn calling libcudnn_graph, libcublas calling cublasLt, NVTX
    /// inside NVIDIA libraries); by default only what the application
    /// called is recorded, as nsys counts it.
    #[arg(long = "trace-vendor-internal", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub trace_vendor_internal: bool,

    /// How hggc API calls are recorded: `entry` puts uprobes on the runtime's
    /// functions (works everywhere); `site` records them at asys's injection
    /// library's callback sites (NOP5 probes: much cheaper, profile only).
    #[arg(long = "api-probes", default_value = "entry", value_enum)]
    pub api_probes: ApiProbes,

    /// Call stacks of hggc API calls that take at least <ns> ("all:<ns>", e.g.
    /// all:0 for every call), unwound with DWARF CFI; "none" for none.
    #[arg(long = "hggc-backtrace", default_value = "none", value_name = "all:<ns>|none", value_parser = parse_backtrace)]
    pub hggc_backtrace: BacktraceThreshold,

    /// Most frames of a call stack.
    #[arg(
        long = "hggc-backtrace-depth",
        default_value = "24",
        value_name = "frames"
    )]
    pub hggc_backtrace_depth: usize,

    /// What of hggc to record: kernel-activity, memory-activity, kernel-api,
    /// memory-api (comma separated), or default-set (all, and the other APIs).
    #[arg(long = "hggc-trace-set", default_value = "default-set", value_name = "set", value_parser = crate::apis::HggcTraceSet::parse)]
    pub hggc_trace_set: crate::apis::HggcTraceSet,

    /// Where CUPTI is, for the device activity of CUDA processes (`-t cuda`):
    /// libcupti.so itself or its folder. By default the injection library
    /// looks beside the CUDA runtime the process loaded (CUDA toolkit and
    /// PyPI wheel layouts), then in the loader's search path.
    #[arg(long = "cupti-path", value_name = "path")]
    pub cupti_path: Option<std::path::PathBuf>,

    /// How CUDA graphs are traced (`-t cuda`): graph, one row per graph
    /// execution (nsys's default); node, every kernel node's execution its
    /// own kernel row, with its graph and node ids.
    #[arg(
        long = "cuda-graph-trace",
        default_value = "graph",
        value_name = "graph|node",
        value_enum
    )]
    pub cuda_graph_trace: asys_report::recorded_settings::CudaGraphTrace,

    /// Attach and system-wide: whether asys loads its injection library into
    /// the running processes that have an accelerator runtime or NVTX loaded,
    /// for their device activity and NVTX ranges (`running`), or records
    /// their host calls only (`none`). Default: running for attach, none
    /// system-wide. See docs/attach.md.
    #[arg(long = "inject", value_name = "running|none", value_enum)]
    pub inject: Option<Inject>,

    /// Memory usage summaries (derived from the recorded hggc allocation
    /// calls) to print with --stats: device, pinned, both, or none.
    #[arg(long = "hggc-memory-usage", default_value = "none", value_name = "device,pinned|none", value_parser = parse_memory_usage)]
    pub hggc_memory_usage: MemoryUsage,

    /// Stop recording once the report would be this large (MiB); collection
    /// then ends with the application. Checked every 50 ms, so approximate.
    #[arg(long = "max-report-size", value_name = "MiB", value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    pub max_report_size: Option<u64>,

    /// Flight recorder: keep only the last <seconds> of every table and write
    /// a report of them (NAME.1, NAME.2, ...) on SIGUSR1, on a
    /// --flight-trigger, and at the end; recording goes on after each.
    #[arg(long = "flight-recorder", value_name = "seconds", value_parser = super::parse_seconds)]
    pub flight_recorder: Option<Duration>,

    /// What else writes a flight report (with --flight-recorder or
    /// --always-on): api-error (an hggc or CUDA call returns an error),
    /// slow:<ns> (a call takes longer); comma separated. Default: none;
    /// api-error,slow:5000000000 with --always-on.
    #[arg(long = "flight-trigger", value_name = "api-error|slow:<ns>", value_delimiter = ',', value_parser = crate::settings::FlightTrigger::parse)]
    pub flight_trigger: Vec<crate::settings::FlightTrigger>,

    /// CPU context switches to record: process-tree (the traced threads),
    /// system-wide (every thread), or none. Default: as -s/--sample says
    /// (none for attach).
    #[arg(
        long = "cpuctxsw",
        value_name = "process-tree|system-wide|none",
        value_enum
    )]
    pub cpuctxsw: Option<Scope>,

    /// CPU sampling, and the scope of scheduling: process-tree (the traced
    /// threads), system-wide (every thread on the machine; `profile` with no
    /// application then also traces every process's API calls), or none.
    /// Default: process-tree (profile, launch), none (attach).
    #[arg(
        short = 's',
        long = "sample",
        value_name = "process-tree|system-wide|none",
        value_enum
    )]
    pub sample: Option<Scope>,

    /// How sampled call stacks are unwound: dwarf (the binaries' call frame
    /// information: code without frame pointers too), fp (the frame-pointer
    /// chain), or none (the sampled function only).
    #[arg(short = 'b', long = "backtrace", default_value = "dwarf", value_enum)]
    pub backtrace: Backtrace,

    /// CPU time between two samples on a CPU, in nanoseconds. Default:
    /// 1000000 (1 kHz); 10101010 (99 Hz) with --always-on. asys samples the
    /// CPU clock, not a hardware counter, so it works in virtual machines too.
    #[arg(long = "sample-period", value_name = "nanoseconds", value_parser = clap::value_parser!(u64).range(100_000..=1_000_000_000))]
    pub sample_period: Option<u64>,

    /// Most frames of a sampled call stack.
    #[arg(
        long = "sample-backtrace-depth",
        default_value = "24",
        value_name = "frames",
        value_parser = clap::value_parser!(u64).range(1..=128)
    )]
    pub sample_backtrace_depth: u64,

    /// Python call stacks of the sampled threads of CPython 3.10-3.13 processes,
    /// read with the CPU samples (so -s must not be none); they replace the
    /// evaluator's frames in the reports (docs/python-stacks.md). Default:
    /// false; true with --always-on.
    #[arg(long = "python-sampling", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub python_sampling: Option<bool>,

    /// Most Python stacks per second per thread with --python-sampling
    /// (at most the CPU sampling rate, 1e9 / --sample-period). Default:
    /// 1000; 99 with --always-on.
    #[arg(long = "python-sampling-frequency", value_name = "Hz", value_parser = clap::value_parser!(u32).range(1..=2000))]
    pub python_sampling_frequency: Option<u32>,

    /// Sample the memory of every traced process (RSS, anonymous,
    /// file-backed, shared) over time: the host_memory_sum report.
    #[arg(long = "host-memory-sampling", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub host_memory_sampling: bool,

    /// Samples per second of --host-memory-sampling.
    #[arg(long = "host-memory-sampling-frequency", default_value = "10", value_name = "Hz", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub host_memory_sampling_frequency: u32,

    /// Sample the network interfaces' byte and packet counters over time:
    /// the nic_metrics_sum report.
    #[arg(long = "nic-metrics", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub nic_metrics: bool,

    /// Samples per second of --nic-metrics.
    #[arg(long = "nic-metrics-frequency", default_value = "10", value_name = "Hz", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub nic_metrics_frequency: u32,

    /// With --nic-metrics: only these interfaces (names, comma separated);
    /// default all.
    #[arg(
        long = "nic-device-include",
        value_name = "names",
        value_delimiter = ',',
        requires = "nic_metrics"
    )]
    pub nic_device_include: Vec<String>,

    /// PPU metrics (utilisation, memory, SM clock, power) of these devices:
    /// all, none, device numbers (0,1), or help (list the devices and exit).
    #[arg(long = "ppu-metrics-device", default_value = "none", value_name = "all|none|help|ids", value_parser = parse_ppu_devices)]
    pub ppu_metrics_device: PpuMetricsDevice,

    /// Samples per second of --ppu-metrics-device.
    #[arg(long = "ppu-metrics-frequency", default_value = "10", value_name = "Hz", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub ppu_metrics_frequency: u32,

    /// A user-defined probe, repeatable: uprobe:BIN:FUNC[+OFF], uretprobe:BIN:FUNC,
    /// ucall:BIN:FUNC (entry and return as one row), usdt:BIN:PROVIDER:NAME,
    /// kprobe:FUNC, kretprobe:FUNC, kcall:FUNC, tracepoint:CATEGORY:NAME;
    /// with typed arguments in parentheses, up to six of i32,u32,i64,u64,ptr,str
    /// (tracepoints: field names). docs/probes.md.
    #[arg(long = "probe", value_name = "spec", value_parser = crate::probe_spec::ProbeSpec::parse)]
    pub probe: Vec<crate::probe_spec::ProbeSpec>,

    /// Record the user stack above every hit of a user-space --probe
    /// (uprobe, uretprobe, ucall, usdt), unwound like --hggc-backtrace's
    /// (at most --hggc-backtrace-depth frames): the probe_trace report's
    /// Stack column.
    #[arg(long = "probe-backtrace", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub probe_backtrace: bool,

    /// The always-on preset (profile and attach), for leaving asys running
    /// on a host: -t hggc,hgtx,cuda,nvtx,osrt (each tried quietly), CPU
    /// sampling of the traced processes at 99 Hz with Python frames, and a
    /// 60 s flight recorder that writes a report on an API error, a call
    /// over 5 s, SIGUSR1 or `asys dump`. An option given as well overrides
    /// its part of the preset. docs/always-on.md gives each default's cost.
    #[arg(long = "always-on")]
    pub always_on: bool,

    /// Print the summary reports when the collection ends.
    #[arg(long = "stats", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub stats: bool,
}

impl CollectionArgs {
    /// The trace items `-t` gave, or the default (hggc; the always-on
    /// preset's with --always-on).
    pub fn trace_items(&self) -> Vec<TraceItem> {
        match &self.trace {
            Some(items) => items.0.clone(),
            None if self.always_on => always_on::ITEMS.to_vec(),
            None => vec![TraceItem::Hggc],
        }
    }

    /// Fills in what `--always-on` sets and the command line left unset
    /// (profile and attach; launch refuses the option).
    pub fn apply_always_on(&mut self) -> anyhow::Result<()> {
        if !self.always_on {
            if !self.flight_trigger.is_empty() && self.flight_recorder.is_none() {
                anyhow::bail!("--flight-trigger needs --flight-recorder (or --always-on)");
            }
            return Ok(());
        }
        self.sample.get_or_insert(always_on::SAMPLE_SCOPE);
        self.sample_period
            .get_or_insert(always_on::SAMPLE_PERIOD_NS);
        // Python frames ride on the CPU samples: none without them.
        if self.sample != Some(Scope::None) {
            self.python_sampling.get_or_insert(true);
        }
        self.python_sampling_frequency
            .get_or_insert(always_on::PYTHON_HZ);
        self.flight_recorder.get_or_insert(always_on::WINDOW);
        if self.flight_trigger.is_empty() {
            self.flight_trigger = always_on::triggers();
        }
        Ok(())
    }

    /// The recording settings these options give; the caller adds what its
    /// subcommand has beyond them (delay, kill, capture range, ...).
    /// What an injection into a running process loads, and its settings.
    fn inject_request(&self, items: &[TraceItem]) -> Option<crate::settings::InjectRequest> {
        let wanted = [TraceItem::Hggc, TraceItem::Cuda, TraceItem::Nvtx];
        if !items.iter().any(|i| wanted.contains(i)) {
            return None;
        }
        let Some(library) = crate::install_layout::injection_library() else {
            eprintln!(
                "asys: warning: no injection library ({}); running processes keep their host calls only",
                crate::install_layout::injection_library_places()
            );
            return None;
        };
        Some(crate::settings::InjectRequest {
            library,
            settings: super::environment::injection_settings(items, self),
            activity: items.contains(&TraceItem::Hggc) || items.contains(&TraceItem::Cuda),
            nvtx: items.contains(&TraceItem::Nvtx),
        })
    }

    pub fn settings(
        &self,
        items: Vec<TraceItem>,
        output: PathBuf,
        mode: Mode,
        argv: &[String],
    ) -> RecordSettings {
        let inject = match (self.inject, mode) {
            (Some(Inject::Running), _) | (None, Mode::Attach) => self.inject_request(&items),
            _ => None,
        };
        RecordSettings {
            inject,
            items,
            output,
            duration: self.duration,
            event_buffer_bytes: self.event_buffer_size,
            osrt_threshold_ns: self.osrt_threshold,
            trace_vendor_internal: self.trace_vendor_internal,
            api_probes: self.api_probes,
            backtrace_threshold_ns: self.hggc_backtrace.0,
            backtrace_depth: self.hggc_backtrace_depth,
            hggc_set: self.hggc_trace_set,
            mode,
            delay: None,
            activation: None,
            kill: Kill::None,
            capture: None,
            capture_hgtx: None,
            wait: Wait::Primary,
            max_bytes: self.max_report_size.map(|m| m << 20),
            checkpoint_every: self.always_on.then_some(always_on::CHECKPOINT_EVERY),
            name_template: Some((self.out.output.clone(), None)),
            sched: self.cpuctxsw.unwrap_or(Scope::None),
            sampling: self.sampling(if mode == Mode::Attach {
                Scope::None
            } else {
                Scope::ProcessTree
            }),
            rotation: None,
            flight: self.flight_recorder.map(|window| crate::settings::Flight {
                window,
                triggers: self.flight_trigger.clone(),
            }),
            cgroup: None,
            metrics: crate::settings::Metrics {
                host_memory_hz: self
                    .host_memory_sampling
                    .then_some(self.host_memory_sampling_frequency),
                nic: self.nic_metrics,
                nic_hz: self.nic_metrics_frequency,
                nic_include: self.nic_device_include.clone(),
                ppu: match &self.ppu_metrics_device {
                    PpuMetricsDevice::Devices(d) => d.clone(),
                    PpuMetricsDevice::Help => crate::settings::PpuDevices::None,
                },
                ppu_hz: self.ppu_metrics_frequency,
            },
            probes: self.probe.clone(),
            probe_backtrace: self.probe_backtrace,
            command_line: argv.to_vec(),
        }
    }

    /// `--ppu-metrics-device help`: prints the devices whose metrics can be
    /// read and returns true (the command then ends).
    pub fn ppu_help(&self) -> bool {
        if !matches!(self.ppu_metrics_device, PpuMetricsDevice::Help) {
            return false;
        }
        let devices = crate::collect::metrics::ppu::devices();
        if devices.is_empty() {
            println!(
                "No PPU devices with readable metrics (no running process of the PPU runtime)."
            );
        } else {
            println!("PPU devices with readable metrics:");
            for (pid, device) in devices {
                println!("  device {device} (process {pid})");
            }
        }
        match crate::collect::metrics::nvml::Nvml::open() {
            Ok(nvml) => {
                println!("NVIDIA devices (NVML):");
                for device in nvml.devices() {
                    println!("  device {device}");
                }
            }
            // Only worth saying where an NVIDIA driver is installed.
            Err(e) if std::path::Path::new("/dev/nvidiactl").exists() => println!("{e}"),
            Err(_) => {}
        }
        true
    }

    /// `-s`, or `default` where it is not given.
    pub fn sample_scope(&self, default: Scope) -> Scope {
        self.sample.unwrap_or(default)
    }

    fn sampling(&self, default_scope: Scope) -> Sampling {
        Sampling {
            scope: self.sample_scope(default_scope),
            period_ns: self.sample_period.unwrap_or(DEFAULT_SAMPLE_PERIOD_NS),
            unwind: self.backtrace.unwind(),
            depth: self.sample_backtrace_depth as usize,
            explicit: self.sample.is_some(),
            python_hz: self
                .python_sampling
                .unwrap_or(false)
                .then_some(self.python_sampling_frequency.unwrap_or(DEFAULT_PYTHON_HZ)),
        }
    }

    /// Records `target` as `settings` say, prints the outcome (and the
    /// summary with `--stats true`).
    pub fn record(&self, settings: RecordSettings, target: Target) -> anyhow::Result<Outcome> {
        let outcome = super::runtime()?
            .block_on(record::record(settings, target))
            .context("recording failed")?;
        // Only items the user named are warned about when nothing loaded
        // them: the default is tried quietly.
        super::print_outcome(&outcome, self.trace.is_some());
        if self.stats {
            super::stats::print_default(&outcome.report, self.hggc_memory_usage.0)?;
        }
        Ok(outcome)
    }
}

/// `-o` and `-f`: where the report goes (also `start`'s).
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Report name; macros %h %p %q{ENV} %t %i %% expand. ".asysrep" is added.
    #[arg(
        short = 'o',
        long = "output",
        default_value = "report%i",
        value_name = "name"
    )]
    pub output: String,

    /// Overwrite an existing report.
    /// (`--force-overrite`, the guide's spelling, is taken too.)
    #[arg(short = 'f', long = "force-overwrite", alias = "force-overrite", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub force_overwrite: bool,
}

/// `--ppu-metrics-device`: devices, or `help`.
#[derive(Debug, Clone)]
pub enum PpuMetricsDevice {
    Devices(crate::settings::PpuDevices),
    Help,
}

fn parse_ppu_devices(s: &str) -> Result<PpuMetricsDevice, String> {
    if s == "help" {
        return Ok(PpuMetricsDevice::Help);
    }
    crate::settings::PpuDevices::parse(s).map(PpuMetricsDevice::Devices)
}

/// `--hggc-backtrace`: a duration threshold in ns, or off.
#[derive(Debug, Clone, Copy)]
pub struct BacktraceThreshold(pub Option<u64>);

/// `all:<ns>` (a threshold) or `none`.
fn parse_backtrace(s: &str) -> Result<BacktraceThreshold, String> {
    if s == "none" {
        return Ok(BacktraceThreshold(None));
    }
    s.strip_prefix("all:")
        .and_then(|ns| ns.parse().ok())
        .map(|ns| BacktraceThreshold(Some(ns)))
        .ok_or_else(|| format!("expected all:<nanoseconds> or none, got '{s}'"))
}

/// `--hggc-memory-usage`: whether memory usage is summarized.
#[derive(Debug, Clone, Copy)]
pub struct MemoryUsage(pub bool);

fn parse_memory_usage(s: &str) -> Result<MemoryUsage, String> {
    if s == "none" {
        return Ok(MemoryUsage(false));
    }
    if s.split(',')
        .all(|k| matches!(k.trim(), "device" | "pinned"))
    {
        return Ok(MemoryUsage(true));
    }
    Err(format!(
        "expected device, pinned, device,pinned or none, got '{s}'"
    ))
}
