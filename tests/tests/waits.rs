//! Why threads waited (`cpu_wait_sum`, from `sched`, `sched_wakeups` and
//! the switch-outs' kernel stacks) and kernel stacks of samples taken in
//! system calls, checked against the workload's own account of each wait
//! (`tests/workloads/waits.c`) and against /proc/kallsyms, with the report's
//! tables read by DuckDB.
use std::{collections::BTreeMap, path::PathBuf, process::Command};

use asys_tests::*;
use serde_json::Value;

/// What the workload measured itself.
struct Own {
    holder: u64,
    waiter: u64,
    /// The rounds in which the waiter slept on the lock (its own count).
    waits: u64,
    wait_total: u64,
    wait_max: u64,
    vforks: u64,
    children: Vec<u64>,
    vfork_total: u64,
    /// The vforks in which the parent slept (its own count), and their time.
    slept: u64,
    slept_total: u64,
    /// The workload's line of each round (slept:wait_ns), for messages.
    rounds: String,
}

fn parse(out: &str) -> Own {
    let line = |p: &str| -> Vec<&str> {
        out.lines()
            .find(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("no {p} line in {out}"))
            .split_whitespace()
            .collect()
    };
    let n = |w: &[&str], k: &str| -> u64 {
        let i = w.iter().position(|x| *x == k).unwrap();
        w[i + 1].parse().unwrap()
    };
    let lock = line("lock ");
    let vfork = line("vfork ");
    let from = vfork.iter().position(|x| *x == "children").unwrap() + 1;
    let to = vfork.iter().position(|x| *x == "vfork_total_ns").unwrap();
    Own {
        holder: n(&lock, "holder_tid"),
        waiter: n(&lock, "waiter_tid"),
        waits: n(&lock, "waits"),
        wait_total: n(&lock, "wait_total_ns"),
        wait_max: n(&lock, "wait_max_ns"),
        vforks: n(&vfork, "vforks"),
        children: vfork[from..to].iter().map(|c| c.parse().unwrap()).collect(),
        vfork_total: n(&vfork, "vfork_total_ns"),
        slept: n(&vfork, "slept"),
        slept_total: n(&vfork, "slept_total_ns"),
        rounds: line("lock_rounds").join(" "),
    }
}

/// Profiles the workload with context switches and samples; the report
/// and the workload's account.
fn profile(s: &Scratch) -> (PathBuf, Own) {
    let bin = c_workload("waits.c", &["-pthread"]);
    let report = s.path("r");
    let o = asys()
        .args([
            "profile",
            "--cpuctxsw",
            "process-tree",
            "-s",
            "process-tree",
            "-o",
        ])
        .arg(&report)
        .arg(&bin)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    assert_nothing_lost(&stderr(&o), &metadata(&report));
    (report, parse(&stdout(&o)))
}

fn row<'a>(rows: &'a [Value], tid: u64, state: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["Tid"].as_u64() == Some(tid) && r["State"] == state)
        .unwrap_or_else(|| panic!("no {state} row for tid {tid} in {rows:#?}"))
}

/// Off-CPU time is the part of the workload's measured wait between the
/// switch out and the switch back in: a little less than the wait (the
/// system call's entry and return), never more than 1 ms over, and within
/// 5 % + 0.5 ms per wait under it.
fn assert_close(traced: u64, own: u64, waits: u64, what: &str) {
    assert!(
        traced <= own + 1_000_000 && traced + own / 20 + waits * 500_000 >= own,
        "{what}: traced {traced} ns off CPU, the workload measured {own} ns"
    );
}

#[test]
fn lock_waits_show_their_time_state_and_the_thread_that_released_the_lock() {
    require_root();
    let s = Scratch::new("waits-lock");
    let (report, own) = profile(&s);
    let rows = stats_json(&report, "cpu_wait_sum");
    let w = row(&rows, own.waiter, "S");
    assert_eq!(w["Name"], "waiter", "{w}");
    assert_eq!(w["Reason"], "sleeping", "{w}");
    // Every round it slept on the lock in (nearly all: the holder waited
    // until /proc said so) is a wait, and the holder's unlock woke it each
    // time.
    assert!(own.waits >= 1, "the waiter never slept on the lock");
    // A switch the kernel did not deliver (the waiter switched in from a
    // thread whose switches it never reports) joins two waits into one
    // that is not counted, and is counted as lost: each such loss may
    // account for one wait, no more.
    let undelivered = undelivered_switches(&metadata(&report));
    let waits = w["Num Waits"].as_u64().unwrap();
    assert!(
        waits <= own.waits && waits + undelivered >= own.waits,
        "{w}\n{}\n{undelivered} switches undelivered",
        own.rounds
    );
    let missed = own.waits - waits;
    assert_eq!(w["Top Waker Tid"].as_u64(), Some(own.holder), "{w}");
    assert_eq!(w["Top Waker"], "holder", "{w}");
    assert_eq!(w["Top Waker Wakes"].as_u64(), Some(waits), "{w}");
    assert_eq!(w["Other Wakers"], "", "{w}");
    let total = w["Total Time (ns)"].as_u64().unwrap();
    if missed == 0 {
        assert_close(
            total,
            own.wait_total,
            own.waits,
            &format!("lock waits ({})", own.rounds),
        );
    } else {
        // Not which waits went uncounted: the traced time is at most the
        // workload's, and at least it less its `missed` longest waits.
        assert!(
            total <= own.wait_total + 1_000_000
                && total + missed * own.wait_max + own.wait_total / 20 + waits * 500_000
                    >= own.wait_total,
            "lock waits: traced {total} ns, the workload measured {} ns ({missed} uncounted: {})",
            own.wait_total,
            own.rounds
        );
    }
    let max = w["Max (ns)"].as_u64().unwrap();
    if missed == 0 {
        assert_close(max, own.wait_max, 1, "longest lock wait");
    } else {
        assert!(max <= own.wait_max + 1_000_000, "{w}\n{}", own.rounds);
    }
    // It left the CPU in the futex wait.
    let stack = w["Kernel Stack"].as_str().unwrap();
    assert!(stack.contains("futex"), "{w}");
    // And the holder woke it from its futex wake (the unlock).
    assert!(
        w["Waker Stack"].as_str().unwrap().contains("futex_wake"),
        "{w}"
    );
}

#[test]
fn vfork_waits_are_uninterruptible_and_woken_by_the_children() {
    require_root();
    let s = Scratch::new("waits-vfork");
    let (report, own) = profile(&s);
    let rows = stats_json(&report, "cpu_wait_sum");
    // Each vfork the parent slept in (by its own count of voluntary
    // switches: on a busy machine a preempted parent may find its child
    // gone) is one D wait.
    assert!(
        own.slept >= 1,
        "the parent never slept in vfork: {}",
        own.vfork_total
    );
    let d = row(&rows, own.holder, "D");
    // As for the lock: a switch the kernel did not deliver may leave one
    // wait uncounted.
    let undelivered = undelivered_switches(&metadata(&report));
    let waits = d["Num Waits"].as_u64().unwrap();
    assert!(
        waits <= own.slept && waits + undelivered >= own.slept,
        "{d}: the parent slept in {} vforks; {undelivered} switches undelivered",
        own.slept
    );
    let total = d["Total Time (ns)"].as_u64().unwrap();
    if waits == own.slept {
        assert_close(total, own.slept_total, own.slept, "vfork waits");
    } else {
        assert!(total <= own.slept_total + 1_000_000, "{d}");
    }
    // Each child woke its parent at most once, when it exited.
    assert_eq!(own.children.len() as u64, own.vforks);
    let top = d["Top Waker Tid"].as_u64().unwrap();
    assert!(
        own.children.contains(&top),
        "{d}: children {:?}",
        own.children
    );
    assert_eq!(d["Top Waker Wakes"].as_u64(), Some(1), "{d}");
    let others = d["Other Wakers"].as_str().unwrap();
    for part in others.split(", ").filter(|p| !p.is_empty()) {
        let tid: u64 = part
            .split(['(', ')'])
            .nth(1)
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{part}"));
        assert!(
            own.children.contains(&tid),
            "{d}: children {:?}",
            own.children
        );
    }
    let stack = d["Kernel Stack"].as_str().unwrap();
    assert!(
        stack.contains("vfork") || stack.contains("completion"),
        "{d}"
    );
    // The children slept in nanosleep (S), in their own rows.
    for c in &own.children {
        let r = row(&rows, *c, "S");
        assert!(
            r["Kernel Stack"].as_str().unwrap().contains("nanosleep"),
            "{r}"
        );
    }
}

/// A Python with DuckDB: ASYS_DATA_PYTHON, or the venv `cargo xtask` fills
/// (target/bench/duckdb-venv).
fn data_python() -> PathBuf {
    let p = std::env::var_os("ASYS_DATA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/bench/duckdb-venv/bin/python"));
    assert!(
        Command::new(&p)
            .args(["-c", "import duckdb"])
            .finish()
            .status
            .success(),
        "{} lacks DuckDB: `cargo xtask` installs it there (or set ASYS_DATA_PYTHON)",
        p.display()
    );
    p
}

/// From the unpacked report, by DuckDB: every (address, name) of the
/// samples' kernel frames, and each sample's kernel stack (names by depth).
const KERNEL_STACKS_QUERY: &str = r#"
import duckdb, json, sys
d = sys.argv[1]
pairs = duckdb.sql(f"""
    SELECT DISTINCT k.addr, s.value FROM '{d}/kernel_stacks.parquet' k
    JOIN '{d}/strings.parquet' s ON s.id = k.nameId WHERE k.source = 'sample'""").fetchall()
stacks = duckdb.sql(f"""
    SELECT list(s.value ORDER BY k.depth) FROM '{d}/kernel_stacks.parquet' k
    JOIN '{d}/strings.parquet' s ON s.id = k.nameId WHERE k.source = 'sample'
    GROUP BY k.tid, k.ts""").fetchall()
in_kernel = duckdb.sql(f"SELECT count(*) FROM '{d}/cpu_samples.parquet' WHERE kernelMode").fetchall()[0][0]
print(json.dumps({"pairs": [[int(a), n] for a, n in pairs],
                  "stacks": [r[0] for r in stacks], "in_kernel": in_kernel}))
"#;

/// /proc/kallsyms: name → its addresses (a name may be on several).
fn kallsyms() -> BTreeMap<String, Vec<u64>> {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() >= 3 {
            let addr = u64::from_str_radix(w[0], 16).unwrap();
            out.entry(w[2].to_string()).or_default().push(addr);
        }
    }
    out
}

fn function(name: &str) -> &str {
    name.split(['+', ' ']).next().unwrap()
}

#[test]
fn samples_in_system_calls_carry_kernel_stacks_named_from_kallsyms() {
    require_root();
    let s = Scratch::new("waits-kstacks");
    let (report, _own) = profile(&s);
    let dir = s.path("unpacked");
    std::fs::create_dir(&dir).unwrap();
    let o = Command::new("tar")
        .arg("-xf")
        .arg(&report)
        .arg("-C")
        .arg(&dir)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = Command::new(data_python())
        .args(["-c", KERNEL_STACKS_QUERY])
        .arg(&dir)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let got: Value = serde_json::from_slice(&o.stdout).unwrap();
    let syms = kallsyms();
    assert!(
        syms.values().flatten().any(|&a| a != 0),
        "/proc/kallsyms shows no addresses to root"
    );
    // Every frame's name is a kallsyms symbol at an address at most its
    // offset below the frame's.
    let pairs = got["pairs"].as_array().unwrap();
    assert!(pairs.len() >= 5, "{got}");
    for p in pairs {
        let (addr, name) = (p[0].as_u64().unwrap(), p[1].as_str().unwrap());
        let f = function(name);
        let off = match name.split_once('+') {
            Some((_, rest)) => {
                u64::from_str_radix(rest.split(' ').next().unwrap().trim_start_matches("0x"), 16)
                    .unwrap()
            }
            None => 0,
        };
        // A BPF program's symbol lives only while the program is loaded:
        // the tracer's own programs, or those of another tracer running
        // beside this test, may be gone or loaded again elsewhere by the
        // time this test reads kallsyms. Such a frame is checked by its
        // name's form (bpf_prog_<tag>_<name>, in the [bpf] module).
        if name.ends_with(" [bpf]") {
            let tag = f
                .strip_prefix("bpf_prog_")
                .and_then(|r| r.split('_').next());
            assert!(
                tag.is_some_and(|t| t.len() == 16 && t.bytes().all(|b| b.is_ascii_hexdigit())),
                "{name} at {addr:#x} is in [bpf] but not named bpf_prog_<tag>_<name>"
            );
            continue;
        }
        let at = syms
            .get(f)
            .unwrap_or_else(|| panic!("{name} is not in /proc/kallsyms"));
        assert!(
            at.contains(&(addr - off)),
            "{name} at {addr:#x}: kallsyms has {f} at {at:x?}"
        );
    }
    // The reads: the stack runs from the copy up through vfs_read to the
    // system call's entry.
    let stacks = got["stacks"].as_array().unwrap();
    let in_kernel = got["in_kernel"].as_u64().unwrap();
    assert!(
        stacks.len() as u64 * 10 >= in_kernel * 9,
        "{} kernel stacks for {in_kernel} samples in the kernel",
        stacks.len()
    );
    let reads: Vec<Vec<&str>> = stacks
        .iter()
        .map(|s| {
            s.as_array()
                .unwrap()
                .iter()
                .map(|f| function(f.as_str().unwrap()))
                .collect()
        })
        .filter(|s: &Vec<&str>| s.contains(&"read_zero"))
        .collect();
    assert!(reads.len() >= 20, "{} samples in read_zero", reads.len());
    for s in &reads {
        let at = |f: &str| s.iter().position(|x| *x == f);
        let (zero, vfs, entry) = (at("read_zero"), at("vfs_read"), at("do_syscall_64"));
        assert!(
            zero < vfs && vfs < entry && entry.is_some(),
            "read_zero, vfs_read and do_syscall_64 out of order: {s:?}"
        );
    }
    // cpu_sample_sum shows them as kernel functions.
    let rows = stats_json(&report, "cpu_sample_sum");
    let f = |name: &str| {
        rows.iter()
            .find(|r| r["Function"] == name)
            .unwrap_or_else(|| panic!("no {name} in {rows:#?}"))
    };
    let zero = f("[k] read_zero");
    assert_eq!(zero["Module"], "[kernel]");
    assert!(zero["Total Samples"].as_u64().unwrap() >= reads.len() as u64);
    assert!(f("[k] do_syscall_64")["Total Samples"].as_u64() >= zero["Total Samples"].as_u64());
}
