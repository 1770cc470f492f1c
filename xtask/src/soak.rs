//! `cargo xtask soak [MINUTES] [--asys PATH] [--out DIR] [--no-plots]`:
//! proves that `asys profile --always-on` stays bounded when left running.
//! It records the `soak` workload (sim/workloads/soak.c: thousands of hggc
//! calls a second, threads, processes and dlopens coming and going, a new
//! hgtx range name every second) for MINUTES (60), asks `asys dump` for a
//! report every 30 s and checks each one exactly against the workload's
//! own log, and every 10 s (a run under 10 minutes: 60 times in all)
//! samples asys's resident memory, open descriptors, CPU time and the
//! disk its flight recorder's ring holds. The goals, each failing the
//! task when missed: RSS and descriptors grow at most 2 % of their mean an
//! hour after the warm-up, the ring stays under the bound derived from its
//! own first window, every dump is exact, and CPU per event does not rise.
//! Prints a table, writes DIR/soak.json (DIR: target/bench) and, unless
//! `--no-plots`, docs/images/soak-{rss,fds,cpu-per-event}.png (matplotlib,
//! in target/bench/plot-venv).
//!
//! `--asys PATH` records with that asys and the simulated runtime already
//! in target/sim, building neither: the soak test (tests/tests/soak.rs)
//! runs 2 minutes of this with the debug asys `cargo xtask test` built.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// The preset's flight window.
const WINDOW_S: f64 = 60.0;
/// How often `asys dump` is asked for a report.
const DUMP_EVERY_S: f64 = 30.0;
/// The most RSS and descriptors may grow, in % of their mean per hour.
const GROWTH_GOAL: f64 = 2.0;
/// How much CPU per event may rise: the last third's median over the
/// first third's.
const CPU_RISE_GOAL: f64 = 1.10;
/// asys's RSS always on, at most (KiB): 256 MiB, as continuous profilers
/// cap themselves (the OpenTelemetry eBPF profiler at 250 MB).
const RSS_GOAL_KIB: f64 = 256.0 * 1024.0;
/// The same in a run too short for the slopes (the 2-minute test): its
/// thirds are a few 2 s intervals of 10 ms ticks each (a CI run gave
/// x1.20 from 25 to 30 µs a call, two ticks apart); a leak per event would
/// double it.
const SHORT_RUN_CPU_RISE: f64 = 1.5;
/// The matplotlib the plots are drawn with (target/bench/plot-venv).
const MATPLOTLIB: &str = "matplotlib==3.11.2";

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut minutes = 60.0;
    let mut asys = None;
    let mut out = None;
    let mut plots = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--asys" => asys = Some(PathBuf::from(it.next().context("--asys PATH")?)),
            "--out" => out = Some(PathBuf::from(it.next().context("--out DIR")?)),
            "--no-plots" => plots = false,
            m => {
                minutes = m
                    .parse::<f64>()
                    .ok()
                    .filter(|m| *m > 0.0)
                    .with_context(|| format!("MINUTES must be a positive number, not {m:?}"))?
            }
        }
    }
    let (asys, workload) = match asys {
        Some(a) => (a, crate::target_dir().join("sim/bin/soak")),
        None => {
            crate::setup::setup()?;
            let sim = crate::sim::build()?;
            (crate::build_asys(true)?, sim.bin.join("soak"))
        }
    };
    let out = out.unwrap_or_else(|| crate::target_dir().join("bench"));
    let dir = out.join("soak-run");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let result = soak(&asys, &workload, minutes, &dir)?;
    let json_path = out.join("soak.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&result.json)?)?;
    print!("{}", result.table);
    println!("written: {}", json_path.display());
    if plots {
        plot(&json_path)?;
    }
    if !result.failed.is_empty() {
        bail!("soak goals missed:\n  {}", result.failed.join("\n  "));
    }
    // The reports passed; the ring and the logs are of no more use.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// One sample of asys's process.
#[derive(Clone, Copy, Default)]
struct Sample {
    t_s: f64,
    rss_kib: u64,
    fds: u64,
    ring_bytes: u64,
    cpu_s: f64,
    /// The workload's hggcGetLastError calls by then (its log).
    calls: u64,
}

/// One `asys dump` and what its report held.
#[derive(Default)]
struct Dump {
    asked_s: f64,
    answered_s: f64,
    report: String,
    /// The report's trigger time, in s since asys started.
    trigger_s: f64,
    /// hggcGetLastError calls checked between the two progress points.
    calls_checked: u64,
    /// The events asys counted by the trigger (metadata `events`, summed).
    events: u64,
    /// The workload's calls by the trigger.
    calls: u64,
    /// asys's CPU time once the report was written.
    cpu_s: Option<f64>,
    /// Seconds of the window outside the progress points checked.
    unchecked_s: f64,
    /// What was wrong, if anything.
    error: Option<String>,
}

struct Soaked {
    json: Value,
    table: String,
    failed: Vec<String>,
}

/// Runs `asys profile --always-on` of the workload for `minutes` in
/// `dir`, sampling and dumping, and judges the goals.
fn soak(asys: &Path, workload: &Path, minutes: f64, dir: &Path) -> anyhow::Result<Soaked> {
    let seconds = minutes * 60.0;
    // 10 s, or 60 samples in a run too short for 60 of those: a 2-minute
    // test still gets enough points to fit a line to.
    let every = (seconds / 60.0).min(10.0);
    let log = dir.join("progress.log");
    let output = dir.join("soak");
    let stderr = std::fs::File::create(dir.join("asys.stderr"))?;
    let t0 = Instant::now();
    let mut child = Command::new(asys)
        .args(["profile", "--always-on", "-o"])
        .arg(&output)
        .arg(workload)
        .arg(format!("{seconds}"))
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {}", asys.display()))?;
    let pid = child.id();
    let base_mono = monotonic_ns() - t0.elapsed().as_nanos() as i64;
    let dumps = Mutex::new(Vec::<Dump>::new());
    let mut samples = Vec::new();
    let status = std::thread::scope(|scope| -> anyhow::Result<_> {
        // Dumps come on a thread of their own: one waits for its report to
        // be packed, then checks it, which must not delay the samples.
        let dumper = scope.spawn(|| {
            for k in 1.. {
                let due = DUMP_EVERY_S * k as f64;
                // Not in the run's last seconds, where the end's own
                // report could overtake the dump.
                if due > seconds - 5.0 {
                    break;
                }
                sleep_until(t0, due);
                let d = dump(asys, pid, &log, t0, base_mono);
                dumps.lock().unwrap().push(d);
            }
        });
        let limit = seconds + 600.0;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            let t = t0.elapsed().as_secs_f64();
            if t > limit {
                let _ = child.kill();
                let _ = child.wait();
                bail!("asys had not ended {limit:.0} s after it started");
            }
            let due = every * (samples.len() + 1) as f64;
            // Only while the workload runs: after it, asys packs the end's
            // report, with the memory that takes and its descriptors closing.
            if due > seconds {
                std::thread::sleep(Duration::from_millis(200));
            } else if t >= due {
                if let Some(s) = sample(pid, dir, &log, t) {
                    samples.push(s);
                }
            } else {
                std::thread::sleep(Duration::from_secs_f64((due - t).min(0.5)));
            }
        };
        dumper.join().expect("the dump thread panicked");
        Ok(status)
    })?;
    let mut dumps = dumps.into_inner().unwrap();
    let said = std::fs::read_to_string(dir.join("asys.stderr")).unwrap_or_default();
    let mut failed = Vec::new();
    if !status.success() {
        failed.push(format!("asys ended with {status}: {said}"));
    }
    // The end of the run's report, checked like the dumps.
    let last = dumps.len() + 1;
    let end_report = dir.join(format!("soak.{last}.asysrep"));
    let mut end = Dump {
        report: end_report.display().to_string(),
        ..Dump::default()
    };
    let steady = Log::read(&log);
    if !steady.done {
        failed.push("the workload's log has no `done`: it did not finish".into());
    }
    check_report(asys, &end_report, &steady, base_mono, &mut end);
    let end_trigger = trigger(&end_report);
    if end_trigger.as_deref() != Some("end of the run") {
        end.error.get_or_insert(format!(
            "its trigger is {end_trigger:?}, not the end of the run"
        ));
    }
    dumps.push(end);
    for d in &dumps {
        if let Some(e) = &d.error {
            failed.push(format!("{}: {e}", d.report));
        }
    }
    let expected = ((seconds - 5.0) / DUMP_EVERY_S).floor().max(0.0) as usize + 1;
    if dumps.len() != expected {
        failed.push(format!("{} reports, not {expected}", dumps.len()));
    }

    let mut judged = judge(&samples, &dumps, seconds, every);
    failed.extend(judged.failed.iter().cloned());
    // The workload's longest stop between two progress points (100 ms
    // apart when nothing stops it): what asys's own waits cost it.
    let stall = steady
        .progress
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) as f64 / 1e9)
        .fold(0.0, f64::max);
    judged.lines.push(format!(
        "the workload's longest gap between progress points: {stall:.2} s (100 ms unhindered)"
    ));
    let table = table(&samples, &dumps, &judged, every);
    let json = json!({
        "minutes": minutes,
        "sample_every_s": every,
        "window_s": WINDOW_S,
        "dump_every_s": DUMP_EVERY_S,
        "warmup_s": judged.warmup_s,
        "workload_totals": steady.totals,
        "workload_longest_gap_s": stall,
        "samples": samples.iter().map(|s| json!({
            "t_s": s.t_s, "rss_kib": s.rss_kib, "fds": s.fds,
            "ring_bytes": s.ring_bytes, "cpu_s": s.cpu_s, "calls": s.calls,
        })).collect::<Vec<_>>(),
        "cpu_per_call_us": judged.cpu_per_call.iter().map(|(t, v)| json!([t, v])).collect::<Vec<_>>(),
        "cpu_per_event_us": judged.cpu_per_event.iter().map(|(t, v)| json!([t, v])).collect::<Vec<_>>(),
        "dumps": dumps.iter().map(|d| json!({
            "report": d.report, "asked_s": d.asked_s, "answered_s": d.answered_s,
            "trigger_s": d.trigger_s, "calls_checked": d.calls_checked,
            "unchecked_s": d.unchecked_s,
            "events": d.events, "calls": d.calls, "cpu_s": d.cpu_s,
            "exact": d.error.is_none(),
            "error": d.error,
        })).collect::<Vec<_>>(),
        "goals": judged.goals,
        "failed": failed,
        "passed": failed.is_empty(),
    });
    Ok(Soaked {
        json,
        table,
        failed,
    })
}

fn sleep_until(t0: Instant, s: f64) {
    let t = t0.elapsed().as_secs_f64();
    if s > t {
        std::thread::sleep(Duration::from_secs_f64(s - t));
    }
}

/// CLOCK_MONOTONIC now, in ns (the clock of asys's timestamps and of the
/// workload's log).
fn monotonic_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// asys's process now; None once it is gone.
fn sample(pid: u32, dir: &Path, log: &Path, t_s: f64) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Sample {
        t_s,
        rss_kib,
        fds,
        ring_bytes: ring_bytes(dir),
        cpu_s: cpu_s(pid)?,
        calls: Log::read(log).progress.last().map_or(0, |p| p.1),
    })
}

/// utime + stime of process `pid` (all its threads), in seconds.
fn cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's ")": state is field 3, utime 14, stime 15.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks as f64 / hz)
}

/// Bytes in the flight recorder's ring: the recording folder
/// `soak.asysrep.unfinished-PID` (a dump's window is copied into a folder
/// of its own, `soak.K.asysrep.unfinished-...`, not counted).
fn ring_bytes(dir: &Path) -> u64 {
    fn walk(p: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(p) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => walk(&e.path()),
                Ok(_) => e.metadata().map_or(0, |m| m.len()),
                Err(_) => 0,
            })
            .sum()
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("soak.asysrep.unfinished-")
        })
        .map(|e| walk(&e.path()))
        .sum()
}

/// Asks for a report with `asys dump --pid PID`, then checks it against
/// the workload's log; removes it when it is exact (an hour of reports
/// would fill a disk), keeps it otherwise.
fn dump(asys: &Path, pid: u32, log: &Path, t0: Instant, base_mono: i64) -> Dump {
    let mut d = Dump {
        asked_s: t0.elapsed().as_secs_f64(),
        ..Dump::default()
    };
    let o = Command::new(asys)
        .args(["dump", "--pid"])
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .output();
    d.answered_s = t0.elapsed().as_secs_f64();
    d.cpu_s = cpu_s(pid);
    let o = match o {
        Ok(o) => o,
        Err(e) => {
            d.error = Some(format!("asys dump did not run: {e}"));
            return d;
        }
    };
    let printed = String::from_utf8_lossy(&o.stdout).trim().to_string();
    d.report = printed.clone();
    if !o.status.success() {
        d.error = Some(format!(
            "asys dump: {}: {}{printed}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
        return d;
    }
    let report = PathBuf::from(&printed);
    if printed.lines().count() != 1 || !printed.ends_with(".asysrep") || !report.exists() {
        d.error = Some(format!(
            "asys dump printed {printed:?}, not a report's path"
        ));
        return d;
    }
    // The log holds a progress point after the trigger within 100 ms.
    std::thread::sleep(Duration::from_millis(300));
    check_report(asys, &report, &Log::read(log), base_mono, &mut d);
    let why = trigger(&report);
    if d.error.is_none() && why.as_deref() != Some("SIGUSR1") {
        d.error = Some(format!("its trigger is {why:?}, not SIGUSR1"));
    }
    if d.error.is_none() {
        let _ = std::fs::remove_file(&report);
    }
    d
}

/// The report's metadata.json.
fn metadata(report: &Path) -> anyhow::Result<Value> {
    let o = Command::new("tar")
        .arg("-xOf")
        .arg(report)
        .arg("metadata.json")
        .output()?;
    if !o.status.success() {
        bail!("tar cannot read {}", report.display());
    }
    Ok(serde_json::from_slice(&o.stdout)?)
}

fn trigger(report: &Path) -> Option<String> {
    metadata(report).ok()?["flight"]["trigger"]
        .as_str()
        .map(str::to_string)
}

/// Checks a flight report exactly against the workload's log, as the
/// flight recorder's tests do: no call outside its window [trigger - 60
/// s, trigger], and every hggcGetLastError call the workload made between
/// two of its progress points inside the window (from its start, when
/// the window begins before it), once. Fills `d` in.
fn check_report(asys: &Path, report: &Path, log: &Log, base_mono: i64, d: &mut Dump) {
    if let Err(e) = try_check(asys, report, log, base_mono, d) {
        d.error.get_or_insert(format!("{e:#}"));
    }
}

fn try_check(
    asys: &Path,
    report: &Path,
    log: &Log,
    base_mono: i64,
    d: &mut Dump,
) -> anyhow::Result<()> {
    let meta = metadata(report)?;
    let f = &meta["flight"];
    let at = f["trigger_monotonic_ns"]
        .as_i64()
        .context("no flight.trigger_monotonic_ns")?;
    let window = f["window_ns"].as_i64().context("no flight.window_ns")?;
    if window != (WINDOW_S * 1e9) as i64 {
        bail!("a window of {window} ns, not the preset's {WINDOW_S} s");
    }
    d.trigger_s = (at - base_mono) as f64 / 1e9;
    d.events = meta["events"]
        .as_object()
        .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
    let lost: Vec<String> = meta["drops"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| !k.contains("text_unreadable") && v.as_u64().unwrap_or(0) > 0)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !lost.is_empty() {
        bail!("events lost: {}", lost.join(", "));
    }
    let lo = at - window;
    let calls = traced_calls(asys, report)?;
    if let Some(c) = calls.iter().find(|c| c.start < lo || c.start > at) {
        bail!(
            "{} calls outside [{lo}, {at}], e.g. {} at {}",
            calls
                .iter()
                .filter(|c| c.start < lo || c.start > at)
                .count(),
            c.name,
            c.start
        );
    }
    // From the workload's start when the window begins before it, else
    // from its first progress point in the window.
    let (a_t, a_n) = if lo <= log.start {
        (log.start, 0)
    } else {
        *log.progress
            .iter()
            .find(|(t, _)| *t >= lo)
            .context("no progress point in the window")?
    };
    let (b_t, b_n) = log
        .progress
        .iter()
        .rev()
        .find(|(t, _)| *t <= at)
        .copied()
        .context("no progress point before the trigger")?;
    // The points are the workload's own, every 100 ms, but the workload
    // can stop for longer: a library load or an exec waits for asys to
    // probe it, which waits while a report is packed. The window's edges
    // outside the points go unchecked; how much is in the JSON.
    d.unchecked_s = ((a_t - lo.max(log.start)) + (at - b_t).max(0)) as f64 / 1e9;
    let between = calls
        .iter()
        .filter(|c| c.name == "hggcGetLastError" && c.start > a_t && c.end <= b_t)
        .count() as u64;
    d.calls = b_n;
    d.calls_checked = b_n - a_n;
    if between != b_n - a_n {
        bail!(
            "the workload made {} hggcGetLastError calls between {a_t} and {b_t}; the report holds {between}",
            b_n - a_n
        );
    }
    Ok(())
}

struct Call {
    start: i64,
    end: i64,
    name: String,
}

/// The calls of `asys stats --report hggc_api_trace --format csv`.
fn traced_calls(asys: &Path, report: &Path) -> anyhow::Result<Vec<Call>> {
    let o = Command::new(asys)
        .args(["stats", "--report", "hggc_api_trace", "--format", "csv"])
        .arg(report)
        .stdin(Stdio::null())
        .output()?;
    if !o.status.success() {
        bail!("asys stats: {}", String::from_utf8_lossy(&o.stderr));
    }
    let text = String::from_utf8(o.stdout)?;
    let mut lines = text.lines().filter(|l| !l.is_empty());
    let header = csv_fields(lines.next().context("no CSV header")?);
    let at = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("no column {name} in {header:?}"))
    };
    let (s, dur, n) = (at("Start (ns)")?, at("Duration (ns)")?, at("Name")?);
    lines
        .map(|l| {
            let f = csv_fields(l);
            let start: i64 = f[s].parse()?;
            Ok(Call {
                start,
                end: start + f[dur].parse::<i64>()?,
                name: f[n].clone(),
            })
        })
        .collect()
}

/// The fields of one CSV line as asys writes them (a field with a comma
/// or a quote is quoted, its quotes doubled).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

/// The workload's log: "start T", "progress T N", "totals ...", "done".
#[derive(Default)]
struct Log {
    start: i64,
    progress: Vec<(i64, u64)>,
    totals: Option<Value>,
    done: bool,
}

impl Log {
    fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut log = Log::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<i64>().ok());
            match f.first() {
                Some(&"start") => log.start = n(1).unwrap_or(0),
                // A line still being written has fewer fields.
                Some(&"progress") => {
                    if let (Some(t), Some(c)) = (n(1), n(2)) {
                        log.progress.push((t, c as u64));
                    }
                }
                Some(&"totals") if f.len() == 6 => {
                    log.totals = Some(json!({
                        "threads": n(1), "forks": n(2), "execs": n(3),
                        "dlopens": n(4), "ranges": n(5),
                    }))
                }
                Some(&"done") => log.done = true,
                _ => {}
            }
        }
        log
    }
}

/// A least-squares line through (x, y): slope, its standard error, and
/// the mean of y.
fn fit(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let resid: f64 = points
        .iter()
        .map(|p| (p.1 - my - slope * (p.0 - mx)).powi(2))
        .sum();
    let se = (resid / (n - 2.0) / sxx).sqrt();
    Some((slope, se, my))
}

/// Student's t for a two-sided 95 % interval with `dof` degrees of
/// freedom (within 0.5 % from 5 on; exact enough for a goal's margin).
fn t95(dof: f64) -> f64 {
    1.96 + 2.4 / dof + 3.0 / (dof * dof)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

struct Judged {
    warmup_s: f64,
    /// (t, asys's CPU µs per workload call over the interval ending at t).
    cpu_per_call: Vec<(f64, f64)>,
    /// (trigger, asys's CPU µs per event it recorded since the dump before).
    cpu_per_event: Vec<(f64, f64)>,
    goals: Value,
    lines: Vec<String>,
    failed: Vec<String>,
}

/// Growth of one series after the warm-up, in % of its mean per hour:
/// (point estimate, 95 % interval's low and high end).
fn growth(
    samples: &[Sample],
    warmup_s: f64,
    y: impl Fn(&Sample) -> f64,
) -> Option<(f64, f64, f64)> {
    let points: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.t_s >= warmup_s)
        .map(|s| (s.t_s, y(s)))
        .collect();
    let (slope, se, mean) = fit(&points)?;
    let per_hour = |v: f64| v * 3600.0 / mean * 100.0;
    let half = t95(points.len() as f64 - 2.0) * se;
    Some((
        per_hour(slope),
        per_hour(slope - half),
        per_hour(slope + half),
    ))
}

fn judge(samples: &[Sample], dumps: &[Dump], seconds: f64, every: f64) -> Judged {
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    // The first fifth of the run, and at least the window, its second of
    // slack and a sample more: until then the ring fills and the first
    // reports are packed, and memory settles at what they take.
    let warmup_s = (seconds / 5.0).max(WINDOW_S + 1.0 + every);
    let mut goals = serde_json::Map::new();

    // RSS and descriptors: a line after the warm-up, its slope in % of the
    // mean per hour. Each dump's packing leaves memory behind in steps, so
    // a line over a few dumps reads a step as growth: the slope is judged
    // only over at least 10 dumps' worth (5 minutes) after the warm-up.
    // A shorter run (the 2-minute test) is held to what it can tell: RSS
    // after the warm-up within 25 % of its value there, descriptors within
    // 8 of theirs (a leak per thread, process or library load would pass
    // either by thousands).
    let after: Vec<&Sample> = samples.iter().filter(|s| s.t_s >= warmup_s).collect();
    let long = after
        .last()
        .is_some_and(|l| l.t_s - warmup_s >= 10.0 * DUMP_EVERY_S);
    for (name, key, y, slack) in [
        (
            "RSS",
            "rss",
            (|s: &Sample| s.rss_kib as f64) as fn(&Sample) -> f64,
            0.0,
        ),
        ("descriptors", "fds", |s: &Sample| s.fds as f64, 8.0),
    ] {
        let Some((g, lo, hi)) = growth(samples, warmup_s, y) else {
            failed.push(format!("too few {name} samples after the warm-up"));
            continue;
        };
        let first = y(after[0]);
        let most = after.iter().map(|s| y(s)).fold(0.0, f64::max);
        let (ok, rule) = if long {
            (g <= GROWTH_GOAL, format!("goal <= {GROWTH_GOAL} %/h"))
        } else if slack > 0.0 {
            (
                most <= first + slack,
                format!("short run: at most {first:.0} + {slack:.0}, was {most:.0}"),
            )
        } else {
            // RSS steps up at some dumps (a pack's memory kept by the
            // allocator: 104 to 145 MiB at one in a CI run), which two
            // minutes cannot tell from growth; a short run is held to the
            // always-on memory goal instead.
            (
                most <= RSS_GOAL_KIB,
                format!(
                    "short run: at most the always-on goal, {} MiB, was {:.0} MiB",
                    RSS_GOAL_KIB / 1024.0,
                    most / 1024.0
                ),
            )
        };
        lines.push(format!(
            "{name} growth after {warmup_s:.0} s: {g:+.2} %/h of its mean \
             (95 %: {lo:+.2} to {hi:+.2}); {rule}: {}",
            if ok { "ok" } else { "MISSED" }
        ));
        if !ok {
            failed.push(format!("{name} grows {g:+.2} %/h ({rule})"));
        }
        goals.insert(
            format!("{key}_growth_pct_per_h"),
            json!({"estimate": g, "low": lo, "high": hi, "goal": GROWTH_GOAL,
                   "judged_by_slope": long, "first_after_warmup": first,
                   "most_after_warmup": most, "ok": ok}),
        );
    }

    // Disk: nothing is deleted from the ring before a chunk is the window
    // plus 1 s old, so the ring's size at the first sample at or after the
    // window is what that many seconds of this load take on disk, chunk
    // overhead and all. The ring keeps the window, the second of slack and
    // the checkpoint being written (500 ms): bound = first-window bytes /
    // its seconds x (window + 1.5 s) x 1.25, the 25 % for the load's own
    // variation and the process and module tables, which are kept whole.
    let first = samples.iter().find(|s| s.t_s >= WINDOW_S);
    if let Some(first) = first {
        let rate = first.ring_bytes as f64 / first.t_s;
        let bound = rate * (WINDOW_S + 1.5) * 1.25;
        let most = samples.iter().map(|s| s.ring_bytes).max().unwrap_or(0);
        let ok = (most as f64) <= bound;
        let g = growth(samples, warmup_s, |s| s.ring_bytes as f64);
        lines.push(format!(
            "ring: most {:.1} MiB; bound {:.1} MiB = {:.0} KiB/s (its first {:.0} s) x {:.1} s x 1.25: {}{}",
            most as f64 / 1048576.0,
            bound / 1048576.0,
            rate / 1024.0,
            first.t_s,
            WINDOW_S + 1.5,
            if ok { "ok" } else { "MISSED" },
            g.map_or(String::new(), |(g, _, _)| format!(
                "; after the warm-up it grows {g:+.2} %/h"
            ))
        ));
        if !ok {
            failed.push(format!(
                "the ring reached {most} B, over its bound of {bound:.0} B"
            ));
        }
        goals.insert(
            "disk".into(),
            json!({"most_bytes": most, "bound_bytes": bound, "rate_bytes_per_s": rate,
                   "growth_pct_per_h": g.map(|g| g.0), "ok": ok}),
        );
    } else {
        failed.push("no ring sample after the first window".into());
    }

    // CPU per event, interval by interval after the warm-up. asys counts
    // its events only into a report (metadata `events`: since the start),
    // so between samples the workload's own count of its hggcGetLastError
    // calls stands for them: the load's other parts run at fixed rates,
    // and the dumps say how many events a call brings. Between dumps, the
    // events themselves are used; an hour has enough of those intervals
    // to judge by them too.
    let cpu_per_call: Vec<(f64, f64)> = samples
        .windows(2)
        .filter(|w| w[1].t_s >= warmup_s && w[1].calls > w[0].calls)
        .map(|w| {
            (
                w[1].t_s,
                (w[1].cpu_s - w[0].cpu_s) * 1e6 / (w[1].calls - w[0].calls) as f64,
            )
        })
        .collect();
    let exact: Vec<&Dump> = dumps
        .iter()
        .filter(|d| d.error.is_none() && d.cpu_s.is_some())
        .collect();
    let cpu_per_event: Vec<(f64, f64)> = exact
        .windows(2)
        .filter(|w| w[1].trigger_s >= warmup_s && w[1].events > w[0].events)
        .map(|w| {
            let cpu = w[1].cpu_s.unwrap() - w[0].cpu_s.unwrap();
            (
                w[1].trigger_s,
                cpu * 1e6 / (w[1].events - w[0].events) as f64,
            )
        })
        .collect();
    for (what, key, series, required) in [
        ("CPU per call", "cpu_per_call", &cpu_per_call, true),
        ("CPU per event", "cpu_per_event", &cpu_per_event, false),
    ] {
        let third = series.len() / 3;
        if third < 2 {
            if required {
                failed.push(format!("too few {what} intervals after the warm-up"));
            } else {
                lines.push(format!(
                    "{what} (between dumps): {} intervals after the warm-up, too few to judge",
                    series.len()
                ));
            }
            continue;
        }
        let mut early: Vec<f64> = series[..third].iter().map(|p| p.1).collect();
        let mut late: Vec<f64> = series[series.len() - third..].iter().map(|p| p.1).collect();
        let (early, late) = (median(&mut early), median(&mut late));
        // A short run's thirds are a few intervals each, read in the 10 ms
        // ticks of /proc/PID/stat (a tick is a tenth of a 2 s interval's
        // CPU here) and unevenly shared out among the dumps' packing: only
        // a rise past SHORT_RUN_CPU_RISE is told apart from that there.
        let goal = if long {
            CPU_RISE_GOAL
        } else {
            SHORT_RUN_CPU_RISE
        };
        let ok = late <= early * goal;
        lines.push(format!(
            "{what}: first third's median {early:.3} µs, last third's {late:.3} µs \
             (x{:.3}); goal <= x{goal}{}: {}",
            late / early,
            if long { "" } else { " (short run)" },
            if ok { "ok" } else { "MISSED" }
        ));
        if !ok {
            failed.push(format!("{what} rose from {early:.3} µs to {late:.3} µs"));
        }
        goals.insert(
            key.into(),
            json!({"first_third_median_us": early, "last_third_median_us": late,
                   "ratio": late / early, "goal": goal, "ok": ok}),
        );
    }
    // Events per call between dumps: how well the calls stand for events.
    let ratios: Vec<f64> = exact
        .windows(2)
        .filter(|w| w[1].calls > w[0].calls && w[1].events >= w[0].events)
        .map(|w| (w[1].events - w[0].events) as f64 / (w[1].calls - w[0].calls) as f64)
        .collect();
    if !ratios.is_empty() {
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(0.0, f64::max);
        lines.push(format!(
            "asys's events per workload call between dumps: {lo:.2} to {hi:.2}"
        ));
        goals.insert("events_per_call".into(), json!({"min": lo, "max": hi}));
    }

    let exact = dumps.iter().filter(|d| d.error.is_none()).count();
    lines.push(format!(
        "reports exact: {exact} of {} ({} calls checked in all)",
        dumps.len(),
        dumps.iter().map(|d| d.calls_checked).sum::<u64>()
    ));
    goals.insert(
        "dumps".into(),
        json!({"exact": exact, "of": dumps.len(), "ok": exact == dumps.len()}),
    );
    Judged {
        warmup_s,
        cpu_per_call,
        cpu_per_event,
        goals: Value::Object(goals),
        lines,
        failed,
    }
}

/// The samples (at most about 30 rows), the dumps' summary and the goals.
fn table(samples: &[Sample], dumps: &[Dump], judged: &Judged, every: f64) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let step = samples.len().div_ceil(30).max(1);
    let _ = writeln!(
        t,
        "{:>8} {:>9} {:>5} {:>9} {:>8} {:>10}",
        "t (s)", "RSS MiB", "fds", "ring MiB", "CPU s", "calls"
    );
    for (i, s) in samples.iter().enumerate() {
        if i % step == 0 || i + 1 == samples.len() {
            let _ = writeln!(
                t,
                "{:>8.0} {:>9.1} {:>5} {:>9.2} {:>8.1} {:>10}",
                s.t_s,
                s.rss_kib as f64 / 1024.0,
                s.fds,
                s.ring_bytes as f64 / 1048576.0,
                s.cpu_s,
                s.calls
            );
        }
    }
    let _ = writeln!(
        t,
        "({} samples, every {every:.0} s; {} reports, each asked for every {DUMP_EVERY_S:.0} s, and the end's)",
        samples.len(),
        dumps.len()
    );
    for d in dumps.iter().filter(|d| d.error.is_some()) {
        let _ = writeln!(t, "NOT EXACT {}: {}", d.report, d.error.as_ref().unwrap());
    }
    for l in &judged.lines {
        let _ = writeln!(t, "{l}");
    }
    t
}

/// Plots RSS, descriptors and CPU per call over time from soak.json into
/// docs/images/soak-*.png, with matplotlib from PyPI.
fn plot(json: &Path) -> anyhow::Result<()> {
    let env = crate::target_dir().join("bench/plot-venv");
    let python = crate::venv::ensure(&env, &[MATPLOTLIB], crate::venv::Deps::Resolved)?;
    let images = crate::root().join("docs/images");
    crate::run(
        Command::new(python)
            .arg("-c")
            .arg(PLOT)
            .arg(json)
            .arg(&images),
    )?;
    println!(
        "plotted: {}/soak-{{rss,fds,cpu-per-event}}.png",
        images.display()
    );
    Ok(())
}

const PLOT: &str = r#"
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
d = json.load(open(sys.argv[1]))
out = sys.argv[2]
s = d["samples"]
t = [x["t_s"] / 60 for x in s]
warm = d["warmup_s"] / 60
title = f'asys profile --always-on, {d["minutes"]:g} min soak'
def one(name, ys, ylabel, xs=t):
    fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
    ax.plot(xs, ys, lw=1.2)
    ax.axvline(warm, color="grey", ls="--", lw=0.8, label="end of warm-up")
    ax.set_xlabel("minutes")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(f"{out}/soak-{name}.png")
one("rss", [x["rss_kib"] / 1024 for x in s], "asys RSS (MiB)")
one("fds", [x["fds"] for x in s], "asys open descriptors")
# Between dumps, by asys's own event counts, where the run has enough
# dumps; else between samples, per workload call.
c = d["cpu_per_event_us"] if len(d["cpu_per_event_us"]) >= 6 else None
if c:
    one("cpu-per-event", [v for _, v in c], "asys CPU µs per event", [t / 60 for t, _ in c])
else:
    c = d["cpu_per_call_us"]
    one("cpu-per-event", [v for _, v in c], "asys CPU µs per workload call", [t / 60 for t, _ in c])
"#;
