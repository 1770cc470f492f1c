//! Source lines and inlined frames of sampled stacks (symbolize/naming.rs),
//! checked against binutils' `addr2line -f -i -C` on every distinct address
//! asys sampled in a C++ program built with `g++ -O2 -g` (inline functions
//! GCC inlines, templates, a hot loop); separate debug files found by
//! `.gnu_debuglink` and by build id; a binary rebuilt while it was traced is
//! warned about and its frames are not named from the new file.
use std::{
    collections::{BTreeMap, HashMap},
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use asys_tests::*;
use serde_json::Value;

/// `hot SECONDS` (tests/workloads/hot.cc): hot_loop (not inlined) runs
/// Kernel<3>::run and Kernel<5>::run (templates, inlined), which call step
/// and mix<uint64_t> (inline, inlined), until SECONDS have passed. `SALT`
/// changes the code, for the rebuilt-binary test.
///
/// Built with `g++ -O2 -g -no-pie` (addresses in the file are the
/// process's: no load bias to undo for addr2line) plus `extra`, and copied
/// to `dir/name`: the tests strip, copy and rename over their binaries.
fn build(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let mut flags = vec!["-O2", "-g", "-no-pie"];
    flags.extend_from_slice(extra);
    let built = build_workload("hot.cc", "hot", &flags);
    let bin = dir.join(name);
    std::fs::copy(&built, &bin).unwrap();
    bin
}

fn tool(name: &str, args: &[&str]) -> Output {
    let o = Command::new(name).args(args).finish();
    assert!(o.status.success(), "{name} {args:?}: {}", stderr(&o));
    o
}

use std::process::Output;

/// One frame: function, and file:line as addr2line prints it.
type Frame = (String, String);

/// Profiles `bin` for `secs` with DWARF unwinding; returns the report and
/// asys's stderr.
fn profile(s: &Scratch, bin: &Path, secs: &str, env: &[(&str, &str)]) -> (PathBuf, String) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let report = s.path(&format!(
        "{}-report-{n}",
        bin.file_name().unwrap().to_string_lossy()
    ));
    let mut cmd = asys();
    cmd.args(["profile", "-s", "process-tree", "-b", "dwarf", "-o"])
        .arg(&report)
        .arg(bin)
        .arg(secs);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.finish();
    assert!(o.status.success(), "asys profile: {}", stderr(&o));
    (report.with_extension("asysrep"), stderr(&o))
}

/// The report's sampled stacks in `module`, by lookup address (the
/// sampled instruction itself at depth 0, the call before a return address
/// above it, as addr2line must be asked): the frames asys gave it, innermost
/// first, with their `inlined` flags.
fn sampled_frames(report: &Path, module: &Path) -> BTreeMap<u64, Vec<(Frame, bool)>> {
    let out = PathBuf::from(format!("{}-stacks", report.with_extension("").display()));
    let o = run(&[
        "export",
        "--type",
        "jsonlines",
        "--tables",
        "cpu_sample_stacks,strings",
        "-o",
        out.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "asys export: {}", stderr(&o));
    let text = std::fs::read_to_string(out.with_extension("jsonl")).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let strings: HashMap<u64, String> = rows
        .iter()
        .filter(|r| r["table"] == "strings")
        .map(|r| {
            (
                r["id"].as_u64().unwrap(),
                r["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let s_of = |v: &Value| v.as_u64().map(|id| strings[&id].clone());
    // Per sample (tid, ts): its rows by depth.
    let mut samples: BTreeMap<(u64, i64), Vec<&Value>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r["table"] == "cpu_sample_stacks") {
        samples
            .entry((r["tid"].as_u64().unwrap(), r["ts"].as_i64().unwrap()))
            .or_default()
            .push(r);
    }
    let module = module.to_string_lossy().into_owned();
    let mut by_addr: BTreeMap<u64, Vec<(Frame, bool)>> = BTreeMap::new();
    for rows in samples.values_mut() {
        rows.sort_by_key(|r| r["depth"].as_u64().unwrap());
        let first_pc = rows[0]["pc"].as_u64().unwrap();
        let mut at = 0;
        while at < rows.len() {
            let pc = rows[at]["pc"].as_u64().unwrap();
            // The rows of one pc: its inlined frames, then the function
            // they were inlined into.
            let end = at
                + rows[at..]
                    .iter()
                    .take_while(|r| r["pc"].as_u64() == Some(pc))
                    .count();
            let chain: Vec<(Frame, bool)> = rows[at..end]
                .iter()
                .map(|r| {
                    let file = s_of(&r["fileId"]).unwrap_or_else(|| "??".into());
                    let line = r["line"]
                        .as_u64()
                        .map_or("?".to_string(), |l| l.to_string());
                    (
                        (s_of(&r["functionId"]).unwrap(), format!("{file}:{line}")),
                        r["inlined"].as_bool().unwrap(),
                    )
                })
                .collect();
            let in_module = s_of(&rows[at]["moduleId"]).as_deref() == Some(module.as_str());
            if in_module {
                let lookup = if at == 0 && pc == first_pc {
                    pc
                } else {
                    pc - 1
                };
                let old = by_addr.insert(lookup, chain.clone());
                assert!(
                    old.as_ref().is_none_or(|o| *o == chain),
                    "{lookup:#x} named two ways: {old:?} and {chain:?}"
                );
            }
            at = end;
        }
    }
    by_addr
}

/// binutils' answer for each address: `addr2line -a -f -i -C -e BIN`.
fn addr2line(bin: &Path, addrs: &[u64]) -> BTreeMap<u64, Vec<Frame>> {
    let mut child = Command::new("addr2line")
        .args(["-a", "-f", "-i", "-C", "-e"])
        .arg(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("addr2line (binutils) runs");
    let mut input = String::new();
    for a in addrs {
        input.push_str(&format!("{a:#x}\n"));
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    parse_addr2line(&String::from_utf8_lossy(&o.stdout))
}

/// Blocks of "0xADDR" then (function, file:line) pairs; a discriminator
/// note is dropped, and "??:0" is addr2line's unknown line as "??:?" is.
fn parse_addr2line(text: &str) -> BTreeMap<u64, Vec<Frame>> {
    let mut out: BTreeMap<u64, Vec<Frame>> = BTreeMap::new();
    let mut lines = text.lines().peekable();
    let mut cur = None;
    while let Some(l) = lines.next() {
        if let Some(hex) = l.strip_prefix("0x")
            && l.len() == 18
        {
            cur = Some(u64::from_str_radix(hex, 16).unwrap());
            out.insert(cur.unwrap(), Vec::new());
            continue;
        }
        let place = lines.next().unwrap_or("??:?");
        let place = match place.find(" (discriminator") {
            Some(i) => &place[..i],
            None => place,
        };
        let place = if place == "??:0" { "??:?" } else { place };
        out.get_mut(&cur.unwrap())
            .unwrap()
            .push((l.to_string(), place.to_string()));
    }
    out
}

/// Whether asys's chain is binutils' for one address. Every frame's file
/// and line must be equal, and every name but the innermost: binutils names
/// the innermost frame of an inlined chain by its ELF symbol (the function
/// everything was inlined into) when the inlined function has no linkage
/// name in the DWARF (a `static inline` function, a C++ template's static
/// helper); asys names it by the inlined function, as gdb and perf do.
fn agrees(asys: &[(Frame, bool)], binutils: &[Frame]) -> bool {
    if asys.len() != binutils.len() || asys.is_empty() {
        return false;
    }
    let innermost = &binutils[0].0;
    let outermost = &asys.last().unwrap().0.0;
    (innermost == &asys[0].0.0 || innermost == outermost)
        && asys[0].0.1 == binutils[0].1
        && asys[1..].iter().zip(&binutils[1..]).all(|(a, b)| a.0 == *b)
}

/// Checks every sampled address of `bin` against addr2line (run on
/// `truth_bin`, the binary with its debug information); returns how many
/// addresses, and how many had inlined frames.
fn check_against_addr2line(
    sampled: &BTreeMap<u64, Vec<(Frame, bool)>>,
    truth_bin: &Path,
) -> (usize, usize) {
    let addrs: Vec<u64> = sampled.keys().copied().collect();
    let truth = addr2line(truth_bin, &addrs);
    let mut inlined = 0;
    for (a, chain) in sampled {
        let b = &truth[a];
        assert!(
            agrees(chain, b),
            "{a:#x}: asys named {chain:?}, addr2line -f -i -C {b:?}"
        );
        // The inlined flag: on every frame but the last of the chain.
        let flags: Vec<bool> = chain.iter().map(|c| c.1).collect();
        let mut want = vec![true; chain.len()];
        *want.last_mut().unwrap() = false;
        assert_eq!(flags, want, "{a:#x}: inlined flags of {chain:?}");
        if chain.len() > 1 {
            inlined += 1;
        }
    }
    (sampled.len(), inlined)
}

#[test]
fn every_sampled_address_agrees_with_addr2line_inlined_frames_included() {
    require_root();
    let s = Scratch::new("source-lines");
    let bin = build(&s.0, "hot", &[]);
    let (report, _) = profile(&s, &bin, "1.0", &[]);
    let sampled = sampled_frames(&report, &bin);
    let (n, inlined) = check_against_addr2line(&sampled, &bin);
    eprintln!("{n} distinct addresses, {inlined} with inlined frames: all agree");
    assert!(n >= 10, "only {n} distinct sampled addresses in hot");
    assert!(inlined >= 5, "only {inlined} addresses had inlined frames");
    // The inlined chain of the hot loop reaches mix<> inside step inside
    // Kernel<N>::run inside hot_loop, with hot.cc lines.
    assert!(
        sampled.values().any(|c| c.len() >= 4
            && c[0].0.0.starts_with("mix<")
            && c.last().unwrap().0.0.starts_with("hot_loop(")
            && c.iter().all(|f| f.0.1.contains("hot.cc:"))),
        "no mix<> -> step -> Kernel<N>::run -> hot_loop chain in {sampled:?}"
    );
    // cpu_sample_sum shows the source of the hot inlined function.
    let rows = stats_json(&report, "cpu_sample_sum");
    let mix = rows
        .iter()
        .find(|r| r["Function"].as_str().unwrap().starts_with("mix<"))
        .expect("mix<> in cpu_sample_sum");
    assert!(mix["Source"].as_str().unwrap().contains("hot.cc:"), "{mix}");
    assert_eq!(mix["Inlined"], "yes", "{mix}");
}

#[test]
fn a_stripped_binary_finds_its_lines_by_debuglink_and_by_build_id() {
    require_root();
    let s = Scratch::new("source-lines-debug");
    let full = build(&s.0, "hot", &[]);
    // By .gnu_debuglink: the debug file in the binary's folder, the CRC
    // checked.
    let debug = s.path("hot.debug");
    tool(
        "objcopy",
        &[
            "--only-keep-debug",
            full.to_str().unwrap(),
            debug.to_str().unwrap(),
        ],
    );
    let linked = s.path("hot-linked");
    tool(
        "objcopy",
        &[
            "--strip-debug",
            &format!("--add-gnu-debuglink={}", debug.display()),
            full.to_str().unwrap(),
            linked.to_str().unwrap(),
        ],
    );
    let (report, _) = profile(&s, &linked, "0.6", &[]);
    let sampled = sampled_frames(&report, &linked);
    let (n, inlined) = check_against_addr2line(&sampled, &full);
    assert!(n >= 5 && inlined >= 2, "{n} addresses, {inlined} inlined");

    // By build id, under a debug root of the test's own (the stripped
    // binary has no debuglink): root/.build-id/xx/rest.debug.
    let root = s.path("debug-root");
    let id = build_id(&full);
    let dir = root.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&debug, dir.join(format!("{}.debug", &id[2..]))).unwrap();
    let bare = s.path("hot-bare");
    tool(
        "objcopy",
        &[
            "--strip-debug",
            full.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let env = [("ASYS_DEBUG_ROOT", root.to_str().unwrap())];
    let (report, _) = profile(&s, &bare, "0.6", &env);
    let sampled = sampled_frames(&report, &bare);
    let (n, inlined) = check_against_addr2line(&sampled, &full);
    assert!(n >= 5 && inlined >= 2, "{n} addresses, {inlined} inlined");

    // In debuginfod's client cache (BUILDID/debuginfo), nothing fetched:
    // the same addresses named through asys's symbolizer directly.
    let cache = s.path("debuginfod-cache");
    std::fs::create_dir_all(cache.join(&id)).unwrap();
    std::fs::copy(&debug, cache.join(&id).join("debuginfo")).unwrap();
    let mut child = asys()
        .args(["__symbolize-addresses", bare.to_str().unwrap()])
        .env("DEBUGINFOD_CACHE_PATH", &cache)
        .env("ASYS_DEBUG_ROOT", s.path("empty-root"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = sampled.keys().map(|a| format!("{a:#x}\n")).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    let ours = parse_addr2line(&String::from_utf8_lossy(&o.stdout));
    let theirs = addr2line(&full, &sampled.keys().copied().collect::<Vec<_>>());
    for (a, b) in &theirs {
        let chain: Vec<(Frame, bool)> = ours[a].iter().map(|f| (f.clone(), false)).collect();
        assert!(agrees(&chain, b), "{a:#x}: {:?} vs {b:?}", ours[a]);
    }
    let with_lines = ours.values().filter(|c| c[0].1.contains("hot.cc:")).count();
    assert!(
        with_lines >= 5,
        "lines for {with_lines} addresses: {ours:?}"
    );

    // A debug file whose CRC is not the link's is not used: the frames
    // have no lines (and their functions come from the symbol table).
    std::fs::write(&debug, b"not the debug file").unwrap();
    let (report, _) = profile(&s, &linked, "0.4", &[]);
    let sampled = sampled_frames(&report, &linked);
    assert!(!sampled.is_empty());
    for (a, chain) in &sampled {
        assert!(
            chain.len() == 1 && chain[0].0.1 == "??:?",
            "{a:#x}: lines from a debug file that does not match: {chain:?}"
        );
    }
}

/// The GNU build id of `bin` (hex), as readelf prints it.
fn build_id(bin: &Path) -> String {
    let o = tool("readelf", &["-n", bin.to_str().unwrap()]);
    stdout(&o)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("a build id")
}

/// Profiles `hot` (built now; also copied to `hot-as-run`) and, once it
/// runs, replaces it by another build as a build does, renaming a new file
/// over it. Returns (report, asys's stderr after its first line, the path
/// traced, the copy, recorded build id, new build id).
fn rebuilt_while_traced(
    s: &Scratch,
    env: &[(&str, &str)],
) -> (PathBuf, String, PathBuf, PathBuf, String, String) {
    let bin = build(&s.0, "hot", &[]);
    let copy = s.path("hot-as-run");
    std::fs::copy(&bin, &copy).unwrap();
    let recorded = build_id(&bin);
    let other = build(&s.0, "hot-new", &["-DSALT=0x9E3779B97F4A7C17ull"]);
    let now = build_id(&other);
    assert_ne!(recorded, now);
    let report = s.path("rebuilt");
    let mut cmd = asys();
    cmd.args(["profile", "-s", "process-tree", "-b", "dwarf", "-o"])
        .arg(&report)
        .arg(&bin)
        .arg("3");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (g, mut err, _) = start_tracing(&mut cmd);
    // The process runs (its mappings scanned at exec: on a loaded machine
    // asys reads the exec event a while after it, so the rename waits 1.5 s
    // of the program's 3).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    std::fs::rename(&other, &bin).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(g.wait().success(), "{rest}");
    (
        report.with_extension("asysrep"),
        rest,
        bin,
        copy,
        recorded,
        now,
    )
}

#[test]
fn a_binary_rebuilt_while_traced_is_warned_about_and_not_named_from() {
    require_root();
    let s = Scratch::new("source-lines-rebuilt");
    let (report, rest, bin, _, recorded, now) = rebuilt_while_traced(&s, &[]);
    let warning = format!(
        "{}: rebuilt since recording (build id {recorded} recorded, {now} now); its frames are left unnamed",
        bin.display()
    );
    assert_eq!(rest.matches(&warning).count(), 1, "{rest}");
    let meta = metadata(&report);
    let rebuilt = meta["rebuilt_binaries"].as_array().unwrap();
    assert_eq!(rebuilt.len(), 1, "{meta}");
    assert_eq!(rebuilt[0]["path"], bin.to_str().unwrap());
    assert_eq!(rebuilt[0]["recorded_build_id"], recorded.as_str());
    assert_eq!(rebuilt[0]["build_id"], now.as_str());
    assert_eq!(rebuilt[0]["named_from"], Value::Null);
    // Samples in it: addresses, not the new build's names or lines.
    let sampled = sampled_frames(&report, &bin);
    assert!(sampled.len() >= 5, "{sampled:?}");
    for (a, chain) in &sampled {
        assert!(
            chain.len() == 1 && chain[0].0.0.starts_with("0x") && chain[0].0.1 == "??:?",
            "{a:#x} named from the rebuilt file: {chain:?}"
        );
    }
}

#[test]
fn a_rebuilt_binary_is_named_from_a_debug_file_of_the_recorded_build() {
    require_root();
    let s = Scratch::new("source-lines-rebuilt-debug");
    // The debug file of the build that will run (the build is
    // reproducible: the same source and flags give the same build id),
    // under a debug root of the test's own.
    let first = build(&s.0, "hot", &[]);
    let id = build_id(&first);
    let root = s.path("debug-root");
    let dir = root.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    let debug = dir.join(format!("{}.debug", &id[2..]));
    tool(
        "objcopy",
        &[
            "--only-keep-debug",
            first.to_str().unwrap(),
            debug.to_str().unwrap(),
        ],
    );
    let env = [("ASYS_DEBUG_ROOT", root.to_str().unwrap())];
    let (report, rest, bin, copy, recorded, now) = rebuilt_while_traced(&s, &env);
    assert_eq!(recorded, id, "g++ did not build the same binary twice");
    let warning = format!(
        "{}: rebuilt since recording (build id {recorded} recorded, {now} now); its frames are named from {}",
        bin.display(),
        debug.display()
    );
    assert_eq!(rest.matches(&warning).count(), 1, "{rest}");
    let meta = metadata(&report);
    assert_eq!(
        meta["rebuilt_binaries"][0]["named_from"],
        debug.to_str().unwrap()
    );
    // Named as addr2line names the binary that ran (its copy).
    let sampled = sampled_frames(&report, &bin);
    let (n, inlined) = check_against_addr2line(&sampled, &copy);
    assert!(n >= 5 && inlined >= 2, "{n} addresses, {inlined} inlined");
}
