//! Where a CPython process keeps each thread's Python frames, and a walk of
//! them from outside with `process_vm_readv`.
//!
//! This is the layout the eBPF sample program follows at sample time
//! (`asys-ebpf/src/python.rs`, given the offsets by [`sampling_entry`]): `_PyRuntime` (found by symbol in the interpreter or
//! libpython) → `interpreters.head` → `threads.head` → each `PyThreadState`
//! (matched by `native_thread_id`; 3.10: by the `tid` in the glibc `struct
//! pthread` its `thread_id` points at) → `cframe->current_frame` (3.13:
//! `current_frame`; 3.10: `frame`) → the `_PyInterpreterFrame` chain
//! (`f_code`, `prev_instr`, `is_entry` or the shim frames' `owner`,
//! `previous`; 3.10: the `PyFrameObject` chain, `f_code`, `f_lasti`,
//! `f_back`, each frame an entry frame). The
//! walk here exists so the offsets are checked against a
//! live interpreter (the tests below); only the tests call the walk.
#![cfg_attr(not(test), allow(dead_code))]

use std::path::Path;

use object::{Object, ObjectSegment, ObjectSymbol};

use crate::{
    collect::python_code::{PyVersion, PythonError},
    process::remote_memory::{Process, RemoteMemory},
};

/// Offsets (bytes, x86-64) of what the walk reads, from CPython's
/// `Include/internal/pycore_runtime.h`, `pycore_interp.h`,
/// `cpython/pystate.h` and `pycore_frame.h` of each version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackLayout {
    /// `_PyRuntimeState.interpreters.head`.
    pub runtime_interpreters_head: u64,
    /// `PyInterpreterState.next`.
    pub interp_next: u64,
    /// `PyInterpreterState.threads.head`.
    pub interp_threads_head: u64,
    /// `PyThreadState.next`.
    pub tstate_next: u64,
    /// `PyThreadState.native_thread_id` (3.10: `thread_id`, see
    /// `pthread_tid`).
    pub tstate_native_id: u64,
    /// 3.10: the field at `tstate_native_id` is `pthread_self()` of the
    /// thread, the address of glibc's `struct pthread`, whose `tid` (a u32)
    /// is at this offset.
    pub pthread_tid: Option<u64>,
    /// Where the thread's innermost frame is.
    pub current_frame: CurrentFrame,
    /// `_PyInterpreterFrame.f_code` (3.13: `f_executable`).
    pub frame_code: u64,
    /// `_PyInterpreterFrame.previous`.
    pub frame_previous: u64,
    /// `_PyInterpreterFrame.prev_instr` (3.13: `instr_ptr`; 3.10:
    /// `PyFrameObject.f_lasti`, an int; each gives the frame's line as the
    /// interpreter's own `f_lineno` does).
    pub frame_prev_instr: u64,
    /// The instruction is 3.10's `f_lasti` (4 bytes, code units), not a
    /// pointer.
    pub frame_lasti: bool,
    /// How the first frame of a C-level evaluator call is told.
    pub entry: EntryMark,
    /// The frame's executable may be another object than a code object
    /// (3.13's `f_executable`): its type is checked against `PyCode_Type`.
    pub check_code: bool,
}

/// Where a thread state keeps its innermost Python frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurrentFrame {
    /// `tstate->cframe->current_frame` (3.11, 3.12).
    ViaCFrame {
        tstate_cframe: u64,
        cframe_current_frame: u64,
    },
    /// `tstate->current_frame` (3.13; 3.10's `tstate->frame`).
    InThread { tstate_current_frame: u64 },
}

/// How the first frame one C-level call of the evaluator
/// (`_PyEval_EvalFrameDefault`) ran is told from the frames it ran since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryMark {
    /// `_PyInterpreterFrame.is_entry`, a byte (3.11).
    IsEntryByte { frame_is_entry: u64 },
    /// Each call pushes a shim frame whose `_PyInterpreterFrame.owner`
    /// (a byte) is `FRAME_OWNED_BY_CSTACK` (3.12+): the frame before it is
    /// the entry frame; the shim is not a Python function.
    ShimOwner { frame_owner: u64 },
    /// Each frame is one C-level call of the evaluator (3.10, where Python
    /// calling Python recurses in C).
    EveryFrame,
}

/// The layouts of 3.11 (checked against Debian's 3.11.2 and pyenv's
/// 3.11.7), 3.10, 3.12 and 3.13 (printed by `xtask/cpython_offsets.c` from
/// the `libpython3.X-dev` headers of Ubuntu jammy's 3.10.12, Ubuntu noble's
/// 3.12.3 and Debian trixie's 3.13.5, and checked against those
/// interpreters by the test below); other versions are refused, not
/// guessed.
pub fn stack_layout(v: PyVersion) -> Result<StackLayout, PythonError> {
    match v.major_minor() {
        (3, 10) => Ok(StackLayout {
            runtime_interpreters_head: 32,
            interp_next: 0,
            interp_threads_head: 8,
            tstate_next: 8,
            // thread_id: pthread_self().
            tstate_native_id: 176,
            pthread_tid: Some(GLIBC_PTHREAD_TID),
            current_frame: CurrentFrame::InThread {
                tstate_current_frame: 24,
            },
            frame_code: 32,
            frame_previous: 24,
            frame_prev_instr: 96,
            frame_lasti: true,
            entry: EntryMark::EveryFrame,
            check_code: false,
        }),
        (3, 11) => Ok(StackLayout {
            runtime_interpreters_head: 40,
            interp_next: 0,
            interp_threads_head: 16,
            tstate_next: 8,
            tstate_native_id: 160,
            pthread_tid: None,
            current_frame: CurrentFrame::ViaCFrame {
                tstate_cframe: 56,
                cframe_current_frame: 8,
            },
            frame_code: 32,
            frame_previous: 48,
            frame_prev_instr: 56,
            frame_lasti: false,
            entry: EntryMark::IsEntryByte { frame_is_entry: 68 },
            check_code: false,
        }),
        (3, 12) => Ok(StackLayout {
            runtime_interpreters_head: 40,
            interp_next: 0,
            interp_threads_head: 72,
            tstate_next: 8,
            tstate_native_id: 144,
            pthread_tid: None,
            current_frame: CurrentFrame::ViaCFrame {
                tstate_cframe: 56,
                cframe_current_frame: 0,
            },
            frame_code: 0,
            frame_previous: 8,
            frame_prev_instr: 56,
            frame_lasti: false,
            entry: EntryMark::ShimOwner { frame_owner: 70 },
            check_code: false,
        }),
        (3, 13) => Ok(StackLayout {
            runtime_interpreters_head: 632,
            interp_next: 7264,
            interp_threads_head: 7344,
            tstate_next: 8,
            tstate_native_id: 160,
            pthread_tid: None,
            current_frame: CurrentFrame::InThread {
                tstate_current_frame: 72,
            },
            frame_code: 0,
            frame_previous: 8,
            frame_prev_instr: 56,
            frame_lasti: false,
            entry: EntryMark::ShimOwner { frame_owner: 70 },
            check_code: true,
        }),
        _ => Err(PythonError::Unsupported(v)),
    }
}

/// `offsetof(struct pthread, tid)` in glibc on x86-64 (0x2d0, the same from
/// glibc 2.x to 2.41: libthread_db's `_thread_db_pthread_tid`); checked
/// against the process's threads by [`sampling_entry`].
pub const GLIBC_PTHREAD_TID: u64 = 0x2d0;

/// What the sample program needs to read process `pid`'s Python frames
/// (each thread's at most every `min_interval_ns`; 0: at every sample), and
/// the layout of its code objects, if it is a CPython asys can read.
pub fn sampling_entry(
    pid: u32,
    min_interval_ns: u64,
) -> Result<
    (
        asys_common::PythonProcess,
        crate::collect::python_code::CodeLayout,
    ),
    PythonError,
> {
    let version = crate::collect::python_code::version_of_process(pid)?;
    let code = crate::collect::python_code::layout(version)?;
    let l = stack_layout(version)?;
    let runtime = runtime_address(pid)?;
    if l.pthread_tid.is_some() {
        check_pthread_tid(pid, runtime, &l)?;
    }
    let code_type = match l.check_code {
        true => symbol_address(pid, "PyCode_Type")?,
        false => 0,
    };
    // The offsets are a few thousand bytes at most.
    let off = |v: u64| v as u32;
    let mut flags = 0;
    let (tstate_cframe, cframe_current_frame) = match l.current_frame {
        CurrentFrame::ViaCFrame {
            tstate_cframe,
            cframe_current_frame,
        } => {
            flags |= asys_common::PYTHON_VIA_CFRAME;
            (tstate_cframe, cframe_current_frame)
        }
        // The sample program reads the frame at tstate_cframe itself.
        CurrentFrame::InThread {
            tstate_current_frame,
        } => (tstate_current_frame, 0),
    };
    let (frame_is_entry, frame_owner) = match l.entry {
        EntryMark::IsEntryByte { frame_is_entry } => (frame_is_entry, 0),
        EntryMark::ShimOwner { frame_owner } => {
            flags |= asys_common::PYTHON_ENTRY_BY_SHIM;
            (0, frame_owner)
        }
        EntryMark::EveryFrame => (0, 0),
    };
    if l.check_code {
        flags |= asys_common::PYTHON_CHECK_CODE;
    }
    // 3.10's frame objects: f_lasti, and every frame an entry frame.
    if l.frame_lasti || l.entry == EntryMark::EveryFrame {
        debug_assert!(l.frame_lasti && l.entry == EntryMark::EveryFrame);
        flags |= asys_common::PYTHON_FRAME_OBJECTS;
    }
    if l.pthread_tid.is_some() {
        flags |= asys_common::PYTHON_TID_VIA_PTHREAD;
    }
    Ok((
        asys_common::PythonProcess {
            runtime,
            runtime_interpreters_head: off(l.runtime_interpreters_head),
            interp_threads_head: off(l.interp_threads_head),
            tstate_next: off(l.tstate_next),
            tstate_native_id: off(l.tstate_native_id),
            tstate_cframe: off(tstate_cframe),
            cframe_current_frame: off(cframe_current_frame),
            frame_code: off(l.frame_code),
            frame_previous: off(l.frame_previous),
            frame_prev_instr: off(l.frame_prev_instr),
            frame_is_entry: off(frame_is_entry),
            code_qualname: off(code.co_qualname),
            code_first_line: off(code.co_firstlineno),
            min_interval_ns,
            code_type,
            frame_owner: off(frame_owner),
            flags,
            pthread_tid: off(l.pthread_tid.unwrap_or(0)),
            code_filename: off(code.co_filename),
            str_ascii_data: off(code.ascii_data),
            str_compact_data: off(code.compact_data),
            // Set by the caller, from `--python-sampling-frequency`.
            wait_interval_us: 0,
            reserved: 0,
        },
        code,
    ))
}

/// Where a thread state names its thread by `pthread_self()` (3.10): the
/// `tid` of one of process `pid`'s thread states at least is one of its
/// threads (one thread may be exiting as they are read; a libc other than
/// glibc keeps its id elsewhere: refused, not guessed). A process with no
/// thread state yet is taken.
fn check_pthread_tid(pid: u32, runtime: u64, l: &StackLayout) -> Result<(), PythonError> {
    let states = thread_states(pid, runtime, l)?;
    let tasks = crate::process::procfs::task_ids(pid);
    let ours = |tid: u64| u32::try_from(tid).is_ok_and(|t| tasks.contains(&t));
    match states.first() {
        Some(&(tid, ts)) if !states.iter().any(|(t, _)| ours(*t)) => Err(PythonError::ThreadId {
            pid,
            tstate: ts,
            tid,
        }),
        _ => Ok(()),
    }
}

/// The address of `_PyRuntime` in process `pid`.
pub fn runtime_address(pid: u32) -> Result<u64, PythonError> {
    symbol_address(pid, "_PyRuntime")
}

/// The address of symbol `name` (`_PyRuntime`, `PyCode_Type`) in process
/// `pid`: its symbol in the executable or the libpython the process maps,
/// plus where that file is loaded.
pub fn symbol_address(pid: u32, name: &str) -> Result<u64, PythonError> {
    let (maps, _) = crate::process::procfs::mappings_and_vdso(pid)
        .map_err(|e| PythonError::Read(format!("/proc/{pid}/maps"), e))?;
    let mut tried: Vec<&Path> = Vec::new();
    for m in maps.iter().filter(|m| m.offset == 0) {
        let file_name = m.path.file_name().map(|n| n.to_string_lossy().into_owned());
        let libpython = file_name
            .as_deref()
            .is_some_and(|n| n.starts_with("libpython3"));
        // The executable is the first file mapped.
        if !(tried.is_empty() || libpython) || tried.contains(&m.path.as_path()) {
            continue;
        }
        tried.push(&m.path);
        let path = crate::process::mapped_file::readable_path(pid, &m.path.display().to_string());
        let shown = m.path.display().to_string();
        // Mapped through the one opener of files other processes name.
        let data = crate::elf::mapped::FileBytes::map(
            &path,
            &asys_report::untrusted::open::Policy::MAPPED,
        )
        .map_err(|e| PythonError::Read(shown.clone(), e))?;
        let file = object::File::parse(&*data).map_err(|e| PythonError::Elf(shown, e))?;
        let Some(sym) = file
            .dynamic_symbols()
            .chain(file.symbols())
            .find(|s| s.name() == Ok(name))
        else {
            continue;
        };
        // The file's lowest segment is at the start of its offset-0
        // mapping (a fixed-address executable: bias 0).
        let lowest = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
        return Ok(sym.address() - lowest + m.start);
    }
    Err(PythonError::NoVersion(format!(
        "process {pid} (no {name} symbol)"
    )))
}

/// Most frames walked per thread (the eBPF side's bound too).
pub const MAX_FRAMES: usize = 32;
/// Most interpreters and threads walked (a bound against a cycle).
const MAX_LINKS: usize = 256;
/// Most thread states in all: a cycle in both lists would otherwise give
/// MAX_LINKS² of them (65,536, from 16 bytes of the process's; found by
/// fuzz/fuzz_targets/python.rs, where such inputs ran 100x slower).
const MAX_THREAD_STATES: usize = 1024;

/// One Python frame as the sampler is to record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef {
    /// The code object's address (named with `python_code::read_code`).
    pub code: u64,
    /// `prev_instr`: the instruction running (or last run) in the frame
    /// (3.10: `f_lasti`, as the sample program sends it).
    pub prev_instr: u64,
    /// The first frame of one C-level call of the evaluator.
    pub is_entry: bool,
}

/// The thread states of process `pid`, as (native thread id, address).
pub fn thread_states(
    pid: u32,
    runtime: u64,
    l: &StackLayout,
) -> Result<Vec<(u64, u64)>, PythonError> {
    thread_states_in(&Process(pid), runtime, l)
}

/// The thread states in `mem` (a process, or the fuzz targets' made-up
/// memory), from `_PyRuntime` at `runtime`. Every pointer is the process's
/// to write: additions wrap (an address past the top reads as nothing),
/// and the lists are walked a bounded number of links.
pub fn thread_states_in(
    mem: &impl RemoteMemory,
    runtime: u64,
    l: &StackLayout,
) -> Result<Vec<(u64, u64)>, PythonError> {
    let pid = mem.pid();
    let err = |what, addr| PythonError::Memory { pid, what, addr };
    let mut out = Vec::new();
    let mut interp = mem
        .read_u64(runtime.wrapping_add(l.runtime_interpreters_head))
        .ok_or(err("interpreters.head", runtime))?;
    for _ in 0..MAX_LINKS {
        if interp == 0 || out.len() == MAX_THREAD_STATES {
            break;
        }
        let mut ts = mem
            .read_u64(interp.wrapping_add(l.interp_threads_head))
            .ok_or(err("threads.head", interp))?;
        for _ in 0..MAX_LINKS {
            if ts == 0 || out.len() == MAX_THREAD_STATES {
                break;
            }
            let mut tid = mem
                .read_u64(ts.wrapping_add(l.tstate_native_id))
                .ok_or(err("native_thread_id", ts))?;
            if let Some(off) = l.pthread_tid {
                // 3.10: a pthread_t. 0 (a thread not started yet) or
                // unreadable: no thread's.
                tid = mem.read(tid.wrapping_add(off), 4).map_or(u64::MAX, |b| {
                    u64::from(u32::from_le_bytes(b.try_into().expect("4 bytes")))
                });
            }
            out.push((tid, ts));
            ts = mem
                .read_u64(ts.wrapping_add(l.tstate_next))
                .ok_or(err("tstate.next", ts))?;
        }
        interp = mem
            .read_u64(interp.wrapping_add(l.interp_next))
            .ok_or(err("interp.next", interp))?;
    }
    Ok(out)
}

/// The Python frames of the thread state at `tstate`, innermost first,
/// without shim frames, as the sample program reads them.
pub fn frames(pid: u32, tstate: u64, l: &StackLayout) -> Result<Vec<FrameRef>, PythonError> {
    let code_type = match l.check_code {
        true => Some(symbol_address(pid, "PyCode_Type")?),
        false => None,
    };
    frames_in(&Process(pid), tstate, l, code_type)
}

/// The frames of the thread state at `tstate` in `mem`; `code_type`: where
/// `PyCode_Type` is, when the layout checks that a frame runs code
/// (3.13). Bounded as [`thread_states_in`] is.
pub fn frames_in(
    mem: &impl RemoteMemory,
    tstate: u64,
    l: &StackLayout,
    code_type: Option<u64>,
) -> Result<Vec<FrameRef>, PythonError> {
    let pid = mem.pid();
    let err = |what, addr| PythonError::Memory { pid, what, addr };
    let mut frame = match l.current_frame {
        CurrentFrame::ViaCFrame {
            tstate_cframe,
            cframe_current_frame,
        } => match mem
            .read_u64(tstate.wrapping_add(tstate_cframe))
            .ok_or(err("cframe", tstate))?
        {
            0 => 0,
            c => mem
                .read_u64(c.wrapping_add(cframe_current_frame))
                .ok_or(err("current_frame", c))?,
        },
        CurrentFrame::InThread {
            tstate_current_frame,
        } => mem
            .read_u64(tstate.wrapping_add(tstate_current_frame))
            .ok_or(err("current_frame", tstate))?,
    };
    let mut out: Vec<FrameRef> = Vec::new();
    // Every field read is in the first `len` bytes (80; 3.10's f_lasti at
    // 96).
    let len = [l.frame_code, l.frame_previous, l.frame_prev_instr]
        .into_iter()
        .chain(match l.entry {
            EntryMark::IsEntryByte { frame_is_entry } => Some(frame_is_entry),
            EntryMark::ShimOwner { frame_owner } => Some(frame_owner),
            EntryMark::EveryFrame => None,
        })
        .max()
        .unwrap_or(0)
        + 8;
    for _ in 0..2 * MAX_FRAMES {
        if frame == 0 || out.len() == MAX_FRAMES {
            break;
        }
        let head = mem
            .read(frame, len.max(80) as usize)
            .ok_or(err("_PyInterpreterFrame", frame))?;
        let word = |off: u64| {
            u64::from_le_bytes(head[off as usize..off as usize + 8].try_into().expect("8"))
        };
        frame = word(l.frame_previous);
        let is_entry = match l.entry {
            EntryMark::EveryFrame => true,
            EntryMark::IsEntryByte { frame_is_entry } => head[frame_is_entry as usize] != 0,
            EntryMark::ShimOwner { frame_owner } => {
                if head[frame_owner as usize] == asys_common::PYTHON_OWNED_BY_CSTACK {
                    if let Some(last) = out.last_mut() {
                        last.is_entry = true;
                    }
                    continue;
                }
                false
            }
        };
        let code = word(l.frame_code);
        if let Some(t) = code_type
            && mem
                .read_u64(code.wrapping_add(8))
                .ok_or(err("ob_type", code))?
                != t
        {
            continue;
        }
        let prev_instr = match l.frame_lasti {
            true => word(l.frame_prev_instr) & 0xffff_ffff,
            false => word(l.frame_prev_instr),
        };
        out.push(FrameRef {
            code,
            prev_instr,
            is_entry,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::python_code::{layout, read_code, read_remote, version_of_process};

    /// Two threads each print, from inside nested functions, their native
    /// id and their own stack as the interpreter sees it (`sys._getframe`:
    /// qualified name and current line per frame, innermost first), then
    /// block in a C call (no Python frame of its own) on the same line.
    const SCRIPT: &str = r#"
import os, sys, threading
def stack():
    f = sys._getframe(1)
    out = []
    while f is not None:
        # 3.10 has no co_qualname: asys names its frames by co_name.
        out.append(f"{getattr(f.f_code, 'co_qualname', f.f_code.co_name)}@{f.f_lineno}")
        f = f.f_back
    return ",".join(out)

r, w = os.pipe()

def say(*words):
    # One write each (under PIPE_BUF): the threads' lines do not mix.
    os.write(1, (" ".join(map(str, words)) + "\n").encode())

def worker_inner():
    say("thread", threading.get_native_id(), stack()); os.read(r, 1)

def worker():
    worker_inner()

def inner():
    t = threading.Thread(target=worker); t.start()
    say("thread", threading.get_native_id(), stack()); say("ready"); sys.stdin.readline(); os.write(w, b"x"); t.join()

class Outer:
    def middle(self):
        inner()

Outer().middle()
"#;

    #[test]
    fn the_frames_of_each_thread_of_a_running_interpreter_read_as_it_sees_them() {
        use std::io::{BufRead, Write};
        let dir = std::env::temp_dir().join(format!("asys-pythreads-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let script = dir.join("script.py");
        std::fs::write(&script, SCRIPT).unwrap();
        // Debian's 3.11.2, pyenv's 3.11.7 (the `python3` on PATH), and the
        // fixtures' 3.12.3 and 3.13.5.
        let pythons = crate::collect::python_code::tests::interpreters();
        for python in &pythons {
            let python = python.display();
            let mut child = std::process::Command::new(python.to_string())
                .arg(&script)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let pid = child.id();
            let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut want = Vec::new();
            let mut ready = false;
            while !(ready && want.len() == 2) {
                let mut line = String::new();
                out.read_line(&mut line).unwrap();
                let f: Vec<&str> = line.split_whitespace().collect();
                match f.first() {
                    Some(&"thread") => want.push((f[1].parse::<u64>().unwrap(), f[2].to_string())),
                    Some(&"ready") => ready = true,
                    _ => panic!("{python}: unexpected output {line:?}"),
                }
            }
            // The worker may still be between its print and its read: the
            // same line either way.
            let version = version_of_process(pid).unwrap();
            let code = layout(version).unwrap();
            let l = stack_layout(version).unwrap();
            let runtime = runtime_address(pid).unwrap();
            let states = thread_states(pid, runtime, &l).unwrap();
            assert_eq!(states.len(), 2, "{python}: {states:x?}");
            for (tid, expected) in &want {
                let &(_, ts) = states
                    .iter()
                    .find(|(t, _)| t == tid)
                    .unwrap_or_else(|| panic!("{python}: thread {tid} not among {states:?}"));
                // The worker may still be in `say` after its line came: read
                // again until it has reached its read (at most 2 s).
                let mut tries = 0;
                let (frames, got) = loop {
                    let frames = frames(pid, ts, &l).unwrap();
                    let got: Vec<String> = frames
                        .iter()
                        .map(|f| {
                            let info = read_code(pid, f.code, &code).unwrap();
                            let line = code.line(&info, f.code, f.prev_instr).unwrap_or(0);
                            format!("{}@{line}", info.qualname)
                        })
                        .collect();
                    tries += 1;
                    if !got[0].starts_with("say@") || tries == 100 {
                        break (frames, got);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                };
                // The thread printed its stack from one line and now
                // blocks in the next statement of the same line (both
                // statements are on one line on purpose), so names and
                // lines agree exactly.
                eprintln!("{python}: thread {tid}: {}", got.join(","));
                assert_eq!(got.join(","), *expected, "{python}: thread {tid}");
                // One C-level evaluator call runs the main thread's frames
                // (Python calls Python without recursing in C); the
                // worker's start in a new one (the Thread's run, called
                // from C). In 3.10 each frame is its own call.
                let entries: Vec<bool> = frames.iter().map(|f| f.is_entry).collect();
                assert!(entries.last() == Some(&true), "{python}: {entries:?}");
                if l.entry == EntryMark::EveryFrame {
                    assert!(entries.iter().all(|e| *e), "{python}: {entries:?}");
                }
            }
            child.stdin.take().unwrap().write_all(b"\n").unwrap();
            assert!(child.wait().unwrap().success());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// 3.13 publishes its own offsets at the start of `_PyRuntime`
    /// (`_Py_DebugOffsets`, cookie `xdebugpy`, for out-of-process tools):
    /// read from the running interpreter, they agree with the tables here.
    #[test]
    fn the_313_layout_agrees_with_the_interpreters_own_debug_offsets() {
        use std::io::{BufRead, Write};
        let python = crate::collect::python_code::tests::fixture("3.13");
        let mut child = std::process::Command::new(&python)
            .args([
                "-c",
                "import sys; print('ready', flush=True); sys.stdin.readline()",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let version = version_of_process(pid).unwrap();
        let runtime = runtime_address(pid).unwrap();
        // The struct as in 3.13.5's Include/internal/pycore_runtime.h, in
        // 8-byte words: cookie, version, free_threaded, then each part's
        // size followed by its offsets.
        let raw = read_remote(pid, runtime, 46 * 8).unwrap();
        let word = |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
        assert_eq!(&raw[..8], b"xdebugpy");
        assert_eq!(word(1), u64::from(version.0));
        let l = stack_layout(version).unwrap();
        let code = layout(version).unwrap();
        let CurrentFrame::InThread {
            tstate_current_frame,
        } = l.current_frame
        else {
            panic!("3.13 has no cframe: {l:?}")
        };
        let EntryMark::ShimOwner { frame_owner } = l.entry else {
            panic!("3.13 has no is_entry: {l:?}")
        };
        let pairs = [
            (
                "runtime.interpreters_head",
                word(5),
                l.runtime_interpreters_head,
            ),
            ("interp.next", word(8), l.interp_next),
            ("interp.threads_head", word(9), l.interp_threads_head),
            ("tstate.next", word(21), l.tstate_next),
            ("tstate.current_frame", word(23), tstate_current_frame),
            ("tstate.native_thread_id", word(25), l.tstate_native_id),
            ("frame.previous", word(29), l.frame_previous),
            ("frame.executable", word(30), l.frame_code),
            ("frame.instr_ptr", word(31), l.frame_prev_instr),
            ("frame.owner", word(33), frame_owner),
            ("code.filename", word(35), code.co_filename),
            ("code.name", word(36), code.co_name),
            ("code.qualname", word(37), code.co_qualname),
            ("code.linetable", word(38), code.co_linetable),
            ("code.firstlineno", word(39), code.co_firstlineno),
            ("code.co_code_adaptive", word(43), code.co_code_adaptive),
        ];
        for (what, theirs, ours) in pairs {
            assert_eq!(theirs, ours, "{what}");
        }
        child.stdin.take().unwrap().write_all(b"\n").unwrap();
        assert!(child.wait().unwrap().success());
    }

    /// Interpreters and threads whose every pointer is their own address
    /// (one block of this process's memory): a bounded number of states.
    #[test]
    fn a_cycle_of_interpreters_and_threads_gives_a_bounded_list() {
        let l = stack_layout(PyVersion(0x030c_03f0)).unwrap();
        let mut block = vec![0u64; 64];
        let at = block.as_ptr() as u64;
        block.fill(at);
        let me = Process(std::process::id());
        let states = thread_states_in(&me, at, &l).unwrap();
        assert_eq!(states.len(), MAX_THREAD_STATES);
        assert!(states.iter().all(|&(tid, ts)| (tid, ts) == (at, at)));
    }

    #[test]
    fn other_versions_are_refused_not_guessed() {
        for v in [0x030900f0, 0x030e00f0] {
            assert!(matches!(
                stack_layout(PyVersion(v)),
                Err(PythonError::Unsupported(_))
            ));
        }
    }
}
