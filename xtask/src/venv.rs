//! Python venvs under target/ with pinned PyPI packages: made once, and
//! installed again only when the pins change (a `.asys-packages` stamp holds
//! the set last installed).
use std::{path::Path, process::Command};

use anyhow::Context as _;

/// Whether pip installs the pins' own requirements too.
#[derive(Clone, Copy, PartialEq)]
pub enum Deps {
    /// The pins are the whole set (`--no-deps`).
    PinsOnly,
    /// What the pins require comes with them.
    Resolved,
}

/// `pip install` with the flags every venv here uses. `--no-cache-dir`:
/// the NVIDIA wheels are about 2 GB, and pip's cache would hold a second
/// copy of them beside the venv (a CI machine with little disk ran out of
/// space there).
pub const PIP_INSTALL: [&str; 4] = [
    "install",
    "--quiet",
    "--disable-pip-version-check",
    "--no-cache-dir",
];

/// Makes the venv `env` if it is missing and installs `packages` into it
/// unless the stamp says they are there; returns its python.
pub fn ensure(env: &Path, packages: &[&str], deps: Deps) -> anyhow::Result<std::path::PathBuf> {
    let python = env.join("bin/python");
    if !python.exists() {
        crate::run(Command::new("python3").args(["-m", "venv"]).arg(env))
            .context("creating a Python venv (Debian: apt-get install python3-venv)")?;
    }
    let stamp = env.join(".asys-packages");
    let want = packages.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) {
        let mut pip = Command::new(env.join("bin/pip"));
        pip.args(PIP_INSTALL);
        if deps == Deps::PinsOnly {
            pip.arg("--no-deps");
        }
        crate::run(pip.args(packages))?;
        std::fs::write(&stamp, want)?;
    }
    Ok(python)
}
