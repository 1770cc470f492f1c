# A script's shell: starts asys (argv[2:]) in the background and exits once the application is stopped.
import os, subprocess, sys, time
log = open(sys.argv[1], "w")
asys = subprocess.Popen(sys.argv[2:], stdout=log, stderr=log)
deadline = time.monotonic() + 20
seen = None
while time.monotonic() < deadline and seen is None:
    try:
        kids = open(f"/proc/{asys.pid}/task/{asys.pid}/children").read().split()
    except OSError:
        break
    for k in kids:
        try:
            if open(f"/proc/{k}/stat").read().rsplit(")", 1)[1].split()[0] == "T":
                seen = k
        except OSError:
            pass
print(f"shell-exits asys={asys.pid} stopped={seen}", flush=True)
os._exit(0)
