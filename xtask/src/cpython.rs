//! Fixture CPython interpreters other than the machine's 3.11, for the
//! Python-stack tests: Debian trixie's 3.13 in `target/cpython/3.13/`,
//! Ubuntu noble's 3.12 in `target/cpython/3.12/` and Ubuntu jammy's 3.10
//! (Ubuntu 22.04's system Python, and most CUDA images') in
//! `target/cpython/3.10/`. The system's packages are not touched: a private
//! apt configuration under `target/cpython/apt-SUITE/` (its own sources
//! list, lists and cache; apt checks the suite's signature with the
//! archive's keyring) downloads the pinned packages, `dpkg-deb -x` unpacks
//! them, and `patchelf` points the interpreter at the unpacked glibc (3.12
//! and 3.13 need glibc >= 2.38, Debian 12 has 2.36; 3.10 runs on its own
//! 2.35, with jammy's expat and zlib, which Debian 12's would need 2.36
//! for), so it runs directly.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

/// One interpreter: where it comes from and the exact packages.
struct Fixture {
    version: &'static str,
    archive: &'static str,
    suites: &'static [&'static str],
    /// The keyring apt checks the suite's `InRelease` with.
    keyring: Keyring,
    /// (package, version): `apt-get download package=version` refuses any
    /// other version.
    packages: &'static [(&'static str, &'static str)],
}

#[derive(Clone, Copy)]
enum Keyring {
    /// Debian's, installed on every Debian system.
    Debian,
    /// Ubuntu's, from Debian trixie's `ubuntu-keyring` package (checked
    /// with Debian's keyring), unpacked next to the fixtures.
    Ubuntu,
}

const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
const TRIXIE: &str = "http://deb.debian.org/debian";
const UBUNTU_KEYRING: (&str, &str) = ("ubuntu-keyring", "2023.11.28.1-0.2");

const FIXTURES: &[Fixture] = &[
    Fixture {
        version: "3.13",
        archive: TRIXIE,
        suites: &["trixie"],
        keyring: Keyring::Debian,
        packages: &[
            ("python3.13-minimal", "3.13.5-2+deb13u5"),
            ("libpython3.13-minimal", "3.13.5-2+deb13u5"),
            ("libpython3.13-stdlib", "3.13.5-2+deb13u5"),
            // The headers the layout offsets were read from (see
            // docs/python-stacks.md).
            ("libpython3.13-dev", "3.13.5-2+deb13u5"),
            ("libc6", "2.41-12+deb13u5"),
        ],
    },
    Fixture {
        version: "3.12",
        archive: "http://archive.ubuntu.com/ubuntu",
        suites: &["noble", "noble-updates"],
        keyring: Keyring::Ubuntu,
        packages: &[
            ("python3.12-minimal", "3.12.3-1ubuntu0.18"),
            ("libpython3.12-minimal", "3.12.3-1ubuntu0.18"),
            ("libpython3.12-stdlib", "3.12.3-1ubuntu0.18"),
            ("libpython3.12-dev", "3.12.3-1ubuntu0.18"),
            ("libc6", "2.39-0ubuntu8.12"),
        ],
    },
    Fixture {
        version: "3.10",
        archive: "http://archive.ubuntu.com/ubuntu",
        suites: &["jammy", "jammy-updates"],
        keyring: Keyring::Ubuntu,
        packages: &[
            ("python3.10-minimal", "3.10.12-1~22.04.18"),
            ("libpython3.10-minimal", "3.10.12-1~22.04.18"),
            ("libpython3.10-stdlib", "3.10.12-1~22.04.18"),
            ("libpython3.10-dev", "3.10.12-1~22.04.18"),
            ("libc6", "2.35-0ubuntu3.18"),
            // What the interpreter links besides glibc: the system's need
            // glibc 2.36.
            ("libexpat1", "2.4.7-1ubuntu0.11"),
            ("zlib1g", "1:1.2.11.dfsg-2ubuntu9.2"),
        ],
    },
];

fn root() -> PathBuf {
    crate::target_dir().join("cpython")
}

/// Installs each fixture interpreter unless it is there and runs.
pub fn ensure() -> anyhow::Result<()> {
    crate::ensure_command(
        "patchelf",
        "patchelf",
        "pointing the fixture CPythons at their glibc",
    )?;
    for f in FIXTURES {
        let dir = root().join(f.version);
        let python = dir.join(format!("usr/bin/python{}", f.version));
        let stamp = dir.join(".asys-packages");
        let want = packages_line(f);
        if std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) && runs(&python) {
            continue;
        }
        eprintln!(
            "xtask: installing CPython {} into {}",
            f.version,
            dir.display()
        );
        install(f, &dir, &python)?;
        if !runs(&python) {
            bail!("{} does not run after installing", python.display());
        }
        std::fs::write(&stamp, want)?;
    }
    Ok(())
}

fn packages_line(f: &Fixture) -> String {
    f.packages
        .iter()
        .map(|(p, v)| format!("{p}={v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The check the tests rely on: the interpreter starts, with threads.
fn runs(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import sys, threading, time; print(sys.version)"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A private apt configuration for `suites` of `archive` under `dir`.
struct Apt {
    dir: PathBuf,
}

impl Apt {
    fn new(name: &str, archive: &str, suites: &[&str], keyring: &Path) -> anyhow::Result<Apt> {
        let dir = root().join(format!("apt-{name}"));
        for sub in ["lists/partial", "cache/archives/partial", "debs"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let sources: String = suites
            .iter()
            .map(|s| format!("deb [signed-by={}] {archive} {s} main\n", keyring.display()))
            .collect();
        std::fs::write(dir.join("sources.list"), sources)?;
        let apt = Apt { dir };
        crate::run(apt.command("apt-get").args(["-qq", "update"]))
            .with_context(|| format!("apt-get update of {archive} {suites:?}"))?;
        Ok(apt)
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        let d = &self.dir;
        c.arg("-o")
            .arg(format!(
                "Dir::Etc::SourceList={}",
                d.join("sources.list").display()
            ))
            .args(["-o", "Dir::Etc::SourceParts=/dev/null"])
            .arg("-o")
            .arg(format!("Dir::State::Lists={}", d.join("lists").display()))
            .arg("-o")
            .arg(format!("Dir::Cache={}", d.join("cache").display()))
            // Only the package lists: no AppStream metadata.
            .args([
                "-o",
                "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
            ])
            // apt's sandbox user cannot write under target/; the download
            // is checked against the signed lists all the same.
            .args(["-o", "APT::Sandbox::User=root"])
            .current_dir(d.join("debs"));
        c
    }

    /// Downloads the exact `packages` and unpacks them into `into`.
    fn unpack(&self, packages: &[(&str, &str)], into: &Path) -> anyhow::Result<()> {
        let debs = self.dir.join("debs");
        for (p, v) in packages {
            // apt names the file with the version's ':' as "%3a".
            let file = debs.join(format!("{p}_{}_{}.deb", v.replace(':', "%3a"), arch(p)));
            if !file.exists() {
                crate::run(
                    self.command("apt-get")
                        .args(["-qq", "download"])
                        .arg(format!("{p}={v}")),
                )
                .with_context(|| format!("downloading {p} {v}"))?;
            }
            crate::run(Command::new("dpkg-deb").arg("-x").arg(&file).arg(into))?;
        }
        Ok(())
    }
}

fn arch(package: &str) -> &'static str {
    if package.ends_with("-keyring") {
        "all"
    } else {
        "amd64"
    }
}

fn install(f: &Fixture, dir: &Path, python: &Path) -> anyhow::Result<()> {
    let keyring = match f.keyring {
        Keyring::Debian => PathBuf::from(DEBIAN_KEYRING),
        Keyring::Ubuntu => ubuntu_keyring()?,
    };
    let name = f.suites[0];
    let apt = Apt::new(name, f.archive, f.suites, &keyring)?;
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    apt.unpack(f.packages, dir)?;
    // Its own libraries first (jammy's packages put them under lib/,
    // noble's and trixie's under usr/lib/); the system's for what the
    // packages do not carry (3.12 and 3.13 take zlib and expat from it).
    let libs: Vec<PathBuf> = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"]
        .iter()
        .map(|l| dir.join(l))
        .filter(|l| l.is_dir())
        .collect();
    let loader = libs
        .iter()
        .map(|l| l.join("ld-linux-x86-64.so.2"))
        .find(|l| l.exists())
        .with_context(|| format!("no ld-linux-x86-64.so.2 unpacked in {}", dir.display()))?;
    let rpath: Vec<String> = libs
        .iter()
        .map(|l| l.display().to_string())
        .chain([
            "/lib/x86_64-linux-gnu".into(),
            "/usr/lib/x86_64-linux-gnu".into(),
        ])
        .collect();
    crate::run(
        Command::new("patchelf")
            .arg("--set-interpreter")
            .arg(loader)
            .arg("--set-rpath")
            .arg(rpath.join(":"))
            .arg(python),
    )
}

/// Ubuntu's archive keyring, unpacked from Debian trixie's package.
fn ubuntu_keyring() -> anyhow::Result<PathBuf> {
    let dir = root().join("ubuntu-keyring");
    let keyring = dir.join("usr/share/keyrings/ubuntu-archive-keyring.gpg");
    if !keyring.exists() {
        let apt = Apt::new("trixie", TRIXIE, &["trixie"], Path::new(DEBIAN_KEYRING))?;
        apt.unpack(&[UBUNTU_KEYRING], &dir)?;
    }
    Ok(keyring)
}
