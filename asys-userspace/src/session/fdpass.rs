//! Sending file descriptors over a Unix socket (SCM_RIGHTS), so that the
//! application a daemon launches writes to the terminal of `asys launch`.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// At most this many descriptors travel with one message.
pub const MAX_FDS: usize = 3;

/// A message of one buffer, with `control` for the descriptors.
fn header(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
    // SAFETY: msghdr is integers and pointers; all-zero (null, 0) is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len();
    msg
}

/// Sends `data` (all of it) with `fds` attached to its first byte.
pub fn send(sock: &impl AsRawFd, data: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    assert!(fds.len() <= MAX_FDS);
    let mut sent = 0;
    if !fds.is_empty() && !data.is_empty() {
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut _,
            iov_len: data.len(),
        };
        // SAFETY: CMSG_SPACE is arithmetic on its argument.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) } as usize;
        let mut control = vec![0u8; space];
        let msg = header(&mut iov, &mut control);
        // SAFETY: `control` is CMSG_SPACE(fds) bytes, so CMSG_FIRSTHDR is
        // non-null and its header and CMSG_LEN(fds) data bytes lie inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                fds.len(),
            );
        }
        // SAFETY: msg points at iov (data) and control, both alive here.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        sent = n as usize;
    }
    while sent < data.len() {
        let rest = &data[sent..];
        // SAFETY: sends from a live slice, within its length.
        let n = unsafe {
            libc::send(
                sock.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

/// Reads one line (up to and without the newline) and the descriptors that
/// came with it. Gives up on lines longer than `max` bytes, on more than
/// [`MAX_FDS`] descriptors, and at `deadline` (for the whole line, so a
/// client sending a byte now and then cannot hold it for long).
pub fn recv_line(
    sock: &std::os::unix::net::UnixStream,
    max: usize,
    deadline: std::time::Instant,
) -> std::io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut line = Vec::new();
    let mut fds = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        sock.set_read_timeout(Some(left))?;
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: CMSG_SPACE is arithmetic on its argument.
        let space =
            unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
        let mut control = vec![0u8; space];
        let mut msg = header(&mut iov, &mut control);
        // SAFETY: msg points at buf (through iov) and control, both alive and
        // as long as the lengths it gives.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: the kernel filled `control` and set msg_controllen; the
        // CMSG_* walk stays inside it, and each SCM_RIGHTS descriptor was
        // installed in this process for us alone, so we may own it.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    for i in 0..bytes / std::mem::size_of::<RawFd>() {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if fds.len() > MAX_FDS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "too many descriptors",
            ));
        }
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let chunk = &buf[..n as usize];
        if let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&chunk[..end]);
            return Ok((line, fds));
        }
        line.extend_from_slice(chunk);
        if line.len() > max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "request too long",
            ));
        }
    }
}
