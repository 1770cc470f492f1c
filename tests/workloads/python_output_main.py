# Hot, odd-named, warm and long-named functions and an imported helper spin; prints each one's own CPU time.
import json, os, sys, time, types
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SELF = {}
def hot(ns):
    t0 = time.thread_time_ns(); end = t0 + ns
    while time.thread_time_ns() < end:
        pass
    SELF["hot"] = time.thread_time_ns() - t0
def warm(ns):
    t0 = time.thread_time_ns(); end = t0 + ns
    while time.thread_time_ns() < end:
        pass
    SELF["warm"] = time.thread_time_ns() - t0
SRC = """
import time
def spin(ns):
    t0 = time.thread_time_ns(); end = t0 + ns
    while time.thread_time_ns() < end:
        pass
    return time.thread_time_ns() - t0
"""
space = {}
exec(compile(SRC, os.path.join(HERE, "odd.py"), "exec"), space)
code = space["spin"].__code__
odd = types.FunctionType(code.replace(co_name="\0x", co_qualname="\0x"), space)
LONG = "Long." + "n" * 3000
long_named = types.FunctionType(code.replace(co_name="n", co_qualname=LONG), space)
import helper
SELF["helper"] = helper.SPUN
hot(600_000_000)
SELF["\0x"] = odd(300_000_000)
warm(200_000_000)
SELF["long"] = long_named(60_000_000)
print("truth " + json.dumps({"self_ns": SELF, "long": LONG,
    "process_ns": time.process_time_ns()}), flush=True)
