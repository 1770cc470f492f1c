//! Free disk space, checked before the suite fills the disk.
use std::{ffi::CString, os::unix::ffi::OsStrExt as _, path::Path};

/// About what a first `cargo xtask test` writes under target/: the debug and
/// release builds, the venvs (the NVIDIA wheels alone are 2.5 GB), CPython
/// builds and the tests' reports (measured: 9 to 11 GB on a fresh clone).
const SUITE_NEEDS_GIB: u64 = 12;

/// Bytes free to an unprivileged writer on the file system holding `path`,
/// or None when it cannot be read.
fn free_bytes(path: &Path) -> Option<u64> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data, which all-zero bytes make valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Says on stderr, before the first install, when the disk under `dir` has
/// less room than a first run of the suite takes, so that a run that then
/// fails with ENOSPC deep in pip or rustc has its cause printed at the top.
/// A warning, not an error: a target/ that is already built needs far less.
pub fn warn_if_low(dir: &Path) {
    let Some(free) = free_bytes(dir) else { return };
    let gib = free as f64 / (1u64 << 30) as f64;
    if free < SUITE_NEEDS_GIB << 30 {
        eprintln!(
            "xtask: warning: {gib:.1} GiB free under {}; a first run of the suite writes about {SUITE_NEEDS_GIB} GiB there",
            dir.display()
        );
    }
}
