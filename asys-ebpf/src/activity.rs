//! Probes on the injection library's nop5 sites (kernel 6.18 turns a uprobe on
//! a 5-byte NOP into a cheap syscall instead of a trap):
//! - `asys_site_activity(const ActivityRecord *)`: one device activity record,
//!   copied into the ring buffer;
//! - `asys_site_api(site, correlation, name_id, args, result)`: the runtime's
//!   API callback (see `api_site`);
//! - `asys_site_name(id, name)`: names for the ids of site-recorded calls;
//! - `asys_site_lost(u64 n)`: records the injection library could not deliver.
use asys_common::{
    ActivityEvent, ActivityRecord, ApiNameEvent, CONFIG_API_VIA_SITES, COOKIE_ID_MASK, COOKIE_SITE,
    DropSource, EventHeader, EventKind, MAX_ARGS,
};
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user, bpf_probe_read_user_str_bytes,
        generated::{bpf_get_smp_processor_id, bpf_ktime_get_ns},
    },
    macros::uprobe,
    programs::ProbeContext,
};

use crate::maps::{DROPS, EVENTS, THREADS, api_submit_flags, config, count_drop, is_traced};

#[uprobe]
pub fn activity_site(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced((pid_tgid >> 32) as u32) {
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
        header: EventHeader {
            kind: EventKind::DeviceActivity as u32,
            cpu: unsafe { bpf_get_smp_processor_id() },
            ts: unsafe { bpf_ktime_get_ns() },
            pid: (pid_tgid >> 32) as u32,
            tid: pid_tgid as u32,
        },
        record,
    });
    slot.submit(api_submit_flags());
    0
}

/// `asys_site_api(site, correlation, name_id, const u64 *args, result)`.
///
/// With uprobes on the runtime (the default), the entry site only tags the
/// innermost call of the thread with its correlation id. When userspace asks
/// for calls through the sites (`CONFIG_API_VIA_SITES`), the sites record the
/// calls themselves, and the runtime has no uprobes at all.
#[uprobe]
pub fn api_site(ctx: ProbeContext) -> u32 {
    let regs = unsafe { &*ctx.regs };
    let (site, correlation) = (regs.rdi as u32, regs.rsi & 0xffff_ffff);
    if config(CONFIG_API_VIA_SITES) == 0 {
        if site == 0 {
            tag_correlation(correlation);
        }
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    let cookie = COOKIE_SITE | (regs.rdx & COOKIE_ID_MASK);
    if site == 0 {
        let args = unsafe { bpf_probe_read_user(regs.rcx as *const [u64; MAX_ARGS]) }
            .unwrap_or([0; MAX_ARGS]);
        crate::api::push_entry(pid_tgid as u32, cookie, args, correlation);
    } else {
        crate::api::pop_and_emit(pid_tgid, regs.r8, true);
    }
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
    if config(CONFIG_API_VIA_SITES) == 0 || !is_traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    let regs = unsafe { &*ctx.regs };
    let Some(mut slot) = EVENTS.reserve::<ApiNameEvent>(0) else {
        count_drop(DropSource::ApiNameRingFull);
        return 0;
    };
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = EventHeader {
        kind: EventKind::ApiName as u32,
        cpu: unsafe { bpf_get_smp_processor_id() },
        ts: unsafe { bpf_ktime_get_ns() },
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
    };
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
