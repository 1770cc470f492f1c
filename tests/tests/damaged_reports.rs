//! Damaged reports given to `asys stats`: a real report of a sim workload is
//! truncated, has bytes flipped, members swapped or removed, its metadata
//! edited, or is replaced by a FIFO, an empty file or a directory. asys must
//! never panic nor hang, and must say in one line what is wrong (exit
//! non-zero), or, for a report marked as recovered, print the explicit
//! warning (exit 0). The whole report must read cleanly first, so a reader
//! that refuses everything fails here too.
use std::{
    collections::BTreeMap,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use asys_tests::*;

/// Reports that read every table a sim report has (and some it lacks).
const REPORTS: &str = "hggc_api_sum,hggc_api_trace,hggc_ppu_trace,hggc_ppu_kern_sum,\
hggc_ppu_mem_size_sum,hgtx_sum,hgtx_pushpop_trace,device_memory_usage_summary,\
cpu_sample_sum,cpu_ctxsw_sum,cpu_wait_sum,osrt_sum,hggc_api_backtrace,libraries";

/// How long one `asys stats` may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(20);

struct Outcome {
    code: Option<i32>,
    stderr: String,
    hung: bool,
}

fn stats(path: &Path) -> Outcome {
    run_asys(&["stats", "--report", REPORTS], path)
}

/// `asys ARGS PATH`, killed if it runs longer than [`HANG`].
fn run_asys(args: &[&str], path: &Path) -> Outcome {
    let mut child = Command::new(asys_bin())
        .args(args)
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run asys");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let deadline = Instant::now() + HANG;
    let (code, hung) = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break (st.code(), false);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break (None, true);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Outcome {
        code,
        stderr: reader.join().unwrap(),
        hung,
    }
}

/// One tar member: where its header and data lie.
#[derive(Clone, Debug)]
struct Member {
    name: String,
    header: usize,
    data: usize,
    size: usize,
}

impl Member {
    fn padded_end(&self) -> usize {
        self.data + self.size.div_ceil(512) * 512
    }
}

fn octal(field: &[u8]) -> usize {
    let text: String = field
        .iter()
        .take_while(|&&b| b != 0 && b != b' ')
        .map(|&b| b as char)
        .collect();
    usize::from_str_radix(text.trim(), 8).unwrap()
}

/// The members of a (whole) tar, read by hand: the test must not trust the
/// code under test to find them.
fn members(tar: &[u8]) -> Vec<Member> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 512 <= tar.len() && tar[at..at + 512].iter().any(|&b| b != 0) {
        let h = &tar[at..at + 512];
        let name_len = h[..100].iter().position(|&b| b == 0).unwrap_or(100);
        let name = String::from_utf8(h[..name_len].to_vec()).unwrap();
        let size = octal(&h[124..136]);
        let m = Member {
            name,
            header: at,
            data: at + 512,
            size,
        };
        at = m.padded_end();
        out.push(m);
    }
    out
}

/// Recomputes a header's checksum (the sum of its bytes, the field itself
/// counted as spaces), as tar readers check it.
fn fix_checksum(header: &mut [u8]) {
    header[148..156].fill(b' ');
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    header[148..156].copy_from_slice(text.as_bytes());
}

/// A tar of `members` (name, bytes), as asys packs one.
fn tar_of(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in members {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..108].copy_from_slice(b"0000644\0");
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        h[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
        h[136..148].copy_from_slice(b"00000000000\0");
        h[156] = b'0';
        h[257..265].copy_from_slice(b"ustar  \0");
        fix_checksum(&mut h);
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

/// CRC-32 (IEEE), bit by bit: the test's own, not the one asys uses.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The report rebuilt with its metadata changed by `edit` (and the metadata
/// checksum made right again, so the checks behind it are what fails).
fn with_metadata(tar: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut parts: Vec<(String, Vec<u8>)> = members(tar)
        .iter()
        .map(|m| (m.name.clone(), tar[m.data..m.data + m.size].to_vec()))
        .collect();
    let mut meta: serde_json::Value = serde_json::from_slice(&parts[0].1).unwrap();
    edit(&mut meta);
    let json = serde_json::to_vec_pretty(&meta).unwrap();
    let crc = format!("{:08x}\n", crc32(&json));
    parts[0].1 = json;
    for p in &mut parts {
        if p.0 == "metadata.json.crc32" {
            p.1 = crc.clone().into_bytes();
        }
    }
    tar_of(&parts)
}

#[derive(Default)]
struct Tally {
    /// Per class: (cases, clear errors, recovered warnings).
    classes: BTreeMap<&'static str, (u32, u32, u32)>,
    failures: Vec<String>,
}

impl Tally {
    /// Runs stats on `bytes` (written to `path`) or on `path` as it is.
    fn check(&mut self, class: &'static str, what: &str, path: &Path, recovered: bool) {
        let o = stats(path);
        let entry = self.classes.entry(class).or_default();
        entry.0 += 1;
        let lines: Vec<&str> = o.stderr.lines().collect();
        let fail = |why: &str| format!("{class}: {what}: {why} (exit {:?}): {}", o.code, o.stderr);
        if o.hung {
            self.failures.push(fail("hung"));
        } else if o.code == Some(101) || o.stderr.contains("panicked") {
            self.failures.push(fail("panicked"));
        } else if recovered {
            let warned = lines.iter().any(|l| {
                l.starts_with("asys: warning: ") && l.contains("is a recovered partial report (")
            });
            if o.code == Some(0) && warned {
                entry.2 += 1;
            } else {
                self.failures.push(fail("no recovered-report warning"));
            }
        } else if o.code == Some(0) {
            self.failures.push(fail("damage not reported"));
        } else if lines.len() != 1 || !lines[0].starts_with("asys: error: ") {
            self.failures.push(fail("not one error line"));
        } else if ![
            "is damaged: ",
            "is not an asys report",
            "not a report file",
            "was written with report schema",
        ]
        .iter()
        .any(|k| lines[0].contains(k))
        {
            self.failures
                .push(fail("the error does not name the damage"));
        } else {
            entry.1 += 1;
        }
    }

    fn bytes(&mut self, class: &'static str, what: &str, dir: &Path, bytes: &[u8]) {
        let path = dir.join("damaged.asysrep");
        std::fs::write(&path, bytes).unwrap();
        self.check(class, what, &path, false);
    }
}

#[test]
fn damaged_reports_give_one_clear_error_never_a_panic_or_a_hang() {
    require_root();
    let s = Scratch::new("damaged");
    let p = profile_workload(
        &s,
        &["-t", "hggc,hgtx", "-f", "true"],
        "train_step",
        &["3"],
        &[],
    );
    assert!(p.out.status.success(), "profile failed: {}", stderr(&p.out));
    let whole = stats(&p.report);
    assert_eq!(
        (whole.code, whole.stderr.as_str()),
        (Some(0), ""),
        "the undamaged report must read cleanly"
    );
    let tar = std::fs::read(&p.report).unwrap();
    let ms = members(&tar);
    assert!(ms.len() >= 4, "members: {ms:?}");
    assert_eq!(ms[0].name, "metadata.json");
    let dir = s.0.clone();
    let mut t = Tally::default();

    // Truncation at every member boundary (header, data, end of data, end of
    // padding) and in the middle of every member, and into the end marker.
    let mut cuts = std::collections::BTreeSet::new();
    for m in &ms {
        cuts.extend([m.header, m.data, m.data + m.size, m.padded_end()]);
        cuts.insert(m.data + m.size / 2);
        cuts.insert(m.header + 100);
    }
    cuts.insert(tar.len() - 512);
    cuts.insert(tar.len() - 1);
    cuts.remove(&0);
    for cut in cuts.into_iter().filter(|&c| c < tar.len()) {
        t.bytes("truncation", &format!("cut at {cut}"), &dir, &tar[..cut]);
    }

    // Byte flips at offsets spread evenly across the file, including the
    // first and last bytes.
    let flips = 150;
    for k in 0..flips {
        let at = k * (tar.len() - 1) / (flips - 1);
        let mut b = tar.clone();
        b[at] ^= 0x5a;
        t.bytes("byte flip", &format!("at {at}"), &dir, &b);
    }

    // Two members' names exchanged in their headers (checksums fixed).
    for i in 0..ms.len() {
        for j in i + 1..ms.len() {
            let mut b = tar.clone();
            let (a, c) = (ms[i].header, ms[j].header);
            let name_a: Vec<u8> = b[a..a + 100].to_vec();
            let name_c: Vec<u8> = b[c..c + 100].to_vec();
            b[a..a + 100].copy_from_slice(&name_c);
            b[c..c + 100].copy_from_slice(&name_a);
            fix_checksum(&mut b[a..a + 512]);
            fix_checksum(&mut b[c..c + 512]);
            let what = format!("{} <-> {}", ms[i].name, ms[j].name);
            t.bytes("swapped members", &what, &dir, &b);
        }
    }

    // One member removed from the tar.
    for m in &ms {
        let mut b = tar[..m.header].to_vec();
        b.extend_from_slice(&tar[m.padded_end()..]);
        t.bytes("missing member", &m.name, &dir, &b);
    }

    // Metadata edits, with the metadata's own checksum made right.
    let meta: serde_json::Value =
        serde_json::from_slice(&tar[ms[0].data..ms[0].data + ms[0].size]).unwrap();
    let tables: Vec<String> = meta["tables"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let listed: Vec<String> = meta["members"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(!listed.is_empty(), "the metadata lists no members");
    for table in &tables {
        let b = with_metadata(&tar, |m| {
            let n = m["tables"][table].as_u64().unwrap();
            m["tables"][table] = (n + 1).into();
        });
        t.bytes("metadata edit", &format!("{table} rows + 1"), &dir, &b);
    }
    let b = with_metadata(&tar, |m| m["schema_version"] = 999.into());
    t.bytes("metadata edit", "schema_version", &dir, &b);
    let b = with_metadata(&tar, |m| m["format"] = "tarball".into());
    t.bytes("metadata edit", "format", &dir, &b);
    for name in &listed {
        let b = with_metadata(&tar, |m| {
            let n = m["members"][name]["bytes"].as_u64().unwrap();
            m["members"][name]["bytes"] = (n + 1).into();
        });
        t.bytes("metadata edit", &format!("{name} bytes + 1"), &dir, &b);
        let b = with_metadata(&tar, |m| {
            let c = m["members"][name]["crc32"].as_u64().unwrap();
            m["members"][name]["crc32"] = (c ^ 1).into();
        });
        t.bytes("metadata edit", &format!("{name} crc32"), &dir, &b);
        let b = with_metadata(&tar, |m| {
            m["members"].as_object_mut().unwrap().remove(name);
        });
        t.bytes("metadata edit", &format!("{name} unlisted"), &dir, &b);
    }
    let b = with_metadata(&tar, |m| {
        m["members"]["ghost.parquet"] = serde_json::json!({"bytes": 10, "crc32": 1});
    });
    t.bytes("metadata edit", "a member that is not there", &dir, &b);
    let b = with_metadata(&tar, |m| {
        m["tables"] = serde_json::json!({"hggc_api": "many"})
    });
    t.bytes("metadata edit", "rows not a number", &dir, &b);
    // An edit without the checksum made right.
    let mut b = tar.clone();
    let at = ms[0].data + ms[0].size / 2;
    b[at] = if b[at] == b'1' { b'2' } else { b'1' };
    t.bytes("metadata edit", "a byte, checksum not fixed", &dir, &b);

    // Not report files at all.
    let fifo = dir.join("fifo.asysrep");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    t.check("not a file", "FIFO", &fifo, false);
    let empty = dir.join("empty.asysrep");
    std::fs::write(&empty, b"").unwrap();
    t.check("not a file", "empty file", &empty, false);
    let sub = dir.join("dir.asysrep");
    std::fs::create_dir(&sub).unwrap();
    t.check("not a file", "directory", &sub, false);
    t.check("not a file", "/dev/zero", Path::new("/dev/zero"), false);
    t.bytes(
        "not a file",
        "a tar of something else",
        &dir,
        &tar_of(&[("x.txt".into(), b"hello".to_vec())]),
    );
    t.bytes("not a file", "text", &dir, b"not a report\n");

    // A recovered partial report: read, with the warning; damaged as well,
    // it is an error like any other.
    let start = meta["start_monotonic_ns"].as_i64().unwrap();
    let recovered = with_metadata(&tar, |m| {
        m["recovered"] = serde_json::json!({
            "reason": "asys was killed",
            "last_checkpoint_monotonic_ns": start + 2_500_000_000i64,
        })
    });
    let path = dir.join("recovered.asysrep");
    std::fs::write(&path, &recovered).unwrap();
    t.check("recovered", "whole", &path, true);
    let o = stats(&path);
    assert!(
        o.stderr.contains(&format!(
            "{} is a recovered partial report (asys was killed): it holds what was recorded up to 2.5 s after its start",
            path.display()
        )),
        "{}",
        o.stderr
    );
    let cut = members(&recovered).last().unwrap().data + 10;
    t.bytes("recovered", "truncated as well", &dir, &recovered[..cut]);

    for (class, (n, errors, warned)) in &t.classes {
        println!("{class}: {n} cases, {errors} clear errors, {warned} recovered warnings");
    }
    let total: u32 = t.classes.values().map(|c| c.0).sum();
    println!("{total} cases, {} failures", t.failures.len());
    assert!(
        t.failures.is_empty(),
        "{} of {total} cases failed:\n{}",
        t.failures.len(),
        t.failures.join("\n")
    );
}

/// What each command on a damaged report is, and the target it would write
/// (None: analyze prints to the console).
const COMMANDS: &[(&str, &[&str], Option<&str>)] = &[
    (
        "export sqlite",
        &["export", "--type", "sqlite"],
        Some("sqlite"),
    ),
    (
        "export parquetdir",
        &["export", "--type", "parquetdir"],
        Some("parquetdir"),
    ),
    (
        "export collapsed",
        &["export", "--type", "collapsed"],
        Some("collapsed"),
    ),
    (
        "export flamegraph",
        &["export", "--type", "flamegraph"],
        Some("svg"),
    ),
    (
        "export kineto",
        &["export", "--type", "kineto"],
        Some("pt.trace.json"),
    ),
    ("analyze", &["analyze"], None),
];

/// Runs every command of [`COMMANDS`] on `bytes`: each must exit 0 (then
/// its target is whole: it exists) or give one `asys: error:` line, exit
/// non-zero and leave no target behind; never panic nor hang. Returns the
/// failures, and counts the errors per command.
fn check_commands(
    what: &str,
    dir: &Path,
    bytes: &[u8],
    errors: &mut BTreeMap<&'static str, u32>,
) -> Vec<String> {
    let path = dir.join("damaged.asysrep");
    std::fs::write(&path, bytes).unwrap();
    let mut failures = Vec::new();
    for (name, args, ext) in COMMANDS {
        let base = dir.join("out");
        let target = ext.map(|e| base.with_extension(e));
        let mut args = args.to_vec();
        if ext.is_some() {
            args.extend(["-o", base.to_str().unwrap()]);
        }
        let o = run_asys(&args, &path);
        let lines: Vec<&str> = o.stderr.lines().collect();
        let exists = target
            .as_ref()
            .is_some_and(|t| t.symlink_metadata().is_ok());
        let fail = |why: &str| format!("{name}: {what}: {why} (exit {:?}): {}", o.code, o.stderr);
        if o.hung {
            failures.push(fail("hung"));
        } else if o.code == Some(101) || o.stderr.contains("panicked") {
            failures.push(fail("panicked"));
        } else if o.code == Some(0) {
            if target.is_some() && !exists {
                failures.push(fail("exit 0 without its target"));
            }
        } else if lines.len() != 1 || !lines[0].starts_with("asys: error: ") {
            failures.push(fail("not one error line"));
        } else if exists {
            failures.push(fail("failed, yet left its target behind"));
        } else {
            *errors.entry(name).or_default() += 1;
        }
        if let Some(t) = &target {
            if t.is_dir() {
                std::fs::remove_dir_all(t).unwrap();
            } else if exists {
                std::fs::remove_file(t).unwrap();
            }
        }
        // Nothing else may be left beside the target (temporary files).
        let left: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "damaged.asysrep" && !n.starts_with("train_step"))
            .collect();
        if !left.is_empty() {
            failures.push(fail(&format!("left {left:?} behind")));
            for n in left {
                let p = dir.join(n);
                let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
            }
        }
    }
    failures
}

/// export (every file format) and analyze on damaged reports: a one-line
/// error and a non-zero exit, never a panic, and never a half-written
/// target. Besides damage the container's checks catch as it opens
/// (truncation, flipped bytes, missing members), each Parquet member is
/// corrupted in its middle with the metadata's checksum made to match, so
/// the damage is found only while the tables are read, after writing began.
#[test]
fn damaged_reports_make_export_and_analyze_fail_cleanly_without_a_target() {
    require_root();
    let s = Scratch::new("damaged-export");
    let p = profile_workload(
        &s,
        &["-t", "hggc,hgtx", "-f", "true"],
        "train_step",
        &["3"],
        &[],
    );
    assert!(p.out.status.success(), "profile failed: {}", stderr(&p.out));
    let tar = std::fs::read(&p.report).unwrap();
    let dir = s.0.join("cases");
    std::fs::create_dir(&dir).unwrap();
    // The whole report exports and analyzes cleanly first.
    let mut errors = BTreeMap::new();
    let whole = check_commands("whole report", &dir, &tar, &mut errors);
    assert!(
        whole.is_empty() && errors.is_empty(),
        "the undamaged report: {whole:?} {errors:?}"
    );
    let ms = members(&tar);
    let mut failures = Vec::new();
    let mut cases = 0;
    let mut case = |what: String, bytes: &[u8], failures: &mut Vec<String>| {
        cases += 1;
        failures.extend(check_commands(&what, &dir, bytes, &mut errors));
    };

    for m in &ms {
        for cut in [m.header + 100, m.data + m.size / 2, m.padded_end()] {
            if cut < tar.len() {
                case(format!("cut at {cut}"), &tar[..cut], &mut failures);
            }
        }
        let mut b = tar[..m.header].to_vec();
        b.extend_from_slice(&tar[m.padded_end()..]);
        case(format!("{} missing", m.name), &b, &mut failures);
    }
    let flips = 30;
    for k in 0..flips {
        let at = k * (tar.len() - 1) / (flips - 1);
        let mut b = tar.clone();
        b[at] ^= 0x5a;
        case(format!("byte flip at {at}"), &b, &mut failures);
    }
    // Parquet members corrupted past the container's checks: 64 bytes in
    // the middle of the data pages zeroed, the listed checksum recomputed.
    let mut deep = 0;
    for m in ms
        .iter()
        .filter(|m| m.name.ends_with(".parquet") && m.size > 256)
    {
        let mut b = tar.clone();
        let mid = m.data + m.size / 2;
        b[mid - 32..mid + 32].fill(0);
        if b == tar {
            continue;
        }
        let crc = crc32(&b[m.data..m.data + m.size]);
        let b = with_metadata(&b, |meta| meta["members"][&m.name]["crc32"] = crc.into());
        deep += 1;
        case(
            format!("{} corrupted, checksum fixed", m.name),
            &b,
            &mut failures,
        );
    }
    assert!(deep >= 3, "only {deep} Parquet members to corrupt");
    println!(
        "{cases} damaged reports ({deep} past the container's checks); clear errors: {errors:?}"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
