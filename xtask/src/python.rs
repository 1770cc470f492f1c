//! A Python environment under target/pyenv with the real NVIDIA libraries that
//! install from PyPI without a GPU: libcudart (nvidia-cuda-runtime-cu12),
//! cuBLAS and cuBLASLt (nvidia-cublas-cu12), cuDNN (nvidia-cudnn-cu12), NCCL
//! (nvidia-nccl-cu12), CUPTI (nvidia-cuda-cupti-cu12), a real NVTX client
//! (nvtx) and NVTX's C headers (nvidia-nvtx-cu12). Tests trace them; nothing here needs a GPU. The libraries are
//! 1.6 GB of wheels (cuDNN alone 717 MB, 1.1 GB installed); from PyPI they
//! install in about a minute.
use std::path::PathBuf;

const PACKAGES: &[&str] = &[
    "nvidia-cuda-runtime-cu12==12.9.79",
    // CUPTI: the injection library finds it beside libcudart (tests of
    // its no-GPU warning path).
    "nvidia-cuda-cupti-cu12==12.9.79",
    // CUDA 13's CUPTI (nvidia/cu13/lib, PyTorch 2.15's): without a driver
    // it recurses in cuptiActivityRegisterCallbacks until the stack is
    // spent; the attach tests prove the injection library never starts it
    // so (5.7 MB).
    "nvidia-cuda-cupti==13.2.86",
    "nvtx==0.2.17",
    // NVIDIA's NVTX v3 headers: a C NVTX client for the tests (85 kB).
    "nvidia-nvtx-cu12==12.9.79",
    "nvidia-cublas-cu12==12.9.3.13",
    "nvidia-cudnn-cu12==9.28.0.42",
    "nvidia-nccl-cu12==2.32.3",
];

pub fn root() -> PathBuf {
    crate::target_dir().join("pyenv")
}

/// Creates the environment if needed and installs the pinned packages
/// (pip skips what is already there).
pub fn ensure() -> anyhow::Result<PathBuf> {
    let env = root();
    // Without dependencies: the pins are the whole set. cuBLAS names
    // nvidia-cuda-nvrtc-cu12, which none of these libraries links (it is
    // for run-time compilation on a GPU), and cuDNN names cuBLAS, pinned
    // here.
    crate::venv::ensure(&env, PACKAGES, crate::venv::Deps::PinsOnly)?;
    Ok(env)
}
