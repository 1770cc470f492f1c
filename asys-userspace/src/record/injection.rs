//! An attach's (or a `--inject running` system-wide run's) injection step:
//! once the window is open, each running process that has a runtime or
//! NVTX loaded gets asys's injection library (see `inject/`), so that its
//! device activity and NVTX ranges are recorded from then on; at the end,
//! before the window closes, each has the library quiesced, so that its
//! last records arrive while the sites are still probed. Each outcome is
//! one line; a refusal leaves that process its host calls and the run goes
//! on.
use crate::{
    clock::monotonic_ns,
    collect as collector,
    inject::{self, Activity, Loaded, Quiesced},
    kernel::Tracer,
    settings::RecordSettings,
    sink::recorder::Recorder,
};

use super::reach::Reached;

/// The processes the library was started in, to quiesce at the end.
#[derive(Default)]
pub(super) struct Injections {
    pids: Vec<u32>,
}

/// Loads the library into every reached process that wants it.
pub(super) fn inject_into_targets(
    settings: &RecordSettings,
    reached: &Reached,
    tracer: &mut Tracer,
    rec: &mut Recorder,
) -> Injections {
    let mut done = Injections::default();
    let Some(request) = &settings.inject else {
        return done;
    };
    // System-wide, asys itself and processes outside --cgroup are not
    // targets (an attach's are neither).
    let candidates = reached.processes().into_iter().filter(|&p| {
        p != std::process::id() && settings.cgroup.as_ref().is_none_or(|f| f.contains_pid(p))
    });
    for pid in candidates {
        if !inject::wanted_in(pid, request) {
            continue;
        }
        let mut hook = |pid: u32| {
            collector::scan(pid, monotonic_ns() as u64, tracer, rec).map_err(|e| e.to_string())
        };
        let who = process_name(pid);
        match inject::inject(pid, request, &mut hook) {
            Ok(i) => {
                let how = match i.loaded {
                    Loaded::ByPath => "injection library loaded",
                    Loaded::FromMemfd => {
                        "injection library loaded from a memfd (another mount namespace)"
                    }
                    Loaded::Reused => "injection library already loaded, re-used",
                };
                let nvtx = match i.nvtx_modules {
                    0 => String::new(),
                    n => format!("; NVTX ranges from {n} module(s)"),
                };
                match &i.activity {
                    Activity::On(warnings) => {
                        done.pids.push(pid);
                        eprintln!(
                            "asys: process {pid} ({who}): device activity recorded from now on ({how}{nvtx})"
                        );
                        if let Some(w) = warnings {
                            eprintln!("asys: warning: process {pid} ({who}): {}", escaped(w));
                        }
                    }
                    Activity::AlreadyOn => eprintln!(
                        "asys: process {pid} ({who}): device activity recorded as since its start ({how}{nvtx})"
                    ),
                    Activity::NotAsked => {
                        eprintln!("asys: process {pid} ({who}): {how}{nvtx}");
                    }
                    Activity::Off(why) => {
                        // Started nothing, but NVTX may have been adopted.
                        done.pids.push(pid);
                        eprintln!(
                            "asys: warning: process {pid} ({who}): no device activity: {}{nvtx}",
                            escaped(why)
                        );
                    }
                }
            }
            Err(e) => eprintln!(
                "asys: warning: process {pid} ({who}): not injected, its host calls only: {e}"
            ),
        }
    }
    done
}

/// Quiesces the library in each process it was started in.
pub(super) fn quiesce(injections: Injections) {
    for pid in injections.pids {
        if !crate::process::procfs::is_alive(pid) {
            continue;
        }
        let who = process_name(pid);
        match inject::quiesce(pid) {
            Ok(Quiesced::Stopped) => eprintln!(
                "asys: process {pid} ({who}): device activity stopped and flushed; the injection library stays loaded, quiesced (unloading it under the runtime's callbacks would not be safe)"
            ),
            Ok(Quiesced::LeftAsStarted) => {}
            Err(e) => eprintln!(
                "asys: warning: process {pid} ({who}): the injection library could not be quiesced: {e}"
            ),
        }
    }
}

fn process_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|n| escaped(n.trim_end()))
        .unwrap_or_else(|_| "?".into())
}

fn escaped(s: &str) -> String {
    asys_report::text_safety::escaped_name(s).into_owned()
}
