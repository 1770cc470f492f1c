//! Wake-up recording overhead benchmark: two threads pass a byte back and
//! forth through two pipes (each pass a wake-up and a context switch) a
//! fixed number of times and print how long it took. It runs untraced,
//! under `asys profile -t none --cpuctxsw process-tree` (sched_switch and
//! sched_waking programs, both filtered in the kernel to the traced
//! process), and under `perf record -e sched:sched_switch -e
//! sched:sched_waking` of the same process, interleaved round by round.
//! Medians and ratios are printed and written to
//! target/bench/waits-overhead.json. `ASYS_BENCH_BIN` runs another asys
//! binary instead of building the release one.
use std::process::Command;

const WORKLOAD: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static int ping[2], pong[2];
static long n;
static void *echo(void *arg) {
    char c;
    (void)arg;
    for (long i = 0; i < n; i++) {
        if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) exit(1);
    }
    return NULL;
}
int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 50000;
    if (pipe(ping) || pipe(pong)) return 1;
    pthread_t t;
    pthread_create(&t, NULL, echo, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    char c = 'x';
    for (long i = 0; i < n; i++) {
        if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    printf("work_ms %.3f\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
    return 0;
}
"#;

fn work_ms(out: &std::process::Output, what: &str) -> anyhow::Result<f64> {
    crate::bench::value(out, "work_ms ", what)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let passes = "50000";
    let asys = match std::env::var_os("ASYS_BENCH_BIN") {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            crate::setup::setup()?;
            crate::build_asys(true)?
        }
    };
    crate::ensure_command("perf", "linux-perf", "the peer tool")?;
    let dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let src = dir.join("pingpong.c");
    std::fs::write(&src, WORKLOAD)?;
    let bin = dir.join("pingpong");
    crate::run(
        Command::new("cc")
            .args(["-O1", "-pthread", "-o"])
            .arg(&bin)
            .arg(&src),
    )?;
    let (mut base, mut ours, mut peer) = (Vec::new(), Vec::new(), Vec::new());
    // CPU ms of each run, the workload's and the tracer's together.
    let mut cpu: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        let (o, c) = crate::bench::output_with_cpu(Command::new(&bin).arg(passes))?;
        base.push(work_ms(&o, "untraced")?);
        cpu[0].push(c);
        let (o, c) = crate::bench::output_with_cpu(
            Command::new(&asys)
                .args([
                    "profile",
                    "-t",
                    "none",
                    "-s",
                    "none",
                    "--cpuctxsw",
                    "process-tree",
                ])
                .args(["-f", "true", "-o"])
                .arg(dir.join("bench-waits"))
                .arg(&bin)
                .arg(passes),
        )?;
        ours.push(work_ms(&o, "asys --cpuctxsw process-tree")?);
        cpu[1].push(c);
        let (o, c) = crate::bench::output_with_cpu(
            Command::new("perf")
                .args([
                    "record",
                    "-q",
                    "-e",
                    "sched:sched_switch",
                    "-e",
                    "sched:sched_waking",
                ])
                .arg("-o")
                .arg(dir.join("bench-waits.perf"))
                .arg("--")
                .arg(&bin)
                .arg(passes),
        )?;
        peer.push(work_ms(&o, "perf record")?);
        cpu[2].push(c);
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
        "{passes} pipe ping-pongs (a wake-up and a switch each way), ms (medians of {rounds} interleaved rounds)"
    );
    println!("  untraced {b:.1}");
    println!(
        "  asys --cpuctxsw process-tree (switches + wake-ups)  {a:.1}  (x{:.3})",
        a / b
    );
    println!(
        "  perf record sched_switch + sched_waking            {p:.1}  (x{:.3})",
        p / b
    );
    println!(
        "  overhead ratio asys/perf: {:.2}",
        (a - b).max(0.0) / (p - b).max(f64::EPSILON)
    );
    let c: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
    println!(
        "CPU time of the workload and the tracer together, ms (medians): untraced {:.1}, asys {:.1} (x{:.3}), perf {:.1} (x{:.3}); CPU overhead ratio asys/perf: {:.2}",
        c[0],
        c[1],
        c[1] / c[0],
        c[2],
        c[2] / c[0],
        (c[1] - c[0]).max(0.0) / (c[2] - c[0]).max(f64::EPSILON)
    );
    std::fs::write(
        dir.join("waits-overhead.json"),
        format!(
            "{{\"rounds\":{rounds},\"untraced_ms\":{b:.2},\"asys_ms\":{a:.2},\"perf_ms\":{p:.2},\"cpu_untraced_ms\":{:.2},\"cpu_asys_ms\":{:.2},\"cpu_perf_ms\":{:.2}}}\n",
            c[0], c[1], c[2]
        ),
    )?;
    Ok(())
}
