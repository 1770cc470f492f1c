//! A process's executable mappings: examined for runtimes to probe, and
//! recorded for the symbolize stage.
use super::CollectError;
use crate::{kernel::Tracer, process::procfs, sink::recorder::Recorder};
use asys_report::report::rows::ModuleRow;

/// Examines every executable mapping of `pid` (probing new runtimes) and
/// records the mappings for the symbolize stage. A process that is already
/// gone has nothing to scan.
pub fn scan(
    pid: u32,
    ts: u64,
    tracer: &mut Tracer,
    rec: &mut Recorder,
) -> Result<(), CollectError> {
    super::process_info::describe(pid, ts, rec)?;
    let mut ranges = Vec::new();
    record_mappings(pid, ts, rec, |m| {
        let id = tracer.examine_in(pid, m)?;
        if let Some(id) = id {
            ranges.push((m.start, m.end, id));
        }
        Ok(id.and_then(|id| tracer.probes.library(id).build_id.clone()))
    })?;
    // A process gone meanwhile has no mappings and needs no ranges.
    if !ranges.is_empty() {
        tracer.set_caller_ranges(pid, &ranges)?;
    }
    Ok(())
}

/// Records the executable mappings of `pid` (only for naming frames: nothing
/// is probed). A process already gone is marked all the same, so that its
/// remaining samples do not try again.
pub fn scan_for_names(pid: u32, ts: u64, rec: &mut Recorder) -> Result<(), CollectError> {
    rec.mark_mapped(pid);
    record_mappings(pid, ts, rec, |_| Ok(None))
}

/// Records `pid`'s executable mappings, and its vDSO, for the symbolize
/// stage; `look_at` sees each mapping first (and may probe it) and gives its
/// build id.
fn record_mappings(
    pid: u32,
    ts: u64,
    rec: &mut Recorder,
    mut look_at: impl FnMut(&procfs::MapsEntry) -> Result<Option<String>, CollectError>,
) -> Result<(), CollectError> {
    let Ok((maps, vdso)) = procfs::mappings_and_vdso(pid) else {
        return Ok(());
    };
    // Where a JIT may write its jitdump (`jit-PID.dump`): read when the
    // process exits, when neither its maps nor its folder can be asked.
    if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
        rec.note_jit_place(pid, cwd);
    }
    if let Some(uid) = crate::symbolize::jit_files::process_uid(pid) {
        rec.note_jit_owner(pid, uid);
    }
    let dump = crate::symbolize::jit_files::jitdump_name(pid);
    for m in maps
        .iter()
        .filter(|m| m.path.file_name() == Some(dump.as_ref()))
    {
        rec.note_jit_place(pid, m.path.clone());
    }
    for m in maps.iter().filter(|m| m.executable) {
        // A probed library's id is known already; every other file's is
        // read here, for the symbolize stage's rebuilt-binary check.
        let build_id = match look_at(m)? {
            Some(id) => Some(id),
            None => super::build_ids::of_mapping(pid, m),
        };
        // In another mount namespace the recorded path names another file
        // (or none) for the symbolize stage: keep this one open for it.
        crate::process::mapped_file::keep_if_unreachable(pid, m);
        let path_id = rec.strings.intern(&m.path.display().to_string());
        rec.module(ModuleRow {
            ts: ts as i64,
            pid,
            start: m.start,
            end: m.end,
            file_offset: m.offset,
            path_id,
            build_id,
        })?;
    }
    // The vDSO as a module too: the symbolize stage reads asys's own copy
    // (the same kernel's), so samples and stacks in it are named and unwound.
    if let Some((start, end)) = vdso {
        let path_id = rec.strings.intern(procfs::VDSO);
        rec.module(ModuleRow {
            ts: ts as i64,
            pid,
            start,
            end,
            file_offset: 0,
            path_id,
            build_id: None,
        })?;
    }
    Ok(())
}
