"""Workloads of acceptance.sh (the GPU acceptance run), on an NVIDIA GPU with PyTorch.

  python3 acceptance_work.py graph MODE     a training step captured in a CUDA graph and
                                            replayed REPLAYS times; MODE plain or torchprof
                                            (torch.profiler over the replays: writes the
                                            kernel names it saw to $OUT/graph_torch.json)
  python3 acceptance_work.py multi KIND     two processes on the one GPU, KIND fork (the
                                            parent forks before touching CUDA, as a
                                            DataLoader does its workers, since CUDA cannot
                                            be used in a child forked after the parent
                                            initialized it; then both use the GPU) or spawn
                                            (multiprocessing's spawn)
  python3 acceptance_work.py train SECONDS  a training loop for SECONDS (attach and
                                            system-wide targets); prints step-ms per second;
                                            then PROFILE_STEPS (default 0) more steps under
                                            torch.profiler, whose kernel names per step go to
                                            $OUT/attach_torch.json
  python3 acceptance_work.py steps MODE     STEPS training steps, MODE plain or torchprof,
                                            for the overhead comparison

Ground truth on stdout, one fact a line:
  pid PID                     a process that ran CUDA work
  replays N                   graph replays in the measured part
  step-ms MEDIAN              median synchronized step
  second T STEP_MS            (train) the median step of each second since the start
  t0-wall SECONDS             (train) the wall-clock time (time.time()) of that start
"""
import json
import os
import statistics
import sys
import time

OUT = os.environ.get("OUT", ".")


def model_and_data(torch, dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device=dev)
    y = torch.randn(256, 512, device=dev)
    return model, opt, x, y


def step_fn(torch, model, opt, x, y):
    def step():
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def graph(mode):
    import torch

    dev = torch.device("cuda")
    replays = int(os.environ.get("REPLAYS", "20"))
    model, opt, x, y = model_and_data(torch, dev)
    step = step_fn(torch, model, opt, x, y)
    # Warm up on a side stream, as torch.cuda.graphs' documentation asks.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    torch.cuda.synchronize()
    print(f"pid {os.getpid()}")
    print(f"replays {replays}")
    if mode == "torchprof":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                g.replay()
            torch.cuda.synchronize()
        names = [
            e.name
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
            and not e.name.startswith("Memcpy")
            and not e.name.startswith("Memset")
        ]
        json.dump(names, open(f"{OUT}/graph_torch.json", "w"))
    else:
        torch.cuda.nvtx.range_push("replays")
        for _ in range(replays):
            g.replay()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def child_work(n):
    import torch

    dev = torch.device("cuda")
    a = torch.randn(512, 512, device=dev)
    for _ in range(n):
        a = (a @ a).tanh()
    torch.cuda.synchronize()
    print(f"pid {os.getpid()}", flush=True)


def multi(kind):
    import multiprocessing as mp

    if kind == "fork":
        # CUDA cannot be used in a child forked after the parent initialized
        # it: fork first (as a DataLoader worker does before any CUDA work of
        # its own), then both use the GPU.
        pid = os.fork()
        if pid == 0:
            child_work(50)
            os._exit(0)
        child_work(50)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=child_work, args=(50,))
    p.start()
    child_work(50)
    p.join()
    sys.exit(p.exitcode)


def train(seconds):
    import torch

    dev = torch.device("cuda")
    model, opt, x, y = model_and_data(torch, dev)
    step = step_fn(torch, model, opt, x, y)
    print(f"pid {os.getpid()}", flush=True)
    print(f"t0-wall {time.time():.3f}", flush=True)
    t0 = time.monotonic()
    second, times = 0, []
    while time.monotonic() - t0 < seconds:
        s = time.monotonic_ns()
        step()
        torch.cuda.synchronize()
        times.append((time.monotonic_ns() - s) / 1e6)
        now = int(time.monotonic() - t0)
        if now != second:
            print(f"second {second} {statistics.median(times):.4f}", flush=True)
            second, times = now, []
    # The same steps under torch.profiler, in the same process, after the
    # attach: the kernels each step launches, as CUPTI gives them to it.
    n = int(os.environ.get("PROFILE_STEPS", "0"))
    if n:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                step()
            torch.cuda.synchronize()
        names = {}
        for e in prof.events():
            if (e.device_type == torch.autograd.DeviceType.CUDA
                    and not e.name.startswith("Memcpy") and not e.name.startswith("Memset")):
                names[e.name] = names.get(e.name, 0) + 1
        json.dump({"steps": n, "kernels": names}, open(f"{OUT}/attach_torch.json", "w"))


def steps(mode):
    import torch

    dev = torch.device("cuda")
    n = int(os.environ.get("STEPS", "200"))
    model, opt, x, y = model_and_data(torch, dev)
    step = step_fn(torch, model, opt, x, y)
    for _ in range(10):
        step()
    torch.cuda.synchronize()

    def run():
        times = []
        for _ in range(n):
            s = time.monotonic_ns()
            torch.cuda.nvtx.range_push("step")
            step()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            times.append((time.monotonic_ns() - s) / 1e6)
        return times

    if mode == "torchprof":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            times = run()
    else:
        times = run()
    print(f"pid {os.getpid()}")
    print(f"step-ms {statistics.median(times):.4f}")


if __name__ == "__main__":
    what, arg = sys.argv[1], sys.argv[2]
    {"graph": graph, "multi": multi, "steps": steps}.get(what, lambda a: train(float(a)))(arg)
