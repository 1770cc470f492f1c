//! How `asys dump` finds the flight recorders running: each leaves a note,
//! `flight-PID.json`, in its user's runtime folder (`runtime_dir`: 0700 and
//! owned, so no other user can plant or read one). The note names the
//! recorder's process by pid and start time (a pid alone may be reused by
//! then), its report name, and how many flight reports it has written;
//! it is rewritten (a temporary file renamed over it) after each report and
//! removed when recording ends. A recorder that died leaves a note whose
//! process is gone or another: [`live`] skips and removes it.
use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use crate::{process::procfs, runtime_dir};

#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error(transparent)]
    Dir(#[from] runtime_dir::DirError),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// What a note says of its recorder.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Note {
    pub pid: u32,
    /// The process's start, in clock ticks since boot (`procfs::start_time`).
    pub start_time: u64,
    /// The report name; flight reports are NAME.1, NAME.2, ...
    pub output: PathBuf,
    /// Flight reports written so far.
    pub reports: u32,
    /// The last of them.
    pub last_report: Option<PathBuf>,
}

/// This process's note, kept up to date while it records; removed on drop.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
    note: Note,
}

/// The note's name for process `pid`.
fn note_name(pid: u32) -> String {
    format!("flight-{pid}.json")
}

impl Registration {
    /// Leaves this process's note for a flight recorder writing `output`.
    pub fn register(output: &Path) -> Result<Self, RegistrationError> {
        let dir = runtime_dir::ensure()?;
        let pid = std::process::id();
        let note = Note {
            pid,
            start_time: procfs::start_time(pid).unwrap_or(0),
            output: std::path::absolute(output).unwrap_or_else(|_| output.to_path_buf()),
            reports: 0,
            last_report: None,
        };
        let r = Self {
            path: dir.join(note_name(pid)),
            note,
        };
        r.write()?;
        Ok(r)
    }

    /// Records that flight report `report` was written.
    pub fn wrote(&mut self, report: &Path) -> Result<(), RegistrationError> {
        self.note.reports += 1;
        self.note.last_report =
            Some(std::path::absolute(report).unwrap_or_else(|_| report.to_path_buf()));
        self.write()
    }

    /// The note, whole or not at all: a reader never sees half of one.
    fn write(&self) -> Result<(), RegistrationError> {
        let io = |e| RegistrationError::Io(self.path.clone(), e);
        let tmp = self.path.with_extension("json.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io)?;
        let json = serde_json::to_vec(&self.note).expect("a note serializes");
        f.write_all(&json).map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The notes of the caller's flight recorders that still run. A note whose
/// process is gone, or is another process by now, is removed.
pub fn live() -> Result<Vec<Note>, RegistrationError> {
    let Some(dir) = runtime_dir::open(false)? else {
        return Ok(Vec::new());
    };
    let entries = std::fs::read_dir(&dir).map_err(|e| RegistrationError::Io(dir.clone(), e))?;
    let mut notes = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !(name.starts_with("flight-") && name.ends_with(".json")) {
            continue;
        }
        let path = entry.path();
        match read(&path) {
            Some(note) if note_name(note.pid) == name && is_running(&note) => notes.push(note),
            // A recorder killed before it could remove its note.
            _ => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    notes.sort_by_key(|n| n.pid);
    Ok(notes)
}

/// The note at `path` (in the caller's own folder, so trusted as far as
/// its owner; still read within a bound).
pub fn read(path: &Path) -> Option<Note> {
    use std::io::Read as _;
    let f = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    f.take(64 << 10).read_to_end(&mut buf).ok()?;
    serde_json::from_slice(&buf).ok()
}

/// The note of process `pid`, as it is now.
pub fn of(pid: u32) -> Option<Note> {
    let dir = runtime_dir::open(false).ok()??;
    read(&dir.join(note_name(pid)))
}

/// Whether the note's process runs and is the one that wrote it.
pub fn is_running(note: &Note) -> bool {
    procfs::is_alive(note.pid) && procfs::start_time(note.pid) == Some(note.start_time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_found_while_registered_and_gone_after() {
        // A folder of our own stands in for the runtime folder.
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("asys-flight-note-test-{pid}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let mut r = Registration {
            path: dir.join(note_name(pid)),
            note: Note {
                pid,
                start_time: procfs::start_time(pid).unwrap(),
                output: "/x/report".into(),
                reports: 0,
                last_report: None,
            },
        };
        r.write().unwrap();
        r.wrote(Path::new("/x/report.1.asysrep")).unwrap();
        let note = read(&r.path).unwrap();
        assert_eq!(note.reports, 1);
        assert_eq!(
            note.last_report.as_deref(),
            Some(Path::new("/x/report.1.asysrep"))
        );
        assert!(is_running(&note));
        // The same pid with another start time is another process.
        let reused = Note {
            start_time: note.start_time + 1,
            ..note
        };
        assert!(!is_running(&reused));
        let path = r.path.clone();
        drop(r);
        assert!(!path.exists());
        std::fs::remove_dir(&dir).unwrap();
    }
}
