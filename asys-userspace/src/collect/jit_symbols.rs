//! Reads the JIT perf maps of traced processes into `jit_symbols`: when a
//! process exits (its map is complete then, and a later process with the
//! same pid could write another), and at the end of the recording for the
//! processes still running. Only processes whose mappings were recorded are
//! read: their samples are the ones to name. The jitdump (`jit-PID.dump`)
//! is read too, where the process maps it or in the folder it worked in.
use std::path::{Path, PathBuf};

use super::CollectError;
use crate::{
    sink::recorder::Recorder,
    symbolize::jit_files::{self, JitMapError, JitRead},
};
use asys_report::report::rows::JitSymbolRow;

/// Records `pid`'s perf map, once per recording. A map asys refuses to read
/// (a link, a hard link, another user's file) is warned about and skipped:
/// its frames stay unnamed.
pub fn record(pid: u32, rec: &mut Recorder) -> Result<(), CollectError> {
    record_by(pid, rec, None)
}

/// [`record`], reading at most until `deadline` (what is left then is
/// counted, not read).
fn record_by(
    pid: u32,
    rec: &mut Recorder,
    deadline: Option<std::time::Instant>,
) -> Result<(), CollectError> {
    if !rec.take_jit(pid) {
        return Ok(());
    }
    // The files must be the process's user's (or root's).
    let owner = jit_files::process_uid(pid).or(rec.jit_owner(pid));
    let perf_map = jit_files::perf_map_path(pid);
    let room = rec.jit_budget.room(pid);
    if let Some(read) = warn(pid, jit_files::read_perf_map(pid, owner, room, deadline)) {
        add(pid, &perf_map, read, rec)?;
    }
    // The jitdump: where it is mapped now, else where it was seen mapped,
    // else in a folder the process worked in.
    let dump = jit_files::jitdump_name(pid);
    let mut places: Vec<PathBuf> = crate::process::procfs::mappings_and_vdso(pid)
        .map(|(maps, _)| maps.into_iter().map(|m| m.path).collect())
        .unwrap_or_default();
    places.retain(|p| p.file_name() == Some(dump.as_ref()));
    for p in rec.jit_places(pid) {
        places.push(if p.file_name() == Some(dump.as_ref()) {
            p
        } else {
            p.join(&dump)
        });
    }
    places.dedup();
    for path in places {
        let room = rec.jit_budget.room(pid);
        if let Some(read) = warn(pid, jit_files::read_jitdump(&path, owner, room, deadline)) {
            return add(pid, &path, read, rec);
        }
    }
    Ok(())
}

/// What was read, or None after a warning about a file refused.
fn warn(pid: u32, read: Result<Option<JitRead>, JitMapError>) -> Option<JitRead> {
    match read {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "asys: warning: JIT map of process {pid}: {}",
                asys_report::text_safety::visible(&e.to_string())
            );
            None
        }
    }
}

/// Records what was read of one file, and takes its cost from the
/// process's JIT budget (the reader kept only what the budget had room
/// for; what it left out is counted).
fn add(pid: u32, source: &Path, read: JitRead, rec: &mut Recorder) -> Result<(), CollectError> {
    rec.jit_budget.take(pid, read.cost);
    rec.jit_budget.refuse(pid, read.left_out);
    let source_id = rec.strings.intern(&source.display().to_string());
    // A jitdump's moves share their name: intern each name once.
    let mut ids: std::collections::HashMap<*const u8, u32, foldhash::fast::RandomState> =
        Default::default();
    for s in &read.symbols {
        let name_id = *ids
            .entry(s.name.as_ptr())
            .or_insert_with(|| rec.strings.intern(&s.name));
        rec.jit_symbol(JitSymbolRow {
            pid,
            start: s.start,
            size: s.size,
            name_id,
            source_id,
        })?;
    }
    Ok(())
}

/// How long the end of a recording spends on the JIT maps of processes
/// still running: the maps are their writers' to size, and asys must end
/// (SIGINT, SIGTERM) within seconds whatever they hold.
pub const END_READ_LIMIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Records the perf maps not read yet (processes still running at the end),
/// within [`END_READ_LIMIT`]: what is left then is counted as left out.
pub fn record_remaining(rec: &mut Recorder) -> Result<(), CollectError> {
    let deadline = std::time::Instant::now() + END_READ_LIMIT;
    let pids = rec.jit_unread();
    for (i, &pid) in pids.iter().enumerate() {
        if std::time::Instant::now() >= deadline {
            let left = &pids[i..];
            eprintln!(
                "asys: warning: the JIT maps of {} process(es) were not read: reading the others took asys's {} ms for them",
                left.len(),
                END_READ_LIMIT.as_millis()
            );
            for &p in left {
                rec.jit_budget.refuse(p, 1);
            }
            break;
        }
        record_by(pid, rec, Some(deadline))?;
    }
    Ok(())
}
