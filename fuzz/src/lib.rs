//! What the fuzz targets share: the report readers (asys-report) and the
//! parsers of what other users give asys (JIT maps, `/proc/PID/maps`,
//! CPython structures, the NVTX registration table), which are
//! asys-userspace's [`untrusted_parsers`]: the targets fuzz the very code
//! asys runs, through the crates' own public surfaces.

pub use asys_userspace::untrusted_parsers::{
    jit_map, nvtx_table, procfs, python_code, python_threads, remote_memory,
};

pub mod untrusted_input;

use std::{fs::File, io::Write, os::fd::FromRawFd, path::PathBuf};

use asys_report::{report::container::Container, report::decode_guard, stats::REPORTS};

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
    for (_, f) in REPORTS {
        let _ = f(report);
    }
    let _ = report.recovered_warning();
    let _ = asys_report::stats::drops_note(report);
    // Panics of the Parquet/Arrow decoders are caught at the boundary and
    // become errors; ASYS_FUZZ_STRICT=1 makes one a crash, to find them.
    if std::env::var_os("ASYS_FUZZ_STRICT").is_some() {
        assert_eq!(
            decode_guard::caught(),
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
