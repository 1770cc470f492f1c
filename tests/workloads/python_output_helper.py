# Spins 200 ms while it is imported (as helper), and says for how long.
import time
t0 = time.thread_time_ns(); end = t0 + 200_000_000
while time.thread_time_ns() < end:
    pass
SPUN = time.thread_time_ns() - t0
