//! Probe overhead benchmark: five measurements, interleaved in one run.
//!
//! 1. ns per traced call: the sample `call_loop` calls one cheap runtime
//!    function N times and prints ns per call; it runs untraced, under
//!    `asys profile -t hggc -s none` (the probes alone, as bpftrace has
//!    them: no CPU sampling or context switches) with entry uprobes on the runtime
//!    (`--api-probes entry`),
//!    under `asys profile --api-probes site` (the injection library's NOP5
//!    callback sites), and under bpftrace with an entry and a return probe on
//!    the same function.
//! 2. The floor under the site mode: `call_loop` with the injection library
//!    calling its NOP5 site once per API call (`ASYS_API_PROBES=site`), under
//!    bpftrace with nothing but a count on that site, so the ratio of asys's
//!    site overhead to this bare NOP5 uprobe's says how close to the floor
//!    the site mode is (goal: at most 2).
//! 3. A trivial application (`call_loop 1`): wall time under `asys profile
//!    -t hggc -s none` against bpftrace with the same probes (goal: at most
//!    1.0); start-up and the teardown of the probes dominate.
//! 4. The sample training loop (`train_step`, which times its own loop)
//!    untraced and under both asys modes, with the defaults (CPU sampling and
//!    context switches of the process tree on).
//! 5. A user-defined probe (`--probe`, docs/probes.md): `asys profile -t none
//!    -s none --probe ucall:LIB:hggcGetLastError` on `call_loop`, against
//!    bpftrace's same pair of probes (the script of 1.), in the same rounds
//!    (goal: overhead ratio at most 1.0).
//!
//! Everything is interleaved round by round in one run, so the machine's
//! noise hits all alike; medians and ratios are printed and written to
//! target/bench/probe-overhead.json.
use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

/// The number after `key` in a successful run's stdout.
pub(crate) fn value(out: &std::process::Output, key: &str, what: &str) -> anyhow::Result<f64> {
    if !out.status.success() {
        bail!(
            "{what} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    field(&String::from_utf8_lossy(&out.stdout), key)
        .with_context(|| format!("{what} printed no {key}"))
}

/// Runs `cmd` to its end, with the CPU time (user + system, ms) of every
/// process it ran: itself and each descendant waited for (RUSAGE_CHILDREN
/// before and after; the caller must not reap other children meanwhile).
/// For a tracer this is the workload's time (including the eBPF programs run
/// in its context) plus the tracer's own. Unlike wall time it hardly moves
/// when other work shares the CPUs, so it shows small overheads on a loaded
/// machine (cache and frequency effects remain).
pub(crate) fn output_with_cpu(
    cmd: &mut std::process::Command,
) -> anyhow::Result<(std::process::Output, f64)> {
    let before = children_cpu_ms();
    let out = cmd.output()?;
    Ok((out, children_cpu_ms() - before))
}

fn children_cpu_ms() -> f64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage of our own.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(u.ru_utime) + ms(u.ru_stime)
}

/// The number after `key` on the first line of `text` that starts with it.
pub(crate) fn field(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn ensure_bpftrace() -> anyhow::Result<()> {
    crate::ensure_command("bpftrace", "bpftrace", "the peer tool")
}

fn asys_run(
    asys: &Path,
    out_dir: &Path,
    mode: &str,
    sample: &str,
    program: &Path,
    args: &[&str],
) -> anyhow::Result<std::process::Output> {
    Ok(Command::new(asys)
        .args([
            "profile",
            "-t",
            "hggc",
            "--api-probes",
            mode,
            "-f",
            "true",
            "-o",
        ])
        .arg(out_dir.join(format!("bench-{mode}")))
        .args(["-s", sample])
        .arg(program)
        .args(args)
        .output()?)
}

/// Calls per run of `call_loop` under a tracer, and untraced.
const TRACED_CALLS: &str = "20000";
const UNTRACED_CALLS: &str = "2000000";
/// `train_step`'s steps and elements.
const TRAIN_ARGS: [&str; 2] = ["100", "16384"];

#[derive(Default)]
struct Series(Vec<f64>);

impl Series {
    fn median(&mut self) -> f64 {
        median(&mut self.0)
    }
}

/// What every round runs: the built binaries, the bpftrace scripts and the
/// folder the reports go to.
struct Workload {
    asys: PathBuf,
    out_dir: PathBuf,
    inject: PathBuf,
    call_loop: PathBuf,
    train: PathBuf,
    /// bpftrace's entry and return probes on the runtime's function.
    script: String,
    nop5_script: String,
    /// The same pair as a user-defined probe of asys.
    probe_spec: String,
}

/// Every measurement's values, one per round.
#[derive(Default)]
struct Rounds {
    base: Series,
    entry: Series,
    site: Series,
    peer: Series,
    injected: Series,
    nop5: Series,
    w_asys: Series,
    w_peer: Series,
    t_base: Series,
    t_entry: Series,
    t_site: Series,
    user_probe: Series,
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let w = set_up()?;
    let mut m = Rounds::default();
    for round in 0..rounds {
        per_call(&w, &mut m)?;
        site_floor(&w, &mut m)?;
        trivial_application(&w, &mut m)?;
        training_loop(&w, &mut m)?;
        print_round(&m, round);
    }
    print_medians(&w, &mut m, rounds)
}

/// Builds the runtime and asys, checks the peer tool and the injection
/// library's site, and makes the bpftrace scripts.
fn set_up() -> anyhow::Result<Workload> {
    crate::setup::setup()?;
    let sim = crate::sim::build()?;
    let asys = crate::build_asys(true)?;
    ensure_bpftrace()?;
    let out_dir = crate::target_dir().join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let lib = sim.lib.join("libhggcrt.so");
    let inject = asys.with_file_name("libasys_inject.so");
    check_site(&inject)?;
    let call_loop = sim.bin.join("call_loop");
    let train = sim.bin.join("train_step");
    let script = format!(
        "uprobe:{l}:hggcGetLastError {{ @s[tid] = nsecs; }} \
         uretprobe:{l}:hggcGetLastError /@s[tid]/ {{ @n = count(); @t = sum(nsecs - @s[tid]); delete(@s[tid]); }}",
        l = lib.display()
    );
    // The bare NOP5 uprobe: a count on the injection library's call site.
    let nop5_script = format!(
        "uprobe:{}:asys_site_call {{ @n = count(); }}",
        inject.display()
    );
    let probe_spec = format!("ucall:{}:hggcGetLastError", lib.display());
    Ok(Workload {
        asys,
        out_dir,
        inject,
        call_loop,
        train,
        script,
        nop5_script,
        probe_spec,
    })
}

/// `bpftrace -e SCRIPT -c COMMAND`.
fn bpftrace(script: &str, command: String) -> Command {
    let mut c = Command::new("bpftrace");
    c.arg("-e").arg(script).arg("-c").arg(command);
    c
}

/// 1. and 5.: ns per call of `call_loop` untraced, under both asys modes,
///    under the user-defined probe and under bpftrace.
fn per_call(w: &Workload, m: &mut Rounds) -> anyhow::Result<()> {
    let (asys, out_dir, call_loop) = (&w.asys, &w.out_dir, &w.call_loop);
    let o = Command::new(call_loop).arg(UNTRACED_CALLS).output()?;
    m.base
        .0
        .push(value(&o, "ns_per_call ", "untraced call_loop")?);
    let o = asys_run(asys, out_dir, "entry", "none", call_loop, &[TRACED_CALLS])?;
    m.entry
        .0
        .push(value(&o, "ns_per_call ", "asys --api-probes entry")?);
    let o = asys_run(asys, out_dir, "site", "none", call_loop, &[TRACED_CALLS])?;
    m.site
        .0
        .push(value(&o, "ns_per_call ", "asys --api-probes site")?);
    let o = Command::new(asys)
        .args(["profile", "-t", "none", "-s", "none", "-f", "true", "-o"])
        .arg(out_dir.join("bench-probe"))
        .args(["--probe", &w.probe_spec])
        .arg(call_loop)
        .arg(TRACED_CALLS)
        .output()?;
    m.user_probe
        .0
        .push(value(&o, "ns_per_call ", "asys --probe ucall")?);
    let o = bpftrace(&w.script, format!("{} {TRACED_CALLS}", call_loop.display())).output()?;
    m.peer
        .0
        .push(value(&o, "ns_per_call ", "bpftrace call_loop")?);
    Ok(())
}

/// 2.: the floor under the site mode.
fn site_floor(w: &Workload, m: &mut Rounds) -> anyhow::Result<()> {
    // The library in site mode with nothing attached, then with the
    // bare count on its site.
    let o = site_mode(Command::new(&w.call_loop).arg(TRACED_CALLS), &w.inject).output()?;
    m.injected.0.push(value(
        &o,
        "ns_per_call ",
        "call_loop with the injection library",
    )?);
    let o = site_mode(
        &mut bpftrace(
            &w.nop5_script,
            format!("{} {TRACED_CALLS}", w.call_loop.display()),
        ),
        &w.inject,
    )
    .output()?;
    m.nop5
        .0
        .push(value(&o, "ns_per_call ", "bpftrace on the NOP5 site")?);
    check_count(&o, TRACED_CALLS)
}

/// 3.: wall time of a trivial application under asys and under bpftrace.
fn trivial_application(w: &Workload, m: &mut Rounds) -> anyhow::Result<()> {
    // A trivial application: the whole run, start to report.
    let t = std::time::Instant::now();
    let o = Command::new(&w.asys)
        .args(["profile", "-t", "hggc", "-s", "none", "-f", "true", "-o"])
        .arg(w.out_dir.join("bench-trivial"))
        .arg(&w.call_loop)
        .arg("1")
        .output()?;
    m.w_asys.0.push(t.elapsed().as_secs_f64() * 1e3);
    value(&o, "ns_per_call ", "asys profile of call_loop 1")?;
    let t = std::time::Instant::now();
    let o = bpftrace(&w.script, format!("{} 1", w.call_loop.display())).output()?;
    m.w_peer.0.push(t.elapsed().as_secs_f64() * 1e3);
    value(&o, "ns_per_call ", "bpftrace of call_loop 1")?;
    Ok(())
}

/// 4.: the sample training loop untraced and under both asys modes.
fn training_loop(w: &Workload, m: &mut Rounds) -> anyhow::Result<()> {
    let (asys, out_dir, train) = (&w.asys, &w.out_dir, &w.train);
    let o = Command::new(train).args(TRAIN_ARGS).output()?;
    m.t_base
        .0
        .push(value(&o, "loop_ms ", "untraced train_step")?);
    let o = asys_run(asys, out_dir, "entry", "process-tree", train, &TRAIN_ARGS)?;
    m.t_entry
        .0
        .push(value(&o, "loop_ms ", "train_step under asys (entry)")?);
    let o = asys_run(asys, out_dir, "site", "process-tree", train, &TRAIN_ARGS)?;
    m.t_site
        .0
        .push(value(&o, "loop_ms ", "train_step under asys (site)")?);
    Ok(())
}

fn print_round(m: &Rounds, round: usize) {
    eprintln!(
        "round {}: call ns untraced {:.1}, entry {:.1}, site {:.1}, bpftrace {:.1}, injected {:.1}, bare nop5 {:.1}; \
         trivial app ms asys {:.0}, bpftrace {:.0}; train ms untraced {:.1}, entry {:.1}, site {:.1}",
        round + 1,
        m.base.0[round],
        m.entry.0[round],
        m.site.0[round],
        m.peer.0[round],
        m.injected.0[round],
        m.nop5.0[round],
        m.w_asys.0[round],
        m.w_peer.0[round],
        m.t_base.0[round],
        m.t_entry.0[round],
        m.t_site.0[round]
    );
}

/// The medians and ratios, printed and written to probe-overhead.json.
fn print_medians(w: &Workload, m: &mut Rounds, rounds: usize) -> anyhow::Result<()> {
    let (b, e, s, p) = (
        m.base.median(),
        m.entry.median(),
        m.site.median(),
        m.peer.median(),
    );
    let (tb, te, ts) = (m.t_base.median(), m.t_entry.median(), m.t_site.median());
    let (bi, n5) = (m.injected.median(), m.nop5.median());
    let (wa, wp) = (m.w_asys.median(), m.w_peer.median());
    let up = m.user_probe.median();
    println!("ns per call of hggcGetLastError (medians of {rounds} interleaved rounds)");
    println!("  untraced                              {b:>9.1}");
    println!(
        "  asys, entry uprobe + return uprobe    {e:>9.1}  overhead {:>8.1}",
        e - b
    );
    println!(
        "  asys, injection NOP5 callback sites   {s:>9.1}  overhead {:>8.1}",
        s - b
    );
    println!(
        "  bpftrace, entry + return uprobe       {p:>9.1}  overhead {:>8.1}",
        p - b
    );
    println!(
        "  asys --probe ucall (user probe)       {up:>9.1}  overhead {:>8.1}  /bpftrace {:.3} (goal <= 1.0)",
        up - b,
        (up - b) / (p - b)
    );
    println!("  injection library in site mode, no probe {bi:>9.1}");
    println!(
        "  bpftrace count on the NOP5 site (floor) {n5:>8.1}  overhead {:>8.1}",
        n5 - b
    );
    println!(
        "  overhead ratios: site/entry {:.3}, entry/bpftrace {:.3} (goal <= 1.0), \
         site/bare NOP5 {:.3} (goal <= 2; both against the untraced loop), \
         site/bare NOP5 probe alone {:.3} (both against the loop with the library)",
        (s - b) / (e - b),
        (e - b) / (p - b),
        (s - b) / (n5 - b),
        (s - bi) / (n5 - bi)
    );
    println!(
        "trivial application (call_loop 1), wall ms: asys profile {wa:.0}, bpftrace {wp:.0}, \
         asys/bpftrace {:.3} (goal <= 1.0)",
        wa / wp
    );
    println!(
        "sample training loop (train_step {} steps), loop time in ms",
        TRAIN_ARGS[0]
    );
    println!(
        "  untraced {tb:.1}, asys entry {te:.1} (x{:.3}), asys site {ts:.1} (x{:.3})",
        te / tb,
        ts / tb
    );
    let json = format!(
        "{{\"rounds\":{rounds},\"call_untraced_ns\":{b:.1},\"call_entry_ns\":{e:.1},\"call_site_ns\":{s:.1},\
         \"call_bpftrace_ns\":{p:.1},\"call_injected_ns\":{bi:.1},\"call_bare_nop5_ns\":{n5:.1},\
         \"entry_over_bpftrace\":{:.3},\"site_over_bare_nop5\":{:.3},\
         \"trivial_asys_ms\":{wa:.1},\"trivial_bpftrace_ms\":{wp:.1},\"trivial_ratio\":{:.3},\
         \"train_untraced_ms\":{tb:.2},\"train_entry_ms\":{te:.2},\"train_site_ms\":{ts:.2},\
         \"call_user_probe_ns\":{up:.1},\"user_probe_over_bpftrace\":{:.3}}}\n",
        (e - b) / (p - b),
        (s - b) / (n5 - b),
        wa / wp,
        (up - b) / (p - b)
    );
    std::fs::write(w.out_dir.join("probe-overhead.json"), json)?;
    Ok(())
}

/// One run of a tool over a program: `words`, the tool's command line
/// before the program's (none for an untraced run), then `program`, the
/// program and its arguments.
pub(crate) fn command<W: AsRef<OsStr>, P: AsRef<OsStr>>(words: &[W], program: &[P]) -> Command {
    let mut all = words
        .iter()
        .map(AsRef::as_ref)
        .chain(program.iter().map(AsRef::as_ref));
    let mut c = Command::new(all.next().expect("a program"));
    c.args(all);
    c
}

/// `cmd` with the injection library loaded and calling its sites, as asys
/// sets it up for `--api-probes site`.
fn site_mode<'a>(cmd: &'a mut Command, inject: &Path) -> &'a mut Command {
    cmd.env("HGGC_INJECTION64_PATH", inject)
        .env("ASYS_API_PROBES", "site")
}

/// The floor is only a floor if the site is what the notes say: exported,
/// and starting with the 5-byte NOP the kernel optimizes.
fn check_site(inject: &Path) -> anyhow::Result<()> {
    let out = Command::new("objdump")
        .args(["-d", "--disassemble=asys_site_call"])
        .arg(inject)
        .output();
    // objdump is optional: without it the count check below still holds.
    let Ok(out) = out else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("<asys_site_call>:") && !text.contains("0f 1f 44 00 00") {
        bail!(
            "asys_site_call in {} does not start with a NOP5:\n{text}",
            inject.display()
        );
    }
    Ok(())
}

/// bpftrace's count on the site must equal the calls made (plus the one the
/// loop makes before timing): otherwise the library did not call the site
/// once per API call and the floor measures something else.
fn check_count(out: &std::process::Output, calls: &str) -> anyhow::Result<()> {
    let want: u64 = calls.parse::<u64>()? + 1;
    let text = String::from_utf8_lossy(&out.stdout);
    let got = text
        .lines()
        .find_map(|l| l.strip_prefix("@n: "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    if got != Some(want) {
        bail!("the NOP5 site was hit {got:?} times for {want} API calls:\n{text}");
    }
    Ok(())
}
