//! Capture ranges, gated here so that nothing outside a range is copied out:
//! `-c hggcProfilerApi` (the profiler API's start and stop) and `-c hgtx -p
//! TEMPLATE` (the hgtx range whose message, and domain, match).
use asys_common::{
    ApiEntry, COOKIE_HGTX_DOMAIN_CREATE, COOKIE_HGTX_END, COOKIE_HGTX_IN_DOMAIN, COOKIE_HGTX_POP,
    COOKIE_HGTX_PUSH, COOKIE_HGTX_START, CaptureEvent, Cookie, DOMAIN_ANY, DOMAIN_DEFAULT,
    DOMAIN_NAMED, DropSource, EventKind, KernelState, PENDING_DOMAIN, PENDING_RANGE_ID,
    PENDING_RETRY_DOMAIN, PENDING_RETRY_OPEN, RANGE_PUSH_DEFAULT, RANGE_PUSH_DOMAIN, RANGE_START,
    Settings, TEXT_LEN, ThreadCalls,
};
use aya_ebpf::{
    macros::map,
    maps::{Array, PerCpuArray},
};

use crate::{
    call_stack::thread_calls,
    maps::{EVENTS, count_drop, is_traced, settings, state},
    text::capture_text,
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
pub fn capture_range(pid_tgid: u64, start: bool) -> Result<bool, DropSource> {
    let (settings, state) = config()?;
    let armed = settings.capture_api != 0 || settings.capture_hgtx != 0;
    if !armed || !is_traced(settings, (pid_tgid >> 32) as u32) {
        return Ok(false);
    }
    if (!start && settings.capture_end_none != 0) || (start && state.capture_done != 0) {
        return Ok(false);
    }
    // Several CPUs may start (or stop) at once: only the one whose swap
    // finds the old value wins, so exactly one range opens and is reported.
    if !swap(&mut state.recording, !start as u64, start as u64) {
        return Ok(false);
    }
    if !start && settings.capture_repeat == 0 {
        state.capture_done = 1;
    }
    let Some(mut slot) = EVENTS.reserve::<CaptureEvent>(0) else {
        count_drop(DropSource::CaptureRingFull);
        return Ok(true);
    };
    slot.write(CaptureEvent {
        header: crate::maps::header(EventKind::Capture, pid_tgid),
        started: start as u64,
    });
    slot.submit(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP as u64);
    Ok(true)
}

/// Sets `*field` from `old` to `new` in one atomic step (BPF_CMPXCHG, since
/// 5.12); false when it held something else.
#[inline(always)]
fn swap(field: &mut u64, old: u64, new: u64) -> bool {
    use core::intrinsics::{AtomicOrdering::SeqCst, atomic_cxchg};
    // SAFETY: the field is an aligned u64 of the map value, which lives as
    // long as the map; every other writer (other CPUs, userspace through its
    // mapping) writes it atomically too. (core's AtomicU64 has no
    // compare_exchange on BPF, which has no atomics in its target spec; the
    // intrinsic lowers to BPF_CMPXCHG.)
    unsafe { atomic_cxchg::<u64, { SeqCst }, { SeqCst }>(field, old, new) }.1
}

/// Both configuration entries; an error only if a one-entry array could not
/// be read.
#[inline(always)]
fn config() -> Result<(&'static Settings, &'static mut KernelState), DropSource> {
    match (settings(), state()) {
        (Some(settings), Some(state)) => Ok((settings, state)),
        _ => Err(DropSource::ConfigUnreadable),
    }
}

/// At the entry of an hgtx function: keeps the thread's push depth, opens
/// the range when the message matches, and says whether this call closes
/// the open range (once it is recorded).
#[inline(never)]
pub fn hgtx_entry(
    pid_tgid: u64,
    cookie: u64,
    a0: u64,
    a1: u64,
    a2: u64,
) -> Result<bool, DropSource> {
    // Register values, not the context: the verifier refuses a context
    // pointer passed to a function that is not inlined.
    let regs = Args([a0, a1, a2]);
    let regs = &regs;
    let (settings, state) = config()?;
    if settings.capture_hgtx == 0 || !is_traced(settings, (pid_tgid >> 32) as u32) {
        return Ok(false);
    }
    let tid = pid_tgid as u32;
    let thread = thread_calls(tid).ok_or(DropSource::ApiEntryMapFull)?;
    // SAFETY: the map value lives until the thread's exit removes it, which
    // cannot run while this thread is in a probe.
    let thread = unsafe { &mut *thread };
    let in_domain = cookie & COOKIE_HGTX_IN_DOMAIN != 0;
    let kind = if in_domain {
        RANGE_PUSH_DOMAIN
    } else {
        RANGE_PUSH_DEFAULT
    };
    let k = kind as usize & 1;
    let recording = state.recording != 0;
    if cookie & COOKIE_HGTX_PUSH != 0 {
        let level = thread.hgtx_depth[k];
        thread.hgtx_depth[k] = level + 1;
        if !recording {
            match matches_range(cookie, regs, in_domain, settings, state) {
                Some(true) => open_push(pid_tgid, level as u64, kind)?,
                Some(false) => {}
                None => retry_at_return(thread, PENDING_RETRY_OPEN, cookie, regs, level as u64),
            }
        }
        return Ok(false);
    }
    if cookie & COOKIE_HGTX_POP != 0 {
        let depth = thread.hgtx_depth[k].saturating_sub(1);
        thread.hgtx_depth[k] = depth;
        return Ok(recording
            && state.capture_kind == kind
            && state.capture_owner == tid as u64
            && state.capture_level == depth as u64);
    }
    if cookie & COOKIE_HGTX_START != 0 {
        if !recording {
            match matches_range(cookie, regs, in_domain, settings, state) {
                Some(true) => {
                    if open_start(pid_tgid)? {
                        // Its id is the return value.
                        thread.pending = PENDING_RANGE_ID;
                    }
                }
                Some(false) => {}
                None => retry_at_return(thread, PENDING_RETRY_OPEN, cookie, regs, 0),
            }
        }
        return Ok(false);
    }
    if cookie & COOKIE_HGTX_END != 0 {
        // Start/end ranges may end on any thread.
        let id = if in_domain { regs.0[1] } else { regs.0[0] };
        return Ok(recording && state.capture_kind == RANGE_START && state.capture_range_id == id);
    }
    if cookie & COOKIE_HGTX_DOMAIN_CREATE != 0 && settings.capture_domain_mode == DOMAIN_NAMED {
        match text_matches(cookie, regs, 1) {
            Some(true) => thread.pending = PENDING_DOMAIN,
            Some(false) => {}
            None => retry_at_return(thread, PENDING_RETRY_DOMAIN, cookie, regs, 0),
        }
    }
    Ok(false)
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
fn open_push(pid_tgid: u64, level: u64, kind: u64) -> Result<(), DropSource> {
    if capture_range(pid_tgid, true)? {
        let (_, state) = config()?;
        state.capture_owner = pid_tgid as u32 as u64;
        state.capture_level = level;
        state.capture_kind = kind;
    }
    Ok(())
}

/// Opens a start/end range; its id comes with the start's return.
#[inline(always)]
fn open_start(pid_tgid: u64) -> Result<bool, DropSource> {
    if !capture_range(pid_tgid, true)? {
        return Ok(false);
    }
    let (_, state) = config()?;
    state.capture_kind = RANGE_START;
    state.capture_range_id = 0;
    Ok(true)
}

/// At the return of a function the thread waits on (`pending`): keeps the
/// return value of a range start or a domain create.
#[inline(always)]
pub fn hgtx_exit(thread: &mut ThreadCalls, ret: u64) -> Result<(), DropSource> {
    let pending = thread.pending;
    thread.pending = 0;
    match pending {
        PENDING_RANGE_ID => config()?.1.capture_range_id = ret,
        PENDING_DOMAIN => config()?.1.capture_domain_handle = ret,
        PENDING_RETRY_DOMAIN | PENDING_RETRY_OPEN => retry(thread, pending, ret)?,
        _ => {}
    }
    Ok(())
}

/// The second try at a name the entry could not read.
#[inline(never)]
fn retry(thread: &mut ThreadCalls, pending: u32, ret: u64) -> Result<(), DropSource> {
    let (settings, state) = config()?;
    let cookie = thread.pending_cookie;
    let regs = Args(thread.pending_args);
    let in_domain = cookie & COOKIE_HGTX_IN_DOMAIN != 0;
    let matched = if pending == PENDING_RETRY_DOMAIN {
        text_matches(cookie, &regs, 1)
    } else {
        matches_range(cookie, &regs, in_domain, settings, state)
    };
    match matched {
        None => count_drop(DropSource::CaptureTextUnreadable),
        Some(false) => {}
        Some(true) if pending == PENDING_RETRY_DOMAIN => state.capture_domain_handle = ret,
        Some(true) => {
            // The range opens at the return of its opening call, which is
            // therefore not in it; what happens inside it is.
            if state.recording != 0 {
                return Ok(());
            }
            let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
            if cookie & COOKIE_HGTX_START != 0 {
                if open_start(pid_tgid)? {
                    config()?.1.capture_range_id = ret;
                }
            } else {
                let kind = if in_domain {
                    RANGE_PUSH_DOMAIN
                } else {
                    RANGE_PUSH_DEFAULT
                };
                open_push(pid_tgid, thread.pending_level, kind)?;
            }
        }
    }
    Ok(())
}

/// Whether the range this call opens is the template's: its domain, then
/// its message. None when the name could not be read.
#[inline(always)]
fn matches_range(
    cookie: u64,
    regs: &Args,
    in_domain: bool,
    settings: &Settings,
    state: &KernelState,
) -> Option<bool> {
    let domain_ok = match settings.capture_domain_mode {
        DOMAIN_DEFAULT => !in_domain,
        DOMAIN_ANY => true,
        _ => {
            let handle = state.capture_domain_handle;
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
    let cookie = Cookie(cookie);
    let text_arg = cookie.text_arg();
    // Wide (UTF-32) messages are not compared.
    if text_arg == 0 || cookie.has(Cookie::TEXT_WIDE) {
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
    // SAFETY: this CPU's scratch value; programs do not nest here.
    let scratch = unsafe { &mut *scratch };
    scratch.text_handle = 0;
    scratch.text[0] = 0;
    if !capture_text(scratch, ptr, cookie.has(Cookie::TEXT_ATTRIBUTES), false) {
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
