//! User-defined probes (`--probe`): uprobes, USDT markers, kprobes and
//! tracepoints, each hit reported with up to six typed arguments. One
//! program serves every uprobe, USDT and kprobe (they share the kprobe
//! program type and `struct pt_regs`), one every tracepoint; the link's
//! cookie is the probe's id in `USER_PROBES` (plus [`PROBE_COOKIE_RETURN`]
//! on a return probe), which says where each argument is.
//!
//! Filtering happens here, as for every item: a hit outside the traced set
//! (process tree, attach set, system-wide with its cgroup) or while
//! recording is off costs one map lookup and sends nothing.
use asys_common::{
    ARG_CONST, ARG_MEM, ARG_REG, ARG_STR, ARG_TP_DATA_LOC, ARG_TP_FIELD, ARG_TP_INLINE_STR,
    DropSource, EventKind, HIT_HAS_RET, MAX_PROBE_ARGS, MAX_USER_PROBES, PROBE_CALL,
    PROBE_COOKIE_RETURN, PROBE_KERNEL, PROBE_STR_BYTES, ProbeArg, ProbeCallKey, ProbeHitEvent,
    UserProbe,
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
    maps::{Array, LruHashMap, PerCpuArray},
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
pub static PROBE_CALLS: LruHashMap<ProbeCallKey, ProbeHitEvent> =
    LruHashMap::with_max_entries(4096, 0);

/// Where a call's entry is built before it is saved (too large for the
/// 512-byte stack).
#[map]
pub static PROBE_SCRATCH: PerCpuArray<ProbeHitEvent> = PerCpuArray::with_max_entries(1, 0);

/// Size of `struct pt_regs` on x86-64: a register offset must be below it.
const PT_REGS_BYTES: u32 = 168;

/// Every uprobe, uretprobe, USDT marker, kprobe and kretprobe of `--probe`.
#[kprobe]
pub fn user_probe(ctx: ProbeContext) -> u32 {
    if let Err(source) = try_user_probe(&ctx) {
        count_drop(source);
    }
    0
}

fn try_user_probe(ctx: &ProbeContext) -> Result<(), DropSource> {
    // SAFETY: the context is the probe's, which the helper expects.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let id = (cookie as u32) % MAX_USER_PROBES;
    let ret = cookie & PROBE_COOKIE_RETURN != 0;
    let pid_tgid = bpf_get_current_pid_tgid();
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let probe = USER_PROBES.get(id).ok_or(DropSource::ConfigUnreadable)?;
    // SAFETY: a kprobe-type program's context is the task's saved registers.
    let regs = unsafe { &*ctx.regs };
    let kernel = probe.flags & PROBE_KERNEL != 0;
    let call = probe.flags & PROBE_CALL != 0;
    // A user function's return finds its entry one slot above the entry's
    // stack pointer (the return address was popped).
    let key = |sp: u64| ProbeCallKey {
        tid: pid_tgid as u32,
        probe: id,
        sp: if kernel { 0 } else { sp },
    };
    if call && ret {
        // The entry passed the filters; no entry, nothing to report.
        let k = key(regs.rsp.wrapping_sub(8));
        let Some(entry) = PROBE_CALLS.get_ptr(&k) else {
            return Ok(());
        };
        let mut slot = EVENTS
            .reserve::<ProbeHitEvent>(0)
            .ok_or(DropSource::ProbeRingFull)?;
        let dst = slot.as_mut_ptr();
        // SAFETY: both are valid for one ProbeHitEvent: the map value and
        // the reserved slot; the helper copies kernel memory and cannot fault.
        unsafe {
            bpf_probe_read_kernel(
                dst as *mut _,
                size_of::<ProbeHitEvent>() as u32,
                entry as *const _,
            );
            (*dst).header = header_at(EventKind::ProbeHit, pid_tgid, bpf_ktime_get_ns());
            (*dst).ret = regs.rax;
            (*dst).flags |= HIT_HAS_RET;
        }
        // SAFETY: the reserved slot, filled above.
        reread_strings(unsafe { &mut *dst }, probe, kernel);
        slot.submit(batched_wakeup(settings));
        let _ = PROBE_CALLS.remove(&k);
        return Ok(());
    }
    let tgid = (pid_tgid >> 32) as u32;
    if !is_recording(settings, tgid)? || u64::from(tgid) == settings.self_pid {
        return Ok(());
    }
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let regs_ptr = ctx.regs as *const u8;
    if call {
        let ev = PROBE_SCRATCH
            .get_ptr_mut(0)
            .ok_or(DropSource::ConfigUnreadable)?;
        // SAFETY: this CPU's scratch slot; nothing else runs on this CPU
        // while the program does.
        let ev = unsafe { &mut *ev };
        fill(
            ev,
            pid_tgid,
            now,
            id,
            probe,
            Source::Regs(regs_ptr),
            kernel,
            false,
        );
        if PROBE_CALLS.insert(&key(regs.rsp), ev, 0).is_err() {
            return Err(DropSource::ProbeEntryMapFull);
        }
        return Ok(());
    }
    let mut slot = EVENTS
        .reserve::<ProbeHitEvent>(0)
        .ok_or(DropSource::ProbeRingFull)?;
    // SAFETY: the reserved slot is ours until submitted; every field the
    // reader uses is written by `fill`.
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    fill(
        ev,
        pid_tgid,
        now,
        id,
        probe,
        Source::Regs(regs_ptr),
        kernel,
        true,
    );
    if ret {
        ev.ret = regs.rax;
        ev.flags |= HIT_HAS_RET;
    }
    slot.submit(batched_wakeup(settings));
    Ok(())
}

/// `kprobe:FUNC` and `kcall:FUNC` entries, as fentry programs: this
/// kernel kind may lack kprobes (CONFIG_KPROBES off) but has BPF
/// trampolines. Loaded once per function (the function is fixed at load).
///
/// Declared as a kprobe for aya's parser: an fentry section would make aya
/// require the object's BTF to load (which this object's Rust enums fail
/// in the kernel), and userspace loads these itself, as tracing programs
/// (`user_probes.rs`), with the context used only through helpers.
#[kprobe]
pub fn user_probe_fentry(ctx: ProbeContext) -> u32 {
    if let Err(source) = try_user_probe_traced(ctx.as_ptr(), false) {
        count_drop(source);
    }
    0
}

/// `kretprobe:FUNC` and `kcall:FUNC` returns, as fexit programs.
#[kprobe]
pub fn user_probe_fexit(ctx: ProbeContext) -> u32 {
    if let Err(source) = try_user_probe_traced(ctx.as_ptr(), true) {
        count_drop(source);
    }
    0
}

/// A kernel function's entry or return (`ret`), with its arguments from
/// the trampoline (`bpf_get_func_arg`: argument registers as the BTF
/// prototype gives them).
#[inline(always)]
fn try_user_probe_traced(ctx: *mut core::ffi::c_void, ret: bool) -> Result<(), DropSource> {
    // SAFETY: the context is the tracing program's, which the helper expects.
    let cookie = unsafe { bpf_get_attach_cookie(ctx) };
    let id = (cookie as u32) % MAX_USER_PROBES;
    let pid_tgid = bpf_get_current_pid_tgid();
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let probe = USER_PROBES.get(id).ok_or(DropSource::ConfigUnreadable)?;
    let call = probe.flags & PROBE_CALL != 0;
    let key = ProbeCallKey {
        tid: pid_tgid as u32,
        probe: id,
        sp: 0,
    };
    let mut rv: u64 = 0;
    if ret {
        // SAFETY: an fexit context; the helper writes the return value.
        unsafe { bpf_get_func_ret(ctx, &mut rv) };
    }
    if call && ret {
        let Some(entry) = PROBE_CALLS.get_ptr(&key) else {
            return Ok(());
        };
        let mut slot = EVENTS
            .reserve::<ProbeHitEvent>(0)
            .ok_or(DropSource::ProbeRingFull)?;
        let dst = slot.as_mut_ptr();
        // SAFETY: as in try_user_probe.
        unsafe {
            bpf_probe_read_kernel(
                dst as *mut _,
                size_of::<ProbeHitEvent>() as u32,
                entry as *const _,
            );
            (*dst).header = header_at(EventKind::ProbeHit, pid_tgid, bpf_ktime_get_ns());
            (*dst).ret = rv;
            (*dst).flags |= HIT_HAS_RET;
        }
        // SAFETY: the reserved slot, filled above.
        reread_strings(unsafe { &mut *dst }, probe, true);
        slot.submit(batched_wakeup(settings));
        let _ = PROBE_CALLS.remove(&key);
        return Ok(());
    }
    let tgid = (pid_tgid >> 32) as u32;
    if !is_recording(settings, tgid)? || u64::from(tgid) == settings.self_pid {
        return Ok(());
    }
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if call {
        let ev = PROBE_SCRATCH
            .get_ptr_mut(0)
            .ok_or(DropSource::ConfigUnreadable)?;
        // SAFETY: as in try_user_probe.
        let ev = unsafe { &mut *ev };
        fill(
            ev,
            pid_tgid,
            now,
            id,
            probe,
            Source::Trampoline(ctx),
            true,
            false,
        );
        if PROBE_CALLS.insert(&key, ev, 0).is_err() {
            return Err(DropSource::ProbeEntryMapFull);
        }
        return Ok(());
    }
    let mut slot = EVENTS
        .reserve::<ProbeHitEvent>(0)
        .ok_or(DropSource::ProbeRingFull)?;
    // SAFETY: as in try_user_probe.
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    fill(
        ev,
        pid_tgid,
        now,
        id,
        probe,
        Source::Trampoline(ctx),
        true,
        true,
    );
    if ret {
        ev.ret = rv;
        ev.flags |= HIT_HAS_RET;
    }
    slot.submit(batched_wakeup(settings));
    Ok(())
}

/// Every tracepoint of `--probe tracepoint:...`.
#[tracepoint]
pub fn user_probe_tp(ctx: TracePointContext) -> u32 {
    if let Err(source) = try_user_probe_tp(&ctx) {
        count_drop(source);
    }
    0
}

fn try_user_probe_tp(ctx: &TracePointContext) -> Result<(), DropSource> {
    // SAFETY: the context is the tracepoint's, which the helper expects.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let id = (cookie as u32) % MAX_USER_PROBES;
    let pid_tgid = bpf_get_current_pid_tgid();
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let tgid = (pid_tgid >> 32) as u32;
    if !is_recording(settings, tgid)? || u64::from(tgid) == settings.self_pid {
        return Ok(());
    }
    let probe = USER_PROBES.get(id).ok_or(DropSource::ConfigUnreadable)?;
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let mut slot = EVENTS
        .reserve::<ProbeHitEvent>(0)
        .ok_or(DropSource::ProbeRingFull)?;
    // SAFETY: as in try_user_probe.
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    fill(
        ev,
        pid_tgid,
        now,
        id,
        probe,
        Source::Record(ctx.as_ptr() as *const u8),
        true,
        true,
    );
    slot.submit(batched_wakeup(settings));
    Ok(())
}

/// What the arguments are read from.
#[derive(Clone, Copy)]
enum Source {
    /// A probe's saved registers.
    Regs(*const u8),
    /// A tracepoint's record.
    Record(*const u8),
    /// A BPF trampoline's context (fentry, fexit): `ARG_REG`'s `reg` is
    /// the argument's index times 8.
    Trampoline(*mut core::ffi::c_void),
}

/// A call's string arguments that could not be read at its entry, read
/// again at its return: a probe may not fault, and a string in a page the
/// process had not touched yet (a literal's first use) is readable once
/// the function has read it. What still fails is counted.
#[inline(always)]
fn reread_strings(ev: &mut ProbeHitEvent, probe: &UserProbe, kernel: bool) {
    for i in 0..MAX_PROBE_ARGS {
        let bit = 1 << (8 + i);
        if ev.flags & bit == 0 {
            continue;
        }
        if probe.args[i].kind == ARG_STR && ev.args[i] != 0 && read_str(ev, i, ev.args[i], kernel) {
            ev.flags &= !bit;
        } else {
            count_drop(DropSource::ProbeArgUnreadable);
        }
    }
}

/// Writes a hit of `probe` at `now` with its arguments into `ev`; `count`:
/// an argument that cannot be read is counted now (a call's entry leaves
/// it to its return, which tries again).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn fill(
    ev: &mut ProbeHitEvent,
    pid_tgid: u64,
    now: u64,
    id: u32,
    probe: &UserProbe,
    source: Source,
    kernel: bool,
    count: bool,
) {
    ev.header = header_at(EventKind::ProbeHit, pid_tgid, now);
    ev.probe = id;
    ev.flags = 0;
    ev.start = now;
    ev.ret = 0;
    for i in 0..MAX_PROBE_ARGS {
        ev.args[i] = 0;
        ev.strs[i][0] = 0;
        if (i as u32) < probe.nargs && !read_arg(&probe.args[i], source, kernel, ev, i) {
            ev.flags |= 1 << (8 + i);
            if count {
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

/// Reads a NUL-terminated string at `addr` into slot `i` of the hit.
#[inline(always)]
fn read_str(ev: &mut ProbeHitEvent, i: usize, addr: u64, kernel: bool) -> bool {
    let dst = ev.strs[i].as_mut_ptr() as *mut _;
    // SAFETY: the helpers fail instead of faulting; the destination holds
    // PROBE_STR_BYTES bytes.
    let rc = unsafe {
        if kernel {
            bpf_probe_read_kernel_str(dst, PROBE_STR_BYTES as u32, addr as *const _)
        } else {
            bpf_probe_read_user_str(dst, PROBE_STR_BYTES as u32, addr as *const _)
        }
    };
    if rc < 0 {
        ev.strs[i][0] = 0;
        return false;
    }
    true
}

/// One argument into `ev.args[i]` (and, for a string, `ev.strs[i]`); false
/// when it could not be read.
#[inline(always)]
fn read_arg(
    arg: &ProbeArg,
    source: Source,
    kernel: bool,
    ev: &mut ProbeHitEvent,
    i: usize,
) -> bool {
    let i = i % MAX_PROBE_ARGS;
    let value = match source {
        Source::Regs(regs) => {
            if arg.reg >= PT_REGS_BYTES {
                return false;
            }
            // The registers are kernel memory, read at an offset only known
            // at run time (the verifier refuses that as a context access).
            let Some(reg) = read_mem(regs as u64 + u64::from(arg.reg & 0xf8), 8, true) else {
                return false;
            };
            match arg.loc {
                ARG_REG => reg,
                ARG_MEM => match read_mem(reg.wrapping_add(arg.offset as u64), arg.size, kernel) {
                    Some(v) => v,
                    None => return false,
                },
                ARG_CONST => arg.offset as u64,
                _ => return false,
            }
        }
        Source::Trampoline(ctx) => {
            let mut v: u64 = 0;
            // SAFETY: a tracing program's context; the helper checks the
            // index against the function's argument count.
            if unsafe { bpf_get_func_arg(ctx, arg.reg / 8, &mut v) } != 0 {
                return false;
            }
            match arg.loc {
                ARG_REG => v,
                ARG_MEM => match read_mem(v.wrapping_add(arg.offset as u64), arg.size, true) {
                    Some(v) => v,
                    None => return false,
                },
                _ => return false,
            }
        }
        Source::Record(record) => {
            let at = record as u64 + (arg.offset as u64 & 0xffff);
            match arg.loc {
                ARG_TP_FIELD => match read_mem(at, arg.size, true) {
                    Some(v) => v,
                    None => return false,
                },
                ARG_TP_DATA_LOC => {
                    let Some(loc) = read_mem(at, 4, true) else {
                        return false;
                    };
                    ev.args[i] = loc;
                    return read_str(ev, i, record as u64 + (loc & 0xffff), true);
                }
                ARG_TP_INLINE_STR => {
                    ev.args[i] = at;
                    return read_str(ev, i, at, true);
                }
                _ => return false,
            }
        }
    };
    ev.args[i] = value;
    if arg.kind == ARG_STR {
        // A tracepoint's `char *` field is most often a user pointer (a
        // system call's argument); a kernel one is tried next.
        let user_first = matches!(source, Source::Record(_)) || !kernel;
        return read_str(ev, i, value, !user_first)
            || (matches!(source, Source::Record(_)) && read_str(ev, i, value, true));
    }
    true
}
