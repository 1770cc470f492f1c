#!/usr/bin/env bash
# The GPU acceptance run, for a machine with an NVIDIA GPU, its driver and
# PyTorch (CUDA wheel); about 5 minutes on one H200, 8 at most. Run as root
# from the repository, with asys built beforehand (the device's time is for
# the run, not the build):
#   cargo build --release -p asys-userspace -p asys-inject
#   ASYS=target/release/asys OUT=target/gpu-acceptance bash scripts/gpu/acceptance.sh
# Without ASYS it builds one first (as check.sh does).
#
# Scenarios (workloads: acceptance_work.py; checks: acceptance_check.py, which
# read only the files written here, so that `DRY_RUN=1 bash acceptance.sh`
# tests them without a GPU):
#   graph      a training step captured in a CUDA graph and replayed, under
#              --cuda-graph-trace node: kernels over the replays = torch.profiler's,
#              each with its graph and node ids, joined to its cudaGraphLaunch
#   multi      two processes on the GPU, forked (DataLoader-style) and spawned:
#              every process's kernels recorded
#   attach     asys attach -d 5 to a training process started without any asys
#              environment (asys loads its injection library into it, see
#              docs/injection.md): kernels in the window, each name as often per
#              step as torch.profiler sees it in the same process afterwards,
#              each joined to its call; the step time unchanged afterwards
#   sw         asys profile -s system-wide -t cuda -d 5 with two CUDA processes
#              running (started as for attach): both recorded
#   metrics    --ppu-metrics-device all (NVML) against nvidia-smi --query-gpu
#              sampled over the same run; and python frames (--python-sampling true)
#   overhead   the step under -t cuda,nvtx,osrt against torch.profiler's, same run;
#              every kernel of that run joined to its launch call (entry mode)
# Results go to $OUT (default target/gpu-acceptance): each scenario's reports,
# JSON and stdout, and summary.txt. Exits non-zero if any check misses.
set -uo pipefail
cd "$(dirname "$0")/../.."
here=scripts/gpu
check="$here/acceptance_check.py"
python=${PYTHON:-python3}

if [ -n "${DRY_RUN:-}" ]; then
    # What can be checked without a GPU: the script parses, the Python
    # files compile, and every check passes and misses as it should.
    bash -n "$0" || exit 1
    "$python" -m py_compile "$here/acceptance_work.py" "$check" || exit 1
    exec "$python" "$check" selftest
fi

out=${OUT:-target/gpu-acceptance}
mkdir -p "$out"
export OUT=$out
asys=${ASYS:-}
if [ -z "$asys" ]; then
    cargo xtask setup
    cargo build --release --package asys-userspace --package asys-inject
    asys=target/release/asys
fi
inject="$(dirname "$asys")/libasys_inject.so"
[ -f "$inject" ] || { echo "no $inject beside $asys"; exit 1; }
nvidia-smi -L || exit 1
export PYTHONUNBUFFERED=1
misses=()
miss() { echo "MISS: $*"; misses+=("$*"); }
# stats -f json of report $1's reports $3.. into $out/$2_<suffix>.json
json() {
    local report=$1 prefix=$2
    shift 2
    local r
    for r in "$@"; do
        local name=${r%%=*} suffix=${r#*=}
        "$asys" stats -f json -r "$name" "$report" >"$out/${prefix}_${suffix}.json" 2>>"$out/${prefix}_stats.err" ||
            echo '[]' >"$out/${prefix}_${suffix}.json"
    done
}
run_check() { "$python" "$check" "$@" | tee -a "$out/summary.txt" || miss "check $1 ${3:-}"; }
started=$(date +%s)
: >"$out/summary.txt"

echo "== graph: torch.profiler, then asys --cuda-graph-trace node"
timeout 120 "$python" "$here/acceptance_work.py" graph torchprof >"$out/graph_torch.txt" 2>&1 || miss "graph under torch.profiler"
timeout 150 "$asys" profile -t cuda,nvtx --cuda-graph-trace node -f true -o "$out/graph" \
    "$python" "$here/acceptance_work.py" graph plain >"$out/graph_app.txt" 2>"$out/graph_asys.err" ||
    miss "asys profile of the graph workload ($(tail -1 "$out/graph_asys.err"))"
json "$out/graph.asysrep" graph cuda_gpu_trace=trace cuda_api_trace=api
run_check graph "$out"

for kind in fork spawn; do
    echo "== multi: two processes ($kind)"
    timeout 150 "$asys" profile -t cuda -f true -o "$out/multi_$kind" \
        "$python" "$here/acceptance_work.py" multi $kind >"$out/multi_${kind}_app.txt" 2>"$out/multi_$kind.err" ||
        miss "asys profile of two processes ($kind)"
    json "$out/multi_$kind.asysrep" "multi_$kind" cuda_gpu_trace=trace
    run_check processes "$out" "multi_$kind"
done

echo "== attach: 5 s to a running training process started without asys"
env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH PROFILE_STEPS=20 \
    timeout 90 "$python" "$here/acceptance_work.py" train 24 >"$out/attach_app.txt" 2>&1 &
trainer=$!
sleep 8
pid=$(awk '$1 == "pid" {print $2; exit}' "$out/attach_app.txt")
a0=$(date +%s.%N)
timeout 60 "$asys" attach -t cuda -d 5 -f true -o "$out/attach" "${pid:-$trainer}" >"$out/attach_asys.txt" 2>&1 ||
    miss "asys attach ($(tail -1 "$out/attach_asys.txt"))"
a1=$(date +%s.%N)
printf '{"start": %s, "end": %s}\n' "$a0" "$a1" >"$out/attach_window.json"
wait $trainer || miss "the training process did not finish after the attach"
json "$out/attach.asysrep" attach cuda_gpu_trace=trace cuda_api_trace=api
run_check attach "$out"

echo "== system-wide: two CUDA processes, -s system-wide -t cuda -d 5"
for i in 1 2; do
    CUDA_INJECTION64_PATH="$inject" timeout 60 "$python" "$here/acceptance_work.py" train 20 >"$out/sw_app$i.txt" 2>&1 &
done
sleep 8
timeout 60 "$asys" profile -s system-wide -t cuda -d 5 -f true -o "$out/sw" >"$out/sw_asys.txt" 2>&1 ||
    miss "asys profile -s system-wide ($(tail -1 "$out/sw_asys.txt"))"
wait
json "$out/sw.asysrep" sw cuda_gpu_trace=trace
run_check processes "$out" sw

echo "== metrics (NVML) against nvidia-smi, and Python frames"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,nounits -lms 250 >"$out/nvidia_smi.csv" 2>&1 &
smi=$!
timeout 90 "$asys" profile -t cuda --ppu-metrics-device all --python-sampling true -f true -o "$out/metrics" \
    "$python" "$here/acceptance_work.py" train 12 >"$out/metrics_app.txt" 2>"$out/metrics_asys.err" ||
    miss "asys profile --ppu-metrics-device all ($(tail -1 "$out/metrics_asys.err"))"
kill $smi 2>/dev/null
json "$out/metrics.asysrep" metrics ppu_metric_trace=trace
"$asys" stats -f json -r python_sample_sum "$out/metrics.asysrep" >"$out/python_sum.json" 2>/dev/null || echo '[]' >"$out/python_sum.json"
run_check metrics "$out"
run_check python "$out"

echo "== overhead: untraced, torch.profiler, asys -t cuda,nvtx,osrt"
export STEPS=${STEPS:-200}
timeout 90 "$python" "$here/acceptance_work.py" steps plain >"$out/over_plain.txt" 2>&1 || miss "untraced steps"
timeout 90 "$python" "$here/acceptance_work.py" steps torchprof >"$out/over_torch.txt" 2>&1 || miss "steps under torch.profiler"
timeout 120 "$asys" profile -t cuda,nvtx,osrt -f true -o "$out/over" \
    "$python" "$here/acceptance_work.py" steps plain >"$out/over_asys.txt" 2>"$out/over_asys.err" ||
    miss "asys profile of the steps"
json "$out/over.asysrep" over cuda_gpu_trace=trace cuda_api_trace=api
run_check overhead "$out"
run_check joins "$out"

echo "== $(($(date +%s) - started)) s"
if [ ${#misses[@]} -gt 0 ]; then
    printf 'acceptance FAILED:\n' | tee -a "$out/summary.txt"
    printf '  %s\n' "${misses[@]}" | tee -a "$out/summary.txt"
    exit 1
fi
echo "acceptance passed" | tee -a "$out/summary.txt"
