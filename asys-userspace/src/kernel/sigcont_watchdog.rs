//! A helper process that outlives asys: if asys dies (SIGKILL, a crash)
//! while the loader hook holds a process stopped, nobody would send it
//! SIGCONT, and it would stay in state T until its launcher exits.
//!
//! At load the tracer starts `asys __watchdog SOCKET MAP`: a fresh exec of
//! asys's own binary (never a fork of the multithreaded asys that keeps
//! running its code), in a process group of its own (a terminal's Ctrl+C
//! does not reach it), with stdio on /dev/null. It inherits two descriptors
//! and nothing else (everything asys opens is close-on-exec): the read end
//! of a socket pair whose other end only asys holds, and the `STOPPED` map, which
//! the holding keeps alive after asys's own descriptors are gone. It blocks
//! reading it:
//! - a byte: asys is ending normally and has continued what it stopped
//!   itself; the watchdog exits at once;
//! - end of file: asys died. Its link descriptors closed with it, so the
//!   loader hook is being detached; a hook that was running may still stop
//!   a process. The watchdog sends SIGCONT to every pid in `STOPPED`
//!   (SIGCONT also cancels a SIGSTOP not yet acted on), a few times over
//!   [`SCAN_ROUNDS`] x [`SCAN_INTERVAL`], then exits.
use std::{
    io::Read,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd},
        unix::process::CommandExt,
    },
    process::{Child, Command, Stdio},
    time::Duration,
};

use aya::maps::{HashMap as BpfHashMap, Map, MapData};

/// Scans of `STOPPED` after asys died and the hook was disarmed,
/// [`SCAN_INTERVAL`] apart, for 2 s: a hook already past the disarm check
/// when asys died may be preempted on a loaded machine before it records
/// its stop, and the scans must outlast it (they cost a map walk each).
const SCAN_ROUNDS: u32 = 100;
const SCAN_INTERVAL: Duration = Duration::from_millis(20);

/// The hidden subcommand the helper runs.
pub const SUBCOMMAND: &str = "__watchdog";

#[derive(Debug, thiserror::Error)]
pub enum WatchdogError {
    #[error("cannot make the watchdog's socket: {0}")]
    Pipe(std::io::Error),
    #[error("cannot start the watchdog: {0}")]
    Spawn(std::io::Error),
    #[error("descriptor {0} was not handed to the watchdog")]
    NotInherited(RawFd),
    #[error("the map of stopped processes: {0}")]
    Map(#[from] aya::maps::MapError),
}

/// asys's side: the helper, and asys's end of their socket.
pub struct Watchdog {
    child: Option<Child>,
    tell: Option<OwnedFd>,
}

impl Watchdog {
    /// Starts the helper, handing it `stopped` (the `STOPPED` map).
    pub fn start(stopped: BorrowedFd<'_>) -> Result<Self, WatchdogError> {
        // A socket pair rather than a pipe: asys's word to a helper that is
        // gone must fail with EPIPE (MSG_NOSIGNAL), not kill asys by SIGPIPE.
        let mut fds = [-1; 2];
        // SAFETY: socketpair writes two descriptors into the array.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made != 0 {
            return Err(WatchdogError::Pipe(std::io::Error::last_os_error()));
        }
        // SAFETY: both were just created, and each is owned once.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (read_fd, map_fd) = (read.as_raw_fd(), stopped.as_raw_fd());
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg(SUBCOMMAND)
            .arg(read_fd.to_string())
            .arg(map_fd.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        // SAFETY: runs in the child between fork and exec, and calls only
        // fcntl (async-signal-safe): the two descriptors, close-on-exec in
        // asys, stay open across this one exec.
        unsafe {
            cmd.pre_exec(move || {
                for fd in [read_fd, map_fd] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(WatchdogError::Spawn)?;
        // The helper has its copy; asys only writes.
        drop(read);
        Ok(Self {
            child: Some(child),
            tell: Some(write),
        })
    }

    /// asys ends normally: the helper exits without looking, and is reaped.
    pub fn dismiss(&mut self) {
        if let Some(fd) = self.tell.take() {
            // SAFETY: sends one byte from a local on our socket.
            unsafe { libc::send(fd.as_raw_fd(), [1u8].as_ptr().cast(), 1, libc::MSG_NOSIGNAL) };
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.dismiss();
    }
}

/// The helper's side (`asys __watchdog SOCKET MAP`): waits for asys to end,
/// and if it died, continues what the loader hook stopped.
pub fn run(socket: RawFd, map: RawFd) -> Result<(), WatchdogError> {
    let (socket, map) = (inherited(socket)?, inherited(map)?);
    let mut byte = [0u8; 1];
    let mut socket = std::fs::File::from(socket);
    let died = loop {
        match socket.read(&mut byte) {
            Ok(0) => break true,
            Ok(_) => break false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // Nothing more can be learnt from the socket: act as if asys died
            // (continuing a process that is not stopped does nothing).
            Err(_) => break true,
        }
    };
    if !died {
        return Ok(());
    }
    let mut stopped: BpfHashMap<MapData, u32, u32> =
        BpfHashMap::try_from(Map::HashMap(MapData::from_fd(map)?))?;
    // First disarm the loader hook: however long the kernel takes to detach
    // it from a dead asys, it stops nothing more, so the scans below catch
    // every stop there was. A full map cannot take the key; the scans still
    // run.
    let _ = stopped.insert(asys_common::STOPPED_DISARMED, 1, 0);
    for round in 0..SCAN_ROUNDS {
        if round > 0 {
            std::thread::sleep(SCAN_INTERVAL);
        }
        let pids: Vec<u32> = stopped
            .keys()
            .filter_map(Result::ok)
            .filter(|&pid| pid != asys_common::STOPPED_DISARMED)
            .collect();
        for pid in pids {
            // SAFETY: kill has no memory effects; a pid that is gone only
            // makes it fail.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            let _ = stopped.remove(&pid);
        }
    }
    Ok(())
}

/// Takes ownership of a descriptor asys handed over, after checking that it
/// is open (a mistyped `__watchdog` command line must not take another).
fn inherited(fd: RawFd) -> Result<OwnedFd, WatchdogError> {
    // SAFETY: F_GETFD only looks the descriptor up.
    if fd <= 2 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(WatchdogError::NotInherited(fd));
    }
    // SAFETY: an open descriptor that asys passed to this process for the
    // watchdog alone; nothing else in it uses it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// For `Tracer`: the `STOPPED` map's descriptor.
pub fn map_fd(map: &BpfHashMap<MapData, u32, u32>) -> BorrowedFd<'_> {
    aya::maps::IterableMap::map(map).fd().as_fd()
}
