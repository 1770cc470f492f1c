//! The processes the programs trace (`TRACED`: a process's pid and its
//! threads' ids), how each stops at a library load, and the CPython
//! processes whose frames the sample program reads (`PYTHON_PROCESSES`).
//! Filtering happens in the kernel: a probe does nothing for a thread
//! that is not in `TRACED`; the fork tracepoint adds children, the exit
//! tracepoint removes them.
use asys_common::{PythonProcess, TracedProcess};
use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, MapData},
};

use super::{TracerError, take_map};

/// What decides how long a traced process stops at a library load.
#[derive(Debug, Clone, Copy)]
pub(super) struct StopPolicy {
    /// Probes go into libraries as they load: any item but osrt.
    pub places_probes: bool,
    /// `--probe-backtrace`: the stacks are unwound with the mappings
    /// recorded at each load, which a short process may not outlive unless
    /// it waits for asys there.
    pub wants_stacks: bool,
    /// osrt: where each process's libc lies is noted once.
    pub osrt: bool,
}

pub struct Processes {
    traced: BpfHashMap<MapData, u32, TracedProcess>,
    /// CPython processes whose frames the sample program reads
    /// (`--python-sampling`), with where.
    python: BpfHashMap<MapData, u32, PythonProcess>,
    /// Whether Python stacks are read (`--python-sampling true`), and the
    /// least time between two of one thread (0: at every sample).
    python_stacks: Option<u64>,
    /// The least time, in µs, between two Python stacks of one thread
    /// taken as it leaves the CPU to wait.
    python_wait_interval_us: u32,
    stop: StopPolicy,
    /// Userspace's failed inserts into TRACED
    /// ([`asys_common::DropSource::TracedInsertFailed`]).
    insert_failed: u64,
}

impl Processes {
    pub(super) fn take(ebpf: &mut Ebpf, stop: StopPolicy) -> Result<Self, TracerError> {
        Ok(Self {
            traced: take_map(ebpf, "TRACED")?,
            python: take_map(ebpf, "PYTHON_PROCESSES")?,
            python_stacks: None,
            python_wait_interval_us: 0,
            stop,
            insert_failed: 0,
        })
    }

    /// Starts tracing `pid` (and, through the fork tracepoint, its children).
    /// Its threads that exist already are added by their ids too: the
    /// context-switch probe knows a thread switching in by its id only, and
    /// only threads forked after this are added by the kernel.
    pub fn trace(&mut self, pid: u32, stop_on_load: bool) -> Result<(), TracerError> {
        // The stop at a library load lets probes go in before its code runs.
        // osrt places none (its lock waits come from the system calls): with
        // osrt alone, and no Python frames to set up, a process stops only
        // until asys has seen where its libc is (each stop costs it ms: 0.7 s
        // over PyTorch's imports here).
        let stop = match stop_on_load {
            false => 0,
            true if self.stop.places_probes
                || self.python_stacks.is_some()
                || self.stop.wants_stacks =>
            {
                asys_common::STOP_EVERY_LOAD
            }
            true if self.stop.osrt => asys_common::STOP_UNTIL_PLACED,
            true => 0,
        };
        let v = TracedProcess {
            stop_on_load: stop,
            stop_after_exec: stop,
        };
        if let Err(source) = self.traced.insert(pid, v, 0) {
            self.insert_failed += 1;
            return Err(TracerError::Map {
                name: "TRACED",
                source,
            });
        }
        // After the process's own key: a thread started from now on passes
        // the fork tracepoint, which adds it.
        for tid in crate::process::procfs::task_ids(pid) {
            if tid != pid && self.traced.insert(tid, v, 0).is_err() {
                // Counted, not fatal: only its context switches in are lost.
                self.insert_failed += 1;
            }
        }
        Ok(())
    }

    /// Stops tracing `pid`; a process that already exited is fine.
    pub fn untrace(&mut self, pid: u32) {
        let _ = self.traced.remove(&pid);
        let _ = self.python.remove(&pid);
        // Its threads' own keys (see trace): the kernel removes them only
        // while the process is traced.
        for tid in crate::process::procfs::task_ids(pid) {
            let _ = self.traced.remove(&tid);
        }
    }

    pub fn traced_pids(&self) -> Vec<u32> {
        self.traced.keys().filter_map(Result::ok).collect()
    }

    /// osrt alone: `pid`'s lock library is placed, its loads need no stop
    /// until its next exec.
    pub(super) fn lock_library_placed(&mut self, pid: u32) {
        if let Ok(mut v) = self.traced.get(&pid, 0)
            && v.stop_on_load == asys_common::STOP_UNTIL_PLACED
        {
            v.stop_on_load = 0;
            let _ = self.traced.insert(pid, v, 0);
        }
    }

    /// Userspace's failed inserts into TRACED so far.
    pub(super) fn insert_failed(&self) -> u64 {
        self.insert_failed
    }

    /// Samples read Python frames from now on (`--python-sampling true`),
    /// of the processes passed to [`Self::read_python`], each thread's at
    /// most `hz` times a second (`--python-sampling-frequency`), with
    /// samples every `period_ns` of CPU time.
    pub fn read_python_stacks(&mut self, hz: u32, period_ns: u64) {
        // At or above the sampling rate the limit would never bite; no
        // lookup is spent on it then.
        let interval = 1_000_000_000 / u64::from(hz.max(1));
        self.python_stacks = Some(if interval <= period_ns { 0 } else { interval });
        // Waits are not paced by sampling: each thread's at most `hz` a
        // second, whatever the sampling period (1 ms at the default 1 kHz),
        // so that a thread blocking 100,000 times a second (GIL hand-offs)
        // costs at most `hz` frame walks a second.
        self.python_wait_interval_us = (interval / 1000).max(1) as u32;
    }

    /// The least time, in µs, between two Python stacks of a thread taken as
    /// it leaves the CPU to wait (`--python-sampling-frequency`'s interval).
    pub fn python_wait_interval_us(&self) -> u32 {
        self.python_wait_interval_us
    }

    /// The least time between two Python stacks of a thread, when they are
    /// read at all.
    pub fn python_stacks(&self) -> Option<u64> {
        self.python_stacks
    }

    /// The sample program reads the Python frames of `pid`'s threads, as
    /// `process` says where.
    pub fn read_python(&mut self, pid: u32, process: PythonProcess) -> Result<(), TracerError> {
        self.python
            .insert(pid, process, 0)
            .map_err(|source| TracerError::Map {
                name: "PYTHON_PROCESSES",
                source,
            })
    }

    /// The sample program no longer reads `pid`'s Python frames (it exec'd
    /// another image).
    pub fn forget_python(&mut self, pid: u32) {
        let _ = self.python.remove(&pid);
    }
}
