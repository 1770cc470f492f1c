#!/usr/bin/env bash
# The NVIDIA checks of asys, for a machine with an NVIDIA GPU, its driver and
# PyTorch (CUDA wheel). Run as root from the repository:
#   bash scripts/gpu/check.sh
# With ASYS=path/to/asys (and libasys_inject.so beside it) it uses that build
# and needs no Rust toolchain; otherwise it builds one.
#
# It runs train_nvtx.py (matrix products and a small training step in NVTX
# ranges) three times: untraced, under torch.profiler, and under
# `asys profile -t cuda,nvtx,cublas,osrt`. Then it checks, from asys's report:
# - the kernels of the measured part, by name and count, against what
#   torch.profiler saw on the same steps;
# - each kernel's device time inside its host range: after the start of the
#   call that launched it, and before the end of its training step (which
#   synchronizes before it ends);
# - the clock offset asys used against one read from CUPTI's own timestamp;
# - the NVTX ranges and the runtime's calls (cudaLaunchKernel, ...);
# and prints the overhead of tracing on the training step. Results go to
# $OUT (default target/gpu-check); the script exits non-zero if a check fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
here=scripts/gpu
out=${OUT:-target/gpu-check}
mkdir -p "$out"
export OUT=$out

asys=${ASYS:-}
if [ -z "$asys" ]; then
    cargo xtask setup
    cargo build --release --package asys-userspace --package asys-inject
    asys=target/release/asys
fi
python=${PYTHON:-python3}
nvidia-smi -L
export STEPS=${STEPS:-30}
export PYTHONUNBUFFERED=1

echo "== untraced"
timeout 150 "$python" "$here/train_nvtx.py" plain >"$out/plain.txt" || { cat "$out/plain.txt"; exit 1; }
echo "== torch.profiler"
timeout 150 "$python" "$here/train_nvtx.py" torchprof >"$out/torchprof.txt" || { cat "$out/torchprof.txt"; exit 1; }
echo "== asys profile"
# API_PROBES=site records the CUDA calls through CUPTI's callbacks at the
# injection library's NOP5 sites instead of uprobes on libcudart/libcuda.
timeout 240 "$asys" profile -t cuda,nvtx,cublas,osrt --api-probes "${API_PROBES:-entry}" -f true -o "$out/train" \
    "$python" "$here/train_nvtx.py" asys >"$out/app.txt" 2>"$out/asys_stderr.txt"
status=$?
cat "$out/asys_stderr.txt"
[ $status -eq 0 ] || { echo "asys profile failed ($status)"; cat "$out/app.txt"; exit 1; }
report="$out/train.asysrep"
"$asys" stats -r cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,cuda_kern_exec_sum,cuda_api_sum "$report" >"$out/stats.txt" 2>&1
head -c 6000 "$out/stats.txt"; echo
for r in cuda_gpu_trace cuda_api_trace nvtx_pushpop_trace; do
    "$asys" stats -f json -r $r "$report" >"$out/$r.json" || exit 1
done

"$python" - "$out" "$report" <<'PY'
import collections, json, re, sys, tarfile, io
out, report = sys.argv[1], sys.argv[2]
fails = []
def lines(name, key):
    return [l.split()[1:] for l in open(f"{out}/{name}").read().splitlines() if l.startswith(key + " ")]
def load(n):
    return json.load(open(f"{out}/{n}.json"))

trace = load("cuda_gpu_trace")
calls = load("cuda_api_trace")
ranges = [r for r in load("nvtx_pushpop_trace") if r["Domain"] == ""]
measured = [r for r in ranges if r["Name"] == "measured"]
assert len(measured) == 1, f"one 'measured' range expected: {measured}"
m0, m1 = measured[0]["Start (ns)"], measured[0]["End (ns)"]
kernels = [k for k in trace if not k["Name"].startswith("[CUDA ")]
memops = [k for k in trace if k["Name"].startswith("[CUDA ")]
inside = [k for k in kernels if m0 <= k["Start (ns)"] <= m1]

# 1. Kernels by name and count against torch.profiler on the same steps.
norm = lambda s: re.sub(r"\s+", "", s)
theirs = collections.Counter(norm(n) for n in json.load(open(f"{out}/torch_kernels.json")))
ours = collections.Counter(norm(k["Name"]) for k in inside)
print(f"kernels in the measured part: asys {sum(ours.values())}, torch.profiler {sum(theirs.values())}; "
      f"{len(ours)} and {len(theirs)} distinct names")
if ours != theirs:
    fails.append(f"kernel counts differ: only asys {dict(ours - theirs)}; only torch.profiler {dict(theirs - ours)}")

# 2. Device times inside host ranges.
by_corr = {(c["Pid"], c["CorrId"]): c for c in calls if c["CorrId"] not in (None, 0)}
joined = early = 0
worst_early = 0
for k in inside:
    c = by_corr.get((k["Pid"], k["CorrId"]))
    if c is None:
        continue
    joined += 1
    if k["Start (ns)"] < c["Start (ns)"]:
        early += 1
        worst_early = max(worst_early, c["Start (ns)"] - k["Start (ns)"])
steps = [r for r in ranges if r["Name"] == "train_step"]
late = 0
worst_late = 0
for s in steps:
    for k in kernels:
        if s["Start (ns)"] <= k["Start (ns)"] <= s["End (ns)"]:
            end = k["Start (ns)"] + k["Duration (ns)"]
            if end > s["End (ns)"]:
                late += 1
                worst_late = max(worst_late, end - s["End (ns)"])
launch_names = collections.Counter(by_corr[(k["Pid"], k["CorrId"])]["Name"] for k in inside if (k["Pid"], k["CorrId"]) in by_corr)
print(f"kernels joined to their runtime call by correlation id: {joined} of {len(inside)} ({dict(launch_names)})")
print(f"kernels starting before their launch call: {early} (worst {worst_early} ns); "
      f"ending after their synchronized step: {late} (worst {worst_late} ns); {len(steps)} steps")
if early or late:
    fails.append("device times outside their host ranges")
if joined == 0:
    fails.append("no kernel joined to a runtime call")
print(f"memory operations: {len(memops)}")

# 3. The clock offset against CUPTI's own timestamp.
off = lines("app.txt", "cupti-offset")
with tarfile.open(report) as t:
    member = next((m for m in t.getmembers() if m.name.endswith("hggc_activity.parquet")), None)
    data = t.extractfile(member).read() if member else None
if data is None:
    fails.append("no device activity table in the report")
elif not off or off[0][0] == "none":
    fails.append("the workload could not read CUPTI's timestamp")
else:
    import pyarrow.parquet as pq
    offsets = pq.read_table(io.BytesIO(data), columns=["clockOffset"]).column(0).to_pylist()
    cupti, window = int(off[0][0]), int(off[0][1])
    err = abs(offsets[-1] - cupti)
    spread = max(offsets) - min(offsets)
    print(f"clock offset: asys {offsets[-1]} ns, CUPTI's timestamp read by the workload {cupti} ns "
          f"(read in a {window} ns window): error {err} ns; asys's offsets over the run spread {spread} ns")
    if err > 50_000:
        fails.append(f"clock offset error {err} ns")

# 4. NVTX ranges and runtime calls.
want = collections.Counter(tuple(l) for l in lines("app.txt", "expect-range"))
got = collections.Counter((r["Name"], str(r["Lvl"])) for r in ranges)
if want - got:
    fails.append(f"NVTX ranges missing: {dict(want - got)}")
names = collections.Counter(c["Name"] for c in calls)
launches = sum(n for k, n in names.items() if k.startswith("cudaLaunchKernel"))
matmuls = int(lines("app.txt", "expect-matmuls")[0][0])
print(f"runtime calls: {sum(names.values())}, launches {launches}; NVTX ranges {sum(got.values())}")
if launches < matmuls:
    fails.append(f"{launches} launches for {matmuls} matmuls")

# 5. Overhead on the training step.
plain = float(lines("plain.txt", "step-ms")[0][0])
traced = float(lines("app.txt", "step-ms")[0][0])
print(f"training step (median of {len(steps)}): untraced {plain:.3f} ms, under asys -t cuda,nvtx,cublas,osrt "
      f"{traced:.3f} ms: x{traced / plain:.3f}")
json.dump({"kernels_asys": sum(ours.values()), "kernels_torch": sum(theirs.values()),
           "step_ms_plain": plain, "step_ms_asys": traced, "fails": fails},
          open(f"{out}/summary.json", "w"), indent=1)
if fails:
    print("gpu check FAILED:", *fails, sep="\n  ")
    sys.exit(1)
print("gpu check passed")
PY
