//! User-defined probes (`--probe`): uprobes, USDT markers, kernel functions
//! and tracepoints, each hit reported with up to six typed arguments. One
//! program serves every uprobe and USDT marker (`user_probe`), one every
//! tracepoint (`user_probe_tp`), and an fentry/fexit program is loaded per
//! kernel function; the link's cookie is the probe's id in `USER_PROBES`
//! (plus [`PROBE_COOKIE_RETURN`] on a return probe), which says where each
//! argument is.
//!
//! Filtering happens here, as for every item: a hit outside the traced set
//! (process tree, attach set, system-wide with its cgroup) or while
//! recording is off costs one map lookup and sends nothing.
//!
//! Cost: what a hit copies is what its probe needs. A call probe's entry
//! saves 64 bytes (time, arguments; a string's pointer, not the string);
//! a probe without string arguments sends a 96-byte event, one with
//! strings the 480-byte one, each string read once, when the event is sent
//! (at a call's return, when the function has touched the string's page).
use asys_common::{
    ARG_CONST, ARG_MEM, ARG_REG, ARG_STR, ARG_TP_DATA_LOC, ARG_TP_FIELD, ARG_TP_INLINE_STR,
    DropSource, EventKind, HIT_HAS_RET, MAX_PROBE_ARGS, MAX_USER_PROBES, NO_REG, PROBE_AT_ENTRY,
    PROBE_CALL, PROBE_COOKIE_RETURN, PROBE_HAS_STR, PROBE_KERNEL, PROBE_STR_BYTES, PROBE_USTACK,
    ProbeArg, ProbeCallEntry, ProbeCallKey, ProbeHitEvent, ProbeHitShortEvent, UserProbe,
};
use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_pid_tgid,
        generated::{
            bpf_get_attach_cookie, bpf_get_func_arg, bpf_get_func_ret, bpf_ktime_get_ns,
            bpf_probe_read_kernel, bpf_probe_read_kernel_str, bpf_probe_read_user,
            bpf_probe_read_user_str,
        },
    },
    macros::{kprobe, map, tracepoint},
    maps::{Array, LruHashMap},
    programs::{ProbeContext, TracePointContext},
};

use crate::maps::{EVENTS, batched_wakeup, count_drop, header_at, is_recording, settings};

/// Each probe's arguments and flags, by id; written by userspace at load.
#[map]
pub static USER_PROBES: Array<UserProbe> = Array::with_max_entries(MAX_USER_PROBES, 0);

/// Call probes' entries waiting for their return. LRU: an entry whose
/// return never comes (longjmp, an exception through the frame, a thread
/// killed) is reused once the map is full instead of blocking new calls.
#[map]
pub static PROBE_CALLS: LruHashMap<ProbeCallKey, ProbeCallEntry> =
    LruHashMap::with_max_entries(8192, 0);

/// Size of `struct pt_regs` on x86-64: a register offset must be below it.
const PT_REGS_BYTES: u32 = 168;

/// Where a hit's arguments are read from.
#[derive(Clone, Copy)]
enum Source {
    /// A probe's saved registers (uprobes, USDT markers).
    Regs(*const u8),
    /// A tracepoint's record.
    Record(*const u8),
    /// A BPF trampoline's context (fentry, fexit): `ARG_REG`'s `reg` is
    /// the argument's index times 8.
    Trampoline(*mut core::ffi::c_void),
}

/// What is known of the hit being handled.
struct Hit<'a> {
    pid_tgid: u64,
    id: u32,
    probe: &'a UserProbe,
    source: Source,
    /// A return probe (the cookie's bit).
    ret: bool,
    /// The return value, for a return.
    rv: u64,
}

/// Every uprobe, uretprobe and USDT marker of `--probe`.
#[kprobe]
pub fn user_probe(ctx: ProbeContext) -> u32 {
    // SAFETY: a kprobe-type program's context is the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    // SAFETY: the context is the probe's, which the helper expects.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let ret = cookie & PROBE_COOKIE_RETURN != 0;
    // A user function's return finds its entry one slot above the entry's
    // stack pointer (the return address was popped).
    let sp = if ret {
        regs.rsp.wrapping_sub(8)
    } else {
        regs.rsp
    };
    match on_hit(
        cookie,
        ret,
        regs.rax,
        sp,
        Source::Regs(ctx.regs as *const u8),
    ) {
        // `--probe-backtrace`: the user stack above the hit, keyed by the
        // hit's start as an API call's is by its start.
        Ok(Some((start, flags))) if flags & PROBE_USTACK != 0 => {
            let mut at = *regs;
            if flags & PROBE_AT_ENTRY != 0 && !ret {
                // At a function's entry the pc is no return address, which
                // the unwinder takes frame 0's to be (it looks up pc - 1,
                // in the function before): send the caller's state after the
                // call instead; the probed function is the row's own.
                // SAFETY: fails instead of faulting.
                at.rip = unsafe { aya_ebpf::helpers::bpf_probe_read_user(regs.rsp as *const u64) }
                    .unwrap_or(0);
                at.rsp = regs.rsp.wrapping_add(8);
            }
            let sent = settings()
                .ok_or(DropSource::ConfigUnreadable)
                .and_then(|s| crate::api::emit_stack(bpf_get_current_pid_tgid(), start, &at, s));
            if let Err(source) = sent {
                count_drop(source);
            }
        }
        Ok(_) => {}
        Err(source) => count_drop(source),
    }
    0
}

/// `kprobe:FUNC` and `kcall:FUNC` entries, as fentry programs: they need
/// BTF and BPF trampolines but no kprobe events (this machine kind's
/// kernel is built without CONFIG_KPROBES). Loaded once per function (the
/// function is fixed at load).
///
/// Declared as a kprobe for aya's parser: an fentry section would make aya
/// require the object's BTF to load (which this object's Rust enums fail
/// in the kernel), and userspace loads these itself, as tracing programs
/// (`user_probes.rs`), with the context used only through helpers.
#[kprobe]
pub fn user_probe_fentry(ctx: ProbeContext) -> u32 {
    traced(ctx.as_ptr(), false)
}

/// `kretprobe:FUNC` and `kcall:FUNC` returns, as fexit programs.
#[kprobe]
pub fn user_probe_fexit(ctx: ProbeContext) -> u32 {
    traced(ctx.as_ptr(), true)
}

#[inline(always)]
fn traced(ctx: *mut core::ffi::c_void, ret: bool) -> u32 {
    // SAFETY: the context is the tracing program's, which the helper expects.
    let cookie = unsafe { bpf_get_attach_cookie(ctx) };
    let mut rv: u64 = 0;
    if ret {
        // SAFETY: an fexit context; the helper writes the return value.
        unsafe { bpf_get_func_ret(ctx, &mut rv) };
    }
    if let Err(source) = on_hit(cookie, ret, rv, 0, Source::Trampoline(ctx)) {
        count_drop(source);
    }
    0
}

/// Every tracepoint of `--probe tracepoint:...`.
#[tracepoint]
pub fn user_probe_tp(ctx: TracePointContext) -> u32 {
    // SAFETY: the context is the tracepoint's, which the helper expects.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    if let Err(source) = on_hit(
        cookie,
        false,
        0,
        0,
        Source::Record(ctx.as_ptr() as *const u8),
    ) {
        count_drop(source);
    }
    0
}

/// One hit: a call's entry is saved, its return (or any other hit) sent.
/// Returns the sent hit's start and its probe's flags (None: nothing sent).
#[inline(always)]
fn on_hit(
    cookie: u64,
    ret: bool,
    rv: u64,
    sp: u64,
    source: Source,
) -> Result<Option<(u64, u32)>, DropSource> {
    let id = (cookie as u32) % MAX_USER_PROBES;
    let pid_tgid = bpf_get_current_pid_tgid();
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let probe = USER_PROBES.get(id).ok_or(DropSource::ConfigUnreadable)?;
    let kernel = probe.flags & PROBE_KERNEL != 0;
    let key = ProbeCallKey {
        tid: pid_tgid as u32,
        probe: id,
        sp: if kernel { 0 } else { sp },
    };
    let hit = Hit {
        pid_tgid,
        id,
        probe,
        source,
        ret,
        rv,
    };
    if probe.flags & PROBE_CALL != 0 && ret {
        // The entry passed the filters; no entry, nothing to report.
        let Some(entry) = PROBE_CALLS.get_ptr(key) else {
            return Ok(None);
        };
        // SAFETY: the map value stays valid while this program runs (the
        // thread's own key: only this thread removes it, below).
        let entry = unsafe { *entry };
        let _ = PROBE_CALLS.remove(key);
        return send(&hit, entry, settings).map(|start| Some((start, probe.flags)));
    }
    let tgid = (pid_tgid >> 32) as u32;
    if !is_recording(settings, tgid)? || u64::from(tgid) == settings.self_pid {
        return Ok(None);
    }
    let mut entry = ProbeCallEntry {
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        start: unsafe { bpf_ktime_get_ns() },
        ..ProbeCallEntry::default()
    };
    read_args(&hit, &mut entry);
    if probe.flags & PROBE_CALL != 0 {
        return PROBE_CALLS
            .insert(key, entry, 0)
            .map(|_| None)
            .map_err(|_| DropSource::ProbeEntryMapFull);
    }
    send(&hit, entry, settings).map(|start| Some((start, probe.flags)))
}

/// Sends a hit whose entry (time, arguments) is `entry`: the short event,
/// or the long one with its strings read now. Returns the hit's start.
#[inline(always)]
fn send(
    hit: &Hit,
    entry: ProbeCallEntry,
    settings: &asys_common::Settings,
) -> Result<u64, DropSource> {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let (ret, flags) = if hit.ret {
        (hit.rv, entry.flags | HIT_HAS_RET)
    } else {
        (0, entry.flags)
    };
    // A plain hit is one instant: its start is its time.
    let start = if hit.probe.flags & PROBE_CALL != 0 {
        entry.start
    } else {
        now
    };
    let header = header_at(EventKind::ProbeHitShort, hit.pid_tgid, now);
    if hit.probe.flags & PROBE_HAS_STR == 0 {
        let mut slot = EVENTS
            .reserve::<ProbeHitShortEvent>(0)
            .ok_or(DropSource::ProbeRingFull)?;
        slot.write(ProbeHitShortEvent {
            header,
            probe: hit.id,
            flags,
            start,
            ret,
            args: entry.args,
        });
        slot.submit(batched_wakeup(settings));
        return Ok(start);
    }
    let mut slot = EVENTS
        .reserve::<ProbeHitEvent>(0)
        .ok_or(DropSource::ProbeRingFull)?;
    // SAFETY: the reserved slot is ours until submitted; every field but
    // the strings is written here, and each string slot below (an empty
    // string where there is none).
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = asys_common::EventHeader {
        kind: EventKind::ProbeHit as u32,
        ..header
    };
    ev.probe = hit.id;
    ev.flags = flags;
    ev.start = start;
    ev.ret = ret;
    ev.args = entry.args;
    for i in 0..MAX_PROBE_ARGS {
        ev.strs[i][0] = 0;
        let arg = &hit.probe.args[i];
        if (i as u32) < hit.probe.nargs
            && arg.kind == ARG_STR
            && ev.flags & (1 << (8 + i)) == 0
            && !read_string(ev, i, arg, hit.source, hit.probe.flags & PROBE_KERNEL != 0)
        {
            ev.flags |= 1 << (8 + i);
            count_drop(DropSource::ProbeArgUnreadable);
        }
    }
    slot.submit(batched_wakeup(settings));
    Ok(start)
}

/// The arguments of the hit into `entry.args` (a string's address; the
/// string is read when the hit is sent), bit 8 + i of `entry.flags` for one
/// that could not be read (counted).
#[inline(always)]
fn read_args(hit: &Hit, entry: &mut ProbeCallEntry) {
    let kernel = hit.probe.flags & PROBE_KERNEL != 0;
    for i in 0..MAX_PROBE_ARGS {
        if (i as u32) >= hit.probe.nargs {
            break;
        }
        match read_arg(&hit.probe.args[i], hit.source, kernel) {
            Some(v) => entry.args[i] = v,
            None => {
                entry.flags |= 1 << (8 + i);
                count_drop(DropSource::ProbeArgUnreadable);
            }
        }
    }
}

/// Reads `bytes` (at most 8) at `addr` into a u64, zero-extended.
#[inline(always)]
fn read_mem(addr: u64, bytes: u8, kernel: bool) -> Option<u64> {
    let mut v: u64 = 0;
    let n = match bytes {
        1 => 1,
        2 => 2,
        4 => 4,
        _ => 8,
    };
    let dst = &mut v as *mut u64 as *mut _;
    // SAFETY: the helpers fail instead of faulting; the destination is a
    // local of at least `n` bytes.
    let rc = unsafe {
        if kernel {
            bpf_probe_read_kernel(dst, n, addr as *const _)
        } else {
            bpf_probe_read_user(dst, n, addr as *const _)
        }
    };
    (rc == 0).then_some(v)
}

/// One argument's value (for a tracepoint string, the string's address in
/// the record), as its size and sign say ([`ProbeArg::extend`]); None when
/// it could not be read. Skipped positions (`ARG_NONE`) read as 0.
#[inline(always)]
fn read_arg(arg: &ProbeArg, source: Source, kernel: bool) -> Option<u64> {
    match source {
        Source::Regs(regs) => {
            // The registers are kernel memory, read at an offset only known
            // at run time (the verifier refuses that as a context access).
            let reg = |at: u8| {
                if u32::from(at) >= PT_REGS_BYTES {
                    return None;
                }
                read_mem(regs as u64 + u64::from(at & 0xf8), 8, true)
            };
            let v = match arg.loc {
                ARG_REG => reg(arg.reg)?,
                ARG_MEM => {
                    let base = if arg.reg == NO_REG { 0 } else { reg(arg.reg)? };
                    let index = if arg.scale == 0 {
                        0
                    } else {
                        reg(arg.index)?.wrapping_mul(u64::from(arg.scale))
                    };
                    let at = base.wrapping_add(index).wrapping_add(arg.offset as u64);
                    read_mem(at, arg.size, kernel)?
                }
                ARG_CONST => arg.offset as u64,
                _ => return Some(0),
            };
            Some(arg.extend(v))
        }
        Source::Trampoline(ctx) => {
            let mut v: u64 = 0;
            if arg.loc == ARG_REG || arg.loc == ARG_MEM {
                // SAFETY: a tracing program's context; the helper checks the
                // index against the function's argument count.
                if unsafe { bpf_get_func_arg(ctx, u32::from(arg.reg) / 8, &mut v) } != 0 {
                    return None;
                }
            }
            match arg.loc {
                ARG_REG => Some(arg.extend(v)),
                ARG_MEM => read_mem(v.wrapping_add(arg.offset as u64), arg.size, true)
                    .map(|v| arg.extend(v)),
                _ => Some(0),
            }
        }
        Source::Record(record) => {
            let at = record as u64 + (arg.offset as u64 & 0xffff);
            match arg.loc {
                ARG_TP_FIELD => read_mem(at, arg.size, true).map(|v| arg.extend(v)),
                // The u32 there: the data's offset in the record (low 16
                // bits) and its length; its address is what is kept.
                ARG_TP_DATA_LOC => read_mem(at, 4, true).map(|loc| record as u64 + (loc & 0xffff)),
                ARG_TP_INLINE_STR => Some(at),
                _ => Some(0),
            }
        }
    }
}

/// Reads string argument `i` (its address in `ev.args[i]`) into its slot:
/// user memory for a user probe, kernel memory for a kernel function or a
/// string in a tracepoint's record, and for a tracepoint's `char *` field
/// (most often a system call's user pointer) user memory first.
#[inline(always)]
fn read_string(
    ev: &mut ProbeHitEvent,
    i: usize,
    arg: &ProbeArg,
    source: Source,
    kernel: bool,
) -> bool {
    let i = i % MAX_PROBE_ARGS;
    let addr = ev.args[i];
    let dst = ev.strs[i].as_mut_ptr() as *mut _;
    let in_record = matches!(source, Source::Record(_)) && arg.loc != ARG_TP_FIELD;
    let user_first = !kernel || (matches!(source, Source::Record(_)) && !in_record);
    // SAFETY: the helpers fail instead of faulting; the destination holds
    // PROBE_STR_BYTES bytes.
    let mut rc = unsafe {
        if user_first {
            bpf_probe_read_user_str(dst, PROBE_STR_BYTES as u32, addr as *const _)
        } else {
            bpf_probe_read_kernel_str(dst, PROBE_STR_BYTES as u32, addr as *const _)
        }
    };
    if rc < 0 && user_first && kernel {
        // SAFETY: as above.
        rc = unsafe { bpf_probe_read_kernel_str(dst, PROBE_STR_BYTES as u32, addr as *const _) };
    }
    if rc < 0 {
        ev.strs[i][0] = 0;
        return false;
    }
    true
}
