//! Entry and exit probes attached to every exported function of an
//! accelerator runtime. The cookie names the function (probe id) and its
//! flags; the entry saves arguments and time, the exit emits one event.
use asys_common::{
    ATTRIBUTES_MESSAGE, ATTRIBUTES_MESSAGE_TYPE, ApiCallEvent, ApiEntry, ApiStackEvent,
    ApiTextEvent, COOKIE_CAPTURE_START, COOKIE_CAPTURE_STOP, COOKIE_FAMILY_SHIFT, COOKIE_HGTX_ANY,
    COOKIE_READ_OUT0, COOKIE_TEXT_ATTRIBUTES, COOKIE_TEXT_SHIFT, COOKIE_TEXT_WIDE, DropSource,
    EventHeader, EventKind, MAX_ARGS, MAX_CALL_DEPTH, MESSAGE_TYPE_ASCII, MESSAGE_TYPE_REGISTERED,
    MESSAGE_TYPE_UNICODE, ThreadCalls,
};
use aya_ebpf::{
    EbpfContext,
    bindings::pt_regs,
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user, bpf_probe_read_user_buf,
        bpf_probe_read_user_str_bytes,
        generated::{bpf_get_attach_cookie, bpf_ktime_get_ns},
    },
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};

use crate::{
    capture,
    maps::{
        EVENTS, MIN_DURATION, STACK_THRESHOLD, THREADS, ZERO_THREAD, api_submit_flags, count_drop,
        is_recording,
    },
};

#[uprobe]
pub fn api_entry(ctx: ProbeContext) -> u32 {
    let _ = try_api_entry(&ctx);
    0
}

fn try_api_entry(ctx: &ProbeContext) -> Result<(), i64> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let regs = unsafe { &*ctx.regs };
    if cookie & COOKIE_CAPTURE_START != 0 {
        capture::capture_range(pid_tgid, true);
    }
    // -c hgtx: a range may open here (before the gate, so that the opening
    // call is recorded), or this call may be the one that closes it.
    let close_after = cookie & COOKIE_HGTX_ANY != 0
        && capture::hgtx_entry(pid_tgid, cookie, regs.rdi, regs.rsi, regs.rdx);
    if !is_recording((pid_tgid >> 32) as u32) {
        return Ok(());
    }
    // Arguments 7 and 8 live on the stack, above the return address.
    let stack = unsafe { bpf_probe_read_user((regs.rsp as *const u64).add(1) as *const [u64; 2]) };
    let stack = stack.unwrap_or([0; 2]);
    let args = [
        regs.rdi, regs.rsi, regs.rdx, regs.rcx, regs.r8, regs.r9, stack[0], stack[1],
    ];
    // A call that closes the range closes it at its return, once it is
    // reported, as hggcProfilerStop does.
    let cookie = if close_after {
        cookie | COOKIE_CAPTURE_STOP
    } else {
        cookie
    };
    push_entry(pid_tgid as u32, cookie, args, 0);
    Ok(())
}

/// Pushes a call on the thread's stack of calls in flight.
#[inline(always)]
fn push_entry(tid: u32, cookie: u64, args: [u64; MAX_ARGS], correlation: u64) {
    let Some(thread) = thread_calls(tid) else {
        count_drop(DropSource::ApiEntryMapFull);
        return;
    };
    let thread = unsafe { &mut *thread };
    let depth = thread.depth;
    if depth >= MAX_CALL_DEPTH {
        count_drop(DropSource::ApiDepth);
        return;
    }
    let entry = &mut thread.entries[slot_index(depth)];
    entry.cookie = cookie;
    entry.args = args;
    entry.correlation = correlation;
    entry.text_handle = 0;
    entry.text_wide = 0;
    entry.text_unread = 0;
    entry.text[0] = 0;
    let text_arg = ((cookie >> COOKIE_TEXT_SHIFT) & 0xf) as usize;
    if text_arg != 0
        && !capture_text(
            entry,
            args[(text_arg - 1) & (MAX_ARGS - 1)],
            cookie & COOKIE_TEXT_ATTRIBUTES != 0,
            cookie & COOKIE_TEXT_WIDE != 0,
        )
    {
        // Tried again at the return, when the callee has touched it.
        entry.text_unread = 1;
    }
    entry.start = unsafe { bpf_ktime_get_ns() };
    thread.depth = depth + 1;
}

/// Reads the text an argument gives: a C string, or the message of an event
/// attributes struct (a C string, or a registered handle kept as is).
/// False when a C string could not be read: a uprobe may not fault, and a
/// string in a page the process has not touched yet is not in memory.
#[inline(never)]
pub fn capture_text(entry: &mut ApiEntry, ptr: u64, attributes: bool, wide: bool) -> bool {
    let mut text_ptr = ptr;
    let mut wide = wide;
    if attributes {
        let base = ptr as *const u8;
        let kind = unsafe {
            bpf_probe_read_user(base.wrapping_add(ATTRIBUTES_MESSAGE_TYPE) as *const i32)
        }
        .unwrap_or(0);
        let message =
            unsafe { bpf_probe_read_user(base.wrapping_add(ATTRIBUTES_MESSAGE) as *const u64) }
                .unwrap_or(0);
        match kind {
            MESSAGE_TYPE_ASCII => text_ptr = message,
            MESSAGE_TYPE_UNICODE => {
                text_ptr = message;
                wide = true;
            }
            MESSAGE_TYPE_REGISTERED => {
                entry.text_handle = message;
                return true;
            }
            _ => return true,
        }
    }
    if text_ptr == 0 {
        return true;
    }
    if wide {
        // No string helper for UTF-32: take the whole window, or nothing if
        // it crosses into unmapped memory; userspace stops at the first 0.
        entry.text_wide = 1;
        if unsafe { bpf_probe_read_user_buf(text_ptr as *const u8, &mut entry.text) }.is_err() {
            entry.text[..4].copy_from_slice(&[0; 4]);
        }
    } else if unsafe { bpf_probe_read_user_str_bytes(text_ptr as *const u8, &mut entry.text) }
        .is_err()
    {
        entry.text[0] = 0;
        return false;
    }
    true
}

/// `depth` masked into the entry array. The volatile read hides the earlier
/// range check from the compiler, so the mask stays in the code and the
/// verifier sees a bounded index (it cannot follow the compiler's reasoning).
#[inline(always)]
pub fn slot_index(depth: u32) -> usize {
    let d = unsafe { core::ptr::read_volatile(&depth) };
    (d & (MAX_CALL_DEPTH - 1)) as usize
}

/// The calling thread's slot, created on its first call.
#[inline(always)]
pub fn thread_calls(tid: u32) -> Option<*mut ThreadCalls> {
    if let Some(p) = THREADS.get_ptr_mut(tid) {
        return Some(p);
    }
    let zero = ZERO_THREAD.get_ptr(0)?;
    // By reference: a copy would put 328 bytes on the 512-byte BPF stack.
    #[allow(clippy::needless_borrows_for_generic_args)]
    THREADS.insert(tid, unsafe { &*zero }, 0).ok()?;
    THREADS.get_ptr_mut(tid)
}

#[uretprobe]
pub fn api_exit(ctx: RetProbeContext) -> u32 {
    let _ = try_api_exit(&ctx);
    0
}

fn try_api_exit(ctx: &RetProbeContext) -> Result<(), i64> {
    let regs = unsafe { &*ctx.regs };
    pop_and_emit(bpf_get_current_pid_tgid(), regs);
    Ok(())
}

/// Pops the thread's innermost call and reports it with its result; with
/// the registers of the caller right after the return, for its stack.
#[inline(always)]
fn pop_and_emit(pid_tgid: u64, regs: &pt_regs) {
    let ret = regs.rax;
    let tid = pid_tgid as u32;
    let Some(thread) = THREADS.get_ptr_mut(tid) else {
        return;
    };
    let thread = unsafe { &mut *thread };
    // -c hgtx waits on this return value (a range id, a domain handle).
    if thread.pending != 0 {
        capture::hgtx_exit(thread, ret);
    }
    if thread.depth == 0 || thread.depth > MAX_CALL_DEPTH {
        return;
    }
    let depth = thread.depth - 1;
    thread.depth = depth;
    let entry = &mut thread.entries[slot_index(depth)];
    let now = unsafe { bpf_ktime_get_ns() };
    let family = ((entry.cookie >> COOKIE_FAMILY_SHIFT) & 0xff) as u32;
    if let Some(&min) = MIN_DURATION.get(family)
        && now.saturating_sub(entry.start) < min
    {
        return;
    }
    if entry.text_unread != 0 {
        let text_arg = ((entry.cookie >> COOKIE_TEXT_SHIFT) & 0xf) as usize;
        let ptr = entry.args[text_arg.wrapping_sub(1) & (MAX_ARGS - 1)];
        let (attributes, wide) = (
            entry.cookie & COOKIE_TEXT_ATTRIBUTES != 0,
            entry.cookie & COOKIE_TEXT_WIDE != 0,
        );
        if !capture_text(entry, ptr, attributes, wide) {
            // Not even after the call: counted, not silent.
            count_drop(DropSource::TextUnreadable);
        }
    }
    let out0 = if entry.cookie & COOKIE_READ_OUT0 != 0 && entry.args[0] != 0 {
        unsafe { bpf_probe_read_user(entry.args[0] as *const u64) }.unwrap_or(0)
    } else {
        0
    };
    let call = ApiCallEvent {
        // The exit time is the one the duration filter used.
        header: EventHeader {
            ts: now,
            ..crate::maps::header(EventKind::ApiCall, pid_tgid)
        },
        cookie: entry.cookie,
        start: entry.start,
        ret,
        args: entry.args,
        out0,
        correlation: entry.correlation,
    };
    if (entry.cookie >> COOKIE_TEXT_SHIFT) & 0xf == 0 {
        let Some(mut slot) = EVENTS.reserve::<ApiCallEvent>(0) else {
            count_drop(DropSource::ApiRingFull);
            return;
        };
        slot.write(call);
        slot.submit(api_submit_flags());
    } else {
        let Some(mut slot) = EVENTS.reserve::<ApiTextEvent>(0) else {
            count_drop(DropSource::ApiRingFull);
            return;
        };
        let ev = unsafe { &mut *slot.as_mut_ptr() };
        ev.call = call;
        ev.call.header.kind = EventKind::ApiCallText as u32;
        ev.text_handle = entry.text_handle;
        ev.text_wide = entry.text_wide;
        ev.text = entry.text;
        slot.submit(api_submit_flags());
    }
    let threshold = STACK_THRESHOLD.get(family).copied().unwrap_or(0);
    if threshold != 0 && now.saturating_sub(entry.start) >= threshold {
        emit_stack(pid_tgid, entry.start, regs);
    }
    // The stop call is inside the range: close it once the call is reported.
    if entry.cookie & COOKIE_CAPTURE_STOP != 0 {
        capture::capture_range(pid_tgid, false);
    }
}

/// Copies the caller's stack for userspace to unwind.
#[inline(never)]
fn emit_stack(pid_tgid: u64, call_start: u64, regs: &pt_regs) {
    let Some(mut slot) = EVENTS.reserve::<ApiStackEvent>(0) else {
        count_drop(DropSource::StackRingFull);
        return;
    };
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = crate::maps::header(EventKind::ApiStack, pid_tgid);
    ev.call_start = call_start;
    ev.ip = regs.rip;
    ev.sp = regs.rsp;
    ev.bp = regs.rbp;
    ev.len = crate::maps::copy_user_stack(regs.rsp, &mut ev.stack);
    slot.submit(api_submit_flags());
}
