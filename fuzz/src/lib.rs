//! asys's report readers, and its parsers of what other users give it
//! (JIT maps, `/proc/PID/maps`, CPython structures, the NVTX registration
//! table), as a library for the fuzz targets. The report, its readers and
//! `stats` are asys-report's (a dependency). The parsers are modules of the
//! `asys` binary (asys-userspace), which is no library, so they are compiled
//! here from their own files (`#[path]`): the targets fuzz the very code
//! asys runs, with nothing copied. A parser module that comes to use another
//! module of asys needs that one listed here too (`cargo xtask test` builds
//! the targets).
#![allow(dead_code, unused_imports, clippy::all)]

pub use asys_report::{report, stats};
// The parsers open files with asys-report's untrusted-input rules.
use asys_report::untrusted;

#[path = "../../asys-userspace/src/symbolize/jit_files.rs"]
pub mod jit_map;
#[path = "../../asys-userspace/src/process/mapped_file.rs"]
mod mapped_file;
#[path = "../../asys-userspace/src/collect/registered_names/table.rs"]
pub mod nvtx_table;
#[path = "../../asys-userspace/src/process/procfs.rs"]
pub mod procfs;
#[path = "../../asys-userspace/src/collect/python_code.rs"]
pub mod python_code;
#[path = "../../asys-userspace/src/collect/python_threads.rs"]
pub mod python_threads;
#[path = "../../asys-userspace/src/process/remote_memory.rs"]
pub mod remote_memory;
#[path = "../../asys-userspace/src/elf/mapped.rs"]
pub mod elf_mapped;

// The parsers name each other by their paths in asys (`crate::process::procfs`
// and the like): these modules give them those paths here.

/// The one module of asys's ELF reading the CPython readers use (how they
/// map an interpreter's file), under its own path.
mod elf {
    pub use crate::elf_mapped as mapped;
}
mod process {
    pub(crate) use crate::{mapped_file, procfs, remote_memory};
}
mod collect {
    pub use crate::{python_code, python_threads};
}

pub mod untrusted_input;

use std::{fs::File, io::Write, os::fd::FromRawFd, path::PathBuf};

use report::container::Container;

/// `bytes` in an anonymous in-memory file, and a path that opens it.
pub fn memory_file(bytes: &[u8]) -> (File, PathBuf) {
    // SAFETY: a NUL-terminated name and no flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"asys-fuzz".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create failed");
    // SAFETY: `fd` was just created and is owned by nothing else.
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.write_all(bytes).expect("write to a memfd");
    (f, PathBuf::from(format!("/proc/self/fd/{fd}")))
}

/// Computes every report `asys stats` knows from an opened report; errors
/// are fine, panics are not (libFuzzer aborts on one).
pub fn every_report(report: &Container) {
    for (_, f) in stats::REPORTS {
        let _ = f(report);
    }
    let _ = report.recovered_warning();
    let _ = stats::drops_note(report);
    // Panics of the Parquet/Arrow decoders are caught at the boundary and
    // become errors; ASYS_FUZZ_STRICT=1 makes one a crash, to find them.
    if std::env::var_os("ASYS_FUZZ_STRICT").is_some() {
        assert_eq!(
            report::decode_guard::caught(),
            0,
            "a decoder panicked (caught at the boundary)"
        );
    }
}

/// A tar of `members` (name, bytes) in the layout `pack` writes.
pub fn tar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_path(name).expect("short name");
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}
