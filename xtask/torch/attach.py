"""Driver of `cargo xtask attach-torch ASYS PYTHON OUT_JSON`: starts
attach_train.py with no asys environment, lets it train, attaches asys
(-t nvtx) to it mid-run, has it make NVTX ranges for a few seconds (in the
training loop and in DataLoader workers forked after the attach), stops the
ranges, detaches, and compares the report's ranges with the workload's own
log of them: counts per name and per process, exactly. Exits 1 on a
difference."""
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

asys, python, out = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp(prefix="asys-attach-torch-")
log_path = os.path.join(tmp, "ranges.log")
phase_path = os.path.join(tmp, "phase")


def set_phase(p):
    with open(phase_path + ".new", "w") as f:
        f.write(p)
    os.replace(phase_path + ".new", phase_path)


env = {k: v for k, v in os.environ.items()
       if not k.endswith("INJECTION64_PATH") and not k.startswith("ASYS_")}
work = subprocess.Popen([python, os.path.join(here, "attach_train.py"), log_path, phase_path],
                        stdout=subprocess.PIPE, text=True, env=env)
pid = int(work.stdout.readline().split()[1])
time.sleep(3)  # training, untraced, with no tool

report = os.path.join(tmp, "torch")
t0 = time.monotonic()
tracer = subprocess.Popen([asys, "attach", "-t", "nvtx", "-o", report, str(pid)],
                          stderr=subprocess.PIPE, text=True)
said = []
while not said or not said[-1].startswith("asys: tracing"):
    line = tracer.stderr.readline()
    if not line:
        sys.exit(f"asys ended: {''.join(said)}")
    said.append(line)
attach_s = time.monotonic() - t0
set_phase("go")
time.sleep(5)
set_phase("stop")
time.sleep(1.5)  # the ranges in flight end
tracer.send_signal(signal.SIGINT)
rest = tracer.stderr.read()
tracer.wait()
said.append(rest)
set_phase("quit")
code = work.wait(timeout=120)

logged = collections.Counter()
for line in open(log_path):
    _, name, p, _, _ = line.split()
    logged[(name, "main" if int(p) == pid else "worker")] += 1
workers_logged = {int(l.split()[2]) for l in open(log_path) if int(l.split()[2]) != pid}

rows = json.loads(subprocess.run(
    [asys, "stats", "-r", "nvtx_pushpop_trace", "--format", "json", report + ".asysrep"],
    capture_output=True, text=True, check=True).stdout)
recorded = collections.Counter()
workers_recorded = set()
for r in rows:
    name = r["Name"].split(":")[-1]
    p = r.get("Pid") or r.get("PID")
    recorded[(name, "main" if p == pid else "worker")] += 1
    if p != pid:
        workers_recorded.add(p)

result = {
    "attach_seconds": round(attach_s, 3),
    "workload_exit": code,
    "logged": {f"{n} ({w})": c for (n, w), c in sorted(logged.items())},
    "recorded": {f"{n} ({w})": c for (n, w), c in sorted(recorded.items())},
    "worker_processes_logged": len(workers_logged),
    "worker_processes_recorded": len(workers_recorded),
    "asys_said": [l for l in "".join(said).splitlines() if l.startswith("asys: process")],
}
json.dump(result, open(out, "w"), indent=1)
print(json.dumps(result, indent=1))
ok = code == 0 and logged == recorded and logged and workers_logged == workers_recorded
print("attach-torch:", "ranges equal the workload's log" if ok else "DIFFERENT")
sys.exit(0 if ok else 1)
