//! What Python stacks at waits cost: two Python threads hand a token back
//! and forth through two `queue.Queue`s (each pass a blocking `get`, a
//! wake-up and a GIL hand-off: tens of thousands of waits a second, the
//! case the per-thread pacing bounds), untraced, under `asys profile
//! --cpuctxsw process-tree -s process-tree -b none --python-sampling true`
//! with a binary whose switch program takes no wait stacks
//! (`ASYS_BENCH_BASE_BIN`, say a build of the commit before them) and with
//! this tree's (`ASYS_BENCH_BIN`, or the release build), interleaved round
//! by round, with Debian's /usr/bin/python3.11. Medians of wall and CPU
//! time (the workload's and the tracer's together) and ratios are printed
//! and written to target/bench/python-waits-overhead.json.
use std::{path::PathBuf, process::Command};

const WORKLOAD: &str = r#"
import queue, sys, threading, time
n = int(sys.argv[1])
ping, pong = queue.Queue(), queue.Queue()
def echo():
    for _ in range(n):
        pong.put(ping.get())
t = threading.Thread(target=echo)
t0 = time.perf_counter()
t.start()
for i in range(n):
    ping.put(i)
    pong.get()
t.join()
print("work_ms %.3f" % ((time.perf_counter() - t0) * 1e3), flush=True)
"#;

const PYTHON: &str = "/usr/bin/python3.11";

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let passes = args.get(1).map(String::as_str).unwrap_or("20000");
    let asys = match std::env::var_os("ASYS_BENCH_BIN") {
        Some(p) => PathBuf::from(p),
        None => {
            crate::setup::setup()?;
            crate::build_asys(true)?
        }
    };
    let base = std::env::var_os("ASYS_BENCH_BASE_BIN").map(PathBuf::from);
    anyhow::ensure!(
        std::path::Path::new(PYTHON).exists(),
        "{PYTHON} is missing (Debian: apt-get install python3.11)"
    );
    let dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let script = dir.join("python-pingpong.py");
    std::fs::write(&script, WORKLOAD)?;
    let traced = |bin: &PathBuf| -> anyhow::Result<(f64, f64)> {
        let (o, cpu) = crate::bench::output_with_cpu(
            Command::new(bin)
                .args(["profile", "-t", "none", "--cpuctxsw", "process-tree"])
                .args(["-s", "process-tree", "-b", "none", "-f", "true", "-o"])
                .arg(dir.join("bench-python-waits"))
                .args(["--python-sampling", "true", PYTHON])
                .arg(&script)
                .arg(passes),
        )?;
        Ok((crate::bench::value(&o, "work_ms ", "asys")?, cpu))
    };
    // (wall ms, CPU ms) per run kind: untraced, without, with wait stacks.
    let mut runs: [(Vec<f64>, Vec<f64>); 3] = Default::default();
    for round in 0..rounds {
        let (o, cpu) =
            crate::bench::output_with_cpu(Command::new(PYTHON).arg(&script).arg(passes))?;
        runs[0]
            .0
            .push(crate::bench::value(&o, "work_ms ", "untraced")?);
        runs[0].1.push(cpu);
        if let Some(base) = &base {
            let (w, c) = traced(base)?;
            runs[1].0.push(w);
            runs[1].1.push(c);
        }
        let (w, c) = traced(&asys)?;
        runs[2].0.push(w);
        runs[2].1.push(c);
        eprintln!(
            "round {}: wall ms untraced {:.1}, without {:.1}, with wait stacks {:.1}",
            round + 1,
            runs[0].0[round],
            runs[1].0.get(round).copied().unwrap_or(f64::NAN),
            runs[2].0[round]
        );
    }
    use crate::bench::median;
    let m: Vec<(f64, f64)> = runs
        .iter_mut()
        .map(|(w, c)| match w.is_empty() {
            true => (f64::NAN, f64::NAN),
            false => (median(w), median(c)),
        })
        .collect();
    println!(
        "{passes} queue ping-pongs between two Python threads (medians of {rounds} interleaved rounds)"
    );
    println!("                                   wall ms   x untraced   CPU ms   x untraced");
    for (i, what) in ["untraced", "asys, no wait stacks", "asys, wait stacks"]
        .iter()
        .enumerate()
    {
        println!(
            "  {what:<32} {:8.1}   {:8.3}   {:8.1}   {:8.3}",
            m[i].0,
            m[i].0 / m[0].0,
            m[i].1,
            m[i].1 / m[0].1
        );
    }
    println!(
        "  wait stacks add: wall x{:.3}, CPU x{:.3} (with against without)",
        m[2].0 / m[1].0,
        m[2].1 / m[1].1
    );
    let num = |v: f64| match v.is_finite() {
        true => format!("{v:.2}"),
        false => "null".into(),
    };
    std::fs::write(
        dir.join("python-waits-overhead.json"),
        format!(
            "{{\"rounds\":{rounds},\"passes\":{passes},\"untraced_ms\":{},\"without_ms\":{},\"with_ms\":{},\"cpu_untraced_ms\":{},\"cpu_without_ms\":{},\"cpu_with_ms\":{}}}\n",
            num(m[0].0),
            num(m[1].0),
            num(m[2].0),
            num(m[0].1),
            num(m[1].1),
            num(m[2].1)
        ),
    )?;
    Ok(())
}
