//! The traced processes: what the exports call a process and a thread
//! (the commands the report's `process_events` saw: one place, so that the
//! SQLite `ThreadNames`, the flame graph's outermost frame and the Perfetto
//! tracks agree), and each process's rank in a parallel job (`processes`).
use std::collections::{BTreeMap, HashMap};

use arrow::array::Array;

use crate::report::{
    ReportError,
    container::Container,
    schema::{ProcessKind, process_events as p, processes},
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

/// pid → rank of the processes of `report` with one (none in reports
/// written before the `rank` column existed).
pub fn process_ranks(report: &Container) -> Result<BTreeMap<u32, u32>, ReportError> {
    use processes as p;
    let mut out = BTreeMap::new();
    let t = match p::open(report) {
        Ok(Some(t)) => t,
        // No processes table (an old report), or one an SQLite export does
        // not hold: no process's rank is known, and each stays its pid.
        Ok(None) | Err(ReportError::Unavailable { .. }) => return Ok(out),
        Err(e) => return Err(e),
    };
    if !t.has_column(p::RANK) {
        return Ok(out);
    }
    for b in t.scan(&[p::PID, p::RANK], None)? {
        let b = b?;
        let v = p::View(&b);
        let (pid, rank) = (v.pid()?, v.rank()?);
        for (i, &pid) in pid.iter().enumerate() {
            if rank.is_valid(i) {
                out.insert(pid, rank.value(i));
            }
        }
    }
    Ok(out)
}
