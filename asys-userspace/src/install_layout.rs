//! Where asys's other parts lie, found from its own binary's path: the
//! injection library and the simulated runtime. Two layouts, tried in
//! order:
//!
//! - installed (the release tarball, the `.deb`): `PREFIX/bin/asys`, with
//!   `PREFIX/lib/asys/libasys_inject.so` and `PREFIX/lib/asys/sim/`;
//! - the build tree: `target/PROFILE/asys`, with `libasys_inject.so` beside
//!   it and the simulated runtime in `target/sim/lib` (`cargo xtask sim`).
//!
//! The binary's path is the kernel's (`/proc/self/exe`), so a symbolic
//! link to it in `PATH` finds the same parts. A top-level module because
//! the cli stage (status, selftest, the application's environment) and
//! the kernel stage both ask.
use std::path::{Path, PathBuf};

/// The injection library's file name.
pub const INJECTION_LIB: &str = "libasys_inject.so";

/// The folder asys's binary is in.
fn exe_dir() -> Option<PathBuf> {
    Some(std::env::current_exe().ok()?.parent()?.to_path_buf())
}

/// Where the injection library would be for a binary in `bin`, in the
/// order tried.
fn injection_candidates(bin: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(prefix) = bin.parent() {
        out.push(prefix.join("lib/asys").join(INJECTION_LIB));
    }
    out.push(bin.join(INJECTION_LIB));
    out
}

/// The injection library (ASYS_INJECTION_LIB overrides the layout), if
/// there is one.
pub fn injection_library() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ASYS_INJECTION_LIB") {
        return Some(p.into());
    }
    injection_candidates(&exe_dir()?)
        .into_iter()
        .find(|p| p.is_file())
}

/// Where the injection library was looked for, for a message that says
/// it is missing.
pub fn injection_library_places() -> String {
    exe_dir()
        .map(|d| {
            injection_candidates(&d)
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        })
        .unwrap_or_else(|| INJECTION_LIB.to_string())
}

/// The folder of the simulated runtime's libraries (libhggcrt.so and the
/// others), if asys has them.
pub fn simulated_runtime() -> Option<PathBuf> {
    let bin = exe_dir()?;
    let prefix = bin.parent()?;
    [prefix.join("lib/asys/sim"), prefix.join("sim/lib")]
        .into_iter()
        .find(|d| d.join("libhggcrt.so").is_file())
}

/// asys's injection library, by its file name (a copy that asys loaded into
/// a process of another mount namespace is a memfd of the same name).
pub fn is_injection_library(path: &std::path::Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy());
    if name
        .as_deref()
        .is_some_and(|n| n.starts_with("memfd:libasys_inject"))
    {
        return true;
    }
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("libasys_inject"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installed_place_comes_before_the_build_trees() {
        assert_eq!(
            injection_candidates(Path::new("/opt/asys-1.0/bin")),
            [
                PathBuf::from("/opt/asys-1.0/lib/asys/libasys_inject.so"),
                PathBuf::from("/opt/asys-1.0/bin/libasys_inject.so"),
            ]
        );
    }
}
