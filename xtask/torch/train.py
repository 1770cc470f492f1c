"""The workload of `cargo xtask bench-torch`: a small conv net trained on the
CPU (CUDA's libraries are loaded, no GPU is used), NVTX ranges around each
step from the `nvtx` package, and a DataLoader with two forked workers.
Prints its own monotonic times: bench-start (first line of the script),
bench-ready (model and loader built), one bench-steps line of per-step ns
(forward, backward, optimizer step, inside an NVTX range), and bench-end.
With BENCH_PIN=1 (`bench-always-on`) the trainer runs alone on CPU 1 with
one torch thread, and its loader workers on CPU 0 with the tools, so that a
step's time holds the tool's in-line cost (probes, sampling interrupts)
and not its collector's or the workers' share of the CPU."""
import os
import sys
import time

PIN = os.environ.get("BENCH_PIN") == "1"
if PIN:
    os.sched_setaffinity(0, {1})

print(f"bench-start {time.monotonic_ns()}", flush=True)
import nvtx  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Images(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), i % 10


def to_cpu0(_worker):
    os.sched_setaffinity(0, {0})


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    if PIN:
        torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Images(), batch_size=32, num_workers=2,
                        multiprocessing_context="fork",
                        worker_init_fn=to_cpu0 if PIN else None)
    print(f"bench-cuda {torch.cuda.is_available()}", flush=True)
    batches = iter(loader)
    print(f"bench-ready {time.monotonic_ns()}", flush=True)
    times = []
    for _ in range(steps):
        x, y = next(batches)
        t = time.monotonic_ns()
        with nvtx.annotate("step"):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        times.append(time.monotonic_ns() - t)
    del batches
    print("bench-steps " + " ".join(map(str, times)), flush=True)
    print(f"bench-end {time.monotonic_ns()}", flush=True)


if __name__ == "__main__":
    main()
