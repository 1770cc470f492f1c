//! What the parser targets share: an address space made of the fuzzer's
//! bytes (read by the very decoders asys runs over a live process), the
//! well-formed CPython structures a seed can ask for, and the check that a
//! parser keeps no more than a fixed multiple of what it was given.
use crate::{
    python_code::{CodeLayout, PyVersion, layout},
    python_threads::{CurrentFrame, EntryMark, StackLayout, stack_layout},
    remote_memory::RemoteMemory,
};

/// Most bytes one read of another process's memory may ask for. The
/// process reader allocates what it is asked for before the kernel says
/// whether the memory is there, so a length taken from that memory must be
/// bounded by the decoder: a read past this is a finding (the largest the
/// decoders ask for is a 1 MiB string or line table, or the 128 KiB NVTX
/// table).
pub const MAX_READ: usize = 2 << 20;

/// A made-up address space: regions (start, bytes); a later region hides
/// an earlier one where they overlap.
#[derive(Debug, Default, Clone)]
pub struct FakeMemory {
    pub regions: Vec<(u64, Vec<u8>)>,
}

impl RemoteMemory for FakeMemory {
    fn pid(&self) -> u32 {
        0
    }

    fn read(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        assert!(
            len <= MAX_READ,
            "a read of {len} bytes at {addr:#x}: a length from the process's memory is unbounded"
        );
        // As process_vm_readv: all or nothing, and nothing past the top.
        let end = addr.checked_add(len as u64)?;
        self.regions.iter().rev().find_map(|(start, bytes)| {
            let from = addr.checked_sub(*start)?;
            (end - start <= bytes.len() as u64)
                .then(|| bytes[from as usize..from as usize + len].to_vec())
        })
    }
}

/// Reads a fuzz input front to back; past its end, zeros.
pub struct Cursor<'a> {
    pub data: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }

    pub fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    pub fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | u16::from(self.u8()) << 8
    }

    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        let got = self.bytes(8);
        b[..got.len()].copy_from_slice(got);
        u64::from_le_bytes(b)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Regions as `[start u64][len u16][bytes]`, to the end of the input.
pub fn raw_regions(c: &mut Cursor) -> FakeMemory {
    let mut m = FakeMemory::default();
    while !c.is_empty() {
        let start = c.u64();
        let len = c.u16() as usize;
        m.regions.push((start, c.bytes(len).to_vec()));
    }
    m
}

/// The CPython versions asys reads (the python target's first byte picks
/// one).
pub const PYTHON_VERSIONS: [PyVersion; 4] = [
    PyVersion(0x030b_07f0),
    PyVersion(0x030c_03f0),
    PyVersion(0x030d_05f0),
    PyVersion(0x030a_0cf0),
];

/// Where the built interpreter's parts are (any addresses would do; these
/// are apart, so that a patch of one leaves the others whole).
pub const RUNTIME: u64 = 0x1000_0000;
const INTERP: u64 = 0x1100_0000;
const TSTATE: u64 = 0x1200_0000;
const CFRAME: u64 = 0x1300_0000;
const FRAMES: u64 = 0x1400_0000;
const FRAME_STRIDE: u64 = 0x100;
pub const CODE: u64 = 0x1500_0000;
const STRINGS: u64 = 0x1600_0000;
const LINETABLE: u64 = 0x1700_0000;
/// 3.10's glibc `struct pthread` of the thread (its `tid`).
const PTHREAD: u64 = 0x1800_0000;
/// `PyCode_Type`, for 3.13's check that a frame runs a code object.
pub const CODE_TYPE: u64 = 0x5000_0000;

/// A well-formed interpreter with one thread, as its layouts lay it out,
/// from parameters read off the input: frames (0-5), the three names
/// (length, state byte xor 0x60 so that 0 is a compact ASCII string, text),
/// the first line, the line table; then patches `[region][offset u16]
/// [len][bytes]` that damage it anywhere. The seeds are these, so they do
/// not depend on the offsets, and mutation starts from structures that
/// reach every decoder.
pub fn built_interpreter(v: PyVersion, c: &mut Cursor) -> FakeMemory {
    let code = layout(v).expect("a supported version");
    let stack = stack_layout(v).expect("a supported version");
    let frames = (c.u8() % 6) as u64;
    let mut regions: Vec<(u64, Vec<u8>)> = vec![
        (RUNTIME, vec![0; 8192]),
        (INTERP, vec![0; 8192]),
        (TSTATE, vec![0; 512]),
        (CFRAME, vec![0; 64]),
        // One more frame than asked: 3.12+'s shim.
        (FRAMES, vec![0; ((frames + 1) * FRAME_STRIDE) as usize]),
        (CODE, vec![0; 512]),
    ];
    let put = |r: &mut [u8], at: u64, v: u64| {
        r[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes())
    };
    put(&mut regions[0].1, stack.runtime_interpreters_head, INTERP);
    put(&mut regions[1].1, stack.interp_threads_head, TSTATE);
    match stack.pthread_tid {
        // 3.10: thread_id is the thread's struct pthread, which has the id.
        Some(_) => put(&mut regions[2].1, stack.tstate_native_id, PTHREAD),
        None => put(&mut regions[2].1, stack.tstate_native_id, 4242),
    }
    let first_frame = if frames == 0 { 0 } else { FRAMES };
    match stack.current_frame {
        CurrentFrame::ViaCFrame {
            tstate_cframe,
            cframe_current_frame,
        } => {
            put(&mut regions[2].1, tstate_cframe, CFRAME);
            put(&mut regions[3].1, cframe_current_frame, first_frame);
        }
        CurrentFrame::InThread {
            tstate_current_frame,
        } => put(&mut regions[2].1, tstate_current_frame, first_frame),
    }
    for i in 0..frames {
        let f = &mut regions[4].1[(i * FRAME_STRIDE) as usize..];
        let last = i + 1 == frames;
        let next = FRAMES + (i + 1) * FRAME_STRIDE;
        let shim = matches!(stack.entry, EntryMark::ShimOwner { .. });
        put(
            f,
            stack.frame_previous,
            if last && !shim { 0 } else { next },
        );
        put(f, stack.frame_code, CODE);
        put(
            f,
            stack.frame_prev_instr,
            match stack.frame_lasti {
                // 3.10: f_lasti, code units.
                true => i,
                false => CODE + code.co_code_adaptive + 2 * i,
            },
        );
        match stack.entry {
            EntryMark::IsEntryByte { frame_is_entry } => {
                f[frame_is_entry as usize] = u8::from(last)
            }
            EntryMark::ShimOwner { frame_owner } if last => {
                // The shim after the last frame, then no more.
                let s = &mut regions[4].1[(next - FRAMES) as usize..];
                s[frame_owner as usize] = asys_common::PYTHON_OWNED_BY_CSTACK;
                put(s, stack.frame_code, CODE);
            }
            EntryMark::ShimOwner { .. } | EntryMark::EveryFrame => {}
        }
    }
    put(&mut regions[5].1, 8, CODE_TYPE);
    for (i, field) in [code.co_name, code.co_qualname, code.co_filename]
        .into_iter()
        .enumerate()
    {
        let addr = STRINGS + ((i as u64) << 16);
        put(&mut regions[5].1, field, addr);
        let len = c.u8() as usize;
        let state = c.u8() ^ 0x60;
        let mut s = vec![0u8; code.ascii_data as usize + len];
        put(&mut s, 16, len as u64);
        s[32] = state;
        let text = c.bytes(len);
        s[code.ascii_data as usize..][..text.len()].copy_from_slice(text);
        regions.push((addr, s));
    }
    let first_line = u64::from(c.u16());
    let co = &mut regions[5].1;
    co[code.co_firstlineno as usize..][..4].copy_from_slice(&(first_line as u32).to_le_bytes());
    put(co, code.co_linetable, LINETABLE);
    let len = c.u8() as usize;
    let mut table = vec![0u8; code.bytes_data as usize + len];
    put(&mut table, 16, len as u64);
    let text = c.bytes(len);
    table[code.bytes_data as usize..][..text.len()].copy_from_slice(text);
    regions.push((LINETABLE, table));
    if let Some(tid) = stack.pthread_tid {
        let mut pthread = vec![0u8; tid as usize + 64];
        put(&mut pthread, tid, 4242);
        regions.push((PTHREAD, pthread));
    }
    // Damage: any bytes of any region.
    while !c.is_empty() {
        let n = regions.len();
        let r = &mut regions[c.u8() as usize % n].1;
        let at = c.u16() as usize % r.len();
        let len = c.u8() as usize;
        for (dst, src) in r[at..].iter_mut().zip(c.bytes(len)) {
            *dst = *src;
        }
    }
    FakeMemory { regions }
}

/// What a parser keeps may be at most this many times the bytes it read
/// (plus [`AMPLIFICATION_SLACK`]): enough for the per-item overhead of its
/// results (a 40-byte symbol for a 6-byte perf-map line), far below what a
/// copy per record (a jitdump MOVE copying its name) makes of a file.
pub const AMPLIFICATION: usize = 16;
pub const AMPLIFICATION_SLACK: usize = 4096;

/// Panics when `kept` bytes of results of `input` bytes of input are more
/// than [`AMPLIFICATION`] allows: libFuzzer's RSS limit finds an
/// amplification only in inputs of tens of MB, which it never makes; this
/// finds it in the small ones it does.
pub fn check_amplification(what: &str, input: usize, kept: usize) {
    assert!(
        kept <= AMPLIFICATION * input + AMPLIFICATION_SLACK,
        "{what}: {kept} bytes kept of a {input}-byte input (more than {AMPLIFICATION}x)"
    );
}

/// Panics when the names a parser keeps hold more bytes than its input
/// can make: each name is the input's bytes, decoded lossily (at most 3
/// bytes, U+FFFD, of a byte), so a name kept more than once (a copy per
/// record that refers to it) shows here long before the RSS limit.
pub fn check_names_kept_once(what: &str, input: usize, name_bytes: usize) {
    assert!(
        name_bytes <= 3 * input,
        "{what}: names of {name_bytes} bytes kept of a {input}-byte input: a name is copied"
    );
}

/// The heap bytes of `texts`, each allocation once (names may be shared).
pub fn text_bytes<'a>(texts: impl Iterator<Item = &'a str>) -> usize {
    let mut seen = std::collections::HashSet::new();
    texts
        .filter(|t| seen.insert(t.as_ptr() as usize))
        .map(str::len)
        .sum()
}

/// The code layout of a built interpreter's version (for line numbers).
pub fn code_layout(v: PyVersion) -> CodeLayout {
    layout(v).expect("a supported version")
}

/// The stack layout of a built interpreter's version.
pub fn thread_layout(v: PyVersion) -> StackLayout {
    stack_layout(v).expect("a supported version")
}
