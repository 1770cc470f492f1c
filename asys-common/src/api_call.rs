//! API calls: what the entry probe keeps for the exit probe per thread, the
//! call records (full, short, with a text argument), and the names the
//! injection library gives the ids of the calls it reports itself.
use core::mem::offset_of;

use crate::{EventHeader, EventKind};

/// Largest number of integer arguments captured per API call: the six argument
/// registers of the x86-64 SysV ABI plus the first two stack slots.
pub const MAX_ARGS: usize = 8;

/// Depth of nested API calls tracked per thread before entries are dropped.
/// A power of two: the slot index is masked with `MAX_CALL_DEPTH - 1`.
/// Deeper calls are counted (the thread's depth stays in step) but not
/// stored, and each one that would have been recorded counts a
/// [`DropSource::ApiDepth`](crate::DropSource::ApiDepth).
pub const MAX_CALL_DEPTH: u32 = 4;

/// Longest text captured from an API argument.
pub const TEXT_LEN: usize = 64;

/// Offsets in an NVTX v2 / HGTX event attributes struct.
pub const ATTRIBUTES_MESSAGE_TYPE: usize = 32;
pub const ATTRIBUTES_MESSAGE: usize = 40;
/// NVTX message types: the message is an ASCII string / a registered handle.
pub const MESSAGE_TYPE_ASCII: i32 = 1;
pub const MESSAGE_TYPE_UNICODE: i32 = 2;
pub const MESSAGE_TYPE_REGISTERED: i32 = 3;

/// What the entry probe saves for its exit probe.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiEntry {
    pub cookie: u64,
    pub start: u64,
    pub args: [u64; MAX_ARGS],
    /// Correlation id the runtime gave the call, set from the injection
    /// library's API callback site; 0 when unknown.
    pub correlation: u64,
    /// A registered-string handle given instead of text, else 0.
    pub text_handle: u64,
    /// 1 when `text` holds raw UTF-32 (wchar_t) rather than a C string.
    pub text_wide: u64,
    /// 1 when the text could not be read at entry (its page not in memory
    /// yet); the return probe tries again, once the callee has touched it.
    pub text_unread: u64,
    /// Text captured at entry when the cookie asks for it (NUL-terminated).
    pub text: [u8; TEXT_LEN],
    /// The stack pointer at the entry (pointing at the return address): the
    /// return of this call is the one whose stack pointer is `sp + 8`.
    pub sp: u64,
    /// The return address the entry found at `sp`: a call entering later at
    /// the same stack pointer finds another one there when it was jumped to
    /// (a tail call: the first call's return probe replaced it), and the
    /// same one when it is a new call from the same site (the first one's
    /// return was missed).
    pub ret_addr: u64,
    /// 1: the call is reported at its return; 0: a placeholder, kept only so
    /// that the thread's stack stays in step (not recording at the entry,
    /// or a vendor library's call of its own item).
    pub recorded: u64,
}

// An element of `ThreadCalls::entries`, below; no hidden padding (Pod).
const _: () = assert!(size_of::<ApiEntry>() == 200);

/// The API calls in flight on one thread: a small stack of entries.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThreadCalls {
    /// Calls in flight, recorded or not; may exceed [`MAX_CALL_DEPTH`]
    /// (only the outermost `MAX_CALL_DEPTH` are stored in `entries`).
    pub depth: u32,
    /// What the return of the call in flight is wanted for (`-c hgtx`):
    /// [`PENDING_RANGE_ID`](crate::PENDING_RANGE_ID),
    /// [`PENDING_DOMAIN`](crate::PENDING_DOMAIN),
    /// [`PENDING_RETRY_OPEN`](crate::PENDING_RETRY_OPEN),
    /// [`PENDING_RETRY_DOMAIN`](crate::PENDING_RETRY_DOMAIN), or 0.
    pub pending: u32,
    /// With a retry: the call's cookie and its first three arguments (the
    /// name could not be read at entry; it is read again at the return).
    pub pending_cookie: u64,
    pub pending_args: [u64; 3],
    /// With [`PENDING_RETRY_OPEN`](crate::PENDING_RETRY_OPEN): the push
    /// level the range would have.
    pub pending_level: u64,
    /// The stack pointer at the entry of the hgtx call that set `pending`:
    /// only its own return takes the value (not that of a call it makes).
    pub pending_sp: u64,
    /// Open hgtx push/pop ranges: of the default domain, of other domains.
    pub hgtx_depth: [u32; 2],
    /// Where the injection library keeps this thread's latest correlation id
    /// (a u32 in its thread-local storage), learnt from its `asys_site_api`
    /// announcements; 0 when unknown. The exit probe reads it, so that the
    /// library needs a probe hit only now and then, not on every call.
    pub correlation_slot: u64,
    pub entries: [ApiEntry; MAX_CALL_DEPTH as usize],
}

// The `THREADS` map's value, which userspace reads too (kernel/mod.rs); the
// eBPF side keeps it in the map, never on its 512-byte stack
// (call_stack.rs).
const _: () = assert!(size_of::<ThreadCalls>() == 872);

/// One completed API call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ApiCallEvent {
    pub header: EventHeader,
    /// The probe's cookie: probe id in the low 32 bits, flags above.
    pub cookie: u64,
    /// Entry time; `header.ts` is the exit time.
    pub start: u64,
    /// Raw return register (rax).
    pub ret: u64,
    pub args: [u64; MAX_ARGS],
    /// `*args[0]` read at exit when the cookie asks for it, else 0.
    pub out0: u64,
    /// See [`ApiEntry::correlation`].
    pub correlation: u64,
}

// collect/decode.rs reads a whole `ApiCallEvent` from an `ApiCall` record,
// and from the start of an `ApiCallText` and a `LockWait` record, which
// begin with one.
const _: () = assert!(size_of::<ApiCallEvent>() == 128);
const _: () = assert!(offset_of!(ApiCallEvent, header) == 0);
const _: () = assert!(offset_of!(ApiCallEvent, cookie) == 24);
const _: () = assert!(offset_of!(ApiCallEvent, start) == 32);
const _: () = assert!(offset_of!(ApiCallEvent, ret) == 40);
const _: () = assert!(offset_of!(ApiCallEvent, args) == 48);
const _: () = assert!(offset_of!(ApiCallEvent, out0) == 112);
const _: () = assert!(offset_of!(ApiCallEvent, correlation) == 120);

/// A completed API call whose signature reads no argument: 56 bytes on the
/// ring instead of 128, for the calls that are most of a busy application's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ApiCallShortEvent {
    pub header: EventHeader,
    pub cookie: u64,
    pub start: u64,
    pub ret: u64,
    pub correlation: u64,
}

// 56 bytes (64 in the ring, with its 8-byte record header) as
// docs/architecture.md and tests/profile.rs (a ring filled to the byte with
// them) say; collect/decode.rs reads it whole and widens it. Its fields up
// to `ret` lie where an `ApiCallEvent`'s do.
const _: () = assert!(size_of::<ApiCallShortEvent>() == 56);
const _: () = assert!(offset_of!(ApiCallShortEvent, header) == 0);
const _: () = assert!(offset_of!(ApiCallShortEvent, cookie) == offset_of!(ApiCallEvent, cookie));
const _: () = assert!(offset_of!(ApiCallShortEvent, start) == offset_of!(ApiCallEvent, start));
const _: () = assert!(offset_of!(ApiCallShortEvent, ret) == offset_of!(ApiCallEvent, ret));
const _: () = assert!(offset_of!(ApiCallShortEvent, correlation) == 48);

impl ApiCallShortEvent {
    /// The same call as an [`ApiCallEvent`] (no arguments, no out-pointer).
    pub fn widen(&self) -> ApiCallEvent {
        ApiCallEvent {
            header: EventHeader {
                kind: EventKind::ApiCall as u32,
                ..self.header
            },
            cookie: self.cookie,
            start: self.start,
            ret: self.ret,
            args: [0; MAX_ARGS],
            out0: 0,
            correlation: self.correlation,
        }
    }
}

/// An API call with the text of one argument.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiTextEvent {
    pub call: ApiCallEvent,
    pub text_handle: u64,
    /// See [`ApiEntry::text_wide`].
    pub text_wide: u64,
    pub text: [u8; TEXT_LEN],
}

// collect/decode.rs reads it whole; `text` is a NUL-terminated string (or
// raw UTF-32 with `text_wide`) that userspace cuts at its end.
const _: () = assert!(size_of::<ApiTextEvent>() == 208);
const _: () = assert!(offset_of!(ApiTextEvent, call) == 0);
const _: () = assert!(offset_of!(ApiTextEvent, text_handle) == 128);
const _: () = assert!(offset_of!(ApiTextEvent, text_wide) == 136);
const _: () = assert!(offset_of!(ApiTextEvent, text) == 144);

/// Marks a kernel name's id in [`ApiNameEvent`] and in a CUDA kernel
/// record's `func`.
pub const KERNEL_NAME_BIT: u32 = 0x8000_0000;

/// Longest name carried by an [`ApiNameEvent`]: API names are short, but
/// CUDA kernel names (ids with the high bit set) are mangled C++ templates.
pub const API_NAME_LEN: usize = 1024;

/// `asys_site_name(id, name)`: the injection library numbers the API names it
/// sees; calls recorded through its sites carry the number. Ids with
/// [`KERNEL_NAME_BIT`] name CUDA kernels instead: a kernel's activity record
/// carries the id in `func`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiNameEvent {
    pub header: EventHeader,
    pub id: u32,
    pub _pad: u32,
    pub name: [u8; API_NAME_LEN],
}

// collect/decode.rs reads it whole; the eBPF side (activity.rs) writes
// `name` only up to its NUL (bpf_probe_read_user_str_bytes), where
// userspace cuts it.
const _: () = assert!(size_of::<ApiNameEvent>() == 1056);
const _: () = assert!(offset_of!(ApiNameEvent, header) == 0);
const _: () = assert!(offset_of!(ApiNameEvent, id) == 24);
const _: () = assert!(offset_of!(ApiNameEvent, name) == 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_call_widens_to_the_same_call_without_arguments() {
        let short = ApiCallShortEvent {
            header: EventHeader {
                kind: EventKind::ApiCallShort as u32,
                cpu: 1,
                ts: 20,
                pid: 3,
                tid: 4,
            },
            cookie: 5,
            start: 10,
            ret: 6,
            correlation: 7,
        };
        let wide = short.widen();
        assert_eq!(wide.header.kind, EventKind::ApiCall as u32);
        assert_eq!(
            (wide.header.ts, wide.header.pid, wide.header.tid),
            (20, 3, 4)
        );
        assert_eq!(
            (wide.cookie, wide.start, wide.ret, wide.correlation),
            (5, 10, 6, 7)
        );
        assert_eq!((wide.args, wide.out0), ([0; MAX_ARGS], 0));
    }
}
