//! `cargo xtask bench-torch [ROUNDS] [STEPS]`: PyTorch from PyPI, as users
//! run it. Installs torch (the default Linux wheel, with NVIDIA's CUDA
//! libraries: about 5 GB, a few minutes; kept out of `cargo xtask test` for
//! that reason), nvtx, numpy and py-spy into target/bench/torch-venv, builds
//! asys in release, and runs `xtask/torch/bench.py`: a small conv net
//! trained on the CPU with NVTX ranges around each step and a DataLoader
//! with two forked workers (`xtask/torch/train.py`), untraced, under asys's
//! modes on this kernel's path and on the perf-uprobe fallback (kernels
//! before 6.6), and under py-spy and `perf record -g`, interleaved round by
//! round. Prints step ratios, start-up and finish times; writes
//! target/bench/torch.json.
use std::process::Command;

pub const PACKAGES: &[&str] = &[
    "torch==2.15.0",
    "nvtx==0.2.17",
    "numpy==2.4.6",
    "py-spy==0.4.3",
];

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let rounds = args.first().map(String::as_str).unwrap_or("3");
    let steps = args.get(1).map(String::as_str).unwrap_or("30");
    crate::setup::setup()?;
    let asys = crate::build_asys(true)?;
    let env = crate::target_dir().join("bench/torch-venv");
    crate::venv::ensure(&env, PACKAGES, crate::venv::Deps::Resolved)?;
    let out = crate::target_dir().join("bench/torch.json");
    let driver = crate::root().join("xtask/torch/bench.py");
    crate::run(
        Command::new("python3")
            .arg(driver)
            .arg(&asys)
            .arg(env.join("bin/python"))
            .arg(env.join("bin/py-spy"))
            .args([rounds, steps])
            .arg(&out),
    )?;
    println!("written: {}", out.display());
    Ok(())
}
