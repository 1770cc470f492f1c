//! Wake-up recording overhead benchmark: two threads pass a byte back and
//! forth through two pipes (each pass a wake-up and a context switch) a
//! fixed number of times and print how long it took. It runs untraced,
//! under `asys profile -t none --cpuctxsw process-tree` (sched_switch and
//! sched_waking programs, both filtered in the kernel to the traced
//! process), under `perf record -e sched:sched_switch -e sched:sched_waking`
//! of the same process, and, for kernel stacks, under asys with sampling and
//! switches with `-b none` and with `-b fp` (stacks on switch-outs, wakers
//! and in-kernel samples) against `perf record -g` of the same events,
//! interleaved round by round. Medians of wall time and of CPU time (the
//! workload's and the tracer's together) and ratios are printed and written
//! to target/bench/waits-overhead.json. `ASYS_BENCH_BIN` runs another asys
//! binary instead of building the release one.
use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

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
        Some(p) => PathBuf::from(p),
        None => {
            crate::setup::setup()?;
            crate::build_asys(true)?
        }
    };
    crate::ensure_command("perf", "linux-perf", "the peer tool")?;
    let dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let bin = build_workload(&dir)?;
    let runs = runs(&asys, &dir);
    // Wall ms and CPU ms (workload and tracer together) per run and round.
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); runs.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); runs.len()];
    for round in 0..rounds {
        for (i, (what, line)) in runs.iter().enumerate() {
            let mut cmd = crate::bench::command(line, &[bin.as_os_str(), OsStr::new(passes)]);
            let (o, c) = crate::bench::output_with_cpu(&mut cmd)?;
            wall[i].push(work_ms(&o, what)?);
            cpu[i].push(c);
        }
        eprintln!(
            "round {}: work ms {}",
            round + 1,
            runs.iter()
                .zip(&wall)
                .map(|((w, _), v)| format!("{w} {:.1}", v[round]))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    print_medians(&dir, &runs, &mut wall, &mut cpu, passes, rounds)
}

/// Compiles the ping-pong workload into `dir`.
fn build_workload(dir: &Path) -> anyhow::Result<PathBuf> {
    let src = dir.join("pingpong.c");
    std::fs::write(&src, WORKLOAD)?;
    let bin = dir.join("pingpong");
    crate::run(
        Command::new("cc")
            .args(["-O1", "-pthread", "-o"])
            .arg(&bin)
            .arg(&src),
    )?;
    Ok(bin)
}

/// `asys profile -t none OPTIONS --cpuctxsw process-tree`, its report to
/// `out`.
fn asys_line(asys: &str, options: &[&str], out: String) -> Vec<String> {
    [asys, "profile", "-t", "none"]
        .iter()
        .chain(options)
        .map(|a| a.to_string())
        .chain(["--cpuctxsw", "process-tree", "-f", "true", "-o"].map(String::from))
        .chain([out])
        .collect()
}

/// `perf record -q OPTIONS`, its data to `out`.
fn perf_line(options: &[&str], out: String) -> Vec<String> {
    ["perf", "record", "-q"]
        .iter()
        .chain(options)
        .map(|a| a.to_string())
        .chain(["-o".into(), out, "--".into()])
        .collect()
}

/// The runs, each a command line before the workload's: the untraced one
/// first (the base of every ratio).
fn runs(asys: &Path, dir: &Path) -> Vec<(&'static str, Vec<String>)> {
    let out = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let asys_s = asys.to_string_lossy().into_owned();
    vec![
        ("untraced", vec![]),
        (
            "asys --cpuctxsw process-tree (switches + wake-ups)",
            asys_line(&asys_s, &["-s", "none"], out("bench-waits")),
        ),
        (
            "perf record sched_switch + sched_waking",
            perf_line(
                &["-e", "sched:sched_switch", "-e", "sched:sched_waking"],
                out("bench-waits.perf"),
            ),
        ),
        // Kernel stacks come with stacks (-b fp): on the switch-outs, the
        // wakers and the samples taken in the kernel. The same run with
        // -b none has none, so the two differ by the stacks alone.
        (
            "asys -s process-tree -b none --cpuctxsw process-tree",
            asys_line(
                &asys_s,
                &["-s", "process-tree", "-b", "none"],
                out("bench-waits-nostack"),
            ),
        ),
        (
            "asys -s process-tree -b fp --cpuctxsw process-tree (kernel stacks)",
            asys_line(
                &asys_s,
                &["-s", "process-tree", "-b", "fp"],
                out("bench-waits-stack"),
            ),
        ),
        (
            "perf record -g cpu-clock + sched_switch + sched_waking",
            perf_line(
                &[
                    "-g",
                    "-e",
                    "cpu-clock",
                    "-c",
                    "1000000",
                    "-e",
                    "sched:sched_switch",
                    "-e",
                    "sched:sched_waking",
                ],
                out("bench-waits-g.perf"),
            ),
        ),
    ]
}

/// The medians and ratios, printed and written to waits-overhead.json.
fn print_medians(
    dir: &Path,
    runs: &[(&str, Vec<String>)],
    wall: &mut [Vec<f64>],
    cpu: &mut [Vec<f64>],
    passes: &str,
    rounds: usize,
) -> anyhow::Result<()> {
    use crate::bench::median;
    let w: Vec<f64> = wall.iter_mut().map(|v| median(v)).collect();
    let c: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
    println!(
        "{passes} pipe ping-pongs (a wake-up and a switch each way), medians of {rounds} interleaved rounds:"
    );
    println!("  work ms (x untraced); CPU ms of workload and tracer together (x untraced)");
    let mut json = format!("{{\"rounds\":{rounds}");
    for (i, (what, _)) in runs.iter().enumerate() {
        println!(
            "  {what:<68} {:.1} (x{:.3}); {:.1} (x{:.3})",
            w[i],
            w[i] / w[0],
            c[i],
            c[i] / c[0]
        );
        json.push_str(&format!(
            ",\"{what}\":{{\"wall_ms\":{:.2},\"cpu_ms\":{:.2}}}",
            w[i], c[i]
        ));
    }
    json.push_str("}\n");
    let ratio = |a: usize, p: usize| (c[a] - c[0]).max(0.0) / (c[p] - c[0]).max(f64::EPSILON);
    println!(
        "  CPU overhead ratio asys/perf: switches + wake-ups {:.2}; with stacks {:.2}",
        ratio(1, 2),
        ratio(4, 5)
    );
    println!(
        "  kernel stacks alone (-b fp vs -b none): {:+.1} ms CPU, {:+.1} ms wall",
        c[4] - c[3],
        w[4] - w[3]
    );
    std::fs::write(dir.join("waits-overhead.json"), json)?;
    Ok(())
}
