//! Source-line lookup benchmark: the same addresses resolved by asys's
//! symbolizer (`asys __symbolize-addresses`, the code that names sampled
//! frames) and by binutils' `addr2line -a -f -i -C`, in the same run. The
//! binary is SQLite's amalgamation (the C source the rusqlite crate ships)
//! built here as a shared library with `gcc -O2 -g`; the addresses are every
//! instruction start of its `.text` (objdump), some 200k. Wall time and peak
//! RSS of each (medians over the rounds), their ratios, and the results
//! compared address by address: function, file and line of every frame,
//! inlined ones included. Written to target/bench/source-lines.json.
use std::{
    collections::BTreeMap,
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, bail};

use crate::bench_report::{Measured, measure};

/// The amalgamation inside the cargo registry's libsqlite3-sys.
fn sqlite_source() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("no CARGO_HOME or HOME")?;
    let src = home.join("registry/src");
    for index in std::fs::read_dir(&src).with_context(|| src.display().to_string())? {
        let index = index?.path();
        let mut crates: Vec<PathBuf> = std::fs::read_dir(&index)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("libsqlite3-sys-"))
            })
            .collect();
        crates.sort();
        if let Some(c) = crates.last() {
            let file = c.join("sqlite3/sqlite3.c");
            if file.is_file() {
                return Ok(file);
            }
        }
    }
    bail!(
        "no libsqlite3-sys sources under {} (cargo fetch)",
        src.display()
    )
}

fn option(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Every instruction start of `lib`'s code, by objdump.
fn instruction_addresses(lib: &Path) -> anyhow::Result<Vec<u64>> {
    let o = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-j", ".text"])
        .arg(lib)
        .output()
        .context("objdump (binutils)")?;
    if !o.status.success() {
        bail!("objdump failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let mut addrs: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.trim_start().split_once(':')?;
            // Instruction lines only: "  1234:\tmov ...", not labels.
            (l.starts_with(' ') && rest.starts_with('\t'))
                .then(|| u64::from_str_radix(addr, 16).ok())
                .flatten()
        })
        .collect();
    addrs.sort_unstable();
    addrs.dedup();
    Ok(addrs)
}

/// One frame: function, and file:line as addr2line prints it.
type Frame = (String, String);

/// Blocks of "0xADDR" then (function, file:line) pairs; a discriminator
/// note is dropped, and "??:0" is the unknown line as "??:?" is.
fn parse(text: &str) -> BTreeMap<u64, Vec<Frame>> {
    let mut out: BTreeMap<u64, Vec<Frame>> = BTreeMap::new();
    let mut lines = text.lines();
    let mut cur = 0;
    while let Some(l) = lines.next() {
        if let Some(hex) = l.strip_prefix("0x")
            && l.len() == 18
            && let Ok(a) = u64::from_str_radix(hex, 16)
        {
            cur = a;
            out.insert(a, Vec::new());
            continue;
        }
        let place = lines.next().unwrap_or("??:?");
        let place = place.find(" (discriminator").map_or(place, |i| &place[..i]);
        let place = if place == "??:0" { "??:?" } else { place };
        out.entry(cur)
            .or_default()
            .push((l.to_string(), place.to_string()));
    }
    out
}

/// The rule of tests/tests/source_lines.rs: every file:line equal, every
/// name but the innermost, which binutils gives as the ELF symbol (the
/// outermost function) where the inlined function has no linkage name.
fn agrees(asys: &[Frame], binutils: &[Frame]) -> bool {
    if asys.len() != binutils.len() || asys.is_empty() {
        return false;
    }
    let inner = &binutils[0].0;
    (inner == &asys[0].0 || inner == &asys.last().unwrap().0)
        && asys[0].1 == binutils[0].1
        && asys[1..] == binutils[1..]
}

fn timed(shell: &str) -> anyhow::Result<Measured> {
    measure(Path::new("/bin/sh"), &[OsStr::new("-c"), OsStr::new(shell)])
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    crate::ensure_command("addr2line", "binutils", "the peer tool")?;
    crate::ensure_command("gcc", "gcc", "building the benchmark's binary")?;
    crate::ensure_command("/usr/bin/time", "time", "peak RSS")?;
    let rounds: usize = option(args, "--rounds").map_or(Ok(3), |r| r.parse())?;
    let asys = match option(args, "--asys") {
        Some(p) => PathBuf::from(p),
        None => crate::build_asys(true)?,
    };
    let dir = crate::target_dir().join("bench/source-lines");
    std::fs::create_dir_all(&dir)?;
    let lib = dir.join("libsqlite3.so");
    if !lib.is_file() {
        let src = sqlite_source()?;
        println!("building {} with gcc -O2 -g", lib.display());
        crate::run(
            Command::new("gcc")
                .args(["-O2", "-g", "-shared", "-fPIC", "-o"])
                .arg(&lib)
                .arg(&src)
                .args(["-lm", "-lpthread"]),
        )?;
    }
    let addrs = instruction_addresses(&lib)?;
    let list = dir.join("addresses.txt");
    let text: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
    std::fs::write(&list, text)?;
    println!("{} addresses (every instruction of .text)", addrs.len());
    let (lib_s, list_s, asys_s) = (lib.display(), list.display(), asys.display());
    let asys_cmd = format!("exec '{asys_s}' __symbolize-addresses '{lib_s}' < '{list_s}'");
    let binutils_cmd = format!("exec addr2line -a -f -i -C -e '{lib_s}' < '{list_s}'");
    let (mut a_s, mut a_mb, mut b_s, mut b_mb) = (vec![], vec![], vec![], vec![]);
    let mut outputs = None;
    for round in 0..rounds.max(1) {
        let a = timed(&asys_cmd)?;
        let b = timed(&binutils_cmd)?;
        println!(
            "round {round}: asys {:.3} s {:.0} MB | addr2line {:.3} s {:.0} MB",
            a.wall_s, a.peak_rss_mb, b.wall_s, b.peak_rss_mb
        );
        a_s.push(a.wall_s);
        a_mb.push(a.peak_rss_mb);
        b_s.push(b.wall_s);
        b_mb.push(b.peak_rss_mb);
        outputs.get_or_insert((a.stdout, b.stdout));
    }
    let (a_out, b_out) = outputs.context("no round ran")?;
    let (ours, theirs) = (parse(&a_out), parse(&b_out));
    if ours.len() != addrs.len() || theirs.len() != addrs.len() {
        bail!(
            "answers for {} (asys) and {} (addr2line) of {} addresses",
            ours.len(),
            theirs.len(),
            addrs.len()
        );
    }
    // Addresses with no line row (padding after a function's cold part,
    // crt code): binutils prints the compilation unit's file name with no
    // line, asys no file. Counted apart; any other difference fails.
    let unit_only = |a: &u64| {
        let (o, t) = (&ours[a], &theirs[a]);
        o.len() == 1
            && t.len() == 1
            && o[0].0 == t[0].0
            && o[0].1 == "??:?"
            && t[0].1.ends_with(":?")
    };
    let (unit_named, differ): (Vec<&u64>, Vec<&u64>) = addrs
        .iter()
        .filter(|a| !agrees(&ours[a], &theirs[a]))
        .partition(|a| unit_only(a));
    let inlined = ours.values().filter(|f| f.len() > 1).count();
    for a in differ.iter().take(5) {
        println!("{a:#x}: asys {:?}\n    addr2line {:?}", ours[a], theirs[a]);
    }
    let (a_s, a_mb, b_s, b_mb) = (
        median(&mut a_s),
        median(&mut a_mb),
        median(&mut b_s),
        median(&mut b_mb),
    );
    println!(
        "median: asys {a_s:.3} s, {a_mb:.0} MB | addr2line {b_s:.3} s, {b_mb:.0} MB | \
         time ratio asys/addr2line {:.3}, peak RSS ratio {:.3}",
        a_s / b_s,
        a_mb / b_mb
    );
    println!(
        "{} of {} addresses agree ({inlined} with inlined frames); {} more have no line row \
         (addr2line names the unit's file, asys none); {} differ",
        addrs.len() - differ.len() - unit_named.len(),
        addrs.len(),
        unit_named.len(),
        differ.len()
    );
    let json = format!(
        "{{\n  \"addresses\": {},\n  \"with_inlined_frames\": {inlined},\n  \"no_line_row\": {},\n  \"differ\": {},\n  \
         \"rounds\": {rounds},\n  \"asys_s\": {a_s:.4},\n  \"asys_peak_rss_mb\": {a_mb:.1},\n  \
         \"addr2line_s\": {b_s:.4},\n  \"addr2line_peak_rss_mb\": {b_mb:.1},\n  \
         \"time_ratio\": {:.4},\n  \"rss_ratio\": {:.4}\n}}\n",
        addrs.len(),
        unit_named.len(),
        differ.len(),
        a_s / b_s,
        a_mb / b_mb
    );
    let out = crate::target_dir().join("bench/source-lines.json");
    std::fs::write(&out, json)?;
    println!("wrote {}", out.display());
    if !differ.is_empty() {
        bail!("{} addresses named differently", differ.len());
    }
    Ok(())
}
