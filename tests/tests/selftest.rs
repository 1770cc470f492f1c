//! `asys selftest`: each capability this kernel has is counted exactly and
//! said ok, each it lacks is said absent, and a broken install or host
//! (the injection library removed, the kernel's BTF hidden) fails in one
//! line naming the cause. It leaves nothing in the temporary folder.
use std::{collections::BTreeMap, path::Path, process::Command};

use asys_tests::*;

/// Every line selftest prints, in order.
const CAPABILITIES: [&str; 8] = [
    "kernel BTF",
    "loader hook and uprobes",
    "injection library",
    "USDT marker",
    "sched and wake-ups",
    "CPU sampling with DWARF",
    "tracepoint probe",
    "kprobe probe",
];

struct Outcome {
    code: Option<i32>,
    /// Capability → (verdict, the rest of its line).
    lines: BTreeMap<String, (String, String)>,
    out: String,
}

/// Runs `cmd` (a selftest) with TMPDIR in `tmp`, and parses its lines.
fn selftest(mut cmd: Command, tmp: &Path) -> Outcome {
    let o = cmd.env("TMPDIR", tmp).output().unwrap();
    let out = stdout(&o);
    let mut lines = BTreeMap::new();
    for l in out.lines() {
        if let Some(name) = CAPABILITIES.iter().find(|c| l.starts_with(*c)) {
            let rest = l[name.len()..].trim_start();
            let (verdict, rest) = rest.split_once(' ').unwrap();
            lines.insert(
                name.to_string(),
                (verdict.to_string(), rest.trim_start().to_string()),
            );
        }
    }
    assert_eq!(
        lines.len(),
        CAPABILITIES.len(),
        "a line per capability:\n{out}\n{}",
        stderr(&o)
    );
    assert!(
        std::fs::read_dir(tmp).unwrap().next().is_none(),
        "selftest left files in its temporary folder"
    );
    Outcome {
        code: o.status.code(),
        lines,
        out,
    }
}

/// "expected N what, got M" → (N, M).
fn counts(rest: &str) -> (u64, u64) {
    let n = |s: &str| {
        s.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let expected = rest.strip_prefix("expected ").unwrap();
    let got = &rest[rest.find(", got ").unwrap() + 6..];
    (n(expected.trim_start_matches("about ")), n(got))
}

#[test]
fn every_capability_of_this_kernel_is_counted_and_ok() {
    require_root();
    let s = Scratch::new("selftest");
    let mut c = asys();
    c.arg("selftest");
    let o = selftest(c, &s.0);
    assert_eq!(o.code, Some(0), "{}", o.out);
    for (name, (verdict, rest)) in &o.lines {
        let has = match name.as_str() {
            "kprobe probe" => kernel_has_kprobes(),
            "kernel BTF" => Path::new("/sys/kernel/btf/vmlinux").exists(),
            _ => true,
        };
        if !has {
            assert_eq!(verdict, "absent", "{name}: {rest}");
            assert!(rest.contains("the kernel lacks"), "{name}: {rest}");
            continue;
        }
        assert_eq!(verdict, "ok", "{name}: {rest}");
        if name == "kernel BTF" {
            continue;
        }
        let (want, got) = counts(rest);
        match name.as_str() {
            // The reader may find two bytes once, and its last wake-up is
            // the writer's exit: within a tenth.
            "sched and wake-ups" => assert!(got * 10 >= want * 9, "{name}: {rest}"),
            // Samples follow the CPU time the spin got: at least half.
            "CPU sampling with DWARF" => assert!(got * 2 >= want, "{name}: {rest}"),
            _ => assert_eq!(got, want, "{name}: {rest}"),
        }
    }
}

/// A copy of the install (bin/asys, lib/asys/sim) without
/// lib/asys/libasys_inject.so.
#[test]
fn an_install_without_its_injection_library_fails_on_that_line() {
    require_root();
    let s = Scratch::new("selftest-noinject");
    let prefix = s.path("prefix");
    let sim_dir = prefix.join("lib/asys/sim");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::create_dir_all(&sim_dir).unwrap();
    std::fs::copy(asys_bin(), prefix.join("bin/asys")).unwrap();
    for e in std::fs::read_dir(sim().join("lib")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, sim_dir.join(p.file_name().unwrap())).unwrap();
    }
    let tmp = s.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut c = Command::new(prefix.join("bin/asys"));
    c.arg("selftest").env_remove("ASYS_INJECTION_LIB");
    let o = selftest(c, &tmp);
    assert_eq!(o.code, Some(1), "{}", o.out);
    let (verdict, rest) = &o.lines["injection library"];
    assert_eq!(verdict, "FAILED", "{}", o.out);
    let want = prefix.join("lib/asys/libasys_inject.so");
    assert!(
        rest.contains("no injection library") && rest.contains(want.to_str().unwrap()),
        "{rest}"
    );
    // The rest of the host still works.
    for (name, (verdict, rest)) in &o.lines {
        if name != "injection library" {
            assert_ne!(verdict, "FAILED", "{name}: {rest}");
        }
    }
}

/// The kernel's BTF hidden (a tmpfs over /sys/kernel/btf in a mount
/// namespace of selftest's own, as a container that mounts /sys in part
/// would): the BTF line fails, naming the file.
#[test]
fn hidden_kernel_btf_fails_on_that_line() {
    require_root();
    assert!(
        Path::new("/sys/kernel/btf/vmlinux").exists(),
        "this kernel has no BTF to hide"
    );
    let s = Scratch::new("selftest-nobtf");
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs none /sys/kernel/btf && exec \"$0\" selftest")
        .arg(asys_bin());
    let o = selftest(c, &s.0);
    assert_eq!(o.code, Some(1), "{}", o.out);
    let (verdict, rest) = &o.lines["kernel BTF"];
    assert_eq!(verdict, "FAILED", "{}", o.out);
    assert!(
        rest.contains("/sys/kernel/btf/vmlinux") && rest.contains("though the kernel has BTF"),
        "{rest}"
    );
    for (name, (verdict, rest)) in &o.lines {
        if name != "kernel BTF" && name != "kprobe probe" {
            assert_ne!(verdict, "FAILED", "{name}: {rest}");
        }
    }
}
