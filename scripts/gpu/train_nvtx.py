"""PyTorch matrix products and a small training step on an NVIDIA GPU, in NVTX
ranges, for check.sh. The measured part is the same in every mode, so that
runs under different tools can be compared:

  python3 train_nvtx.py plain      untraced: prints the step times
  python3 train_nvtx.py torchprof  the measured part under torch.profiler:
                                   writes the kernels it saw to $OUT/torch_kernels.json
  python3 train_nvtx.py asys       as plain (run under asys profile); also
                                   reads CUPTI's own clock against CLOCK_MONOTONIC

Ground truth lines on stdout:
  expect-range NAME LEVEL          each NVTX push/pop range of the measured part
  expect-matmuls N
  step-ms MEDIAN MIN               per training step (synchronized)
  cupti-offset OFFSET WINDOW       CUPTI timestamp minus CLOCK_MONOTONIC (ns)
"""
import ctypes
import json
import os
import statistics
import sys
import time

import torch

mode = sys.argv[1]
steps = int(os.environ.get("STEPS", "30"))
assert torch.cuda.is_available(), "this check needs a CUDA GPU"
dev = torch.device("cuda")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 1024)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(2048, 1024, device=dev)
y = torch.randn(2048, 1024, device=dev)
a = torch.randn(1024, 1024, device=dev)
b = torch.randn(1024, 1024, device=dev)


def step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


# Warm-up outside the measured part: cuBLAS handles, allocator, autograd.
for _ in range(5):
    step()
    c = a @ b
torch.cuda.synchronize()
ranges = []


def measured():
    times = []
    n = 0
    torch.cuda.nvtx.range_push("measured")
    ranges.append(("measured", 0))
    for _ in range(4):
        torch.cuda.nvtx.range_push("matmul")
        ranges.append(("matmul", 1))
        c = a @ b
        n += 1
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        torch.cuda.nvtx.range_push("train_step")
        ranges.append(("train_step", 1))
        step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        times.append(time.perf_counter_ns() - t0)
    torch.cuda.nvtx.range_pop()
    return n, times


if mode == "torchprof":
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        n, times = measured()
    out = os.environ.get("OUT", ".")
    path = os.path.join(out, "torch_trace.json")
    prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    kernels = [e["name"] for e in events if e.get("cat") == "kernel"]
    json.dump(kernels, open(os.path.join(out, "torch_kernels.json"), "w"))
    os.remove(path)
else:
    n, times = measured()

for name, level in ranges:
    print("expect-range", name, level)
print("expect-matmuls", n)
print("step-ms", statistics.median(times) / 1e6, min(times) / 1e6)

if mode == "asys":
    # CUPTI's own clock, read here as asys's injection library reads it.
    cupti = None
    for name in ("libcupti.so.13", "libcupti.so.12", "libcupti.so"):
        try:
            cupti = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            break
        except OSError:
            continue
    if cupti is not None:
        best = None
        for _ in range(20):
            ts = ctypes.c_uint64()
            t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            cupti.cuptiGetTimestamp(ctypes.byref(ts))
            t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            if best is None or t1 - t0 < best[1]:
                best = (ts.value - (t0 + (t1 - t0) // 2), t1 - t0)
        print("cupti-offset", best[0], best[1])
    else:
        print("cupti-offset none")
sys.stdout.flush()
