//! The one way asys opens a file whose path another process (or user)
//! chose.
//!
//! Root on a shared machine must not be stalled or steered by what an
//! unprivileged neighbour puts at a path asys is about to read:
//! - a FIFO (or a device) would block a plain `open` until someone opens its
//!   other end: the file is opened `O_NONBLOCK`, and anything but a regular
//!   file is refused on the descriptor, never on the name;
//! - a symbolic link would lead root's reader to a file of the planter's
//!   choice: a path the kernel gave (`/proc/PID/maps` shows the resolved
//!   path) is opened with no link followed at all (`RESOLVE_NO_SYMLINKS`), a
//!   file in a world-writable folder (`/tmp/perf-PID.map`) with none followed
//!   at its last component (`O_NOFOLLOW`); only descriptors asys holds
//!   itself (`/proc/self/fd/N`, `/proc/PID/map_files/...`, which are the
//!   kernel's own links) and paths asys's own user gave are followed;
//! - a huge (sparse) file would cost time and memory: files over the
//!   policy's size are refused;
//! - an open that blocks all the same (a hung NFS or FUSE mount) runs on a
//!   thread of its own and is abandoned after [`OPEN_DEADLINE`], so that
//!   the recording, and SIGINT/SIGTERM, go on.
use std::{
    ffi::CString,
    fs::File,
    os::{
        fd::FromRawFd,
        unix::fs::{FileTypeExt, MetadataExt},
    },
    path::{Path, PathBuf},
    time::Duration,
};

/// How long an open may take before it is abandoned (a local open takes
/// microseconds; one that takes this long is stuck).
pub const OPEN_DEADLINE: Duration = Duration::from_millis(500);

/// Larger files are not mapped: the largest real libraries asys probes
/// (PyTorch's CUDA libraries) are under 2 GiB.
pub const MAX_MAPPED_BYTES: u64 = 4 << 30;

/// Which symbolic links an open may follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// None anywhere on the path: for paths the kernel resolved
    /// (`/proc/PID/maps`, `/proc/PID/cwd`), in which a link means the file
    /// was replaced since.
    Never,
    /// None at the last component (`O_NOFOLLOW`): for a file in a shared
    /// folder such as `/tmp`, where the folder itself is the system's.
    NotLast,
    /// Any: for paths asys's own user gave or asys chose (a program on
    /// the command line, its interpreter, system debug folders).
    Follow,
}

/// What a file must be to be opened.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub links: Links,
    /// Files larger than this are refused.
    pub max_bytes: u64,
    /// The file must belong to this user or to root.
    pub owner: Option<u32>,
    /// The file must have one name: a hard link in a shared folder could
    /// make any file of the planter's look like theirs to read.
    pub single_name: bool,
}

impl Policy {
    /// A file named in `/proc/PID/maps` (or found by asys under a path the
    /// kernel gave), to be mapped.
    pub const MAPPED: Policy = Policy {
        links: Links::Never,
        max_bytes: MAX_MAPPED_BYTES,
        owner: None,
        single_name: false,
    };
    /// A file asys's user named or asys looks for in system folders.
    pub const NAMED: Policy = Policy {
        links: Links::Follow,
        max_bytes: MAX_MAPPED_BYTES,
        owner: None,
        single_name: false,
    };
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0}: not a regular file ({1}); not read")]
    NotRegular(PathBuf, &'static str),
    #[error("{0}: not a regular file with a single name; not read")]
    SeveralNames(PathBuf),
    #[error("{path}: owned by uid {owner}, not by uid {expected} or root; not read")]
    ForeignOwner {
        path: PathBuf,
        owner: u32,
        expected: u32,
    },
    #[error("{path}: {size} bytes, over the {max} asys reads; not read")]
    TooLarge { path: PathBuf, size: u64, max: u64 },
    #[error("{0}: opening it took over {1:?} (a hung file system?); abandoned")]
    Stalled(PathBuf, Duration),
}

impl OpenError {
    /// There is no file at the path (the usual case for an optional file,
    /// not worth a warning).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io(_, e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// A file opened under a [`Policy`], with what `fstat` said of it.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    pub len: u64,
    /// (device, inode).
    pub key: (u64, u64),
}

/// Opens `path` read-only under `policy` (see the module's text): without
/// blocking, checked on the descriptor, abandoned if it stalls.
pub fn open(path: &Path, policy: &Policy) -> Result<Opened, OpenError> {
    let links = if is_own_descriptor(path) {
        // A magic link of asys's own descriptor or the kernel's map_files
        // entry: the very file asys opened or the process maps.
        Links::Follow
    } else {
        policy.links
    };
    let owned = path.to_path_buf();
    let file = with_deadline(OPEN_DEADLINE, move || open_nonblocking(&owned, links))
        .ok_or_else(|| OpenError::Stalled(path.into(), OPEN_DEADLINE))?
        .map_err(|e| OpenError::Io(path.into(), e))?;
    let md = file.metadata().map_err(|e| OpenError::Io(path.into(), e))?;
    let ft = md.file_type();
    if !ft.is_file() {
        let what = if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_dir() {
            "a folder"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_char_device() || ft.is_block_device() {
            "a device"
        } else {
            "not a plain file"
        };
        return Err(OpenError::NotRegular(path.into(), what));
    }
    if policy.single_name && md.nlink() != 1 {
        return Err(OpenError::SeveralNames(path.into()));
    }
    if let Some(expected) = policy.owner
        && md.uid() != expected
        && md.uid() != 0
    {
        return Err(OpenError::ForeignOwner {
            path: path.into(),
            owner: md.uid(),
            expected,
        });
    }
    if md.len() > policy.max_bytes {
        return Err(OpenError::TooLarge {
            path: path.into(),
            size: md.len(),
            max: policy.max_bytes,
        });
    }
    Ok(Opened {
        file,
        len: md.len(),
        key: (md.dev(), md.ino()),
    })
}

/// `/proc/self/fd/N` (a descriptor asys holds) or `/proc/PID/map_files/...`
/// (the kernel's link to the mapped file itself).
fn is_own_descriptor(path: &Path) -> bool {
    let s = path.as_os_str().as_encoded_bytes();
    if s.starts_with(b"/proc/self/fd/") {
        return true;
    }
    // /proc/<digits>/map_files/<range>
    let Some(rest) = s.strip_prefix(b"/proc/") else {
        return false;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    digits > 0 && rest[digits..].starts_with(b"/map_files/")
}

/// `open(2)`/`openat2(2)` with O_NONBLOCK (a FIFO opens at once, and is
/// then refused as one), the links allowed by `links`.
fn open_nonblocking(path: &Path, links: Links) -> std::io::Result<File> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    if links == Links::NotLast {
        flags |= libc::O_NOFOLLOW;
    }
    if links == Links::Never {
        // SAFETY: open_how is plain integers; all-zero is "nothing asked".
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_NOFOLLOW) as u64;
        how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: a NUL-terminated path and an open_how of the size passed,
        // both alive for the call.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                libc::AT_FDCWD,
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: openat2 returned a new descriptor that nothing else owns.
            return Ok(unsafe { File::from_raw_fd(fd as i32) });
        }
        let e = std::io::Error::last_os_error();
        // Before 5.6, or a seccomp filter that does not know openat2: the
        // last component at least is not followed.
        if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
            return Err(e);
        }
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: a NUL-terminated path, alive for the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: open returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Runs `f` on a thread of its own and waits at most `limit` for it: None
/// if it has not finished by then (the thread is left to finish on its own,
/// and whatever it returns is dropped).
pub fn with_deadline<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("asys-open".into())
        .stack_size(64 << 10)
        .spawn(move || {
            let _ = tx.send(f());
        });
    match spawned {
        Ok(_) => rx.recv_timeout(limit).ok(),
        // No thread to be had: nothing is run rather than risk blocking.
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("asys-untrusted-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_fifo_is_refused_at_once_not_waited_on() {
        let d = scratch("fifo");
        let fifo = d.join("lib.so");
        let c = CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let t = std::time::Instant::now();
        for policy in [Policy::MAPPED, Policy::NAMED] {
            let e = open(&fifo, &policy).unwrap_err();
            assert!(matches!(e, OpenError::NotRegular(_, "a FIFO")), "{e}");
        }
        assert!(t.elapsed() < Duration::from_millis(400));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn links_are_followed_only_where_the_policy_says() {
        let d = scratch("links");
        std::fs::write(d.join("real"), b"x").unwrap();
        std::fs::create_dir(d.join("dir")).unwrap();
        std::fs::write(d.join("dir/f"), b"y").unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("dir"), d.join("dirlink")).unwrap();
        let last = Policy {
            links: Links::NotLast,
            ..Policy::MAPPED
        };
        assert!(open(&d.join("link"), &Policy::MAPPED).is_err());
        assert!(open(&d.join("link"), &last).is_err());
        assert!(open(&d.join("link"), &Policy::NAMED).is_ok());
        // A link on the way: refused only by Never.
        assert!(open(&d.join("dirlink/f"), &Policy::MAPPED).is_err());
        assert!(open(&d.join("dirlink/f"), &last).is_ok());
        assert!(open(&d.join("real"), &Policy::MAPPED).is_ok());
        // asys's own descriptor is followed whatever the policy.
        let f = File::open(d.join("real")).unwrap();
        use std::os::fd::AsRawFd;
        let own = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
        assert_eq!(open(&own, &Policy::MAPPED).unwrap().len, 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn size_owner_and_names_are_checked_on_the_descriptor() {
        let d = scratch("checks");
        let big = d.join("sparse");
        let f = File::create(&big).unwrap();
        f.set_len(2 << 30).unwrap();
        let small = Policy {
            max_bytes: 1 << 20,
            ..Policy::MAPPED
        };
        assert!(matches!(
            open(&big, &small),
            Err(OpenError::TooLarge { .. })
        ));
        std::fs::hard_link(&big, d.join("second")).unwrap();
        let single = Policy {
            single_name: true,
            ..Policy::MAPPED
        };
        assert!(matches!(
            open(&big, &single),
            Err(OpenError::SeveralNames(_))
        ));
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        if me == 0 {
            let c = CString::new(big.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid C string.
            assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
            let owned = Policy {
                owner: Some(1234),
                ..Policy::MAPPED
            };
            assert!(matches!(
                open(&big, &owned),
                Err(OpenError::ForeignOwner { owner: 65534, .. })
            ));
        }
        assert!(
            open(&d.join("missing"), &Policy::MAPPED)
                .unwrap_err()
                .is_not_found()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_stalled_call_is_abandoned_at_its_deadline() {
        let t = std::time::Instant::now();
        let r = with_deadline(Duration::from_millis(100), || {
            std::thread::sleep(Duration::from_secs(3));
            1
        });
        assert_eq!(r, None);
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(with_deadline(Duration::from_secs(5), || 2), Some(2));
    }
}
