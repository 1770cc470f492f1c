# Calls target_fn N times (N read from stdin) under a profile hook, between "ready" and "done".
import sys
def target_fn(i):
    return i + 1
print("ready", flush=True)
n = int(sys.stdin.readline())
# CPython 3.11 fires function__entry only while a tracing hook is on
# (cframe.use_tracing; calls inlined in the eval loop skip it otherwise);
# function__return fires at every return.
sys.setprofile(lambda *a: None)
s = 0
for i in range(n):
    s += target_fn(i)
sys.setprofile(None)
print("done", s, flush=True)
sys.stdin.readline()
