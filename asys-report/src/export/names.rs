//! What the exports call a process and a thread: the commands the report's
//! `process_events` saw. One place, so that the SQLite `ThreadNames`, the
//! flame graph's outermost frame and the Perfetto tracks agree.
use std::collections::HashMap;

use crate::report::{
    ReportError,
    container::Container,
    schema::{ProcessKind, process_events as p},
};

/// Command string ids per process and per thread.
#[derive(Default)]
pub struct Commands {
    /// A thread's own command, where the report saw one (at its exit, say).
    own: HashMap<(u32, u32), u32>,
    /// A process's: the command at exec, or its main thread's.
    process: HashMap<u32, u32>,
}

impl Commands {
    pub fn read(report: &Container) -> Result<Self, ReportError> {
        let mut out = Self::default();
        let cols = [p::KIND, p::PID, p::TID, p::COMM_ID];
        for b in p::scan(report, &cols)? {
            let b = b?;
            let v = p::View(&b);
            let kind = v.kinds()?;
            let (pid, tid, name) = (v.pid()?, v.tid()?, v.comm_id()?);
            for i in 0..b.num_rows() {
                out.own.insert((pid[i], tid[i]), name[i]);
                if kind[i] == Some(ProcessKind::Exec)
                    || (pid[i] == tid[i] && !out.process.contains_key(&pid[i]))
                {
                    out.process.insert(pid[i], name[i]);
                }
            }
        }
        Ok(out)
    }

    /// The process's command (string id), if the report saw one.
    pub fn process(&self, pid: u32) -> Option<u32> {
        self.process.get(&pid).copied()
    }

    /// The thread's own command, else its process's.
    pub fn thread(&self, pid: u32, tid: u32) -> Option<u32> {
        self.own
            .get(&(pid, tid))
            .copied()
            .or_else(|| self.process(pid))
    }
}
