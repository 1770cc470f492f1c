//! The capture state machine `profile`, `attach` and the session daemon
//! share: what a recording does when collection stops (go on in the same
//! report, begin the next report of a series, or finish), and how an
//! application asys launched is ended when collection ends first.
use std::time::Duration;

use crate::{collect::Stop, kernel::Tracer, settings::CaptureEnd};

/// What follows a stop of collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterStop {
    /// Collection goes on into the same report (`merge:N` before range N).
    SameReport,
    /// This report is written and the next one of the series begins
    /// (`repeat[:N]` before range N, `--trace-rotation` at each period).
    NextReport,
    /// Collection ends; the last report is written.
    Finish,
}

/// Decides what follows `stop`, with `ranges` capture ranges opened so far.
pub fn after_stop(
    capture: Option<CaptureEnd>,
    rotation: bool,
    stop: Stop,
    ranges: u32,
) -> AfterStop {
    match (capture, stop) {
        (Some(end @ CaptureEnd::Merge { .. }), Stop::CaptureEnded) if end.wants_more(ranges) => {
            AfterStop::SameReport
        }
        (Some(end @ CaptureEnd::Repeat { .. }), Stop::CaptureEnded) if end.wants_more(ranges) => {
            AfterStop::NextReport
        }
        // --trace-rotation: every --duration a new report.
        (None, Stop::Duration) if rotation => AfterStop::NextReport,
        _ => AfterStop::Finish,
    }
}

/// How long an application gets to end after its signal before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// Ends the application asys launched (`pid`, whose exit `exit` reports)
/// with `signal`, and with SIGKILL if it lingers past [`GRACE`]; returns its
/// wait status (-1 if it could not be had).
pub async fn end_application(
    tracer: &mut Tracer,
    pid: u32,
    signal: i32,
    exit: &mut tokio::sync::oneshot::Receiver<i32>,
) -> i32 {
    // A process stopped at a library load would hold the signal.
    tracer.release_loader();
    let pid = pid as i32;
    // An application in a process group of its own (`spawn.rs`: asys not
    // in its terminal's foreground) gets the signal as a terminal would
    // send it, to the whole group: its workers too (a PyTorch DataLoader's
    // waited 5 s for workers that never got Ctrl+C).
    // SAFETY: getpgid has no memory effects.
    let target = if unsafe { libc::getpgid(pid) } == pid {
        -pid
    } else {
        pid
    };
    // SAFETY: kill has no memory effects; pid is the application asys
    // launched, not reaped until `exit` resolves, so not another process
    // (nor, while it lives, its group another's).
    unsafe { libc::kill(target, signal) };
    match tokio::time::timeout(GRACE, &mut *exit).await {
        Ok(code) => code.unwrap_or(-1),
        Err(_) => {
            // SAFETY: as above.
            unsafe { libc::kill(target, libc::SIGKILL) };
            exit.await.unwrap_or(-1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_goes_on_in_the_same_report_until_its_last_range() {
        let end = Some(CaptureEnd::Merge {
            max: Some(3),
            shutdown: false,
        });
        assert_eq!(
            after_stop(end, false, Stop::CaptureEnded, 2),
            AfterStop::SameReport
        );
        assert_eq!(
            after_stop(end, false, Stop::CaptureEnded, 3),
            AfterStop::Finish
        );
        assert_eq!(after_stop(end, false, Stop::Duration, 1), AfterStop::Finish);
    }

    #[test]
    fn repeat_and_rotation_begin_the_next_report() {
        let end = Some(CaptureEnd::Repeat {
            max: Some(2),
            shutdown: false,
        });
        assert_eq!(
            after_stop(end, false, Stop::CaptureEnded, 1),
            AfterStop::NextReport
        );
        assert_eq!(
            after_stop(end, false, Stop::CaptureEnded, 2),
            AfterStop::Finish
        );
        assert_eq!(
            after_stop(None, true, Stop::Duration, 0),
            AfterStop::NextReport
        );
        assert_eq!(
            after_stop(None, false, Stop::Duration, 0),
            AfterStop::Finish
        );
        assert_eq!(
            after_stop(None, true, Stop::AppExited(0), 0),
            AfterStop::Finish
        );
        assert_eq!(
            after_stop(Some(CaptureEnd::Stop), false, Stop::CaptureEnded, 1),
            AfterStop::Finish
        );
    }
}
