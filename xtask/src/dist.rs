//! `cargo xtask dist`: the release. Writes into target/dist/:
//!
//! - `asys-VERSION-x86_64-linux/`, the installed layout (`bin/asys`,
//!   `lib/asys/libasys_inject.so`, the simulated runtime in `lib/asys/sim`
//!   and `include/asys/sim`, man pages, shell completions, the licenses and
//!   the docs under `share/`), and its tarball
//!   `asys-VERSION-x86_64-linux.tar.gz`;
//! - `asys_VERSION-1_amd64.deb`, the same files under `/usr`.
//!
//! Everything that runs or is loaded is built against glibc 2.17 with
//! cargo-zigbuild and zig (PyPI's `cargo-zigbuild` and `ziglang` wheels, in
//! a venv under target/), so that asys starts on any distribution of the
//! last ten years and its injection library loads into any application
//! there. Each file's highest GLIBC_ symbol version is checked (objdump -T)
//! and the build fails past 2.17. The `.deb` is made by `dpkg-deb`, which
//! every Debian host has: cargo-deb would add a tool to build for a
//! package whose metadata is a dozen lines.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

/// The wheels the release build uses, pinned.
const TOOLS: &[&str] = &["ziglang==0.17.1", "cargo-zigbuild==0.24.1"];
/// Rust's target with zig's glibc version suffix.
const TARGET: &str = "x86_64-unknown-linux-gnu";
const GLIBC: &str = "2.17";

/// What `dist` made.
pub struct Dist {
    /// The unpacked layout (the tarball's one folder).
    pub tree: PathBuf,
    pub tarball: PathBuf,
    pub deb: PathBuf,
}

pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

pub fn run_task(args: &[String]) -> anyhow::Result<()> {
    if let Some(a) = args.first() {
        bail!("dist takes no arguments (got {a})");
    }
    let d = build()?;
    for p in [&d.tarball, &d.deb] {
        let size = std::fs::metadata(p)?.len();
        println!("{} ({:.1} MiB)", p.display(), size as f64 / 1048576.0);
    }
    Ok(())
}

pub fn build() -> anyhow::Result<Dist> {
    crate::ensure_command(
        "objdump",
        "binutils",
        "the release's glibc check and objcopy",
    )?;
    crate::ensure_command("dpkg-deb", "dpkg", "the .deb")?;
    let target = crate::target_dir();
    let tools = target.join("dist-tools");
    let python = crate::venv::ensure(&tools, TOOLS, crate::venv::Deps::PinsOnly)?;
    let bin_dir = python.parent().expect("venv/bin").to_path_buf();
    // cargo-zigbuild finds zig as `python3 -m ziglang` of the python first
    // on PATH: the venv's.
    let path = std::env::join_paths(std::iter::once(bin_dir.clone()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    crate::run(
        crate::cargo()
            .env("PATH", &path)
            .env("ASYS_BUILD_BASELINE", format!("glibc {GLIBC}"))
            // Cargo's release default strips debug info with
            // `-Wl,--strip-debug`, which zig's linker takes as stripping
            // everything: the symbol table too, which asys needs to name
            // its own frames (`asys selftest`'s sampling check does).
            .env("CARGO_PROFILE_RELEASE_STRIP", "none")
            .arg("zigbuild")
            .args(["--release", "--target", &format!("{TARGET}.{GLIBC}")])
            .args(["-p", "asys-userspace", "-p", "asys-inject"]),
    )
    .context("cargo zigbuild (the release build against glibc 2.17)")?;
    let built = target.join(TARGET).join("release");

    let name = format!("asys-{}-x86_64-linux", version());
    let dist = target.join("dist");
    let tree = dist.join(&name);
    if tree.exists() {
        std::fs::remove_dir_all(&tree)?;
    }
    let dirs = Layout::under(&tree);
    dirs.create()?;
    copy(&built.join("asys"), &dirs.bin.join("asys"))?;
    copy(
        &built.join("libasys_inject.so"),
        &dirs.lib.join("libasys_inject.so"),
    )?;
    // Debug info out (std's, 20 MB), the symbol table kept.
    for f in [dirs.bin.join("asys"), dirs.lib.join("libasys_inject.so")] {
        crate::run(Command::new("objcopy").arg("--strip-debug").arg(&f))?;
    }

    // The simulated runtime, built against glibc 2.17 by zig's C compiler,
    // finding its own libraries beside it ($ORIGIN).
    let zig_cc = || {
        let mut c = Command::new(&python);
        c.args(["-m", "ziglang", "cc", "-target"])
            .arg(format!("x86_64-linux-gnu.{GLIBC}"));
        c
    };
    crate::sim::build_libraries(&zig_cc, &dirs.sim_lib, "$ORIGIN")?;
    for h in crate::sim::headers() {
        copy(&h, &dirs.sim_include.join(h.file_name().expect("a file")))?;
    }

    // Man pages and completions, from the binary's own command line.
    let generated = dist.join("generated");
    if generated.exists() {
        std::fs::remove_dir_all(&generated)?;
    }
    crate::run(
        Command::new(dirs.bin.join("asys"))
            .arg("__generate")
            .arg(&generated),
    )?;
    for e in std::fs::read_dir(generated.join("man/man1"))? {
        let p = e?.path();
        copy(&p, &dirs.man.join(p.file_name().expect("a file")))?;
    }
    let completions = generated.join("completions");
    copy(&completions.join("asys.bash"), &dirs.bash.join("asys"))?;
    copy(&completions.join("_asys"), &dirs.zsh.join("_asys"))?;
    copy(&completions.join("asys.fish"), &dirs.fish.join("asys.fish"))?;
    let root = crate::root();
    for f in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
        copy(&root.join(f), &dirs.doc.join(f))?;
    }
    for e in std::fs::read_dir(root.join("docs"))? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "md") {
            copy(
                &p,
                &dirs.doc.join("docs").join(p.file_name().expect("a file")),
            )?;
        }
    }

    check(&tree)?;

    let tarball = dist.join(format!("{name}.tar.gz"));
    crate::run(
        Command::new("tar")
            .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner"])
            .arg("-czf")
            .arg(&tarball)
            .arg("-C")
            .arg(&dist)
            .arg(&name),
    )?;
    let deb = deb(&dist, &tree)?;
    Ok(Dist { tree, tarball, deb })
}

/// The folders of the installed layout under a prefix.
struct Layout {
    bin: PathBuf,
    lib: PathBuf,
    sim_lib: PathBuf,
    sim_include: PathBuf,
    man: PathBuf,
    bash: PathBuf,
    zsh: PathBuf,
    fish: PathBuf,
    doc: PathBuf,
}

impl Layout {
    fn under(prefix: &Path) -> Self {
        Self {
            bin: prefix.join("bin"),
            lib: prefix.join("lib/asys"),
            sim_lib: prefix.join("lib/asys/sim"),
            sim_include: prefix.join("include/asys/sim"),
            man: prefix.join("share/man/man1"),
            bash: prefix.join("share/bash-completion/completions"),
            zsh: prefix.join("share/zsh/site-functions"),
            fish: prefix.join("share/fish/vendor_completions.d"),
            doc: prefix.join("share/doc/asys"),
        }
    }

    fn create(&self) -> anyhow::Result<()> {
        for d in [
            &self.bin,
            &self.lib,
            &self.sim_lib,
            &self.sim_include,
            &self.man,
            &self.bash,
            &self.zsh,
            &self.fish,
            &self.doc.join("docs"),
        ] {
            std::fs::create_dir_all(d).with_context(|| d.display().to_string())?;
        }
        Ok(())
    }
}

fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// The highest GLIBC_ symbol version an ELF file needs (objdump -T), as
/// (major, minor); None when it needs none.
fn glibc_needed(file: &Path) -> anyhow::Result<Option<(u32, u32)>> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(file)
        .output()
        .context("objdump (binutils)")?;
    if !out.status.success() {
        bail!("objdump -T {} failed", file.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut it = v.split('.').map(|n| n.parse::<u32>().ok());
            Some((it.next()??, it.next().flatten().unwrap_or(0)))
        })
        .max())
}

/// Each ELF file of the release needs glibc 2.17 at most, and the binary
/// has its eBPF programs.
fn check(tree: &Path) -> anyhow::Result<()> {
    let mut elves = vec![
        tree.join("bin/asys"),
        tree.join("lib/asys/libasys_inject.so"),
    ];
    for e in std::fs::read_dir(tree.join("lib/asys/sim"))? {
        elves.push(e?.path());
    }
    let (major, minor) = GLIBC
        .split_once('.')
        .map(|(a, b)| (a.parse::<u32>().unwrap(), b.parse::<u32>().unwrap()))
        .expect("GLIBC is MAJOR.MINOR");
    for f in &elves {
        if let Some((a, b)) = glibc_needed(f)?
            && (a, b) > (major, minor)
        {
            bail!(
                "{} needs GLIBC_{a}.{b}, past the {GLIBC} baseline",
                f.display()
            );
        }
    }
    let out = Command::new(tree.join("bin/asys"))
        .arg("--version")
        .output()?;
    let version = String::from_utf8_lossy(&out.stdout);
    if !version.contains("eBPF programs embedded") {
        bail!(
            "the release binary has no eBPF programs ({}): run `cargo xtask setup`",
            version.trim()
        );
    }
    Ok(())
}

/// The `.deb`: the layout under /usr, with its control file.
fn deb(dist: &Path, tree: &Path) -> anyhow::Result<PathBuf> {
    let stage = dist.join("deb-root");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    let usr = stage.join("usr");
    std::fs::create_dir_all(&usr)?;
    crate::run(Command::new("cp").arg("-a").arg(tree.join(".")).arg(&usr))?;
    // Debian keeps man pages compressed.
    for e in std::fs::read_dir(usr.join("share/man/man1"))? {
        crate::run(Command::new("gzip").args(["-9", "-n"]).arg(e?.path()))?;
    }
    let installed_kib = du_kib(&usr)?;
    std::fs::create_dir_all(stage.join("DEBIAN"))?;
    std::fs::write(
        stage.join("DEBIAN/control"),
        format!(
            "Package: asys\n\
             Version: {v}-1\n\
             Architecture: amd64\n\
             Maintainer: The asys developers <asys@example.invalid>\n\
             Depends: libc6 (>= {GLIBC})\n\
             Section: devel\n\
             Priority: optional\n\
             Installed-Size: {installed_kib}\n\
             Homepage: https://example.invalid/asys\n\
             Description: system profiler for accelerator workloads, built on eBPF\n \
             asys records an application's accelerator API calls, device kernels\n \
             and copies, annotated ranges, OS calls, scheduling and sampled stacks\n \
             on one timeline, and turns them into summaries and exports.\n",
            v = version()
        ),
    )?;
    let deb = dist.join(format!("asys_{}-1_amd64.deb", version()));
    crate::run(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "--build"])
            .arg(&stage)
            .arg(&deb),
    )?;
    Ok(deb)
}

fn du_kib(dir: &Path) -> anyhow::Result<u64> {
    let out = Command::new("du").arg("-sk").arg(dir).output()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .context("du -sk")
}
