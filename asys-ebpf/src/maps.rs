//! Maps shared by all programs, and the helpers that count lost events.
use asys_common::{DropSource, ThreadCalls, TracedProcess};
use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf},
};

/// Every event for userspace. Userspace may resize it at load time.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(8 * 1024 * 1024, 0);

/// Processes (by tgid) whose events are wanted; forks of them are added here.
#[map]
pub static TRACED: HashMap<u32, TracedProcess> = HashMap::with_max_entries(65536, 0);

/// Processes the loader hook stopped (SIGSTOP) and userspace has not yet
/// continued: whatever way asys ends, it continues every one left here.
#[map]
pub static STOPPED: HashMap<u32, u32> = HashMap::with_max_entries(4096, 0);

/// In-flight API calls per traced thread. Not preallocated: a slot is
/// allocated on a thread's first call and freed when the thread exits.
#[map]
pub static THREADS: HashMap<u32, ThreadCalls> = HashMap::with_max_entries(16384, BPF_F_NO_PREALLOC);

/// One zeroed [`ThreadCalls`] per CPU, the initial value of a new thread's slot
/// (too large for the 512-byte BPF stack).
#[map]
pub static ZERO_THREAD: PerCpuArray<ThreadCalls> = PerCpuArray::with_max_entries(1, 0);

/// Per API family: calls shorter than this many ns are not reported (the
/// `--osrt-threshold` of the OS runtime family; 0 for the others).
#[map]
pub static MIN_DURATION: Array<u64> = Array::with_max_entries(asys_common::MAX_FAMILIES, 0);

/// Per API family: calls at least this long (ns) get the caller's stack
/// (`--hggc-backtrace all:<ns>`); `u64::MAX` (the default 0 is read as off)
/// or 0 turns stacks off.
#[map]
pub static STACK_THRESHOLD: Array<u64> = Array::with_max_entries(asys_common::MAX_FAMILIES, 0);

/// Lost events per [`DropSource`], per CPU.
#[map]
pub static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(asys_common::DROP_SOURCES, 0);

#[inline(always)]
pub fn count_drop(source: DropSource) {
    if let Some(slot) = DROPS.get_ptr_mut(source as u32) {
        // Per-CPU slot: no other CPU writes it, and programs do not nest here.
        unsafe { *slot += 1 };
    }
}

/// Whether `tgid`'s calls are wanted: it is in the traced tree, or asys
/// traces the whole machine.
#[inline(always)]
pub fn is_traced(tgid: u32) -> bool {
    let in_tree = unsafe { TRACED.get(tgid).is_some() };
    in_tree || config(asys_common::CONFIG_SYSTEM_WIDE) != 0
}

/// Settings from userspace, by `asys_common::CONFIG_*` slot.
#[map]
pub static CONFIG: Array<u64> = Array::with_max_entries(asys_common::CONFIG_ENTRIES, 0);

#[inline(always)]
pub fn config(slot: u32) -> u64 {
    CONFIG.get(slot).copied().unwrap_or(0)
}

/// Whether calls and activity of `tgid` are recorded now: it is traced, and
/// collection is on (off during `--delay`; process tracking goes on).
#[inline(always)]
pub fn is_recording(tgid: u32) -> bool {
    CONFIG
        .get(asys_common::CONFIG_RECORDING)
        .copied()
        .unwrap_or(0)
        != 0
        && is_traced(tgid)
}

/// Submit flags for API events: wake the reader only once a quarter of the
/// buffer is filled (it also polls on a timer), which spares most calls the
/// cost of a wake-up; rarer events that someone waits for always wake it.
#[inline(always)]
pub fn api_submit_flags() -> u64 {
    const AVAIL_DATA: u64 = 0;
    const RING_SIZE: u64 = 1;
    let avail = EVENTS.query(AVAIL_DATA);
    let size = EVENTS.query(RING_SIZE);
    if avail >= size / 4 {
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        BPF_RB_NO_WAKEUP as u64
    }
}

/// The header of an event of the current task.
#[inline(always)]
pub fn header(kind: asys_common::EventKind, pid_tgid: u64) -> asys_common::EventHeader {
    asys_common::EventHeader {
        kind: kind as u32,
        cpu: unsafe { aya_ebpf::helpers::generated::bpf_get_smp_processor_id() },
        ts: unsafe { aya_ebpf::helpers::generated::bpf_ktime_get_ns() },
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
    }
}

/// Copies the user stack from `sp` upwards into `stack` for userspace to
/// unwind; returns the bytes copied. Near the top of a stack a full window may
/// run into unmapped memory, so smaller windows are tried in turn.
#[inline(always)]
pub fn copy_user_stack(sp: u64, stack: &mut [u8; asys_common::STACK_BYTES]) -> u64 {
    use asys_common::STACK_BYTES;
    for len in [
        STACK_BYTES,
        STACK_BYTES / 2,
        STACK_BYTES / 4,
        STACK_BYTES / 8,
    ] {
        if unsafe { aya_ebpf::helpers::bpf_probe_read_user_buf(sp as *const u8, &mut stack[..len]) }
            .is_ok()
        {
            return len as u64;
        }
    }
    0
}
