//! When asys reads the Python names of a process's threads
//! (`--python-sampling`), and the `python_thread_names` rows it records.
//!
//! A process's names are read (`python_thread_names`) when one of its
//! threads has its first Python stack, and again at most every
//! [`REREAD_NS`] of sample time while its threads are sampled (a thread may
//! be named, or renamed, after it started), or every [`NEW_THREAD_NS`]
//! while a thread is sampled that no read has looked for yet (one started
//! since). A read costs a few dozen
//! `process_vm_readv`s per thread; a sample costs a hash lookup. A row is
//! recorded for each (thread, name) when first seen. Reads that fail, and
//! threads whose name cannot be read, are counted
//! (`python_thread_names_unread`); names past the budget are refused and
//! counted as the code objects' are.
use std::collections::{HashMap, HashSet};

use asys_report::{
    report::{ReportError, rows::PythonThreadNameRow},
    text_safety::escaped_name,
    untrusted::budget::{Budget, PythonCode},
};

use crate::{
    collect::python_thread_names::Reader, process::remote_memory::Process, sink::recorder::Recorder,
};

/// A process's names are read again at most this often while it is
/// sampled (sample time, ns).
pub const REREAD_NS: i64 = 1_000_000_000;

/// ... and this often while a thread is sampled that no read looked for.
pub const NEW_THREAD_NS: i64 = 100_000_000;

#[derive(Default)]
pub struct PythonThreadNaming {
    processes: HashMap<u32, Names>,
    /// Reads that failed and threads whose names could not be read.
    unread: u64,
    /// Processes warned about for a failed read or an unreadable name
    /// (once each).
    warned: HashSet<u32>,
    /// What the names recorded may cost (the process chooses how many
    /// threads and names, and how long).
    budget: Budget<PythonCode>,
}

/// What is known of one process's names.
struct Names {
    /// None: not a CPython asys reads (never read again until an exec).
    reader: Option<Reader>,
    /// The sample time of the last read.
    read_at: Option<i64>,
    /// Each thread's name as last recorded.
    names: HashMap<u32, String>,
    /// Threads sampled by the last read, named or not (a thread that no
    /// read names, one not started by `threading` or in a process that
    /// does not import it, is looked for again only at [`REREAD_NS`]).
    looked_for: HashSet<u32>,
    /// Threads counted once as unreadable.
    unreadable: HashSet<u32>,
}

impl PythonThreadNaming {
    /// Thread `tid` of `pid` has a Python stack sampled at `ts`: reads the
    /// process's names if it is time, and records those new.
    pub fn sampled(
        &mut self,
        pid: u32,
        tid: u32,
        ts: i64,
        rec: &mut Recorder,
    ) -> Result<(), ReportError> {
        let p = self.processes.entry(pid).or_insert_with(|| Names {
            // Not readable: python_stacks has said so where it matters
            // (an unsupported version); a process that is not CPython has
            // no Python stacks.
            reader: Reader::of_process(pid).ok(),
            read_at: None,
            names: HashMap::new(),
            looked_for: HashSet::new(),
            unreadable: HashSet::new(),
        });
        let Some(reader) = &mut p.reader else {
            return Ok(());
        };
        let due = match p.read_at {
            None => true,
            Some(at) if p.looked_for.contains(&tid) => ts.saturating_sub(at) >= REREAD_NS,
            Some(at) => ts.saturating_sub(at) >= NEW_THREAD_NS,
        };
        if !due {
            return Ok(());
        }
        p.read_at = Some(ts);
        p.looked_for.insert(tid);
        let threads = match reader.threads(&Process(pid)) {
            Ok(t) => t,
            // A re-read for a thread whose name is known (the process
            // may have ended while its last samples were on their way):
            // the name read before stands, and nothing is lost.
            Err(_) if p.names.contains_key(&tid) => return Ok(()),
            Err(e) => {
                self.unread += 1;
                if self.warned.insert(pid) {
                    eprintln!(
                        "asys: warning: --python-sampling: process {pid}: thread names not read: {e} (counted in drops as {})",
                        asys_report::report::metadata::PYTHON_THREAD_NAMES_UNREAD
                    );
                }
                return Ok(());
            }
        };
        for t in threads {
            let Some(name) = t.name else {
                if p.unreadable.insert(t.tid) {
                    self.unread += 1;
                    if self.warned.insert(pid) {
                        eprintln!(
                            "asys: warning: --python-sampling: process {pid}: the name of thread {} not read (counted in drops as {})",
                            t.tid,
                            asys_report::report::metadata::PYTHON_THREAD_NAMES_UNREAD
                        );
                    }
                }
                continue;
            };
            if p.names.get(&t.tid) == Some(&name) {
                continue;
            }
            let before = rec.strings.bytes();
            let name_id = rec.strings.intern(&escaped_name(&name));
            // Held twice (the string table's map and its list), and the
            // name kept here.
            let cost = 2 * (rec.strings.bytes() - before) + name.len() as u64;
            // Past the budget: refused and counted (by `take`).
            if !self.budget.take(pid, cost) {
                continue;
            }
            rec.python_thread_name(PythonThreadNameRow {
                ts,
                pid,
                tid: t.tid,
                name_id,
            })?;
            p.names.insert(t.tid, name);
        }
        Ok(())
    }

    /// The process exited or exec'd: its threads and layout are gone (the
    /// names it recorded stay in the report, and in its budget).
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }

    /// Reads that failed and threads whose names could not be read.
    pub fn unread(&self) -> u64 {
        self.unread
    }

    /// Names left out past the budget.
    pub fn refused(&self) -> u64 {
        self.budget.refused()
    }
}
