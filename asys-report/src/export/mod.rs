//! `asys export`: a report written out in formats other tools read
//! unchanged. One module per format; each reads the report through
//! [`crate::report::reader`], a batch at a time.
pub mod arrow_ipc;
pub mod collapsed;
pub mod jsonlines;
pub mod kineto;
pub mod parquetdir;
pub mod perfetto;
pub mod pprof;
pub mod sqlite;

use std::path::{Path, PathBuf};

use crate::report::ReportError;

/// The formats of `--type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportType {
    Sqlite,
    Parquetdir,
    Arrow,
    Jsonlines,
    Perfetto,
    Collapsed,
    Flamegraph,
    // Chrome-trace JSON in the PyTorch profiler's (Kineto's) layout, as
    // Holistic Trace Analysis reads it (a plain comment: a doc comment
    // would be clap's help for the value).
    Kineto,
    // pprof's gzipped profile.proto, one profile of --stacks.
    Pprof,
}

impl ExportType {
    /// What `-o BASE` (or the report's name) becomes for this format:
    /// BASE with the format's extension added, unless BASE already ends in
    /// it (`-o a.sqlite` writes `a.sqlite`, as `nsys export -o` does).
    pub fn target(self, base: &Path) -> PathBuf {
        let suffix = format!(".{}", self.extension());
        if base
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().ends_with(suffix.as_bytes()))
        {
            return base.to_path_buf();
        }
        let mut name = base.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    }

    /// The extension of this format's files or folder (without the dot).
    pub fn extension(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Parquetdir => "parquetdir",
            Self::Arrow => "arrow",
            Self::Jsonlines => "jsonl",
            // What Perfetto's own tools name their traces.
            Self::Perfetto => "pftrace",
            Self::Collapsed => "collapsed",
            Self::Flamegraph => "svg",
            // What the PyTorch profiler names its traces; HTA reads only
            // files ending in .json (or .gz).
            Self::Kineto => "pt.trace.json",
            // What `go tool pprof` and the fleet profilers name theirs.
            Self::Pprof => "pb.gz",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("{path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("table {table}: {source}")]
    Parquet {
        table: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error("table {table}: {source}")]
    Arrow {
        table: String,
        #[source]
        source: arrow::error::ArrowError,
    },
    #[error("{0}")]
    Unsupported(&'static str),
    #[error("unknown table '{0}' for --tables (available: {1})")]
    UnknownTable(String, String),
}

impl ExportError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        ExportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// nsys's thread id: the pid in bits 24 and up, the tid below
/// (`globalTid = (pid << 24) | tid`; nsys also keeps a hardware id above
/// bit 56, which is 0 for one machine's host threads).
pub fn global_tid(pid: u32, tid: u32) -> i64 {
    (i64::from(pid) << 24) | i64::from(tid & 0xff_ffff)
}

/// nsys's process id: `globalPid = pid << 24`.
pub fn global_pid(pid: u32) -> i64 {
    i64::from(pid) << 24
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_ids_pack_as_nsys_does() {
        assert_eq!(global_tid(1234, 1240), (1234 << 24) | 1240);
        assert_eq!(global_tid(1234, 1240) >> 24, 1234);
        assert_eq!(global_tid(1234, 1240) & 0xff_ffff, 1240);
        assert_eq!(global_pid(7), 7 << 24);
    }

    #[test]
    fn targets_take_the_formats_extension_once() {
        assert_eq!(
            ExportType::Sqlite.target(Path::new("a/r")),
            PathBuf::from("a/r.sqlite")
        );
        assert_eq!(
            ExportType::Sqlite.target(Path::new("a/r.sqlite")),
            PathBuf::from("a/r.sqlite")
        );
        assert_eq!(
            ExportType::Perfetto.target(Path::new("t.pftrace")),
            PathBuf::from("t.pftrace")
        );
        // Another format's extension is part of the name.
        assert_eq!(
            ExportType::Perfetto.target(Path::new("a.sqlite")),
            PathBuf::from("a.sqlite.pftrace")
        );
        assert_eq!(
            ExportType::Jsonlines.target(Path::new("run.2")),
            PathBuf::from("run.2.jsonl")
        );
        assert_eq!(
            ExportType::Kineto.target(Path::new("a/r")),
            PathBuf::from("a/r.pt.trace.json")
        );
        assert_eq!(
            ExportType::Kineto.target(Path::new("a/r.pt.trace.json")),
            PathBuf::from("a/r.pt.trace.json")
        );
    }
}
