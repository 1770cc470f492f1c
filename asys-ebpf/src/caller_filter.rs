//! Counts what the application called: a call is recorded when it comes
//! from outside its item's libraries. A vendor library calling its own
//! item (libcudnn calling the same function in libcudnn_graph, libcublas
//! calling cublasLt, NVTX compiled into every NVIDIA library) is left out,
//! unless `--trace-vendor-internal true`.
use asys_common::{CallerRanges, Cookie, MAX_CALLER_RANGES, MAX_FAMILIES, Settings, ThreadCalls};
use aya_ebpf::{
    bindings::BPF_F_NO_PREALLOC, helpers::bpf_probe_read_user, macros::map, maps::HashMap,
};

use crate::call_stack::{family_in_flight, is_tail_call_of};

/// Per process (tgid): the executable ranges of its vendor libraries and the
/// families each counts as its own. Written by userspace from the process's
/// mappings; a fork copies its parent's (see process.rs).
#[map]
pub static CALLER_RANGES: HashMap<u32, CallerRanges> =
    HashMap::with_max_entries(16384, BPF_F_NO_PREALLOC);

/// Whether this call is a vendor library's call of its own item: its return
/// address (at `sp`) lies in a range of the process that counts as the
/// family's own. For a process whose ranges are not known (yet), the
/// outermost call of the family on the thread is the application's.
#[inline(always)]
pub fn is_vendor_internal(
    thread: &ThreadCalls,
    tgid: u32,
    cookie: Cookie,
    sp: u64,
    settings: &Settings,
) -> bool {
    let family = cookie.family() & (MAX_FAMILIES - 1);
    let bit = 1u64 << family;
    if settings.caller_filter & bit == 0 {
        return false;
    }
    // A function of the family that jumps to another of it (waitpid to
    // wait4): one call of the application, reported as the one it made.
    if is_tail_call_of(thread, sp, family) {
        return true;
    }
    // SAFETY: the value is only read; userspace replaces it whole (a map
    // update), and a torn read gives a wrong answer for one call at most.
    let Some(ranges) = (unsafe { CALLER_RANGES.get(tgid) }) else {
        return family_in_flight(thread, family);
    };
    // SAFETY: fails instead of faulting.
    let Ok(caller) = (unsafe { bpf_probe_read_user(sp as *const u64) }) else {
        return false;
    };
    let count = ranges.count as usize;
    for i in 0..MAX_CALLER_RANGES {
        if i >= count {
            break;
        }
        let r = &ranges.ranges[i];
        if caller >= r.start && caller < r.end {
            return r.families & bit != 0;
        }
    }
    false
}
