# Spins 300 ms of its own CPU time in spin() and prints the CPU time it measured.
import time
def spin(ns):
    end = time.thread_time_ns() + ns
    x = 0
    while time.thread_time_ns() < end:
        x += 1
    return x
start = time.thread_time_ns()
spin(300_000_000)
print("cpu_ns", time.thread_time_ns() - start, flush=True)
