"""A process with CUDA's runtime (PyPI's, CUDA 12) and CUDA 13's CUPTI
loaded, and no driver, as PyTorch 2.15 is on a host without a GPU. It
speaks attach_target's protocol: prints "ready PID", then answers each
"count" line on stdin with "counted N" (the turns of its loop so far) and
ends on "quit". argv: the libcudart and libcupti paths."""
import ctypes
import os
import sys
import threading
import time

ctypes.CDLL(sys.argv[1])
ctypes.CDLL(sys.argv[2])
turns = 0


def spin():
    global turns
    while True:
        time.sleep(0.001)
        turns += 1


threading.Thread(target=spin, daemon=True).start()
print(f"ready {os.getpid()}", flush=True)
for line in sys.stdin:
    if line.strip() == "count":
        print(f"counted {turns}", flush=True)
    elif line.strip() == "quit":
        break
