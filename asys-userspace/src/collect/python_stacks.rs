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
    /// Code objects read, per (pid, address, `co_qualname` pointer,
    /// `co_firstlineno`): the address alone may be a freed code object's
    /// reused by another. None: unreadable.
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
        let key = (pid, f.code, f.qualname, f.first_line);
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
                    "asys: warning: --python-sampling: process {pid}: names of code objects over {} bytes are cut (counted in drops as {})",
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
/// by another, which must not lend it its name.
fn read_same_code(pid: u32, f: &asys_common::PythonFrame, layout: &CodeLayout) -> Option<CodeInfo> {
    let info = crate::collect::python_code::read_code(pid, f.code, layout).ok()?;
    let qualname =
        crate::collect::python_code::read_u64(pid, f.code.wrapping_add(layout.co_qualname))?;
    (qualname == f.qualname && info.first_line == f.first_line).then_some(info)
}
