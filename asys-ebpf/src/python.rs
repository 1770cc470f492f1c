//! Python stacks at sample time (`--python-sampling`): for a sampled thread
//! of a CPython process that userspace put in `PYTHON_PROCESSES`, the
//! interpreter's thread states are searched for the thread's native id, and
//! its `_PyInterpreterFrame` (3.10: `PyFrameObject`) chain is sent (code
//! object, instruction, entry flag per frame) for userspace to name. The
//! layout comes with the map entry (offsets, and flags for what differs
//! between 3.10, 3.11, 3.12 and 3.13): nothing here knows a CPython version.
use asys_common::{
    DropSource, EventKind, PYTHON_CHECK_CODE, PYTHON_CUT_DEPTH, PYTHON_CUT_UNREADABLE,
    PYTHON_ENTRY_BY_SHIM, PYTHON_FRAME_OBJECTS, PYTHON_FRAMES, PYTHON_OWNED_BY_CSTACK,
    PYTHON_THREADS, PYTHON_TID_VIA_PTHREAD, PYTHON_VIA_CFRAME, PYTHON_WAIT_BURST, PythonProcess,
    PythonStackEvent, Settings,
};
use aya_ebpf::{
    helpers::bpf_probe_read_user,
    macros::map,
    maps::{HashMap, LruHashMap, PerCpuArray},
};

use crate::maps::{EVENTS, batched_wakeup, count_drop};

/// CPython processes (by tgid) whose frames are read, and where.
#[map]
pub static PYTHON_PROCESSES: HashMap<u32, PythonProcess> = HashMap::with_max_entries(4096, 0);

/// The first characters of a file name, for the identity word
/// (`code_ident`): `head`, and room past it that only the verifier sees
/// used (the read's length is masked to the whole buffer, the bound it can
/// check without a branch).
#[repr(C)]
struct NameHead {
    head: [u64; asys_common::PYTHON_IDENT_HEAD / 8],
    spare: [u64; asys_common::PYTHON_IDENT_HEAD / 8],
}

#[map]
static PYTHON_NAME_HEAD: PerCpuArray<NameHead> = PerCpuArray::with_max_entries(1, 0);

/// When each thread's Python stack was last read (`--python-sampling-frequency`);
/// threads long gone are the ones evicted.
#[map]
pub static PYTHON_LAST: LruHashMap<u32, u64> = LruHashMap::with_max_entries(16384, 0);

/// When each thread's next Python stack at a wait is due
/// (`wait_stack_allowed`): a map apart from [`PYTHON_LAST`], so that the two
/// kinds of stacks do not hold each other back.
#[map]
pub static PYTHON_WAIT_LAST: LruHashMap<u32, u64> = LruHashMap::with_max_entries(16384, 0);

/// Whether a wait of `thread` at `ts` may have its Python stack: each
/// thread's wait stacks are paced by a cell-rate rule (GCRA) with one
/// `interval` per stack and bursts of [`PYTHON_WAIT_BURST`]: a thread that
/// blocks now and then gets every one (the long wait after a few short GIL
/// hand-offs included), one that blocks 100,000 times a second gets one a
/// `interval` after its burst. The map keeps, per thread, when its next
/// stack is due at the steady rate.
#[inline(always)]
fn wait_stack_allowed(thread: u32, ts: u64, interval: u64) -> bool {
    // SAFETY: the value is copied out at once.
    let due = unsafe { PYTHON_WAIT_LAST.get(thread) }
        .copied()
        .unwrap_or(0);
    if due > ts.saturating_add((PYTHON_WAIT_BURST - 1) * interval) {
        return false;
    }
    // A full map evicts the least recently used; failing to note the time
    // only lets the next wait have its stack too.
    let _ = PYTHON_WAIT_LAST.insert(thread, due.max(ts) + interval, 0);
    true
}

#[inline(always)]
fn read_u64(addr: u64) -> Result<u64, DropSource> {
    // SAFETY: bpf_probe_read_user fails instead of faulting on an address
    // that is unmapped or not in memory.
    unsafe { bpf_probe_read_user(addr as *const u64) }
        .map_err(|_| DropSource::PythonFrameUnreadable)
}

#[inline(always)]
fn read_u32(addr: u64) -> Result<u32, DropSource> {
    // SAFETY: as in read_u64.
    unsafe { bpf_probe_read_user(addr as *const u32) }
        .map_err(|_| DropSource::PythonFrameUnreadable)
}

#[inline(always)]
fn read_u8(addr: u64) -> Result<u8, DropSource> {
    // SAFETY: as in read_u64.
    unsafe { bpf_probe_read_user(addr as *const u8) }.map_err(|_| DropSource::PythonFrameUnreadable)
}

/// `x`, of which the compiler knows nothing more: given a 0 or 1 it
/// would turn arithmetic on it back into a branch (a select, which BPF
/// has only as a jump). The verifier still knows its bounds (a spilled
/// register keeps them).
#[inline(always)]
fn opaque(x: u64) -> u64 {
    let x = x;
    // SAFETY: a read of a local through its own reference.
    unsafe { core::ptr::read_volatile(&x) }
}

/// [`asys_common::PythonFrame::ident`] of the code object at `code`: read
/// at every sample, so that a code object freed and another allocated at
/// its address (code run once: `exec`, a `.pth` line, a template) is told
/// apart by its file even where name and first line are the same.
///
/// Without a branch but for the failed reads: it runs in each of the
/// [`PYTHON_FRAMES`] steps, and Linux 6.1's verifier, which prunes fewer
/// paths than newer ones, refused the walk at its million instructions
/// when each step here took one of several paths (the str's kind, a name
/// shorter than the head or than 8 bytes).
#[inline(always)]
fn code_ident(p: &PythonProcess, code: u64) -> Result<u64, DropSource> {
    const HEAD: u64 = asys_common::PYTHON_IDENT_HEAD as u64;
    let qualname = read_u64(code + u64::from(p.code_qualname))?;
    let filename = read_u64(code + u64::from(p.code_filename))?;
    // length, hash, state: one read of the str's header.
    // SAFETY: as in read_u64.
    let header = unsafe {
        bpf_probe_read_user((filename + asys_common::PYTHON_STR_LENGTH) as *const [u64; 3])
    }
    .map_err(|_| DropSource::PythonFrameUnreadable)?;
    if header[0] >> 32 != 0 {
        // No file name has 4 G characters: not a str. Bounded, the sizes
        // below stay under 2^35, so their sign bits are comparisons.
        return Err(DropSource::PythonFrameUnreadable);
    }
    let state = header[2] as u8;
    // Too large for the BPF stack: a per-CPU buffer (tracing programs do
    // not nest on one CPU, so no other use of it runs meanwhile).
    let buf = PYTHON_NAME_HEAD
        .get_ptr_mut(0)
        .ok_or(DropSource::PythonFrameUnreadable)?;
    // SAFETY: the map's one entry, ours while this program runs; every
    // byte pattern is valid for its u64s.
    let buf = unsafe { &mut *buf };
    // Only `head` is mixed: zeroed word by word, as volatile stores (an
    // array assignment or write_bytes becomes a call of memset, a byte
    // loop the verifier walks 64 times in every frame step).
    for w in buf.head.iter_mut() {
        // SAFETY: a word of the buffer borrowed above.
        unsafe { core::ptr::write_volatile(w, 0) };
    }
    let at = asys_common::python_str_head_offset(state, p.str_ascii_data, p.str_compact_data);
    // 0 for a str whose characters are not after its header.
    let bytes = opaque(asys_common::python_str_bytes(state, header[0]));
    let data = filename + u64::from(at);
    // min(bytes, HEAD): `over` is 1 when bytes > HEAD.
    let over = opaque(HEAD.wrapping_sub(bytes) >> 63);
    let n = bytes.wrapping_sub(bytes.wrapping_sub(HEAD).wrapping_mul(over));
    // The verifier's bound: the mask keeps n (at most HEAD) within `buf`.
    let n = (n & (2 * HEAD - 1)) as u32;
    // SAFETY: at most 2 * HEAD - 1 bytes into `buf`, which holds 2 * HEAD;
    // a read of memory that is not there fails instead of faulting.
    let r = unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_user(
            (buf as *mut NameHead).cast(),
            n,
            data as *const core::ffi::c_void,
        )
    };
    if r != 0 {
        return Err(DropSource::PythonFrameUnreadable);
    }
    // The last 8 bytes of a name of 8 or more; for a shorter one the 8 at
    // `data` are read and masked to 0 (a str's allocation holds its
    // header, characters and terminator, rounded up to 8 or 16).
    let short = opaque(bytes.wrapping_sub(8) >> 63);
    let tail =
        read_u64(data + bytes.wrapping_sub(8).wrapping_mul(1 - short))? & short.wrapping_sub(1);
    Ok(asys_common::python_code_ident(
        qualname, filename, header[0], state, &buf.head, tail,
    ))
}

/// Sends the Python frames of the current thread, as an event of `kind`
/// stamped `ts`: `PythonStack` for the CPU sample at `ts`,
/// `PythonSwitchStack` for its switch-out to wait at `ts` (sched.rs), if its
/// process is a CPython one asys reads; runs without Python cost one lookup.
/// Each kind has its own per-thread interval and map of last reads, so that
/// a thread that blocks often does not use up its samples' stacks, nor
/// samples its waits'.
#[inline(always)]
pub fn send(
    settings: &Settings,
    pid_tgid: u64,
    ts: u64,
    kind: EventKind,
) -> Result<(), DropSource> {
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: the value is copied out at once.
    let Some(p) = (unsafe { PYTHON_PROCESSES.get(tgid) }).copied() else {
        return Ok(());
    };
    let tid = u64::from(pid_tgid as u32);
    let thread = pid_tgid as u32;
    if kind == EventKind::PythonSwitchStack {
        if !wait_stack_allowed(thread, ts, u64::from(p.wait_interval_us) * 1000) {
            // Counted: this wait has no Python stack (`python_wall_sum`
            // shows its time as `[no python stack]`).
            count_drop(DropSource::PythonWaitStackSkipped);
            return Ok(());
        }
    } else if p.min_interval_ns != 0 {
        // SAFETY: the value is copied out at once.
        let last = unsafe { PYTHON_LAST.get(thread) }.copied();
        if last.is_some_and(|last| ts.wrapping_sub(last) < p.min_interval_ns) {
            return Ok(());
        }
        // A full map evicts the least recently used; failing to note the
        // time only means the next sample reads again.
        let _ = PYTHON_LAST.insert(thread, ts, 0);
    }
    let interp = read_u64(p.runtime + u64::from(p.runtime_interpreters_head))?;
    if interp == 0 {
        // Not initialised yet, or finalised.
        return Ok(());
    }
    let mut tstate = read_u64(interp + u64::from(p.interp_threads_head))?;
    let mut found = 0;
    let via_pthread = p.flags & PYTHON_TID_VIA_PTHREAD != 0;
    for _ in 0..PYTHON_THREADS {
        if tstate == 0 {
            break;
        }
        let mut id = read_u64(tstate + u64::from(p.tstate_native_id))?;
        if via_pthread {
            // 3.10: id is the thread's pthread_t (0 or another thread's
            // while a new thread starts); one that cannot be read matches
            // no thread.
            id = read_u32(id.wrapping_add(u64::from(p.pthread_tid))).map_or(u64::MAX, u64::from);
        }
        if id == tid {
            found = tstate;
            break;
        }
        tstate = read_u64(tstate + u64::from(p.tstate_next))?;
    }
    if found == 0 {
        // A thread without a Python thread state (or past the first
        // PYTHON_THREADS): its sample has no Python frames.
        return Ok(());
    }
    let mut frame = if p.flags & PYTHON_VIA_CFRAME != 0 {
        let cframe = read_u64(found + u64::from(p.tstate_cframe))?;
        if cframe == 0 {
            return Ok(());
        }
        read_u64(cframe + u64::from(p.cframe_current_frame))?
    } else {
        // 3.13 (and 3.10's `frame`): the innermost frame is in the thread
        // state itself.
        read_u64(found + u64::from(p.tstate_cframe))?
    };
    let mut slot = EVENTS
        .reserve::<PythonStackEvent>(0)
        // The sample itself is in: what is lost is a stack.
        .ok_or(DropSource::StackRingFull)?;
    // SAFETY: the reserved record is ours until submitted; filled in place
    // (it is larger than the BPF stack).
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = crate::maps::header_at(kind, pid_tgid, ts);
    ev.owner_ts = ts;
    ev.cut = 0;
    let shims = p.flags & PYTHON_ENTRY_BY_SHIM != 0;
    let frame_objects = p.flags & PYTHON_FRAME_OBJECTS != 0;
    let mut depth = 0usize;
    // One frame sent per step, so that every path through a step leaves
    // the same depth (the verifier then keeps few states); a shim frame
    // (3.12+) is passed over within the step.
    for i in 0..PYTHON_FRAMES {
        if frame == 0 {
            break;
        }
        let read = (|| {
            let mut frame = frame;
            let mut entry_before = false;
            if shims && read_u8(frame + u64::from(p.frame_owner))? == PYTHON_OWNED_BY_CSTACK {
                // The frame before a shim began that evaluator call.
                entry_before = true;
                frame = read_u64(frame + u64::from(p.frame_previous))?;
                if frame == 0
                    || read_u8(frame + u64::from(p.frame_owner))? == PYTHON_OWNED_BY_CSTACK
                {
                    // The outermost shim, or an evaluator call that has not
                    // pushed its first frame yet: nothing more to send.
                    return Ok::<_, DropSource>((entry_before, None));
                }
            }
            let mut code = read_u64(frame + u64::from(p.frame_code))?;
            if p.flags & PYTHON_CHECK_CODE != 0 && read_u64(code + 8)? != p.code_type {
                // Not a code object (its ob_type): sent as code 0, which
                // userspace leaves out.
                code = 0;
            }
            let is_entry = if frame_objects {
                // 3.10: each frame is its own evaluator call.
                1
            } else if shims {
                // Marked when its shim is reached.
                0
            } else {
                read_u8(frame + u64::from(p.frame_is_entry))?
            };
            let prev_instr = match frame_objects {
                // 3.10's f_lasti, an int.
                true => u64::from(read_u32(frame + u64::from(p.frame_prev_instr))?),
                false => read_u64(frame + u64::from(p.frame_prev_instr))?,
            };
            let (ident, first_line) = match code {
                0 => (0, 0),
                _ => {
                    // The line first: read after the identity word, its
                    // helper call kept the word's 32 loads alive across it
                    // (spilled: 256 bytes more of the BPF stack).
                    let first_line = read_u32(code + u64::from(p.code_first_line))?;
                    (code_ident(&p, code)?, first_line)
                }
            };
            let f = asys_common::PythonFrame {
                code,
                prev_instr,
                ident,
                first_line,
                is_entry: u32::from(is_entry),
            };
            Ok((
                entry_before,
                Some((f, read_u64(frame + u64::from(p.frame_previous))?)),
            ))
        })();
        let Ok((entry_before, next)) = read else {
            ev.cut = PYTHON_CUT_UNREADABLE;
            count_drop(DropSource::PythonFrameUnreadable);
            break;
        };
        if entry_before && i > 0 {
            ev.frames[i - 1].is_entry = 1;
        }
        let Some((f, previous)) = next else {
            frame = 0;
            break;
        };
        ev.frames[i] = f;
        depth = i + 1;
        frame = previous;
    }
    if shims && ev.cut == 0 && frame != 0 && depth == PYTHON_FRAMES {
        // The frame past the last one sent: a shim there makes the last
        // one an entry frame.
        if read_u8(frame + u64::from(p.frame_owner)).is_ok_and(|o| o == PYTHON_OWNED_BY_CSTACK) {
            ev.frames[PYTHON_FRAMES - 1].is_entry = 1;
            frame = read_u64(frame + u64::from(p.frame_previous)).unwrap_or(frame);
        }
    }
    if ev.cut == 0 && frame != 0 {
        ev.cut = PYTHON_CUT_DEPTH;
    }
    ev.depth = depth as u32;
    slot.submit(batched_wakeup(settings));
    Ok(())
}
