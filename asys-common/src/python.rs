//! Python stacks (`--python-sampling`): the frames the sample program reads
//! from a CPython process, and what userspace tells it about each process
//! (where `_PyRuntime` is, the offsets of the fields it follows).
use core::mem::offset_of;

use crate::EventHeader;

/// Most Python frames read per sample (`--python-sampling`).
pub const PYTHON_FRAMES: usize = 32;
/// Most thread states of an interpreter looked through for the sampled
/// thread's.
pub const PYTHON_THREADS: u32 = 64;

/// One Python frame (`_PyInterpreterFrame`; 3.10: `PyFrameObject`) of a
/// sampled thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PythonFrame {
    /// `f_code`: the code object's address in the process.
    pub code: u64,
    /// `prev_instr`: the instruction it runs (or last ran), in the code
    /// object's `co_code_adaptive` (3.10: `f_lasti`, code units, as a u32).
    pub prev_instr: u64,
    /// What tells this code object from one allocated later where a freed
    /// one was ([`python_code_ident`]): its `co_qualname` (3.10: `co_name`)
    /// and `co_filename` pointers, and the file name's length, kind and
    /// first 8 bytes. Every `<module>` shares its qualified name (the
    /// interned `"<module>"`) and first line; its file tells it apart.
    pub ident: u64,
    /// `co_firstlineno`.
    pub first_line: u32,
    /// 1: the first frame one C-level call of the evaluator ran.
    pub is_entry: u32,
}

// An element of `PythonStackEvent::frames`; no hidden padding (Pod).
const _: () = assert!(size_of::<PythonFrame>() == 32);

/// The Python frames, innermost first, of the CPU sample of the same thread
/// stamped `owner_ts`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PythonStackEvent {
    pub header: EventHeader,
    pub owner_ts: u64,
    /// Valid entries of `frames`.
    pub depth: u32,
    /// 1: more frames followed (not read); 2: a frame could not be read.
    pub cut: u32,
    pub frames: [PythonFrame; PYTHON_FRAMES],
}

// The eBPF side (python.rs) writes the first `depth` frames only;
// collect/decode.rs reads the record whole, and userspace keeps `depth`
// frames (python_stacks.rs).
const _: () = assert!(size_of::<PythonStackEvent>() == 40 + 32 * PYTHON_FRAMES);
const _: () = assert!(offset_of!(PythonStackEvent, header) == 0);
const _: () = assert!(offset_of!(PythonStackEvent, owner_ts) == 24);
const _: () = assert!(offset_of!(PythonStackEvent, depth) == 32);
const _: () = assert!(offset_of!(PythonStackEvent, cut) == 36);
const _: () = assert!(offset_of!(PythonStackEvent, frames) == 40);

/// [`PythonStackEvent::cut`].
pub const PYTHON_CUT_DEPTH: u32 = 1;
pub const PYTHON_CUT_UNREADABLE: u32 = 2;

/// Python stacks a thread may have at waits in a row before they are
/// paced at one per [`PythonProcess::wait_interval_us`] (asys-ebpf's
/// `python::wait_stack_allowed`).
pub const PYTHON_WAIT_BURST: u64 = 16;

/// What the sample program needs to read a CPython process's frames:
/// `_PyRuntime`'s address and the offsets of the fields it follows (bytes),
/// one entry per process in `PYTHON_PROCESSES`, written by userspace.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonProcess {
    pub runtime: u64,
    pub runtime_interpreters_head: u32,
    pub interp_threads_head: u32,
    pub tstate_next: u32,
    pub tstate_native_id: u32,
    pub tstate_cframe: u32,
    pub cframe_current_frame: u32,
    pub frame_code: u32,
    pub frame_previous: u32,
    pub frame_prev_instr: u32,
    pub frame_is_entry: u32,
    /// `co_qualname` and `co_firstlineno` of a code object.
    pub code_qualname: u32,
    pub code_first_line: u32,
    /// Least time between two Python stacks of one thread
    /// (`--python-sampling-frequency`); 0: every sample.
    pub min_interval_ns: u64,
    /// `PyCode_Type`'s address, with [`PYTHON_CHECK_CODE`]: a frame whose
    /// executable is of another type is skipped.
    pub code_type: u64,
    /// `_PyInterpreterFrame.owner` (one byte), with [`PYTHON_ENTRY_BY_SHIM`].
    pub frame_owner: u32,
    /// `PYTHON_*` flags: how this version links thread and frames.
    pub flags: u32,
    /// With [`PYTHON_TID_VIA_PTHREAD`]: where glibc's `struct pthread`
    /// keeps the thread's id (`tid`, a u32).
    pub pthread_tid: u32,
    /// `co_filename` of a code object.
    pub code_filename: u32,
    /// Where a str object's characters start: compact ASCII
    /// (`sizeof(PyASCIIObject)`) and other compact kinds
    /// (`sizeof(PyCompactUnicodeObject)`).
    pub str_ascii_data: u32,
    pub str_compact_data: u32,
    /// Time, in µs, per Python stack of one thread taken as it leaves the
    /// CPU to wait (`PythonSwitchStack`), after a burst of
    /// [`PYTHON_WAIT_BURST`]: a thread that blocks 100,000 times a second
    /// (GIL hand-offs) costs at most 1e6 / this walks a second. Apart from
    /// `min_interval_ns` (and its own map), so that waits and samples do
    /// not use up each other's stacks.
    pub wait_interval_us: u32,
    pub reserved: u32,
}

// The `PYTHON_PROCESSES` map's value, written whole by userspace
// (python_threads.rs); no hidden padding (Pod).
const _: () = assert!(size_of::<PythonProcess>() == 104);

/// Where a str's `length` (code points) and `state` (its kind, compact
/// and ascii bits) are, in every supported CPython.
pub const PYTHON_STR_LENGTH: u64 = 16;
pub const PYTHON_STR_STATE: u64 = 32;
// The sample program reads length, hash and state as one [u64; 3].
const _: () = assert!(PYTHON_STR_STATE == PYTHON_STR_LENGTH + 16);
/// `state` bits: compact (characters follow the header), ASCII.
pub const PYTHON_STR_COMPACT: u8 = 0x20;
pub const PYTHON_STR_ASCII: u8 = 0x40;
// The bit positions python_str_head_offset and python_str_bytes shift by.
const _: () = assert!(PYTHON_STR_COMPACT == 1 << 5 && PYTHON_STR_ASCII == 1 << 6);

/// Where the characters of a str whose `state` byte is `state` are,
/// for [`python_code_ident`] (`ascii_data`, `compact_data`: the
/// [`PythonProcess`] fields of those names): right after the header of a compact str,
/// none (0) for a legacy one (its characters are elsewhere).
///
/// Arithmetic on the state's bits, not branches: in the sample program
/// each branch of a frame step is a path more that an older kernel's
/// verifier walks in every one of its [`PYTHON_FRAMES`] steps.
#[inline(always)]
pub fn python_str_head_offset(state: u8, ascii_data: u32, compact_data: u32) -> u32 {
    let compact = u32::from((state >> 5) & 1);
    let ascii = u32::from((state >> 6) & 1);
    compact.wrapping_mul(
        ascii
            .wrapping_mul(ascii_data)
            .wrapping_add((1 - ascii).wrapping_mul(compact_data)),
    )
}

/// Bytes of a str's characters mixed into [`python_code_ident`]: its length
/// (code points) times its kind (bytes per code point: 1, 2 or 4), for a
/// compact str; 0 for a legacy str (characters elsewhere) or another kind.
/// Branch-free, as [`python_str_head_offset`].
#[inline(always)]
pub fn python_str_bytes(state: u8, length: u64) -> u64 {
    // Kind (3 bits) and compact bit, as the index of a table of 4-bit
    // entries: the kind where compact and kind 1, 2 or 4, else 0. (A
    // table, as the compiler turns arithmetic on a 0-or-1 back into a
    // branch.)
    const BYTES_PER_CODE_POINT: u64 = (1 << 36) | (2 << 40) | (4 << 48);
    let index = u64::from((state >> 2) & 15);
    length.wrapping_mul((BYTES_PER_CODE_POINT >> (index * 4)) & 7)
}

/// Most bytes of a file name's characters mixed into
/// [`PythonFrame::ident`] from its start (a path of 64 bytes, or 16
/// characters outside the BMP); its last 8 bytes are mixed too. Each word
/// is verifier work in every frame step of the sample program: with 256
/// bytes, Linux 6.1's verifier passed its million instructions on it.
pub const PYTHON_IDENT_HEAD: usize = 64;

/// [`PythonFrame::ident`]: the code object's `co_qualname` pointer, its
/// `co_filename` pointer, and that str's length, `state` byte (kind bits
/// only: the interned bits may change), first [`PYTHON_IDENT_HEAD`] bytes
/// of characters (zero past its end) and last 8 (0 if it has fewer), mixed
/// (FxHash's step). Computed the same way by the sample program at sample
/// time and by userspace when it reads the code object, so that a code
/// object read later than it was sampled is named only if it is the one
/// the sample saw, and a cached name is used only for that one. Two file
/// names at one address that differ only past their first 64 bytes and
/// before their last 8, with the same length, are not told apart.
#[inline(always)]
pub fn python_code_ident(
    qualname: u64,
    filename: u64,
    length: u64,
    state: u8,
    head: &[u64; PYTHON_IDENT_HEAD / 8],
    tail: u64,
) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let kind = u64::from(state & (0x1c | PYTHON_STR_COMPACT | PYTHON_STR_ASCII));
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut h = mix(mix(mix(mix(0, qualname), filename), length), kind);
    for w in head {
        h = mix(h, *w);
    }
    mix(h, tail)
}

/// [`PythonProcess::flags`]: the thread's innermost frame is
/// `tstate->cframe->current_frame` (3.11, 3.12); without it
/// `tstate->current_frame` (3.13; 3.10's `tstate->frame`), at
/// `tstate_cframe`.
pub const PYTHON_VIA_CFRAME: u32 = 1;
/// Each C-level evaluator call pushes a shim frame (owner
/// [`PYTHON_OWNED_BY_CSTACK`], 3.12+): it is skipped, and the frame before
/// it is the entry frame. Without it the entry frame has the `is_entry`
/// byte (3.11).
pub const PYTHON_ENTRY_BY_SHIM: u32 = 2;
/// The frame's executable is checked to be a code object (3.13's
/// `f_executable`).
pub const PYTHON_CHECK_CODE: u32 = 4;
/// 3.10: the thread state has no native id; the u64 at `tstate_native_id`
/// is its `thread_id` (`pthread_self()`, the address of glibc's `struct
/// pthread`), and the thread's id is the u32 at `pthread_tid` in it.
pub const PYTHON_TID_VIA_PTHREAD: u32 = 8;
/// 3.10: frames are `PyFrameObject`s, each run by its own C-level
/// evaluator call (so each is an entry frame), and the instruction at
/// `frame_prev_instr` is `f_lasti`, an int of code units (-1: not started).
pub const PYTHON_FRAME_OBJECTS: u32 = 16;
/// `FRAME_OWNED_BY_CSTACK` (3.12, 3.13's `pycore_frame.h`).
pub const PYTHON_OWNED_BY_CSTACK: u8 = 3;

/// Bits of the `PYTHON_WALKS` global the loader sets: the sample program
/// reads Python stacks (`--python-sampling` with `-s`), and the switch
/// program does at waits (with `--cpuctxsw` too). Off, the verifier sees a
/// constant and never walks that code: Linux 6.1's verifier passes its
/// million instructions on the switch program with the walk in it.
pub const PYTHON_WALK_SAMPLES: u32 = 1;
pub const PYTHON_WALK_WAITS: u32 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch-free str arithmetic gives what the plain reading of the
    /// str's state gives, for every state byte.
    #[test]
    fn str_offsets_and_sizes_follow_the_state_byte() {
        for state in 0..=u8::MAX {
            let compact = state & PYTHON_STR_COMPACT != 0;
            let ascii = state & PYTHON_STR_ASCII != 0;
            let want_at = match (compact, ascii) {
                (false, _) => 0,
                (true, true) => 40,
                (true, false) => 56,
            };
            assert_eq!(python_str_head_offset(state, 40, 56), want_at, "{state:#x}");
            let kind = u64::from((state >> 2) & 7);
            for length in [0u64, 1, 7, 8, 63, 64, 65, 4096, u32::MAX.into()] {
                let want = match kind {
                    1 | 2 | 4 if compact => length * kind,
                    _ => 0,
                };
                assert_eq!(python_str_bytes(state, length), want, "{state:#x} {length}");
            }
        }
    }
}
