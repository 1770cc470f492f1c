//! Opening the file a process has mapped, wherever it lives.
//!
//! The path in `/proc/PID/maps` is the path inside the process's own mount
//! namespace: in a container it names another file on the host, or none.
//! The kernel's `/proc/PID/map_files/START-END` is the mapped file itself (as
//! blazesym reads it), so it is opened first; where that is refused,
//! `/proc/PID/root` is the process's root and the path is resolved inside it
//! with `openat2(RESOLVE_IN_ROOT)`, so a link in the container cannot lead
//! out of it. Either way the opened file must be the one mapped, or it is
//! not used: the inode must be the mapping's, and for a file found by its
//! path the device too. (A `map_files` link is the mapping's own file, so
//! its inode only guards against the range being mapped anew meanwhile; its
//! device is not compared because btrfs subvolumes and some overlayfs set-ups
//! report another `st_dev` than the superblock device the maps file shows.)
use std::{
    ffi::CString,
    fs::File,
    os::{fd::FromRawFd, unix::fs::MetadataExt},
    path::{Path, PathBuf},
};

use crate::process::procfs::MapsEntry;

#[derive(Debug, thiserror::Error)]
pub enum MappedFileError {
    #[error("{path} (mapped by process {pid}): {source}")]
    Open {
        pid: u32,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} (mapped by process {pid}): the file reached is not the one mapped (device and inode differ)"
    )]
    NotTheMappedFile { pid: u32, path: PathBuf },
}

/// A file a process maps, opened and checked to be that file.
#[derive(Debug)]
pub struct MappedFile {
    pub file: File,
    /// (device, inode) of the file, as `fstat` gives them.
    pub key: (u64, u64),
    /// Its size in bytes.
    pub len: u64,
}

impl MappedFile {
    /// A path that names this very file for as long as it is open (for the
    /// kernel's uprobe attach and for readers that take a path): the
    /// descriptor's magic link in `/proc/self/fd`.
    pub fn fd_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// Opens the file `m` of process `pid` maps: through `map_files`, else
/// inside the process's root; either must be the mapped (device, inode).
/// Both go through [`asys_report::untrusted::open`]'s rules: no blocking open (the
/// path may now be a FIFO the process put there after unlinking the file it
/// mapped), regular files only, and a deadline.
pub fn open(pid: u32, m: &MapsEntry) -> Result<MappedFile, MappedFileError> {
    use asys_report::untrusted::open::{OPEN_DEADLINE, OpenError, Policy, with_deadline};
    raise_fd_limit();
    let by_range = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
    let err = |source| MappedFileError::Open {
        pid,
        path: m.path.clone(),
        source,
    };
    let (opened, by_path) = match asys_report::untrusted::open::open(&by_range, &Policy::MAPPED) {
        Ok(o) => (o, false),
        Err(OpenError::Io(..)) => {
            let root = PathBuf::from(format!("/proc/{pid}/root"));
            let path = path_str(m);
            let file = with_deadline(OPEN_DEADLINE, move || open_beneath(&root, &path, false))
                .ok_or_else(|| err(std::io::Error::from(std::io::ErrorKind::TimedOut)))?
                .map_err(err)?;
            let md = file.metadata().map_err(err)?;
            if !md.is_file() || md.len() > asys_report::untrusted::open::MAX_MAPPED_BYTES {
                return Err(MappedFileError::NotTheMappedFile {
                    pid,
                    path: m.path.clone(),
                });
            }
            (
                asys_report::untrusted::open::Opened {
                    file,
                    len: md.len(),
                    key: (md.dev(), md.ino()),
                },
                true,
            )
        }
        // Not a regular file, too large, or stalled: not the mapped file.
        Err(_) => {
            return Err(MappedFileError::NotTheMappedFile {
                pid,
                path: m.path.clone(),
            });
        }
    };
    let same = match m.key() {
        Some((dev, ino)) => opened.key.1 == ino && (!by_path || opened.key.0 == dev),
        None => false,
    };
    if !same {
        return Err(MappedFileError::NotTheMappedFile {
            pid,
            path: m.path.clone(),
        });
    }
    Ok(MappedFile {
        key: opened.key,
        len: opened.len,
        file: opened.file,
    })
}

/// Lets asys hold as many descriptors as the hard limit allows: probed
/// libraries and the files of other mount namespaces stay open for the run,
/// and system-wide on a host with many containers they pass the usual soft
/// limit of 1024 (an open refused would leave a library unprobed). Once.
fn raise_fd_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: getrlimit writes the struct it is given; all-zero is valid.
        let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
        // SAFETY: a valid resource and struct pointer.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0
            && lim.rlim_cur < lim.rlim_max
        {
            lim.rlim_cur = lim.rlim_max;
            // SAFETY: as above; raising the soft limit up to the hard one
            // needs no privilege. A failure leaves the limit as it was.
            unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
        }
    });
}

fn path_str(m: &MapsEntry) -> String {
    m.path.to_string_lossy().into_owned()
}

/// Whether the host reaches the mapped file by the mapping's own path (then
/// anything later can read it by that path): false in another mount
/// namespace where the path names another file or none.
pub fn reachable_by_path(m: &MapsEntry) -> bool {
    // lstat, not stat: a link at the path is not the mapped file (maps show
    // resolved paths), and is never followed.
    std::fs::symlink_metadata(&m.path).is_ok_and(|md| Some((md.dev(), md.ino())) == m.key())
}

/// Opens `path` inside `root` as if `root` were `/`: `..` and absolute links
/// stay inside it (RESOLVE_IN_ROOT), magic links (`/proc/*/fd/*`) are
/// refused; `dir`: it must be a directory (opened read-only, O_DIRECTORY).
pub fn open_beneath(root: &Path, path: &str, dir: bool) -> std::io::Result<File> {
    let root = File::open(root)?;
    let rel = CString::new(path.trim_start_matches('/').as_bytes().to_vec())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let rel = if rel.as_bytes().is_empty() {
        CString::new(".").expect("no NUL")
    } else {
        rel
    };
    // SAFETY: open_how is plain integers; all-zero is "nothing asked".
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    // O_NONBLOCK: a FIFO at the path opens at once (and is then refused
    // by the caller as not a regular file) instead of blocking.
    how.flags = (libc::O_RDONLY
        | libc::O_CLOEXEC
        | libc::O_NOCTTY
        | libc::O_NONBLOCK
        | if dir { libc::O_DIRECTORY } else { 0 }) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    use std::os::fd::AsRawFd;
    // SAFETY: a valid directory descriptor, a NUL-terminated path and an
    // open_how of the size passed, all alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            rel.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: openat2 returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// Mapped files the host cannot reach by their recorded path (they live in
/// another mount namespace), kept open for the symbolize stage, which then
/// reads `/proc/self/fd/N` instead of the path. By (pid, path as recorded):
/// two containers may map different files at one path.
#[derive(Default)]
pub struct KeptFiles {
    by_process: std::collections::HashMap<(u32, String), std::sync::Arc<MappedFile>>,
    by_key: std::collections::HashMap<(u64, u64), std::sync::Arc<MappedFile>>,
}

static KEPT: std::sync::Mutex<Option<KeptFiles>> = std::sync::Mutex::new(None);

/// Keeps the file `m` of `pid` open for the symbolize stage if the host
/// cannot read it by its path. A file already kept (another process of the
/// same container) is not opened again.
pub fn keep_if_unreachable(pid: u32, m: &MapsEntry) {
    if reachable_by_path(m) {
        return;
    }
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let kept = kept.get_or_insert_with(KeptFiles::default);
    let key = (pid, path_str(m));
    // The same file as before; a different one is a pid reused, or a path
    // mapped anew: look again.
    if kept
        .by_process
        .get(&key)
        .is_some_and(|f| Some(f.key) == m.key())
    {
        return;
    }
    let file = match m.key().and_then(|k| kept.by_key.get(&k)) {
        Some(f) => f.clone(),
        None => match open(pid, m) {
            Ok(f) => {
                let f = std::sync::Arc::new(f);
                kept.by_key.insert(f.key, f.clone());
                f
            }
            // Gone, or not the file mapped: nothing to read it by.
            Err(_) => return,
        },
    };
    kept.by_process.insert(key, file);
}

/// The path the symbolize stage reads for `path` as recorded for `pid`:
/// the kept descriptor's, or the path itself.
pub fn readable_path(pid: u32, path: &str) -> PathBuf {
    let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    kept.as_ref()
        .and_then(|k| k.by_process.get(&(pid, path.to_string())))
        .map(|f| f.fd_path())
        .unwrap_or_else(|| PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_mapping(name_part: &str) -> MapsEntry {
        let (maps, _) =
            crate::process::procfs::mappings_and_vdso(std::process::id()).expect("maps");
        maps.into_iter()
            .find(|m| m.executable && m.path.to_string_lossy().contains(name_part))
            .expect("a mapping")
    }

    #[test]
    fn opens_the_mapped_file_and_refuses_another() {
        let exe = std::env::current_exe().expect("exe");
        let m = own_mapping(&exe.file_name().unwrap().to_string_lossy());
        let f = open(std::process::id(), &m).expect("open");
        let md = std::fs::metadata(&exe).expect("stat");
        assert_eq!(f.key, (md.dev(), md.ino()));
        assert!(reachable_by_path(&m));
        // Through the fd path, the same file.
        let again = std::fs::metadata(f.fd_path()).expect("fd path");
        assert_eq!((again.dev(), again.ino()), f.key);
        // A mapping whose inode is not the file's: refused.
        let mut wrong = m.clone();
        wrong.inode += 1;
        assert!(matches!(
            open(std::process::id(), &wrong),
            Err(MappedFileError::NotTheMappedFile { .. })
        ));
        assert!(!reachable_by_path(&wrong));
    }

    #[test]
    fn a_file_the_host_cannot_reach_by_its_path_is_read_through_its_descriptor() {
        let exe = std::env::current_exe().expect("exe");
        let mut m = own_mapping(&exe.file_name().unwrap().to_string_lossy());
        // As a process in another mount namespace would map it: a path the
        // host does not have.
        let recorded = format!("/asys-not-on-this-host-{}/bin", std::process::id());
        m.path = PathBuf::from(&recorded);
        let pid = std::process::id();
        assert_eq!(readable_path(pid, &recorded), PathBuf::from(&recorded));
        keep_if_unreachable(pid, &m);
        let kept = readable_path(pid, &recorded);
        assert!(kept.starts_with("/proc/self/fd"), "{}", kept.display());
        let (a, b) = (
            std::fs::metadata(&kept).expect("kept"),
            std::fs::metadata(&exe).expect("exe"),
        );
        assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()));
        // Another process's same path is another file: not this one.
        assert_eq!(readable_path(pid + 1, &recorded), PathBuf::from(&recorded));
        // A file reachable by its path is not kept.
        let reachable = own_mapping(&exe.file_name().unwrap().to_string_lossy());
        keep_if_unreachable(pid, &reachable);
        let path = reachable.path.to_string_lossy().into_owned();
        assert_eq!(readable_path(pid, &path), reachable.path);
    }

    #[test]
    fn a_path_inside_a_root_stays_inside() {
        let d = std::env::temp_dir().join(format!("asys-beneath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("lib")).unwrap();
        std::fs::write(d.join("lib/inside"), b"in").unwrap();
        // An absolute link and a climbing one both resolve inside `d`.
        std::os::unix::fs::symlink("/lib/inside", d.join("abs")).unwrap();
        std::os::unix::fs::symlink("../../../../lib/inside", d.join("lib/up")).unwrap();
        for p in ["/lib/inside", "abs", "/lib/up", "/../../lib/inside"] {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut open_beneath(&d, p, false).unwrap(), &mut s)
                .unwrap();
            assert_eq!(s, "in", "{p}");
        }
        // /etc/hostname exists on the host, not inside `d`.
        assert!(open_beneath(&d, "/etc/hostname", false).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
