//! Creating files in the recording folder, and telling a full disk from
//! other write errors.
use std::{fs::File, path::Path};

use asys_report::report::ReportError;

/// Creates `path` afresh (asys-report's, which its table writer uses too).
pub use asys_report::report::files::create_new;

/// Syncs a folder, so that the names of the files just created in it
/// survive a power loss as the files' data does.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Fails with ENOSPC, before anything is packed, unless the file system of
/// `dir` has room for the largest of `members` (packing moves them into the
/// report one by one) and a little more: a pack cut short by a full disk
/// would lose the members it had moved, and the recording with them.
pub fn ensure_space_to_pack(dir: &Path, members: &[String]) -> Result<(), ReportError> {
    let mut largest = 0u64;
    for m in members {
        let path = dir.join(m);
        let len = std::fs::metadata(&path)
            .map_err(|e| ReportError::io(&path, e))?
            .len();
        largest = largest.max(len);
    }
    // Tar headers and padding, the metadata, the file system's own blocks.
    let need = largest + (members.len() as u64 + 2) * 1024 + (256 << 10);
    if free_bytes(dir).map_err(|e| ReportError::io(dir, e))? < need {
        return Err(ReportError::io(
            dir,
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        ));
    }
    Ok(())
}

/// Bytes an unprivileged writer may still use on the file system of `path`.
fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statvfs is plain integers; zero is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path; statvfs writes only st.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Whether `e`, or any error it was caused by, is ENOSPC or EDQUOT: the disk
/// (or the user's quota) is full, and what was recorded so far should be
/// kept rather than discarded.
pub fn is_disk_full(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Whether a write that failed with `e` failed for want of space on the file
/// system of `dir`: `e` says so, or, since some writers keep only their own
/// message (the Parquet footer's Thrift writer turns ENOSPC into "transport
/// error"), the file system has almost nothing left.
pub fn failed_for_space(e: &(dyn std::error::Error + 'static), dir: &Path) -> bool {
    const ALMOST_NOTHING: u64 = 64 << 10;
    is_disk_full(e) || free_bytes(dir).is_ok_and(|free| free < ALMOST_NOTHING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_found_through_the_error_chain() {
        let io = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let pq = parquet::errors::ParquetError::from(io);
        let report = ReportError::Parquet {
            path: "x".into(),
            table: "t".into(),
            source: pq,
        };
        assert!(is_disk_full(&report));
        let other =
            asys_report::report::ReportError::io("x", std::io::Error::from_raw_os_error(libc::EIO));
        assert!(!is_disk_full(&other));
    }
}
