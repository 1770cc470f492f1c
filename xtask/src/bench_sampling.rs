//! CPU sampling overhead benchmark: a CPU-bound program does a fixed amount
//! of work (nested calls, no frame pointers) and prints how long it took;
//! it runs untraced, under `asys profile -t none -s process-tree` (1 kHz,
//! DWARF stacks: an 8 KiB user stack copy per sample) and under `perf record`
//! with the same period and the same stack copy (`-e cpu-clock -c 1000000
//! --call-graph dwarf,8192`), interleaved round by round. Medians and ratios
//! are printed and written to target/bench/sampling-overhead.json.
use std::process::Command;

pub(crate) const WORKLOAD: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) unsigned long leaf(unsigned long x) {
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005UL + i;
    return x;
}
__attribute__((noinline)) unsigned long middle(unsigned long x) {
    for (int i = 0; i < 100; i++) x = leaf(x);
    return x;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    unsigned long x = 1;
    for (long i = 0; i < n; i++) x = middle(x);
    sink = x;
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("work_ms %.3f\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
    return 0;
}
"#;

fn work_ms(out: &std::process::Output, what: &str) -> anyhow::Result<f64> {
    crate::bench::value(out, "work_ms ", what)
}

fn ensure_perf() -> anyhow::Result<()> {
    crate::ensure_command("perf", "linux-perf", "the peer tool")
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let iterations = "20000";
    crate::setup::setup()?;
    let asys = crate::build_asys(true)?;
    ensure_perf()?;
    let dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let src = dir.join("spin.c");
    std::fs::write(&src, WORKLOAD)?;
    let bin = dir.join("spin");
    crate::run(
        Command::new("cc")
            .args(["-O1", "-fomit-frame-pointer", "-o"])
            .arg(&bin)
            .arg(&src),
    )?;
    let (mut base, mut ours, mut peer) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let o = Command::new(&bin).arg(iterations).output()?;
        base.push(work_ms(&o, "untraced")?);
        let o = Command::new(&asys)
            .args(["profile", "-t", "none", "-s", "process-tree", "-b", "dwarf"])
            .args(["--sample-period", "1000000", "-f", "true", "-o"])
            .arg(dir.join("bench-sampling"))
            .arg(&bin)
            .arg(iterations)
            .output()?;
        ours.push(work_ms(&o, "asys -s process-tree")?);
        let o = Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-c", "1000000"])
            .args(["--call-graph", "dwarf,8192", "-o"])
            .arg(dir.join("bench-sampling.perf"))
            .arg("--")
            .arg(&bin)
            .arg(iterations)
            .output()?;
        peer.push(work_ms(&o, "perf record")?);
        eprintln!(
            "round {}: work ms untraced {:.1}, asys {:.1}, perf {:.1}",
            round + 1,
            base[round],
            ours[round],
            peer[round]
        );
    }
    use crate::bench::median;
    let (b, a, p) = (median(&mut base), median(&mut ours), median(&mut peer));
    println!(
        "CPU-bound work under 1 kHz sampling with 8 KiB stack copies, ms (medians of {rounds} interleaved rounds)"
    );
    println!("  untraced {b:.1}");
    println!("  asys -s process-tree -b dwarf   {a:.1}  (x{:.3})", a / b);
    println!("  perf record --call-graph dwarf  {p:.1}  (x{:.3})", p / b);
    println!(
        "  overhead ratio asys/perf: {:.2}",
        (a - b).max(0.0) / (p - b).max(f64::EPSILON)
    );
    std::fs::write(
        dir.join("sampling-overhead.json"),
        format!(
            "{{\"rounds\":{rounds},\"untraced_ms\":{b:.2},\"asys_ms\":{a:.2},\"perf_ms\":{p:.2}}}\n"
        ),
    )?;
    Ok(())
}
