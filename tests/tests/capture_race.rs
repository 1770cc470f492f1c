//! Capture ranges opened and closed from several threads at once: the
//! kernel changes the recording state by compare-and-swap, so exactly one
//! start opens each range and exactly one stop closes it.
use asys_tests::*;

/// THREADS threads, ROUNDS rounds: all call hggcProfilerStart together,
/// wait for each other, all call hggcProfilerStop together, wait again.
const PROGRAM: &str = r#"
#include "hggc_runtime.h"
#include <pthread.h>
#include <stdio.h>
#define THREADS 4
#define ROUNDS 200
static pthread_barrier_t barrier;
static void *run(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&barrier);
        hggcProfilerStart();
        pthread_barrier_wait(&barrier);
        hggcProfilerStop();
    }
    return NULL;
}
int main(void) {
    pthread_barrier_init(&barrier, NULL, THREADS);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, run, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("rounds %d\n", ROUNDS);
    return 0;
}
"#;

#[test]
fn starts_racing_on_several_cpus_open_exactly_one_range_each_round() {
    require_root();
    let s = Scratch::new("capture-race");
    let bin = compile_with_sim(&s.0, "racing_starts", PROGRAM, &["hggcrt", "pthread"]);
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
