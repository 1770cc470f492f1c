//! Python stacks at sample time (`--python-sampling`): for a sampled thread
//! of a CPython process that userspace put in `PYTHON_PROCESSES`, the
//! interpreter's thread states are searched for the thread's native id, and
//! its `_PyInterpreterFrame` chain is sent (code object, instruction,
//! entry flag per frame) for userspace to name. The layout comes with the
//! map entry: nothing here knows a CPython version.
use asys_common::{
    DropSource, EventKind, PYTHON_CUT_DEPTH, PYTHON_CUT_UNREADABLE, PYTHON_FRAMES, PYTHON_THREADS,
    PythonProcess, PythonStackEvent, Settings,
};
use aya_ebpf::{
    helpers::bpf_probe_read_user,
    macros::map,
    maps::{HashMap, LruHashMap},
};

use crate::maps::{EVENTS, batched_wakeup, count_drop};

/// CPython processes (by tgid) whose frames are read, and where.
#[map]
pub static PYTHON_PROCESSES: HashMap<u32, PythonProcess> = HashMap::with_max_entries(4096, 0);

/// When each thread's Python stack was last read (`--python-sampling-frequency`);
/// threads long gone are the ones evicted.
#[map]
pub static PYTHON_LAST: LruHashMap<u32, u64> = LruHashMap::with_max_entries(16384, 0);

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

/// Sends the Python frames of the current thread, sampled at `ts`, if its
/// process is a CPython one asys reads; runs without Python cost one lookup.
#[inline(always)]
pub fn send(settings: &Settings, pid_tgid: u64, ts: u64) -> Result<(), DropSource> {
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: the value is copied out at once.
    let Some(p) = (unsafe { PYTHON_PROCESSES.get(tgid) }).copied() else {
        return Ok(());
    };
    let tid = u64::from(pid_tgid as u32);
    if p.min_interval_ns != 0 {
        let thread = pid_tgid as u32;
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
    for _ in 0..PYTHON_THREADS {
        if tstate == 0 {
            break;
        }
        if read_u64(tstate + u64::from(p.tstate_native_id))? == tid {
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
    let cframe = read_u64(found + u64::from(p.tstate_cframe))?;
    if cframe == 0 {
        return Ok(());
    }
    let mut frame = read_u64(cframe + u64::from(p.cframe_current_frame))?;
    let mut slot = EVENTS
        .reserve::<PythonStackEvent>(0)
        // The sample itself is in: what is lost is a stack.
        .ok_or(DropSource::StackRingFull)?;
    // SAFETY: the reserved record is ours until submitted; filled in place
    // (it is larger than the BPF stack).
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.header = crate::maps::header_at(EventKind::PythonStack, pid_tgid, ts);
    ev.owner_ts = ts;
    ev.cut = 0;
    let mut depth = 0u32;
    for i in 0..PYTHON_FRAMES {
        if frame == 0 {
            break;
        }
        let read = (|| {
            let code = read_u64(frame + u64::from(p.frame_code))?;
            Ok::<_, DropSource>((
                code,
                read_u64(frame + u64::from(p.frame_prev_instr))?,
                read_u8(frame + u64::from(p.frame_is_entry))?,
                read_u64(frame + u64::from(p.frame_previous))?,
                read_u64(code + u64::from(p.code_qualname))?,
                read_u32(code + u64::from(p.code_first_line))?,
            ))
        })();
        let Ok((code, prev_instr, is_entry, previous, qualname, first_line)) = read else {
            ev.cut = PYTHON_CUT_UNREADABLE;
            count_drop(DropSource::PythonFrameUnreadable);
            break;
        };
        ev.frames[i].code = code;
        ev.frames[i].prev_instr = prev_instr;
        ev.frames[i].is_entry = u32::from(is_entry);
        ev.frames[i].qualname = qualname;
        ev.frames[i].first_line = first_line;
        depth += 1;
        frame = previous;
    }
    if ev.cut == 0 && frame != 0 && depth as usize == PYTHON_FRAMES {
        ev.cut = PYTHON_CUT_DEPTH;
    }
    ev.depth = depth;
    slot.submit(batched_wakeup(settings));
    Ok(())
}
