//! `cargo xtask attach-torch`: PyTorch from PyPI, attached mid-run. A
//! training job on the CPU, started without any asys environment, is
//! attached with `-t nvtx`; NVTX ranges it starts after the attach (in its
//! training loop, and in DataLoader workers forked after it) must equal
//! its own log of them, per name and per process. Uses the venv of
//! `bench-torch` (target/bench/torch-venv: torch, about 5 GB, a few minutes
//! the first time; kept out of `cargo xtask test` for that reason). Writes
//! target/bench/attach-torch.json.
use std::process::Command;

pub fn run() -> anyhow::Result<()> {
    crate::setup::setup()?;
    let asys = crate::build_asys(true)?;
    let env = crate::target_dir().join("bench/torch-venv");
    crate::venv::ensure(
        &env,
        crate::bench_torch::PACKAGES,
        crate::venv::Deps::Resolved,
    )?;
    let out = crate::target_dir().join("bench/attach-torch.json");
    crate::run(
        Command::new("python3")
            .arg(crate::root().join("xtask/torch/attach.py"))
            .arg(&asys)
            .arg(env.join("bin/python"))
            .arg(&out),
    )?;
    println!("written: {}", out.display());
    Ok(())
}
