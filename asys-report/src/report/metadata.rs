//! `metadata.json`: what was recorded, where, when, and what was lost.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::recorded_settings::{ApiProbes, Backtrace, Mode, Scope};

/// Written first in every report; `format` identifies the file as ours.
pub const FORMAT: &str = "asysrep";

/// The `drops` source of recorded calls that put work on the device but
/// whose device record never arrived (the process ended by `_exit`, SIGKILL
/// or exec before the injection library flushed it, or the report ended
/// first), less the records the kernel counted lost on the way
/// (`activity_ring_full`, `activity_lost`), so that no record counts twice.
pub const DEVICE_ACTIVITY_UNDELIVERED: &str = "device_activity_undelivered";

/// `kernel_support`: each feature found (true), missing (false) or not
/// known (null: not probed without privileges), and the fallbacks in use
/// by name (`perf-uprobe`, `debugfs-format`, `exit-by-signal-live`,
/// `exit-by-main-thread`, `entry-probes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelSupport {
    pub features: BTreeMap<String, Option<bool>>,
    pub fallbacks: Vec<String>,
}

/// The `drops` source of calls that started in the recorded window and had
/// not returned when asys detached from them, waiting at most
/// asys-userspace's `collect::SETTLE_LIMIT` after the window closed (attach,
/// system-wide): their return, and so the call, was never seen.
pub const CALLS_IN_FLIGHT_AT_END: &str = "api_calls_in_flight_at_end";

/// The `drops` source of NVTX strings and domains a process registered
/// before asys reached it whose names its injection library's table could
/// not give (past the table's capacity): ranges using them have no name.
pub const NVTX_REGISTRATIONS_UNREAD: &str = "nvtx_registrations_unread";

/// The `drops` source of Python code objects read for `--python-sampling`
/// whose name or file name was longer than asys reads (4 KiB): recorded
/// cut, ending in `...[cut]`.
pub const PYTHON_NAMES_CUT: &str = "python_names_cut";

/// The `drops` source of Python thread names asys could not read
/// (`--python-sampling`): a read of a process's `threading._active` that
/// failed (memory unreadable, a structure out of bounds), or a thread in it
/// whose name or native id was not readable. Its samples are shown without
/// a Python thread name.
pub const PYTHON_THREAD_NAMES_UNREAD: &str = "python_thread_names_unread";

/// The `drops` sources of what asys's memory budgets for other users' data
/// (`untrusted::budget`) left out: JIT symbols past a process's or all
/// processes' share, Python frames left unnamed, NVTX registration tables
/// not kept.
pub const JIT_SYMBOLS_OVER_BUDGET: &str = "jit_symbols_over_budget";
pub const PYTHON_CODE_OVER_BUDGET: &str = "python_code_over_budget";
pub const NVTX_REGISTRATIONS_OVER_BUDGET: &str = "nvtx_registrations_over_budget";

/// The `drops` sources of what asys's caps on reading one mapped ELF file
/// (asys-userspace's `elf::caps`) left out in the symbolize stage: symbols
/// past the count or name-bytes cap, DWARF compilation units past the unit
/// cap, decompressed bytes of compressed DWARF sections past the bytes cap.
/// Their addresses may go unnamed or without a source line.
pub const ELF_SYMBOLS_OVER_CAP: &str = "elf_symbols_over_cap";
pub const DWARF_UNITS_OVER_CAP: &str = "dwarf_units_over_cap";
pub const DWARF_BYTES_OVER_CAP: &str = "dwarf_bytes_over_cap";

/// The `drops` source of processes whose memory a read did not finish
/// reading within asys-userspace's `process::remote_memory::READ_DEADLINE`
/// (a page backed by a hung FUSE or NFS file): their memory was not read
/// again for the rest of the recording (Python names, thread names, NVTX
/// registrations left unread).
pub const REMOTE_MEMORY_READ_TIMEOUTS: &str = "remote_memory_read_timeouts";

/// Fields added within a schema version read as their defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Metadata {
    pub format: String,
    pub schema_version: u32,
    pub asys_version: String,
    pub host: String,
    pub kernel: String,
    pub cpus: usize,
    pub command_line: Vec<String>,
    /// Which command recorded: profile, attach, system-wide, session.
    pub mode: Mode,
    pub trace: Vec<String>,
    /// The processes asys was pointed at (the launched app, or the attached pids).
    pub root_pids: Vec<u32>,
    /// Every process that produced or could produce events.
    pub pids: Vec<u32>,
    pub start_realtime_ns: i64,
    pub start_monotonic_ns: i64,
    pub end_monotonic_ns: i64,
    pub exit_code: Option<i32>,
    /// NVTX strings and domains processes registered before asys reached
    /// them (attach, system-wide), read from their injection library's
    /// table: pid → handle → name. Calls made while recording name theirs.
    pub nvtx_registered_strings: BTreeMap<u32, BTreeMap<u64, String>>,
    pub nvtx_registered_domains: BTreeMap<u32, BTreeMap<u64, String>>,
    /// Events recorded per source.
    pub events: BTreeMap<String, u64>,
    /// Events lost per source (ring buffer full, call depth, map full, ...).
    pub drops: BTreeMap<String, u64>,
    /// Runs of asys's programs the kernel skipped, per program (see
    /// [`Metadata::skipped_runs`]): not counted in `drops`, as most are not
    /// traced events.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_skipped: BTreeMap<String, u64>,
    /// Context switches of traced threads the kernel delivered to no
    /// tracer and counted nowhere, found by their sequence (a thread that
    /// left a CPU twice without arriving between, or arrived twice): the
    /// number of threads' sequences broken. Apart from `drops`, as
    /// `kernel_skipped`: asys lost nothing it was given.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sched_switch_undelivered: u64,
    /// Rows per table.
    pub tables: BTreeMap<String, u64>,
    /// Libraries probed, with the number of functions probed in each.
    pub libraries: BTreeMap<String, usize>,
    /// The rows of the `libraries` table, on their way from the collection
    /// (or a recovered journal) to the report's member; not in the JSON.
    #[serde(skip)]
    pub library_table: Vec<super::rows::LibraryRow>,
    /// Trace items for which no traced process loaded a library with their
    /// functions (nothing could be recorded for them).
    pub items_not_found: Vec<String>,
    /// Whether asys's injection library was loaded and its sites probed, so
    /// that device activity could be recorded.
    pub device_activity: bool,
    /// How hggc API calls were recorded: "entry" (uprobes on the runtime) or
    /// "site" (the injection library's callback sites).
    pub api_probes: ApiProbes,
    /// The kernel's features as asys found them at load, and the fallbacks
    /// it used for what the kernel lacks (or what `ASYS_KERNEL_FALLBACK`
    /// forced); absent in reports of older asys versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_support: Option<KernelSupport>,
    /// Device clock minus CLOCK_MONOTONIC (ns) as last measured in each
    /// process; device times in the report are already converted with it.
    pub device_clock_offsets: BTreeMap<u32, i64>,
    /// `-c` (hggcProfilerApi), and how many capture ranges opened: a report
    /// asked for a range that never opened holds no calls.
    pub capture_range: Option<String>,
    pub capture_ranges: u32,
    /// `-y @TIME` or `-y /PERIOD`: the spec and the instant recording
    /// started at (CLOCK_REALTIME ns; also `start_realtime_ns`).
    #[serde(default)]
    pub activation: Option<Activation>,
    /// Recording stopped early at `--max-report-size`.
    #[serde(default)]
    pub size_limited: bool,
    /// Whose context switches were recorded (`--cpuctxsw`): process-tree,
    /// system-wide or none.
    #[serde(default)]
    pub cpuctxsw: Scope,
    /// Whose CPU was sampled (`-s`): process-tree, system-wide or none; the
    /// period in ns and how stacks were unwound (dwarf, fp, none).
    #[serde(default)]
    pub sample: Scope,
    #[serde(default)]
    pub sample_period_ns: u64,
    #[serde(default)]
    pub sample_backtrace: Backtrace,
    /// `--trace-vendor-internal`: whether calls a vendor's libraries made
    /// of their own item were recorded (false: only the application's).
    #[serde(default)]
    pub trace_vendor_internal: bool,
    /// Every member written after this metadata, by name: its size and
    /// checksum, so a reader can tell a damaged or truncated report from a
    /// whole one. Empty in reports written before it existed (they are
    /// checked against `tables` only).
    #[serde(default)]
    pub members: BTreeMap<String, MemberInfo>,
    /// Set when the report was rebuilt by `asys recover` from what a recording
    /// that did not finish left on disk.
    #[serde(default)]
    pub recovered: Option<Recovered>,
    /// Set in a flight recorder's report: it holds the rows whose time lies
    /// in [trigger - window, trigger] (process and module tables whole).
    #[serde(default)]
    pub flight: Option<FlightWindow>,
    /// System-wide mode kept to one cgroup (`--cgroup`, `--container`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_filter: Option<CgroupFilterInfo>,
    /// The report's rank in a parallel job: the launched (or attached)
    /// root process's rank, else the rank every traced process with one
    /// agrees on; None when there is none or they disagree. Each process's
    /// own is in the `processes` table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// What aligning this report with others on one timeline needs; absent
    /// in reports of older asys versions (see `report::set`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockSample>,
    /// Binaries whose build id at symbolize time was not the one recorded
    /// for their mapping (rebuilt meanwhile): their frames were not named
    /// from the new file. Their count is the list's length.
    #[serde(default)]
    pub rebuilt_binaries: Vec<RebuiltBinary>,
    /// The build ids (hex) of the binaries whose frames were named from a
    /// debug file a debuginfod server gave (fetched then, or kept in asys's
    /// cache from an earlier fetch); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub debuginfod_build_ids: Vec<String>,
}

/// A binary found rebuilt between recording and symbolizing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RebuiltBinary {
    /// The file as the traced process mapped it.
    pub path: String,
    /// Its build id (hex) when recorded, and when symbolized (None: none).
    pub recorded_build_id: String,
    pub build_id: Option<String>,
    /// The debug file of the recorded build that named its frames, if one
    /// was found (None: its frames are left as addresses).
    pub named_from: Option<String>,
}

/// The host's clocks as read when recording began.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClockSample {
    /// /proc/sys/kernel/random/boot_id: reports with the same one share
    /// one CLOCK_MONOTONIC.
    pub boot_id: String,
    /// CLOCK_REALTIME and CLOCK_MONOTONIC read as close together as asys
    /// could (the pair of several reads with the smallest gap), and that gap:
    /// the most the pair can be off from each other.
    pub realtime_ns: i64,
    pub monotonic_ns: i64,
    pub pair_gap_ns: i64,
    /// The kernel's NTP state (adjtimex): whether the clock is synchronised,
    /// and its estimated and maximum error in microseconds.
    pub ntp_synchronized: bool,
    pub ntp_esterror_us: i64,
    pub ntp_maxerror_us: i64,
}

/// The report-level rank of processes with `ranks` (pid → rank) where
/// `roots` were launched or attached: the first root's with one, else the
/// one all agree on.
pub fn report_rank(ranks: &BTreeMap<u32, u32>, roots: &[u32]) -> Option<u32> {
    if let Some(r) = roots.iter().find_map(|p| ranks.get(p)) {
        return Some(*r);
    }
    let mut all = ranks.values();
    let first = *all.next()?;
    all.all(|r| *r == first).then_some(first)
}

/// The cgroup a system-wide recording was kept to.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupFilterInfo {
    /// Its path in the cgroup v2 hierarchy.
    pub path: String,
    /// Its id (the directory's inode), as in `processes.cgroupId`.
    pub id: u64,
    /// The container id it was chosen by (`--container`).
    pub container: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FlightWindow {
    /// What wrote the report: "SIGUSR1", "end of the run", or the call that
    /// fired a trigger ("hggcSetDevice returned 101", "... took N ns").
    pub trigger: String,
    /// CLOCK_MONOTONIC of the trigger (a call's end, the signal's arrival).
    pub trigger_monotonic_ns: i64,
    pub window_ns: i64,
}

/// One member of the report as `pack` wrote it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemberInfo {
    pub bytes: u64,
    /// CRC-32 (IEEE, as zlib and gzip compute it) of the member's bytes.
    pub crc32: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Recovered {
    /// Why the recording did not finish, as far as recover can tell
    /// ("asys was killed", "disk full", ...).
    pub reason: String,
    /// CLOCK_MONOTONIC of the last checkpoint recovered: nothing after it is in the report.
    pub last_checkpoint_monotonic_ns: i64,
}

impl Metadata {
    /// The warning every reader prints for a recovered partial report, or
    /// None for a whole one.
    pub fn recovered_warning(&self, name: &std::path::Path) -> Option<String> {
        let r = self.recovered.as_ref()?;
        let upto = r
            .last_checkpoint_monotonic_ns
            .saturating_sub(self.start_monotonic_ns)
            .max(0) as f64
            / 1e9;
        let reason = if r.reason.is_empty() {
            "reason unknown"
        } else {
            r.reason.as_str()
        };
        Some(format!(
            "{} is a recovered partial report ({reason}): it holds what was recorded up to {upto:.1} s after its start",
            name.display()
        ))
    }

    /// Events lost (unreadable texts are not events; see `texts_unreadable`).
    pub fn total_drops(&self) -> u64 {
        self.drops
            .iter()
            .filter(|(k, _)| is_loss(k))
            .map(|(_, n)| n)
            .sum()
    }

    /// Recorded calls whose device record never arrived.
    pub fn device_activity_undelivered(&self) -> u64 {
        self.drops
            .get(DEVICE_ACTIVITY_UNDELIVERED)
            .copied()
            .unwrap_or(0)
    }

    /// Calls recorded without their text argument: the kernel could read it
    /// neither at the call's entry nor at its return.
    pub fn texts_unreadable(&self) -> u64 {
        self.drops
            .get(asys_common::TEXT_UNREADABLE)
            .copied()
            .unwrap_or(0)
    }

    /// Names `-c hgtx` could not read, so could not compare.
    pub fn capture_texts_unreadable(&self) -> u64 {
        self.drops
            .get(asys_common::CAPTURE_TEXT_UNREADABLE)
            .copied()
            .unwrap_or(0)
    }

    /// Events lost because the kernel-to-asys ring buffer was full: the
    /// only losses a larger `--event-buffer-size` prevents.
    pub fn ring_full_drops(&self) -> u64 {
        self.drops
            .iter()
            .filter(|(k, _)| is_ring_full(k))
            .map(|(_, n)| n)
            .sum()
    }

    /// "source=n, ..." for the sources that lost events.
    /// Runs of asys's programs the kernel skipped, as `program=N, ...`
    /// (empty when none). A tracepoint, kprobe or uprobe program is not run
    /// while another BPF program or a `bpf()` map operation holds the CPU
    /// (`trace_call_bpf`); most such runs here are wake-ups of asys's own
    /// reader, raised while one of its programs ran, but a traced thread's
    /// event among them is lost, and the kernel does not say which.
    pub fn skipped_runs(&self) -> String {
        self.kernel_skipped
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn drops_by_source(&self) -> String {
        self.drops
            .iter()
            .filter(|(k, n)| **n > 0 && is_loss(k))
            .map(|(k, n)| format!("{k}={n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether a `drops` entry counts events lost to a full ring buffer
/// (`api_ring_full`, `sample_ring_full`, ...).
pub fn is_ring_full(source: &str) -> bool {
    source.ends_with("_ring_full")
}

/// Whether a `drops` entry counts lost events (the unreadable texts and
/// probe arguments do not, nor the waits left without a Python stack by
/// their rate bound, nor what asys's memory budgets left out of other users' JIT maps,
/// code objects and tables, nor the symbols and units its ELF caps left
/// out, nor the memory of processes whose reads timed out: those are names,
/// not events, and were warned about where they were left out).
pub fn is_loss(source: &str) -> bool {
    ![
        asys_common::TEXT_UNREADABLE,
        asys_common::CAPTURE_TEXT_UNREADABLE,
        // A hit recorded with an argument shown as `?`: the hit is there.
        asys_common::PROBE_ARG_UNREADABLE,
        // A wait recorded without its Python stack, by the rate bound.
        asys_common::PYTHON_WAIT_STACK_SKIPPED,
        PYTHON_NAMES_CUT,
        PYTHON_THREAD_NAMES_UNREAD,
        JIT_SYMBOLS_OVER_BUDGET,
        PYTHON_CODE_OVER_BUDGET,
        NVTX_REGISTRATIONS_OVER_BUDGET,
        ELF_SYMBOLS_OVER_CAP,
        DWARF_UNITS_OVER_CAP,
        DWARF_BYTES_OVER_CAP,
        REMOTE_MEMORY_READ_TIMEOUTS,
    ]
    .contains(&source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_full_ring_buffer_counts_as_what_a_larger_one_helps() {
        let mut m = Metadata::default();
        m.drops.insert("python_frame_unreadable".into(), 40);
        m.drops.insert(asys_common::TEXT_UNREADABLE.into(), 3);
        m.drops.insert(DEVICE_ACTIVITY_UNDELIVERED.into(), 2);
        assert_eq!(m.total_drops(), 42);
        assert_eq!(m.ring_full_drops(), 0);
        m.drops.insert("api_ring_full".into(), 5);
        m.drops.insert("sample_ring_full".into(), 7);
        assert_eq!(m.ring_full_drops(), 12);
        // Every ring-full source of the kernel is one.
        for source in asys_common::DropSource::ALL {
            assert_eq!(
                is_ring_full(source.name()),
                format!("{source:?}").ends_with("RingFull"),
                "{source:?}"
            );
        }
    }
}

/// An aligned start (`-y @TIME`, `-y /PERIOD`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Activation {
    /// The spec as given.
    pub spec: String,
    /// The instant recording started at, CLOCK_REALTIME ns.
    pub realtime_ns: i64,
}
