"""Driver of `cargo xtask bench-always-on`: what leaving asys on costs a
PyTorch training loop, measured to half a percent.

Design (why each part):
- One training process (always_on_train.py), pinned: the trainer alone on
  CPU 1, its loader workers and every tool on CPU 0. Its steps are timed by
  its own clock and printed at the end.
- Blocks of BLOCK seconds alternate inside that one process: untraced, a
  tool attached, untraced, the next tool, ... A traced block's median step
  is divided by the median step of the untraced blocks on both sides of it.
  Pairing neighbouring blocks of one process cancels what differs between
  processes (address layout, page placement, the host's load minutes apart),
  which made whole-run ratios wander by several percent here.
- The tools attach: `asys attach --always-on` (99 Hz) and the same at
  1 kHz (`--sample-period 1000000 --python-sampling-frequency 1000`),
  `py-spy record --pid` at its defaults (100 Hz, stopping the process for
  each sample) and `perf record -F 99 -g -p`. A block counts only the steps
  after the tool is ready (asys: its "tracing" line; py-spy: its
  "Sampling" line; perf: 1 s) plus SETTLE seconds, until the tool is told
  to stop; an untraced block begins SETTLE seconds after the tool exited.
- A round is one block of each tool, each with its untraced neighbours.
  Rounds go on until every asys mode's 95 % interval (t on the log of the
  per-block ratios) is at most +-0.5 %, at least MIN_ROUNDS and at most
  MAX_ROUNDS.
- Per traced block also: the tool's own CPU (utime+stime of its process
  over the block, /proc/PID/stat), asys's BPF programs' run time (their
  fdinfo's run_time_ns, with kernel.bpf_stats_enabled on for the whole
  run, traced and untraced alike), and the tool's peak RSS (VmHWM, polled
  until it exits).

Usage: always_on.py ASYS PYTHON PY_SPY OUT.json [MIN_ROUNDS MAX_ROUNDS BLOCK]
"""
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

asys, python, py_spy, out_json = sys.argv[1:5]
MIN_ROUNDS = int(sys.argv[5]) if len(sys.argv) > 5 else 10
MAX_ROUNDS = int(sys.argv[6]) if len(sys.argv) > 6 else 40
BLOCK = float(sys.argv[7]) if len(sys.argv) > 7 else 6.0
SETTLE = 1.0
GOAL = 0.005
here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp(prefix="asys-bench-always-on-")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def asys_attach(*extra):
    return lambda pid, out: [asys, "attach", "--always-on", *extra, "-f", "true",
                             "-o", out, str(pid)]


TOOLS = [
    ("asys --always-on (99 Hz)", asys_attach(), "asys: tracing"),
    ("asys --always-on at 1 kHz",
     asys_attach("--sample-period", "1000000", "--python-sampling-frequency", "1000"),
     "asys: tracing"),
    ("py-spy record (defaults)",
     lambda pid, out: [py_spy, "record", "--pid", str(pid), "-f", "raw", "-o", out],
     "Sampling"),
    ("perf record -F 99 -g",
     lambda pid, out: ["perf", "record", "-F", "99", "-g", "-q", "-p", str(pid), "-o", out],
     None),
]


def now():
    return time.monotonic_ns()


def cpu_ns(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def bpf_run_ns(pid):
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return None
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = f.read()
        except OSError:
            continue
        if "prog_type:" not in info:
            continue
        for line in info.splitlines():
            if line.startswith("run_time_ns:"):
                total += int(line.split()[1])
    return total


def hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run_tool(i, tool, pid):
    """One traced block: returns (t0, t1, measures)."""
    name, cmd, ready = tool
    out = os.path.join(tmp, f"t{i}")
    # py-spy says it is sampling on stdout, asys on stderr: one pipe.
    p = subprocess.Popen(["taskset", "-c", "0", *cmd(pid, out)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said = []
    if ready:
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit(f"{name} ended before it was ready:\n{''.join(said)}")
            said.append(line)
            if ready in line:
                break
    else:
        time.sleep(1.0)
    # The rest of its stderr, read on so that it never blocks on a pipe.
    rest = []
    reader = threading.Thread(target=lambda: rest.extend(p.stdout), daemon=True)
    reader.start()
    time.sleep(SETTLE)
    c0, b0, t0 = cpu_ns(p.pid), bpf_run_ns(p.pid), now()
    time.sleep(BLOCK)
    c1, b1, t1 = cpu_ns(p.pid), bpf_run_ns(p.pid), now()
    peak = hwm_kib(p.pid) or 0
    # Ctrl+C, as a user ends each; again every 2 s (py-spy once missed the
    # first here), then SIGKILL after 60 s, so that no tool outlives its
    # block.
    asked = time.monotonic()
    p.send_signal(signal.SIGINT)
    last = asked
    while p.poll() is None:
        peak = max(peak, hwm_kib(p.pid) or 0)
        time.sleep(0.05)
        if time.monotonic() - last > 2:
            p.send_signal(signal.SIGINT if time.monotonic() - asked < 60 else signal.SIGKILL)
            last = time.monotonic()
    reader.join(timeout=5)
    if p.returncode not in (0, -signal.SIGINT, 130):
        sys.exit(f"{name} exited {p.returncode}:\n{''.join(said + rest)}")
    wall = t1 - t0
    return t0, t1, {
        "cpu_core_share": (c1 - c0) / wall if c0 is not None and c1 is not None else None,
        "bpf_core_share": (b1 - b0) / wall if b0 is not None and b1 is not None and b0 + b1 > 0 else None,
        "peak_rss_mib": peak / 1024,
    }


def untraced_block():
    time.sleep(SETTLE)
    t0 = now()
    time.sleep(BLOCK)
    return t0, now()


T95 = [12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def interval(ratios):
    """Geometric mean and its 95 % t interval."""
    logs = [math.log(r) for r in ratios]
    m = statistics.mean(logs)
    if len(logs) < 2:
        return math.exp(m), float("nan"), float("nan")
    t = T95[len(logs) - 2] if len(logs) - 2 < len(T95) else 1.96
    h = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def bootstrap(ratios, n=10000):
    rnd = random.Random(0)
    means = sorted(statistics.mean(rnd.choices(ratios, k=len(ratios))) for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n)]


def collect_steps(train, steps):
    """Asks the trainer for its steps so far (between blocks)."""
    train.send_signal(signal.SIGUSR1)
    for line in train.stdout:
        k, *v = line.split()
        if k == "steps-end":
            return
        if k == "step":
            steps.append((int(v[0]), int(v[0]) + int(v[1])))
    sys.exit("the trainer ended")


def main():
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            stats_before = f.read().strip()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
    except OSError:
        stats_before = None
    train = subprocess.Popen([python, os.path.join(here, "always_on_train.py")],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    steps = []
    blocks = []  # (kind, t0, t1, measures)
    rounds = 0
    try:
        line = train.stdout.readline()
        if not line.startswith("ready "):
            sys.exit(f"the trainer said {line!r}")
        pid = train.pid
        t0, t1 = untraced_block()
        blocks.append(("untraced", t0, t1, {}))
        while True:
            rounds += 1
            for i, tool in enumerate(TOOLS):
                t0, t1, m = run_tool(rounds * 100 + i, tool, pid)
                blocks.append((tool[0], t0, t1, m))
                t0, t1 = untraced_block()
                blocks.append(("untraced", t0, t1, {}))
                print(f"round {rounds} {tool[0]}: {m}", file=sys.stderr, flush=True)
            collect_steps(train, steps)
            if rounds >= MIN_ROUNDS:
                widths = [half_width(r) for r in ratios_of(blocks, steps)[0].values()]
                asys_widths = widths[:2]
                print(f"round {rounds}: asys half-widths {asys_widths}", file=sys.stderr, flush=True)
                if rounds >= MAX_ROUNDS or all(w <= GOAL for w in asys_widths):
                    break
    finally:
        train.send_signal(signal.SIGTERM)
        try:
            train.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            train.kill()
        if stats_before is not None:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(stats_before)
    report(blocks, steps, rounds)


def half_width(ratios):
    g, lo, hi = interval(ratios)
    return (hi - lo) / 2 / g if len(ratios) > 1 else float("inf")


def median_in(steps, t0, t1):
    d = [e - s for s, e in steps if s >= t0 and e <= t1]
    return (statistics.median(d), len(d)) if d else (None, 0)


def ratios_of(blocks, steps):
    """Per tool, each traced block's median step over the mean of its
    untraced neighbours' medians; and the tools' measures of those blocks."""
    ratios = {name: [] for name, _, _ in TOOLS}
    measures = {name: [] for name, _, _ in TOOLS}
    medians = [median_in(steps, t0, t1) for _, t0, t1, _ in blocks]
    for k, (kind, _, _, m) in enumerate(blocks):
        if kind == "untraced":
            continue
        before = medians[k - 1][0]
        after = medians[k + 1][0] if k + 1 < len(blocks) else None
        base = [b for b in (before, after) if b]
        if medians[k][0] is None or not base:
            continue
        ratios[kind].append(medians[k][0] / statistics.mean(base))
        measures[kind].append(m)
    return ratios, measures, medians


def report(blocks, steps, rounds):
    ratios, measures, medians = ratios_of(blocks, steps)
    rows = []
    untraced_steps = sum(n for (kind, *_), (_, n) in zip(blocks, medians) if kind == "untraced")
    print(f"\nPyTorch CPU training step, {rounds} rounds of {BLOCK:.0f} s blocks, "
          f"{len(steps)} steps ({untraced_steps} untraced in blocks); ratio = a traced "
          f"block's median step over its untraced neighbours'")
    print(f"{'tool':30} {'ratio':>7} {'95% t interval':>17} {'half':>6} {'bootstrap':>17} "
          f"{'CPU':>7} {'BPF':>7} {'RSS MiB':>8}")
    for name, _, _ in TOOLS:
        r = ratios[name]
        g, lo, hi = interval(r)
        blo, bhi = bootstrap(r) if r else (float("nan"), float("nan"))
        ms = measures[name]
        cpu = statistics.median([m["cpu_core_share"] for m in ms if m["cpu_core_share"] is not None] or [float("nan")])
        bpf_list = [m["bpf_core_share"] for m in ms if m["bpf_core_share"] is not None]
        bpf = statistics.median(bpf_list) if bpf_list else None
        rss = max((m["peak_rss_mib"] for m in ms), default=float("nan"))
        row = {"tool": name, "blocks": len(r), "ratio": g, "t95": [lo, hi],
               "half_width": (hi - lo) / 2 / g, "bootstrap95": [blo, bhi],
               "cpu_core_share": cpu, "bpf_core_share": bpf, "peak_rss_mib": rss,
               "ratios": r, "measures": ms}
        rows.append(row)
        bpf_s = f"{100 * bpf:6.2f}%" if bpf is not None else "      -"
        print(f"{name:30} {g:6.4f}x {lo:8.4f}-{hi:7.4f} {100 * row['half_width']:5.2f}% "
              f"{blo:8.4f}-{bhi:7.4f} {100 * cpu:6.2f}% {bpf_s} {rss:8.1f}")
    with open(out_json, "w") as f:
        json.dump({"rounds": rounds, "block_s": BLOCK, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
