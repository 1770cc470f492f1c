//! Reads the JIT perf maps of traced processes into `jit_symbols`: when a
//! process exits (its map is complete then, and a later process with the
//! same pid could write another), and at the end of the recording for the
//! processes still running. Only processes whose mappings were recorded are
//! read: their samples are the ones to name. The jitdump (`jit-PID.dump`)
//! is read too, where the process maps it or in the folder it worked in.
use std::path::{Path, PathBuf};

use super::CollectError;
use crate::{
    jit_map::{self, JitMapError, JitSymbol},
    record::recorder::Recorder,
    report::rows::JitSymbolRow,
};

/// Records `pid`'s perf map, once per recording. A map asys refuses to read
/// (a link, a hard link, another user's file) is warned about and skipped:
/// its frames stay unnamed.
pub fn record(pid: u32, rec: &mut Recorder) -> Result<(), CollectError> {
    if !rec.take_jit(pid) {
        return Ok(());
    }
    // The files must be the process's user's (or root's).
    let owner = jit_map::process_uid(pid).or(rec.jit_owner(pid));
    let perf_map = jit_map::perf_map_path(pid);
    if let Some(symbols) = warn(pid, jit_map::read_perf_map(pid, owner)) {
        add(pid, &perf_map, symbols, rec)?;
    }
    // The jitdump: where it is mapped now, else where it was seen mapped,
    // else in a folder the process worked in.
    let dump = jit_map::jitdump_name(pid);
    let mut places: Vec<PathBuf> = crate::procfs::mappings_and_vdso(pid)
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
        if let Some(symbols) = warn(pid, jit_map::read_jitdump(&path, owner)) {
            return add(pid, &path, symbols, rec);
        }
    }
    Ok(())
}

/// The symbols read, or None after a warning about a file refused.
fn warn(pid: u32, read: Result<Option<Vec<JitSymbol>>, JitMapError>) -> Option<Vec<JitSymbol>> {
    match read {
        Ok(s) => s,
        Err(e @ (JitMapError::Open(..) | JitMapError::NotPlainFile(_))) => {
            eprintln!("asys: warning: JIT map of process {pid}: {e}");
            None
        }
        Err(e @ JitMapError::ForeignOwner { .. }) => {
            eprintln!("asys: warning: {e}");
            None
        }
    }
}

fn add(
    pid: u32,
    source: &Path,
    symbols: Vec<JitSymbol>,
    rec: &mut Recorder,
) -> Result<(), CollectError> {
    let source_id = rec.strings.intern(&source.display().to_string());
    for s in symbols {
        let name_id = rec.strings.intern(&s.name);
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

/// Records the perf maps not read yet (processes still running at the end).
pub fn record_remaining(rec: &mut Recorder) -> Result<(), CollectError> {
    for pid in rec.jit_unread() {
        record(pid, rec)?;
    }
    Ok(())
}
