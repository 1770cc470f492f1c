//! The writing side of a recording, below the collection that feeds it:
//! the recorder (`recorder.rs`: rows streamed to each table's Parquet chunks
//! in batches), and the crash-safe recording folder it writes: `folder.rs`
//! (the folder and its README), `disk.rs` (files created afresh, a full
//! disk told from other errors), `chunked.rs` (a table as checkpointed
//! chunks), `journal.rs` (the checkpoints and `recording.json`), `join.rs`
//! (a table's chunks joined into one file). Writing a whole table to one
//! file is asys-report's `report::table_writer` (the SQLite import uses it).
//!
//! `collect/` pushes rows here; `record/` (the recording loop, `asys
//! recover`) drives both. Nothing here imports either.
pub mod chunked;
pub mod disk;
pub mod folder;
pub mod join;
pub mod journal;
pub mod recorder;
pub mod report_path;
