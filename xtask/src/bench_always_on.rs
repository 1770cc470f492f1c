//! `cargo xtask bench-always-on [MIN_ROUNDS] [MAX_ROUNDS] [BLOCK_SECONDS]`:
//! what `asys attach --always-on` costs a PyTorch training loop on the CPU,
//! to half a percent, beside py-spy and `perf record -F 99 -g` in the same
//! run. One pinned training process (xtask/torch/always_on_train.py); blocks
//! of it untraced and with each tool attached alternate, and each traced
//! block's median step is compared with its untraced neighbours' (the
//! design, and why, is in xtask/torch/always_on.py). Rounds go on from
//! MIN_ROUNDS (10) until both asys modes' 95 % intervals are within
//! +-0.5 %, or MAX_ROUNDS (40). Prints the step ratio with its t and
//! bootstrap intervals, each tool's CPU share of a core, asys's BPF
//! programs' share (kernel.bpf_stats_enabled) and peak RSS; writes
//! target/bench/always-on.json. Uses bench-torch's environment
//! (target/bench/torch-venv: torch, nvtx, py-spy).
use std::process::Command;

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let min_rounds = args.first().map(String::as_str).unwrap_or("10");
    let max_rounds = args.get(1).map(String::as_str).unwrap_or("40");
    let block = args.get(2).map(String::as_str).unwrap_or("6");
    crate::setup::setup()?;
    crate::ensure_command("perf", "linux-perf", "the perf record comparison")?;
    let asys = crate::build_asys(true)?;
    let env = crate::target_dir().join("bench/torch-venv");
    crate::venv::ensure(
        &env,
        crate::bench_torch::PACKAGES,
        crate::venv::Deps::Resolved,
    )?;
    let out = crate::target_dir().join("bench/always-on.json");
    let driver = crate::root().join("xtask/torch/always_on.py");
    crate::run(
        Command::new("python3")
            .arg(driver)
            .arg(&asys)
            .arg(env.join("bin/python"))
            .arg(env.join("bin/py-spy"))
            .arg(&out)
            .args([min_rounds, max_rounds, block]),
    )?;
    println!("written: {}", out.display());
    Ok(())
}
