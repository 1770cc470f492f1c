# Two threads wait for a known time: one in queue.get() on a queue nothing is
# ever put in (it times out), one in time.sleep(). Prints its own truth: each
# thread's native id, the line of its blocking call (read with inspect, not
# written here), and how long the call blocked (monotonic clock around it).
import inspect, json, queue, sys, threading, time

WAIT_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.8
truth = {}


def line_of(function, text):
    """The line of `function` whose source holds `text`."""
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, l in enumerate(lines) if text in l)


def blocked_in_get(q):
    t0 = time.monotonic_ns()
    try:
        q.get(timeout=WAIT_S)
    except queue.Empty:
        pass
    blocked_ns = time.monotonic_ns() - t0
    truth["get"] = {
        "tid": threading.get_native_id(),
        "line": line_of(blocked_in_get, "q.get("),
        "blocked_ns": blocked_ns,
    }


def blocked_in_sleep():
    t0 = time.monotonic_ns()
    time.sleep(WAIT_S)
    blocked_ns = time.monotonic_ns() - t0
    truth["sleep"] = {
        "tid": threading.get_native_id(),
        "line": line_of(blocked_in_sleep, "time.sleep("),
        "blocked_ns": blocked_ns,
    }


# Run a while first: the process's first samples are what make asys read its
# Python frames.
end = time.thread_time_ns() + 300_000_000
while time.thread_time_ns() < end:
    pass
threads = [
    threading.Thread(target=blocked_in_get, args=(queue.Queue(),)),
    threading.Thread(target=blocked_in_sleep),
]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("truth " + json.dumps(truth), flush=True)
