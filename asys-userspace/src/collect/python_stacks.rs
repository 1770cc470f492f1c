//! Python stacks of samples (`--python-sampling`): the first sample of each
//! process tells whether it is a CPython asys can read (3.11-3.13), and if so
//! the sample program is told where its frames are; the frames it sends
//! are named here while the process lives (code objects read with
//! `process_vm_readv`, once per process and address) and recorded as
//! `python_frames` rows.
use std::collections::{HashMap, HashSet};

use asys_common::PythonStackEvent;

use crate::{
    kernel::Tracer,
    python_code::{CodeInfo, CodeLayout, PythonError},
    record::recorder::Recorder,
    report::{ReportError, rows::PythonFrameRow},
};

#[derive(Default)]
pub struct PythonStacks {
    /// Processes looked at (since their last exec).
    seen: HashSet<u32>,
    /// The code layout of each process whose frames are read.
    layouts: HashMap<u32, CodeLayout>,
    /// Code objects read, per (pid, address, `co_qualname` pointer,
    /// `co_firstlineno`): the address alone may be a freed code object's
    /// reused by another. None: unreadable.
    codes: HashMap<(u32, u64, u64, u32), Option<CodeInfo>>,
    /// Whether another CPython version was warned of.
    warned: bool,
}

impl PythonStacks {
    /// A sample of `pid` arrived: the first one of the process decides
    /// whether its Python frames are read.
    pub fn sampled(&mut self, pid: u32, tracer: &mut Tracer) {
        let Some(min_interval_ns) = tracer.python_stacks() else {
            return;
        };
        if !self.seen.insert(pid) {
            return;
        }
        match crate::python_threads::sampling_entry(pid, min_interval_ns) {
            Ok((process, code)) => match tracer.read_python(pid, process) {
                Ok(()) => {
                    self.layouts.insert(pid, code);
                }
                Err(e) => eprintln!("asys: warning: --python-sampling: process {pid}: {e}"),
            },
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
            tracer.forget_python(pid);
            self.layouts.remove(&pid);
            self.codes.retain(|(p, ..), _| *p != pid);
        }
    }

    /// The process exited: its code objects are gone with it.
    pub fn exited(&mut self, pid: u32) {
        self.seen.remove(&pid);
        self.layouts.remove(&pid);
        self.codes.retain(|(p, ..), _| *p != pid);
    }

    /// Rows for the frames of one sample, innermost (depth 0) first.
    pub fn record(&mut self, ev: &PythonStackEvent, rec: &mut Recorder) -> Result<(), ReportError> {
        let pid = ev.header.pid;
        let Some(layout) = self.layouts.get(&pid).copied() else {
            return Ok(());
        };
        let depth = (ev.depth as usize).min(ev.frames.len());
        // Code 0: a frame whose executable was not a code object (3.13).
        let frames = ev.frames[..depth].iter().filter(|f| f.code != 0);
        for (d, f) in frames.enumerate() {
            let code = self
                .codes
                .entry((pid, f.code, f.qualname, f.first_line))
                .or_insert_with(|| read_same_code(pid, f, &layout));
            let (function_id, file_id, line) = match code {
                Some(c) => {
                    let start = f.code.wrapping_add(layout.co_code_adaptive);
                    let line = (f.prev_instr >= start)
                        .then(|| ((f.prev_instr - start) / 2) as u32)
                        .and_then(|off| c.line_at(off));
                    (
                        Some(rec.strings.intern(&c.qualname)),
                        Some(rec.strings.intern(&c.filename)),
                        line,
                    )
                }
                None => (None, None, None),
            };
            rec.python_frame(PythonFrameRow {
                ts: ev.owner_ts as i64,
                pid,
                tid: ev.header.tid,
                depth: d as u32,
                code: f.code,
                function_id,
                file_id,
                line,
                is_entry: f.is_entry != 0,
            })?;
        }
        Ok(())
    }
}

/// The code object of frame `f`, if the one at its address now is the one
/// the sample saw: read a batch later, a code object freed since (code run
/// once at start-up: `exec`, a `.pth` line) may have had its memory taken
/// by another, which must not lend it its name.
fn read_same_code(pid: u32, f: &asys_common::PythonFrame, layout: &CodeLayout) -> Option<CodeInfo> {
    let info = crate::python_code::read_code(pid, f.code, layout).ok()?;
    let qualname = crate::python_code::read_u64(pid, f.code.wrapping_add(layout.co_qualname))?;
    (qualname == f.qualname && info.first_line == f.first_line).then_some(info)
}
