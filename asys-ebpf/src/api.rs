//! Entry and exit probes attached to every exported function of an
//! accelerator runtime. The cookie names the function (probe id) and its
//! flags; the entry saves arguments and time, the exit emits one event.
//!
//! This is the hot path (one trap each way per call): every helper call and
//! map lookup here is paid by every call of the application, so the entry
//! reads only what the function's signature needs (the cookie says), and
//! the exit sends the smallest event that carries it.
use asys_common::{
    ApiCallEvent, ApiCallShortEvent, ApiEntry, ApiStackEvent, ApiTextEvent, COOKIE_HGTX_ANY,
    Cookie, DropSource, EventKind, MAX_ARGS, MAX_CALL_DEPTH, MAX_FAMILIES, Settings,
};
use aya_ebpf::{
    EbpfContext,
    bindings::pt_regs,
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user,
        generated::{bpf_get_attach_cookie, bpf_ktime_get_ns},
    },
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};

use crate::{
    call_stack::{self, slot_index, thread_calls},
    caller_filter, capture,
    maps::{
        EVENTS, THREADS, batched_wakeup, count_drop, header_at, is_recording, is_traced, settings,
    },
    text::capture_text,
};

#[uprobe]
pub fn api_entry(ctx: ProbeContext) -> u32 {
    if let Err(source) = try_api_entry(&ctx) {
        count_drop(source);
    }
    0
}

fn try_api_entry(ctx: &ProbeContext) -> Result<(), DropSource> {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: the context is the uprobe's, which the helper expects.
    let cookie = Cookie(unsafe { bpf_get_attach_cookie(ctx.as_ptr()) });
    // SAFETY: a uprobe's context points to the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    if cookie.has(Cookie::CAPTURE_START) {
        capture::capture_range(pid_tgid, true)?;
    }
    // -c hgtx: a range may open here (before the gate, so that the opening
    // call is recorded), or this call may be the one that closes it.
    let close_after = cookie.has(COOKIE_HGTX_ANY) && hgtx_entry(pid_tgid, cookie, regs)?;
    let tgid = (pid_tgid >> 32) as u32;
    let recording = is_recording(settings, tgid)?;
    // Untraced processes (system-wide links serve every process) keep no
    // stack; a traced one keeps every call in it, recorded or not, so
    // that each return finds its own entry.
    if !recording && !is_traced(settings, tgid) {
        return Ok(());
    }
    // A call that closes the range closes it at its return, once it is
    // reported, as hggcProfilerStop does.
    let cookie = if close_after {
        cookie.with(Cookie::CAPTURE_STOP)
    } else {
        cookie
    };
    push_entry(pid_tgid, cookie, regs, recording, settings)
}

/// -c hgtx at an hgtx function's entry (see capture::hgtx_entry); a value
/// it now waits for belongs to this call's own return.
#[inline(always)]
fn hgtx_entry(pid_tgid: u64, cookie: Cookie, regs: &pt_regs) -> Result<bool, DropSource> {
    let close_after = capture::hgtx_entry(pid_tgid, cookie.0, regs.rdi, regs.rsi, regs.rdx)?;
    if let Some(thread) = THREADS.get_ptr_mut(pid_tgid as u32) {
        // SAFETY: as in push_entry.
        let thread = unsafe { &mut *thread };
        if thread.pending != 0 {
            thread.pending_sp = regs.rsp;
        }
    }
    Ok(close_after)
}

/// Pushes a call on the thread's stack of calls in flight: recorded, or a
/// placeholder (not recording, or a vendor library calling its own item).
/// Past [`MAX_CALL_DEPTH`] the call is only counted.
#[inline(always)]
fn push_entry(
    pid_tgid: u64,
    cookie: Cookie,
    regs: &pt_regs,
    recording: bool,
    settings: &Settings,
) -> Result<(), DropSource> {
    let tid = pid_tgid as u32;
    let thread = thread_calls(tid).ok_or(DropSource::ApiEntryMapFull)?;
    // SAFETY: the map value lives until the thread's exit removes it, which
    // cannot run while this thread is in a probe.
    let thread = unsafe { &mut *thread };
    let sp = regs.rsp;
    // The caller's return address: who called (the caller filter), and
    // whether a call at the same stack pointer is a tail call.
    // SAFETY: fails instead of faulting.
    let ret_addr = unsafe { bpf_probe_read_user(sp as *const u64) }.unwrap_or(0);
    // Entries deeper than this frame belong to calls that never returned
    // through their probe (longjmp, a missed return); see call_stack.rs for
    // one at the same stack pointer.
    call_stack::discard_stale(thread, sp, ret_addr);
    let record = recording
        && !caller_filter::is_vendor_internal(
            thread,
            (pid_tgid >> 32) as u32,
            cookie,
            (sp, ret_addr),
            settings,
        );
    let depth = thread.depth;
    if depth >= MAX_CALL_DEPTH {
        // Counted, not stored: its return is matched by depth alone.
        thread.depth = depth.saturating_add(1);
        if record {
            return Err(DropSource::ApiDepth);
        }
        return Ok(());
    }
    let entry = &mut thread.entries[slot_index(depth)];
    entry.cookie = cookie.0;
    entry.sp = sp;
    entry.ret_addr = ret_addr;
    entry.recorded = record as u64;
    thread.depth = depth + 1;
    if !record {
        return Ok(());
    }
    entry.correlation = 0;
    // Only what the exit will ship: a call whose signature reads no
    // argument leaves the slot's old values, which nobody reads.
    if cookie.has(Cookie::ARGS) {
        entry.args[..6]
            .copy_from_slice(&[regs.rdi, regs.rsi, regs.rdx, regs.rcx, regs.r8, regs.r9]);
        // Arguments 7 and 8 live on the stack, above the return address:
        // a user-memory read, so only for the signatures that use them.
        let stack = if cookie.has(Cookie::STACK_ARGS) {
            // SAFETY: bpf_probe_read_user fails instead of faulting.
            unsafe {
                bpf_probe_read_user((regs.rsp as *const u64).wrapping_add(1) as *const [u64; 2])
            }
            .unwrap_or([0; 2])
        } else {
            [0; 2]
        };
        entry.args[6] = stack[0];
        entry.args[7] = stack[1];
    }
    let text_arg = cookie.text_arg();
    if text_arg != 0 {
        entry.text_handle = 0;
        entry.text_wide = 0;
        entry.text_unread = 0;
        entry.text[0] = 0;
        if !capture_text(
            entry,
            entry.args[(text_arg - 1) & (MAX_ARGS - 1)],
            cookie.has(Cookie::TEXT_ATTRIBUTES),
            cookie.has(Cookie::TEXT_WIDE),
        ) {
            // Tried again at the return, when the callee has touched it.
            entry.text_unread = 1;
        }
    }
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    entry.start = unsafe { bpf_ktime_get_ns() };
    Ok(())
}

#[uretprobe]
pub fn api_exit(ctx: RetProbeContext) -> u32 {
    // SAFETY: a uretprobe's context points to the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    // SAFETY: the context is the uretprobe's, which the helper expects.
    let probe = Cookie(unsafe { bpf_get_attach_cookie(ctx.as_ptr()) });
    if let Err(source) = pop_and_emit(bpf_get_current_pid_tgid(), regs, probe) {
        count_drop(source);
    }
    0
}

/// Pops the call this return belongs to and reports it with its result;
/// with the registers of the caller right after the return, for its stack.
/// `probe`: the cookie of the function returning.
#[inline(always)]
fn pop_and_emit(pid_tgid: u64, regs: &pt_regs, probe: Cookie) -> Result<(), DropSource> {
    let ret = regs.rax;
    let tid = pid_tgid as u32;
    // No slot: the entry was not recorded (not traced, not recording).
    let Some(thread) = THREADS.get_ptr_mut(tid) else {
        return Ok(());
    };
    // SAFETY: as in push_entry.
    let thread = unsafe { &mut *thread };
    // -c hgtx waits on this return value (a range id, a domain handle).
    if thread.pending != 0 && thread.pending_sp == regs.rsp.wrapping_sub(8) {
        capture::hgtx_exit(thread, ret)?;
    }
    // After the return the stack pointer is one slot above the one the
    // entry saw (the return address is popped).
    let matched = call_stack::pop_matching(thread, regs.rsp.wrapping_sub(8));
    let Some(depth) = matched.filter(|&d| thread.entries[slot_index(d)].recorded != 0) else {
        // A stop call that is not reported (past the depth limit) still
        // closes the range (a start opens it at its entry, reported or not).
        if probe.has(Cookie::CAPTURE_STOP) {
            capture::capture_range(pid_tgid, false)?;
        }
        return Ok(());
    };
    let correlation_slot = thread.correlation_slot;
    let entry = &mut thread.entries[slot_index(depth)];
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let cookie = Cookie(entry.cookie);
    let family = (cookie.family() & (MAX_FAMILIES - 1)) as usize;
    let min = settings.min_duration[family];
    if min != 0 && now.saturating_sub(entry.start) < min {
        return Ok(());
    }
    if entry.correlation == 0 && correlation_slot != 0 && cookie.has(Cookie::CORRELATED) {
        // The injection library's callback left this call's id there just
        // before the function returned.
        // SAFETY: fails instead of faulting.
        entry.correlation =
            unsafe { bpf_probe_read_user(correlation_slot as *const u32) }.unwrap_or(0) as u64;
    }
    emit_call(pid_tgid, now, ret, cookie, entry, settings)?;
    let threshold = settings.stack_threshold[family];
    if threshold != 0 && now.saturating_sub(entry.start) >= threshold {
        emit_stack(pid_tgid, entry.start, regs, settings)?;
    }
    // The stop call is inside the range: close it once the call is reported.
    if cookie.has(Cookie::CAPTURE_STOP) {
        capture::capture_range(pid_tgid, false)?;
    }
    Ok(())
}

/// Sends the call: with its text, with its arguments, or alone.
#[inline(always)]
fn emit_call(
    pid_tgid: u64,
    now: u64,
    ret: u64,
    cookie: Cookie,
    entry: &mut ApiEntry,
    settings: &Settings,
) -> Result<(), DropSource> {
    let text_arg = cookie.text_arg();
    if !cookie.has(Cookie::ARGS) && text_arg == 0 {
        let mut slot = EVENTS
            .reserve::<ApiCallShortEvent>(0)
            .ok_or(DropSource::ApiRingFull)?;
        slot.write(ApiCallShortEvent {
            // The exit time is the one the duration filter used.
            header: header_at(EventKind::ApiCallShort, pid_tgid, now),
            cookie: cookie.0,
            start: entry.start,
            ret,
            correlation: entry.correlation,
        });
        slot.submit(batched_wakeup(settings));
        return Ok(());
    }
    if entry.text_unread != 0 && text_arg != 0 {
        let ptr = entry.args[(text_arg - 1) & (MAX_ARGS - 1)];
        let (attributes, wide) = (
            cookie.has(Cookie::TEXT_ATTRIBUTES),
            cookie.has(Cookie::TEXT_WIDE),
        );
        if !capture_text(entry, ptr, attributes, wide) {
            // Not even after the call: counted, not silent.
            count_drop(DropSource::TextUnreadable);
        }
    }
    let out0 = if cookie.has(Cookie::READ_OUT0) && entry.args[0] != 0 {
        // SAFETY: fails instead of faulting.
        unsafe { bpf_probe_read_user(entry.args[0] as *const u64) }.unwrap_or(0)
    } else {
        0
    };
    let call = ApiCallEvent {
        header: header_at(EventKind::ApiCall, pid_tgid, now),
        cookie: cookie.0,
        start: entry.start,
        ret,
        args: entry.args,
        out0,
        correlation: entry.correlation,
    };
    if text_arg == 0 {
        let mut slot = EVENTS
            .reserve::<ApiCallEvent>(0)
            .ok_or(DropSource::ApiRingFull)?;
        slot.write(call);
        slot.submit(batched_wakeup(settings));
    } else {
        let mut slot = EVENTS
            .reserve::<ApiTextEvent>(0)
            .ok_or(DropSource::ApiRingFull)?;
        // SAFETY: the reserved record is ours until submitted, and large
        // enough for the type; filled in place (too large for the stack).
        let ev = unsafe { &mut *slot.as_mut_ptr() };
        ev.call = call;
        ev.call.header.kind = EventKind::ApiCallText as u32;
        ev.text_handle = entry.text_handle;
        ev.text_wide = entry.text_wide;
        ev.text = entry.text;
        slot.submit(batched_wakeup(settings));
    }
    Ok(())
}

/// Copies the caller's stack for userspace to unwind.
#[inline(never)]
pub(crate) fn emit_stack(
    pid_tgid: u64,
    call_start: u64,
    regs: &pt_regs,
    settings: &Settings,
) -> Result<(), DropSource> {
    let mut slot = EVENTS
        .reserve::<ApiStackEvent>(0)
        .ok_or(DropSource::StackRingFull)?;
    // SAFETY: the reserved record is ours until submitted (filled in place:
    // it is far larger than the BPF stack).
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = crate::maps::header(EventKind::ApiStack, pid_tgid);
    ev.call_start = call_start;
    ev.ip = regs.rip;
    ev.sp = regs.rsp;
    ev.bp = regs.rbp;
    ev.len = crate::maps::copy_user_stack(regs.rsp, &mut ev.stack);
    slot.submit(batched_wakeup(settings));
    Ok(())
}
