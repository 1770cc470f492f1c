# Two threads spin in different functions, each printing its native id and its CPU time.
import json, threading, time
def spin_a(ns):
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass
def spin_b(ns):
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass
truth = {}
def run(f):
    truth[f.__name__] = {"tid": threading.get_native_id()}
    t0 = time.thread_time_ns()
    f(300_000_000)
    truth[f.__name__]["cpu_ns"] = time.thread_time_ns() - t0
ts = [threading.Thread(target=run, args=(f,)) for f in (spin_a, spin_b)]
for t in ts: t.start()
for t in ts: t.join()
print("truth " + json.dumps(truth), flush=True)
