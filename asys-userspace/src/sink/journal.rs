//! The recording folder's journal and `recording.json`: what `asys recover`
//! needs to rebuild a report from a recording that did not finish.
//!
//! `recording.json` is written once, when the targets are reached: the report
//! name and the metadata known at the start. The journal gets one JSON line
//! per checkpoint, appended and synced only after the chunks it names are on
//! disk: a chunk the journal does not name (asys killed while writing it) is
//! not used. A line cut short by a kill does not parse and is ignored.
use std::{
    collections::BTreeMap,
    fs::File,
    io::Write,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::chunked::Chunk;
use asys_report::report::{ReportError, metadata::Metadata};

pub const JOURNAL: &str = "journal.jsonl";
pub const RECORDING: &str = "recording.json";
/// The string table's chunks, each with the strings interned since the
/// previous checkpoint (the report's own `strings` table is written whole
/// at the end).
pub const SAVED_STRINGS: &str = "saved_strings";

/// What the metadata needs that is known when recording starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recording {
    /// The report this recording would have written.
    pub output: PathBuf,
    /// The metadata as far as it is known at the start; the counts, tables
    /// and end come from the journal.
    pub metadata: Metadata,
    /// Most frames per API stack, and per sampled stack.
    pub backtrace_depth: usize,
    pub sample_depth: usize,
    /// A flight recorder's folder: its chunks are a ring, not journaled.
    #[serde(default)]
    pub flight: bool,
}

impl Recording {
    pub fn write(&self, dir: &Path) -> Result<(), ReportError> {
        let path = dir.join(RECORDING);
        let json = serde_json::to_vec_pretty(self)?;
        // Written once per folder; a second recording.json would mean two
        // recordings shared a folder.
        let mut f = super::disk::create_new(&path).map_err(|e| ReportError::io(&path, e))?;
        f.write_all(&json)
            .and_then(|_| f.sync_data())
            .map_err(|e| ReportError::io(&path, e))
    }

    pub fn read(dir: &Path) -> Result<Self, ReportError> {
        let path = dir.join(RECORDING);
        let bytes = std::fs::read(&path).map_err(|e| ReportError::io(&path, e))?;
        Ok(serde_json::from_slice(&bytes)?)
    }
}

/// What collection knows at a checkpoint besides the rows: the counts for
/// the metadata.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Progress {
    pub events: BTreeMap<String, u64>,
    pub drops: BTreeMap<String, u64>,
    /// Runs of each program the kernel skipped (`kernel/prog_misses.rs`),
    /// so that a recovered report says them too.
    pub kernel_skipped: BTreeMap<String, u64>,
    pub pids: Vec<u32>,
    pub libraries: BTreeMap<String, usize>,
    /// The `libraries` table as it stands (a recovered report has it too).
    pub library_table: Vec<asys_report::report::rows::LibraryRow>,
    pub items_not_found: Vec<String>,
    pub device_activity: bool,
    pub device_clock_offsets: BTreeMap<u32, i64>,
    pub capture_ranges: u32,
    pub size_limited: bool,
}

/// One journal line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    /// 1, 2, 3, ... in the order written.
    pub checkpoint: u64,
    /// CLOCK_MONOTONIC when it was taken: every row in its chunks was read
    /// before then.
    pub monotonic_ns: i64,
    /// The chunks closed since the previous checkpoint.
    pub chunks: Vec<Chunk>,
    /// Nested, not flattened: serde's flatten cannot read the integer keys
    /// of `device_clock_offsets` back (every recording with device activity
    /// was unrecoverable).
    pub progress: Progress,
}

/// Why a recording stopped itself (disk full): written over the blanks the
/// file was created with, so that it needs no new space on a full disk.
pub const STOP_REASON: &str = "stop-reason";
const STOP_REASON_ROOM: usize = 64;

pub struct Journal {
    path: PathBuf,
    file: File,
    next: u64,
    stop_reason: File,
}

impl Journal {
    pub fn create(dir: &Path) -> Result<Self, ReportError> {
        let path = dir.join(JOURNAL);
        let file = super::disk::create_new(&path).map_err(|e| ReportError::io(&path, e))?;
        let reason = dir.join(STOP_REASON);
        let mut stop_reason =
            super::disk::create_new(&reason).map_err(|e| ReportError::io(&reason, e))?;
        stop_reason
            .write_all(&[b' '; STOP_REASON_ROOM])
            .map_err(|e| ReportError::io(&reason, e))?;
        Ok(Self {
            path,
            file,
            next: 1,
            stop_reason,
        })
    }

    /// Appends a checkpoint and syncs it; the chunks it names must already
    /// be synced.
    pub fn append(
        &mut self,
        monotonic_ns: i64,
        chunks: Vec<Chunk>,
        progress: Progress,
    ) -> Result<(), ReportError> {
        let line = Checkpoint {
            checkpoint: self.next,
            monotonic_ns,
            chunks,
            progress,
        };
        self.write_line(&serde_json::to_vec(&line)?)?;
        self.next += 1;
        Ok(())
    }

    /// Notes why the recording stopped, in the room kept for it (best
    /// effort: the disk is likely full).
    pub fn stopped(&mut self, why: &str) {
        use std::os::unix::fs::FileExt;
        let why = &why.as_bytes()[..why.len().min(STOP_REASON_ROOM)];
        let _ = self
            .stop_reason
            .write_all_at(why, 0)
            .and_then(|_| self.stop_reason.sync_data());
    }

    fn write_line(&mut self, bytes: &[u8]) -> Result<(), ReportError> {
        let mut buf = bytes.to_vec();
        buf.push(b'\n');
        // One write: the line lands whole or (killed, disk full) cut short.
        self.file
            .write_all(&buf)
            .and_then(|_| self.file.sync_data())
            .map_err(|e| ReportError::io(&self.path, e))
    }
}

/// What a journal says: the complete checkpoints, in order (numbered 1, 2,
/// ... with none missing), and why the recording stopped if it said so.
#[derive(Debug, Default)]
pub struct Read {
    pub checkpoints: Vec<Checkpoint>,
    pub stopped: Option<String>,
}

pub fn read(dir: &Path) -> Result<Read, ReportError> {
    let path = dir.join(JOURNAL);
    let text = std::fs::read(&path).map_err(|e| ReportError::io(&path, e))?;
    let mut out = Read {
        stopped: std::fs::read_to_string(dir.join(STOP_REASON))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        ..Default::default()
    };
    for line in text.split(|&b| b == b'\n') {
        if let Ok(c) = serde_json::from_slice::<Checkpoint>(line) {
            if c.checkpoint != out.checkpoints.len() as u64 + 1 {
                // A gap: nothing after it can be trusted to be whole.
                break;
            }
            out.checkpoints.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_with_device_clock_offsets_reads_back() {
        let c = Checkpoint {
            checkpoint: 1,
            monotonic_ns: 5,
            chunks: Vec::new(),
            progress: Progress {
                device_clock_offsets: [(4242, -17)].into_iter().collect(),
                kernel_skipped: [("sched_waking".to_string(), 3)].into_iter().collect(),
                ..Default::default()
            },
        };
        let line = serde_json::to_vec(&c).expect("serializes");
        let back: Checkpoint = serde_json::from_slice(&line).expect("reads back");
        assert_eq!(back.progress.device_clock_offsets.get(&4242), Some(&-17));
        // A recovered report says what the kernel skipped up to here.
        assert_eq!(back.progress.kernel_skipped.get("sched_waking"), Some(&3));
    }

    #[test]
    fn a_line_cut_short_is_ignored_and_numbering_is_kept() {
        let dir = std::env::temp_dir().join(format!("asys-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let mut j = Journal::create(&dir).unwrap();
        let chunk = |f: &str| Chunk {
            table: "t".into(),
            file: f.into(),
            rows: 3,
        };
        j.append(10, vec![chunk("a")], Progress::default()).unwrap();
        j.append(20, vec![chunk("b")], Progress::default()).unwrap();
        // A third line cut short, then the stop note.
        j.file.write_all(b"{\"checkpoint\":3,\"mono").unwrap();
        assert_eq!(read(&dir).unwrap().stopped, None);
        j.stopped("disk full");
        let r = read(&dir).unwrap();
        assert_eq!(r.checkpoints.len(), 2);
        assert_eq!(r.checkpoints[1].monotonic_ns, 20);
        assert_eq!(r.checkpoints[1].chunks, vec![chunk("b")]);
        assert_eq!(r.stopped.as_deref(), Some("disk full"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
