//! Overhead of the periodic samplers (host memory, NIC counters, PPU
//! metrics) on a CPU-bound program (bench-sampling's): it runs untraced,
//! under asys recording nothing else (`-t none -s none --cpuctxsw none`),
//! and under asys with each sampler at its highest frequency (100 Hz),
//! interleaved round by round. A simulated-runtime process holding its
//! metrics file runs beside it, so the PPU sampler has a device to read.
//! Medians and ratios are printed and written to
//! target/bench/metrics-overhead.json. `ASYS_BIN` picks the asys binary
//! (default: a release build).
use std::process::Command;

const CONFIGS: &[(&str, &[&str])] = &[
    ("asys, no source", &[]),
    (
        "--host-memory-sampling 100 Hz",
        &[
            "--host-memory-sampling",
            "true",
            "--host-memory-sampling-frequency",
            "100",
        ],
    ),
    (
        "--nic-metrics 100 Hz",
        &["--nic-metrics", "true", "--nic-metrics-frequency", "100"],
    ),
    (
        "--ppu-metrics-device all 100 Hz",
        &[
            "--ppu-metrics-device",
            "all",
            "--ppu-metrics-frequency",
            "100",
        ],
    ),
];

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let iterations = "20000";
    let asys = match std::env::var_os("ASYS_BIN") {
        Some(p) => p.into(),
        None => {
            crate::setup::setup()?;
            crate::build_asys(true)?
        }
    };
    let sim = crate::sim::build()?;
    let dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let src = dir.join("spin.c");
    std::fs::write(&src, crate::bench_sampling::WORKLOAD)?;
    let bin = dir.join("spin");
    crate::run(
        Command::new("cc")
            .args(["-O1", "-fomit-frame-pointer", "-o"])
            .arg(&bin)
            .arg(&src),
    )?;
    // A device for the PPU sampler: busy_idle runs about 3.5 s; restarted
    // whenever it has ended.
    let log = dir.join("bench-metrics-busy_idle.log");
    let mut device = None::<std::process::Child>;
    let mut base = Vec::new();
    let mut ours: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    // CPU ms of each run (workload and asys together): untraced, then CONFIGS.
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len() + 1];
    for round in 0..rounds {
        let (o, c) = crate::bench::output_with_cpu(Command::new(&bin).arg(iterations))?;
        base.push(crate::bench::value(&o, "work_ms ", "untraced")?);
        cpu[0].push(c);
        for (i, (what, opts)) in CONFIGS.iter().enumerate() {
            if device
                .as_mut()
                .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))))
            {
                device = Some(
                    Command::new(sim.bin.join("busy_idle"))
                        .arg(&log)
                        .stdout(std::process::Stdio::null())
                        .spawn()?,
                );
            }
            let (o, c) = crate::bench::output_with_cpu(
                Command::new(&asys)
                    .args(["profile", "-t", "none", "-s", "none", "--cpuctxsw", "none"])
                    .args(*opts)
                    .args(["-f", "true", "-o"])
                    .arg(dir.join("bench-metrics"))
                    .arg(&bin)
                    .arg(iterations),
            )?;
            ours[i].push(crate::bench::value(&o, "work_ms ", what)?);
            cpu[i + 1].push(c);
        }
        eprintln!(
            "round {}: work ms untraced {:.1}, {}",
            round + 1,
            base[round],
            CONFIGS
                .iter()
                .zip(&ours)
                .map(|((w, _), v)| format!("{w} {:.1}", v[round]))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(mut c) = device {
        let _ = c.wait();
    }
    use crate::bench::median;
    let b = median(&mut base);
    println!(
        "CPU-bound work under the metrics samplers, ms (medians of {rounds} interleaved rounds)"
    );
    println!("  untraced {b:.1}");
    let mut json = format!("{{\"rounds\":{rounds},\"untraced_ms\":{b:.2}");
    for ((what, _), v) in CONFIGS.iter().zip(ours.iter_mut()) {
        let m = median(v);
        println!("  {what:<34} {m:.1}  (x{:.3})", m / b);
        json.push_str(&format!(",\"{what}\":{m:.2}"));
    }
    let c: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
    println!("CPU time of the workload and asys together, ms (medians)");
    println!("  untraced {:.1}", c[0]);
    for ((what, _), m) in CONFIGS.iter().zip(&c[1..]) {
        println!(
            "  {what:<34} {m:.1}  (x{:.3}; {:+.1} ms vs no source)",
            m / c[0],
            m - c[1]
        );
        json.push_str(&format!(",\"cpu {what}\":{m:.2}"));
    }
    json.push_str(&format!(",\"cpu untraced\":{:.2}}}\n", c[0]));
    std::fs::write(dir.join("metrics-overhead.json"), json)?;
    Ok(())
}
