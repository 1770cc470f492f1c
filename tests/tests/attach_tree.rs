//! `asys attach` takes the attached process's tree: the processes it forked
//! before the attach (and what those forked) are traced like it, and what
//! any of them forks afterwards follows.
use std::io::{BufRead, BufReader, Write};

use asys_tests::*;

/// The tree program (tests/workloads/tree.c), running, with pipes to its top
/// process. `tree K G` forks K children at start, and the first child forks
/// G children of its own, before it says "ready PID PID..." (every process
/// of the tree, the top first). Then:
///   burst N   every process of the tree, at once, makes (its index + 1) * N
///             hggcMalloc/hggcFree pairs and burns N * 30 ms of CPU in
///             `spin`; the top prints "done PID:CALLS:CPU_NS ..." with each
///             process's own count of calls and its CPU time in `spin`
///   fork      the top forks one more child: "child PID"
///   quit      every process ends; the top exits 0
struct Tree {
    guard: ChildGuard,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    /// Every process of the tree, the top first.
    pids: Vec<u32>,
}

/// What one process said it did in a burst: calls made, CPU ns in `spin`.
type Did = std::collections::BTreeMap<u32, (u64, u64)>;

impl Tree {
    fn start(children: u32, grandchildren: u32) -> Self {
        let bin = sim_workload("tree.c", &["hggcrt"]);
        let mut guard = ChildGuard(Some(
            std::process::Command::new(&bin)
                .args([children.to_string(), grandchildren.to_string()])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        ));
        let stdin = guard.child().stdin.take().unwrap();
        let mut stdout = BufReader::new(guard.child().stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pids: Vec<u32> = line
            .trim()
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("the tree said {line:?}"))
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(pids.len() as u32, 1 + children + grandchildren, "{line:?}");
        Self {
            guard,
            stdin,
            stdout,
            pids,
        }
    }

    fn said(&mut self, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_string()
    }

    /// Every process makes calls and spins; what each said it did.
    fn burst(&mut self, n: u32) -> Did {
        let line = self.said(&format!("burst {n}"));
        line.strip_prefix("done ")
            .unwrap_or_else(|| panic!("the tree said {line:?}"))
            .split_whitespace()
            .map(|w| {
                let f: Vec<u64> = w.split(':').map(|x| x.parse().unwrap()).collect();
                (f[0] as u32, (f[1], f[2]))
            })
            .collect()
    }

    /// The top forks one more child; its pid.
    fn fork(&mut self) -> u32 {
        let line = self.said("fork");
        line.strip_prefix("child ")
            .unwrap_or_else(|| panic!("the tree said {line:?}"))
            .parse()
            .unwrap()
    }

    fn quit(mut self) {
        writeln!(self.stdin, "quit").unwrap();
        let status = self.guard.wait();
        assert!(status.success(), "the tree exited with {status}");
    }
}

/// Adds what each process did in `b` to `total`.
fn add(total: &mut Did, b: &Did) {
    for (&pid, &(calls, cpu)) in b {
        let t = total.entry(pid).or_default();
        t.0 += calls;
        t.1 += cpu;
    }
}

/// Traced calls per pid.
fn calls_by_pid(report: &std::path::Path) -> std::collections::BTreeMap<u32, u64> {
    let mut by = std::collections::BTreeMap::new();
    for r in stats_json(report, "hggc_api_trace") {
        *by.entry(r["Pid"].as_u64().unwrap() as u32).or_default() += 1;
    }
    by
}

/// Attaches to the tree's top with `extra`; the tree runs bursts before,
/// during and after, and forks one more child while attached. Returns the
/// report, what each process did while attached, the child forked then,
/// and asys's stderr after its first line.
fn attach_and_burst(
    s: &Scratch,
    tree: &mut Tree,
    name: &str,
    extra: &[&str],
) -> (std::path::PathBuf, Did, u32, String) {
    assert_eq!(tree.burst(1).len(), tree.pids.len());
    let report = s.path(name);
    let (g, mut err, line) = start_tracing(
        asys()
            .args(["attach", "-t", "hggc", "-o", report.to_str().unwrap()])
            .args(extra)
            .arg(tree.pids[0].to_string()),
    );
    let descendants = tree.pids.len() - 1;
    assert_eq!(
        line,
        format!(
            "asys: tracing hggc (pid {} and {descendants} descendants)",
            tree.pids[0]
        )
    );
    let mut did = Did::new();
    add(&mut did, &tree.burst(3));
    let late = tree.fork();
    add(&mut did, &tree.burst(2));
    assert_eq!(did.len(), tree.pids.len() + 1, "{did:?}");
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    let status = g.wait();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(status.success(), "asys attach exited with {status}: {rest}");
    // Detached: the tree runs on, and its calls are not recorded.
    assert_eq!(tree.burst(1).len(), tree.pids.len() + 1);
    (report.with_extension("asysrep"), did, late, rest)
}

#[test]
fn an_attach_to_a_process_with_two_running_children_records_all_three() {
    require_root();
    let s = Scratch::new("attach-tree");
    // The top, its two children, and a child of the first: all forked
    // before the attach.
    let mut tree = Tree::start(2, 1);
    let (report, did, late, err) = attach_and_burst(&s, &mut tree, "t", &["-s", "process-tree"]);
    assert!(err.contains("asys: probed "), "{err}");

    // Every process's calls in the window, each exactly as it counted them:
    // the three forked before the attach (and the grandchild), and the one
    // forked while attached.
    let calls = calls_by_pid(&report);
    let expected: std::collections::BTreeMap<u32, u64> =
        did.iter().map(|(&p, &(c, _))| (p, c)).collect();
    assert_eq!(
        calls, expected,
        "traced calls per pid against the tree's own"
    );
    assert!(did.contains_key(&late) && tree.pids.iter().all(|p| did.contains_key(p)));

    // And their CPU samples: every process's time in `spin` as its own CPU
    // clock measured it (a sample per ms of CPU).
    let rows = stats_json(&report, "cpu_sample_sum");
    for (&pid, &(_, cpu_ns)) in &did {
        let samples: i64 = rows
            .iter()
            .filter(|r| r["Pid"].as_u64() == Some(pid as u64) && r["Function"] == "spin")
            .map(|r| r["Self Samples"].as_i64().unwrap())
            .sum();
        let expected = cpu_ns as f64 / 1e6;
        assert!(
            (samples as f64 - expected).abs() <= expected * 0.15 + 5.0,
            "pid {pid}: {samples} samples in spin for {expected:.0} ms of CPU"
        );
    }
    let meta = metadata(&report);
    assert_eq!(meta["root_pids"], serde_json::json!([tree.pids[0]]));
    let listed: Vec<u64> = meta["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    for pid in did.keys() {
        assert!(listed.contains(&(*pid as u64)), "{pid} not in {listed:?}");
    }
    tree.quit();
}

#[test]
fn without_sampling_the_attached_tree_is_traced_all_the_same() {
    require_root();
    let s = Scratch::new("attach-tree-plain");
    let mut tree = Tree::start(2, 0);
    let (report, did, _late, _) = attach_and_burst(&s, &mut tree, "t", &[]);
    let calls = calls_by_pid(&report);
    let expected: std::collections::BTreeMap<u32, u64> =
        did.iter().map(|(&p, &(c, _))| (p, c)).collect();
    assert_eq!(
        calls, expected,
        "traced calls per pid against the tree's own"
    );
    // No CPU sampling was asked for (attach's default).
    assert!(metadata(&report)["tables"].get("cpu_samples").is_none());
    tree.quit();
}
