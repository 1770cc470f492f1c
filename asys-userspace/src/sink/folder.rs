//! The folder a recording writes its tables into, beside the report so that
//! packing never crosses file systems: `NAME.asysrep.unfinished-PID` (then
//! `.2`, `.3`, ... for later reports of the same asys). It is not hidden and
//! says what it is: a README names the `asys recover` command that turns it
//! into a report if asys was killed.
use std::path::{Path, PathBuf};

use asys_report::report::ReportError;

/// What a recording folder's name holds between the report's name and the pid.
const MARK: &str = ".unfinished-";

pub const README: &str = "README";

/// Creates `dir` (mode 0700; fails if anything, a link included, is there)
/// with its README.
pub fn create(dir: &Path) -> Result<(), ReportError> {
    use std::{io::Write, os::unix::fs::DirBuilderExt};
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| ReportError::io(dir, e))?;
    let readme = dir.join(README);
    let text = format!(
        "asys (pid {}) is recording here; if it was killed, `asys recover {}` makes a report of what it recorded\n",
        std::process::id(),
        crate::sink::report_path::absolute(dir).display()
    );
    super::disk::create_new(&readme)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| ReportError::io(&readme, e))
}

/// A fresh recording folder for the report `output`: the first of
/// `NAME.asysrep.unfinished-PID`, `...-PID.2`, ... that does not exist yet.
/// A name that exists (a folder of ours, or anything another user put
/// there) is never reused.
pub fn fresh(output: &Path) -> Result<PathBuf, ReportError> {
    // Numbered across the process: a name is never made twice, so a guard
    // that removes an earlier folder can never remove a later one.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let base = name_for(output);
    let mut last = None;
    for _ in 0..64 {
        let dir = match NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
            1 => base.clone(),
            n => PathBuf::from(format!("{}.{n}", base.display())),
        };
        match create(&dir) {
            Ok(()) => return Ok(dir),
            Err(ReportError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                last = Some(dir);
            }
            Err(e) => return Err(e),
        }
    }
    Err(ReportError::io(
        last.unwrap_or(base),
        std::io::Error::from_raw_os_error(libc::EEXIST),
    ))
}

/// `NAME.asysrep.unfinished-PID` beside `output`.
fn name_for(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!("{name}{MARK}{}", std::process::id()))
}

/// The pid in a recording folder's name, if it is one.
pub fn pid_of(dir: &Path) -> Option<u32> {
    let name = dir.file_name()?.to_str()?;
    let (_, rest) = name.rsplit_once(MARK)?;
    let digits = rest.split('.').next()?;
    digits.parse().ok()
}

/// Whether `pid` is an asys still running (so its folder is in use).
pub fn asys_runs(pid: u32) -> bool {
    crate::process::procfs::is_alive(pid)
        && std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "asys")
}

/// Recording folders beside `output` whose asys is gone: a recording that
/// did not finish, which `asys recover` can turn into a report.
pub fn left_behind(output: &Path) -> Vec<PathBuf> {
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(&format!(".{}{MARK}", asys_report::report::EXTENSION)))
        })
        .filter(|p| p.is_dir() && !p.is_symlink())
        .filter(|p| pid_of(p).is_some_and(|pid| pid != std::process::id() && !asys_runs(pid)))
        // A flight recorder's ring has nothing to recover.
        .filter(|p| !super::journal::Recording::read(p).is_ok_and(|r| r.flight))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_named_after_its_report_and_its_pid() {
        let dir = name_for(Path::new("/x/r.asysrep"));
        let pid = std::process::id();
        assert_eq!(dir, PathBuf::from(format!("/x/r.asysrep.unfinished-{pid}")));
        assert_eq!(pid_of(&dir), Some(pid));
        assert_eq!(
            pid_of(Path::new(&format!("/x/r.asysrep.unfinished-{pid}.3"))),
            Some(pid)
        );
        assert_eq!(pid_of(Path::new("/x/r.asysrep")), None);
    }

    #[test]
    fn a_name_that_exists_is_never_reused() {
        let root = std::env::temp_dir().join(format!("asys-folder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir(&root).unwrap();
        let out = root.join("r.asysrep");
        // Someone else's link where the first name would be.
        std::os::unix::fs::symlink("/", name_for(&out)).unwrap();
        let dir = fresh(&out).unwrap();
        assert!(
            dir.to_string_lossy().contains(".unfinished-"),
            "{}",
            dir.display()
        );
        assert_ne!(dir, name_for(&out));
        assert!(
            std::fs::symlink_metadata(name_for(&out))
                .unwrap()
                .is_symlink()
        );
        assert!(dir.join(README).is_file());
        // A name is not made twice, even once its folder is gone.
        std::fs::remove_dir_all(&dir).unwrap();
        assert_ne!(fresh(&out).unwrap(), dir);
        let _ = std::fs::remove_dir_all(&root);
    }
}
