//! Probes on the injection library's nop5 sites (kernel 6.18 turns a uprobe on
//! a 5-byte NOP into a cheap syscall instead of a trap):
//! - `asys_site_activity(const ActivityRecord *)`: one device activity record,
//!   copied into the ring buffer;
//! - `asys_site_api(correlation)` and `asys_site_call(...)`: the runtime's API
//!   callback (see `api_site`, `call_site`);
//! - `asys_site_name(id, name)`: names for the ids of site-recorded calls;
//! - `asys_site_lost(u64 n)`: records the injection library could not deliver.
use asys_common::{
    ActivityEvent, ActivityRecord, ApiCallEvent, ApiCallShortEvent, ApiNameEvent, Cookie,
    DropSource, EventKind,
};
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user, bpf_probe_read_user_str_bytes},
    macros::uprobe,
    programs::ProbeContext,
};

use crate::maps::{
    EVENTS, THREADS, batched_wakeup, count_drop, count_drops, header, is_recording, is_traced,
    settings,
};

#[uprobe]
pub fn activity_site(ctx: ProbeContext) -> u32 {
    if let Err(source) = try_activity_site(&ctx) {
        count_drop(source);
    }
    0
}

fn try_activity_site(ctx: &ProbeContext) -> Result<(), DropSource> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    if !is_recording(settings, (pid_tgid >> 32) as u32)? {
        return Ok(());
    }
    // SAFETY: a uprobe's context points to the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    // SAFETY: fails instead of faulting.
    let record = unsafe { bpf_probe_read_user(regs.rdi as *const ActivityRecord) }
        .map_err(|_| DropSource::ActivityLost)?;
    let mut slot = EVENTS
        .reserve::<ActivityEvent>(0)
        .ok_or(DropSource::ActivityRingFull)?;
    slot.write(ActivityEvent {
        header: header(EventKind::DeviceActivity, pid_tgid),
        record,
    });
    slot.submit(batched_wakeup(settings));
    Ok(())
}

/// `asys_site_api(correlation, slot)`, at the entry of a runtime API call
/// (uprobes on the runtime record the call) on a thread's first call and
/// now and then: tags the innermost call in flight on the thread with the
/// runtime's correlation id, and keeps the address of the thread's slot
/// where the library leaves the ids of the calls that do not come here.
#[uprobe]
pub fn api_site(ctx: ProbeContext) -> u32 {
    // SAFETY: a uprobe's context points to the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    if let Err(source) = tag_correlation(regs.rdi & 0xffff_ffff, regs.rsi) {
        count_drop(source);
    }
    0
}

/// `asys_site_call`, at the exit of every runtime API call when asys records
/// the API through the injection library (`--api-probes site`): one probe
/// hit per call, which reports the whole call. The library passes everything
/// in registers (see `asys_inject::sites::asys_site_call`), so the only
/// user-memory read left is `*args[0]`, for calls that have an argument 0:
///
/// rdi: the cookie ([`Cookie::site`] of the name id), rsi: the correlation
/// id, rdx: the result, rcx: the start (CLOCK_MONOTONIC, the clock of
/// bpf_ktime_get_ns), r8..r15: the eight argument slots.
#[uprobe]
pub fn call_site(ctx: ProbeContext) -> u32 {
    if let Err(source) = try_call_site(&ctx) {
        count_drop(source);
    }
    0
}

fn try_call_site(ctx: &ProbeContext) -> Result<(), DropSource> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    if !is_recording(settings, (pid_tgid >> 32) as u32)? {
        return Ok(());
    }
    // SAFETY: a uprobe's context points to the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    let cookie = Cookie::site(regs.rdi as u32).0;
    let args = [
        regs.r8, regs.r9, regs.r10, regs.r11, regs.r12, regs.r13, regs.r14, regs.r15,
    ];
    if args == [0; 8] {
        // No argument (hggcGetLastError, synchronizations): the short event
        // says the same in less than half the bytes.
        let mut slot = EVENTS
            .reserve::<ApiCallShortEvent>(0)
            .ok_or(DropSource::ApiRingFull)?;
        slot.write(ApiCallShortEvent {
            header: header(EventKind::ApiCallShort, pid_tgid),
            cookie,
            start: regs.rcx,
            ret: regs.rdx,
            correlation: regs.rsi & 0xffff_ffff,
        });
        slot.submit(batched_wakeup(settings));
        return Ok(());
    }
    // The kernel does not know the API's signature: read *args[0] (a failed
    // read gives 0); userspace keeps it where it means something.
    let out0 = if args[0] != 0 {
        // SAFETY: fails instead of faulting.
        unsafe { bpf_probe_read_user(args[0] as *const u64) }.unwrap_or(0)
    } else {
        0
    };
    let mut slot = EVENTS
        .reserve::<ApiCallEvent>(0)
        .ok_or(DropSource::ApiRingFull)?;
    slot.write(ApiCallEvent {
        header: header(EventKind::ApiCall, pid_tgid),
        cookie,
        start: regs.rcx,
        ret: regs.rdx,
        args,
        out0,
        correlation: regs.rsi & 0xffff_ffff,
    });
    slot.submit(batched_wakeup(settings));
    Ok(())
}

fn tag_correlation(correlation: u64, slot: u64) -> Result<(), DropSource> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let thread = match THREADS.get_ptr_mut(tid) {
        Some(thread) => thread,
        None => {
            // A traced thread whose calls are not recorded yet (--delay):
            // its slot is wanted once they are.
            let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
            if !is_traced(settings, (pid_tgid >> 32) as u32) {
                return Ok(());
            }
            crate::call_stack::thread_calls(tid).ok_or(DropSource::ApiEntryMapFull)?
        }
    };
    // SAFETY: the map value lives until the thread's exit removes it, which
    // cannot run while this thread is in a probe.
    let thread = unsafe { &mut *thread };
    thread.correlation_slot = slot;
    let depth = thread.depth;
    if depth == 0 {
        return Ok(());
    }
    let entry = &mut thread.entries[crate::call_stack::slot_index(depth - 1)];
    entry.correlation = correlation;
    Ok(())
}

/// `asys_site_name(id, const char *name)`: reported once per id and process.
#[uprobe]
pub fn name_site(ctx: ProbeContext) -> u32 {
    if let Err(source) = try_name_site(&ctx) {
        count_drop(source);
    }
    0
}

fn try_name_site(ctx: &ProbeContext) -> Result<(), DropSource> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    if !is_traced(settings, (pid_tgid >> 32) as u32) {
        return Ok(());
    }
    // SAFETY: a uprobe's context points to the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    let mut slot = EVENTS
        .reserve::<ApiNameEvent>(0)
        .ok_or(DropSource::ApiNameRingFull)?;
    // SAFETY: the reserved record is ours until submitted; filled in place.
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = header(EventKind::ApiName, pid_tgid);
    ev.id = regs.rdi as u32;
    ev._pad = 0;
    // SAFETY: fails instead of faulting; the destination is ours.
    if unsafe { bpf_probe_read_user_str_bytes(regs.rsi as *const u8, &mut ev.name) }.is_err() {
        ev.name[0] = 0;
    }
    slot.submit(0);
    Ok(())
}

#[uprobe]
pub fn lost_site(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(settings) = settings() else {
        count_drop(DropSource::ConfigUnreadable);
        return 0;
    };
    if !is_traced(settings, (pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: a uprobe's context points to the task's saved registers.
    count_drops(DropSource::ActivityLost, unsafe { (*ctx.regs).rdi });
    0
}
