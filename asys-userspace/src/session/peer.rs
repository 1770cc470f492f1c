//! Who is at the other end of a session socket (SO_PEERCRED), and whether
//! it runs this very asys executable.
use std::os::{fd::AsRawFd, unix::fs::MetadataExt as _};

/// The credentials the kernel recorded for the peer: for a client, when it
/// connected; for a daemon, when it started listening.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
}

pub fn of(sock: &impl AsRawFd) -> std::io::Result<Peer> {
    // SAFETY: ucred is three integers; zero is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Peer {
        pid: cred.pid,
        uid: cred.uid,
    })
}

/// Whether `pid` runs the same executable file as this process (same
/// device and inode), so a daemon is one that asys itself started.
pub fn runs_this_executable(pid: i32) -> std::io::Result<bool> {
    let theirs = std::fs::metadata(format!("/proc/{pid}/exe"))?;
    let ours = std::fs::metadata("/proc/self/exe")?;
    Ok(theirs.dev() == ours.dev() && theirs.ino() == ours.ino())
}
