//! Writing a report: a recorder's folder for it, its `recording.json`, the
//! metadata, the symbolize stage and packing, a flight recorder's window,
//! and what a full disk leaves.
use std::{path::PathBuf, time::Duration};

use asys_report::{
    recorded_settings::{Backtrace, Scope, Unwind},
    report::{
        ReportError, container,
        metadata::{self, Metadata},
        schema,
    },
};

use crate::{
    clock::monotonic_ns,
    collect::{self as collector, Collector},
    kernel::{Snapshot, Tracer},
    settings::RecordSettings,
    sink::{
        disk, folder, journal,
        recorder::{self, Recorder},
    },
    symbolize,
};

use super::{RecordError, salvage};

/// Removes the recording folder however recording ends, unless told to
/// keep it (a full disk: what it holds can still be recovered).
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    /// The folder is left where it is.
    pub(crate) fn keep(&mut self) {
        self.0 = PathBuf::new();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A recorder writing into `dir` (which must not exist), and the guard that
/// removes the folder however recording ends.
pub(crate) fn fresh_recorder(dir: PathBuf) -> Result<(Recorder, TempDir), ReportError> {
    let rec = Recorder::create(dir.clone())?;
    Ok((rec, TempDir(dir)))
}

/// A recorder for the report `output`, in a fresh folder beside it
/// ([`folder::fresh`]), so packing never crosses file systems.
pub(crate) fn recorder_for(output: &std::path::Path) -> Result<(Recorder, TempDir), ReportError> {
    let dir = folder::fresh(output)?;
    match Recorder::create_in(dir.clone()) {
        Ok(rec) => Ok((rec, TempDir(dir))),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

/// The next report of a recording that goes on (the next of a series, a
/// session's next `start`), beginning at `start` (realtime, monotonic): a
/// recorder in a fresh folder beside `settings.output`, the traced
/// processes' mappings scanned into it again (its symbolize stage reads
/// them from its own tables), its counts from zero, and its
/// `recording.json` written.
pub(crate) fn begin_next_report<J>(
    settings: &RecordSettings,
    root_pids: &[u32],
    start: (i64, i64),
    tracer: &mut Tracer,
    collector: &mut Collector<J>,
) -> Result<(Recorder, TempDir), RecordError> {
    let (mut rec, guard) = recorder_for(&settings.output)?;
    collector.rescan(root_pids, tracer, &mut rec)?;
    collector.state.counts.clear();
    describe(&rec, settings, root_pids, start)?;
    Ok((rec, guard))
}

/// Writes the recording's `recording.json` (what `asys recover` needs).
pub(crate) fn describe(
    rec: &Recorder,
    settings: &RecordSettings,
    root_pids: &[u32],
    (start_realtime, start_monotonic): (i64, i64),
) -> Result<(), ReportError> {
    rec.describe(&journal::Recording {
        // Absolute: recover may run from another folder.
        output: crate::sink::report_path::absolute(&settings.output),
        metadata: base_metadata(settings, root_pids, start_realtime, start_monotonic),
        backtrace_depth: settings.backtrace_depth,
        sample_depth: settings.sampling.depth,
        flight: settings.flight.is_some(),
    })
}

/// Runs the symbolize stage over a finished recording and packs the report.
pub(crate) fn finish_report(
    mut rec: Recorder,
    settings: &RecordSettings,
    tracer: &Snapshot,
    state: &mut collector::State,
    (root_pids, start_realtime, start_monotonic, exit_code): (&[u32], i64, i64, Option<i32>),
    report: &std::path::Path,
) -> Result<Metadata, RecordError> {
    // The window's end when asys closed it, else now.
    let end_monotonic = state.window.end.map_or_else(monotonic_ns, |e| e as i64);
    let progress = state.progress(tracer);
    let rank = metadata::report_rank(rec.ranks(), root_pids);
    // The perf maps of processes that did not exit during the recording.
    collector::jit_symbols::record_remaining(&mut rec)?;
    // What other users' processes fed past asys's budgets.
    use asys_report::untrusted::budget::{Budget, JitSymbols, NvtxRegistrations, PythonCode};
    let over_budget = [
        (Budget::<JitSymbols>::DROPS_SOURCE, rec.jit_budget.refused()),
        (Budget::<PythonCode>::DROPS_SOURCE, state.python_refused()),
        (
            Budget::<NvtxRegistrations>::DROPS_SOURCE,
            state.registration_budget.refused(),
        ),
        (metadata::PYTHON_NAMES_CUT, state.python_names_cut()),
        (
            metadata::PYTHON_THREAD_NAMES_UNREAD,
            state.python_thread_names_unread(),
        ),
    ];
    let recorded = rec.finish(progress.clone())?;
    let mut meta = base_metadata(settings, root_pids, start_realtime, start_monotonic);
    meta.rank = rank;
    complete(&mut meta, progress, end_monotonic);
    meta.drops = with_undelivered(&meta.drops, meta.device_activity, state);
    meta.sched_switch_undelivered = undelivered_switches(&meta.drops, state);
    for (source, n) in over_budget {
        if n > 0 {
            *meta.drops.entry(source.to_string()).or_default() += n;
        }
    }
    for (&pid, r) in &state.registered {
        meta.nvtx_registered_strings.insert(pid, r.strings.clone());
        meta.nvtx_registered_domains.insert(pid, r.domains.clone());
    }
    let unread: u64 = state.registered.values().map(|r| r.unread).sum();
    if unread > 0 {
        meta.drops
            .insert(metadata::NVTX_REGISTRATIONS_UNREAD.to_string(), unread);
    }
    if let Some(open) = state.calls_in_flight {
        meta.drops
            .insert(metadata::CALLS_IN_FLIGHT_AT_END.to_string(), open);
    }
    meta.exit_code = exit_code;
    symbolize_and_pack(
        recorded,
        &mut meta,
        (settings.backtrace_depth, settings.sampling.depth),
        report,
    )?;
    Ok(meta)
}

/// Runs the symbolize stage over recorded tables, then packs them with
/// `meta` (its `tables` filled in here) into `report` and removes the
/// folder. `depths`: most frames per API stack and per sampled stack.
pub(crate) fn symbolize_and_pack(
    mut recorded: recorder::Recorded,
    meta: &mut Metadata,
    (backtrace_depth, sample_depth): (usize, usize),
    report: &std::path::Path,
) -> Result<(), ReportError> {
    let symbols = symbolize::run(
        &recorded.dir,
        &recorded.kernels,
        &recorded.named_kernels,
        &mut recorded.strings,
    )?;
    recorded.add_symbols(symbols)?;
    let api = symbolize::unwind_stacks(
        &recorded.dir,
        schema::STACKS_RAW,
        (Unwind::Dwarf, false),
        &mut recorded.strings,
        (backtrace_depth, None),
    )?;
    recorded.add_api_stacks(api.rows)?;
    let (mut rebuilt, mut debuginfod) = (api.rebuilt, api.debuginfod);
    if recorded.tables.contains_key(schema::CPU_SAMPLES) {
        // With -b none the stacks are empty: each sample gets its function.
        let how = match meta.sample_backtrace {
            Backtrace::Fp => Unwind::FramePointers,
            _ => Unwind::Dwarf,
        };
        // System-wide, source lines for the traced application's tree only
        // (none without one): see unwind_stacks.
        let roots = meta.root_pids.clone();
        let lines_for = (meta.sample == Scope::SystemWide).then_some(roots.as_slice());
        let samples = symbolize::unwind_stacks(
            &recorded.dir,
            schema::SAMPLE_STACKS_RAW,
            (how, true),
            &mut recorded.strings,
            (sample_depth, lines_for),
        )?;
        recorded.add_sample_stacks(samples.rows)?;
        rebuilt.extend(samples.rebuilt);
        debuginfod.extend(samples.debuginfod);
    }
    meta.debuginfod_build_ids = debuginfod.into_iter().collect();
    // What the caps on other users' mapped files, and the deadline on
    // their memory, left out (warned about as it happened).
    let timeouts = (
        metadata::REMOTE_MEMORY_READ_TIMEOUTS,
        crate::process::remote_memory::take_timeouts(),
    );
    for (source, n) in crate::elf::caps::take_counts()
        .into_iter()
        .chain([timeouts])
    {
        if n > 0 {
            *meta.drops.entry(source.to_string()).or_default() += n;
        }
    }
    // Each rebuilt binary is warned about once, though both kinds of stack
    // may pass through it.
    rebuilt.sort_by(|a, b| a.path.cmp(&b.path));
    rebuilt.dedup_by(|a, b| a.path == b.path);
    for r in &rebuilt {
        eprintln!("asys: warning: {}", r.warning());
    }
    meta.rebuilt_binaries = rebuilt
        .into_iter()
        .map(|r| asys_report::report::metadata::RebuiltBinary {
            path: r.path,
            recorded_build_id: r.recorded,
            build_id: r.now,
            named_from: r.debug_file.map(|d| d.display().to_string()),
        })
        .collect();
    if !meta.library_table.is_empty() {
        recorded.add_libraries(std::mem::take(&mut meta.library_table))?;
    }
    recorded.write_strings()?;
    meta.tables = recorded.tables.clone();
    disk::ensure_space_to_pack(&recorded.dir, &recorded.members)?;
    container::pack(&recorded.dir, &recorded.members, meta, report)?;
    let _ = std::fs::remove_dir_all(&recorded.dir);
    Ok(())
}

/// A flight recorder's report: the window of `settings.flight` that ends at
/// the trigger, written to `report` while recording goes on.
pub(super) fn flight_report(
    rec: &mut Recorder,
    settings: &RecordSettings,
    (tracer, state): (&Snapshot, &collector::State),
    (root_pids, start_realtime, start_monotonic): (&[u32], i64, i64),
    (at, why): (i64, String),
    report: &std::path::Path,
) -> Result<Metadata, RecordError> {
    let window = settings
        .flight
        .as_ref()
        .map_or(Duration::ZERO, |f| f.window);
    let window_ns = i64::try_from(window.as_nanos()).unwrap_or(i64::MAX);
    // Every chunk closed, so that the window can be read from them.
    rec.checkpoint(state.progress(tracer))?;
    let lo = at.saturating_sub(window_ns);
    let recorded = rec.window((lo, at), report)?;
    let dir = recorded.dir.clone();
    let begin = lo.max(start_monotonic);
    let mut meta = base_metadata(
        settings,
        root_pids,
        start_realtime + (begin - start_monotonic),
        begin,
    );
    complete(&mut meta, state.progress(tracer), at);
    meta.rank = metadata::report_rank(rec.ranks(), root_pids);
    meta.flight = Some(metadata::FlightWindow {
        trigger: why.clone(),
        trigger_monotonic_ns: at,
        window_ns,
    });
    let packed = symbolize_and_pack(
        recorded,
        &mut meta,
        (settings.backtrace_depth, settings.sampling.depth),
        report,
    );
    if let Err(e) = packed {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e.into());
    }
    eprintln!(
        "asys: flight recorder ({why}): {} holds the {:.1} s before it",
        report.display(),
        window.as_secs_f64()
    );
    Ok(meta)
}

/// The metadata known when recording starts (`recording.json` holds it).
pub(crate) fn base_metadata(
    settings: &RecordSettings,
    root_pids: &[u32],
    start_realtime: i64,
    start_monotonic: i64,
) -> Metadata {
    Metadata {
        format: metadata::FORMAT.into(),
        schema_version: schema::SCHEMA_VERSION,
        asys_version: env!("CARGO_PKG_VERSION").into(),
        host: crate::sink::report_path::hostname(),
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
        pids: root_pids.to_vec(),
        start_realtime_ns: start_realtime,
        start_monotonic_ns: start_monotonic,
        api_probes: settings.api_probes,
        kernel_support: crate::kernel::features::support_of_this_run(),
        activation: settings.activation.as_ref().map(|a| {
            asys_report::report::metadata::Activation {
                spec: a.spec.clone(),
                realtime_ns: start_realtime,
            }
        }),
        capture_range: settings.capture.map(|_| match &settings.capture_hgtx {
            Some(r) => format!("hgtx:{}", r.template()),
            None => "hggcProfilerApi".to_string(),
        }),
        cpuctxsw: settings.sched,
        trace_vendor_internal: settings.trace_vendor_internal,
        sample: settings.sampling.scope,
        sample_period_ns: settings.sampling.period_ns,
        sample_backtrace: match settings.sampling.unwind {
            Some(Unwind::Dwarf) => Backtrace::Dwarf,
            Some(Unwind::FramePointers) => Backtrace::Fp,
            None => Backtrace::None,
        },
        clock: Some(crate::clock::sample()),
        cgroup_filter: settings
            .cgroup
            .as_ref()
            .map(|f| metadata::CgroupFilterInfo {
                path: f.path.clone(),
                id: f.id,
                container: f.container.clone(),
            }),
        ..Default::default()
    }
}

/// Fills in what collection counted up to `end_monotonic`.
pub(crate) fn complete(meta: &mut Metadata, progress: journal::Progress, end_monotonic: i64) {
    let mut pids = progress.pids;
    pids.extend(meta.root_pids.iter().copied());
    pids.sort_unstable();
    pids.dedup();
    meta.pids = pids;
    meta.end_monotonic_ns = end_monotonic;
    meta.events = progress.events;
    meta.drops = progress.drops;
    meta.kernel_skipped = progress.kernel_skipped;
    meta.libraries = progress.libraries;
    meta.library_table = progress.library_table;
    meta.items_not_found = progress.items_not_found;
    meta.device_activity = progress.device_activity;
    meta.device_clock_offsets = progress.device_clock_offsets;
    meta.capture_ranges = progress.capture_ranges;
    meta.size_limited = progress.size_limited;
}

/// The kernel's drop counts, and with device activity recorded, the calls
/// whose device record never arrived (see
/// [`metadata::DEVICE_ACTIVITY_UNDELIVERED`]).
pub(super) fn with_undelivered(
    drops: &std::collections::BTreeMap<String, u64>,
    device_activity: bool,
    state: &mut collector::State,
) -> std::collections::BTreeMap<String, u64> {
    let mut drops = drops.clone();
    let undelivered = state.device.end_report();
    if device_activity {
        let in_kernel: u64 = [
            asys_common::DropSource::ActivityRingFull,
            asys_common::DropSource::ActivityLost,
        ]
        .iter()
        .filter_map(|s| drops.get(s.name()))
        .sum();
        drops.insert(
            metadata::DEVICE_ACTIVITY_UNDELIVERED.to_string(),
            undelivered.saturating_sub(in_kernel),
        );
    }
    drops
}

/// Context switches of traced threads the kernel did not deliver: broken
/// switch sequences beyond what its own drop counts explain (a switch lost
/// to a full ring or an unreadable record breaks up to two threads'
/// sequences).
pub(super) fn undelivered_switches(
    drops: &std::collections::BTreeMap<String, u64>,
    state: &mut collector::State,
) -> u64 {
    let broken = state.switches.end_report();
    let in_kernel: u64 = [
        asys_common::DropSource::SchedRingFull,
        asys_common::DropSource::SchedUnreadable,
    ]
    .iter()
    .filter_map(|s| drops.get(s.name()))
    .sum();
    broken.saturating_sub(2 * in_kernel)
}

pub(super) fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The disk filled up while recording: the chunks of every complete
/// checkpoint are kept and packed into `report` right away; if even that
/// does not fit, the folder stays for `asys recover`.
pub(super) fn keep_on_full_disk(
    mut rec: Recorder,
    mut guard: TempDir,
    error: String,
    report: &std::path::Path,
) -> RecordError {
    rec.note_stopped(salvage::DISK_FULL);
    let dir = rec.dir().to_path_buf();
    drop(rec);
    guard.keep();
    recover_on_full_disk(&dir, error, report)
}

pub(super) fn recover_on_full_disk(
    dir: &std::path::Path,
    error: String,
    report: &std::path::Path,
) -> RecordError {
    let options = salvage::Options {
        output: Some(report.to_path_buf()),
        force: true,
        reason: Some(salvage::DISK_FULL.into()),
    };
    match salvage::recover(dir, &options) {
        Ok(r) => RecordError::DiskFullRecovered {
            error,
            seconds: r.seconds,
            report: crate::sink::report_path::absolute(&r.report),
        },
        Err(_) => RecordError::DiskFullKept {
            error,
            dir: crate::sink::report_path::absolute(dir),
        },
    }
}

/// `NAME.asysrep` of range `i` in repeat mode: `NAME.i.asysrep`.
pub(crate) fn repeat_path(output: &std::path::Path, i: u32) -> PathBuf {
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!("{stem}.{i}.{}", asys_report::report::EXTENSION))
}
