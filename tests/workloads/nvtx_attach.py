# NVTX ranges on demand, in a process to attach to. Prints "ready PID".
# Before anything, a range in the domain "early" (made while no NVTX tool is
# there: the nvtx package keeps it a DummyDomain for the process's life).
# On "ranges N": N ranges "work" in the domain "late" (first used then), and
# a forked child's N ranges "child-work" in the same domain; prints "done N"
# once the child has exited. On "quit": exits 0.
import os
import sys

import nvtx

with nvtx.annotate("before", domain="early"):
    pass
print("ready", os.getpid(), flush=True)
for line in sys.stdin:
    words = line.split()
    if words[:1] == ["ranges"]:
        n = int(words[1])
        for i in range(n):
            with nvtx.annotate("work", domain="late"):
                pass
            with nvtx.annotate("before", domain="early"):
                pass
        child = os.fork()
        if child == 0:
            for i in range(n):
                with nvtx.annotate("child-work", domain="late"):
                    pass
            os._exit(0)
        os.waitpid(child, 0)
        print("done", n, flush=True)
    else:
        break
