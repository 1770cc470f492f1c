//! The OS runtime trace item: libc calls of the traced process tree, with the
//! duration threshold applied in the kernel.
use asys_tests::*;

const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
int main(void) {
    for (int i = 0; i < 5; i++) sleep_ms(3);
    for (int i = 0; i < 2; i++) sleep_ms(30);
    int fds[2];
    if (pipe(fds) != 0) return 1;
    char buf[4096] = {0};
    for (int i = 0; i < 4; i++) if (write(fds[1], buf, sizeof buf) != sizeof buf) return 1;
    pid_t child = fork();
    if (child == 0) { sleep_ms(40); _exit(0); }
    int status;
    waitpid(child, &status, 0);
    printf("done\n");
    return 0;
}
"#;

fn build(s: &Scratch) -> std::path::PathBuf {
    let src = s.path("osrt_calls.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let bin = s.path("osrt_calls");
    let st = std::process::Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .arg("-lpthread")
        .status()
        .unwrap();
    assert!(st.success());
    bin
}

fn calls(report: &std::path::Path, name: &str, pid: Option<u64>) -> Vec<serde_json::Value> {
    stats_json(report, "osrt_trace")
        .into_iter()
        .filter(|r| r["Name"] == name && pid.is_none_or(|p| r["Pid"] == p))
        .collect()
}

#[test]
fn calls_over_the_threshold_are_recorded_in_parent_and_child() {
    require_root();
    let s = Scratch::new("osrt");
    let bin = build(&s);
    let report = s.path("r");
    // 2 ms: the 3 ms sleeps, the 30 ms sleeps and the wait are over it.
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "--osrt-threshold",
        "2000000",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    let root = meta["root_pids"][0].as_u64().unwrap();
    let sleeps = calls(&report, "nanosleep", Some(root));
    assert_eq!(sleeps.len(), 7, "{sleeps:?}");
    for (i, r) in sleeps.iter().enumerate() {
        let d = r["Duration (ns)"].as_i64().unwrap();
        let want = if i < 5 { 3_000_000 } else { 30_000_000 };
        assert!(d >= want, "sleep {i} took {d} ns, asked {want}");
        assert_eq!(r["Result"], 0);
    }
    assert_eq!(calls(&report, "waitpid", Some(root)).len(), 1);
    // The forked child's own sleep, probed for that process.
    let child: Vec<_> = stats_json(&report, "osrt_trace")
        .into_iter()
        .filter(|r| r["Name"] == "nanosleep" && r["Pid"] != root)
        .collect();
    assert_eq!(child.len(), 1, "{child:?}");
    // Pipe writes of 4 KiB take microseconds: under the threshold, not recorded.
    assert!(calls(&report, "write", None).is_empty());
}

#[test]
fn a_higher_threshold_keeps_only_the_long_calls() {
    require_root();
    let s = Scratch::new("osrt-hi");
    let bin = build(&s);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "--osrt-threshold",
        "20000000",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let root = metadata(&report)["root_pids"][0].as_u64().unwrap();
    assert_eq!(calls(&report, "nanosleep", Some(root)).len(), 2);
    let with_zero = s.path("all");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "--osrt-threshold",
        "0",
        "-o",
        with_zero.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let all = with_zero.with_extension("asysrep");
    let root = metadata(&all)["root_pids"][0].as_u64().unwrap();
    let writes = calls(&all, "write", Some(root));
    assert!(
        writes.iter().filter(|w| w["Bytes"] == 4096).count() >= 4,
        "{writes:?}"
    );
}
