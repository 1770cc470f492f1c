"""The workload of `cargo xtask attach-torch`: the conv net of train.py,
trained on the CPU by epochs of a DataLoader with two forked workers
(forked afresh each epoch), started without any asys environment.

It reads its phase from the file argv[2] before each step (not from stdin
on a thread: a worker forked while that thread held stdin's lock would
hang closing it): `go` (NVTX ranges from now on: "step" in the domain
"train" around each step, "load" in the domain "data" around each sample a
worker loads, in workers forked from then on), `stop` (no more ranges),
`quit` (ends after the step in flight). Each range it makes is a line of
argv[1]: "range NAME PID START END" (CLOCK_MONOTONIC ns). Prints "ready
PID" once the loader has run its first batch."""
import os
import sys
import time

import nvtx
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

LOG = open(sys.argv[1], "a", buffering=1)
phase = "before"


def log(name, start, end):
    LOG.write(f"range {name} {os.getpid()} {start} {end}\n")


class Images(Dataset):
    def __len__(self):
        return 32 * 8

    def __getitem__(self, i):
        if phase != "go":
            return self.make(i)
        start = time.monotonic_ns()
        with nvtx.annotate("load", domain="data"):
            x = self.make(i)
        log("load", start, time.monotonic_ns())
        return x

    @staticmethod
    def make(i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), i % 10


def read_phase():
    global phase
    try:
        with open(sys.argv[2]) as f:
            phase = f.read().strip() or phase
    except FileNotFoundError:
        pass


def main():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Images(), batch_size=32, num_workers=2,
                        multiprocessing_context="fork")
    ready = False
    while phase != "quit":
        for x, y in loader:
            read_phase()
            if not ready:
                print("ready", os.getpid(), flush=True)
                ready = True
            ranged = phase == "go"
            start = time.monotonic_ns()
            with nvtx.annotate("step", domain="train") if ranged else nullcontext():
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            if ranged:
                log("step", start, time.monotonic_ns())
            if phase == "quit":
                break


class nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


if __name__ == "__main__":
    main()
