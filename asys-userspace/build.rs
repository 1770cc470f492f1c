//! Builds the eBPF programs (asys-ebpf) with the nightly toolchain through
//! aya-build; the library embeds the object with `include_bytes_aligned!`
//! (kernel/mod.rs) when this script sets `asys_ebpf_built`.
//!
//! The programs need the nightly toolchain with `rust-src` and bpf-linker
//! (`cargo xtask setup` installs both; CONTRIBUTING.md says how by hand).
//! Where they are missing, or the `ebpf` feature is off (the fuzz targets
//! use the parsers only), or `AYA_BUILD_SKIP=1`, the rest still builds on
//! stable: a warning says so, and such an `asys` refuses to record with a
//! line naming why.
use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};
use std::process::Command;

fn main() -> anyhow::Result<()> {
    version_facts();
    println!("cargo::rustc-check-cfg=cfg(asys_ebpf_built)");
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
    if std::env::var_os("CARGO_FEATURE_EBPF").is_none() {
        return Ok(());
    }
    if std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true")) {
        println!(
            "cargo:warning=AYA_BUILD_SKIP is set: asys is built without its eBPF programs and cannot record"
        );
        return Ok(());
    }
    if let Some(missing) = missing_toolchain() {
        println!(
            "cargo:warning=asys is built without its eBPF programs and cannot record: {missing}; \
             `cargo xtask setup` installs what they need (CONTRIBUTING.md)"
        );
        return Ok(());
    }
    let manifest = std::env::var("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR")?;
    let root = std::path::Path::new(&manifest)
        .parent()
        .ok_or_else(|| anyhow!("no workspace root"))?;
    let ebpf_dir = root.join("asys-ebpf");
    // aya-build watches the eBPF crate; the shared event types matter too.
    println!(
        "cargo:rerun-if-changed={}",
        root.join("asys-common/src").display()
    );
    let ebpf_dir = ebpf_dir.to_str().ok_or_else(|| anyhow!("non-UTF-8 path"))?;
    aya_build::build_ebpf(
        [Package {
            name: "asys-ebpf",
            root_dir: ebpf_dir,
            ..Default::default()
        }],
        Toolchain::Nightly,
    )?;
    println!("cargo:rustc-cfg=asys_ebpf_built");
    Ok(())
}

/// What building the eBPF programs needs and this machine lacks, if
/// anything: rustup's nightly toolchain, its `rust-src`, and bpf-linker.
fn missing_toolchain() -> Option<String> {
    let sysroot = match Command::new("rustup")
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .output()
    {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(_) => return Some("rustup has no nightly toolchain".into()),
        Err(_) => return Some("rustup is not installed".into()),
    };
    let core = std::path::Path::new(&sysroot).join("lib/rustlib/src/rust/library/core");
    if !core.exists() {
        return Some("the nightly toolchain lacks rust-src".into());
    }
    match Command::new("rustup")
        .args(["run", "nightly", "bpf-linker", "--version"])
        .output()
    {
        Ok(o) if o.status.success() => None,
        _ => Some("bpf-linker is not installed".into()),
    }
}

/// What `asys --version` says of the build: the commit (`ASYS_COMMIT`,
/// from git, "unknown" outside a checkout) and the C library baseline
/// (`ASYS_BASELINE`: what `cargo xtask dist` builds against, given as
/// ASYS_BUILD_BASELINE, else the build host's glibc, which a plain build
/// needs at least).
fn version_facts() {
    println!("cargo:rerun-if-env-changed=ASYS_BUILD_BASELINE");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&manifest)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // A new commit changes HEAD's ref (or HEAD itself when detached).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
    }
    let baseline = std::env::var("ASYS_BUILD_BASELINE")
        .ok()
        .unwrap_or_else(|| {
            Command::new("getconf")
                .arg("GNU_LIBC_VERSION")
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .filter(|v| !v.is_empty())
                .map(|v| format!("{v} (the build host's)"))
                .unwrap_or_else(|| "the build host's C library".into())
        });
    println!("cargo:rustc-env=ASYS_COMMIT={commit}");
    println!("cargo:rustc-env=ASYS_BASELINE={baseline}");
}
