//! Capture ranges, gated here so that nothing outside a range is copied out:
//! `-c hggcProfilerApi` (the profiler API's start and stop) and `-c hgtx -p
//! TEMPLATE` (the hgtx range whose message, and domain, match).
use asys_common::{
    ApiEntry, CONFIG_CAPTURE_API, CONFIG_CAPTURE_DOMAIN_HANDLE, CONFIG_CAPTURE_DOMAIN_MODE,
    CONFIG_CAPTURE_DONE, CONFIG_CAPTURE_END_NONE, CONFIG_CAPTURE_HGTX, CONFIG_CAPTURE_KIND,
    CONFIG_CAPTURE_LEVEL, CONFIG_CAPTURE_OWNER, CONFIG_CAPTURE_RANGE_ID, CONFIG_CAPTURE_REPEAT,
    CONFIG_RECORDING, COOKIE_HGTX_DOMAIN_CREATE, COOKIE_HGTX_END, COOKIE_HGTX_IN_DOMAIN,
    COOKIE_HGTX_POP, COOKIE_HGTX_PUSH, COOKIE_HGTX_START, COOKIE_TEXT_ATTRIBUTES,
    COOKIE_TEXT_SHIFT, COOKIE_TEXT_WIDE, CaptureEvent, DOMAIN_ANY, DOMAIN_DEFAULT, DOMAIN_NAMED,
    DropSource, EventKind, PENDING_DOMAIN, PENDING_RANGE_ID, PENDING_RETRY_DOMAIN,
    PENDING_RETRY_OPEN, RANGE_PUSH_DEFAULT, RANGE_PUSH_DOMAIN, RANGE_START, TEXT_LEN, ThreadCalls,
};
use aya_ebpf::{
    macros::map,
    maps::{Array, PerCpuArray},
};

use crate::{
    api::{capture_text, thread_calls},
    maps::{CONFIG, EVENTS, config, count_drop, is_traced},
};

/// `-p TEMPLATE`: 0: the range's message, 1: its domain's name.
#[map]
pub static CAPTURE_NAMES: Array<[u8; TEXT_LEN]> = Array::with_max_entries(2, 0);

/// Room to read a message into (too large for the BPF stack).
#[map]
static SCRATCH: PerCpuArray<ApiEntry> = PerCpuArray::with_max_entries(1, 0);

/// The first three arguments of the call.
struct Args([u64; 3]);

/// Opens (`start`) or closes the capture range for a traced process: the
/// first start and the first stop win (unless repeat); userspace is told.
/// Returns whether the range opened or closed.
#[inline(never)]
pub fn capture_range(pid_tgid: u64, start: bool) -> bool {
    let armed = config(CONFIG_CAPTURE_API) != 0 || config(CONFIG_CAPTURE_HGTX) != 0;
    if !armed || !is_traced((pid_tgid >> 32) as u32) {
        return false;
    }
    let recording = config(CONFIG_RECORDING) != 0;
    if start == recording
        || (!start && config(CONFIG_CAPTURE_END_NONE) != 0)
        || (start && config(CONFIG_CAPTURE_DONE) != 0)
    {
        return false;
    }
    let _ = CONFIG.set(CONFIG_RECORDING, start as u64, 0);
    if !start && config(CONFIG_CAPTURE_REPEAT) == 0 {
        let _ = CONFIG.set(CONFIG_CAPTURE_DONE, 1, 0);
    }
    let Some(mut slot) = EVENTS.reserve::<CaptureEvent>(0) else {
        count_drop(DropSource::CaptureRingFull);
        return true;
    };
    slot.write(CaptureEvent {
        header: crate::maps::header(EventKind::Capture, pid_tgid),
        started: start as u64,
    });
    slot.submit(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP as u64);
    true
}

/// At the entry of an hgtx function: keeps the thread's push depth, opens
/// the range when the message matches, and says whether this call closes
/// the open range (once it is recorded).
#[inline(never)]
pub fn hgtx_entry(pid_tgid: u64, cookie: u64, a0: u64, a1: u64, a2: u64) -> bool {
    // Register values, not the context: the verifier refuses a context
    // pointer passed to a function that is not inlined.
    let regs = Args([a0, a1, a2]);
    let regs = &regs;
    if config(CONFIG_CAPTURE_HGTX) == 0 || !is_traced((pid_tgid >> 32) as u32) {
        return false;
    }
    let tid = pid_tgid as u32;
    let Some(thread) = thread_calls(tid) else {
        return false;
    };
    let thread = unsafe { &mut *thread };
    let in_domain = cookie & COOKIE_HGTX_IN_DOMAIN != 0;
    let kind = if in_domain {
        RANGE_PUSH_DOMAIN
    } else {
        RANGE_PUSH_DEFAULT
    };
    let k = kind as usize & 1;
    let recording = config(CONFIG_RECORDING) != 0;
    if cookie & COOKIE_HGTX_PUSH != 0 {
        let level = thread.hgtx_depth[k];
        thread.hgtx_depth[k] = level + 1;
        if !recording {
            match matches_range(cookie, regs, in_domain) {
                Some(true) => open_push(pid_tgid, level as u64, kind),
                Some(false) => {}
                None => retry_at_return(thread, PENDING_RETRY_OPEN, cookie, regs, level as u64),
            }
        }
        return false;
    }
    if cookie & COOKIE_HGTX_POP != 0 {
        let depth = thread.hgtx_depth[k].saturating_sub(1);
        thread.hgtx_depth[k] = depth;
        return recording
            && config(CONFIG_CAPTURE_KIND) == kind
            && config(CONFIG_CAPTURE_OWNER) == tid as u64
            && config(CONFIG_CAPTURE_LEVEL) == depth as u64;
    }
    if cookie & COOKIE_HGTX_START != 0 {
        if !recording {
            match matches_range(cookie, regs, in_domain) {
                Some(true) => {
                    if open_start(pid_tgid) {
                        // Its id is the return value.
                        thread.pending = PENDING_RANGE_ID;
                    }
                }
                Some(false) => {}
                None => retry_at_return(thread, PENDING_RETRY_OPEN, cookie, regs, 0),
            }
        }
        return false;
    }
    if cookie & COOKIE_HGTX_END != 0 {
        // Start/end ranges may end on any thread.
        let id = if in_domain { regs.0[1] } else { regs.0[0] };
        return recording
            && config(CONFIG_CAPTURE_KIND) == RANGE_START
            && config(CONFIG_CAPTURE_RANGE_ID) == id;
    }
    if cookie & COOKIE_HGTX_DOMAIN_CREATE != 0 && config(CONFIG_CAPTURE_DOMAIN_MODE) == DOMAIN_NAMED
    {
        match text_matches(cookie, regs, 1) {
            Some(true) => thread.pending = PENDING_DOMAIN,
            Some(false) => {}
            None => retry_at_return(thread, PENDING_RETRY_DOMAIN, cookie, regs, 0),
        }
    }
    false
}

/// The name could not be read at entry: the return probe reads it again,
/// once the callee has touched it.
#[inline(always)]
fn retry_at_return(thread: &mut ThreadCalls, pending: u32, cookie: u64, regs: &Args, level: u64) {
    thread.pending = pending;
    thread.pending_cookie = cookie;
    thread.pending_args = regs.0;
    thread.pending_level = level;
}

/// Opens a push/pop range of `kind` at `level` on the current thread.
#[inline(always)]
fn open_push(pid_tgid: u64, level: u64, kind: u64) {
    if capture_range(pid_tgid, true) {
        let _ = CONFIG.set(CONFIG_CAPTURE_OWNER, pid_tgid as u32 as u64, 0);
        let _ = CONFIG.set(CONFIG_CAPTURE_LEVEL, level, 0);
        let _ = CONFIG.set(CONFIG_CAPTURE_KIND, kind, 0);
    }
}

/// Opens a start/end range; its id comes with the start's return.
#[inline(always)]
fn open_start(pid_tgid: u64) -> bool {
    if !capture_range(pid_tgid, true) {
        return false;
    }
    let _ = CONFIG.set(CONFIG_CAPTURE_KIND, RANGE_START, 0);
    let _ = CONFIG.set(CONFIG_CAPTURE_RANGE_ID, 0, 0);
    true
}

/// At the return of a function the thread waits on (`pending`): keeps the
/// return value of a range start or a domain create.
#[inline(always)]
pub fn hgtx_exit(thread: &mut ThreadCalls, ret: u64) {
    let pending = thread.pending;
    thread.pending = 0;
    match pending {
        PENDING_RANGE_ID => {
            let _ = CONFIG.set(CONFIG_CAPTURE_RANGE_ID, ret, 0);
        }
        PENDING_DOMAIN => {
            let _ = CONFIG.set(CONFIG_CAPTURE_DOMAIN_HANDLE, ret, 0);
        }
        PENDING_RETRY_DOMAIN | PENDING_RETRY_OPEN => retry(thread, pending, ret),
        _ => {}
    }
}

/// The second try at a name the entry could not read.
#[inline(never)]
fn retry(thread: &mut ThreadCalls, pending: u32, ret: u64) {
    let cookie = thread.pending_cookie;
    let regs = Args(thread.pending_args);
    let in_domain = cookie & COOKIE_HGTX_IN_DOMAIN != 0;
    let matched = if pending == PENDING_RETRY_DOMAIN {
        text_matches(cookie, &regs, 1)
    } else {
        matches_range(cookie, &regs, in_domain)
    };
    match matched {
        None => count_drop(DropSource::CaptureTextUnreadable),
        Some(false) => {}
        Some(true) if pending == PENDING_RETRY_DOMAIN => {
            let _ = CONFIG.set(CONFIG_CAPTURE_DOMAIN_HANDLE, ret, 0);
        }
        Some(true) => {
            // The range opens at the return of its opening call, which is
            // therefore not in it; what happens inside it is.
            if config(CONFIG_RECORDING) != 0 {
                return;
            }
            let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
            if cookie & COOKIE_HGTX_START != 0 {
                if open_start(pid_tgid) {
                    let _ = CONFIG.set(CONFIG_CAPTURE_RANGE_ID, ret, 0);
                }
            } else {
                let kind = if in_domain {
                    RANGE_PUSH_DOMAIN
                } else {
                    RANGE_PUSH_DEFAULT
                };
                open_push(pid_tgid, thread.pending_level, kind);
            }
        }
    }
}

/// Whether the range this call opens is the template's: its domain, then
/// its message.
#[inline(always)]
/// None when the name could not be read.
fn matches_range(cookie: u64, regs: &Args, in_domain: bool) -> Option<bool> {
    let domain_ok = match config(CONFIG_CAPTURE_DOMAIN_MODE) {
        DOMAIN_DEFAULT => !in_domain,
        DOMAIN_ANY => true,
        _ => {
            let handle = config(CONFIG_CAPTURE_DOMAIN_HANDLE);
            in_domain && handle != 0 && regs.0[0] == handle
        }
    };
    if !domain_ok {
        return Some(false);
    }
    text_matches(cookie, regs, 0)
}

/// Whether the text argument the cookie names equals `CAPTURE_NAMES[which]`;
/// None when it could not be read.
#[inline(never)]
fn text_matches(cookie: u64, regs: &Args, which: u32) -> Option<bool> {
    let text_arg = (cookie >> COOKIE_TEXT_SHIFT) & 0xf;
    // Wide (UTF-32) messages are not compared.
    if text_arg == 0 || cookie & COOKIE_TEXT_WIDE != 0 {
        return Some(false);
    }
    let ptr = match text_arg {
        1 => regs.0[0],
        2 => regs.0[1],
        3 => regs.0[2],
        _ => return Some(false),
    };
    let (Some(scratch), Some(want)) = (SCRATCH.get_ptr_mut(0), CAPTURE_NAMES.get(which)) else {
        return Some(false);
    };
    let scratch = unsafe { &mut *scratch };
    scratch.text_handle = 0;
    scratch.text[0] = 0;
    if !capture_text(scratch, ptr, cookie & COOKIE_TEXT_ATTRIBUTES != 0, false) {
        return None;
    }
    if scratch.text_handle != 0 {
        return Some(false);
    }
    for (&a, &b) in scratch.text.iter().zip(want.iter()) {
        if a != b {
            return Some(false);
        }
        if a == 0 {
            return Some(true);
        }
    }
    Some(true)
}
