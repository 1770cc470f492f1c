//! Maps shared by all programs, and the helpers that count lost events.
use asys_common::{DropSource, KernelState, Settings, ThreadCalls, TracedProcess};
use aya_ebpf::{
    bindings::{BPF_F_MMAPABLE, BPF_F_NO_PREALLOC, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};

/// Every event for userspace. Userspace may resize it at load time.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(8 * 1024 * 1024, 0);

/// Processes (by tgid) whose events are wanted; forks of them are added here.
#[map]
pub static TRACED: HashMap<u32, TracedProcess> = HashMap::with_max_entries(65536, 0);

/// The key of `STOPPED` that asys's watchdog sets once asys has died: no
/// process is a tgid 0, so it never stands for a stopped process.
pub const STOPPED_DISARMED: u32 = asys_common::STOPPED_DISARMED;

/// Processes the loader hook stopped (SIGSTOP) and userspace has not yet
/// continued: whatever way asys ends, it continues every one left here.
#[map]
pub static STOPPED: HashMap<u32, u32> = HashMap::with_max_entries(4096, 0);

/// Processes (by tgid; the value is unused) whose library load found the ring full and that
/// the loader hook does not stop (system-wide): userspace scans them at its
/// next tick, so a runtime's first load is probed late rather than never.
/// LRU: a burst of such loads evicts the oldest note, never fails.
#[map]
pub static LOADS_UNANNOUNCED: LruHashMap<u32, u32> = LruHashMap::with_max_entries(1024, 0);

/// In-flight API calls per traced thread. Not preallocated: a slot is
/// allocated on a thread's first call and freed when the thread exits.
#[map]
pub static THREADS: HashMap<u32, ThreadCalls> = HashMap::with_max_entries(16384, BPF_F_NO_PREALLOC);

/// One zeroed [`ThreadCalls`] per CPU, the initial value of a new thread's slot
/// (too large for the 512-byte BPF stack).
#[map]
pub static ZERO_THREAD: PerCpuArray<ThreadCalls> = PerCpuArray::with_max_entries(1, 0);

/// Lost events per [`DropSource`], per CPU.
#[map]
pub static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(asys_common::DROP_SOURCES, 0);

/// What userspace asks for (one entry; only userspace writes it).
#[map]
pub static SETTINGS: Array<Settings> = Array::with_max_entries(1, 0);

/// Recording and capture-range state (one entry), written by both sides:
/// memory-mapped so that userspace writes single fields, not the entry.
#[map]
pub static STATE: Array<KernelState> = Array::with_max_entries(1, BPF_F_MMAPABLE);

#[inline(always)]
pub fn count_drop(source: DropSource) {
    count_drops(source, 1);
}

#[inline(always)]
pub fn count_drops(source: DropSource, n: u64) {
    if let Some(slot) = DROPS.get_ptr_mut(source as u32) {
        // SAFETY: a per-CPU slot: no other CPU writes it, and the programs
        // that count do not nest on one CPU (uprobes and tracepoints run with
        // preemption disabled; a perf event that interrupts one may lose an
        // increment, which is a count, not memory safety).
        unsafe { *slot += n };
    }
}

/// The settings; `None` only if the one-entry array could not be read,
/// which the verifier makes us handle (counted by the caller).
#[inline(always)]
pub fn settings() -> Option<&'static Settings> {
    SETTINGS.get(0)
}

/// The shared state, for reading and for the kernel's writes.
#[inline(always)]
pub fn state() -> Option<&'static mut KernelState> {
    // SAFETY: the array's one value lives as long as the map; the programs
    // write single u64 fields, which the hardware writes whole, and
    // userspace does the same through its mapping.
    STATE.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// Whether `tgid`'s calls are wanted: it is in the traced tree, or asys
/// traces the whole machine (the current task's cgroup permitting).
#[inline(always)]
pub fn is_traced(settings: &Settings, tgid: u32) -> bool {
    system_wide_includes_current(settings)
        // SAFETY: the value is copied out at once; the map is not mutated
        // through this reference.
        || unsafe { TRACED.get(tgid).is_some() }
}

/// Whether system-wide tracing covers the current task: it is on, and the
/// task is in the `--cgroup`/`--container` cgroup or below it (its ancestor
/// at that cgroup's level is that cgroup), or no cgroup was asked for.
#[inline(always)]
pub fn system_wide_includes_current(settings: &Settings) -> bool {
    settings.system_wide != 0 && in_cgroup(settings)
}

/// Whether the current task is in the settings' cgroup (or there is none).
#[inline(always)]
pub fn in_cgroup(settings: &Settings) -> bool {
    settings.cgroup_id == 0
        // SAFETY: the helper reads the current task's cgroup; a level deeper
        // than the task's own gives 0, which no cgroup's id is.
        || unsafe {
            aya_ebpf::helpers::generated::bpf_get_current_ancestor_cgroup_id(
                settings.cgroup_level as i32,
            )
        } == settings.cgroup_id
}

/// Whether calls and activity of `tgid` are recorded now: collection is on
/// (off during `--delay`; process tracking goes on) and it is traced. The
/// flag first: it is a load, the TRACED lookup a hash.
#[inline(always)]
pub fn is_recording(settings: &Settings, tgid: u32) -> Result<bool, DropSource> {
    let state = state().ok_or(DropSource::ConfigUnreadable)?;
    Ok(state.recording != 0 && is_traced(settings, tgid))
}

/// Submit flags for high-rate events: wake the reader only once
/// `wake_bytes` wait (it also polls on a timer), which spares most calls
/// the cost of a wake-up; rarer events that someone waits for always wake it.
#[inline(always)]
pub fn batched_wakeup(settings: &Settings) -> u64 {
    const AVAIL_DATA: u64 = 0;
    if EVENTS.query(AVAIL_DATA) >= settings.wake_bytes {
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        BPF_RB_NO_WAKEUP as u64
    }
}

/// The header of an event of the current task, stamped now.
#[inline(always)]
pub fn header(kind: asys_common::EventKind, pid_tgid: u64) -> asys_common::EventHeader {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    header_at(kind, pid_tgid, unsafe {
        aya_ebpf::helpers::generated::bpf_ktime_get_ns()
    })
}

/// The header of an event of the current task stamped `ts` (a time the
/// program already read: one clock read less on the hot path).
#[inline(always)]
pub fn header_at(kind: asys_common::EventKind, pid_tgid: u64, ts: u64) -> asys_common::EventHeader {
    asys_common::EventHeader {
        kind: kind as u32,
        // SAFETY: bpf_get_smp_processor_id has no preconditions.
        cpu: unsafe { aya_ebpf::helpers::generated::bpf_get_smp_processor_id() },
        ts,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
    }
}

/// Copies the user stack from `sp` upwards into `stack` for userspace to
/// unwind; returns the bytes copied. Near the top of a stack a full window may
/// run into unmapped memory, so smaller windows are tried in turn, 1 KiB
/// apart: halving (8, 4, 2, 1 KiB) lost up to 4 KiB of the frames nearest
/// the top, and with them `main`'s callers, in about a third of the runs of
/// a deep interpreter (CPython 3.10: where the stack's top fell depends on
/// its randomized start). Sizes stay constants, for the verifier.
#[inline(always)]
pub fn copy_user_stack(sp: u64, stack: &mut [u8; asys_common::STACK_BYTES]) -> u64 {
    use asys_common::STACK_BYTES;
    const K: usize = STACK_BYTES / 8;
    for len in [
        STACK_BYTES,
        STACK_BYTES - K,
        STACK_BYTES - 2 * K,
        STACK_BYTES - 3 * K,
        STACK_BYTES - 4 * K,
        STACK_BYTES - 5 * K,
        STACK_BYTES - 6 * K,
        STACK_BYTES - 7 * K,
    ] {
        // SAFETY: bpf_probe_read_user faults nothing: an unmapped or
        // swapped-out address makes it fail, and the destination is ours.
        if unsafe { aya_ebpf::helpers::bpf_probe_read_user_buf(sp as *const u8, &mut stack[..len]) }
            .is_ok()
        {
            return len as u64;
        }
    }
    0
}
