//! The per-user runtime folder: session sockets and notes (`session/`),
//! the lock perf-event uprobe creators share (`kernel/unlinker.rs`) and a
//! session's idle recordings live there. Only its owner may create, list
//! or connect to anything in it (0700), so no other user can take a
//! session's name, pose as its daemon, or plant a file asys will open.
//! Root's is `/run/asys` (`/tmp/asys-0` where /run is missing), another
//! user's `$XDG_RUNTIME_DIR/asys` or `/tmp/asys-<uid>`. A top-level module
//! because the kernel, session and cli stages all use it.
use std::{
    ffi::CString,
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
};

#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("session folder {0}: {1}; refusing to use it")]
    Unsafe(PathBuf, String),
    #[error("session folder {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// The effective uid: whose sessions these are.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Where the caller's sessions live (not checked yet).
pub fn location() -> PathBuf {
    let uid = euid();
    if uid == 0 {
        return if Path::new("/run").is_dir() {
            PathBuf::from("/run/asys")
        } else {
            PathBuf::from("/tmp/asys-0")
        };
    }
    // The runtime folder only when it is really ours: an inherited one
    // (`sudo -u`, a test harness) belongs to someone else.
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && runtime.is_absolute()
        && std::fs::symlink_metadata(&runtime)
            .is_ok_and(|m| m.is_dir() && std::os::unix::fs::MetadataExt::uid(&m) == uid)
    {
        return runtime.join("asys");
    }
    PathBuf::from(format!("/tmp/asys-{uid}"))
}

/// The caller's session folder, made if `create` and missing. None: it
/// does not exist (and was not to be made), so there are no sessions.
pub fn open(create: bool) -> Result<Option<PathBuf>, DirError> {
    open_at(&location(), create)
}

/// The caller's session folder, made if missing.
pub fn ensure() -> Result<PathBuf, DirError> {
    let path = location();
    open_at(&path, true)?.ok_or_else(|| DirError::Io(path, std::io::ErrorKind::NotFound.into()))
}

/// Opens `path` without following a link and checks that it is a folder of
/// ours that nobody else may enter.
pub fn open_at(path: &Path, create: bool) -> Result<Option<PathBuf>, DirError> {
    let io = |e| DirError::Io(path.to_path_buf(), e);
    let unsafe_dir = |why: String| DirError::Unsafe(path.to_path_buf(), why);
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| unsafe_dir("the path holds a NUL byte".into()))?;
    if create {
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(io(e));
            }
        }
    }
    // SAFETY: `c` is a NUL-terminated path; the flags ask for no creation.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) if !create => Ok(None),
            // With O_DIRECTORY a link says ENOTDIR, without it ELOOP.
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
                Err(unsafe_dir(if link {
                    "it is a symbolic link".into()
                } else {
                    "it is not a folder".into()
                }))
            }
            // Another user's folder is closed to us: say whose it is.
            _ => match std::fs::symlink_metadata(path) {
                Ok(m) if std::os::unix::fs::MetadataExt::uid(&m) != euid() => {
                    Err(unsafe_dir(format!(
                        "it belongs to uid {}, not {}",
                        std::os::unix::fs::MetadataExt::uid(&m),
                        euid()
                    )))
                }
                _ => Err(io(e)),
            },
        };
    }
    // SAFETY: fd was just opened above and is owned by nothing else.
    let dir = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: all-zero is a valid stat; fstat fills it from a live fd.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `dir` is open and `st` is a writable stat.
    if unsafe { libc::fstat(std::os::fd::AsRawFd::as_raw_fd(&dir), &mut st) } != 0 {
        return Err(io(std::io::Error::last_os_error()));
    }
    let me = euid();
    if st.st_uid != me {
        return Err(unsafe_dir(format!(
            "it belongs to uid {}, not {me}",
            st.st_uid
        )));
    }
    if st.st_mode & 0o077 != 0 {
        return Err(unsafe_dir(format!(
            "other users may enter it (mode {:o}, expected 700)",
            st.st_mode & 0o7777
        )));
    }
    Ok(Some(path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh path under the temp folder for one case.
    fn scratch(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("asys-dir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_dir_all(&p);
        p
    }

    #[test]
    fn made_private_and_checked() {
        use std::os::unix::fs::PermissionsExt as _;
        let p = scratch("made");
        assert!(
            open_at(&p, false).unwrap().is_none(),
            "nothing made when asked not to"
        );
        assert!(!p.exists());
        assert_eq!(open_at(&p, true).unwrap(), Some(p.clone()));
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
        let e = open_at(&p, true).unwrap_err().to_string();
        assert!(e.contains("other users may enter it (mode 750"), "{e}");
        std::fs::remove_dir(&p).unwrap();
    }

    #[test]
    fn a_link_or_a_file_is_refused() {
        let target = scratch("target");
        std::fs::create_dir(&target).unwrap();
        let link = scratch("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for create in [false, true] {
            let e = open_at(&link, create).unwrap_err().to_string();
            assert!(
                e.contains("is a symbolic link") && e.contains("refusing"),
                "{e}"
            );
        }
        std::fs::remove_file(&link).unwrap();
        std::fs::write(&link, "").unwrap();
        let e = open_at(&link, true).unwrap_err().to_string();
        assert!(e.contains("not a folder"), "{e}");
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir(&target).unwrap();
    }
}
