# Hot functions that measure their own CPU time and loop lines, printed as a JSON truth line.
import json, sys, time
SELF = {}
LOOP = {}
def leaf_a(ns):
    t0 = time.thread_time_ns(); end = t0 + ns; x = 0
    LOOP["leaf_a"] = sys._getframe().f_lineno + 1
    while time.thread_time_ns() < end:
        x += 1
    SELF["leaf_a"] = SELF.get("leaf_a", 0) + time.thread_time_ns() - t0
def leaf_b(ns):
    t0 = time.thread_time_ns(); end = t0 + ns; x = 0
    LOOP["leaf_b"] = sys._getframe().f_lineno + 1
    while time.thread_time_ns() < end:
        x += 1
    SELF["leaf_b"] = SELF.get("leaf_b", 0) + time.thread_time_ns() - t0
def middle(ns):
    t0 = time.thread_time_ns(); end = t0 + ns; x = 0
    LOOP["middle"] = sys._getframe().f_lineno + 1
    while time.thread_time_ns() < end:
        x += 1
    SELF["middle"] = SELF.get("middle", 0) + time.thread_time_ns() - t0
    leaf_b(ns)
leaf_a(800_000_000)
middle(400_000_000)
print("truth " + json.dumps({"self_ns": SELF, "loop_line": LOOP,
    "process_ns": time.process_time_ns()}), flush=True)
