//! The `cuda` trace item on the real CUDA runtime (libcudart.so.12 from PyPI).
//! There is no GPU here: every call returns an error code, and those calls
//! and their results must appear.
use asys_tests::*;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stddef.h>
typedef int cudaError_t;
cudaError_t cudaGetDeviceCount(int *);
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMemcpy(void *, const void *, size_t, int);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
int cudaRuntimeGetVersion(int *);
#define REPORT(name, call) do { int r_ = (int)(call); printf("cuda-call %s %d\n", name, r_); } while (0)
int main(void) {
    int n = -1, v = 0;
    void *p = 0;
    char host[64];
    REPORT("cudaRuntimeGetVersion", cudaRuntimeGetVersion(&v));
    REPORT("cudaGetDeviceCount", cudaGetDeviceCount(&n));
    REPORT("cudaMalloc", cudaMalloc(&p, 1 << 20));
    REPORT("cudaMemcpy", cudaMemcpy(p, host, sizeof host, 1));
    REPORT("cudaDeviceSynchronize", cudaDeviceSynchronize());
    REPORT("cudaGetLastError", cudaGetLastError());
    REPORT("cudaFree", cudaFree(p));
    return 0;
}
"#;

#[test]
fn real_libcudart_calls_and_their_errors_are_traced() {
    require_root();
    let s = Scratch::new("cuda");
    let bin = compile_with_cudart(&s.0, "cuda_calls", PROGRAM, &[]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "cuda",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // What the program saw, in order.
    let made: Vec<(String, i64)> = stdout(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("cuda-call "))
        .map(|l| {
            let (n, r) = l.split_once(' ').unwrap();
            (n.to_string(), r.parse().unwrap())
        })
        .collect();
    assert_eq!(made.len(), 7);
    assert!(
        made.iter().any(|(_, r)| *r != 0),
        "without a GPU some calls must fail: {made:?}"
    );
    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    let probed = meta["libraries"].as_object().unwrap();
    let (path, count) = probed.iter().next().expect("libcudart was probed");
    assert!(path.ends_with("libcudart.so.12"), "{path}");
    assert!(
        count.as_u64().unwrap() > 300,
        "every exported cuda* function is probed ({count})"
    );
    // Each call the program made appears, in its order, with its result.
    // (The runtime may call its own entry points too; those rows may sit between.)
    let rows = stats_json(&report, "cuda_api_trace");
    let mut it = rows.iter();
    for (name, ret) in &made {
        let found = it
            .by_ref()
            .find(|r| r["Name"] == name.as_str() && r["Result"].as_i64() == Some(*ret));
        assert!(
            found.is_some(),
            "{name} -> {ret} missing from the trace: {rows:?}"
        );
    }
    let sum = stats_json(&report, "cuda_api_sum");
    assert!(sum.iter().any(|r| r["Name"] == "cudaMalloc"));
}
