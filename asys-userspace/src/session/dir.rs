//! The session sockets and notes in the per-user runtime folder
//! ([`crate::runtime_dir`]).
use std::path::{Path, PathBuf};

use crate::runtime_dir::{self, DirError};

/// Paths of the listening Unix sockets the kernel lists: a socket file
/// whose daemon died (SIGKILL) stays behind but is not listed here.
pub fn listening_paths() -> Option<std::collections::HashSet<PathBuf>> {
    let text = std::fs::read_to_string("/proc/net/unix").ok()?;
    Some(
        text.lines()
            .skip(1)
            .filter_map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                // Num RefCount Protocol Flags Type St Inode Path; 00010000: listening.
                (cols.len() >= 8 && cols[3] == "00010000" && cols[7].starts_with('/'))
                    .then(|| PathBuf::from(cols[7]))
            })
            .collect(),
    )
}

/// A session's socket file: `ID.NAME` (names hold no '/').
pub fn socket_path(dir: &Path, id: u32, name: &str) -> PathBuf {
    dir.join(format!("{id}.{name}"))
}

/// The id and name in a socket file's name.
pub fn parse_socket_name(file: &str) -> Option<(u32, String)> {
    let (id, name) = file.split_once('.')?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || name.is_empty() {
        return None;
    }
    Some((id.parse().ok()?, name.to_string()))
}

/// Held while a daemon chooses its id and name and binds its socket, so two
/// daemons never take the same, and a stale socket is removed by one only.
pub struct Lock {
    _file: std::fs::File,
}

impl Lock {
    pub fn take(dir: &Path) -> std::io::Result<Lock> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir.join(".lock"))?;
        loop {
            // SAFETY: flock on a descriptor we own; released when it closes.
            if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) } == 0 {
                return Ok(Lock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// The note a session leaves of failures nobody was told of: hidden, so it
/// is never taken for a socket.
fn note_path(dir: &Path, id: u32, name: &str) -> PathBuf {
    dir.join(format!(".{id}.{name}.failed"))
}

/// Leaves `lines` for the next `sessions list` or `status` (see
/// [`take_notes`]). The folder is the caller's own, 0700: nobody else can
/// have planted anything under the name, and O_NOFOLLOW makes sure.
pub fn leave_note(id: u32, name: &str, lines: &[String]) -> Result<(), DirError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = runtime_dir::ensure()?;
    let path = note_path(&dir, id, name);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o600)
        .open(&path)
        .map_err(|e| DirError::Io(path.clone(), e))?;
    for l in lines {
        writeln!(f, "{l}").map_err(|e| DirError::Io(path.clone(), e))?;
    }
    Ok(())
}

/// The notes ended sessions left, by session name, each removed once read.
pub fn take_notes() -> Vec<(String, Vec<String>)> {
    let Ok(Some(dir)) = runtime_dir::open(false) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(session) = file
            .to_str()
            .and_then(|f| f.strip_prefix('.')?.strip_suffix(".failed"))
            .and_then(parse_socket_name)
        else {
            continue;
        };
        let path = e.path();
        // Only a plain file of ours is a note.
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(&path) {
            let _ = std::fs::remove_file(&path);
            notes.push((session.1, text.lines().map(str::to_string).collect()));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_round_trip() {
        let p = socket_path(Path::new("/d"), 7, "a.b[default]");
        let file = p.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_socket_name(file), Some((7, "a.b[default]".into())));
        assert_eq!(parse_socket_name(".lock"), None);
        assert_eq!(parse_socket_name("x.y"), None);
        assert_eq!(parse_socket_name("3."), None);
    }
}
