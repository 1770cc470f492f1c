//! What userspace tells the kernel ([`Settings`], written whole) and the
//! state both sides write ([`KernelState`], written a field at a time).
/// Number of API families the kernel keeps settings for.
pub const MAX_FAMILIES: u32 = 16;

/// What userspace tells the kernel, in the `SETTINGS` map's one entry. Only
/// userspace writes it (always whole: it keeps the current copy), so nothing
/// the kernel changes is ever overwritten by it; what the kernel writes too is
/// in [`KernelState`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// 1: every process on the machine counts as traced (`-s system-wide`).
    pub system_wide: u64,
    /// Context switches recorded: [`SCHED_NONE`], [`SCHED_PROCESS_TREE`] (of
    /// traced threads), [`SCHED_SYSTEM_WIDE`].
    pub sched: u64,
    /// CPU samples recorded (`-s`), in the same scopes as `sched`.
    pub sample: u64,
    /// 1: samples carry a copy of the user stack (`-b fp|dwarf`).
    pub sample_stack: u64,
    /// asys's own process id: never sampled (system-wide it would sample
    /// itself reading the samples).
    pub self_pid: u64,
    /// 1: the profiler API opens and closes the capture range.
    pub capture_api: u64,
    /// 1: hgtx ranges named like `CAPTURE_NAMES[0]` open and close the
    /// capture range (`-c hgtx -p TEMPLATE`).
    pub capture_hgtx: u64,
    /// 1: the end of the capture range does not stop recording
    /// (`--capture-range-end none`).
    pub capture_end_none: u64,
    /// 1: a closed capture range may open again (`--capture-range-end repeat`).
    pub capture_repeat: u64,
    /// Which domains match: [`DOMAIN_DEFAULT`](crate::DOMAIN_DEFAULT),
    /// [`DOMAIN_ANY`](crate::DOMAIN_ANY), [`DOMAIN_NAMED`](crate::DOMAIN_NAMED).
    pub capture_domain_mode: u64,
    /// Wake the event reader once this many bytes wait in the ring (it also
    /// polls on a timer): a quarter of the ring, so most calls skip the
    /// cost of a wake-up and a burst still cannot fill the ring unseen.
    pub wake_bytes: u64,
    /// Per API family: calls shorter than this many ns are not reported (the
    /// `--osrt-threshold` of the OS runtime family; 0 for the others).
    pub min_duration: [u64; MAX_FAMILIES as usize],
    /// Per API family: calls at least this long (ns) get the caller's stack
    /// (`--hggc-backtrace all:<ns>`); 0 turns stacks off.
    pub stack_threshold: [u64; MAX_FAMILIES as usize],
    /// System-wide, only processes in this cgroup v2 (or below it) count as
    /// traced (`--cgroup`, `--container`): the directory's inode, what
    /// `bpf_get_current_ancestor_cgroup_id(cgroup_level)` gives for them;
    /// 0: every process.
    pub cgroup_id: u64,
    /// The cgroup's depth below the hierarchy's root (the root is 0).
    pub cgroup_level: u64,
    /// The families (bit `1 << family`) whose calls are recorded only when
    /// they come from outside the item's own libraries ([`CallerRanges`](crate::CallerRanges));
    /// 0 with `--trace-vendor-internal true`, which records them all.
    pub caller_filter: u64,
}

// The `SETTINGS` map's one value, written whole by userspace; no hidden
// padding (Pod).
const _: () = assert!(size_of::<Settings>() == 8 * (14 + 2 * MAX_FAMILIES as usize));

/// What the kernel writes too, in the `STATE` map's one entry: userspace
/// writes single fields of it in place (the map is memory-mapped), never the
/// whole entry, so neither side clobbers the other's writes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelState {
    /// 1 while calls and activity are recorded: set by userspace (collection
    /// starts, `--delay`, a session's stop) and by capture ranges.
    pub recording: u64,
    /// Set when a capture range closed (by the kernel) or recording stopped
    /// for good (by userspace): later starts are ignored (the first start
    /// and the first stop win).
    pub capture_done: u64,
    /// The handle `hgtxDomainCreateA(CAPTURE_NAMES[1])` returned (DOMAIN_NAMED).
    pub capture_domain_handle: u64,
    /// The open range: its thread, its push level, its kind
    /// ([`RANGE_PUSH_DEFAULT`](crate::RANGE_PUSH_DEFAULT),
    /// [`RANGE_PUSH_DOMAIN`](crate::RANGE_PUSH_DOMAIN),
    /// [`RANGE_START`](crate::RANGE_START)) and, for start/end ranges, its id.
    pub capture_owner: u64,
    pub capture_level: u64,
    pub capture_kind: u64,
    pub capture_range_id: u64,
}

// The `STATE` map's one value, memory-mapped: userspace (kernel/state.rs)
// writes the u64 at `KernelState::RECORDING` and `KernelState::CAPTURE_DONE`
// in place, and maps `size_of::<KernelState>()` rounded up to a page.
const _: () = assert!(size_of::<KernelState>() == 56);
const _: () = assert!(KernelState::RECORDING == 0);
const _: () = assert!(KernelState::CAPTURE_DONE == 8);

impl KernelState {
    /// Byte offsets of the fields userspace writes in place.
    pub const RECORDING: usize = core::mem::offset_of!(KernelState, recording);
    pub const CAPTURE_DONE: usize = core::mem::offset_of!(KernelState, capture_done);
}

pub const SCHED_NONE: u64 = 0;
pub const SCHED_PROCESS_TREE: u64 = 1;
pub const SCHED_SYSTEM_WIDE: u64 = 2;
