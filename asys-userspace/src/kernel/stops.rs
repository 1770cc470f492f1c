//! The processes the loader hook stopped at a library load (`STOPPED`),
//! those whose load it could neither announce nor stop for
//! (`LOADS_UNANNOUNCED`), and the watchdog that continues every stopped
//! process if asys dies (`sigcont_watchdog.rs`). asys never leaves a
//! process stopped: see docs/kernel-side.md.
use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, MapData},
};

use super::{TracerError, sigcont_watchdog, take_map};

pub struct Stops {
    /// Processes the loader hook stopped and nobody continued yet.
    stopped: BpfHashMap<MapData, u32, u32>,
    /// Processes the loader hook could not announce nor stop (the ring was
    /// full, system-wide): to be scanned late.
    loads_unannounced: BpfHashMap<MapData, u32, u32>,
    /// Continues them if asys dies; None if it could not start (asys said
    /// so).
    watchdog: Option<sigcont_watchdog::Watchdog>,
}

impl Stops {
    /// Takes the maps out of `ebpf` and starts the watchdog.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, TracerError> {
        let stopped = take_map(ebpf, "STOPPED")?;
        let loads_unannounced = take_map(ebpf, "LOADS_UNANNOUNCED")?;
        let watchdog = start_watchdog(&stopped);
        Ok(Self {
            stopped,
            loads_unannounced,
            watchdog,
        })
    }

    /// Continues every process still stopped. Called once the loader hooks
    /// are closed (closing waits for hooks still running), so that what
    /// STOPPED holds then is complete.
    pub(super) fn resume_all(&mut self) {
        let left: Vec<u32> = self.stopped.keys().filter_map(Result::ok).collect();
        for pid in left {
            self.resume(pid);
        }
    }

    /// Continues `pid`, which the loader hook stopped. The note in STOPPED
    /// goes before the signal: once continued, the process may stop at its
    /// next load (a dlopen stops at its start and again at its end), and
    /// if the ring is full then, that stop's note ([`STOPPED_UNANNOUNCED`])
    /// is all that tells of it; a removal after the signal could take it.
    /// Should asys die between the two, the watchdog would no longer see
    /// the pid: a window of one system call, against one of the process's
    /// next load.
    ///
    /// [`STOPPED_UNANNOUNCED`]: asys_common::STOPPED_UNANNOUNCED
    pub fn resume(&mut self, pid: u32) {
        if pid == asys_common::STOPPED_DISARMED {
            // Not a process: kill(0) would signal asys's own process group.
            return;
        }
        let _ = self.stopped.remove(&pid);
        // SAFETY: kill has no memory effects; a pid that is gone only makes
        // it fail, which is fine (nothing is left to continue).
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    }

    /// Takes the processes whose load the hook could neither announce nor
    /// stop for (the ring was full; system-wide, most likely): the
    /// collector scans them late, as their events would have had it.
    pub fn take_unannounced_loads(&mut self) -> Vec<u32> {
        let pids: Vec<u32> = self
            .loads_unannounced
            .keys()
            .filter_map(Result::ok)
            .collect();
        for pid in &pids {
            let _ = self.loads_unannounced.remove(pid);
        }
        pids
    }

    /// The processes the loader hook stopped at a load that no event
    /// announced (the ring was full): the collector probes and continues
    /// them itself.
    pub fn unannounced_stops(&self) -> Vec<u32> {
        self.stopped
            .iter()
            .filter_map(Result::ok)
            .filter(|&(pid, v)| {
                pid != asys_common::STOPPED_DISARMED && v == asys_common::STOPPED_UNANNOUNCED
            })
            .map(|(pid, _)| pid)
            .collect()
    }

    /// Nothing is left stopped: the watchdog can go.
    pub(super) fn dismiss_watchdog(&mut self) {
        if let Some(mut w) = self.watchdog.take() {
            w.dismiss();
        }
    }
}

/// The watchdog continuing what the loader hook stopped (`stopped`) if asys
/// dies; None, said, where it cannot start.
fn start_watchdog(stopped: &BpfHashMap<MapData, u32, u32>) -> Option<sigcont_watchdog::Watchdog> {
    match sigcont_watchdog::Watchdog::start(sigcont_watchdog::map_fd(stopped)) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!(
                "asys: warning: {e}; a process stopped at a library load stays stopped \
                 if asys is killed"
            );
            None
        }
    }
}
