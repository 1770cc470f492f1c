//! Kernel stacks of CPU samples and of switched-out threads: the return
//! addresses `bpf_get_stack` walks (the kernel's own unwinder, ORC or frame
//! pointers), named by userspace from /proc/kallsyms.
use asys_common::{DropSource, EventKind, KERNEL_STACK_DEPTH, KernelStackEvent};
use aya_ebpf::helpers::generated::bpf_get_stack;

use crate::maps::{EVENTS, batched_wakeup, header_at};

/// Sends the current thread's kernel stack as the companion of the event
/// stamped `owner_ts`. `ctx` is the program's context (perf event or
/// tracepoint), from which the helper takes the registers.
#[inline(always)]
pub fn send(
    ctx: *mut core::ffi::c_void,
    settings: &asys_common::Settings,
    pid_tgid: u64,
    owner_ts: u64,
    source: u32,
    full: DropSource,
) -> Result<(), DropSource> {
    let mut slot = EVENTS.reserve::<KernelStackEvent>(0).ok_or(full)?;
    // SAFETY: the reserved record is ours until submitted; filled in place.
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = header_at(EventKind::KernelStack, pid_tgid, owner_ts);
    ev.owner_ts = owner_ts;
    ev.source = source;
    const BYTES: u32 = size_of::<[u64; KERNEL_STACK_DEPTH]>() as u32;
    // SAFETY: `ips` is BYTES long and inside the reserved record; flags 0
    // asks for the kernel stack. Returns the bytes written or a negative
    // error (then the stack is sent empty).
    let n = unsafe { bpf_get_stack(ctx, ev.ips.as_mut_ptr() as *mut _, BYTES, 0) };
    ev.depth = if n > 0 {
        (n as u32) / size_of::<u64>() as u32
    } else {
        0
    };
    slot.submit(batched_wakeup(settings));
    Ok(())
}
