//! Probes on the injection library's nop5 sites (kernel 6.18 turns a uprobe on
//! a 5-byte NOP into a cheap syscall instead of a trap):
//! - `asys_site_activity(const ActivityRecord *)`: one device activity record,
//!   copied into the ring buffer;
//! - `asys_site_api(u32 site, u32 correlation)`: the runtime's API callback;
//!   on entry (site 0) the correlation id is stored in the innermost call of
//!   the thread, which `api_exit` then reports;
//! - `asys_site_lost(u64 n)`: records the injection library could not deliver.
use asys_common::{ActivityEvent, ActivityRecord, DropSource, EventHeader, EventKind};
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user,
        generated::{bpf_get_smp_processor_id, bpf_ktime_get_ns},
    },
    macros::uprobe,
    programs::ProbeContext,
};

use crate::maps::{DROPS, EVENTS, THREADS, api_submit_flags, count_drop, is_traced};

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

#[uprobe]
pub fn api_site(ctx: ProbeContext) -> u32 {
    let regs = unsafe { &*ctx.regs };
    if regs.rdi != 0 {
        return 0;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(thread) = THREADS.get_ptr_mut(tid) else {
        return 0;
    };
    let thread = unsafe { &mut *thread };
    let depth = thread.depth;
    if depth == 0 {
        return 0;
    }
    let entry = &mut thread.entries[crate::api::slot_index(depth - 1)];
    entry.correlation = regs.rsi & 0xffff_ffff;
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
