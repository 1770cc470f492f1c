//! Keeps a thread's stack of API calls in flight in step with the real one.
//!
//! Every call of a traced thread is pushed (a placeholder when it is not
//! recorded), and each return is matched to its entry by the stack pointer:
//! at the entry it points at the return address, after the return it is 8
//! bytes higher. A return without an entry (the probes were attached while
//! the call was in flight) pops nothing, and entries deeper than a frame
//! that returns or enters (longjmp, a missed return) are discarded. Past
//! [`MAX_CALL_DEPTH`] calls are counted, not stored, and match by depth.
//!
//! Reusable by any family that wants "once per outermost call per thread":
//! [`family_in_flight`] says whether a call of a family is already open.
use asys_common::{Cookie, MAX_CALL_DEPTH, MAX_FAMILIES, ThreadCalls};

use crate::maps::{THREADS, ZERO_THREAD};

/// How far below a frame a stale entry may lie. A stack pointer further off
/// is another stack (a signal handler's sigaltstack, a fiber), whose calls
/// leave the entries of this one alone.
const SAME_STACK_SPAN: u64 = 64 << 20;

/// The index of the innermost stored entry, if any.
#[inline(always)]
fn top(thread: &ThreadCalls) -> Option<u32> {
    match thread.depth {
        0 => None,
        d if d > MAX_CALL_DEPTH => Some(MAX_CALL_DEPTH - 1),
        d => Some(d - 1),
    }
}

/// Drops the innermost entries whose stack pointer is below `bound` (and,
/// with them, every uncounted call deeper still).
#[inline(always)]
pub fn discard_below(thread: &mut ThreadCalls, bound: u64) {
    for _ in 0..MAX_CALL_DEPTH {
        let Some(i) = top(thread) else {
            return;
        };
        let sp = thread.entries[slot_index(i)].sp;
        if sp >= bound || bound - sp > SAME_STACK_SPAN {
            return;
        }
        thread.depth = i;
    }
}

/// At an entry at `sp` that found `ret_addr` there: drops the entries of
/// calls deeper than this frame, and one at the same stack pointer that
/// found the same return address (a call from the same site whose return
/// was missed). One that found another address is the caller of a tail
/// call (glibc's waitpid jumping to wait4: its return probe had replaced
/// the address); it stays, and both return together.
#[inline(always)]
pub fn discard_stale(thread: &mut ThreadCalls, sp: u64, ret_addr: u64) {
    discard_below(thread, sp);
    if let Some(i) = top(thread) {
        let entry = &thread.entries[slot_index(i)];
        if entry.sp == sp && entry.ret_addr == ret_addr {
            thread.depth = i;
        }
    }
}

/// Pops the call whose entry saw stack pointer `entry_sp`; its index in
/// `entries`, or None when the return belongs to no stored entry (a call
/// past the depth limit, which is only counted, or one whose entry was
/// never seen).
#[inline(always)]
pub fn pop_matching(thread: &mut ThreadCalls, entry_sp: u64) -> Option<u32> {
    discard_below(thread, entry_sp);
    let i = top(thread)?;
    if thread.entries[slot_index(i)].sp == entry_sp {
        // Anything counted past the limit was deeper: it is gone too.
        thread.depth = i;
        return Some(i);
    }
    if thread.depth > MAX_CALL_DEPTH {
        thread.depth -= 1;
    }
    None
}

/// The call entered at `sp` was jumped to by the innermost call in flight,
/// of `family` (a tail call: the same stack pointer; after
/// [`discard_stale`], an entry there found another return address).
#[inline(always)]
pub fn is_tail_call_of(thread: &ThreadCalls, sp: u64, family: u32) -> bool {
    let Some(i) = top(thread) else {
        return false;
    };
    let entry = &thread.entries[slot_index(i)];
    entry.sp == sp && Cookie(entry.cookie).family() & (MAX_FAMILIES - 1) == family
}

/// Whether a call of `family` is in flight on the thread (recorded or not).
#[inline(always)]
pub fn family_in_flight(thread: &ThreadCalls, family: u32) -> bool {
    let family = family & (MAX_FAMILIES - 1);
    for i in 0..MAX_CALL_DEPTH {
        if i >= thread.depth {
            return false;
        }
        if Cookie(thread.entries[slot_index(i)].cookie).family() & (MAX_FAMILIES - 1) == family {
            return true;
        }
    }
    false
}

/// `depth` masked into the entry array. The volatile read hides the earlier
/// range check from the compiler, so the mask stays in the code and the
/// verifier sees a bounded index (it cannot follow the compiler's reasoning).
#[inline(always)]
pub fn slot_index(depth: u32) -> usize {
    // SAFETY: a read of a local.
    let d = unsafe { core::ptr::read_volatile(&depth) };
    (d & (MAX_CALL_DEPTH - 1)) as usize
}

/// The calling thread's slot, created on its first call.
#[inline(always)]
pub fn thread_calls(tid: u32) -> Option<*mut ThreadCalls> {
    if let Some(p) = THREADS.get_ptr_mut(tid) {
        return Some(p);
    }
    let zero = ZERO_THREAD.get_ptr(0)?;
    // By reference: a copy would put the whole `ThreadCalls` (872 bytes,
    // asserted in asys-common) on the 512-byte BPF stack.
    // SAFETY: the per-CPU zero value is never written.
    #[allow(clippy::needless_borrows_for_generic_args)]
    THREADS.insert(tid, unsafe { &*zero }, 0).ok()?;
    THREADS.get_ptr_mut(tid)
}
