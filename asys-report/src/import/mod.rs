//! Reading back what other tools' formats hold, so that `asys stats` and
//! `asys analyze` run on them as on a report: a file is recognized by its
//! content (never its name), read into a temporary report in a private
//! folder (removed again once the report is open), and every report
//! function then works on it unchanged.
pub mod sqlite;

use std::path::{Path, PathBuf};

use crate::report::{ReportError, container::Container};

/// The first 16 bytes of every SQLite 3 database.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("SQLite file {path} cannot be read: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("SQLite file {path} is damaged: {problem}")]
    Damaged { path: PathBuf, problem: String },
    #[error("{0} is an SQLite file but not an export of asys or nsys (it has no StringIds table)")]
    NotAnExport(PathBuf),
}

/// Whether `path` starts as an SQLite database does (a file too short to
/// read, or one that cannot be opened, is not one: the report reader then
/// says what is wrong with it).
pub fn is_sqlite(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    // Only regular files are read, checked on the descriptor: a FIFO (put
    // there before or after a look at the name) must not block here.
    let policy = crate::untrusted::open::Policy {
        max_bytes: u64::MAX,
        ..crate::untrusted::open::Policy::NAMED
    };
    crate::untrusted::open::open(path, &policy)
        .is_ok_and(|mut o| o.file.read_exact(&mut head).is_ok())
        && &head == SQLITE_MAGIC
}

/// Opens `path`: a report, or an SQLite export read back into one.
pub fn open(path: &Path) -> Result<Container, ImportError> {
    if is_sqlite(path) {
        sqlite::import(path)
    } else {
        Ok(Container::open(path)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::files::TempDir;

    #[test]
    fn sqlite_files_are_known_by_their_first_bytes() {
        let d = TempDir::new("asys-import").unwrap();
        let db = d.path().join("a.report");
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        assert!(is_sqlite(&db), "by content, whatever the name");
        let other = d.path().join("b.sqlite");
        std::fs::write(&other, b"not a database at all").unwrap();
        assert!(!is_sqlite(&other));
        assert!(!is_sqlite(&d.path().join("missing")));
        assert!(!is_sqlite(d.path()), "a folder is not read");
        let kept = d.path().to_path_buf();
        drop(d);
        assert!(!kept.exists(), "the folder goes with its guard");
    }
}
