//! Runs of asys's programs that the kernel skipped.
//!
//! A tracepoint, kprobe or uprobe program is not run while another BPF
//! program, or a `bpf()` map operation, holds the CPU's `bpf_prog_active`
//! count (`trace_call_bpf`). A map operation holds it with migration, not
//! preemption, disabled: a thread preempted inside one (any process's
//! `bpf()` call on a busy CPU) leaves every tracing program on that CPU
//! skipped until it runs again. Such a skipped run is a lost context switch,
//! wake-up or call, and the kernel counts it per program (`recursion_misses`
//! in `bpf_prog_info`, since Linux 5.12 for the programs that have their own
//! recursion check, and since 6.7 for those skipped by `trace_call_bpf`).
use std::os::fd::{AsRawFd, BorrowedFd};

use aya_obj::generated::{bpf_attr, bpf_cmd, bpf_prog_info};

/// The kernel's count of skipped runs of one program, or `None` where the
/// kernel does not say (an older `bpf_prog_info`, or the call failed).
pub fn recursion_misses(prog: BorrowedFd<'_>) -> Option<u64> {
    // SAFETY: bpf_prog_info is plain data; all zeroes is its empty value.
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    // SAFETY: bpf_attr is plain data; all zeroes is its empty value.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // The info_by_fd member of the union, which BPF_OBJ_GET_INFO_BY_FD reads.
    attr.info.bpf_fd = prog.as_raw_fd() as u32;
    attr.info.info_len = size_of::<bpf_prog_info>() as u32;
    attr.info.info = &mut info as *mut bpf_prog_info as u64;
    // `info`, which the kernel writes up to `info_len` bytes of, outlives
    // the call.
    super::multi::bpf_call(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr).ok()?;
    // SAFETY: the kernel wrote back how much of `info` it filled.
    let filled = unsafe { attr.info.info_len } as usize;
    let end = std::mem::offset_of!(bpf_prog_info, recursion_misses) + size_of::<u64>();
    (filled >= end).then_some(info.recursion_misses)
}

/// Skipped runs per program name, summed over the programs of that name
/// (the programs that run nothing count nothing, and are left out).
pub fn by_program<'a>(
    programs: impl IntoIterator<Item = (&'a str, BorrowedFd<'a>)>,
) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for (name, fd) in programs {
        if let Some(n) = recursion_misses(fd).filter(|&n| n > 0) {
            *out.entry(name.to_string()).or_default() += n;
        }
    }
    out
}
