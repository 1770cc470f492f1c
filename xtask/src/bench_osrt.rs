//! osrt overhead benchmark: one small C program calls one function in a
//! loop and prints ns per call: an uncontended `pthread_mutex_lock` (with
//! its unlock), `getppid`, a 1-byte `read` of /dev/zero and `usleep(0)`. Each
//! runs untraced, under `asys profile -t osrt -s none --cpuctxsw none`
//! (osrt alone), untraced while such an asys traces another process (what
//! the rest of the machine pays), under an earlier asys given with `--before PATH` (e.g. a
//! build of main, whose osrt was uprobes on about 50 libc functions), under
//! `strace -c -f` and under `perf trace -s`, all interleaved round by round
//! so that the machine's noise hits all alike. Printed: median ns per call
//! and the overhead per call (minus untraced), with the ratio to strace's and
//! perf trace's; written to target/bench/osrt-overhead.json.
//!
//! strace and perf trace see system calls only: the lock loop makes none,
//! so they add nothing to it, while asys probes the lock (that is the point
//! of an osrt item: nsys reports pthread locks too).
use std::{ffi::OsString, path::PathBuf, process::Command};

const WORKLOAD: &str = r#"
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
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
const LOOPS: [(&str, &str); 4] = [
    ("mutex", "20000"),
    ("getppid", "50000"),
    ("read", "50000"),
    ("usleep0", "5000"),
];

/// The loop untraced while asys traces another process with `-t osrt`:
/// what the rest of the machine pays (the system-call tracepoints run for
/// every process; the lock probes are scoped to the traced one).
const BESIDE: &str = "beside asys";

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
fn tracing_another(asys: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<Tracing> {
    use std::io::BufRead as _;
    let mut child = Command::new(asys)
        .args([
            "profile",
            "-t",
            "osrt",
            "-s",
            "none",
            "--cpuctxsw",
            "none",
            "-f",
            "true",
        ])
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

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut rounds = 3usize;
    let mut before: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--before" => before = it.next().map(PathBuf::from),
            n => rounds = n.parse()?,
        }
    }
    // A debug asys: the cost measured is the kernel's (probes, tracepoints).
    let asys = crate::build_asys(false)?;
    let dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
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
    // Each tool: the words before the program.
    let asys_words = |asys: &PathBuf| -> Vec<OsString> {
        let mut w: Vec<OsString> = vec![asys.into()];
        w.extend(
            [
                "profile",
                "-t",
                "osrt",
                "-s",
                "none",
                "--cpuctxsw",
                "none",
                "-f",
                "true",
                "-o",
            ]
            .map(OsString::from),
        );
        w.push(dir.join("bench-osrt").into());
        w
    };
    let mut tools: Vec<(&str, Vec<OsString>)> = vec![
        ("untraced", Vec::new()),
        ("asys -t osrt", asys_words(&asys)),
        (BESIDE, Vec::new()),
    ];
    if let Some(before) = &before {
        tools.push(("asys before", asys_words(before)));
    }
    let mut strace: Vec<OsString> = ["strace", "-c", "-f", "-o"].map(OsString::from).into();
    strace.push(dir.join("bench-osrt.strace").into());
    tools.push(("strace -c -f", strace));
    let mut perf: Vec<OsString> = ["perf", "trace", "-s", "-o"].map(OsString::from).into();
    perf.extend([dir.join("bench-osrt.perf").into(), "--".into()]);
    tools.push(("perf trace -s", perf));
    let cmd = |words: &[OsString]| {
        let mut c = Command::new(
            words
                .first()
                .map(OsString::as_os_str)
                .unwrap_or(bin.as_os_str()),
        );
        if !words.is_empty() {
            c.args(&words[1..]).arg(&bin);
        }
        c
    };
    // ns[loop][tool] over rounds
    let mut ns = vec![vec![Vec::new(); tools.len()]; LOOPS.len()];
    for round in 0..rounds {
        for (l, (what, n)) in LOOPS.iter().enumerate() {
            for (t, (name, words)) in tools.iter().enumerate() {
                let beside = (*name == BESIDE)
                    .then(|| tracing_another(&asys, &dir))
                    .transpose()?;
                let o = cmd(words).args([what, n]).output()?;
                if let Some(asys) = beside {
                    asys.stop()?;
                }
                let v = crate::bench::value(&o, "ns_per_call ", &format!("{what} under {name}"))?;
                ns[l][t].push(v);
            }
            eprintln!(
                "round {} {what}: {}",
                round + 1,
                tools
                    .iter()
                    .enumerate()
                    .map(|(t, (name, _))| format!("{name} {:.0}", ns[l][t][round]))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    println!("ns per call, medians of {rounds} interleaved rounds (overhead = minus untraced)");
    let mut json = Vec::new();
    for (l, (what, _)) in LOOPS.iter().enumerate() {
        let med: Vec<f64> = ns[l].iter_mut().map(|v| crate::bench::median(v)).collect();
        let base = med[0];
        let over = |t: usize| (med[t] - base).max(0.0);
        let by_name = |name: &str| tools.iter().position(|(n, _)| *n == name);
        println!("  {what}: untraced {base:.1}");
        for (t, (name, _)) in tools.iter().enumerate().skip(1) {
            println!(
                "    {name:<14} {:>10.1}  overhead {:>10.1}",
                med[t],
                over(t)
            );
        }
        let ours = over(1);
        for peer in ["strace -c -f", "perf trace -s", "asys before"] {
            match by_name(peer) {
                // Under a nanosecond: the peer does not see these calls.
                Some(p) if over(p) < 1.0 => {
                    println!("    asys overhead / {peer} overhead: n/a ({peer} adds nothing)")
                }
                Some(p) => println!("    asys overhead / {peer} overhead: {:.2}", ours / over(p)),
                None => {}
            }
        }
        json.push(format!(
            "\"{what}\":{{{}}}",
            tools
                .iter()
                .enumerate()
                .map(|(t, (name, _))| format!("\"{name}\":{:.1}", med[t]))
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    std::fs::write(
        dir.join("osrt-overhead.json"),
        format!(
            "{{\"rounds\":{rounds},\"ns_per_call\":{{{}}}}}\n",
            json.join(",")
        ),
    )?;
    Ok(())
}
