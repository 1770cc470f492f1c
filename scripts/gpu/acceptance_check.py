"""The checks of acceptance.sh (the GPU acceptance run), on files only: asys's reports as
`asys stats -f json` wrote them, the workloads' stdout (acceptance_work.py's
ground-truth lines), nvidia-smi's CSV. No GPU is needed to run them, so
`python3 acceptance_check.py selftest` exercises every check here on made-up
inputs (tests/tests/gpu_acceptance.rs runs it).

  python3 acceptance_check.py CHECK DIR [ARG]   one check over DIR's files; prints
                                                what it found, exits 1 on a miss
  python3 acceptance_check.py selftest          every check on synthetic inputs
"""
import csv
import json
import os
import statistics
import sys
import tempfile


class Miss(Exception):
    pass


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def facts(d, name, key):
    """The values of the `key ...` lines of a workload's stdout."""
    out = []
    with open(os.path.join(d, name)) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == key:
                out.append(parts[1:])
    return out


def is_kernel(row):
    return not str(row.get("Name", "")).startswith("[CUDA ")


def check_graph(d, _arg=None):
    """Node mode: the graph's kernels, one row per node execution, as many
    as torch.profiler saw over the same replays, each with its graph and node
    ids and joined to the cudaGraphLaunch that replayed it."""
    trace = load(d, "graph_trace.json")
    calls = load(d, "graph_api.json")
    theirs = load(d, "graph_torch.json")
    replays = int(facts(d, "graph_app.txt", "replays")[0][0])
    nodes = [k for k in trace if is_kernel(k) and k.get("GraphId") not in (None, 0)]
    if not nodes:
        raise Miss("no kernel carries a graph id (was --cuda-graph-trace node given?)")
    if any(k.get("GraphNodeId") in (None, 0) for k in nodes):
        raise Miss("a graph kernel without its node id")
    launches = {
        (c["Pid"], c["CorrId"]): c["Name"]
        for c in calls
        if str(c.get("Name", "")).startswith(("cudaGraphLaunch", "cuGraphLaunch"))
    }
    unjoined = [k for k in nodes if (k["Pid"], k["CorrId"]) not in launches]
    graphs = {k["GraphId"] for k in nodes}
    # The replays of the measured part: the graph's kernels of the last
    # `replays` launches (the capture itself launches nothing).
    per_launch = {}
    for k in nodes:
        per_launch.setdefault(k["CorrId"], []).append(k)
    counts = [len(v) for _, v in sorted(per_launch.items())][-replays:]
    ours = sum(counts)
    print(
        f"graph: {len(nodes)} node kernels in {len(per_launch)} launches of {len(graphs)} graph(s); "
        f"last {replays} replays: {ours} kernels ({counts[:3]}... per replay); torch.profiler {len(theirs)}; "
        f"unjoined to a graph launch: {len(unjoined)}"
    )
    if len(per_launch) < replays:
        raise Miss(f"{len(per_launch)} graph launches recorded, {replays} replayed")
    if ours != len(theirs):
        raise Miss(f"kernels over the replays: asys {ours}, torch.profiler {len(theirs)}")
    if unjoined:
        raise Miss(f"{len(unjoined)} graph kernels not joined to a graph launch call")


def check_processes(d, arg):
    """Every process that printed `pid N` has kernels in the report."""
    trace = load(d, f"{arg}_trace.json")
    pids = {int(p[0]) for name in sorted(os.listdir(d)) if name.startswith(f"{arg}_app")
            for p in facts(d, name, "pid")}
    per_pid = {}
    for k in trace:
        if is_kernel(k):
            per_pid[k["Pid"]] = per_pid.get(k["Pid"], 0) + 1
    print(f"{arg}: processes {sorted(pids)}; kernels per pid {per_pid}")
    if len(pids) < 2:
        raise Miss(f"{len(pids)} CUDA processes ran, 2 expected")
    missing = [p for p in pids if per_pid.get(p, 0) == 0]
    if missing:
        raise Miss(f"no kernels of processes {missing}")


def check_attach(d, _arg=None):
    """Kernels in the attach window, and the step time after detaching
    within 10% (and 0.2 ms) of before attaching. With attach_torch.json
    (torch.profiler over steps of the same process afterwards): the same
    kernel names, each as often per step (steps cut by the window's edges
    aside), and each kernel joined to its call."""
    trace = load(d, "attach_trace.json")
    window = load(d, "attach_window.json")
    pid = int(facts(d, "attach_app.txt", "pid")[0][0])
    t0 = float(facts(d, "attach_app.txt", "t0-wall")[0][0])
    seconds = [(t0 + int(s), float(ms)) for s, ms in facts(d, "attach_app.txt", "second")]
    kernels = [k for k in trace if is_kernel(k) and k["Pid"] == pid]
    before = [ms for t, ms in seconds if t + 1 < window["start"] and t > t0 + 1]
    after = [ms for t, ms in seconds if t > window["end"] + 1]
    print(
        f"attach: {len(kernels)} kernels of pid {pid} in the window; step before "
        f"{statistics.median(before) if before else None} ms, after "
        f"{statistics.median(after) if after else None} ms"
    )
    if not kernels:
        raise Miss("no kernels recorded in the attach window")
    if not before or not after:
        raise Miss("too few seconds before or after the attach window to compare")
    b, a = statistics.median(before), statistics.median(after)
    if a > b * 1.10 and a - b > 0.2:
        raise Miss(f"step time after detaching {a:.3f} ms, before {b:.3f} ms")
    if not os.path.exists(os.path.join(d, "attach_torch.json")):
        return
    torch = load(d, "attach_torch.json")
    per_step = {n: c / torch["steps"] for n, c in torch["kernels"].items()}
    seen = {}
    for k in kernels:
        seen[k["Name"]] = seen.get(k["Name"], 0) + 1
    if set(seen) != set(per_step):
        raise Miss(f"kernel names differ from torch.profiler's: only asys {sorted(set(seen) - set(per_step))}, "
                   f"only torch {sorted(set(per_step) - set(seen))}")
    steps = statistics.median(seen[n] / per_step[n] for n in per_step)
    for n, p in per_step.items():
        if abs(seen[n] - p * steps) > p + 1:
            raise Miss(f"{n}: {seen[n]} in the window, torch.profiler {p}/step over {steps:.0f} steps")
    calls = {r.get("CorrId") for r in load(d, "attach_api.json")}
    unjoined = [k for k in kernels if k.get("CorrId") not in calls]
    print(f"attach: {steps:.0f} steps of torch.profiler's {len(per_step)} kernels; {len(unjoined)} unjoined")
    if unjoined:
        raise Miss(f"{len(unjoined)} kernels in the window without their call")


def check_metrics(d, _arg=None):
    """NVML's SM utilization and memory used, as asys sampled them, against
    nvidia-smi sampled over the same seconds: medians within 20 points and
    within 10% (or 256 MiB)."""
    rows = load(d, "metrics_trace.json")
    smi = []
    with open(os.path.join(d, "nvidia_smi.csv")) as f:
        for r in csv.reader(f):
            if len(r) < 3 or not r[1].strip().replace(".", "").isdigit():
                continue
            smi.append((float(r[1]), float(r[2])))
    if not rows or not smi:
        raise Miss(f"samples: asys {len(rows)}, nvidia-smi {len(smi)}")
    util = statistics.median(r["Utilization (%)"] for r in rows)
    mem = statistics.median(r["Memory Used (MiB)"] for r in rows)
    s_util = statistics.median(u for u, _ in smi)
    s_mem = statistics.median(m for _, m in smi)
    print(f"metrics: utilization asys {util} %, nvidia-smi {s_util} %; memory used asys {mem} MiB, "
          f"nvidia-smi {s_mem} MiB ({len(rows)} and {len(smi)} samples)")
    if abs(util - s_util) > 20:
        raise Miss(f"utilization {util} % against nvidia-smi's {s_util} %")
    if abs(mem - s_mem) > max(0.1 * s_mem, 256):
        raise Miss(f"memory used {mem} MiB against nvidia-smi's {s_mem} MiB")


def check_python(d, _arg=None):
    """The workload's own Python functions among the sampled frames."""
    rows = load(d, "python_sum.json")
    funcs = {r.get("Function") for r in rows if "acceptance_work" in str(r.get("File", ""))}
    print(f"python: {len(rows)} frame rows; the workload's functions {sorted(f for f in funcs if f)}")
    if not funcs & {"train", "step", "step_fn"}:
        raise Miss("no frame of the workload's training functions")


def check_overhead(d, _arg=None):
    """The step under asys -t cuda,nvtx,osrt against torch.profiler's, both
    against untraced, in the same run: asys's overhead no worse than
    torch.profiler's (5% slack) unless both are within 5% of untraced."""
    ms = {m: float(facts(d, f"over_{m}.txt", "step-ms")[0][0]) for m in ("plain", "torch", "asys")}
    r_torch, r_asys = ms["torch"] / ms["plain"], ms["asys"] / ms["plain"]
    print(f"overhead: step untraced {ms['plain']:.3f} ms, torch.profiler x{r_torch:.3f}, "
          f"asys -t cuda,nvtx,osrt x{r_asys:.3f}")
    if r_asys > 1.05 and r_asys > r_torch * 1.05:
        raise Miss(f"asys x{r_asys:.3f} against torch.profiler's x{r_torch:.3f}")


def check_joins(d, _arg=None):
    """Entry mode: every kernel joined to the API call that launched it."""
    trace = load(d, "over_trace.json")
    calls = load(d, "over_api.json")
    known = {(c["Pid"], c["CorrId"]) for c in calls if c.get("CorrId") not in (None, 0)}
    kernels = [k for k in trace if is_kernel(k)]
    joined = [k for k in kernels if (k["Pid"], k["CorrId"]) in known]
    print(f"entry-mode joins: {len(joined)} of {len(kernels)} kernels")
    if not kernels or len(joined) != len(kernels):
        raise Miss(f"{len(kernels) - len(joined)} kernels not joined to their launch call")


CHECKS = {
    "graph": check_graph,
    "processes": check_processes,
    "attach": check_attach,
    "metrics": check_metrics,
    "python": check_python,
    "overhead": check_overhead,
    "joins": check_joins,
}


def selftest():
    """Each check passes on consistent inputs and misses on a broken one."""
    def write(d, name, value):
        with open(os.path.join(d, name), "w") as f:
            if isinstance(value, str):
                f.write(value)
            else:
                json.dump(value, f)

    def expect(check, d, arg=None, miss=False):
        try:
            CHECKS[check](d, arg)
        except Miss as e:
            if not miss:
                raise AssertionError(f"{check} missed: {e}")
            print(f"  (expected) {check}: {e}")
            return
        if miss:
            raise AssertionError(f"{check} passed a broken input")

    with tempfile.TemporaryDirectory() as d:
        k = lambda pid, corr, g=None, n=None, name="k": {
            "Pid": pid, "CorrId": corr, "GraphId": g, "GraphNodeId": n, "Name": name}
        # Two replays of a 3-node graph (launches 10, 11), plus a plain kernel.
        trace = [k(1, c, 5, n) for c in (10, 11) for n in (1, 2, 3)] + [k(1, 3)]
        write(d, "graph_trace.json", trace)
        write(d, "graph_api.json", [{"Pid": 1, "CorrId": c, "Name": "cudaGraphLaunch"} for c in (10, 11)])
        write(d, "graph_torch.json", ["a", "b", "c"] * 2)
        write(d, "graph_app.txt", "pid 1\nreplays 2\n")
        expect("graph", d)
        write(d, "graph_torch.json", ["a", "b", "c"] * 3)
        expect("graph", d, miss=True)

        write(d, "multi_fork_trace.json", [k(1, 1), k(2, 1), {"Pid": 2, "CorrId": 2, "Name": "[CUDA memset]"}])
        write(d, "multi_fork_app.txt", "pid 1\npid 2\n")
        expect("processes", d, "multi_fork")
        write(d, "multi_fork_trace.json", [k(1, 1), {"Pid": 2, "CorrId": 2, "Name": "[CUDA memset]"}])
        expect("processes", d, "multi_fork", miss=True)

        write(d, "attach_trace.json", [k(9, 1)])
        write(d, "attach_window.json", {"start": 1000.0 + 6, "end": 1000.0 + 11})
        secs = "".join(f"second {s} {1.0 + (0.05 if 6 <= s <= 11 else 0)}\n" for s in range(20))
        write(d, "attach_app.txt", "pid 9\nt0-wall 1000.0\n" + secs)
        expect("attach", d)
        slow = "".join(f"second {s} {1.0 if s < 12 else 1.5}\n" for s in range(20))
        write(d, "attach_app.txt", "pid 9\nt0-wall 1000.0\n" + slow)
        expect("attach", d, miss=True)
        write(d, "attach_app.txt", "pid 9\nt0-wall 1000.0\n" + secs)
        two = [{"Pid": 9, "CorrId": c, "Name": n} for c, n in
               enumerate(["gemm", "relu", "gemm", "relu"] * 5)]
        write(d, "attach_trace.json", two)
        write(d, "attach_api.json", [{"CorrId": c} for c in range(20)])
        write(d, "attach_torch.json", {"steps": 2, "kernels": {"gemm": 4, "relu": 4}})
        expect("attach", d)
        write(d, "attach_torch.json", {"steps": 2, "kernels": {"gemm": 4, "relu": 2}})
        expect("attach", d, miss=True)
        write(d, "attach_torch.json", {"steps": 2, "kernels": {"gemm": 4, "relu": 4, "sgd": 2}})
        expect("attach", d, miss=True)
        write(d, "attach_torch.json", {"steps": 2, "kernels": {"gemm": 4, "relu": 4}})
        write(d, "attach_api.json", [{"CorrId": c} for c in range(10)])
        expect("attach", d, miss=True)
        os.remove(os.path.join(d, "attach_torch.json"))

        write(d, "metrics_trace.json", [{"Utilization (%)": 80, "Memory Used (MiB)": 4000}] * 5)
        write(d, "nvidia_smi.csv", "timestamp, utilization.gpu [%], memory.used [MiB]\n"
              + "".join(f"2026/12/05 05:00:0{i}, 78, 4100\n" for i in range(5)))
        expect("metrics", d)
        write(d, "metrics_trace.json", [{"Utilization (%)": 20, "Memory Used (MiB)": 4000}] * 5)
        expect("metrics", d, miss=True)

        write(d, "python_sum.json", [{"Function": "train", "File": "/x/acceptance_work.py"}])
        expect("python", d)
        write(d, "python_sum.json", [{"Function": "<module>", "File": "/x/other.py"}])
        expect("python", d, miss=True)

        for m, v in (("plain", 10.0), ("torch", 12.0), ("asys", 11.0)):
            write(d, f"over_{m}.txt", f"step-ms {v}\n")
        expect("overhead", d)
        write(d, "over_asys.txt", "step-ms 14\n")
        expect("overhead", d, miss=True)

        write(d, "over_trace.json", [k(1, 5), k(1, 6)])
        write(d, "over_api.json", [{"Pid": 1, "CorrId": 5}, {"Pid": 1, "CorrId": 6}])
        expect("joins", d)
        write(d, "over_api.json", [{"Pid": 1, "CorrId": 5}])
        expect("joins", d, miss=True)
    print("selftest passed")


if __name__ == "__main__":
    if sys.argv[1] == "selftest":
        selftest()
        sys.exit(0)
    check, d = sys.argv[1], sys.argv[2]
    try:
        CHECKS[check](d, sys.argv[3] if len(sys.argv) > 3 else None)
    except Miss as e:
        print(f"MISS {check}: {e}")
        sys.exit(1)
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"MISS {check}: inputs unreadable: {e!r}")
        sys.exit(1)
