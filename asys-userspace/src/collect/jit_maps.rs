//! Reads the JIT perf maps of traced processes into `jit_symbols`: when a
//! process exits (its map is complete then, and a later process with the
//! same pid could write another), and at the end of the recording for the
//! processes still running. Only processes whose mappings were recorded are
//! read: their samples are the ones to name.
use super::CollectError;
use crate::{
    jit_map::{self, JitMapError},
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
    let symbols = match jit_map::read_perf_map(pid) {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(()),
        Err(e @ (JitMapError::Open(..) | JitMapError::NotPlainFile(_))) => {
            eprintln!("asys: warning: JIT map of process {pid}: {e}");
            return Ok(());
        }
        Err(e @ JitMapError::ForeignOwner { .. }) => {
            eprintln!("asys: warning: {e}");
            return Ok(());
        }
    };
    let source_id = rec
        .strings
        .intern(&jit_map::perf_map_path(pid).display().to_string());
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
