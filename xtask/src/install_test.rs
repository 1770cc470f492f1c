//! `cargo xtask install-test`: the release on hosts with no Rust toolchain.
//! The tarball and the `.deb` of `cargo xtask dist` are each installed into
//! a clean root file system of Debian 11 (glibc 2.31) and of Debian 12,
//! made by debootstrap from Debian's registry (cached under
//! target/install-test, copied afresh for each install), and run there in
//! a chroot on this kernel (install_test/run.sh): `asys selftest`, `asys
//! status --environment`, a profile of a C program built there against
//! libcudart from NVIDIA's PyPI wheel, and one built there against the
//! simulated runtime asys installs, whose device records come through the
//! installed injection library. Each count is checked against what the
//! program says it did.
//!
//! Then the same release in Debian's real 6.1 kernel under qemu (the VM
//! pass's guest, whose root is this machine's, read-only): selftest with
//! kprobes, status, and the two programs built in the Debian 12 root.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};
use serde_json::Value;

/// Debian's suites: the codename and what it is.
const SUITES: [(&str, &str); 2] = [("bullseye", "Debian 11"), ("bookworm", "Debian 12")];
const MIRROR: &str = "http://deb.debian.org/debian";
/// What the programs built in the root make, and so what asys must count.
const CUDART_CALLS: u64 = 100;
const SIM_STEPS: u64 = 50;

const RUN_SH: &str = include_str!("install_test/run.sh");
const CUDART_STEPS_C: &str = include_str!("install_test/cudart_steps.c");
const SIM_STEPS_C: &str = include_str!("install_test/sim_steps.c");

#[derive(Clone, Copy, PartialEq)]
enum How {
    Tarball,
    Deb,
}

impl How {
    fn word(self) -> &'static str {
        match self {
            How::Tarball => "tarball",
            How::Deb => "deb",
        }
    }
}

pub fn run_task(args: &[String]) -> anyhow::Result<()> {
    if let Some(a) = args.first() {
        bail!("install-test takes no arguments (got {a})");
    }
    crate::ensure_command(
        "debootstrap",
        "debootstrap",
        "the install test's root file systems",
    )?;
    crate::ensure_command(
        "unshare",
        "util-linux",
        "the install test's mount namespace",
    )?;
    let dist = crate::dist::build()?;
    let cudart = cudart_lib()?;
    let dir = crate::target_dir().join("install-test");
    let mut failures = Vec::new();
    for (suite, what) in SUITES {
        let base = rootfs(&dir, suite)?;
        for how in [How::Tarball, How::Deb] {
            let label = format!("{what} ({suite}), {}", how.word());
            match install_and_run(&dir, &base, suite, how, &dist, &cudart) {
                Ok(summary) => println!("== install-test {label}: ok ==\n{summary}"),
                Err(e) => {
                    println!("== install-test {label}: FAILED ==\n{e:#}");
                    failures.push(label);
                }
            }
        }
    }
    match in_guest(&dir, &dist, &cudart) {
        Ok(summary) => println!("== install-test Linux 6.1 guest, tarball: ok ==\n{summary}"),
        Err(e) => {
            println!("== install-test Linux 6.1 guest, tarball: FAILED ==\n{e:#}");
            failures.push("Linux 6.1 guest".into());
        }
    }
    if !failures.is_empty() {
        bail!("the install test failed in: {}", failures.join("; "));
    }
    Ok(())
}

/// libcudart.so.12 of the nvidia-cuda-runtime-cu12 wheel in target/pyenv.
fn cudart_lib() -> anyhow::Result<PathBuf> {
    let env = crate::python::ensure()?;
    for e in std::fs::read_dir(env.join("lib"))? {
        let p = e?
            .path()
            .join("site-packages/nvidia/cuda_runtime/lib/libcudart.so.12");
        if p.exists() {
            return Ok(p);
        }
    }
    bail!("no libcudart.so.12 in {}", env.display())
}

/// The suite's clean root file system, made once (debootstrap, minbase
/// with a C compiler and man).
fn rootfs(dir: &Path, suite: &str) -> anyhow::Result<PathBuf> {
    let base = dir.join(format!("rootfs-{suite}"));
    let done = dir.join(format!("rootfs-{suite}.complete"));
    if done.exists() {
        return Ok(base);
    }
    if base.exists() {
        std::fs::remove_dir_all(&base)?;
    }
    std::fs::create_dir_all(dir)?;
    crate::run(
        Command::new("debootstrap")
            .args(["--variant=minbase", "--include=gcc,libc6-dev,man-db", suite])
            .arg(&base)
            .arg(MIRROR),
    )
    .with_context(|| format!("debootstrap {suite}"))?;
    std::fs::write(&done, "")?;
    Ok(base)
}

/// A fresh copy of `base` with asys installed `how`, the programs built
/// and traced there; returns the summary lines.
fn install_and_run(
    dir: &Path,
    base: &Path,
    suite: &str,
    how: How,
    dist: &crate::dist::Dist,
    cudart: &Path,
) -> anyhow::Result<String> {
    let root = dir.join(format!("{suite}-{}", how.word()));
    if root.exists() {
        std::fs::remove_dir_all(&root)?;
    }
    crate::run(Command::new("cp").arg("-a").arg(base).arg(&root))?;
    let work = root.join("root/asys-install");
    std::fs::create_dir_all(work.join("cuda"))?;
    std::fs::copy(&dist.tarball, work.join("asys.tar.gz"))?;
    std::fs::copy(&dist.deb, work.join("asys.deb"))?;
    std::fs::copy(cudart, work.join("cuda/libcudart.so.12"))?;
    std::fs::write(work.join("run.sh"), RUN_SH)?;
    std::fs::write(work.join("cudart_steps.c"), CUDART_STEPS_C)?;
    std::fs::write(work.join("sim_steps.c"), SIM_STEPS_C)?;
    // The mounts live in a mount namespace of their own: they go when the
    // chroot's shell ends, whatever happens to it.
    let r = root.display().to_string();
    let mounts = format!(
        "mount -t proc proc {r}/proc && mount -t sysfs sysfs {r}/sys && \
         mount -t tracefs tracefs {r}/sys/kernel/tracing && mount --rbind /dev {r}/dev && \
         exec chroot {r} /bin/sh /root/asys-install/run.sh {}",
        how.word()
    );
    let status = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &mounts])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .status()?;
    let out = work.join("out");
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    if !status.success() {
        bail!(
            "run.sh {} exited {status}\n{}{}{}",
            how.word(),
            read("dpkg"),
            read("cudart.build"),
            read("sim.build")
        );
    }
    let mut summary = format!(
        "{}\nasys --version: {}",
        read("libc").trim(),
        read("version").trim()
    );
    summary += &format!("\nasys selftest:\n{}", read("selftest"));
    check_selftest(&read("selftest"), &read("selftest.rc"))?;
    if read("status.rc").trim() != "0" {
        bail!("asys status --environment failed:\n{}", read("status"));
    }
    summary += &format!(
        "asys status --environment: {}\n",
        read("status")
            .lines()
            .find(|l| l.starts_with("fallbacks"))
            .unwrap_or("(no fallbacks line)")
    );
    summary += &check_cudart(
        &read("cudart.rc"),
        &read("cudart.stdout"),
        &read("cudart.stderr"),
        &read("cudart_api.json"),
    )?;
    summary += &check_sim(
        &read("sim.rc"),
        &read("sim.stdout"),
        &read("sim.stderr"),
        &read("sim_api.json"),
        &read("sim_ppu.json"),
    )?;
    if how == How::Deb {
        let man = read("man");
        if read("man.rc").trim() != "0" || !man.contains("asys-profile") {
            bail!("man asys-profile failed:\n{man}");
        }
        summary += &format!(
            "man asys-profile: {} lines, starting:\n{}\n",
            man.lines().count(),
            man.lines().take(8).collect::<Vec<_>>().join("\n")
        );
    }
    std::fs::remove_dir_all(&root)?;
    Ok(summary)
}

/// Every capability ok, but kprobes and BTF where this kernel lacks them.
fn check_selftest(out: &str, rc: &str) -> anyhow::Result<()> {
    if rc.trim() != "0" {
        bail!("asys selftest exited {}:\n{out}", rc.trim());
    }
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" expected ")).collect();
    if lines.len() != 8 {
        bail!(
            "asys selftest printed {} capability lines:\n{out}",
            lines.len()
        );
    }
    let kprobes = std::fs::read_to_string("/proc/kallsyms")?
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("register_kprobe"));
    for l in lines {
        let absent_allowed = l.starts_with("kprobe probe") && !kprobes;
        let ok = l.split_whitespace().any(|w| w == "ok")
            || (absent_allowed && l.split_whitespace().any(|w| w == "absent"));
        if !ok {
            bail!("asys selftest: {l}");
        }
    }
    Ok(())
}

fn json_rows(text: &str, what: &str) -> anyhow::Result<Vec<Value>> {
    let v: Value = serde_json::from_str(text).with_context(|| format!("{what}: {text}"))?;
    Ok(v.as_array().cloned().unwrap_or_default())
}

fn made(stdout: &str, prefix: &str) -> Option<u64> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|n| n.trim().parse().ok())
}

fn check_cudart(rc: &str, stdout: &str, stderr: &str, api: &str) -> anyhow::Result<String> {
    if rc.trim() != "0" {
        bail!("asys profile -t cuda exited {}:\n{stderr}", rc.trim());
    }
    let want = made(stdout, "made cudaRuntimeGetVersion ")
        .with_context(|| format!("the program's count is missing: {stdout}"))?;
    if want != CUDART_CALLS {
        bail!("the program made {want} calls, not {CUDART_CALLS}");
    }
    let got: u64 = json_rows(api, "cuda_api_sum")?
        .iter()
        .filter(|r| r["Name"] == "cudaRuntimeGetVersion")
        .map(|r| r["Num Calls"].as_u64().unwrap_or(0))
        .sum();
    if got != want {
        bail!("cuda_api_sum counts {got} cudaRuntimeGetVersion calls, the program made {want}");
    }
    Ok(format!(
        "libcudart program: {got} of {want} cudaRuntimeGetVersion calls recorded\n"
    ))
}

fn check_sim(rc: &str, stdout: &str, stderr: &str, api: &str, ppu: &str) -> anyhow::Result<String> {
    if rc.trim() != "0" {
        bail!("asys profile -t hggc exited {}:\n{stderr}", rc.trim());
    }
    let want = made(stdout, "made device operations ")
        .with_context(|| format!("the program's count is missing: {stdout}"))?;
    if want != 3 * SIM_STEPS {
        bail!(
            "the program made {want} device operations, not {}",
            3 * SIM_STEPS
        );
    }
    let device_calls = ["hggcMemcpy", "hggcMemset", "hggcLaunchKernel"];
    let ids: std::collections::BTreeSet<u64> = json_rows(api, "hggc_api_trace")?
        .iter()
        .filter(|r| device_calls.iter().any(|c| r["Name"] == *c))
        .filter_map(|r| r["CorrId"].as_u64())
        .collect();
    let records = json_rows(ppu, "hggc_ppu_trace")?;
    let joined = records
        .iter()
        .filter(|r| r["CorrId"].as_u64().is_some_and(|c| ids.contains(&c)))
        .count() as u64;
    if ids.len() as u64 != want || joined != want || records.len() as u64 != want {
        bail!(
            "the program made {want} device operations; asys recorded {} calls and {} device \
             records, {joined} joined to their calls",
            ids.len(),
            records.len()
        );
    }
    Ok(format!(
        "simulated-runtime program: {want} device operations, {} calls and {joined} device \
         records (through the injection library) joined by correlation id\n",
        ids.len()
    ))
}

/// The tarball's asys in the 6.1 guest: selftest (with kprobes there),
/// status, and the two programs as built in the Debian 12 root.
fn in_guest(dir: &Path, dist: &crate::dist::Dist, cudart: &Path) -> anyhow::Result<String> {
    let guest = dir.join("guest");
    if guest.exists() {
        std::fs::remove_dir_all(&guest)?;
    }
    std::fs::create_dir_all(&guest)?;
    // Build the programs in a Debian 12 root with the release unpacked at
    // its own folder's path, so that the simulated runtime's rpath is the
    // same inside and out.
    // A copy of the root, so that the clean one stays clean.
    let base = dir.join("bookworm-build");
    if base.exists() {
        std::fs::remove_dir_all(&base)?;
    }
    crate::run(
        Command::new("cp")
            .arg("-a")
            .arg(rootfs(dir, "bookworm")?)
            .arg(&base),
    )?;
    let tree = dist.tree.display().to_string();
    let g = guest.display().to_string();
    std::fs::write(guest.join("cudart_steps.c"), CUDART_STEPS_C)?;
    std::fs::write(guest.join("sim_steps.c"), SIM_STEPS_C)?;
    std::fs::copy(cudart, guest.join("libcudart.so.12"))?;
    let b = base.display().to_string();
    let build = format!(
        "mkdir -p {b}{g} {b}{tree} && mount --bind {g} {b}{g} && mount --bind {tree} {b}{tree} && \
         exec chroot {b} /bin/sh -c 'cd {g} && \
         gcc -O1 -o cudart_steps cudart_steps.c -L{g} -l:libcudart.so.12 -Wl,-rpath,{g} && \
         gcc -O1 -rdynamic -o sim_steps sim_steps.c -I{tree}/include -L{tree}/lib/asys/sim \
         -lhggcrt -Wl,-rpath,{tree}/lib/asys/sim'"
    );
    crate::run(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &build])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
    )
    .context("building the guest's programs in the Debian 12 root")?;
    std::fs::remove_dir_all(&base)?;
    let a = format!("{tree}/bin/asys");
    let script = format!(
        "cd /tmp; {a} selftest; echo \"selftest.rc $?\"; {a} status --environment; \
         echo \"status.rc $?\"; {a} profile -t cuda -o /tmp/c {g}/cudart_steps {CUDART_CALLS}; \
         echo \"cudart.rc $?\"; echo \"cudart_api.json $({a} stats --report cuda_api_sum \
         --format json /tmp/c.asysrep | tr -d '\\n')\"; {a} profile -t hggc -o /tmp/s \
         {g}/sim_steps {SIM_STEPS}; echo \"sim.rc $?\"; echo \"sim_api.json $({a} stats --report \
         hggc_api_trace --format json /tmp/s.asysrep | tr -d '\\n')\"; echo \"sim_ppu.json \
         $({a} stats --report hggc_ppu_trace --format json /tmp/s.asysrep | tr -d '\\n')\""
    );
    let (rc, out) = crate::vm_test::run_in_guest("6.1", &script)?;
    if rc != "0" {
        bail!("the guest's script exited {rc}:\n{out}");
    }
    let field = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{k} ")))
            .unwrap_or("")
            .to_string()
    };
    let selftest: String = out
        .lines()
        .take_while(|l| !l.starts_with("selftest.rc"))
        .filter(|l| l.contains(" expected ") || l.starts_with("asys selftest:"))
        .map(|l| format!("{l}\n"))
        .collect();
    check_selftest(&selftest, &field("selftest.rc"))?;
    // The guest kernel has kprobes: the kprobe line must say ok.
    if !selftest
        .lines()
        .any(|l| l.starts_with("kprobe probe") && l.split_whitespace().any(|w| w == "ok"))
    {
        bail!("the kprobe probe is not ok in the 6.1 guest:\n{selftest}");
    }
    if field("status.rc") != "0" {
        bail!("asys status --environment failed in the guest:\n{out}");
    }
    let mut summary = format!("asys selftest:\n{selftest}");
    summary += &format!(
        "asys status --environment: {}\n",
        out.lines()
            .find(|l| l.starts_with("fallbacks"))
            .unwrap_or("(no fallbacks line)")
    );
    summary += &check_cudart(&field("cudart.rc"), &out, &out, &field("cudart_api.json"))?;
    summary += &check_sim(
        &field("sim.rc"),
        &out,
        &out,
        &field("sim_api.json"),
        &field("sim_ppu.json"),
    )?;
    Ok(summary)
}
