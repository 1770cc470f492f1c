//! The test workloads of tests/workloads/, each compiled once: the binary is
//! kept under target/test-workloads/, keyed by the source's content, the
//! headers it includes from the `-I` folders given, the compiler and its
//! flags, so every test and every test binary of a run (and later runs,
//! until the source changes) uses the same one.
use std::{
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
};

use crate::{Finish as _, sim, site_packages, target, workspace};

/// tests/workloads/`file`.
pub fn workload_source(file: &str) -> PathBuf {
    let p = workspace().join("tests/workloads").join(file);
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

/// The headers `source` includes (`#include "x.h"` or `<x.h>`) that are in
/// one of the `-I` folders of `flags`, with their contents.
fn included_headers(source: &str, flags: &[&str]) -> Vec<(PathBuf, Vec<u8>)> {
    let folders: Vec<&str> = flags.iter().filter_map(|f| f.strip_prefix("-I")).collect();
    source
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("#include"))
        .filter_map(|l| {
            let l = l.trim();
            let name = l.get(1..l.len().checked_sub(1)?)?;
            folders
                .iter()
                .map(|dir| Path::new(dir).join(name))
                .find(|p| p.is_file())
        })
        .map(|p| {
            let text = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, text)
        })
        .collect()
}

/// Compiles tests/workloads/`file` (C with `cc`, C++ with `g++`, by its
/// extension) into a binary named `name`, as `COMPILER -o BIN SOURCE FLAGS`
/// (libraries among the flags, after the source), once: a later call with
/// the same source, headers, name and flags returns the same binary. The
/// compiler writes a temporary file, renamed into place, so tests building
/// the same workload at once (threads, or test binaries run side by side)
/// never see a partly written one.
pub fn build_workload(file: &str, name: &str, flags: &[&str]) -> PathBuf {
    let src = workload_source(file);
    let compiler = match src.extension().and_then(|e| e.to_str()) {
        Some("c") => "cc",
        Some("cpp" | "cc") => "g++",
        _ => panic!("{file}: a workload to compile is C (.c) or C++ (.cpp, .cc)"),
    };
    let text = std::fs::read_to_string(&src).unwrap();
    let mut key = std::hash::DefaultHasher::new();
    (compiler, name, flags, &text).hash(&mut key);
    included_headers(&text, flags).hash(&mut key);
    let dir = target()
        .join("test-workloads")
        .join(format!("{name}-{:016x}", key.finish()));
    let bin = dir.join(name);
    if bin.is_file() {
        return bin;
    }
    std::fs::create_dir_all(&dir).unwrap();
    static N: AtomicU32 = AtomicU32::new(0);
    let partial = dir.join(format!(
        ".{name}.{}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let o = Command::new(compiler)
        .arg("-o")
        .arg(&partial)
        .arg(&src)
        .args(flags)
        .finish();
    assert!(
        o.status.success(),
        "{compiler} {} {flags:?} failed: {}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&partial, &bin).unwrap();
    bin
}

/// The name of the binary of workload `file`: its file name less the
/// extension.
fn stem(file: &str) -> &str {
    file.rsplit_once('.').map_or(file, |(stem, _)| stem)
}

/// A C workload built with `cc -O1` and `extra` flags, named after its file.
pub fn c_workload(file: &str, extra: &[&str]) -> PathBuf {
    let mut flags = vec!["-O1"];
    flags.extend_from_slice(extra);
    build_workload(file, stem(file), &flags)
}

/// A C workload built against the simulated runtime's headers and these of
/// its libraries (`hggcrt`, `hgtx`, ...), found at run time by rpath.
pub fn sim_workload(file: &str, libs: &[&str]) -> PathBuf {
    let lib = sim().join("lib");
    let mut flags = vec![
        format!("-I{}", sim().join("include").display()),
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", lib.display()),
    ];
    flags.extend(libs.iter().map(|l| format!("-l{l}")));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    c_workload(file, &flags)
}

/// A C workload built against NVIDIA's libcudart.so.12 from target/pyenv
/// (found at run time through an rpath), with `extra` flags.
pub fn cudart_workload(file: &str, extra: &[&str]) -> PathBuf {
    let lib = site_packages().join("nvidia/cuda_runtime/lib");
    assert!(lib.join("libcudart.so.12").exists(), "{}", lib.display());
    let libdir = lib.to_str().unwrap();
    let rpath = format!("-Wl,-rpath,{libdir}");
    let mut flags = vec!["-O1", "-L", libdir, "-l:libcudart.so.12", &rpath];
    flags.extend_from_slice(extra);
    build_workload(file, stem(file), &flags)
}
