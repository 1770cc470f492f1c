#!/usr/bin/env bash
# The NVIDIA checks of asys, for a machine with an NVIDIA GPU, its driver and
# PyTorch (pip install torch). Run as root from the repository:
#   bash scripts/gpu/check.sh
# It profiles matmul_nvtx.py with -t cuda,nvtx,osrt and checks that the real
# CUDA runtime's calls (cudaLaunchKernel, cudaMemcpy*...) and the NVTX ranges
# that PyTorch emits are in the report, with their nesting. Exits non-zero on
# the first failed check. (Device-side activity for CUDA through CUPTI is not
# implemented yet: the report has host API calls and ranges.)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/gpu
out=${OUT:-target/gpu-check}
mkdir -p "$out"

cargo xtask setup
cargo build --release --package asys-userspace --package asys-inject
asys=target/release/asys
python=${PYTHON:-python3}
nvidia-smi -L

"$asys" profile -t cuda,nvtx,osrt -f true -o "$out/matmul" "$python" "$here/matmul_nvtx.py" | tee "$out/app.txt"
report="$out/matmul.asysrep"
"$asys" stats -r cuda_api_sum,nvtx_pushpop_trace "$report"
"$asys" stats -f json -r cuda_api_trace "$report" > "$out/cuda_api_trace.json"
"$asys" stats -f json -r nvtx_pushpop_trace "$report" > "$out/nvtx.json"

"$python" - "$out" <<'PY'
import json, sys, collections
out = sys.argv[1]
app = open(f"{out}/app.txt").read().splitlines()
ranges = sorted(tuple(l.split()[1:3]) for l in app if l.startswith("expect-range "))
matmuls = int(next(l.split()[1] for l in app if l.startswith("expect-matmuls ")))
api = json.load(open(f"{out}/cuda_api_trace.json"))
names = collections.Counter(r["Name"] for r in api)
launches = sum(n for k, n in names.items() if k.startswith("cudaLaunchKernel"))
assert launches >= matmuls, f"expected at least {matmuls} kernel launches, saw {launches}: {names}"
assert any(k.startswith("cudaMemcpy") or k.startswith("cudaMalloc") for k in names), names
traced = sorted((r["Name"], str(r["Lvl"])) for r in json.load(open(f"{out}/nvtx.json")) if r["Domain"] == "")
missing = collections.Counter(ranges) - collections.Counter(traced)
assert not missing, f"NVTX ranges missing from the report: {missing} (traced {traced})"
print(f"gpu check passed: {launches} kernel launches for {matmuls} matmuls, {len(ranges)} NVTX ranges with their levels")
PY
