//! The `processes` table: each traced process's control group, the
//! container it runs in and its rank, read from /proc when the process is
//! first scanned or first makes a call in a report.
use super::CollectError;
use crate::{process::cgroup, sink::recorder::Recorder};
use asys_report::report::rows::ProcessInfoRow;

/// Records `pid`'s cgroup and container, once per report. A process already
/// gone gets no row (and is not looked for again).
pub fn describe(pid: u32, ts: u64, rec: &mut Recorder) -> Result<(), CollectError> {
    if rec.described(pid) {
        return Ok(());
    }
    let Some(cg) = cgroup::of_process(pid) else {
        rec.mark_described(pid);
        return Ok(());
    };
    let cgroup_id = cg.v2.then(|| v2_id(&cg.path)).flatten();
    let cgroup_path_id = rec.strings.intern(&cg.path);
    rec.process_info(ProcessInfoRow {
        ts: ts as i64,
        pid,
        cgroup_path_id,
        cgroup_v2: cg.v2,
        cgroup_id,
        container_id: cg.container.as_ref().map(|c| c.id.clone()),
        container_runtime: cg.container.as_ref().map(|c| c.runtime.name()),
        rank: crate::process::procfs::rank_of(pid),
        stdout: crate::process::procfs::fd_target(pid, 1),
        stderr: crate::process::procfs::fd_target(pid, 2),
    })?;
    Ok(())
}

/// The id (directory inode) of the cgroup v2 at `path`; None where it
/// cannot be seen (the cgroup is gone, or asys is in a cgroup namespace).
fn v2_id(path: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    static ROOT: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let root = ROOT.get_or_init(cgroup::v2_root).as_ref()?;
    crate::process::mapped_file::open_beneath(root, path, true)
        .and_then(|d| d.metadata())
        .ok()
        .map(|md| md.ino())
}
