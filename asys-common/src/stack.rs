//! Stacks sent right after the record they belong to: the user stack of a
//! slow API call or of a probe hit (registers and a copy of the stack, for
//! userspace to unwind), and the kernel stack of a sample, a switch-out or
//! a wake-up. [`STACK_BYTES`] is the user-stack window of CPU samples too.
use core::mem::offset_of;

use crate::EventHeader;

/// Bytes of user stack copied for a call stack (unwound in userspace with the
/// binaries' DWARF CFI, so frame pointers are not needed).
pub const STACK_BYTES: usize = 8192;

/// The caller's registers and stack at the return of a slow API call.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ApiStackEvent {
    pub header: EventHeader,
    /// Start of the call this stack belongs to (with `header.tid`, a key).
    pub call_start: u64,
    /// Registers right after the call returned: the return address, and the
    /// caller's stack and frame pointers.
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// Valid bytes of `stack`, copied from `sp` upwards.
    pub len: u64,
    pub stack: [u8; STACK_BYTES],
}

// The eBPF side (api.rs, user_probe.rs) writes only `len` bytes of `stack`;
// collect/decode.rs reads the fields before it through its `StackPrefix`
// (which asserts that it mirrors them) and slices `len` bytes from `stack`,
// never past the record.
const _: () = assert!(size_of::<ApiStackEvent>() == 64 + STACK_BYTES);
const _: () = assert!(offset_of!(ApiStackEvent, header) == 0);
const _: () = assert!(offset_of!(ApiStackEvent, call_start) == 24);
const _: () = assert!(offset_of!(ApiStackEvent, ip) == 32);
const _: () = assert!(offset_of!(ApiStackEvent, sp) == 40);
const _: () = assert!(offset_of!(ApiStackEvent, bp) == 48);
const _: () = assert!(offset_of!(ApiStackEvent, len) == 56);
const _: () = assert!(offset_of!(ApiStackEvent, stack) == 64);

/// Return addresses of a kernel stack kept per sample or switch.
pub const KERNEL_STACK_DEPTH: usize = 32;
/// [`KernelStackEvent::source`]: the stack of a CPU sample in the kernel.
pub const KSTACK_SAMPLE: u32 = 0;
/// [`KernelStackEvent::source`]: the stack of a thread switched out.
pub const KSTACK_SWITCH: u32 = 1;
/// [`KernelStackEvent::source`]: the waker's stack at a wake-up.
pub const KSTACK_WAKING: u32 = 2;

/// The kernel stack (`bpf_get_stack`) of a sample, a switch-out or a
/// waker at its wake-up, which `owner_ts` and the header's tid identify.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelStackEvent {
    pub header: EventHeader,
    /// The `ts` of the sample's or switch's own event.
    pub owner_ts: u64,
    pub source: u32,
    /// Valid entries of `ips`, innermost first.
    pub depth: u32,
    pub ips: [u64; KERNEL_STACK_DEPTH],
}

// The eBPF side (kernel_stack.rs) has `bpf_get_stack` write the first
// `depth` entries of `ips` only; collect/decode.rs reads the record whole
// and userspace keeps `depth` entries.
const _: () = assert!(size_of::<KernelStackEvent>() == 40 + 8 * KERNEL_STACK_DEPTH);
const _: () = assert!(offset_of!(KernelStackEvent, header) == 0);
const _: () = assert!(offset_of!(KernelStackEvent, owner_ts) == 24);
const _: () = assert!(offset_of!(KernelStackEvent, source) == 32);
const _: () = assert!(offset_of!(KernelStackEvent, depth) == 36);
const _: () = assert!(offset_of!(KernelStackEvent, ips) == 40);
