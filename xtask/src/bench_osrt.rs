//! osrt overhead benchmark, in one run, interleaved round by round so that
//! the machine's noise hits all alike:
//!
//! 1. Per call: one small C program calls one function in a loop and
//!    prints ns per call: an uncontended `pthread_mutex_lock` (with its
//!    unlock), two threads taking turns on one mutex (`contended`: locks that
//!    wait), `getppid`, a 1-byte `read` of /dev/zero and `usleep(0)`. Each
//!    runs untraced, under `asys profile -t osrt -s none --cpuctxsw none`
//!    (osrt alone), untraced while such an asys traces another process (what
//!    the rest of the machine pays), under an earlier asys given with
//!    `--before PATH` (e.g. a build of main, whose osrt put uprobes on the
//!    pthread lock functions), under `strace -c -f` and under `perf trace
//!    -s`.
//! 2. PyTorch, if target/bench/torch-venv has it (`--no-torch` skips it): a
//!    small CPU training loop (a conv net, a DataLoader with two forked
//!    workers) that times each step itself (`time.monotonic_ns`) and its
//!    start-up (from just before the tool was started to its first step),
//!    untraced, under asys -t osrt, under asys -t none (asys's own start-up,
//!    which osrt's is the part above), under the earlier asys and under
//!    `strace -f`.
//!
//! Printed: medians, each tool's ratio to untraced (of the medians, and the
//! median of each round's ratio), the overhead (minus untraced), and asys
//! against the earlier asys and the peers; written to
//! target/bench/osrt-overhead.json.
//!
//! strace and perf trace see system calls only: the uncontended lock loop
//! makes none, so they add nothing to it; asys reports lock waits, from the
//! futex system calls, and so adds nothing there either.
use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
};

const WORKLOAD: &str = r#"
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter, counter2;
/* Works with the lock held and without, so that the two threads meet at
   the lock and one of them now and then waits in the kernel (a futex
   wait): about 500 in 200,000 turns here. */
static void *turns(void *n) {
    for (long i = 0; i < (long)n; i++) {
        pthread_mutex_lock(&shared);
        for (int k = 0; k < 200; k++) counter++;
        pthread_mutex_unlock(&shared);
        for (int k = 0; k < 200; k++) counter2++;
    }
    return 0;
}
int main(int argc, char **argv) {
    const char *what = argv[1];
    long n = atol(argv[2]);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int fd = open("/dev/zero", O_RDONLY);
    char c;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (!strcmp(what, "mutex")) {
        for (long i = 0; i < n; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
    } else if (!strcmp(what, "contended")) {
        pthread_t t;
        pthread_create(&t, 0, turns, (void *)(n / 2));
        turns((void *)(n - n / 2));
        pthread_join(t, 0);
    } else if (!strcmp(what, "getppid")) {
        for (long i = 0; i < n; i++) getppid();
    } else if (!strcmp(what, "read")) {
        for (long i = 0; i < n; i++) { if (read(fd, &c, 1) != 1) return 1; }
    } else if (!strcmp(what, "usleep0")) {
        for (long i = 0; i < n; i++) usleep(0);
    } else {
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("ns_per_call %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
"#;

/// Loop, calls per run.
const LOOPS: [(&str, &str); 5] = [
    ("mutex", "20000"),
    ("contended", "200000"),
    ("getppid", "50000"),
    ("read", "50000"),
    ("usleep0", "5000"),
];

/// A small CPU training step, timed by itself: the median step (after five
/// warm-up steps) and the time from `ASYS_BENCH_T0` (CLOCK_MONOTONIC, ns,
/// taken just before the tool started) to the first step.
const TORCH: &str = r#"
import os, sys, time
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

def main():
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    data = TensorDataset(torch.randn(32 * steps, 3, 32, 32), torch.randint(0, 10, (32 * steps,)))
    loader = DataLoader(data, batch_size=32, num_workers=2)
    times, first = [], None
    it = iter(loader)
    for _ in range(steps):
        s = time.monotonic_ns()
        if first is None:
            first = s
        x, y = next(it)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.monotonic_ns() - s)
    warm = sorted(times[5:])
    print("ns_per_call", warm[len(warm) // 2])
    print("startup_ns", first - int(os.environ["ASYS_BENCH_T0"]))

if __name__ == "__main__":
    main()
"#;

/// Training steps per PyTorch run.
const TORCH_STEPS: &str = "40";

/// The loop untraced while asys traces another process with `-t osrt`:
/// what the rest of the machine pays (the system-call tracepoints run for
/// every process).
const BESIDE: &str = "beside asys";
const ASYS: &str = "asys -t osrt";
const BEFORE: &str = "asys before";
const UNTRACED: &str = "untraced";
const NONE: &str = "asys -t none";

/// asys with osrt alone: no CPU sampling, no context switches.
const OSRT_ALONE: [&str; 9] = [
    "profile",
    "-t",
    "osrt",
    "-s",
    "none",
    "--cpuctxsw",
    "none",
    "-f",
    "true",
];

/// An `asys profile -t osrt` of a sleeping process, running, and its
/// standard error (kept open: asys writes to it until it ends).
struct Tracing(
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
);

impl Tracing {
    /// Interrupts it (it writes its report) and waits for it.
    fn stop(mut self) -> anyhow::Result<()> {
        // SAFETY: kill has no memory effects; the pid is our child's.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        std::io::copy(&mut self.1, &mut std::io::sink())?;
        self.0.wait()?;
        Ok(())
    }
}

/// Starts asys tracing `sleep 600` and returns once it says it traces.
fn tracing_another(asys: &Path, dir: &Path) -> anyhow::Result<Tracing> {
    use std::io::BufRead as _;
    let mut child = Command::new(asys)
        .args(OSRT_ALONE)
        .arg("-o")
        .arg(dir.join("bench-osrt-beside"))
        .args(["sleep", "600"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let mut err = std::io::BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    err.read_line(&mut line)?;
    anyhow::ensure!(line.starts_with("asys: tracing"), "asys said {line:?}");
    Ok(Tracing(child, err))
}

/// CLOCK_MONOTONIC now, in ns (what Python's `time.monotonic_ns` reads).
fn monotonic_ns() -> u64 {
    // SAFETY: an all-zero timespec is valid for clock_gettime to fill.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a timespec of our own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Medians of each tool's values over the rounds, with the untraced one
/// first.
struct Results {
    what: String,
    unit: &'static str,
    tools: Vec<&'static str>,
    values: Vec<Vec<f64>>,
}

impl Results {
    fn new(what: &str, unit: &'static str, tools: &[&'static str]) -> Self {
        Self {
            what: what.to_string(),
            unit,
            tools: tools.to_vec(),
            values: vec![Vec::new(); tools.len()],
        }
    }

    fn medians(&self) -> Vec<f64> {
        self.values
            .iter()
            .map(|v| crate::bench::median(&mut v.clone()))
            .collect()
    }

    fn by_name(&self, name: &str) -> Option<usize> {
        self.tools.iter().position(|n| *n == name)
    }

    /// Medians, ratios to untraced and overheads; asys against the earlier
    /// asys and each peer.
    fn print(&self) {
        let med = self.medians();
        let base = med[0];
        let over = |t: usize| (med[t] - base).max(0.0);
        println!("  {}: {UNTRACED} {base:.1} {}", self.what, self.unit);
        for (t, name) in self.tools.iter().enumerate().skip(1) {
            // Each round's ratio to that round's untraced run, then their
            // median: steadier than the ratio of medians where the machine's
            // load changes between rounds.
            let mut paired: Vec<f64> = self.values[t]
                .iter()
                .zip(&self.values[0])
                .map(|(v, u)| v / u)
                .collect();
            println!(
                "    {name:<14} {:>12.1}  x{:<6.3} (paired x{:.3}) overhead {:>10.1}",
                med[t],
                med[t] / base,
                crate::bench::median(&mut paired),
                over(t)
            );
        }
        let Some(ours) = self.by_name(ASYS) else {
            return;
        };
        for peer in [NONE, BEFORE, "strace -c -f", "strace -f", "perf trace -s"] {
            match self.by_name(peer) {
                // Under a nanosecond: the peer does not see these calls.
                Some(p) if over(p) < 1.0 => {
                    println!("    asys overhead / {peer} overhead: n/a ({peer} adds nothing)")
                }
                Some(p) => println!(
                    "    asys overhead / {peer} overhead: {:.3}",
                    over(ours) / over(p)
                ),
                None => {}
            }
        }
    }

    fn json(&self) -> String {
        let med = self.medians();
        format!(
            "\"{}\":{{{}}}",
            self.what,
            self.tools
                .iter()
                .zip(&med)
                .map(|(name, m)| format!("\"{name}\":{m:.1}"))
                .collect::<Vec<_>>()
                .join(",")
        )
    }
}

/// Each tool: its name and the words before the program.
type Tools = Vec<(&'static str, Vec<OsString>)>;

/// What the rounds run.
struct Bench {
    /// This tree's asys, copied.
    asys: PathBuf,
    dir: PathBuf,
    /// The compiled loops.
    bin: PathBuf,
    python: PathBuf,
    torch_script: PathBuf,
    /// Whether the PyTorch runs are made.
    torch: bool,
    tools: Tools,
    torch_tools: Tools,
}

/// The results of the rounds.
struct Rounds {
    loops: Vec<Results>,
    steps: Results,
    startup: Results,
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut rounds = 3usize;
    let mut before: Option<PathBuf> = None;
    let mut torch = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--before" => before = it.next().map(PathBuf::from),
            "--no-torch" => torch = false,
            n => rounds = n.parse()?,
        }
    }
    let b = set_up(before.as_ref(), torch)?;
    let names = |tools: &[(&'static str, Vec<OsString>)]| -> Vec<&'static str> {
        tools.iter().map(|(n, _)| *n).collect()
    };
    let mut m = Rounds {
        loops: LOOPS
            .iter()
            .map(|(what, _)| Results::new(what, "ns per call", &names(&b.tools)))
            .collect(),
        steps: Results::new("torch step", "ns per step", &names(&b.torch_tools)),
        startup: Results::new(
            "torch start-up",
            "ns to the first step",
            &names(&b.torch_tools),
        ),
    };
    for round in 0..rounds {
        loops_round(&b, &mut m.loops, round)?;
        if b.torch {
            torch_round(&b, &mut m, round)?;
        }
    }
    print_medians(&b, &m, rounds)
}

/// Copies asys, compiles the loops, writes the PyTorch script and lists
/// the tools.
fn set_up(before: Option<&PathBuf>, torch: bool) -> anyhow::Result<Bench> {
    // A debug asys: the cost measured is the kernel's (tracepoints) and the
    // event reader's.
    let built = crate::build_asys(false)?;
    let dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    // A copy, with its injection library beside it: a build in the same
    // target folder while the bench runs replaces the binary under it.
    let own = dir.join("osrt-asys");
    std::fs::create_dir_all(&own)?;
    let asys = own.join("asys");
    std::fs::copy(&built, &asys)?;
    let inject = "libasys_inject.so";
    if let Some(lib) = built.parent().map(|d| d.join(inject)) {
        std::fs::copy(lib, own.join(inject))?;
    }
    let src = dir.join("osrt_loop.c");
    std::fs::write(&src, WORKLOAD)?;
    let bin = dir.join("osrt_loop");
    crate::run(
        Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&bin)
            .arg(&src)
            .arg("-lpthread"),
    )?;
    let python = dir.join("torch-venv/bin/python");
    let torch = torch && python.exists();
    let torch_script = dir.join("osrt_torch.py");
    std::fs::write(&torch_script, TORCH)?;
    let tools = loop_tools(&asys, before, &dir);
    let torch_tools = torch_tools(&asys, before, &dir);
    Ok(Bench {
        asys,
        dir,
        bin,
        python,
        torch_script,
        torch,
        tools,
        torch_tools,
    })
}

/// `asys profile` with osrt alone, its report in `dir`: the words before
/// the program.
fn asys_words(asys: &Path, dir: &Path) -> Vec<OsString> {
    let mut w: Vec<OsString> = vec![asys.into()];
    w.extend(OSRT_ALONE.map(OsString::from));
    w.push("-o".into());
    w.push(dir.join("bench-osrt").into());
    w
}

/// The tools of the loops, untraced first.
fn loop_tools(asys: &Path, before: Option<&PathBuf>, dir: &Path) -> Tools {
    let mut tools: Tools = vec![
        (UNTRACED, Vec::new()),
        (ASYS, asys_words(asys, dir)),
        (BESIDE, Vec::new()),
    ];
    if let Some(before) = before {
        tools.push((BEFORE, asys_words(before, dir)));
    }
    let mut strace: Vec<OsString> = ["strace", "-c", "-f", "-o"].map(OsString::from).into();
    strace.push(dir.join("bench-osrt.strace").into());
    tools.push(("strace -c -f", strace));
    let mut perf: Vec<OsString> = ["perf", "trace", "-s", "-o"].map(OsString::from).into();
    perf.extend([dir.join("bench-osrt.perf").into(), "--".into()]);
    tools.push(("perf trace -s", perf));
    tools
}

/// The tools of the PyTorch runs, untraced first.
fn torch_tools(asys: &Path, before: Option<&PathBuf>, dir: &Path) -> Tools {
    // PyTorch: untraced, asys, the earlier asys, strace (its counting costs
    // a ptrace stop per system call, as -c does).
    // And asys tracing nothing: its own start-up (BPF programs, a stop at
    // each library load), which osrt's is the part above.
    let mut none = asys_words(asys, dir);
    none[3] = "none".into();
    let mut torch_tools: Tools = vec![
        (UNTRACED, Vec::new()),
        (ASYS, asys_words(asys, dir)),
        (NONE, none),
    ];
    if let Some(before) = before {
        torch_tools.push((BEFORE, asys_words(before, dir)));
    }
    let mut strace_f: Vec<OsString> = ["strace", "-f", "-qq", "-o"].map(OsString::from).into();
    strace_f.push(dir.join("bench-osrt-torch.strace").into());
    torch_tools.push(("strace -f", strace_f));
    torch_tools
}

/// One round of every loop under every tool.
fn loops_round(b: &Bench, loops: &mut [Results], round: usize) -> anyhow::Result<()> {
    for (l, (what, n)) in LOOPS.iter().enumerate() {
        for (t, (name, words)) in b.tools.iter().enumerate() {
            let beside = (*name == BESIDE)
                .then(|| tracing_another(&b.asys, &b.dir))
                .transpose()?;
            let program: [OsString; 3] = [b.bin.clone().into(), what.into(), n.into()];
            let o = crate::bench::command(words, &program).output()?;
            if let Some(asys) = beside {
                asys.stop()?;
            }
            let v = crate::bench::value(&o, "ns_per_call ", &format!("{what} under {name}"))?;
            loops[l].values[t].push(v);
        }
        eprintln!(
            "round {} {what}: {}",
            round + 1,
            b.tools
                .iter()
                .enumerate()
                .map(|(t, (name, _))| format!("{name} {:.0}", loops[l].values[t][round]))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// One round of the PyTorch loop under every tool.
fn torch_round(b: &Bench, m: &mut Rounds, round: usize) -> anyhow::Result<()> {
    for (t, (name, words)) in b.torch_tools.iter().enumerate() {
        let program: [OsString; 3] = [
            b.python.clone().into(),
            b.torch_script.clone().into(),
            TORCH_STEPS.into(),
        ];
        let o = crate::bench::command(words, &program)
            .env("ASYS_BENCH_T0", monotonic_ns().to_string())
            .output()?;
        let what = format!("torch under {name}");
        m.steps.values[t].push(crate::bench::value(&o, "ns_per_call ", &what)?);
        m.startup.values[t].push(crate::bench::value(&o, "startup_ns ", &what)?);
    }
    eprintln!(
        "round {} torch: {}",
        round + 1,
        b.torch_tools
            .iter()
            .enumerate()
            .map(|(t, (name, _))| format!(
                "{name} step {:.2} ms, start-up {:.2} s",
                m.steps.values[t][round] / 1e6,
                m.startup.values[t][round] / 1e9
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(())
}

/// The medians, printed and written to osrt-overhead.json.
fn print_medians(b: &Bench, m: &Rounds, rounds: usize) -> anyhow::Result<()> {
    println!(
        "medians of {rounds} interleaved rounds (x: ratio to untraced; overhead: minus untraced)"
    );
    let mut all: Vec<&Results> = m.loops.iter().collect();
    if b.torch {
        all.extend([&m.steps, &m.startup]);
    }
    for r in &all {
        r.print();
    }
    std::fs::write(
        b.dir.join("osrt-overhead.json"),
        format!(
            "{{\"rounds\":{rounds},\"medians\":{{{}}}}}\n",
            all.iter().map(|r| r.json()).collect::<Vec<_>>().join(",")
        ),
    )?;
    Ok(())
}
