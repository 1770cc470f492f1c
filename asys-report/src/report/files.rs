//! Creating asys's files: afresh, never through a link; and replacing a
//! file the user named ([`Replacement`]): the new one is made beside it and
//! renamed into place, so the target is never half-written and never
//! written through a link someone planted there; and private temporary
//! folders ([`TempDir`]).
use std::{
    fs::File,
    path::{Path, PathBuf},
};

use super::ReportError;

/// Creates `path` afresh (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600): never opens
/// a file or follows a link that someone else put there.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o600)
        .open(path)
}

/// `.NAME.tmp-PID` beside `target`: a name asys itself made, so removing
/// a leftover of an earlier run cannot follow someone else's link.
pub fn beside(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Replaces `target` atomically: what is written goes to a new file (or
/// folder) beside it, which is renamed over `target` only once whole.
///
/// The new file is created with O_CREAT|O_EXCL|O_NOFOLLOW (a leftover of an
/// earlier run under the same name is unlinked first: unlink removes a link,
/// never what it points to), so nothing is ever written through a link; a
/// reader of `target` sees the old file or the whole new one, never a part.
/// On any failure the new file is removed and `target` is left as it was.
/// Every report, export, `stats -o` and `analyze -o` file is written this way.
pub struct Replacement<'a> {
    target: &'a Path,
    tmp: PathBuf,
    mode: u32,
    sync: bool,
}

/// Why a [`Replacement`] failed: an I/O error at `path` (the new file, or
/// `target` for the rename), or the writer's own error.
#[derive(Debug)]
pub enum ReplaceError<E> {
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    Write(E),
}

impl<E> ReplaceError<E> {
    /// The writer's error, or an I/O error made into one by `io`.
    pub fn or_io(self, io: impl FnOnce(PathBuf, std::io::Error) -> E) -> E {
        match self {
            Self::Io { path, source } => io(path, source),
            Self::Write(e) => e,
        }
    }
}

impl<'a> Replacement<'a> {
    /// Replaces `target` through [`beside`]'s name, mode 0666 (less the
    /// umask), not synced.
    pub fn of(target: &'a Path) -> Self {
        Self {
            target,
            tmp: beside(target),
            mode: 0o666,
            sync: false,
        }
    }

    /// The new file's name instead of [`beside`]'s (beside `target`: a rename
    /// does not cross file systems).
    pub fn named(mut self, tmp: PathBuf) -> Self {
        self.tmp = tmp;
        self
    }

    /// The new file's permission bits (less the umask).
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode;
        self
    }

    /// Syncs the new file to disk before the rename.
    pub fn synced(mut self) -> Self {
        self.sync = true;
        self
    }

    /// Where the new file is made until it is renamed.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Creates the new file, has `write` fill it, and renames it over
    /// `target`.
    pub fn write<T, E>(
        &self,
        write: impl FnOnce(&mut File) -> Result<T, E>,
    ) -> Result<T, ReplaceError<E>> {
        use std::os::unix::fs::OpenOptionsExt;
        remove_leftover(&self.tmp)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(self.mode)
            .open(&self.tmp)
            .map_err(|source| self.io_tmp(source))?;
        let done = write(&mut file).map_err(ReplaceError::Write);
        let done = done.and_then(|v| {
            if self.sync {
                file.sync_all().map_err(|source| self.io_tmp(source))?;
            }
            Ok(v)
        });
        drop(file);
        self.finish(done, false)
    }

    /// Has `make` make the new file or folder at [`Self::tmp`] (for writers
    /// that create their output themselves: SQLite, a folder of files), and
    /// renames it over `target`. A folder cannot be renamed over an existing
    /// one, so for a folder the old `target` is removed just before the
    /// rename (a link there is removed, never followed).
    pub fn make<T, E>(
        &self,
        make: impl FnOnce(&Path) -> Result<T, E>,
    ) -> Result<T, ReplaceError<E>> {
        remove_leftover(&self.tmp)?;
        let done = make(&self.tmp).map_err(ReplaceError::Write);
        let folder = std::fs::symlink_metadata(&self.tmp).is_ok_and(|m| m.is_dir());
        self.finish(done, folder)
    }

    fn finish<T, E>(
        &self,
        done: Result<T, ReplaceError<E>>,
        folder: bool,
    ) -> Result<T, ReplaceError<E>> {
        let done = done.and_then(|v| {
            let io = |source| ReplaceError::Io {
                path: self.target.to_path_buf(),
                source,
            };
            if folder {
                remove_leftover(self.target)?;
            }
            std::fs::rename(&self.tmp, self.target).map_err(io)?;
            Ok(v)
        });
        if done.is_err() {
            let _ = remove_leftover::<()>(&self.tmp);
        }
        done
    }

    fn io_tmp<E>(&self, source: std::io::Error) -> ReplaceError<E> {
        ReplaceError::Io {
            path: self.tmp.clone(),
            source,
        }
    }
}

/// Removes `path` if it is there: a folder with what is in it, anything
/// else (a link included) by unlinking it.
fn remove_leftover<E>(path: &Path) -> Result<(), ReplaceError<E>> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ReplaceError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A private folder (mode 0700, a fresh name under the temporary folder)
/// removed with everything in it when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new folder named `PREFIX-PID-NANOS-N`.
    pub fn new(prefix: &str) -> Result<Self, ReportError> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut last = None;
        for attempt in 0..16 {
            let p = base.join(format!("{prefix}-{}-{nanos}-{attempt}", std::process::id()));
            // create, not create_all: a name someone else made (or a link
            // planted there) is never used.
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => return Ok(Self(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(ReportError::io(p, e)),
            }
        }
        Err(ReportError::io(
            base,
            last.unwrap_or_else(|| std::io::Error::other("no free name")),
        ))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // remove_dir_all removes links, never what they point to.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_new_never_follows_a_link_or_reuses_a_file() {
        let dir = std::env::temp_dir().join(format!("asys-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_new(&link).is_err());
        assert!(create_new(&target).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(create_new(&dir.join("new")).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_replacement_is_whole_and_never_written_through_a_link() {
        let dir = std::env::temp_dir().join(format!("asys-replace-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let kept = dir.join("kept");
        std::fs::write(&kept, b"keep").unwrap();
        let target = dir.join("out");
        std::os::unix::fs::symlink(&kept, &target).unwrap();
        // A planted link at the new file's name is removed, not followed.
        std::os::unix::fs::symlink(&kept, beside(&target)).unwrap();
        let r = Replacement::of(&target);
        r.write(|f| std::io::Write::write_all(f, b"new")).unwrap();
        assert_eq!(std::fs::read(&kept).unwrap(), b"keep");
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(!std::fs::symlink_metadata(&target).unwrap().is_symlink());
        // A failed write leaves the target as it was, and no new file.
        let failed = r.write(|f| {
            std::io::Write::write_all(f, b"half")?;
            Err::<(), _>(std::io::Error::other("stop"))
        });
        assert!(matches!(failed, Err(ReplaceError::Write(_))));
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(!r.tmp().exists());
        // A folder replaces a file.
        r.make(|tmp| {
            std::fs::create_dir(tmp)?;
            std::fs::write(tmp.join("a"), b"a")
        })
        .unwrap();
        assert_eq!(std::fs::read(target.join("a")).unwrap(), b"a");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
