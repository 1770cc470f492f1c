"""Driver of `cargo xtask bench-torch`: runs xtask/torch/train.py (PyTorch
from PyPI, CPU) untraced and under each mode, interleaved round by round so
that the machine's noise hits all alike, and prints per mode:
- step: median per-step time (the workload's own monotonic clock, the first
  3 steps left out) over untraced's, as a ratio;
- start-up: launch to the workload's `bench-ready` (torch imported, model and
  loader built), minus untraced's;
- finish: the workload's `bench-end` to the command's exit (untraced: the
  interpreter's own teardown; traced: also what the tool does after).
asys modes also run with ASYS_KERNEL_FALLBACK=perf-uprobe, the path kernels
before 6.6 take (one perf-event uprobe per function). py-spy and perf record
-g run in the same rounds. Usage: bench.py ASYS PYTHON PY_SPY ROUNDS STEPS OUT.json
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

asys, python, py_spy, rounds, steps, out_json = sys.argv[1:7]
rounds, steps = int(rounds), int(steps)
train = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py")
tmp = tempfile.mkdtemp(prefix="asys-bench-torch-")
app = [python, train, str(steps)]


def asys_cmd(*args):
    return lambda out: [asys, "profile", *args, "-f", "true", "-o", out, *app]


MODES = [
    ("untraced", lambda out: app, {}),
    ("asys -t cuda,nvtx,osrt", asys_cmd("-t", "cuda,nvtx,osrt"), {}),
    ("asys -t cuda,cublas,cudnn,nccl", asys_cmd("-t", "cuda,cublas,cudnn,nccl"), {}),
    ("asys -t osrt", asys_cmd("-t", "osrt"), {}),
    ("asys --python-sampling", asys_cmd("-t", "none", "-s", "process-tree", "--python-sampling", "true"), {}),
    # --nonblocking: py-spy's default stops the process for every sample,
    # which made each step 15x slower and the import 150 s here.
    ("py-spy record", lambda out: [py_spy, "record", "--nonblocking", "--rate", "1000", "-f", "raw", "-o", out, "--", *app], {}),
    ("perf record -g", lambda out: ["perf", "record", "-g", "-q", "-o", out, "--", *app], {}),
    ("fallback: asys -t cuda,nvtx,osrt", asys_cmd("-t", "cuda,nvtx,osrt"), {"ASYS_KERNEL_FALLBACK": "perf-uprobe"}),
    ("fallback: asys -t cuda,cublas,cudnn,nccl", asys_cmd("-t", "cuda,cublas,cudnn,nccl"), {"ASYS_KERNEL_FALLBACK": "perf-uprobe"}),
]


if os.environ.get("BENCH_SKIP_FALLBACK"):
    # An asys from before the background unlinker: each fallback run took
    # about 400 s to finish.
    MODES = [m for m in MODES if not m[0].startswith("fallback")]


def unlinkers():
    return subprocess.run(["pgrep", "-x", "asys-unlink"], capture_output=True).stdout.split()


def run(i, mode):
    name, cmd, env = mode
    out = os.path.join(tmp, f"r{i}")
    busy = len(unlinkers())
    t0 = time.monotonic_ns()
    p = subprocess.run(cmd(out), capture_output=True, text=True, env={**os.environ, **env})
    t1 = time.monotonic_ns()
    vals = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition(" ")
        vals[k] = v
    if "bench-steps" not in vals:
        sys.exit(f"{name}: no steps\n{p.stdout}\n{p.stderr}")
    step = [int(x) for x in vals["bench-steps"].split()][3:]
    return {
        "step_ns": statistics.median(step),
        "startup_ns": int(vals["bench-ready"]) - t0,
        "finish_ns": t1 - int(vals["bench-end"]),
        "unlinkers_at_start": busy,
    }


results = {m[0]: [] for m in MODES}
for r in range(rounds):
    for i, m in enumerate(MODES):
        results[m[0]].append(run(r * 100 + i, m))
        print(f"round {r + 1}/{rounds} {m[0]}: {results[m[0]][-1]}", file=sys.stderr, flush=True)


def med(name, key):
    return statistics.median(x[key] for x in results[name])


base_step, base_start = med("untraced", "step_ns"), med("untraced", "startup_ns")
rows = []
print(f"\nPyTorch CPU training step, {steps} steps, {rounds} rounds (medians)")
print(f"{'mode':44} {'step':>7} {'start-up':>10} {'finish':>8}")
for name, _, _ in MODES:
    row = {
        "mode": name,
        "step_ratio": med(name, "step_ns") / base_step,
        "startup_extra_s": (med(name, "startup_ns") - base_start) / 1e9,
        "startup_s": med(name, "startup_ns") / 1e9,
        "finish_s": med(name, "finish_ns") / 1e9,
        "runs": results[name],
    }
    rows.append(row)
    print(f"{name:44} {row['step_ratio']:6.2f}x {row['startup_extra_s']:+9.2f}s {row['finish_s']:7.2f}s")
with open(out_json, "w") as f:
    json.dump(rows, f, indent=1)
