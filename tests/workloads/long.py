# Spins (in Python, with C calls) until killed; says when it started.
import time
def forever():
    print('spinning', flush=True)
    while True:
        time.thread_time_ns()
forever()
