//! Messages from the eBPF programs (aya-log) about failures off the hot
//! path: a full process map, a loader hook that could not note a stopped
//! process. High-rate failures are counted per cause in `DROPS` instead (a
//! log record per call would cost more than the call). A thread waits on the
//! log ring and prints each record to stderr as it comes.
use std::{
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
    thread::JoinHandle,
};

use aya::Ebpf;
use aya_log::EbpfLogger;

use super::TracerError;

/// Prints kernel records as asys prints its own messages.
struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        eprintln!(
            "asys: kernel side {}: {}",
            record.level().as_str().to_lowercase(),
            record.args()
        );
    }

    fn flush(&self) {}
}

pub struct KernelLog {
    /// Closing it wakes the reader thread, which drains and ends.
    stop: Option<OwnedFd>,
    reader: Option<JoinHandle<()>>,
}

impl KernelLog {
    /// Takes the log ring out of `ebpf` and starts reading it.
    pub fn start(ebpf: &mut Ebpf) -> Result<Self, TracerError> {
        let mut logger = EbpfLogger::init_with_logger(ebpf, Stderr)?;
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(TracerError::KernelLog(std::io::Error::last_os_error()));
        }
        // SAFETY: both are new descriptors that only these owners hold.
        let (wake, stop) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let reader = std::thread::Builder::new()
            .name("asys-kernel-log".into())
            .spawn(move || {
                loop {
                    let mut polled = [
                        libc::pollfd {
                            fd: logger.as_fd().as_raw_fd(),
                            events: libc::POLLIN,
                            revents: 0,
                        },
                        libc::pollfd {
                            fd: wake.as_raw_fd(),
                            events: libc::POLLIN,
                            revents: 0,
                        },
                    ];
                    // SAFETY: two valid pollfd entries, for the call only.
                    let n = unsafe { libc::poll(polled.as_mut_ptr(), 2, -1) };
                    if n < 0
                        && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                    {
                        break;
                    }
                    logger.flush();
                    // The write end closed: the tracer is going.
                    if polled[1].revents != 0 {
                        break;
                    }
                }
            })
            .map_err(TracerError::KernelLog)?;
        Ok(Self {
            stop: Some(stop),
            reader: Some(reader),
        })
    }
}

impl Drop for KernelLog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(reader) = self.reader.take() {
            // A panic in the reader (a malformed record) has been printed
            // already; the tracer goes on ending.
            let _ = reader.join();
        }
    }
}
