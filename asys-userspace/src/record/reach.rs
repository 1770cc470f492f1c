//! Reaching a recording's targets: the launched child, traced from its first
//! instruction; running processes and what they forked; or every process
//! system-wide. Each has its runtimes probed as it is reached, and an
//! attach or system-wide run opens its window once every probe is in place.
use std::{path::PathBuf, time::Duration};

use crate::{
    clock::{monotonic_ns, realtime_ns},
    collect as collector,
    kernel::Tracer,
    settings::RecordSettings,
    sink::recorder::Recorder,
    spawn::{self, Suspended},
};

use super::{RecordError, Target};

/// The processes a recording reached.
pub(super) struct Reached {
    /// The processes launched or attached to (none system-wide).
    pub(super) root_pids: Vec<u32>,
    /// The processes an attach reached below the given ones.
    pub(super) descendants: Vec<u32>,
    /// The launched application's exit status, once it exits.
    pub(super) app_exit: Option<tokio::sync::oneshot::Receiver<i32>>,
}

/// Reaches the target: the launched child, traced from its first
/// instruction; the processes attached to and what they forked before; or
/// every process system-wide. Each has its runtimes probed as it is reached.
pub(super) fn reach_targets(
    target: Target,
    settings: &RecordSettings,
    tracer: &mut Tracer,
    state: &mut collector::State,
    rec: &mut Recorder,
) -> Result<Reached, RecordError> {
    let (root_pids, descendants, app_exit) = match target {
        Target::Launch { child, program } => {
            let (pid, rx) = start_launched(tracer, child, &program)?;
            state.tree.started(pid);
            (vec![pid], Vec::new(), Some(rx))
        }
        Target::Attach { pids } => {
            let descendants = attach_to(&pids, tracer, state, rec)?;
            (pids, descendants, None)
        }
        Target::SystemWide => {
            reach_system_wide(settings, tracer, rec)?;
            (Vec::new(), Vec::new(), None)
        }
    };
    Ok(Reached {
        root_pids,
        descendants,
        app_exit,
    })
}

/// Traces the held child from its first instruction (the loader hook for its
/// interpreter, its pid in `TRACED`), lets it exec, and waits for it on a
/// thread; the receiver gets its shell-style exit status.
pub(crate) fn start_launched(
    tracer: &mut Tracer,
    child: Suspended,
    program: &std::path::Path,
) -> Result<(u32, tokio::sync::oneshot::Receiver<i32>), RecordError> {
    let interp = crate::elf::interpreter(program)
        .unwrap_or_else(|| PathBuf::from("/lib64/ld-linux-x86-64.so.2"));
    if let Err(e) = tracer
        .probes
        .hook_loader(&interp)
        .and_then(|_| tracer.processes.trace(child.pid, true))
    {
        child.abandon();
        return Err(e.into());
    }
    let pid = child.release()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(spawn::wait(pid));
    });
    Ok((pid, rx))
}

/// Kills a launched child that was never started (recording gave up first).
pub(super) fn abandon(target: Target) {
    if let Target::Launch { child, .. } = target {
        child.abandon();
    }
}

impl Reached {
    /// The processes to look at once recording is on: those launched or
    /// attached to and their descendants, or every process system-wide.
    pub(super) fn processes(&self) -> Vec<u32> {
        if self.root_pids.is_empty() {
            crate::process::procfs::all_pids()
        } else {
            self.root_pids
                .iter()
                .chain(&self.descendants)
                .copied()
                .collect()
        }
    }
}

/// Traces `pids`, then what they forked before the attach (what they fork
/// from now on, the kernel adds at the fork); returns the latter.
pub(super) fn attach_to(
    pids: &[u32],
    tracer: &mut Tracer,
    state: &mut collector::State,
    rec: &mut Recorder,
) -> Result<Vec<u32>, RecordError> {
    for &pid in pids {
        tracer.processes.trace(pid, true)?;
        collector::scan(pid, monotonic_ns() as u64, tracer, rec)?;
        if !crate::process::procfs::process_exists(pid) {
            return Err(RecordError::Gone(pid));
        }
        state.tree.saw(pid);
        state.look_at_python(pid, tracer);
    }
    let descendants = trace_descendants(tracer, pids);
    for &pid in &descendants {
        collector::scan(pid, monotonic_ns() as u64, tracer, rec)?;
        state.tree.started(pid);
        state.tree.saw(pid);
        state.look_at_python(pid, tracer);
    }
    Ok(descendants)
}

/// Traces what `roots` forked before the attach, and what those forked, and
/// so on; returns them (roots and the threads of each are not in it). Each
/// process is in `TRACED` before its children are read: a child it forks
/// after that is added by the kernel's fork tracepoint, one forked before is
/// in the list read after, so none is missed however the tree grows
/// meanwhile. One that cannot be added (gone, `TRACED` full) is left out.
pub(super) fn trace_descendants(tracer: &mut Tracer, roots: &[u32]) -> Vec<u32> {
    let mut known: std::collections::HashSet<u32> = roots.iter().copied().collect();
    let mut to_read: Vec<u32> = roots.to_vec();
    let mut found = Vec::new();
    while let Some(parent) = to_read.pop() {
        for child in crate::process::procfs::children(parent) {
            // asys itself, where it runs under what it attaches to (a shell).
            if child == std::process::id() || !known.insert(child) {
                continue;
            }
            // A zombie has no exit to come that would take its key out.
            if crate::process::procfs::is_alive(child)
                && tracer.processes.trace(child, true).is_ok()
            {
                found.push(child);
                to_read.push(child);
            }
        }
    }
    found.sort_unstable();
    found
}

/// Traces every process (of the cgroup asked for) and probes the runtimes
/// each running one has mapped; later loads come through the loader hook.
pub(super) fn reach_system_wide(
    settings: &RecordSettings,
    tracer: &mut Tracer,
    rec: &mut Recorder,
) -> Result<(), RecordError> {
    if let Some(filter) = &settings.cgroup {
        tracer.control.filter_cgroup(filter)?;
    }
    tracer.control.trace_system_wide()?;
    for pid in crate::process::procfs::all_pids() {
        if pid != std::process::id() && settings.cgroup.as_ref().is_none_or(|f| f.contains_pid(pid))
        {
            collector::scan(pid, monotonic_ns() as u64, tracer, rec)?;
        }
    }
    Ok(())
}

/// Reads the NVTX names the processes reached late registered before
/// recording was on. Called once recording is on: a registration from now
/// on is a recorded call, one before it is in the table.
pub(super) fn read_registered_names(state: &mut collector::State, reached: &Reached) {
    for pid in reached.processes() {
        if let Some(r) = collector::registered_names::read(pid) {
            // Each registration's text and handle, held until the end.
            let cost = (r.strings.len() + r.domains.len()) as u64
                * (asys_common::NVTX_REGISTRY_TEXT as u64 + 16);
            if state.registration_budget.take(pid, cost) {
                state.registered.insert(pid, r);
            }
        }
    }
}

/// Whether asys opens and closes the recorded window itself: attaching to
/// running processes and system-wide, the window is what asys chooses (not
/// the application's life, a --delay or a capture range), so its metadata
/// must say exactly when recording was on; and an aligned start (`-y
/// @TIME`, `/PERIOD`), whose window must be the same on every host.
pub(super) fn opens_window(settings: &RecordSettings, target: &Target) -> bool {
    settings.activation.is_some()
        || matches!(target, Target::Attach { .. } | Target::SystemWide)
            && settings.delay.is_none()
            && settings.capture.is_none()
}

/// Turns recording on, once every probe is in place, and returns the start
/// of the window (realtime, monotonic). A probe reads the recording flag
/// before it stamps its event: the start is read a moment after the flag
/// went on, so that every event stamped from then on was recorded (events
/// stamped before it are left out by the collector's window).
pub(super) async fn open_window(tracer: &mut Tracer) -> Result<(i64, i64), RecordError> {
    tracer.control.set_recording(true)?;
    tokio::time::sleep(Duration::from_millis(1)).await;
    Ok((realtime_ns(), monotonic_ns()))
}
