//! asys's report, as a library: the tables a recording writes, the
//! `.asysrep` file that holds them, and everything that reads a finished
//! report.
//!
//! What it offers:
//! - [`report`]: the report format. [`report::schema`] declares every
//!   table once (its columns, their types and encodings, and how a row of
//!   [`report::rows`] fills them); [`report::container`] packs the tables
//!   into one file and opens it again, checked whole; [`report::metadata`]
//!   is what a recording says of itself; [`report::reader`] reads a table a
//!   row group at a time, only the columns asked for; [`report::read`] has
//!   the typed reader of each table (its rows as the recorder wrote them,
//!   or for device activity one reader view); [`report::builder`] writes a
//!   small report from rows held in memory; [`report::set`] puts the
//!   reports of several ranks on one timeline.
//! - [`stats`]: the `asys stats` reports ([`stats::REPORTS`], by name with
//!   [`stats::find`]), printed by [`stats::format`].
//! - [`analyze`]: the `asys analyze` rules ([`analyze::RuleSpec`],
//!   [`analyze::data::Data`], [`analyze::run`]).
//! - [`export`]: the report in other tools' formats (SQLite as nsys
//!   writes it, Parquet, Arrow, JSON lines, Perfetto, Kineto, folded
//!   stacks and flame graphs); [`import`]: an SQLite export read back
//!   into a report.
//! - The small pure modules these need: the traced API families
//!   ([`trace_items`]), the settings a report's metadata records
//!   ([`recorded_settings`]), text escaping ([`text_safety`]), safe
//!   opening of untrusted files ([`untrusted`]) and trusted output folders
//!   ([`trusted_path`]).
//!
//! It has no kernel code and must not come to depend on any: no aya, no
//! asys-ebpf, and asys-common only without its `user` feature (which pulls
//! aya in). The `asys` binary (asys-userspace) records reports and depends
//! on this crate; the fuzz targets (fuzz/) fuzz its readers through it.
//! Errors are `thiserror` enums; `anyhow` belongs to the binary.
//!
//! # Example
//!
//! A report of two runs of one kernel, written with the crate's own
//! writer, read back through the device activity's typed reader, and
//! summarised by a stats report:
//!
//! ```
//! use asys_report::{
//!     report::{
//!         builder::ReportBuilder,
//!         read::activity,
//!         rows::{ActivityRow, SymbolRow},
//!         schema::{self, ActivityKind},
//!     },
//!     stats,
//! };
//!
//! # fn main() -> Result<(), asys_report::report::ReportError> {
//! let mut b = ReportBuilder::new()?;
//! // The kernel at 0x100 of process 7 is named "gemm".
//! let gemm = b.string("gemm");
//! let symbol = SymbolRow { pid: 7, addr: 0x100, name_id: gemm };
//! b.table::<schema::symbols::Table>(schema::SYMBOLS, &[symbol])?;
//! let kernel = |start, end| ActivityRow {
//!     start,
//!     end,
//!     kind: ActivityKind::Kernel,
//!     pid: 7,
//!     kernel_addr: Some(0x100),
//!     ..Default::default()
//! };
//! b.table::<schema::activity::Table>(schema::HGGC_ACTIVITY, &[kernel(0, 30), kernel(40, 50)])?;
//! let report = b.finish_temporary()?;
//!
//! // The device activity, a batch at a time, each row as an Activity.
//! let mut busy = 0;
//! for batch in activity::scan_trace(&report)? {
//!     for a in activity::rows(&batch?)? {
//!         busy += a.duration();
//!     }
//! }
//! assert_eq!(busy, 40);
//!
//! // The kernel summary: one row (numbered), the kernel by its name, its
//! // two instances and their 40 ns.
//! let kern_sum = stats::find("hggc_ppu_kern_sum").expect("a report of that name");
//! let table = kern_sum(&report)?;
//! let mut csv = Vec::new();
//! stats::format::write(&mut csv, &table, stats::format::Format::Csv).expect("written");
//! let csv = String::from_utf8(csv).expect("text");
//! assert!(csv.lines().any(|l| l.starts_with("1,100.0,40,2,") && l.ends_with(",gemm")), "{csv}");
//! # Ok(())
//! # }
//! ```
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
