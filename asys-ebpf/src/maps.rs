//! Maps shared by all programs, and the helpers that count lost events.
use asys_common::{ApiEntry, DropSource, TracedProcess};
use aya_ebpf::{
    macros::map,
    maps::{HashMap, PerCpuArray, RingBuf},
};

/// Every event for userspace. Userspace may resize it at load time.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(8 * 1024 * 1024, 0);

/// Processes (by tgid) whose events are wanted; forks of them are added here.
#[map]
pub static TRACED: HashMap<u32, TracedProcess> = HashMap::with_max_entries(65536, 0);

/// In-flight API calls, keyed by `tid << 32 | depth`.
#[map]
pub static ENTRIES: HashMap<u64, ApiEntry> = HashMap::with_max_entries(65536, 0);

/// Current API call depth per thread.
#[map]
pub static DEPTH: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);

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

#[inline(always)]
pub fn is_traced(tgid: u32) -> bool {
    unsafe { TRACED.get(&tgid).is_some() }
}
