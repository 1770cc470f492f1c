//! Probes on the injection library's nop5 sites (kernel 6.18 turns a uprobe on
//! a 5-byte NOP into a cheap syscall instead of a trap):
//! - `asys_site_activity(const ActivityRecord *)`: one device activity record,
//!   copied into the ring buffer;
//! - `asys_site_api(correlation)` and `asys_site_call(...)`: the runtime's API
//!   callback (see `api_site`, `call_site`);
//! - `asys_site_name(id, name)`: names for the ids of site-recorded calls;
//! - `asys_site_lost(u64 n)`: records the injection library could not deliver.
use asys_common::{
    ActivityEvent, ActivityRecord, ApiCallEvent, ApiNameEvent, COOKIE_ID_MASK, COOKIE_SITE,
    DropSource, EventKind, MAX_ARGS,
};
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user, bpf_probe_read_user_str_bytes},
    macros::uprobe,
    programs::ProbeContext,
};

use crate::maps::{DROPS, EVENTS, THREADS, api_submit_flags, count_drop, is_recording, is_traced};

#[uprobe]
pub fn activity_site(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_recording((pid_tgid >> 32) as u32) {
        return 0;
    }
    let regs = unsafe { &*ctx.regs };
    let Ok(record) = (unsafe { bpf_probe_read_user(regs.rdi as *const ActivityRecord) }) else {
        count_drop(DropSource::ActivityLost);
        return 0;
    };
    let Some(mut slot) = EVENTS.reserve::<ActivityEvent>(0) else {
        count_drop(DropSource::ActivityRingFull);
        return 0;
    };
    slot.write(ActivityEvent {
        header: crate::maps::header(EventKind::DeviceActivity, pid_tgid),
        record,
    });
    slot.submit(api_submit_flags());
    0
}

/// `asys_site_api(correlation)`, at the entry of every runtime API call
/// (uprobes on the runtime record the call): tags the innermost call in
/// flight on the thread with the runtime's correlation id.
#[uprobe]
pub fn api_site(ctx: ProbeContext) -> u32 {
    tag_correlation(unsafe { (*ctx.regs).rdi } & 0xffff_ffff);
    0
}

/// `asys_site_call(correlation, name_id, const u64 *args, result, start)`, at
/// the exit of every runtime API call when asys records the API through the
/// injection library (`--api-probes site`): one probe hit per call, which
/// reports the whole call; the library took the start time (CLOCK_MONOTONIC,
/// the clock of bpf_ktime_get_ns).
#[uprobe]
pub fn call_site(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_recording((pid_tgid >> 32) as u32) {
        return 0;
    }
    let regs = unsafe { &*ctx.regs };
    let args =
        unsafe { bpf_probe_read_user(regs.rdx as *const [u64; MAX_ARGS]) }.unwrap_or([0; MAX_ARGS]);
    // The kernel does not know the API's signature: read *args[0] for every
    // call (a failed read gives 0); userspace keeps it where it means something.
    let out0 = if args[0] != 0 {
        unsafe { bpf_probe_read_user(args[0] as *const u64) }.unwrap_or(0)
    } else {
        0
    };
    let Some(mut slot) = EVENTS.reserve::<ApiCallEvent>(0) else {
        count_drop(DropSource::ApiRingFull);
        return 0;
    };
    slot.write(ApiCallEvent {
        header: crate::maps::header(EventKind::ApiCall, pid_tgid),
        cookie: COOKIE_SITE | (regs.rsi & COOKIE_ID_MASK),
        start: regs.r8,
        ret: regs.rcx,
        args,
        out0,
        correlation: regs.rdi & 0xffff_ffff,
    });
    slot.submit(api_submit_flags());
    0
}

fn tag_correlation(correlation: u64) {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(thread) = THREADS.get_ptr_mut(tid) else {
        return;
    };
    let thread = unsafe { &mut *thread };
    let depth = thread.depth;
    if depth == 0 {
        return;
    }
    let entry = &mut thread.entries[crate::api::slot_index(depth - 1)];
    entry.correlation = correlation;
}

/// `asys_site_name(id, const char *name)`: reported once per id and process.
#[uprobe]
pub fn name_site(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    let regs = unsafe { &*ctx.regs };
    let Some(mut slot) = EVENTS.reserve::<ApiNameEvent>(0) else {
        count_drop(DropSource::ApiNameRingFull);
        return 0;
    };
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = crate::maps::header(EventKind::ApiName, pid_tgid);
    ev.id = regs.rdi as u32;
    ev._pad = 0;
    if unsafe { bpf_probe_read_user_str_bytes(regs.rsi as *const u8, &mut ev.name) }.is_err() {
        ev.name[0] = 0;
    }
    slot.submit(0);
    0
}

#[uprobe]
pub fn lost_site(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    let n = unsafe { (*ctx.regs).rdi };
    if let Some(slot) = DROPS.get_ptr_mut(DropSource::ActivityLost as u32) {
        unsafe { *slot += n };
    }
    0
}
