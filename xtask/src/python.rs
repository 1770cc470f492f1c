//! A Python environment under target/pyenv with the real NVIDIA libraries that
//! install from PyPI without a GPU: libcudart (nvidia-cuda-runtime-cu12) and a
//! real NVTX client (nvtx). Tests trace them; nothing here needs a GPU.
use std::{path::PathBuf, process::Command};

use anyhow::Context as _;

const PACKAGES: &[&str] = &["nvidia-cuda-runtime-cu12==12.9.79", "nvtx==0.2.17"];

pub fn root() -> PathBuf {
    crate::target_dir().join("pyenv")
}

/// Creates the environment if needed and installs the pinned packages
/// (pip skips what is already there).
pub fn ensure() -> anyhow::Result<PathBuf> {
    let env = root();
    let python = env.join("bin/python");
    if !python.exists() {
        crate::run(Command::new("python3").args(["-m", "venv"]).arg(&env))
            .context("creating a Python venv (Debian: apt-get install python3-venv)")?;
    }
    let stamp = env.join(".asys-packages");
    let want = PACKAGES.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) {
        crate::run(
            Command::new(env.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .args(PACKAGES),
        )?;
        std::fs::write(&stamp, want)?;
    }
    Ok(env)
}
