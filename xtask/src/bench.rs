//! Probe overhead benchmark (../shared/notes/probe-costs.md has the method):
//! the sample `call_loop` calls one cheap runtime function N times and prints
//! ns per call; it runs untraced, under `asys profile -t hggc`, and under
//! bpftrace with an entry and a return probe on the same function, interleaved
//! in one run so the machine's noise hits all three alike. Reports medians and
//! ratios, and writes target/bench/probe-overhead.json.
use std::process::Command;

use anyhow::{Context as _, bail};

fn ns_per_call(out: &std::process::Output, what: &str) -> anyhow::Result<f64> {
    if !out.status.success() {
        bail!(
            "{what} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("ns_per_call "))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("{what} printed no ns_per_call"))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn ensure_bpftrace() -> anyhow::Result<()> {
    if Command::new("bpftrace").arg("--version").output().is_ok() {
        return Ok(());
    }
    eprintln!("bench: installing bpftrace (the peer tool) with apt-get");
    crate::run(Command::new("apt-get").arg("update").arg("-qq"))?;
    crate::run(Command::new("apt-get").args(["install", "-y", "-qq", "bpftrace"]))
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let traced_calls = "20000";
    let untraced_calls = "2000000";
    crate::setup::setup()?;
    let sim = crate::sim::build()?;
    let asys = crate::build_asys(true)?;
    ensure_bpftrace()?;
    let out_dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let lib = sim.lib.join("libhggcrt.so");
    let loop_bin = sim.bin.join("call_loop");
    let script = format!(
        "uprobe:{l}:hggcGetLastError {{ @s[tid] = nsecs; }} \
         uretprobe:{l}:hggcGetLastError /@s[tid]/ {{ @n = count(); @t = sum(nsecs - @s[tid]); delete(@s[tid]); }}",
        l = lib.display()
    );
    let (mut base, mut traced, mut peer) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let o = Command::new(&loop_bin).arg(untraced_calls).output()?;
        base.push(ns_per_call(&o, "untraced call_loop")?);
        let o = Command::new(&asys)
            .args(["profile", "-t", "hggc", "-f", "true", "-o"])
            .arg(out_dir.join("bench"))
            .arg(&loop_bin)
            .arg(traced_calls)
            .output()?;
        traced.push(ns_per_call(&o, "asys profile call_loop")?);
        let o = Command::new("bpftrace")
            .arg("-e")
            .arg(&script)
            .arg("-c")
            .arg(format!("{} {traced_calls}", loop_bin.display()))
            .output()?;
        peer.push(ns_per_call(&o, "bpftrace call_loop")?);
        eprintln!(
            "round {}: untraced {:.1} ns, asys {:.1} ns, bpftrace {:.1} ns per call",
            round + 1,
            base[round],
            traced[round],
            peer[round]
        );
    }
    let (b, t, p) = (median(&mut base), median(&mut traced), median(&mut peer));
    println!(
        "probe overhead, hggcGetLastError via entry uprobe + uretprobe (medians of {rounds} rounds)"
    );
    println!("  untraced                 {b:>10.1} ns/call");
    println!(
        "  asys profile -t hggc     {t:>10.1} ns/call  (overhead {:.1} ns/call)",
        t - b
    );
    println!(
        "  bpftrace uprobe+uretprobe{p:>10.1} ns/call  (overhead {:.1} ns/call)",
        p - b
    );
    println!("  asys / bpftrace overhead ratio: {:.2}", (t - b) / (p - b));
    let json = format!(
        "{{\"rounds\":{rounds},\"untraced_ns\":{b:.1},\"asys_ns\":{t:.1},\"bpftrace_ns\":{p:.1},\
         \"asys_overhead_ns\":{:.1},\"bpftrace_overhead_ns\":{:.1},\"ratio\":{:.3}}}\n",
        t - b,
        p - b,
        (t - b) / (p - b)
    );
    std::fs::write(out_dir.join("probe-overhead.json"), json)?;
    Ok(())
}
