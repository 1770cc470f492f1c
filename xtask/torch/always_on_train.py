"""The workload of `cargo xtask bench-always-on`: train.py's conv net and
loader, trained on the CPU until SIGTERM, pinned as train.py's BENCH_PIN
does (the trainer alone on CPU 1 with one torch thread, its two forked
loader workers on CPU 0 with the tools). Each step is timed by the
workload's own CLOCK_MONOTONIC and kept in memory (no I/O while the tools
are measured). Prints "ready PID" when its loader has made a batch; on
SIGUSR1 (between blocks), "step START_NS DURATION_NS" for each step since
the last such print, then "steps-end"; on SIGTERM the same, then exits."""
import os
import signal
import sys
import time

os.sched_setaffinity(0, {1})
import nvtx  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

stop = False
dump = False


def on_term(_sig, _frame):
    global stop
    stop = True


def on_usr1(_sig, _frame):
    global dump
    dump = True


def print_steps(starts, durations):
    out = sys.stdout
    for s, d in zip(starts, durations):
        out.write(f"step {s} {d}\n")
    out.write("steps-end\n")
    out.flush()
    starts.clear()
    durations.clear()


class Images(Dataset):
    def __len__(self):
        return 1 << 26

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i % 4096)
        return torch.randn(3, 32, 32, generator=g), i % 10


def to_cpu0(_worker):
    os.sched_setaffinity(0, {0})


def main():
    global dump
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, on_usr1)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Images(), batch_size=32, num_workers=2,
                        multiprocessing_context="fork", worker_init_fn=to_cpu0)
    batches = iter(loader)
    next(batches)
    print(f"ready {os.getpid()}", flush=True)
    starts, durations = [], []
    while not stop:
        if dump:
            dump = False
            print_steps(starts, durations)
        x, y = next(batches)
        t = time.monotonic_ns()
        with nvtx.annotate("step"):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        starts.append(t)
        durations.append(time.monotonic_ns() - t)
    del batches
    print_steps(starts, durations)


if __name__ == "__main__":
    main()
