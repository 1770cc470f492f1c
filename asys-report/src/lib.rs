//! asys's report, as a library: the tables a recording writes and their
//! declarations (`report::schema`, the `table!` macro and the column
//! builders), the `.asysrep` container and its reader, and everything that
//! reads a finished report: `stats`, `analyze`, `export` and `import`, with
//! the small pure modules they need (the traced API families, the settings
//! a report's metadata records, text escaping, safe opening of untrusted
//! files and trusted output folders).
//!
//! It has no kernel code and must not come to depend on any: no aya, no
//! asys-ebpf, and asys-common only without its `user` feature (which pulls
//! aya in). The `asys` binary (asys-userspace) records reports and depends
//! on this crate; the fuzz targets (fuzz/) fuzz its readers through it.
//! Errors are `thiserror` enums; `anyhow` belongs to the binary.
pub mod analyze;
pub mod export;
pub mod import;
pub mod recorded_settings;
pub mod report;
pub mod stats;
pub mod text_safety;
pub mod trace_items;
pub mod trusted_path;
pub mod untrusted;
