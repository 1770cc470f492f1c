//! Entry and exit probes attached to every exported function of an
//! accelerator runtime. The cookie names the function (probe id) and its
//! flags; the entry saves arguments and time, the exit emits one event.
use asys_common::{
    ApiCallEvent, ApiEntry, COOKIE_READ_OUT0, DropSource, EventHeader, EventKind, MAX_ARGS,
    MAX_CALL_DEPTH,
};
use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user,
        generated::{bpf_get_attach_cookie, bpf_get_smp_processor_id, bpf_ktime_get_ns},
    },
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};

use crate::maps::{DEPTH, ENTRIES, EVENTS, count_drop, is_traced};

#[uprobe]
pub fn api_entry(ctx: ProbeContext) -> u32 {
    let _ = try_api_entry(&ctx);
    0
}

fn try_api_entry(ctx: &ProbeContext) -> Result<(), i64> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !is_traced(tgid) {
        return Ok(());
    }
    let tid = pid_tgid as u32;
    let depth = unsafe { DEPTH.get(&tid).copied().unwrap_or(0) };
    if depth >= MAX_CALL_DEPTH {
        count_drop(DropSource::ApiDepth);
        return Ok(());
    }
    let regs = unsafe { &*ctx.regs };
    let mut entry = ApiEntry {
        cookie: unsafe { bpf_get_attach_cookie(ctx.as_ptr()) },
        start: unsafe { bpf_ktime_get_ns() },
        args: [
            regs.rdi, regs.rsi, regs.rdx, regs.rcx, regs.r8, regs.r9, 0, 0,
        ],
    };
    // Arguments 7 and 8 live on the stack, above the return address.
    let sp = regs.rsp as *const u64;
    for i in 6..MAX_ARGS {
        entry.args[i] = unsafe { bpf_probe_read_user(sp.add(i - 5)) }.unwrap_or(0);
    }
    let key = (tid as u64) << 32 | depth as u64;
    if ENTRIES.insert(&key, &entry, 0).is_err() {
        count_drop(DropSource::ApiEntryMapFull);
        return Ok(());
    }
    let _ = DEPTH.insert(&tid, &(depth + 1), 0);
    Ok(())
}

#[uretprobe]
pub fn api_exit(ctx: RetProbeContext) -> u32 {
    let _ = try_api_exit(&ctx);
    0
}

fn try_api_exit(ctx: &RetProbeContext) -> Result<(), i64> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let Some(depth) = (unsafe { DEPTH.get(&tid).copied() }) else {
        return Ok(());
    };
    if depth == 0 {
        return Ok(());
    }
    let depth = depth - 1;
    if depth == 0 {
        let _ = DEPTH.remove(&tid);
    } else {
        let _ = DEPTH.insert(&tid, &depth, 0);
    }
    let key = (tid as u64) << 32 | depth as u64;
    let Some(entry) = (unsafe { ENTRIES.get(&key).copied() }) else {
        return Ok(());
    };
    let _ = ENTRIES.remove(&key);
    let now = unsafe { bpf_ktime_get_ns() };
    let out0 = if entry.cookie & COOKIE_READ_OUT0 != 0 && entry.args[0] != 0 {
        unsafe { bpf_probe_read_user(entry.args[0] as *const u64) }.unwrap_or(0)
    } else {
        0
    };
    let Some(mut slot) = EVENTS.reserve::<ApiCallEvent>(0) else {
        count_drop(DropSource::ApiRingFull);
        return Ok(());
    };
    let regs = unsafe { &*ctx.regs };
    slot.write(ApiCallEvent {
        header: EventHeader {
            kind: EventKind::ApiCall as u32,
            cpu: unsafe { bpf_get_smp_processor_id() },
            ts: now,
            pid: (pid_tgid >> 32) as u32,
            tid,
        },
        cookie: entry.cookie,
        start: entry.start,
        ret: regs.rax,
        args: entry.args,
        out0,
    });
    slot.submit(0);
    Ok(())
}
