//! Detaching: the processes untraced at once, the probes removed on a thread
//! beside the symbolize and pack stages, and waited for before asys exits.
use crate::kernel::{Snapshot, Tracer};

use super::RecordError;

/// Untraces every process and starts removing the probes; returns the
/// tracer's last facts. Untraced before the slow stages so attached
/// processes are no longer recorded; removing the probes waits for the
/// kernel (a grace period per link), so it runs beside the symbolize and
/// pack stages instead of before them, and asys exits once both are done.
pub(super) fn start_detaching(mut tracer: Tracer) -> Result<(Snapshot, Detaching), RecordError> {
    for pid in tracer.processes.traced_pids() {
        tracer.processes.untrace(pid);
    }
    let snapshot = tracer.snapshot();
    // Nothing is left stopped at a library load, whatever happens next.
    tracer.release_loader();
    let detached = Detaching(Some(
        std::thread::Builder::new()
            .name("asys-detach".into())
            .spawn(move || tracer.detach())
            .map_err(|e| RecordError::Detach(e.to_string()))?,
    ));
    Ok((snapshot, detached))
}

/// The thread removing the probes; waited for however recording ends (an
/// error on the way out too), so asys never exits with probes half removed.
pub(super) struct Detaching(Option<std::thread::JoinHandle<()>>);

impl Detaching {
    pub(super) fn wait(mut self) -> Result<(), RecordError> {
        match self.0.take().map(std::thread::JoinHandle::join) {
            Some(Err(_)) => Err(RecordError::Detach("the detaching thread panicked".into())),
            _ => Ok(()),
        }
    }
}

impl Drop for Detaching {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}
