//! asys's recording side, and its command line: the settings stage (what
//! the arguments ask for), the kernel side's loader (`kernel`), the collect
//! stage (events to rows), the sink (rows to Parquet, crash-safe), the
//! symbolize stage, the recording driver (`record`) and one module per
//! subcommand (`cli`). The report and everything that reads one are
//! asys-report's. See docs/architecture.md for the map.
//!
//! The `asys` binary is [`main`]. Besides it, the library offers only what
//! other crates of the project test: the parsers of data that other users
//! control ([`untrusted_parsers`]), which the fuzz targets run.
mod apis;
mod cli;
mod clock;
mod collect;
mod elf;
mod inject;
mod install_layout;
mod kernel;
mod probe_spec;
mod process;
mod record;
mod runtime_dir;
mod session;
mod settings;
mod sink;
mod spawn;
mod symbolize;

/// Runs the `asys` command line: parses the process's arguments, runs the
/// subcommand, prints any error as one escaped line, and returns the exit
/// code.
pub fn main() -> std::process::ExitCode {
    cli::entry::main()
}

/// The parsers of what other users give asys, as asys runs them: JIT
/// symbol maps, `/proc/PID/maps`, CPython's code objects and thread
/// states, and the NVTX registration table, each read from files or
/// another process's memory. Public for the fuzz targets (fuzz/).
pub mod untrusted_parsers {
    pub use crate::collect::{python_code, python_threads, registered_names::table as nvtx_table};
    pub use crate::process::{procfs, remote_memory};
    pub use crate::symbolize::jit_files as jit_map;
}
