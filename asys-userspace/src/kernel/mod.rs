//! The kernel side as userspace sees it: loads the eBPF object, keeps the set
//! of traced processes, and attaches probes to runtime libraries as processes
//! map them.
pub mod btf;
mod caller_ranges;
pub mod control;
pub mod features;
mod kernel_log;
pub mod layout;
pub mod library_probes;
pub mod multi;
pub mod osrt;
pub mod perf_uprobe;
pub mod prev_state;
pub mod probed_files;
pub mod processes;
mod prog_misses;
pub mod sigcont_watchdog;
mod state;
pub mod stops;
pub mod syscalls;
pub mod tracepoint_format;
mod unlinker;
pub mod user_probes;

use std::collections::BTreeMap;

use asys_common::DropSource;
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf},
    programs::TracePoint,
};

use crate::apis::Signature;
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

/// The loaded programs and everything userspace holds of them, by concern:
/// each part owns its maps and links. Fields drop in order, after
/// [`Drop::drop`] has closed the loader hooks, continued what they stopped
/// and handed the other links to the unlinker.
pub struct Tracer {
    ebpf: Ebpf,
    /// The programs' settings and the recording and capture state.
    pub control: control::Control,
    /// The traced processes, how they stop at a load, and Python's.
    pub processes: processes::Processes,
    /// The probes placed in libraries, their table and links.
    pub probes: library_probes::LibraryProbes,
    /// The processes the loader hook stopped, and the watchdog.
    pub stops: stops::Stops,
    /// `--probe`: the user-defined probes and their links.
    user_probes: user_probes::UserProbes,
    sched: SchedFacts,
    drops: PerCpuArray<MapData, u64>,
    /// Prints what the programs log; dropped after the links are closed.
    _kernel_log: kernel_log::KernelLog,
    /// The background unlinker waits for this to close (see
    /// `unlinker.rs`): the last field, so it closes after every other
    /// descriptor of the tracer (fields drop in order).
    unlinker_go: Option<std::os::fd::OwnedFd>,
}

/// What the sched programs need to know of this kernel.
struct SchedFacts {
    /// What the kernel's `prev_state` bits mean (its sched_switch format).
    task_states: prev_state::TaskStates,
    /// Whether the kernel has `sched_waking` (4.3 and later).
    has_waking: bool,
}

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
    /// Which Python stack walks the programs hold
    /// (`asys_common::PYTHON_WALK_*`): only those asked for are loaded,
    /// so that a run without them verifies as before on every kernel.
    pub python_walks: u32,
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
        .override_global("TP_LAYOUT", layout, true)
        .override_global("PYTHON_WALKS", &settings.python_walks, true);
    if !settings.items.contains(&TraceItem::Osrt) {
        // Preallocated, and unused without osrt.
        loader.map_max_entries("OSRT_THREADS", 1);
        loader.map_max_entries("OSRT_LIBC", 1);
    }
    Ok(loader.load(EBPF_OBJECT)?)
}

/// What the kernel's `prev_state` bits mean, from its sched_switch format
/// (the default encoding where it cannot be read).
fn read_task_states() -> prev_state::TaskStates {
    tracepoint_format::TracepointFormat::read("sched", "sched_switch")
        .ok()
        .and_then(|f| prev_state::TaskStates::from_print_fmt(f.print_fmt.as_deref()?))
        .unwrap_or_default()
}

impl Tracer {
    /// Loads and verifies every program and attaches the process tracepoints.
    pub fn load(load: &LoadSettings) -> Result<Self, TracerError> {
        if EBPF_OBJECT.is_empty() {
            return Err(TracerError::NoPrograms);
        }
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
        let programs = library_probes::load_uprobe_programs(&ebpf, perf)?;
        let user_probes = user_probes::UserProbes::load(
            &mut ebpf,
            EBPF_OBJECT,
            &load.probes,
            load.probe_backtrace,
        )?;
        let probes = library_probes::LibraryProbes::new(&mut ebpf, load, programs)?;
        for name in [
            "sched_process_fork",
            "sched_process_exec",
            "sched_process_exit",
        ] {
            attach_sched_tracepoint(&mut ebpf, name)?;
        }
        let control = control::Control::take(&mut ebpf, load)?;
        let processes = processes::Processes::take(
            &mut ebpf,
            processes::StopPolicy {
                places_probes: load.items.iter().any(|&i| i != TraceItem::Osrt),
                wants_stacks: user_probes.wants_stacks(),
                osrt: probes.traces_osrt(),
            },
        )?;
        let kernel_log = kernel_log::KernelLog::start(&mut ebpf)?;
        let drops = take_map(&mut ebpf, "DROPS")?;
        let stops = stops::Stops::take(&mut ebpf)?;
        Ok(Self {
            ebpf,
            control,
            processes,
            probes,
            stops,
            user_probes,
            sched: SchedFacts {
                task_states: read_task_states(),
                has_waking: layout.waking_pid != asys_common::LAYOUT_ABSENT,
            },
            drops,
            _kernel_log: kernel_log,
            unlinker_go: None,
        })
    }

    /// The ring buffer every event arrives on; taken once.
    pub fn take_events(&mut self) -> Result<RingBuf<MapData>, TracerError> {
        take_map(&mut self.ebpf, "EVENTS")
    }

    /// Keeps (`on`) or records (off: `--trace-vendor-internal true`) the
    /// calls a vendor's libraries make of their own items.
    pub fn filter_callers(&mut self, on: bool) -> Result<(), TracerError> {
        let families = if on {
            self.probes.filtered_families()
        } else {
            0
        };
        self.control.filter_callers(families)
    }

    /// Tells the kernel which of `pid`'s executable ranges (start, end, the
    /// library mapped there) belong to libraries asys probes, for the caller
    /// filter. Called on every scan of its mappings (start, exec, dlopen).
    pub fn set_caller_ranges(
        &mut self,
        pid: u32,
        mapped: &[(u64, u64, LibraryId)],
    ) -> Result<(), TracerError> {
        if self.control.settings().caller_filter == 0 {
            return Ok(());
        }
        self.probes.set_caller_ranges(pid, mapped)
    }

    /// Looks at one executable mapping of process `pid` (see
    /// [`library_probes::LibraryProbes::examine_in`]); where that placed
    /// the process's lock library (osrt alone), its loads need no stop
    /// until its next exec.
    pub fn examine_in(
        &mut self,
        pid: u32,
        mapping: &crate::process::procfs::MapsEntry,
    ) -> Result<Option<LibraryId>, TracerError> {
        let (id, lock_library) = self.probes.examine_in(pid, mapping)?;
        if lock_library == library_probes::LockLibrary::Placed {
            self.processes.lock_library_placed(pid);
        }
        Ok(id)
    }

    /// Records context switches (`--cpuctxsw`): of the traced threads
    /// (`SCHED_PROCESS_TREE`) or of every thread (`SCHED_SYSTEM_WIDE`). The
    /// tracepoint is attached only when asked: it runs on every switch.
    /// Records context switches in `mode`; with `python_waits`, the switch
    /// program that also takes the Python stacks of threads leaving to
    /// wait, or, where this kernel's verifier refuses it, the plain one,
    /// saying so.
    pub fn record_sched(&mut self, mode: u64, python_waits: bool) -> Result<(), TracerError> {
        if mode == asys_common::SCHED_NONE {
            return Ok(());
        }
        let with_python = python_waits
            && attach_tracepoint_program(&mut self.ebpf, "sched_switch_python", "sched_switch")
                .inspect_err(|_| {
                    eprintln!(
                        "asys: kernel fallback in use: switches without Python stacks (this kernel's verifier refused the switch program with them; waits have no Python stacks)"
                    )
                })
                .is_ok();
        if !with_python {
            attach_sched_tracepoint(&mut self.ebpf, "sched_switch")?;
        }
        // Who woke the threads that left: on the same scope.
        if self.sched.has_waking {
            attach_sched_tracepoint(&mut self.ebpf, "sched_waking")?;
        } else {
            eprintln!(
                "asys: warning: this kernel has no sched_waking tracepoint: wake-ups are not recorded"
            );
        }
        self.control.update(|s| s.sched = mode)
    }

    /// What the kernel's `prev_state` bits mean.
    pub fn task_states(&self) -> &prev_state::TaskStates {
        &self.sched.task_states
    }

    /// Samples the CPUs (`-s`): every `period_ns` of CPU time the thread on
    /// each CPU is sampled if it is in `scope` (`SCHED_PROCESS_TREE`: the
    /// traced threads; `SCHED_SYSTEM_WIDE`: any), with a copy of its user
    /// stack when `stacks`. A software clock event, so it works where the
    /// hardware counters are not exposed (virtual machines).
    ///
    /// With `python`, the program that also takes the samples' Python
    /// stacks, or, where this kernel's verifier refuses it, the plain one,
    /// saying so.
    pub fn record_samples(
        &mut self,
        scope: u64,
        period_ns: u64,
        stacks: bool,
        python: bool,
    ) -> Result<(), TracerError> {
        use aya::programs::perf_event::{
            PerfEvent, PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent,
        };
        if scope == asys_common::SCHED_NONE {
            return Ok(());
        }
        const PYTHON: &str = "cpu_sample_python";
        let with_python = python
            && program::<PerfEvent>(&mut self.ebpf, PYTHON)
                .and_then(|p| {
                    p.load().map_err(|source| TracerError::Program {
                        name: PYTHON,
                        source,
                    })
                })
                .inspect_err(|_| {
                    eprintln!(
                        "asys: kernel fallback in use: samples without Python stacks (this kernel's verifier refused the sample program with them; no Python frames)"
                    )
                })
                .is_ok();
        let name: &'static str = if with_python { PYTHON } else { "cpu_sample" };
        let cpus = aya::util::online_cpus().map_err(|(_, e)| TracerError::Cpus(e))?;
        let prog: &mut PerfEvent = program(&mut self.ebpf, name)?;
        if !with_python {
            prog.load()
                .map_err(|source| TracerError::Program { name, source })?;
        }
        for cpu in cpus {
            prog.attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Period(period_ns),
                false,
            )
            .map_err(|source| TracerError::Program { name, source })?;
        }
        self.control.update(|s| {
            s.self_pid = std::process::id().into();
            s.sample_stack = stacks as u64;
            s.sample = scope;
        })
    }

    /// Each loaded program's name and the instructions the verifier
    /// processed to accept it (Linux 5.16+; its limit is a million): how
    /// near a program is to what an older kernel's verifier refuses.
    pub fn verifier_work(&self) -> Vec<(String, u32)> {
        let mut work: Vec<(String, u32)> = self
            .ebpf
            .programs()
            .filter_map(|(name, p)| {
                let n = p.info().ok()?.verified_instruction_count()?;
                Some((name.to_string(), n))
            })
            .collect();
        // Those loaded apart from aya's table (for uprobe-multi links and
        // perf-event uprobes alike).
        for (name, fd) in self.probes.programs_named() {
            if let Some(n) = multi::verified_instructions(fd) {
                work.push((name.to_string(), n));
            }
        }
        for (name, n) in self.user_probes.verifier_work() {
            work.push((name.to_string(), *n));
        }
        work.sort();
        work
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

    /// Removes the loader hooks and continues every process they stopped:
    /// once collection is over nothing needs new probes, and a process left
    /// stopped would not act on the signal that ends it (`--kill`, Ctrl+C).
    /// Closing the links waits for hooks still running, so what STOPPED
    /// holds afterwards is complete.
    pub fn release_loader(&mut self) {
        close_in_parallel(self.probes.take_loader_links());
        self.stops.resume_all();
    }

    /// What a report needs to say about the tracer, taken before detaching.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            drops: self.drops(),
            kernel_skipped: self.skipped_runs(),
            libraries: self.probes.probed_libraries(),
            library_table: self.probes.library_table(),
            items_not_found: self
                .probes
                .items_not_found()
                .iter()
                .map(|i| i.name().to_string())
                .collect(),
            device_activity: self.probes.injection_hooked(),
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
            .or_default() += self.processes.insert_failed();
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
        prog_misses::by_program(loaded.chain(self.probes.programs_named()))
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
        self.stops.dismiss_watchdog();
        let mut links = self.probes.take_links();
        // `--probe`'s links go the same way (perf events: a grace period
        // each); an SDT semaphore is cleared when its probe is removed.
        links.extend(self.user_probes.take_links());
        let n = links.len();
        let perf = self.probes.uses_perf_events() && n >= unlinker::HAND_OFF_MIN;
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
    attach_tracepoint_program(ebpf, name, name)
}

/// Loads program `name` and attaches it to the sched tracepoint `event`.
fn attach_tracepoint_program(
    ebpf: &mut Ebpf,
    name: &'static str,
    event: &str,
) -> Result<(), TracerError> {
    let prog: &mut TracePoint = program(ebpf, name)?;
    prog.load()
        .map_err(|source| TracerError::Program { name, source })?;
    prog.attach("sched", event)
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
