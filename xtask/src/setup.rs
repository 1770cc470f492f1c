//! Idempotent set-up of what building the eBPF programs needs: the nightly
//! `rust-src` component and bpf-linker built against the nightly toolchain's
//! own libLLVM (CONTRIBUTING.md, "Building", has the recipe by hand).
use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

const BPF_LINKER_VERSION: &str = "0.13.0";

fn nightly_sysroot() -> anyhow::Result<PathBuf> {
    let out = Command::new("rustc")
        .args(["+nightly", "--print", "sysroot"])
        .output()
        .context("rustc +nightly")?;
    if !out.status.success() {
        bail!("the nightly toolchain is not installed (rustup toolchain list)");
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

fn llvm_major() -> anyhow::Result<String> {
    let out = Command::new("rustc").args(["+nightly", "-vV"]).output()?;
    let text = String::from_utf8(out.stdout)?;
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .context("rustc +nightly -vV names no LLVM version")?;
    Ok(v.split('.').next().unwrap_or(v).to_string())
}

fn bpf_linker_ok() -> bool {
    Command::new("rustup")
        .args(["run", "nightly", "bpf-linker", "--version"])
        .output()
        .map(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains(BPF_LINKER_VERSION)
        })
        .unwrap_or(false)
}

pub fn setup() -> anyhow::Result<()> {
    let sysroot = nightly_sysroot()?;
    if !sysroot.join("lib/rustlib/src/rust/library/core").exists() {
        eprintln!("setup: adding rust-src to the nightly toolchain");
        crate::run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    if !bpf_linker_ok() {
        let major = llvm_major()?;
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
            .context("neither CARGO_HOME nor HOME is set")?;
        let prefix = home.join("asys-llvm");
        std::fs::create_dir_all(prefix.join("lib"))?;
        let lib = std::fs::read_dir(sysroot.join("lib"))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("libLLVM.so.{major}")))
            })
            .with_context(|| format!("no libLLVM.so.{major}* in the nightly sysroot"))?;
        // The libLLVM-NN-rust-*.so beside it is a linker script; link the real one.
        let link = prefix.join("lib/libLLVM.so");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link)?;
        eprintln!(
            "setup: building bpf-linker {BPF_LINKER_VERSION} against {} (a few minutes)",
            lib.display()
        );
        // No --locked, so that cargo picks the llvm-sys that matches the
        // llvm-NN feature.
        crate::run(
            Command::new("cargo")
                .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION])
                .args([
                    "--no-default-features",
                    "--features",
                    &format!("llvm-{major}"),
                ])
                .env("LLVM_PREFIX", &prefix),
        )?;
        if !bpf_linker_ok() {
            bail!("bpf-linker was installed but `rustup run nightly bpf-linker --version` fails");
        }
    }
    Ok(())
}
