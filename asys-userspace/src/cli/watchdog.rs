//! `asys __watchdog SOCKET MAP`: the helper asys starts at load to continue
//! the processes the loader hook stopped should asys die (see
//! `kernel/sigcont_watchdog.rs`). Not for use by hand.
pub fn main(socket: i32, map: i32) -> anyhow::Result<u8> {
    // Checked before it waits: by hand, with a descriptor that is not
    // asys's socket (a terminal, a file), it would wait on the wrong thing
    // or take a file for asys's end.
    if socket == map || !is_socket(socket) {
        anyhow::bail!(
            "__watchdog is started by asys itself, not by hand (descriptor {socket} is not \
             the socket it hands over, or is the same as the map's {map})"
        );
    }
    crate::kernel::sigcont_watchdog::run(socket, map)?;
    Ok(0)
}

/// Whether `fd` is open and a socket.
fn is_socket(fd: i32) -> bool {
    // SAFETY: stat is plain integers; zeroed is a valid value for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat only looks the descriptor up and writes the stat it is
    // given; a descriptor that is not open is an error, not undefined.
    let rc = unsafe { libc::fstat(fd, &mut st) };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
}
