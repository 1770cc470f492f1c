# 50 nested calls of down, then a 300 ms spin in bottom.
import time
def bottom():
    end = time.thread_time_ns() + 300_000_000
    while time.thread_time_ns() < end:
        pass
def down(n):
    if n == 0:
        bottom()
    else:
        down(n - 1)
down(49)
