//! Byte budgets for what other users' processes can make asys hold: JIT
//! symbol names, Python code objects, NVTX registration tables. A process
//! decides how much it feeds asys (a 60 MB perf map, thousands of code
//! objects with megabyte names), so each such store gets a cap per process
//! and one for all processes together; what does not fit is refused and
//! counted, never silently, and a warning names the process once.
use std::collections::{BTreeSet, HashMap};

use crate::report::metadata;

/// A store that other users' processes can fill, with its caps.
pub trait Store {
    /// What it holds, for warnings.
    const WHAT: &'static str;
    /// Its `drops` source in the report.
    const DROPS_SOURCE: &'static str;
    const PER_PROCESS: u64;
    const TOTAL: u64;
}

/// JIT symbols (perf maps and jitdumps): names once, plus a symbol's cost.
#[derive(Debug)]
pub struct JitSymbols;
impl Store for JitSymbols {
    const WHAT: &'static str = "JIT symbols";
    const DROPS_SOURCE: &'static str = metadata::JIT_SYMBOLS_OVER_BUDGET;
    const PER_PROCESS: u64 = 8 << 20;
    const TOTAL: u64 = 64 << 20;
}

/// Python code objects read for `--python-sampling`: the cache of code
/// objects (evicted by size), and the names recorded.
#[derive(Debug)]
pub struct PythonCode;
impl Store for PythonCode {
    const WHAT: &'static str = "Python code objects";
    const DROPS_SOURCE: &'static str = metadata::PYTHON_CODE_OVER_BUDGET;
    const PER_PROCESS: u64 = 8 << 20;
    const TOTAL: u64 = 32 << 20;
}

/// NVTX registration tables read from processes reached late (a table is
/// at most 128 KiB; a host full of processes could still add up).
#[derive(Debug)]
pub struct NvtxRegistrations;
impl Store for NvtxRegistrations {
    const WHAT: &'static str = "NVTX registration table";
    const DROPS_SOURCE: &'static str = metadata::NVTX_REGISTRATIONS_OVER_BUDGET;
    const PER_PROCESS: u64 = 1 << 20;
    const TOTAL: u64 = 16 << 20;
}

/// One store's caps ([`Store`]) and use.
#[derive(Debug)]
pub struct Budget<S> {
    per_process: u64,
    total: u64,
    used: HashMap<u32, u64>,
    total_used: u64,
    /// Items refused, for the report's drops.
    refused: u64,
    /// Processes already warned about.
    warned: BTreeSet<u32>,
    store: std::marker::PhantomData<S>,
}

impl<S: Store> Default for Budget<S> {
    fn default() -> Self {
        Self::with_caps(S::PER_PROCESS, S::TOTAL)
    }
}

impl<S: Store> Budget<S> {
    /// Its `drops` source in the report.
    pub const DROPS_SOURCE: &'static str = S::DROPS_SOURCE;

    /// Other caps than the store's (tests).
    pub fn with_caps(per_process: u64, total: u64) -> Self {
        Self {
            per_process,
            total,
            used: HashMap::new(),
            total_used: 0,
            refused: 0,
            warned: BTreeSet::new(),
            store: std::marker::PhantomData,
        }
    }

    /// Takes `bytes` for process `pid` if both caps allow, else refuses one
    /// item (counted, and warned about once per process).
    pub fn take(&mut self, pid: u32, bytes: u64) -> bool {
        if !self.fits(pid, bytes) {
            self.refuse(pid, 1);
            return false;
        }
        *self.used.entry(pid).or_default() += bytes;
        self.total_used += bytes;
        true
    }

    /// Whether `bytes` more for `pid` would fit (nothing is taken).
    pub fn fits(&self, pid: u32, bytes: u64) -> bool {
        let used = self.used.get(&pid).copied().unwrap_or(0);
        used.saturating_add(bytes) <= self.per_process
            && self.total_used.saturating_add(bytes) <= self.total
    }

    /// Counts `items` refused for `pid` without taking anything (a reader
    /// that stopped early knows how many it left).
    pub fn refuse(&mut self, pid: u32, items: u64) {
        if items == 0 {
            return;
        }
        self.refused += items;
        if self.warned.insert(pid) {
            eprintln!(
                "asys: warning: process {pid}: its {} passed asys's budget ({} per process, {} in all); what did not fit is not kept (counted in drops as {})",
                S::WHAT,
                mib(self.per_process),
                mib(self.total),
                S::DROPS_SOURCE
            );
        }
    }

    /// Gives back `bytes` of `pid`'s (a cache entry evicted).
    pub fn give_back(&mut self, pid: u32, bytes: u64) {
        if let Some(u) = self.used.get_mut(&pid) {
            let b = bytes.min(*u);
            *u -= b;
            self.total_used -= b;
        }
    }

    /// Bytes `pid` may still take.
    pub fn room(&self, pid: u32) -> u64 {
        let used = self.used.get(&pid).copied().unwrap_or(0);
        self.per_process
            .saturating_sub(used)
            .min(self.total.saturating_sub(self.total_used))
    }

    /// Bytes held for `pid`.
    #[cfg(test)]
    pub fn used_by(&self, pid: u32) -> u64 {
        self.used.get(&pid).copied().unwrap_or(0)
    }

    /// The process is gone and its store freed: its bytes are given back.
    pub fn forget(&mut self, pid: u32) {
        if let Some(u) = self.used.remove(&pid) {
            self.total_used -= u;
        }
    }

    /// Items refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

#[cfg(test)]
mod tests {
    use super::{Budget, JitSymbols};

    #[test]
    fn caps_hold_per_process_and_in_all() {
        let mut b = Budget::<JitSymbols>::with_caps(100, 150);
        assert!(b.take(1, 60));
        assert!(b.take(1, 40));
        assert!(!b.take(1, 1), "per-process cap");
        assert!(b.take(2, 50));
        assert!(!b.take(3, 1), "total cap");
        assert_eq!(b.refused(), 2);
        b.give_back(1, 30);
        assert!(b.take(3, 30));
        b.forget(2);
        assert!(b.fits(4, 50) && !b.fits(4, 51));
        b.refuse(4, 5);
        assert_eq!(b.refused(), 7);
        assert_eq!(b.used_by(1), 70);
        assert_eq!(b.room(1), 30);
    }
}
