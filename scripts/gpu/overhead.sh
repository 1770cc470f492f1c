#!/usr/bin/env bash
# The cost of tracing CUDA on a training step, on a machine with an NVIDIA GPU:
# train_nvtx.py's median step time untraced and under each way asys records
# CUDA, the configurations alternating within each round so that the machine's
# drift spreads over all of them. Prints one line per run:
#   <configuration> <median step ms>
# Run as root from the repository (ASYS=path/to/asys to use a given build).
set -uo pipefail
cd "$(dirname "$0")/../.."
asys=${ASYS:-target/release/asys}
inject="$(cd "$(dirname "$asys")" && pwd)/libasys_inject.so"
python=${PYTHON:-python3}
here=scripts/gpu
rounds=${ROUNDS:-2}
export STEPS=${STEPS:-30}
tmp=$(mktemp -d)
step() { awk '$1 == "step-ms" { print $2 }'; }
for r in $(seq "$rounds"); do
    echo "untraced $("$python" $here/train_nvtx.py plain | step)"
    # The injection library alone (CUPTI activity and callbacks, no asys).
    echo "cupti-only $(CUDA_INJECTION64_PATH=$inject "$python" $here/train_nvtx.py plain | step)"
    for probes in entry site; do
        echo "asys-t-cuda-$probes $("$asys" profile -t cuda --api-probes $probes -f true -o "$tmp/r" \
            "$python" $here/train_nvtx.py plain 2>/dev/null | step)"
    done
    echo "asys-t-cuda,nvtx,cublas,osrt-site $("$asys" profile -t cuda,nvtx,cublas,osrt --api-probes site \
        -f true -o "$tmp/r" "$python" $here/train_nvtx.py plain 2>/dev/null | step)"
done
rm -rf "$tmp"
