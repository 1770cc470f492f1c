//! Python stacks of samples (`--python-sampling`): the first sample of each
//! process tells whether it is a CPython asys can read (3.10-3.13), and if so
//! the sample program is told where its frames are; the frames it sends
//! are named here while the process lives (code objects read with
//! `process_vm_readv`, once per process and address) and recorded as
//! `python_frames` rows, their names escaped as
//! [`asys_report::text_safety::escaped_name`] says.
use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
};

use asys_common::PythonStackEvent;

use crate::{
    collect::python_code::{CodeInfo, CodeLayout, PythonError},
    kernel::Tracer,
    sink::recorder::Recorder,
};
use asys_report::{
    report::{ReportError, rows::PythonFrameRow},
    text_safety::escaped_name,
    untrusted::budget::{Budget, PythonCode},
};

/// What a Python stack was taken at, and so the table its rows go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PythonStackOf {
    /// A CPU sample: `python_frames`.
    Sample,
    /// A switch-out to wait: `python_switch_frames`.
    Wait,
}

#[derive(Default)]
pub struct PythonStacks {
    /// Processes looked at (since their last exec).
    seen: HashSet<u32>,
    /// The code layout of each process whose frames are read.
    layouts: HashMap<u32, CodeLayout>,
    /// Code objects read, per (pid, address, identity word, `co_firstlineno`)
    /// ([`asys_common::PythonFrame::ident`]): the address alone may be a
    /// freed code object's reused by another, and every `<module>` has the
    /// same name and first line. None: unreadable.
    codes: HashMap<(u32, u64, u64, u32), Option<Rc<CodeInfo>>>,
    /// What [`Self::codes`] holds and the names it recorded may cost, per
    /// process and in all: the process decides how many code objects and
    /// how long their names are. The cache is evicted to fit; names past it
    /// are not recorded (their frames stay unnamed, and are counted).
    cache_budget: Budget<PythonCode>,
    names_budget: Budget<PythonCode>,
    /// Code objects read whose name or file name was cut at
    /// [`crate::collect::python_code::MAX_NAME_BYTES`].
    names_cut: u64,
    /// Processes warned about for cut names.
    cut_warned: HashSet<u32>,
    /// Whether another CPython version was warned of.
    warned: bool,
}

/// What a cached code object costs beyond its bytes: the entry, its key
/// and the map's share.
const ENTRY_COST: u64 = 128;

fn cost(code: Option<&CodeInfo>) -> u64 {
    ENTRY_COST
        + code.map_or(0, |c| {
            (c.name.len() + c.qualname.len() + c.filename.len() + c.linetable.len()) as u64
        })
}

impl PythonStacks {
    /// A sample of `pid` arrived: the first one of the process decides
    /// whether its Python frames are read.
    pub fn sampled(&mut self, pid: u32, tracer: &mut Tracer) {
        let Some(min_interval_ns) = tracer.processes.python_stacks() else {
            return;
        };
        if !self.seen.insert(pid) {
            return;
        }
        match crate::collect::python_threads::sampling_entry(pid, min_interval_ns) {
            Ok((mut process, code)) => {
                process.wait_interval_us = tracer.processes.python_wait_interval_us();
                match tracer.processes.read_python(pid, process) {
                    Ok(()) => {
                        self.layouts.insert(pid, code);
                    }
                    Err(e) => eprintln!("asys: warning: --python-sampling: process {pid}: {e}"),
                }
            }
            Err(e @ PythonError::Unsupported(_)) if !self.warned => {
                self.warned = true;
                eprintln!("asys: warning: --python-sampling: process {pid}: {e}; no Python stacks");
            }
            // Not a Python process (or gone): nothing to read.
            Err(_) => {}
        }
    }

    /// `pid` mapped libraries: if it was not readable (a libpython not
    /// mapped yet at its first sample), its next sample looks again.
    pub fn loaded(&mut self, pid: u32) {
        if !self.layouts.contains_key(&pid) {
            self.seen.remove(&pid);
        }
    }

    /// `pid` exec'd another image: its next sample looks again.
    pub fn exec(&mut self, pid: u32, tracer: &mut Tracer) {
        if self.seen.remove(&pid) {
            tracer.processes.forget_python(pid);
            self.layouts.remove(&pid);
            self.codes.retain(|(p, ..), _| *p != pid);
            self.cache_budget.forget(pid);
        }
    }

    /// The process exited: its code objects are gone with it.
    pub fn exited(&mut self, pid: u32) {
        self.seen.remove(&pid);
        self.layouts.remove(&pid);
        self.codes.retain(|(p, ..), _| *p != pid);
        self.cache_budget.forget(pid);
    }

    /// Frames left unnamed because their process's names passed the budget.
    pub fn refused(&self) -> u64 {
        self.names_budget.refused()
    }

    /// Code objects read whose names were cut.
    pub fn names_cut(&self) -> u64 {
        self.names_cut
    }

    /// The code object of frame `f` of `pid`: cached, or read and cached,
    /// evicting to stay within the cache's budget (one larger than all of
    /// it is used for this frame and not kept).
    fn code(
        &mut self,
        pid: u32,
        f: &asys_common::PythonFrame,
        layout: &CodeLayout,
    ) -> Option<Rc<CodeInfo>> {
        let key = (pid, f.code, f.ident, f.first_line);
        if let Some(c) = self.codes.get(&key) {
            return c.clone();
        }
        let read = read_same_code(pid, f, layout).map(Rc::new);
        if read.as_ref().is_some_and(|c| {
            [&c.name, &c.qualname, &c.filename]
                .iter()
                .any(|n| n.ends_with(crate::collect::python_code::CUT_MARK))
        }) {
            self.names_cut += 1;
            if self.cut_warned.insert(pid) {
                eprintln!(
                    "asys: warning: --python-sampling: process {pid}: names of code objects over {} characters are cut (counted in drops as {})",
                    crate::collect::python_code::MAX_NAME_BYTES,
                    asys_report::report::metadata::PYTHON_NAMES_CUT
                );
            }
        }
        let need = cost(read.as_deref());
        self.make_room(pid, need);
        if self.cache_budget.fits(pid, need) {
            self.cache_budget.take(pid, need);
            self.codes.insert(key, read.clone());
        }
        read
    }

    /// Evicts cached code objects until `need` more bytes of `pid`'s fit:
    /// its own first, then (when the total is what is short) anyone's.
    fn make_room(&mut self, pid: u32, need: u64) {
        for own_only in [true, false] {
            if self.cache_budget.fits(pid, need) {
                return;
            }
            let budget = &mut self.cache_budget;
            self.codes.retain(|(p, ..), c| {
                if (own_only && *p != pid) || budget.fits(pid, need) {
                    return true;
                }
                budget.give_back(*p, cost(c.as_deref()));
                false
            });
        }
    }

    /// Rows for the frames of one sample or wait (`of`), innermost (depth
    /// 0) first, named through the same code-object cache.
    pub fn record(
        &mut self,
        ev: &PythonStackEvent,
        of: PythonStackOf,
        rec: &mut Recorder,
    ) -> Result<(), ReportError> {
        let pid = ev.header.pid;
        let Some(layout) = self.layouts.get(&pid).copied() else {
            return Ok(());
        };
        let depth = (ev.depth as usize).min(ev.frames.len());
        // Code 0: a frame whose executable was not a code object (3.13).
        let frames = ev.frames[..depth].iter().filter(|f| f.code != 0);
        for (d, f) in frames.enumerate() {
            let code = self.code(pid, f, &layout);
            let (function_id, file_id, line) = match code {
                Some(c) if self.names_budget.room(pid) > 0 => {
                    let line = layout.line(&c, f.code, f.prev_instr);
                    // Names new to the report cost the process's budget.
                    // They are the process's to choose (a class body named
                    // "\0" exists: gzip.py's under PyTorch): recorded with
                    // controls and what XML refuses escaped visibly, so no
                    // report, export or flame graph holds a NUL.
                    let before = rec.strings.bytes();
                    let ids = (
                        Some(rec.strings.intern(&escaped_name(&c.qualname))),
                        Some(rec.strings.intern(&escaped_name(&c.filename))),
                        line,
                    );
                    // Held twice (the table's map and its list).
                    let _ = self
                        .names_budget
                        .take(pid, 2 * (rec.strings.bytes() - before));
                    ids
                }
                Some(_) => {
                    self.names_budget.refuse(pid, 1);
                    (None, None, None)
                }
                None => (None, None, None),
            };
            let row = PythonFrameRow {
                ts: ev.owner_ts as i64,
                pid,
                tid: ev.header.tid,
                depth: d as u32,
                code: f.code,
                function_id,
                file_id,
                line,
                is_entry: f.is_entry != 0,
            };
            match of {
                PythonStackOf::Sample => rec.python_frame(row)?,
                PythonStackOf::Wait => rec.python_switch_frame(row)?,
            }
        }
        Ok(())
    }
}

/// The code object of frame `f`, if the one at its address now is the one
/// the sample saw: read a batch later, a code object freed since (code run
/// once at start-up: `exec`, a `.pth` line) may have had its memory taken
/// by another, which must not lend it its name. The identity word is read
/// after the object, so a change while it was read shows too.
fn read_same_code(pid: u32, f: &asys_common::PythonFrame, layout: &CodeLayout) -> Option<CodeInfo> {
    let info = crate::collect::python_code::read_code(pid, f.code, layout).ok()?;
    let ident = crate::collect::python_code::code_ident_in(
        &crate::process::remote_memory::Process(pid),
        f.code,
        layout,
    )?;
    (ident == f.ident && info.first_line == f.first_line).then_some(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::python_code::{PyVersion, code_ident_in, layout};
    use crate::process::remote_memory::Process;

    /// Writes `bytes` at byte `at` of an 8-aligned buffer.
    fn put(buf: &mut [u64], at: u64, bytes: &[u8]) {
        let len = buf.len() * 8;
        let ptr = buf.as_mut_ptr().cast::<u8>();
        // SAFETY: a u64 buffer viewed as its bytes; any byte pattern is a
        // valid u64.
        let b = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        b[at as usize..][..bytes.len()].copy_from_slice(bytes);
    }

    /// `text` as CPython stores a str: compact, in the narrowest kind
    /// that holds it (ASCII, Latin-1, UCS-2, UCS-4), in `buf`.
    fn write_str(buf: &mut [u64], l: &CodeLayout, text: &str) {
        buf.fill(0);
        let widest = text.chars().map(u32::from).max().unwrap_or(0);
        let (kind, ascii): (u8, bool) = match widest {
            0..=0x7f => (1, true),
            0x80..=0xff => (1, false),
            0x100..=0xffff => (2, false),
            _ => (4, false),
        };
        let n = text.chars().count() as u64;
        put(buf, 16, &n.to_le_bytes());
        let state = (kind << 2) | 0x20 | if ascii { 0x40 } else { 0 };
        put(buf, 32, &[state]);
        let data: Vec<u8> = text
            .chars()
            .flat_map(|c| u32::from(c).to_le_bytes()[..kind as usize].to_vec())
            .collect();
        put(
            buf,
            if ascii { l.ascii_data } else { l.compact_data },
            &data,
        );
    }

    /// Code objects made and freed at one address, with file names that
    /// differ only in their characters (same length, same string address,
    /// same qualified name and first line): each is named with its own
    /// file, from the cache or read, and a frame sampled before its object
    /// was replaced is never named with the replacement's file.
    #[test]
    fn code_objects_at_one_address_differing_only_in_file_keep_their_own_names() {
        let pid = std::process::id();
        let alphabet = ['a', 'z', '<', '>', 'é', 'ж', 'ф', '💩', '_', '.'];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for version in [0x030a0cf0, 0x030b02f0, 0x030c03f0, 0x030d05f0] {
            let l = layout(PyVersion(version)).unwrap();
            let mut qualname = vec![0u64; 64];
            write_str(&mut qualname, &l, "<module>");
            let mut table = vec![0u64; 8];
            put(&mut table, 16, &0u64.to_le_bytes());
            let mut filename = vec![0u64; 96];
            let mut code = vec![0u64; 64];
            let addr = code.as_ptr() as u64;
            let ptr = |v: &Vec<u64>| (v.as_ptr() as u64).to_le_bytes();
            put(&mut code, l.co_name, &ptr(&qualname));
            put(&mut code, l.co_qualname, &ptr(&qualname));
            put(&mut code, l.co_filename, &ptr(&filename));
            put(&mut code, l.co_linetable, &ptr(&table));
            put(&mut code, l.co_firstlineno, &1u32.to_le_bytes());
            let mut cached = PythonStacks::default();
            for _ in 0..200 {
                // Half of them paths under one long directory (past the
                // identity word's first 64 bytes), whose names differ in
                // their last 8 bytes (2 characters of any kind); the others
                // within their first 64 bytes (12 characters).
                let long_dir = next() % 2 == 0;
                let len = 1 + next() as usize % if long_dir { 2 } else { 12 };
                let name = |r: &mut dyn FnMut() -> u64| -> String {
                    (0..len)
                        .map(|_| alphabet[r() as usize % alphabet.len()])
                        .collect()
                };
                let dir = match long_dir {
                    true => "/srv/app/templates/generated/by/the/engine/for/each/request/",
                    false => "",
                };
                let (a, b) = (
                    format!("{dir}{}", name(&mut next)),
                    format!("{dir}{}", name(&mut next)),
                );
                if a == b {
                    continue;
                }
                // What the sample program sends for the object there now.
                let frame = || asys_common::PythonFrame {
                    code: addr,
                    prev_instr: 0,
                    ident: code_ident_in(&Process(pid), addr, &l).unwrap(),
                    first_line: 1,
                    is_entry: 1,
                };
                write_str(&mut filename, &l, &a);
                let fa = frame();
                let got = cached.code(pid, &fa, &l).expect("readable");
                assert_eq!(
                    (got.qualname.as_str(), got.filename.as_str()),
                    ("<module>", &*a)
                );
                write_str(&mut filename, &l, &b);
                let fb = frame();
                assert_ne!(fa.ident, fb.ident, "{a:?} and {b:?}");
                let got = cached.code(pid, &fb, &l).expect("readable");
                assert_eq!(got.filename, b, "after {a:?}, {version:#x}");
                // Read only now, after its object was replaced: unnamed,
                // not named with the replacement's file.
                let mut late = PythonStacks::default();
                assert!(late.code(pid, &fa, &l).is_none(), "{a:?} read as {b:?}");
            }
        }
    }
}
