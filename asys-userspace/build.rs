//! Builds the eBPF programs (asys-ebpf) with the nightly toolchain through
//! aya-build; the binary embeds the object with `include_bytes_aligned!`.
use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};

fn main() -> anyhow::Result<()> {
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
    )
}
