//! Capture ranges opened and closed from several threads at once: the
//! kernel changes the recording state by compare-and-swap, so exactly one
//! start opens each range and exactly one stop closes it.
use asys_tests::*;

#[test]
fn starts_racing_on_several_cpus_open_exactly_one_range_each_round() {
    require_root();
    let s = Scratch::new("capture-race");
    // THREADS threads, ROUNDS rounds: all call hggcProfilerStart together,
    // wait for each other, all call hggcProfilerStop together, wait again.
    let bin = sim_workload("racing_starts.c", &["hggcrt", "pthread"]);
    let report = s.path("r");
    let o = asys()
        .args(["profile", "-s", "none", "-c", "hggcProfilerApi"])
        .args(["--capture-range-end", "merge", "-o"])
        .arg(&report)
        .arg(&bin)
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let rounds: u64 = stdout(&o)
        .lines()
        .find_map(|l| l.strip_prefix("rounds "))
        .unwrap()
        .parse()
        .unwrap();
    let meta = metadata(&report.with_extension("asysrep"));
    assert_eq!(meta["capture_ranges"], rounds, "{}", meta["drops"]);
}
