//! Python sampling overhead benchmark: a CPU-bound Python program (nested
//! calls) does a fixed amount of work and prints how long it took
//! (`time.perf_counter`); it runs untraced, under `asys profile -t none -s
//! process-tree -b dwarf` without and with `--python-sampling true` (1 kHz),
//! and under py-spy (`py-spy record --rate 1000`, pinned from PyPI into
//! target/bench/pyspy-venv), interleaved round by round, all with Debian's
//! /usr/bin/python3.11. Medians and ratios are printed and written to
//! target/bench/python-overhead.json.
use std::{path::PathBuf, process::Command};

const PY_SPY: &str = "py-spy==0.4.3";

const WORKLOAD: &str = r#"
import sys, time
def leaf(x):
    for i in range(100):
        x = (x * 1103515245 + i) & 0xFFFFFFFF
    return x
def middle(x):
    for _ in range(10):
        x = leaf(x)
    return x
n = int(sys.argv[1])
t0 = time.perf_counter()
x = 1
for _ in range(n):
    x = middle(x)
print("work_ms %.3f" % ((time.perf_counter() - t0) * 1e3), flush=True)
"#;

const PYTHON: &str = "/usr/bin/python3.11";

/// A venv with py-spy from PyPI; its py-spy.
fn py_spy() -> anyhow::Result<PathBuf> {
    let env = crate::target_dir().join("bench/pyspy-venv");
    let bin = env.join("bin/py-spy");
    if !bin.exists() {
        // Installed again even where the stamp says it is there.
        let _ = std::fs::remove_file(env.join(".asys-packages"));
    }
    crate::venv::ensure(&env, &[PY_SPY], crate::venv::Deps::Resolved)?;
    Ok(bin)
}

fn work_ms(out: &std::process::Output, what: &str) -> anyhow::Result<f64> {
    crate::bench::value(out, "work_ms ", what)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    // About 1.5 s of work (release CPython 3.11 on the 2-core VM): at 3000
    // (0.2 s) the round-to-round spread on a loaded machine was ±20 %, larger
    // than any overhead measured.
    let iterations = args.get(1).map(String::as_str).unwrap_or("20000");
    crate::setup::setup()?;
    let asys = crate::build_asys(true)?;
    let spy = py_spy()?;
    anyhow::ensure!(
        std::path::Path::new(PYTHON).exists(),
        "{PYTHON} is missing (Debian: apt-get install python3.11)"
    );
    let dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let script = dir.join("python-spin.py");
    std::fs::write(&script, WORKLOAD)?;
    let asys_run = |python: bool| -> anyhow::Result<(std::process::Output, f64)> {
        crate::bench::output_with_cpu(
            Command::new(&asys)
                .args(["profile", "-t", "none", "-s", "process-tree", "-b", "dwarf"])
                .args(["--sample-period", "1000000", "-f", "true", "-o"])
                .arg(dir.join("bench-python"))
                .args(["--python-sampling", if python { "true" } else { "false" }])
                .arg(PYTHON)
                .arg(&script)
                .arg(iterations),
        )
    };
    let (mut base, mut native, mut ours, mut peer) = (vec![], vec![], vec![], vec![]);
    // CPU ms of each run: the workload's and the tracer's together.
    let mut cpu: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds {
        let (o, c) =
            crate::bench::output_with_cpu(Command::new(PYTHON).arg(&script).arg(iterations))?;
        base.push(work_ms(&o, "untraced")?);
        cpu[0].push(c);
        let (o, c) = asys_run(false)?;
        native.push(work_ms(&o, "asys -s")?);
        cpu[1].push(c);
        let (o, c) = asys_run(true)?;
        ours.push(work_ms(&o, "asys -s --python-sampling")?);
        cpu[2].push(c);
        let (o, c) = crate::bench::output_with_cpu(
            Command::new(&spy)
                .args(["record", "--rate", "1000", "--format", "raw", "-o"])
                .arg(dir.join("bench-python.pyspy"))
                .arg("--")
                .arg(PYTHON)
                .arg(&script)
                .arg(iterations),
        )?;
        peer.push(work_ms(&o, "py-spy record")?);
        cpu[3].push(c);
        eprintln!(
            "round {}: work ms untraced {:.1}, asys -s {:.1}, asys --python-sampling {:.1}, py-spy {:.1}",
            round + 1,
            base[round],
            native[round],
            ours[round],
            peer[round]
        );
    }
    use crate::bench::median;
    let (b, n, a, p) = (
        median(&mut base),
        median(&mut native),
        median(&mut ours),
        median(&mut peer),
    );
    println!(
        "CPU-bound Python work under 1 kHz sampling, ms (medians of {rounds} interleaved rounds)"
    );
    println!("  untraced {b:.1}");
    println!(
        "  asys -s process-tree -b dwarf                 {n:.1}  (x{:.3})",
        n / b
    );
    println!(
        "  asys -s ... --python-sampling true            {a:.1}  (x{:.3})",
        a / b
    );
    println!(
        "  py-spy record --rate 1000                     {p:.1}  (x{:.3})",
        p / b
    );
    println!(
        "  overhead ratio asys --python-sampling / py-spy: {:.2}",
        (a - b).max(0.0) / (p - b).max(f64::EPSILON)
    );
    let c: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
    println!("CPU time of the workload and the tracer together, ms (medians)");
    println!("  untraced {:.1}", c[0]);
    for (i, what) in [
        (1, "asys -s process-tree -b dwarf"),
        (2, "asys -s ... --python-sampling true"),
        (3, "py-spy record --rate 1000"),
    ] {
        println!("  {what:<45} {:.1}  (x{:.3})", c[i], c[i] / c[0]);
    }
    println!(
        "  CPU overhead ratio asys --python-sampling / py-spy: {:.2}; of the Python stacks alone (vs asys -s): {:.2}",
        (c[2] - c[0]).max(0.0) / (c[3] - c[0]).max(f64::EPSILON),
        (c[2] - c[1]).max(0.0) / (c[3] - c[0]).max(f64::EPSILON)
    );
    std::fs::write(
        dir.join("python-overhead.json"),
        format!(
            "{{\"rounds\":{rounds},\"untraced_ms\":{b:.2},\"asys_ms\":{n:.2},\"asys_python_ms\":{a:.2},\"py_spy_ms\":{p:.2},\"cpu_untraced_ms\":{:.2},\"cpu_asys_ms\":{:.2},\"cpu_asys_python_ms\":{:.2},\"cpu_py_spy_ms\":{:.2}}}\n",
            c[0], c[1], c[2], c[3]
        ),
    )?;
    Ok(())
}
