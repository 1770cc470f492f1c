//! `asys dump`: asks the caller's running flight recorders for a report of
//! their window now, waits for each, and prints its path. The recorders are
//! found by the notes they leave in the caller's runtime folder
//! (`record::flight_registration`), and asked with SIGUSR1, sent through a
//! pidfd opened before the note's start time is checked again, so that a
//! pid reused meanwhile is never signalled.
use std::{
    os::fd::{FromRawFd as _, OwnedFd},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use clap::Args;

use crate::record::flight_registration::{self, Note};

#[derive(Args, Debug)]
#[command(override_usage = "asys dump [<args>]")]
pub struct DumpArgs {
    /// Only the flight recorder of this asys process (default: all of the
    /// caller's).
    #[arg(long = "pid", value_name = "pid")]
    pub pid: Option<u32>,

    /// How long to wait for each report to be written (seconds); 0: do not
    /// wait, only ask.
    #[arg(long = "timeout", default_value = "300", value_name = "seconds")]
    pub timeout: u64,
}

pub fn run(args: DumpArgs) -> anyhow::Result<u8> {
    let mut notes = flight_registration::live()?;
    if let Some(pid) = args.pid {
        notes.retain(|n| n.pid == pid);
        if notes.is_empty() {
            anyhow::bail!("process {pid} is not a flight recorder of this user's");
        }
    }
    if notes.is_empty() {
        anyhow::bail!(
            "no flight recorder of this user's is running (asys profile or attach with \
             --always-on or --flight-recorder)"
        );
    }
    let mut asked = Vec::new();
    let mut failed = false;
    for note in notes {
        match ask(&note) {
            Ok(()) => asked.push(note),
            Err(e) => {
                eprintln!("asys dump: process {}: {e:#}", note.pid);
                failed = true;
            }
        }
    }
    if args.timeout == 0 {
        for n in &asked {
            eprintln!("asys dump: asked process {} for a report", n.pid);
        }
        return Ok(u8::from(failed));
    }
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    for note in asked {
        match wait_for_report(&note, deadline) {
            Ok(report) => println!("{}", report.display()),
            Err(e) => {
                eprintln!("asys dump: process {}: {e}", note.pid);
                failed = true;
            }
        }
    }
    Ok(u8::from(failed))
}

/// Sends SIGUSR1 to the note's recorder, if it is still that process.
fn ask(note: &Note) -> anyhow::Result<()> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor or -1; nothing is borrowed.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, note.pid as libc::pid_t, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error()).context("pidfd_open");
    }
    // SAFETY: `raw` is a descriptor pidfd_open just returned, owned by
    // nothing else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    // The pidfd holds the process it was opened for: checked now, the
    // start time proves it is the recorder of the note.
    if !flight_registration::is_running(note) {
        anyhow::bail!("it ended");
    }
    use std::os::fd::AsRawFd as _;
    // SAFETY: pidfd_send_signal takes the open pidfd, a signal number and
    // a null siginfo (the kernel then fills in a kill()'s).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGUSR1,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("pidfd_send_signal");
    }
    Ok(())
}

/// Waits until the recorder's note counts one more report than `note`.
fn wait_for_report(note: &Note, deadline: Instant) -> Result<std::path::PathBuf, String> {
    loop {
        match flight_registration::of(note.pid) {
            Some(now) if now.start_time == note.start_time && now.reports > note.reports => {
                return now
                    .last_report
                    .ok_or_else(|| "its note names no report".to_string());
            }
            Some(_) => {}
            None => return Err("it ended before writing the report".into()),
        }
        if Instant::now() >= deadline {
            return Err("no report yet (still writing? see --timeout)".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
