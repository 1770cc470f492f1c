//! The dynamic loader calls `_dl_debug_state` whenever its link map changes:
//! once after start-up mapped the needed libraries (before any of their code
//! runs) and around each dlopen/dlclose. For a traced process asks it, the probe
//! stops the process so userspace can attach probes to new libraries before a
//! single call into them is missed, and userspace continues it.
use asys_common::{
    DropSource, EventKind, LibraryLoadEvent, STOPPED_ANNOUNCED, STOPPED_UNANNOUNCED, TracedProcess,
};
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, generated::bpf_send_signal},
    macros::uprobe,
    programs::ProbeContext,
};
use aya_log_ebpf::{error, warn};

use crate::maps::{
    EVENTS, LOADS_UNANNOUNCED, STOPPED, STOPPED_DISARMED, TRACED, count_drop, settings,
    system_wide_includes_current,
};

const SIGSTOP: u32 = 19;
const SIGCONT: u32 = 18;

#[uprobe]
pub fn loader_hook(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // System-wide, every process's loads are reported (so new runtimes get
    // probes) but only processes of a launched tree are stopped for it.
    // SAFETY: the value is copied out at once.
    let proc_ = match unsafe { TRACED.get(tgid).copied() } {
        Some(p) => p,
        None if settings().is_some_and(system_wide_includes_current) => TracedProcess::default(),
        None => return 0,
    };
    // Once asys's watchdog has seen asys die it sets DISARMED in STOPPED:
    // from then on nothing is stopped, however long the hook takes to be
    // detached (a loaded machine tears asys down slowly).
    // SAFETY: the value is only tested for presence.
    let disarmed = unsafe { STOPPED.get(STOPPED_DISARMED) }.is_some();
    let wants_stop = !disarmed && proc_.stop_on_load != 0;
    let Some(mut slot) = EVENTS.reserve::<LibraryLoadEvent>(0) else {
        // No event can tell of this load. A process that may be stopped
        // is stopped all the same and noted in STOPPED as unannounced:
        // userspace looks there itself, so a burst of other events does not
        // cost it its library's probes.
        if wants_stop && stop_unannounced(tgid) {
            return 0;
        }
        // Without a note nobody would continue the process: do not stop it.
        // Userspace still scans it at its next tick; calls into a library
        // no process had loaded before may be missed until then.
        let _ = LOADS_UNANNOUNCED.insert(tgid, &0, 0);
        count_drop(DropSource::LoaderRingFull);
        warn!(
            &ctx,
            "the event ring is full: process {} loaded a library that is probed late", tgid
        );
        return 0;
    };
    // SAFETY: signals the current task, which is what the helper does.
    let stopped = wants_stop && unsafe { bpf_send_signal(SIGSTOP) } == 0;
    // The event alone is not enough: asys may be ending and never read it.
    if stopped && STOPPED.insert(tgid, STOPPED_ANNOUNCED, 0).is_err() {
        count_drop(DropSource::StoppedMapFull);
        error!(
            &ctx,
            "STOPPED is full: stopped process {} is continued only when its event is read", tgid
        );
    }
    slot.write(LibraryLoadEvent {
        header: crate::maps::header(EventKind::LibraryLoad, pid_tgid),
        stopped: stopped as u32,
        _pad: 0,
    });
    // Wake the reader now: the process is stopped until it answers.
    slot.submit(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP as u64);
    0
}

/// Stops the current process for a load no event announces, noting it in
/// `STOPPED` as [`STOPPED_UNANNOUNCED`]; false (and not stopped) when it
/// could not be noted. The signal goes first, as for an announced stop: a
/// note that userspace acted on before the stop was sent would leave the
/// process stopped with nobody to continue it. A SIGCONT takes back a
/// SIGSTOP not yet acted on.
fn stop_unannounced(tgid: u32) -> bool {
    // SAFETY: signals the current task, which is what the helper does.
    if unsafe { bpf_send_signal(SIGSTOP) } != 0 {
        return false;
    }
    if STOPPED.insert(tgid, STOPPED_UNANNOUNCED, 0).is_ok() {
        return true;
    }
    // SAFETY: signals the current task, which is what the helper does.
    unsafe { bpf_send_signal(SIGCONT) };
    false
}
