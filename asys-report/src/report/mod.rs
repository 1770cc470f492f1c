//! The report: one `NAME.asysrep` file, an uncompressed tar holding one Parquet
//! file (zstd-compressed inside) per table, the string table, and `metadata.json`. Tables are streamed
//! to a temporary folder while recording and packed (then renamed into place)
//! at the end, so a report on disk is always whole. See docs/report-format.md.
pub mod builder;
pub mod columns;
pub mod container;
pub mod decode_guard;
pub mod files;
pub(crate) mod footer_bounds;
pub mod metadata;
pub mod read;
pub mod reader;
pub mod rows;
pub mod schema;
pub mod set;
pub(crate) mod start_order;
pub mod strings;
pub mod table_writer;
pub(crate) mod tables;
pub mod task_state;
pub mod window;

use std::path::PathBuf;

pub use tables::ALL_TABLES;

/// The file extension of reports.
pub const EXTENSION: &str = "asysrep";

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not an asys report")]
    NotAReport(PathBuf),
    /// Not a regular file (a FIFO, a device, a directory, ...): never read,
    /// so a FIFO cannot block the reader.
    #[error("{path} is {what}, not a report file")]
    NotAFile { path: PathBuf, what: &'static str },
    /// A report of ours whose contents do not match what its metadata says.
    #[error("report {path} is damaged: {problem}")]
    Damaged { path: PathBuf, problem: String },
    /// A table the decoder refused (or panicked on).
    #[error("report {path} is damaged: {table} cannot be decoded{detail}")]
    Undecodable {
        path: PathBuf,
        table: String,
        /// ": cause" when the decoder gave one, empty when it panicked.
        detail: String,
    },
    #[error("{path} was written with report schema {found}; this asys reads schema {supported}")]
    SchemaVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("table {table} in {path}: {source}")]
    Parquet {
        path: PathBuf,
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
    #[error("table {table} in {path}: column {column}: {problem}")]
    Column {
        path: PathBuf,
        table: String,
        column: String,
        problem: &'static str,
    },
    /// A table that a file read back from another format has nothing for.
    #[error("{path} has no data for table {table} (it is not a report)")]
    Unavailable { path: PathBuf, table: String },
    #[error("metadata: {0}")]
    Metadata(#[from] serde_json::Error),
}

impl ReportError {
    pub fn damaged(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        Self::Damaged {
            path: path.into(),
            problem: problem.into(),
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
