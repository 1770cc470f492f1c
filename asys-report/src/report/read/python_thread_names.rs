//! The Python names of sampled threads (`python_thread_names`,
//! `--python-sampling`): each thread's `threading.Thread.name` as asys read
//! it from the process, with the time each name was first seen. A thread
//! renamed while it ran (`t.name = ...`) has one row per name; a sample
//! takes the name seen last at or before it, and one before the first read
//! takes the first name (it had it then, unless it was renamed in the
//! moment between).
use std::collections::HashMap;

use crate::report::{ReportError, container::Container, schema};

/// The names of each (pid, tid), in the order they were first seen, as
/// (time first seen, string id).
#[derive(Debug, Default, Clone)]
pub struct ThreadNames {
    by_thread: HashMap<(u32, u32), Vec<(i64, u32)>>,
}

impl ThreadNames {
    /// The `python_thread_names` table (empty for a report without one:
    /// recorded without `--python-sampling`, or before asys read names).
    pub fn read(report: &Container) -> Result<Self, ReportError> {
        use schema::python_thread_names as t;
        let mut out = Self::default();
        for b in t::scan(report, &[t::TS, t::PID, t::TID, t::NAME_ID])? {
            let b = b?;
            let v = t::View(&b);
            let (ts, pid, tid, name) = (v.ts()?, v.pid()?, v.tid()?, v.name_id()?);
            for i in 0..b.num_rows() {
                out.insert(pid[i], tid[i], ts[i], name[i]);
            }
        }
        Ok(out)
    }

    /// Adds a name of thread `tid` of `pid`, first seen at `ts`.
    pub fn insert(&mut self, pid: u32, tid: u32, ts: i64, name_id: u32) {
        let names = self.by_thread.entry((pid, tid)).or_default();
        let at = names.partition_point(|&(t, _)| t <= ts);
        names.insert(at, (ts, name_id));
    }

    /// The name (string id) of thread `tid` of `pid` at `ts`.
    pub fn at(&self, pid: u32, tid: u32, ts: i64) -> Option<u32> {
        let names = self.by_thread.get(&(pid, tid))?;
        let at = names.partition_point(|&(t, _)| t <= ts);
        names.get(at.saturating_sub(1)).map(|&(_, n)| n)
    }

    /// The last name thread `tid` of `pid` was seen with.
    pub fn last(&self, pid: u32, tid: u32) -> Option<u32> {
        self.by_thread.get(&(pid, tid))?.last().map(|&(_, n)| n)
    }

    pub fn is_empty(&self) -> bool {
        self.by_thread.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_takes_the_name_seen_last_at_or_before_it() {
        let mut n = ThreadNames::default();
        // Rows need not come in time order.
        n.insert(1, 2, 300, 31);
        n.insert(1, 2, 100, 11);
        assert_eq!(n.at(1, 2, 50), Some(11), "before the first read");
        assert_eq!(n.at(1, 2, 100), Some(11));
        assert_eq!(n.at(1, 2, 299), Some(11));
        assert_eq!(n.at(1, 2, 300), Some(31));
        assert_eq!(n.at(1, 2, i64::MAX), Some(31));
        assert_eq!(n.last(1, 2), Some(31));
        assert_eq!(n.at(1, 3, 100), None, "another thread");
        assert_eq!(n.at(2, 2, 100), None, "another process");
    }
}
