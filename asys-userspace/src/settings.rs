//! The settings stage: what the command line asked for, as plain typed data.
//! Every option the core acts on is an enum or a number here, made from the
//! arguments before recording starts (samply and py-spy do the same); no
//! stage after this one compares strings to find out what was asked.
//!
//! A top-level module because every stage reads it (cli makes it; kernel,
//! collect, record, sink, symbolize and session act on it).
use std::{path::PathBuf, time::Duration};

use asys_report::recorded_settings::{ApiProbes, Mode, Scope, Unwind};

use crate::apis::{HggcTraceSet, HgtxRange};
use asys_report::trace_items::TraceItem;

/// `-t`: the trace items, each once, in the order given (empty: `none`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceItems(pub Vec<TraceItem>);

impl TraceItems {
    /// Parses `hggc,hgtx,...` or `none` (clap's value parser).
    pub fn parse(spec: &str) -> Result<Self, asys_report::trace_items::TraceItemError> {
        asys_report::trace_items::parse_trace_items(spec).map(TraceItems)
    }
}

/// `--wait`: when the launched application counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Wait {
    /// When the launched process exits.
    Primary,
    /// When every process of its tree has exited (daemons too).
    All,
}

/// Plain settings, made from the command line before recording starts.
#[derive(Debug, Clone)]
pub struct RecordSettings {
    pub items: Vec<TraceItem>,
    pub output: PathBuf,
    pub duration: Option<Duration>,
    pub event_buffer_bytes: u32,
    pub osrt_threshold_ns: u64,
    /// `--trace-vendor-internal true`: calls a vendor's libraries make of
    /// their own item are recorded too (by default only what the
    /// application called is).
    pub trace_vendor_internal: bool,
    pub api_probes: ApiProbes,
    /// hggc calls at least this long (ns) get their caller's stack; None: off.
    pub backtrace_threshold_ns: Option<u64>,
    pub backtrace_depth: usize,
    pub hggc_set: HggcTraceSet,
    pub mode: Mode,
    /// Collection starts this long after the application (`--delay`).
    pub delay: Option<Duration>,
    /// `-y @TIME` / `-y /PERIOD`: collection starts at that wall-clock
    /// instant instead (set-up done before it).
    pub activation: Option<Activation>,
    /// What ends the application when collection ends before it (`--kill`).
    pub kill: Kill,
    /// `--trace-rotation N`: a report every `duration`, keeping the N newest.
    pub rotation: Option<u32>,
    pub wait: Wait,
    /// `--max-report-size`, in bytes.
    pub max_bytes: Option<u64>,
    /// Time between two checkpoints of the recording; None: the
    /// collector's default (500 ms). `--always-on` sets 2 s.
    pub checkpoint_every: Option<std::time::Duration>,
    /// `--cpuctxsw`.
    pub sched: Scope,
    /// `-s`, `-b`, `--sample-period`, `--sample-backtrace-depth`.
    pub sampling: Sampling,
    /// The `-o` template and the pid for `%p`: a series of reports (repeat,
    /// rotation) whose template has `%t` names each by its own start time.
    pub name_template: Option<(String, Option<u32>)>,
    /// `-c hggcProfilerApi|hgtx` and what the end of the range does.
    pub capture: Option<CaptureEnd>,
    /// `-c hgtx -p TEMPLATE`: the range (else the profiler API's).
    pub capture_hgtx: Option<HgtxRange>,
    /// `--flight-recorder`: keep only the last seconds, report on triggers.
    pub flight: Option<Flight>,
    /// System-wide: only this cgroup's processes (`--cgroup`, `--container`).
    pub cgroup: Option<CgroupFilter>,
    /// The periodic samplers: host memory, NIC counters.
    pub metrics: Metrics,
    /// `--probe`: user-defined probes.
    pub probes: Vec<crate::probe_spec::ProbeSpec>,
    /// `--probe-backtrace`: a user stack with every user-space probe's hit.
    pub probe_backtrace: bool,
    /// Attach and system-wide: load the injection library into the running
    /// processes that have a runtime or NVTX (`--inject running`); None:
    /// their host calls only.
    pub inject: Option<InjectRequest>,
    pub command_line: Vec<String>,
}

/// The flight recorder (`--flight-recorder SECONDS`, `--flight-trigger`):
/// only the last `window` of every table is kept, and a report of it is
/// written on SIGUSR1, on a trigger and at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flight {
    pub window: Duration,
    pub triggers: Vec<FlightTrigger>,
}

/// What writes a flight report besides SIGUSR1 and the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlightTrigger {
    /// An hggc call that returns an error (not the calls that report an
    /// earlier one, hggcGetLastError and hggcPeekAtLastError).
    ApiError,
    /// A traced call longer than this many ns.
    Slow(u64),
}

impl FlightTrigger {
    /// `api-error` or `slow:NS`.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "api-error" {
            return Ok(Self::ApiError);
        }
        match s.strip_prefix("slow:").map(str::parse::<u64>) {
            Some(Ok(ns)) if ns > 0 => Ok(Self::Slow(ns)),
            _ => Err(format!(
                "expected api-error or slow:<nanoseconds>, got '{s}'"
            )),
        }
    }
}

/// What the periodic samplers of the collect stage read
/// (`crate::collect::metrics`), and how often.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    /// `--host-memory-sampling`: samples per second of every traced
    /// process's memory; None: off.
    pub host_memory_hz: Option<u32>,
    /// `--nic-metrics true`: the interfaces' counters, at `nic_hz`.
    pub nic: bool,
    /// `--nic-metrics-frequency`.
    pub nic_hz: u32,
    /// `--nic-device-include`: only these interfaces (all when empty).
    pub nic_include: Vec<String>,
    /// `--ppu-metrics-device`: which devices' metrics.
    pub ppu: PpuDevices,
    /// `--ppu-metrics-frequency`.
    pub ppu_hz: u32,
}

/// `--ppu-metrics-device all|none|IDS` (`help` is the CLI's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PpuDevices {
    #[default]
    None,
    All,
    /// Device indexes.
    Ids(Vec<u32>),
}

impl PpuDevices {
    /// `all`, `none` or device indexes, comma separated.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(Self::All),
            "none" => Ok(Self::None),
            _ => s
                .split(',')
                .map(|d| d.trim().parse::<u32>())
                .collect::<Result<Vec<_>, _>>()
                .ok()
                .filter(|v| !v.is_empty())
                .map(Self::Ids)
                .ok_or_else(|| {
                    format!("expected all, none, help or device numbers (0,1), got '{s}'")
                }),
        }
    }
}

impl Metrics {
    /// Whether any sampler runs.
    pub fn any(&self) -> bool {
        self.host_memory_hz.is_some() || self.nic || self.ppu != PpuDevices::None
    }
}

/// CPU sampling settings.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    /// Which threads.
    pub scope: Scope,
    /// CPU time between samples on each CPU.
    pub period_ns: u64,
    /// How stacks are unwound; None: no stacks (`-b none`).
    pub unwind: Option<Unwind>,
    /// Most frames per stack.
    pub depth: usize,
    /// `-s` was given: if sampling cannot start, that is an error (by
    /// default it is a warning, and the recording goes on without it).
    pub explicit: bool,
    /// `--python-sampling true`: the Python stacks of CPython threads, at
    /// most this many per second per thread (`--python-sampling-frequency`);
    /// None: off.
    pub python_hz: Option<u32>,
}

/// `--capture-range-end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CaptureEnd {
    /// Recording goes on after the range; collection ends with the app.
    None,
    /// Collection ends; the application runs on.
    Stop,
    /// Collection ends and the application is ended (`--kill`).
    StopShutdown,
    /// One report per range (`repeat[:N]`, `repeat-shutdown:N`): after N
    /// ranges collection ends, and with `shutdown` the application too.
    Repeat { max: Option<u32>, shutdown: bool },
    /// All ranges in one report (`merge[:N]`, `merge-shutdown:N`): after N
    /// ranges collection ends, and with `shutdown` the application too.
    Merge { max: Option<u32>, shutdown: bool },
}

impl CaptureEnd {
    /// Whether a closed range may open again.
    pub fn reopens(self) -> bool {
        matches!(self, CaptureEnd::Repeat { .. } | CaptureEnd::Merge { .. })
    }

    /// Whether the end of a range (the last one, with N) ends collection.
    pub fn stops(self) -> bool {
        !matches!(self, CaptureEnd::None | CaptureEnd::Merge { max: None, .. })
    }

    /// After a range ended, with `ranges` opened so far: whether collection
    /// goes on for more (repeat: in a new report, merge: in the same one).
    pub fn wants_more(self, ranges: u32) -> bool {
        match self {
            CaptureEnd::Repeat { max, .. } | CaptureEnd::Merge { max, .. } => {
                max.is_none_or(|m| ranges < m)
            }
            _ => false,
        }
    }

    /// Whether the application runs on when collection ends with a range.
    pub fn app_runs_on(self) -> bool {
        matches!(
            self,
            CaptureEnd::Stop
                | CaptureEnd::Repeat {
                    shutdown: false,
                    ..
                }
                | CaptureEnd::Merge {
                    shutdown: false,
                    ..
                }
        )
    }
}

/// `--kill`: the signal sent to the application when collection ends first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// Leave it running.
    None,
    Signal(i32),
}

/// What `--cgroup` or `--container` selected: a cgroup v2 directory and
/// everything below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFilter {
    /// Its path in the hierarchy ("/system.slice/docker-<id>.scope").
    pub path: String,
    /// Its id: the directory's inode, what `bpf_get_current_cgroup_id` gives.
    pub id: u64,
    /// Its depth below the root (the root is 0), the ancestor level the
    /// kernel compares at.
    pub level: u32,
    /// The container it was chosen by (`--container`).
    pub container: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_ends_say_what_follows_a_range() {
        let repeat2 = CaptureEnd::Repeat {
            max: Some(2),
            shutdown: false,
        };
        assert!(repeat2.reopens() && repeat2.stops() && repeat2.app_runs_on());
        assert!(repeat2.wants_more(1) && !repeat2.wants_more(2));
        let merge = CaptureEnd::Merge {
            max: None,
            shutdown: false,
        };
        assert!(!merge.stops() && merge.wants_more(100));
        assert!(!CaptureEnd::StopShutdown.app_runs_on());
        assert!(!CaptureEnd::None.stops());
    }
}

/// An aligned start (`-y @TIME`, `-y /PERIOD`): the spec as given and the
/// instant it names (`record::activation` parses it and waits for it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activation {
    pub spec: String,
    /// The instant, ns since the epoch (CLOCK_REALTIME).
    pub realtime_ns: i64,
    /// For `/PERIOD`: the period, so that a set-up that ran past the
    /// instant moves the start to the next multiple (every host does the
    /// same arithmetic, so they still agree).
    pub period_ns: Option<i64>,
}

/// Attach and system-wide (`--inject running`): what asys loads into running
/// processes, and how the library is to record there (see `inject/`).
#[derive(Debug, Clone)]
pub struct InjectRequest {
    pub library: PathBuf,
    /// The library's settings (`NAME=VALUE`), as a launched process has them
    /// in its environment.
    pub settings: Vec<(String, String)>,
    /// Whether device activity is wanted (hggc or cuda traced).
    pub activity: bool,
    /// Whether NVTX is traced: NVTX v3 modules adopt the library as their
    /// tool.
    pub nvtx: bool,
}
