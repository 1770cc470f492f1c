//! The kernel side as userspace sees it: loads the eBPF object, keeps the set
//! of traced processes, and attaches probes to runtime libraries as processes
//! map them.
pub mod btf;
mod caller_ranges;
pub mod features;
mod kernel_log;
pub mod layout;
pub mod multi;
pub mod osrt;
pub mod perf_uprobe;
pub mod prev_state;
pub mod probed_files;
mod prog_misses;
pub mod sigcont_watchdog;
mod state;
pub mod syscalls;
pub mod tracepoint_format;
mod unlinker;
pub mod user_probes;

use std::collections::BTreeMap;

use asys_common::{Cookie, DropSource, KernelState, PythonProcess, Settings, TracedProcess};
use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf},
    programs::TracePoint,
};

use crate::apis::{Functions, ProbedFunctions as _, Signature};
use asys_report::trace_items::TraceItem;
pub use probed_files::{LibraryId, ProbedLibrary};

#[derive(Debug, thiserror::Error)]
pub enum TracerError {
    #[error("loading the eBPF programs: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("eBPF program {name}: {source}")]
    Program {
        name: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error("eBPF map {name}: {source}")]
    Map {
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("eBPF map {0} missing from the object")]
    MissingMap(&'static str),
    #[error("{0}")]
    Elf(#[from] crate::elf::ElfError),
    #[error(transparent)]
    Multi(#[from] multi::MultiError),
    #[error("the event buffer must be a power of two of at least 4 KiB, got {0} bytes")]
    BufferSize(u32),
    #[error(
        "this asys was built without its eBPF programs (the build lacked the nightly \
         toolchain or bpf-linker): build it after `cargo xtask setup` (docs/building.md)"
    )]
    NoPrograms,
    #[error("listing the online CPUs: {0}")]
    Cpus(std::io::Error),
    #[error("tracefs is not mounted at /sys/kernel/tracing and mounting it failed: {0}")]
    Tracefs(std::io::Error),
    #[error("mapping the eBPF state map: {0}")]
    State(std::io::Error),
    #[error("reading the eBPF programs' log: {0}")]
    Log(#[from] aya_log::Error),
    #[error(transparent)]
    Features(#[from] features::FeatureError),
    #[error(transparent)]
    Format(#[from] tracepoint_format::FormatError),
    #[error(transparent)]
    Btf(#[from] btf::BtfError),
    #[error(transparent)]
    Probe(#[from] user_probes::ProbeError),
    #[error("starting the reader of the eBPF programs' log: {0}")]
    KernelLog(std::io::Error),
}

/// The tracer's facts for a report's metadata.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Lost events per source since the tracer was loaded.
    pub drops: BTreeMap<String, u64>,
    /// Runs of each program the kernel skipped since it was loaded.
    pub kernel_skipped: BTreeMap<String, u64>,
    pub libraries: BTreeMap<String, usize>,
    /// The rows of the report's `libraries` table.
    pub library_table: Vec<asys_report::report::rows::LibraryRow>,
    pub items_not_found: Vec<String>,
    pub device_activity: bool,
}

/// One probed function: what a cookie's id stands for.
#[derive(Debug, Clone)]
pub struct ProbeInfo {
    pub item: TraceItem,
    pub name: String,
    pub library: LibraryId,
    pub signature: Signature,
}

pub struct Tracer {
    ebpf: Ebpf,
    traced: BpfHashMap<MapData, u32, TracedProcess>,
    /// CPython processes whose frames the sample program reads
    /// (`--python-sampling`), with where.
    python: BpfHashMap<MapData, u32, PythonProcess>,
    /// Whether Python stacks are read (`--python-sampling true`), and the
    /// least time between two of one thread (0: at every sample).
    python_stacks: Option<u64>,
    /// The kernel's copy of `settings`, rewritten whole on every change.
    settings_map: Array<MapData, Settings>,
    settings: Settings,
    /// Recording and capture state, shared with the kernel field by field.
    state: state::StateMap,
    drops: PerCpuArray<MapData, u64>,
    items: Vec<TraceItem>,
    /// The items asked for (`items` leaves out those recorded at sites).
    requested: Vec<TraceItem>,
    probes: Vec<ProbeInfo>,
    libraries: probed_files::Libraries,
    /// api_entry, api_exit and loader_hook, loaded for uprobe-multi links.
    uprobe_progs: UprobePrograms,
    /// Every uprobe-multi link made; closing one removes all its probes
    /// (and waits for a grace period: see [`close_in_parallel`]).
    links: Vec<std::os::fd::OwnedFd>,
    /// The loader hooks' links, apart: they are closed first when the tracer
    /// goes, so that no hook stops a process after the last look at STOPPED.
    loader_links: Vec<std::os::fd::OwnedFd>,
    /// Processes the loader hook stopped and nobody continued yet.
    stopped: BpfHashMap<MapData, u32, u32>,
    /// Processes the loader hook could not announce nor stop (the ring was
    /// full, system-wide): to be scanned late (`LOADS_UNANNOUNCED`).
    loads_unannounced: BpfHashMap<MapData, u32, u32>,
    /// Continues them if asys dies (see `sigcont_watchdog.rs`); None if it could
    /// not start (asys said so).
    watchdog: Option<sigcont_watchdog::Watchdog>,
    /// Which hggc APIs to probe (`--hggc-trace-set`).
    hggc_set: crate::apis::HggcTraceSet,
    /// Items for which some library had functions to probe.
    found_items: std::collections::BTreeSet<TraceItem>,
    injection_hooked: bool,
    /// `-t osrt`: where each process's lock libraries are, to name its lock
    /// waits (system calls need nothing more once loaded).
    osrt: Option<osrt::Osrt>,
    /// Whether hggc is traced: the injection library's sites (device
    /// activity, site-recorded calls) are probed only then, so that another
    /// item's report holds nothing of a process that happens to load it.
    hooks_sites: bool,
    /// The sites serve only cuda here (not hggc): they are hooked from the
    /// first process that maps both the library and CUDA's driver, so that
    /// a process of the simulated runtime, none of `-t cuda`'s business, is
    /// not probed (and its optimized sites need not be restored at the end).
    sites_for_cuda_only: bool,
    /// Prints what the programs log; dropped after the links are closed.
    _kernel_log: kernel_log::KernelLog,
    /// Userspace's failed inserts into TRACED ([`DropSource::TracedInsertFailed`]).
    traced_insert_failed: u64,
    /// What the kernel's `prev_state` bits mean (its sched_switch format).
    task_states: prev_state::TaskStates,
    /// Whether the kernel has `sched_waking` (4.3 and later).
    has_waking: bool,
    /// `--probe`: the user-defined probes and their links.
    user_probes: user_probes::UserProbes,
    /// The background unlinker waits for this to close (see
    /// `unlinker.rs`): the last field, so it closes after every other
    /// descriptor of the tracer (fields drop in order).
    unlinker_go: Option<std::os::fd::OwnedFd>,
}

struct UprobePrograms {
    /// Set where probes attach as perf events (`perf_uprobe.rs`): the
    /// programs below were then loaded as plain kprobe programs.
    perf: Option<features::UprobePmu>,
    api_entry: std::os::fd::OwnedFd,
    api_exit: std::os::fd::OwnedFd,
    loader_hook: std::os::fd::OwnedFd,
    activity_site: std::os::fd::OwnedFd,
    api_site: std::os::fd::OwnedFd,
    lost_site: std::os::fd::OwnedFd,
    name_site: std::os::fd::OwnedFd,
    call_site: std::os::fd::OwnedFd,
}

impl UprobePrograms {
    /// Each program with its name (for their skipped runs).
    fn named(&self) -> [(&'static str, std::os::fd::BorrowedFd<'_>); 8] {
        use std::os::fd::AsFd;
        [
            ("api_entry", self.api_entry.as_fd()),
            ("api_exit", self.api_exit.as_fd()),
            ("loader_hook", self.loader_hook.as_fd()),
            ("activity_site", self.activity_site.as_fd()),
            ("api_site", self.api_site.as_fd()),
            ("lost_site", self.lost_site.as_fd()),
            ("name_site", self.name_site.as_fd()),
            ("call_site", self.call_site.as_fd()),
        ]
    }

    /// Attaches `prog` at `offsets` in `path` the way this kernel allows:
    /// one uprobe-multi link, or one perf-event link per probe.
    fn attach(
        &self,
        prog: &std::os::fd::OwnedFd,
        path: &std::path::Path,
        offsets: &[u64],
        cookies: &[u64],
        ret: bool,
    ) -> Result<Vec<std::os::fd::OwnedFd>, multi::MultiError> {
        match self.perf {
            Some(pmu) => perf_uprobe::attach(prog, pmu, path, offsets, cookies, ret, None),
            None => Ok(vec![multi::attach(prog, path, offsets, cookies, ret)?]),
        }
    }
}

/// asys's injection library, by its file name.
fn is_injection_library(path: &std::path::Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("libasys_inject"))
}

/// Whether process `pid` is an hggc process and not a CUDA one: it maps the
/// hggc runtime (`libhggc*`, which loaded the injection library for HGPTI)
/// and not CUDA's driver. With `-t cuda` alone such a process's sites are
/// none of asys's business. Any other process that loaded the injection
/// library (a CUDA process, or one that loaded it as its NVTX tool before
/// `cuInit`, or without CUDA at all) gets them. A process gone says no.
fn is_hggc_only_process(pid: u32) -> bool {
    let named = |m: &crate::process::procfs::MapsEntry, test: fn(&str) -> bool| {
        m.path
            .file_name()
            .is_some_and(|n| test(&n.to_string_lossy()))
    };
    crate::process::procfs::mappings_and_vdso(pid).is_ok_and(|(maps, _)| {
        maps.iter().any(|m| named(m, |n| n.starts_with("libhggc")))
            && !maps.iter().any(|m| named(m, crate::apis::is_cuda_driver))
    })
}

/// The injection library's probe sites and the program each one gets.
const SITES: [&str; 5] = [
    "asys_site_activity",
    "asys_site_api",
    "asys_site_lost",
    "asys_site_name",
    "asys_site_call",
];

/// The eBPF programs, built by build.rs; empty where they could not be
/// built (no nightly toolchain or bpf-linker, or the `ebpf` feature off),
/// and then [`Tracer::load`] refuses with [`TracerError::NoPrograms`].
#[cfg(asys_ebpf_built)]
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/asys"));
#[cfg(not(asys_ebpf_built))]
static EBPF_OBJECT: &[u8] = &[];

/// What [`Tracer::load`] loads the probes for: settings fixed for the
/// tracer's life.
#[derive(Debug, Clone)]
pub struct LoadSettings {
    /// The trace items asked for.
    pub items: Vec<TraceItem>,
    /// The ring buffer's size: a power of two of at least 4 KiB.
    pub event_buffer_bytes: u32,
    /// osrt calls shorter than this (ns) are not recorded.
    pub osrt_threshold_ns: u64,
    /// Record the hggc API through the injection library's callback sites
    /// instead of uprobes on the runtime (see docs).
    pub api_via_sites: bool,
    /// hggc calls at least this long (ns) get their caller's stack; None:
    /// off.
    pub backtrace_threshold_ns: Option<u64>,
    /// Which hggc APIs to probe (`--hggc-trace-set`).
    pub hggc_set: crate::apis::HggcTraceSet,
    /// `--probe`: user-defined probes.
    pub probes: Vec<crate::probe_spec::ProbeSpec>,
    /// `--probe-backtrace`: their hits in user space carry the stack.
    pub probe_backtrace: bool,
}

/// Detects what this kernel supports, says which fallbacks are in use and
/// keeps them for the report ([`features::set_in_use`]). Returns the uprobe
/// PMU where probes attach as perf events, and where the tracepoints the
/// programs read keep their fields.
fn use_kernel_fallbacks()
-> Result<(Option<features::UprobePmu>, asys_common::TracepointLayout), TracerError> {
    let (support, mut fallbacks, layout) = kernel_support()?;
    if features::sites_fell_back() {
        fallbacks.insert(features::Fallback::EntryProbes);
    }
    let perf = if support.uses(features::Fallback::PerfUprobe) {
        fallbacks.insert(features::Fallback::PerfUprobe);
        support.uprobe_pmu
    } else {
        None
    };
    for f in &fallbacks {
        eprintln!(
            "asys: kernel fallback in use: {} (instead of {}{})",
            f.name(),
            f.instead_of(),
            if support.forced.contains(f) {
                format!(", forced by {}", features::FORCE_ENV)
            } else {
                format!(", which Linux {} lacks", support.release)
            }
        );
    }
    features::set_in_use(support, fallbacks);
    Ok((perf, layout))
}

/// Loads and verifies the eBPF object, its maps sized for `settings`.
fn load_object(
    settings: &LoadSettings,
    layout: &asys_common::TracepointLayout,
) -> Result<Ebpf, TracerError> {
    let mut loader = EbpfLoader::new();
    loader
        .map_max_entries("EVENTS", settings.event_buffer_bytes)
        .override_global("TP_LAYOUT", layout, true);
    if !settings.items.contains(&TraceItem::Osrt) {
        // Preallocated, and unused without osrt.
        loader.map_max_entries("OSRT_THREADS", 1);
        loader.map_max_entries("OSRT_LIBC", 1);
    }
    Ok(loader.load(EBPF_OBJECT)?)
}

/// Loads the programs attached per library (see [`multi::load`]: before
/// any map is taken out of `ebpf`), as perf-event programs where `perf`.
fn load_uprobe_programs(
    ebpf: &Ebpf,
    perf: Option<features::UprobePmu>,
) -> Result<UprobePrograms, TracerError> {
    let names = [
        "api_entry",
        "api_exit",
        "loader_hook",
        "activity_site",
        "api_site",
        "lost_site",
        "name_site",
        "call_site",
    ];
    let [
        api_entry,
        api_exit,
        loader_hook,
        activity_site,
        api_site,
        lost_site,
        name_site,
        call_site,
    ]: [_; 8] = multi::load(ebpf, EBPF_OBJECT, &names, perf.is_some())?
        .try_into()
        .expect("eight programs asked, eight loaded");
    Ok(UprobePrograms {
        perf,
        api_entry,
        api_exit,
        loader_hook,
        activity_site,
        api_site,
        lost_site,
        name_site,
        call_site,
    })
}

/// The programs' settings at load, written to their SETTINGS map; returns
/// the map and what it holds.
fn write_kernel_settings(
    ebpf: &mut Ebpf,
    load: &LoadSettings,
) -> Result<(Array<MapData, Settings>, Settings), TracerError> {
    let mut settings = Settings {
        // A quarter of the ring: see Settings::wake_bytes.
        wake_bytes: u64::from(load.event_buffer_bytes / 4),
        // Never recorded: system-wide, osrt would record asys's own
        // reads of the events (and samples, its own sampling).
        self_pid: std::process::id().into(),
        ..Settings::default()
    };
    settings.min_duration[TraceItem::Osrt.family_id() as usize] = load.osrt_threshold_ns;
    if let Some(ns) = load.backtrace_threshold_ns {
        // 0 means off in the kernel; "all calls" is a threshold of 1 ns.
        settings.stack_threshold[TraceItem::Hggc.family_id() as usize] = ns.max(1);
    }
    let mut settings_map: Array<MapData, Settings> = take_map(ebpf, "SETTINGS")?;
    settings_map
        .set(0, settings, 0)
        .map_err(|source| TracerError::Map {
            name: "SETTINGS",
            source,
        })?;
    Ok((settings_map, settings))
}

/// The watchdog continuing what the loader hook stopped (`stopped`) if asys
/// dies; None, said, where it cannot start.
fn start_watchdog(stopped: &BpfHashMap<MapData, u32, u32>) -> Option<sigcont_watchdog::Watchdog> {
    match sigcont_watchdog::Watchdog::start(sigcont_watchdog::map_fd(stopped)) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!(
                "asys: warning: {e}; a process stopped at a library load stays stopped \
                 if asys is killed"
            );
            None
        }
    }
}

/// What the kernel's `prev_state` bits mean, from its sched_switch format
/// (the default encoding where it cannot be read).
fn read_task_states() -> prev_state::TaskStates {
    tracepoint_format::TracepointFormat::read("sched", "sched_switch")
        .ok()
        .and_then(|f| prev_state::TaskStates::from_print_fmt(f.print_fmt.as_deref()?))
        .unwrap_or_default()
}

/// The items probed in the runtimes' libraries: through the sites, the
/// runtime itself gets no probes (HGPTI's callbacks, CUPTI's for CUDA's
/// runtime and driver).
fn probed_items(settings: &LoadSettings) -> Vec<TraceItem> {
    settings
        .items
        .iter()
        .copied()
        .filter(|i| !(settings.api_via_sites && matches!(i, TraceItem::Hggc | TraceItem::Cuda)))
        .collect()
}

impl Tracer {
    /// Loads and verifies every program and attaches the process tracepoints.
    pub fn load(load: &LoadSettings) -> Result<Self, TracerError> {
        if EBPF_OBJECT.is_empty() {
            return Err(TracerError::NoPrograms);
        }
        let items = &load.items;
        if load.event_buffer_bytes < 4096 || !load.event_buffer_bytes.is_power_of_two() {
            return Err(TracerError::BufferSize(load.event_buffer_bytes));
        }
        ensure_tracefs()?;
        // Attaching tracepoints and perf events takes the kernel mutex that
        // a background unlinker's removals hold: they pause meanwhile
        // (`unlinker.rs`).
        let _attaching = unlinker::attaching();
        let (perf, layout) = use_kernel_fallbacks()?;
        let mut ebpf = load_object(load, &layout)?;
        let uprobe_progs = load_uprobe_programs(&ebpf, perf)?;
        let user_probes = user_probes::UserProbes::load(
            &mut ebpf,
            EBPF_OBJECT,
            &load.probes,
            load.probe_backtrace,
        )?;
        let mut probes = Vec::new();
        let mut libraries = probed_files::Libraries::default();
        let osrt = if items.contains(&TraceItem::Osrt) {
            Some(osrt::Osrt::load(&mut ebpf, &mut probes, &mut libraries)?)
        } else {
            None
        };
        for name in [
            "sched_process_fork",
            "sched_process_exec",
            "sched_process_exit",
        ] {
            attach_sched_tracepoint(&mut ebpf, name)?;
        }
        let (settings_map, settings) = write_kernel_settings(&mut ebpf, load)?;
        let state = state::StateMap::new(
            ebpf.take_map("STATE")
                .ok_or(TracerError::MissingMap("STATE"))?,
        )?;
        let traced = take_map(&mut ebpf, "TRACED")?;
        let python = take_map(&mut ebpf, "PYTHON_PROCESSES")?;
        let kernel_log = kernel_log::KernelLog::start(&mut ebpf)?;
        let drops = take_map(&mut ebpf, "DROPS")?;
        let stopped = take_map(&mut ebpf, "STOPPED")?;
        let loads_unannounced = take_map(&mut ebpf, "LOADS_UNANNOUNCED")?;
        let watchdog = start_watchdog(&stopped);
        Ok(Self {
            task_states: read_task_states(),
            has_waking: layout.waking_pid != asys_common::LAYOUT_ABSENT,
            ebpf,
            traced,
            python,
            python_stacks: None,
            settings_map,
            settings,
            state,
            drops,
            requested: items.clone(),
            items: probed_items(load),
            probes,
            libraries,
            uprobe_progs,
            links: Vec::new(),
            loader_links: Vec::new(),
            stopped,
            loads_unannounced,
            watchdog,
            hggc_set: load.hggc_set,
            // System calls are there in every process.
            found_items: osrt.iter().map(|_| TraceItem::Osrt).collect(),
            injection_hooked: false,
            osrt,
            // The injection library serves hggc (HGPTI) and cuda (CUPTI).
            hooks_sites: items.contains(&TraceItem::Hggc) || items.contains(&TraceItem::Cuda),
            sites_for_cuda_only: items.contains(&TraceItem::Cuda)
                && !items.contains(&TraceItem::Hggc),
            _kernel_log: kernel_log,
            traced_insert_failed: 0,
            user_probes,
            unlinker_go: None,
        })
    }

    /// The ring buffer every event arrives on; taken once.
    pub fn take_events(&mut self) -> Result<RingBuf<MapData>, TracerError> {
        take_map(&mut self.ebpf, "EVENTS")
    }

    /// Starts tracing `pid` (and, through the fork tracepoint, its children).
    /// Its threads that exist already are added by their ids too: the
    /// context-switch probe knows a thread switching in by its id only, and
    /// only threads forked after this are added by the kernel.
    pub fn trace(&mut self, pid: u32, stop_on_load: bool) -> Result<(), TracerError> {
        // The stop at a library load lets probes go in before its code runs.
        // osrt places none (its lock waits come from the system calls): with
        // osrt alone, and no Python frames to set up, a process stops only
        // until asys has seen where its libc is (each stop costs it ms: 0.7 s
        // over PyTorch's imports here).
        let places_probes = self.requested.iter().any(|&i| i != TraceItem::Osrt);
        // `--probe-backtrace`: the stacks are unwound with the mappings
        // recorded at each load, which a short process may not outlive
        // unless it waits for asys there.
        let stop = match stop_on_load {
            false => 0,
            true if places_probes
                || self.python_stacks.is_some()
                || self.user_probes.wants_stacks() =>
            {
                asys_common::STOP_EVERY_LOAD
            }
            true if self.osrt.is_some() => asys_common::STOP_UNTIL_PLACED,
            true => 0,
        };
        let v = TracedProcess {
            stop_on_load: stop,
            stop_after_exec: stop,
        };
        if let Err(source) = self.traced.insert(pid, v, 0) {
            self.traced_insert_failed += 1;
            return Err(TracerError::Map {
                name: "TRACED",
                source,
            });
        }
        // After the process's own key: a thread started from now on passes
        // the fork tracepoint, which adds it.
        for tid in crate::process::procfs::task_ids(pid) {
            if tid != pid && self.traced.insert(tid, v, 0).is_err() {
                // Counted, not fatal: only its context switches in are lost.
                self.traced_insert_failed += 1;
            }
        }
        Ok(())
    }

    /// Keeps (`on`) or records (off: `--trace-vendor-internal true`) the
    /// calls a vendor's libraries make of their own items.
    pub fn filter_callers(&mut self, on: bool) -> Result<(), TracerError> {
        let families = if on {
            caller_ranges::filtered_families(&self.items)
        } else {
            0
        };
        self.update_settings(|s| s.caller_filter = families)
    }

    /// Tells the kernel which of `pid`'s executable ranges (start, end, the
    /// library mapped there) belong to libraries asys probes, for the caller
    /// filter. Called on every scan of its mappings (start, exec, dlopen).
    pub fn set_caller_ranges(
        &mut self,
        pid: u32,
        mapped: &[(u64, u64, LibraryId)],
    ) -> Result<(), TracerError> {
        if self.settings.caller_filter == 0 {
            return Ok(());
        }
        let ranges = mapped.iter().map(|&(start, end, id)| {
            let lib = self.libraries.get(id);
            asys_common::CallerRange {
                start,
                end,
                families: caller_ranges::own_families(&lib.path, &lib.items),
            }
        });
        let (value, cut) = caller_ranges::kernel_value(ranges);
        if cut > 0 {
            eprintln!(
                "asys: warning: process {pid} maps more than {} vendor library ranges; \
                 calls from {cut} of them count as the application's",
                asys_common::MAX_CALLER_RANGES
            );
        }
        let map_err = |source| TracerError::Map {
            name: "CALLER_RANGES",
            source,
        };
        let mut map: BpfHashMap<_, u32, asys_common::CallerRanges> = BpfHashMap::try_from(
            self.ebpf
                .map_mut("CALLER_RANGES")
                .ok_or(TracerError::MissingMap("CALLER_RANGES"))?,
        )
        .map_err(map_err)?;
        if value.count == 0 {
            // Nothing of a vendor here (yet): every call is the application's.
            let _ = map.remove(&pid);
            return Ok(());
        }
        map.insert(pid, value, 0).map_err(map_err)
    }

    /// Turns recording of calls and activity on or off; processes stay
    /// tracked either way (off until collection starts, e.g. `--delay`).
    pub fn set_recording(&mut self, on: bool) -> Result<(), TracerError> {
        self.state.set(KernelState::RECORDING, on as u64);
        Ok(())
    }

    /// Records context switches (`--cpuctxsw`): of the traced threads
    /// (`SCHED_PROCESS_TREE`) or of every thread (`SCHED_SYSTEM_WIDE`). The
    /// tracepoint is attached only when asked: it runs on every switch.
    pub fn record_sched(&mut self, mode: u64) -> Result<(), TracerError> {
        if mode == asys_common::SCHED_NONE {
            return Ok(());
        }
        attach_sched_tracepoint(&mut self.ebpf, "sched_switch")?;
        // Who woke the threads that left: on the same scope.
        if self.has_waking {
            attach_sched_tracepoint(&mut self.ebpf, "sched_waking")?;
        } else {
            eprintln!(
                "asys: warning: this kernel has no sched_waking tracepoint: wake-ups are not recorded"
            );
        }
        self.update_settings(|s| s.sched = mode)
    }

    /// What the kernel's `prev_state` bits mean.
    pub fn task_states(&self) -> &prev_state::TaskStates {
        &self.task_states
    }

    /// Samples the CPUs (`-s`): every `period_ns` of CPU time the thread on
    /// each CPU is sampled if it is in `scope` (`SCHED_PROCESS_TREE`: the
    /// traced threads; `SCHED_SYSTEM_WIDE`: any), with a copy of its user
    /// stack when `stacks`. A software clock event, so it works where the
    /// hardware counters are not exposed (virtual machines).
    pub fn record_samples(
        &mut self,
        scope: u64,
        period_ns: u64,
        stacks: bool,
    ) -> Result<(), TracerError> {
        use aya::programs::perf_event::{
            PerfEvent, PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent,
        };
        if scope == asys_common::SCHED_NONE {
            return Ok(());
        }
        const NAME: &str = "cpu_sample";
        let cpus = aya::util::online_cpus().map_err(|(_, e)| TracerError::Cpus(e))?;
        let prog: &mut PerfEvent = program(&mut self.ebpf, NAME)?;
        prog.load()
            .map_err(|source| TracerError::Program { name: NAME, source })?;
        for cpu in cpus {
            prog.attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Period(period_ns),
                false,
            )
            .map_err(|source| TracerError::Program { name: NAME, source })?;
        }
        self.update_settings(|s| {
            s.self_pid = std::process::id().into();
            s.sample_stack = stacks as u64;
            s.sample = scope;
        })
    }

    /// Capture ranges no longer start or stop recording (a session's
    /// collection ended); recording is off.
    pub fn disarm_capture(&mut self) -> Result<(), TracerError> {
        self.update_settings(|s| {
            s.capture_api = 0;
            s.capture_hgtx = 0;
        })?;
        self.set_recording(false)
    }

    /// Arms a capture range: `hgtx` (else the profiler API) opens and
    /// closes recording, `end` says what its end does.
    pub fn arm_capture(
        &mut self,
        hgtx: Option<&crate::apis::HgtxRange>,
        end: crate::settings::CaptureEnd,
    ) -> Result<(), TracerError> {
        let end_none = end == crate::settings::CaptureEnd::None;
        self.state.set(KernelState::CAPTURE_DONE, 0);
        self.update_settings(|s| {
            s.capture_end_none = end_none as u64;
            s.capture_repeat = end.reopens() as u64;
        })?;
        match hgtx {
            Some(range) => self.arm_capture_hgtx(range),
            None => self.update_settings(|s| s.capture_api = 1),
        }
    }

    /// Stops recording, and keeps capture ranges from starting it again
    /// (`--max-report-size`).
    pub fn stop_recording_for_good(&mut self) -> Result<(), TracerError> {
        self.state.set(KernelState::CAPTURE_DONE, 1);
        self.set_recording(false)
    }

    /// `-c hgtx -p TEMPLATE`: the matching hgtx range opens and closes
    /// recording in the kernel (the rest is [`Self::arm_capture`]'s).
    fn arm_capture_hgtx(&mut self, range: &crate::apis::HgtxRange) -> Result<(), TracerError> {
        use crate::apis::HgtxDomain;
        let map_err = |source| TracerError::Map {
            name: "CAPTURE_NAMES",
            source,
        };
        let mut names: aya::maps::Array<_, [u8; asys_common::TEXT_LEN]> =
            aya::maps::Array::try_from(
                self.ebpf
                    .map_mut("CAPTURE_NAMES")
                    .ok_or(TracerError::MissingMap("CAPTURE_NAMES"))?,
            )
            .map_err(map_err)?;
        let padded = |s: &str| {
            let mut b = [0u8; asys_common::TEXT_LEN];
            b[..s.len()].copy_from_slice(s.as_bytes());
            b
        };
        names.set(0, padded(&range.name), 0).map_err(map_err)?;
        let mode = match &range.domain {
            HgtxDomain::Default => asys_common::DOMAIN_DEFAULT,
            HgtxDomain::Any => asys_common::DOMAIN_ANY,
            HgtxDomain::Named(d) => {
                names.set(1, padded(d), 0).map_err(map_err)?;
                asys_common::DOMAIN_NAMED
            }
        };
        self.update_settings(|s| {
            s.capture_domain_mode = mode;
            s.capture_hgtx = 1;
        })
    }

    /// Restricts system-wide tracing (and system-wide samples) to the
    /// processes of `filter`'s cgroup and those below it, checked in the
    /// kernel by cgroup id (`--cgroup`, `--container`).
    pub fn filter_cgroup(
        &mut self,
        filter: &crate::process::cgroup::CgroupFilter,
    ) -> Result<(), TracerError> {
        self.update_settings(|s| {
            s.cgroup_id = filter.id;
            s.cgroup_level = filter.level.into();
        })
    }

    /// Counts every process on the machine as traced (`-s system-wide`).
    pub fn trace_system_wide(&mut self) -> Result<(), TracerError> {
        self.update_settings(|s| s.system_wide = 1)
    }

    /// Changes the settings and hands the kernel the whole new copy: only
    /// userspace writes them, so the copy here is always the current one.
    fn update_settings(&mut self, change: impl FnOnce(&mut Settings)) -> Result<(), TracerError> {
        let mut next = self.settings;
        change(&mut next);
        self.settings_map
            .set(0, next, 0)
            .map_err(|source| TracerError::Map {
                name: "SETTINGS",
                source,
            })?;
        self.settings = next;
        Ok(())
    }

    /// Calls recorded as started in `[start, end]` (CLOCK_MONOTONIC ns) whose
    /// return has not been seen yet, over every thread's stack of calls in
    /// flight: what closing a window waits for.
    pub fn calls_in_flight(&self, start: u64, end: u64) -> Result<u64, TracerError> {
        let map = self
            .ebpf
            .map("THREADS")
            .ok_or(TracerError::MissingMap("THREADS"))?;
        let threads: BpfHashMap<&MapData, u32, asys_common::ThreadCalls> =
            BpfHashMap::try_from(map).map_err(|source| TracerError::Map {
                name: "THREADS",
                source,
            })?;
        let mut open = 0;
        // A thread that exits while this iterates is skipped: its calls
        // will never return anyway.
        for (_, calls) in threads.iter().filter_map(Result::ok) {
            let depth = calls.depth.min(asys_common::MAX_CALL_DEPTH) as usize;
            open += calls.entries[..depth]
                .iter()
                // Placeholders (not recording at their entry, a vendor's
                // own call) were never going to be reported.
                .filter(|e| e.recorded != 0 && (start..=end).contains(&e.start))
                .count() as u64;
        }
        Ok(open)
    }

    /// Samples read Python frames from now on (`--python-sampling true`),
    /// of the processes passed to [`Tracer::read_python`], each thread's at
    /// most `hz` times a second (`--python-sampling-frequency`), with
    /// samples every `period_ns` of CPU time.
    pub fn read_python_stacks(&mut self, hz: u32, period_ns: u64) {
        // At or above the sampling rate the limit would never bite; no
        // lookup is spent on it then.
        let interval = 1_000_000_000 / u64::from(hz.max(1));
        self.python_stacks = Some(if interval <= period_ns { 0 } else { interval });
    }

    /// The least time between two Python stacks of a thread, when they are
    /// read at all.
    pub fn python_stacks(&self) -> Option<u64> {
        self.python_stacks
    }

    /// The sample program reads the Python frames of `pid`'s threads, as
    /// `process` says where.
    pub fn read_python(&mut self, pid: u32, process: PythonProcess) -> Result<(), TracerError> {
        self.python
            .insert(pid, process, 0)
            .map_err(|source| TracerError::Map {
                name: "PYTHON_PROCESSES",
                source,
            })
    }

    /// The sample program no longer reads `pid`'s Python frames (it exec'd
    /// another image).
    pub fn forget_python(&mut self, pid: u32) {
        let _ = self.python.remove(&pid);
    }

    /// Stops tracing `pid`; a process that already exited is fine.
    pub fn untrace(&mut self, pid: u32) {
        let _ = self.traced.remove(&pid);
        let _ = self.python.remove(&pid);
        // Its threads' own keys (see trace): the kernel removes them only
        // while the process is traced.
        for tid in crate::process::procfs::task_ids(pid) {
            let _ = self.traced.remove(&tid);
        }
    }

    pub fn traced_pids(&self) -> Vec<u32> {
        self.traced.keys().filter_map(Result::ok).collect()
    }

    /// Removes the loader hooks and continues every process they stopped:
    /// once collection is over nothing needs new probes, and a process left
    /// stopped would not act on the signal that ends it (`--kill`, Ctrl+C).
    /// Closing the links waits for hooks still running, so what STOPPED
    /// holds afterwards is complete.
    pub fn release_loader(&mut self) {
        close_in_parallel(std::mem::take(&mut self.loader_links));
        let left: Vec<u32> = self.stopped.keys().filter_map(Result::ok).collect();
        for pid in left {
            self.resume(pid);
        }
    }

    /// Continues `pid`, which the loader hook stopped. The note in STOPPED
    /// goes before the signal: once continued, the process may stop at its
    /// next load (a dlopen stops at its start and again at its end), and
    /// if the ring is full then, that stop's note ([`STOPPED_UNANNOUNCED`])
    /// is all that tells of it; a removal after the signal could take it.
    /// Should asys die between the two, the watchdog would no longer see
    /// the pid: a window of one system call, against one of the process's
    /// next load.
    ///
    /// [`STOPPED_UNANNOUNCED`]: asys_common::STOPPED_UNANNOUNCED
    pub fn resume(&mut self, pid: u32) {
        if pid == asys_common::STOPPED_DISARMED {
            // Not a process: kill(0) would signal asys's own process group.
            return;
        }
        let _ = self.stopped.remove(&pid);
        // SAFETY: kill has no memory effects; a pid that is gone only makes
        // it fail, which is fine (nothing is left to continue).
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    }

    /// Takes the processes whose load the hook could neither announce nor
    /// stop for (the ring was full; system-wide, most likely): the
    /// collector scans them late, as their events would have had it.
    pub fn take_unannounced_loads(&mut self) -> Vec<u32> {
        let pids: Vec<u32> = self
            .loads_unannounced
            .keys()
            .filter_map(Result::ok)
            .collect();
        for pid in &pids {
            let _ = self.loads_unannounced.remove(pid);
        }
        pids
    }

    /// The processes the loader hook stopped at a load that no event
    /// announced (the ring was full): the collector probes and continues
    /// them itself.
    pub fn unannounced_stops(&self) -> Vec<u32> {
        self.stopped
            .iter()
            .filter_map(Result::ok)
            .filter(|&(pid, v)| {
                pid != asys_common::STOPPED_DISARMED && v == asys_common::STOPPED_UNANNOUNCED
            })
            .map(|(pid, _)| pid)
            .collect()
    }

    /// Attaches the loader hook to the dynamic loader at `path`, a path of
    /// asys's own mount namespace (the launched program's interpreter),
    /// once per file.
    pub fn hook_loader(&mut self, path: &std::path::Path) -> Result<(), TracerError> {
        // The launched program's interpreter: its path is the program's
        // to name, so it is opened as any such file (links followed, as
        // PT_INTERP's usually is one, but never blocking).
        let Ok(opened) =
            asys_report::untrusted::open::open(path, &asys_report::untrusted::open::Policy::NAMED)
        else {
            return Ok(());
        };
        let (id, _) = self
            .libraries
            .intern(opened.key, path.to_path_buf(), opened.file);
        let hooked = self.hook_loader_of(id);
        self.libraries.get_mut(id).close_if_unused();
        hooked
    }

    /// Attaches the loader hook to library `id` if it is a dynamic loader
    /// and not hooked yet.
    fn hook_loader_of(&mut self, id: LibraryId) -> Result<(), TracerError> {
        let lib = self.libraries.get(id);
        if lib.loader_hooked {
            return Ok(());
        }
        let Some(path) = lib.attach_path() else {
            return Ok(());
        };
        let elf = crate::elf::ElfFile::read(&path)?;
        let Some(offset) = elf.dynamic_symbol_offset("_dl_debug_state")? else {
            return Ok(());
        };
        let p = &self.uprobe_progs;
        let links = p.attach(&p.loader_hook, &path, &[offset], &[0], false)?;
        self.loader_links.extend(links);
        let lib = self.libraries.get_mut(id);
        lib.loader_hooked = true;
        lib.attached();
        Ok(())
    }

    /// Looks at one file that process `pid` maps (`m`), once per file: if it
    /// is a runtime of a traced item its functions of that item are probed;
    /// if it is a dynamic loader or asys's injection library it is hooked.
    /// The file is opened as the process sees it (`mapped_file`), so a
    /// process in another mount namespace is probed in its own library.
    pub fn examine(
        &mut self,
        pid: u32,
        m: &crate::process::procfs::MapsEntry,
    ) -> Result<Option<LibraryId>, TracerError> {
        // The injection library's sites, where this process wants them. Its
        // NVTX functions are probed whatever the sites (an `nvtx` range
        // comes through them in any process that loaded the library as its
        // NVTX tool).
        let sites_here = self.hooks_sites
            && is_injection_library(&m.path)
            && !(self.sites_for_cuda_only && is_hggc_only_process(pid));
        let known = m.key().and_then(|k| self.libraries.lookup(k));
        if let Some(id) = known
            && (!sites_here || self.libraries.get(id).sites_hooked)
        {
            return Ok(Some(id));
        }
        let Ok(opened) = crate::process::mapped_file::open(pid, m) else {
            // Gone since it was mapped, or not the file mapped any more.
            return Ok(None);
        };
        let (id, fresh) = self
            .libraries
            .intern(opened.key, m.path.clone(), opened.file);
        if let Some(key) = m.key() {
            self.libraries.alias(key, id);
        }
        let examined = if fresh {
            self.examine_new(id, sites_here)
        } else if sites_here {
            // Seen first in a process that did not want its sites.
            self.hook_sites_of(id)
        } else {
            Ok(())
        };
        // Whatever happened, a file that got no probe is not kept open.
        self.libraries.get_mut(id).close_if_unused();
        examined.map(|()| Some(id))
    }

    /// [`Self::examine`] for a file that process `pid` maps (its executable
    /// `mapping`): for osrt, where it lies is noted if it has lock
    /// functions (libc) or is the dynamic loader.
    pub fn examine_in(
        &mut self,
        pid: u32,
        mapping: &crate::process::procfs::MapsEntry,
    ) -> Result<Option<LibraryId>, TracerError> {
        let id = self.examine(pid, mapping)?;
        if let (Some(id), Some(osrt)) = (id, self.osrt.as_mut()) {
            if self.libraries.get(id).loader_hooked {
                osrt.loader_at(pid, [mapping.start, mapping.end]);
            }
            if osrt.link(pid, mapping, id) {
                self.lock_library_placed(pid);
            }
        }
        Ok(id)
    }

    /// osrt alone: `pid`'s lock library is placed, its loads need no stop
    /// until its next exec.
    fn lock_library_placed(&mut self, pid: u32) {
        if let Ok(mut v) = self.traced.get(&pid, 0)
            && v.stop_on_load == asys_common::STOP_UNTIL_PLACED
        {
            v.stop_on_load = 0;
            let _ = self.traced.insert(pid, v, 0);
        }
    }

    /// A fork (or a thread) of `parent`: the child maps what its parent
    /// does, osrt's lock libraries too, until its exec.
    pub fn forked(&mut self, parent: u32, child: u32) {
        if let Some(osrt) = self.osrt.as_mut() {
            osrt.forked(parent, child);
        }
    }

    /// `pid` executed a new image: what osrt knew of its old one is gone.
    pub fn executed(&mut self, pid: u32) {
        if let Some(osrt) = self.osrt.as_mut() {
            osrt.executed(pid);
        }
    }

    /// A lock wait as the call of the lock function that waited (osrt), or
    /// None if it is no call of the program's (see [`osrt::Osrt::name_wait`]).
    pub fn name_lock_wait(
        &self,
        ev: &asys_common::LockWaitEvent,
    ) -> Option<asys_common::ApiCallEvent> {
        self.osrt.as_ref()?.name_wait(ev)
    }

    /// Hooks the sites of the injection library `id`, examined before
    /// without them.
    fn hook_sites_of(&mut self, id: LibraryId) -> Result<(), TracerError> {
        let Some(path) = self.libraries.get(id).attach_path() else {
            return Ok(());
        };
        let Ok(elf) = crate::elf::ElfFile::read(&path) else {
            return Ok(());
        };
        self.hook_sites(&elf, id, &path)
    }

    fn examine_new(&mut self, id: LibraryId, sites: bool) -> Result<(), TracerError> {
        let Some(path) = self.libraries.get(id).attach_path() else {
            return Ok(());
        };
        let path = path.as_path();
        let Ok(elf) = crate::elf::ElfFile::read(path) else {
            // Not an ELF file we can read (e.g. a data file mapped executable).
            return Ok(());
        };
        if elf.dynamic_symbol_offset("_dl_debug_state")?.is_some() {
            self.hook_loader_of(id)?;
        }
        if sites {
            self.hook_sites(&elf, id, path)?;
        }
        // The name the process mapped it by (`path` is the descriptor's).
        let file_name = self
            .libraries
            .get(id)
            .path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let mut probed = 0;
        for item in self.items.clone() {
            let mut functions = match item.functions() {
                Functions::Prefixed(prefixes) => elf.exported_functions(prefixes)?,
                Functions::Named(names) => elf.exported_functions_named(names)?,
            };
            let only_here = item.library_functions(&file_name);
            if !only_here.is_empty() {
                functions.extend(elf.exported_functions(only_here)?);
                functions.sort_by(|a, b| a.name.cmp(&b.name));
                functions.dedup_by(|a, b| a.name == b.name);
            }
            if item == TraceItem::Hggc {
                functions.retain(|f| self.hggc_set.wants_api(&f.name));
            }
            if let (TraceItem::Osrt, Some(osrt)) = (item, self.osrt.as_mut()) {
                // Placed per process, by examine_in; nothing is probed in
                // it (lock waits come from the system calls).
                if osrt.add_library(id, path, functions, &mut self.probes) > 0 {
                    self.found_items.insert(item);
                }
                continue;
            }
            probed += self.attach_functions(item, id, path, functions)?;
        }
        let lib = self.libraries.get_mut(id);
        lib.build_id = elf.build_id();
        lib.probed_functions = probed;
        if probed > 0 {
            lib.attached();
        }
        Ok(())
    }

    /// Probes `functions` of `path` for `item`: one entry and one return
    /// uprobe-multi link, for every process (the kernel filters by TRACED).
    fn attach_functions(
        &mut self,
        item: TraceItem,
        library: LibraryId,
        path: &std::path::Path,
        functions: Vec<crate::elf::ExportedFunction>,
    ) -> Result<usize, TracerError> {
        let (mut offsets, mut cookies) = (Vec::new(), Vec::new());
        let driver = path
            .file_name()
            .is_some_and(|n| crate::apis::is_cuda_driver(&n.to_string_lossy()));
        for f in functions {
            let signature = crate::apis::signature_in(item, &item.api_name(&f.name));
            let id = u32::try_from(self.probes.len()).expect("fewer than 2^32 probes");
            let mut cookie =
                Cookie::new(id, item.family_id()).with(argument_flags(item, &signature));
            if signature.reads_out0() {
                cookie = cookie.with(Cookie::READ_OUT0);
            }
            if item == TraceItem::Hggc || (item == TraceItem::Cuda && !driver) {
                // The runtime reports its API to the injection library
                // (HGPTI's callbacks, CUPTI's runtime-API callbacks; the
                // CUDA driver API has none of ours, so its calls, made
                // inside runtime calls, must not take their ids).
                cookie = cookie.with(Cookie::CORRELATED);
            }
            match f.name.as_str() {
                "hggcProfilerStart" | "cudaProfilerStart" => {
                    cookie = cookie.with(Cookie::CAPTURE_START)
                }
                "hggcProfilerStop" | "cudaProfilerStop" => {
                    cookie = cookie.with(Cookie::CAPTURE_STOP)
                }
                _ => {}
            }
            if matches!(item, TraceItem::Hgtx | TraceItem::Nvtx) {
                cookie = cookie.with(crate::apis::hgtx_capture_flags(&f.name));
            }
            if let Some(t) = signature.text {
                cookie = cookie.with_text(t.index, t.attributes, t.wide);
            }
            offsets.push(f.file_offset);
            cookies.push(cookie.0);
            self.probes.push(ProbeInfo {
                item,
                name: item.api_name(&f.name),
                library,
                signature,
            });
        }
        if !offsets.is_empty() {
            self.found_items.insert(item);
            self.libraries.get_mut(library).items.push(item);
            let p = &self.uprobe_progs;
            let entry = p.attach(&p.api_entry, path, &offsets, &cookies, false)?;
            let exit = p.attach(&p.api_exit, path, &offsets, &cookies, true)?;
            self.links.extend(entry.into_iter().chain(exit));
        }
        Ok(offsets.len())
    }

    /// Attaches the site programs if `elf` is asys's injection library.
    fn hook_sites(
        &mut self,
        elf: &crate::elf::ElfFile,
        library: LibraryId,
        path: &std::path::Path,
    ) -> Result<(), TracerError> {
        let sites = elf.exported_functions(&[""])?;
        for (name, prog) in SITES.iter().zip([
            &self.uprobe_progs.activity_site,
            &self.uprobe_progs.api_site,
            &self.uprobe_progs.lost_site,
            &self.uprobe_progs.name_site,
            &self.uprobe_progs.call_site,
        ]) {
            if let Some(site) = sites.iter().find(|f| f.name == *name) {
                let links =
                    self.uprobe_progs
                        .attach(prog, path, &[site.file_offset], &[0], false)?;
                self.links.extend(links);
                self.injection_hooked = true;
                self.libraries.get_mut(library).attached();
                self.libraries.get_mut(library).sites_hooked = true;
            }
        }
        Ok(())
    }

    /// Requested items for which no traced process mapped a library with
    /// their functions.
    pub fn items_not_found(&self) -> Vec<TraceItem> {
        self.items
            .iter()
            .copied()
            .filter(|i| !self.found_items.contains(i))
            .collect()
    }

    /// Whether `item` was asked for. The injection library's sites serve
    /// hggc and cuda alike, in every process that loaded it: what they
    /// report of an item not asked for is not recorded.
    pub fn traces(&self, item: TraceItem) -> bool {
        self.requested.contains(&item)
    }

    /// Which hggc APIs are wanted (`--hggc-trace-set`).
    pub fn hggc_set(&self) -> &crate::apis::HggcTraceSet {
        &self.hggc_set
    }

    /// Whether an injection library's sites were found and probed.
    pub fn injection_hooked(&self) -> bool {
        self.injection_hooked
    }

    /// What a report needs to say about the tracer, taken before detaching.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            drops: self.drops(),
            kernel_skipped: self.skipped_runs(),
            libraries: self.probed_libraries(),
            library_table: self.library_table(),
            items_not_found: self
                .items_not_found()
                .iter()
                .map(|i| i.name().to_string())
                .collect(),
            device_activity: self.injection_hooked(),
        }
    }

    /// Removes every probe and unloads the programs.
    pub fn detach(self) {
        drop(self);
    }

    /// What a user-defined probe's id (`--probe`) stands for.
    pub fn user_probe(&self, id: u32) -> Option<&user_probes::ProbeSite> {
        self.user_probes.site(id)
    }

    pub fn probe(&self, cookie: u64) -> Option<&ProbeInfo> {
        self.probes.get(Cookie(cookie).id() as usize)
    }

    pub fn library(&self, id: LibraryId) -> &ProbedLibrary {
        self.libraries.get(id)
    }

    /// Libraries with probes, and how many functions each.
    pub fn probed_libraries(&self) -> BTreeMap<String, usize> {
        self.libraries
            .iter()
            .filter(|l| l.probed_functions > 0)
            .map(|l| (l.path.display().to_string(), l.probed_functions))
            .collect()
    }

    /// The `libraries` table: every library with probes, by the id its
    /// calls' rows carry.
    pub fn library_table(&self) -> Vec<asys_report::report::rows::LibraryRow> {
        self.libraries
            .iter()
            .enumerate()
            .filter(|(_, lib)| !lib.items.is_empty())
            .map(|(id, lib)| asys_report::report::rows::LibraryRow {
                id: id as LibraryId,
                path: lib.path.display().to_string(),
                build_id: lib.build_id.clone(),
                items: lib
                    .items
                    .iter()
                    .map(|i| i.name())
                    .collect::<Vec<_>>()
                    .join(","),
                functions: u32::try_from(lib.probed_functions).unwrap_or(u32::MAX),
            })
            .collect()
    }

    /// Lost events per source, summed over CPUs.
    pub fn drops(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for source in DropSource::ALL {
            let n = self
                .drops
                .get(&(source as u32), 0)
                .map(|v| v.iter().sum())
                .unwrap_or(0);
            out.insert(source.name().to_string(), n);
        }
        *out.entry(DropSource::TracedInsertFailed.name().to_string())
            .or_default() += self.traced_insert_failed;
        out
    }

    /// Runs of each program the kernel skipped (`prog_misses.rs`): each a
    /// lost switch, wake-up, sample or call.
    pub fn skipped_runs(&self) -> BTreeMap<String, u64> {
        use std::os::fd::AsFd;
        let loaded = self
            .ebpf
            .programs()
            .filter_map(|(name, p)| Some((name, p.fd().ok()?.as_fd())));
        prog_misses::by_program(loaded.chain(self.uprobe_progs.named()))
    }
}

impl Drop for Tracer {
    /// A process the loader hook stopped waits for asys to continue it; one
    /// stopped after the collector's last drain (a child starting just as the
    /// application or the session ends) would wait forever.
    ///
    /// Every other link, program and perf event is removed by a background
    /// process once the tracer is gone (`unlinker.rs`): each removal waits
    /// for a grace period, and perf-event uprobes one at a time under a
    /// kernel mutex, which took most of a short run's wall time and 389 s of
    /// a PyTorch run's on the fallback path. Recording is off by then.
    fn drop(&mut self) {
        // Loader hooks first, then every process they stopped: before
        // anything else goes, and before the unlinker below takes copies of
        // the descriptors (a loader hook alive there could stop a process
        // that nobody would continue).
        self.release_loader();
        // Nothing is left stopped: the watchdog can go.
        if let Some(mut w) = self.watchdog.take() {
            w.dismiss();
        }
        let mut links = std::mem::take(&mut self.links);
        // `--probe`'s links go the same way (perf events: a grace period
        // each); an SDT semaphore is cleared when its probe is removed.
        links.extend(self.user_probes.take_links());
        let n = links.len();
        let perf = self.uprobe_progs.perf.is_some() && n >= unlinker::HAND_OFF_MIN;
        match unlinker::hand_off(links) {
            Ok((pid, go)) => {
                self.unlinker_go = Some(go);
                if perf {
                    eprintln!(
                        "asys: {n} perf-event uprobes (this kernel's fallback) are being \
                         removed by a background process, pid {pid}, about 0.1 s each: the \
                         kernel removes them one at a time"
                    );
                }
            }
            Err((links, e)) => {
                if perf {
                    eprintln!(
                        "asys: removing {n} perf-event uprobes here, about 0.1 s each (no \
                         background process: {e})"
                    );
                }
                close_on_threads(links);
            }
        }
    }
}

/// Closes `links` on at most 64 threads taking them off one queue: with
/// perf-event uprobes (`perf-uprobe`) there is a link per probe, and a
/// vendor library has thousands of functions.
fn close_on_threads(links: Vec<std::os::fd::OwnedFd>) {
    const UNLINK_THREADS: usize = 64;
    let threads = links.len().min(UNLINK_THREADS);
    let queue = std::sync::Mutex::new(links);
    std::thread::scope(|scope| {
        let queue = &queue;
        for _ in 0..threads {
            let _ = std::thread::Builder::new()
                .name("asys-unlink".into())
                .spawn_scoped(scope, move || {
                    // Each fd is closed outside the lock.
                    while let Some(link) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop() {
                        drop(link);
                    }
                });
        }
    });
    // Links a thread could not take are closed here, with the queue.
}

/// Closes `fds` at once, one thread each, and returns when all are closed.
/// Closing a uprobe-multi link waits for an RCU grace period; closed one
/// after another, N links cost N grace periods, in parallel about one.
fn close_in_parallel(fds: Vec<std::os::fd::OwnedFd>) {
    if fds.len() <= 1 {
        return drop(fds);
    }
    std::thread::scope(|scope| {
        for fd in fds {
            // On a spawn failure the closure, and with it the fd, is
            // dropped (closed) right here.
            let _ = std::thread::Builder::new()
                .name("asys-unlink".into())
                .spawn_scoped(scope, move || drop(fd));
        }
    });
}

/// The cookie flags that say which arguments the kernel reads for a
/// function: register arguments only when the signature decodes one (or
/// the family's statistics read raw arguments), the two stack slots only
/// when an argument index reaches them. A call with neither travels as a
/// short event, and its report row has no raw arguments (they would be
/// whatever the registers held).
fn argument_flags(item: TraceItem, signature: &Signature) -> u64 {
    // hgtx/NVTX statistics read raw arguments (handles, ids); libc calls and
    // collectives keep theirs, as every call of them always did.
    let raw_args_read = matches!(
        item,
        TraceItem::Hgtx | TraceItem::Nvtx | TraceItem::Osrt | TraceItem::Pccl | TraceItem::Nccl
    );
    let ptr = signature.ptr.map(|p| match p {
        crate::apis::PtrArg::Arg(i) => i,
        crate::apis::PtrArg::Out0 => 0,
    });
    let highest = [
        signature.bytes,
        signature.kind,
        signature.stream,
        signature.device,
        ptr,
        signature.text.map(|t| t.index),
        signature.count_dtype.map(|(c, d)| c.max(d)),
        // hggcLaunchKernel's sharedMem is argument 7, on the stack.
        signature.launch.then_some(6),
    ]
    .into_iter()
    .flatten()
    .max();
    match highest {
        _ if raw_args_read => Cookie::ARGS | Cookie::STACK_ARGS,
        Some(i) if i >= 6 => Cookie::ARGS | Cookie::STACK_ARGS,
        Some(_) => Cookie::ARGS,
        None => 0,
    }
}

/// What the kernel offers, the fallbacks known before any probe is attached,
/// and the tracepoint layout for the programs (the running kernel's, from
/// tracefs, or from debugfs where tracefs is not mounted or
/// `debugfs-format` is forced).
fn kernel_support() -> Result<
    (
        features::KernelSupport,
        std::collections::BTreeSet<features::Fallback>,
        asys_common::TracepointLayout,
    ),
    TracerError,
> {
    use features::Fallback;
    use tracepoint_format::{DEBUGFS_TRACING, FormatError, TRACEFS};
    let support = features::KernelSupport::detect(true)?;
    support.require_floor()?;
    let mut fallbacks = std::collections::BTreeSet::new();
    let debugfs = std::path::Path::new(DEBUGFS_TRACING);
    let mut layout = if support.forced.contains(&Fallback::DebugfsFormat) {
        fallbacks.insert(Fallback::DebugfsFormat);
        layout::read_under(debugfs)?
    } else {
        match layout::read_under(std::path::Path::new(TRACEFS)) {
            Err(FormatError::Read { .. }) if debugfs.join("events").exists() => {
                fallbacks.insert(Fallback::DebugfsFormat);
                layout::read_under(debugfs)?
            }
            other => other?,
        }
    };
    // Kernels before sched_process_exit had group_dead: the exit program
    // reads current->signal->live at offsets from BTF, or without BTF takes
    // the main thread's exit as the process's.
    let by_main_thread = support.forced.contains(&Fallback::ExitByMainThread);
    let by_signal_live = support.forced.contains(&Fallback::ExitBySignalLive);
    if by_main_thread || by_signal_live || layout.exit_group_dead == asys_common::LAYOUT_ABSENT {
        layout.exit_group_dead = asys_common::LAYOUT_ABSENT;
        let from_btf = if by_main_thread {
            None
        } else {
            match btf::Btf::read(btf::VMLINUX).and_then(|b| layout::with_signal_live(layout, &b)) {
                Ok(l) => Some(l),
                Err(e) if by_signal_live => return Err(e.into()),
                Err(_) => None,
            }
        };
        match from_btf {
            Some(l) => {
                layout = l;
                fallbacks.insert(Fallback::ExitBySignalLive);
            }
            None => {
                fallbacks.insert(Fallback::ExitByMainThread);
            }
        }
    }
    Ok((support, fallbacks, layout))
}

/// Loads the program `name` and attaches it to the tracepoint sched/`name`;
/// the program keeps its link until the tracer is dropped.
fn attach_sched_tracepoint(ebpf: &mut Ebpf, name: &'static str) -> Result<(), TracerError> {
    let prog: &mut TracePoint = program(ebpf, name)?;
    prog.load()
        .map_err(|source| TracerError::Program { name, source })?;
    prog.attach("sched", name)
        .map_err(|source| TracerError::Program { name, source })?;
    Ok(())
}

fn program<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut T, TracerError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let prog = ebpf.program_mut(name).ok_or(TracerError::Program {
        name,
        source: aya::programs::ProgramError::UnexpectedProgramType,
    })?;
    prog.try_into()
        .map_err(|source| TracerError::Program { name, source })
}

fn take_map<T>(ebpf: &mut Ebpf, name: &'static str) -> Result<T, TracerError>
where
    T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf.take_map(name).ok_or(TracerError::MissingMap(name))?;
    T::try_from(map).map_err(|source| TracerError::Map { name, source })
}

/// aya attaches tracepoints through tracefs; mount it if nobody has.
fn ensure_tracefs() -> Result<(), TracerError> {
    let events = std::path::Path::new("/sys/kernel/tracing/events");
    if events.exists() {
        return Ok(());
    }
    // Several asys processes may start at once on a machine where nobody has
    // mounted tracefs yet: the first to take the lock mounts it, the others
    // then find it there (a second mount on top would fail with EBUSY or
    // stack a useless mount).
    let dir = std::fs::File::open("/sys/kernel/tracing").map_err(TracerError::Tracefs)?;
    // flock, released when `dir` closes.
    dir.lock().map_err(TracerError::Tracefs)?;
    if events.exists() {
        return Ok(());
    }
    // SAFETY: every pointer is a NUL-terminated literal or null (no mount
    // data), valid for the call.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let error = std::io::Error::last_os_error();
        if !events.exists() {
            return Err(TracerError::Tracefs(error));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::signature_in;

    #[test]
    fn only_signatures_that_read_arguments_get_them() {
        let flags = |item, name| argument_flags(item, &signature_in(item, name));
        assert_eq!(flags(TraceItem::Hggc, "hggcGetLastError"), 0);
        assert_eq!(flags(TraceItem::Hggc, "hggcDeviceSynchronize"), 0);
        assert_eq!(flags(TraceItem::Hggc, "hggcMalloc"), Cookie::ARGS);
        assert_eq!(flags(TraceItem::Hggc, "hggcMemcpyAsync"), Cookie::ARGS);
        // sharedMem, argument 7, is on the stack.
        assert_eq!(
            flags(TraceItem::Hggc, "hggcLaunchKernel"),
            Cookie::ARGS | Cookie::STACK_ARGS
        );
        // Families whose statistics read raw arguments keep all of them.
        assert_eq!(
            flags(TraceItem::Hgtx, "hgtxRangePop"),
            Cookie::ARGS | Cookie::STACK_ARGS
        );
    }

    #[test]
    fn the_injection_library_is_known_by_name_and_hggc_processes_by_their_runtime() {
        assert!(is_injection_library(std::path::Path::new(
            "/opt/asys/libasys_inject.so"
        )));
        assert!(!is_injection_library(std::path::Path::new(
            "/usr/lib/libcuda.so.1"
        )));
        // This test process maps no hggc runtime; a pid that is gone maps
        // nothing.
        assert!(!is_hggc_only_process(std::process::id()));
        assert!(!is_hggc_only_process(u32::MAX));
    }
}
