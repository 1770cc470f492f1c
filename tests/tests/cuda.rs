//! The `cuda` trace item on the real CUDA runtime (libcudart.so.12 from PyPI).
//! Without a GPU every call that needs the driver returns an error code, and
//! those calls and their results must appear. On an NVIDIA GPU host
//! ([`nvidia_gpu`]) the calls succeed, and the device work they make must
//! arrive through CUPTI: the copy joined to its call, and a kernel (PTX that
//! the driver compiles, as there is no device compiler here), each within the
//! host calls that made and awaited it.
use asys_tests::*;
use serde_json::Value;

/// How far a device time may lie outside the host calls around it: the
/// clock offset CUPTI's times are converted with is good to microseconds
/// (docs/cuda.md).
const SLACK_NS: i64 = 1_000_000;

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// The first row of the API trace named `name`.
fn call<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["Name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in the API trace: {rows:?}"))
}

/// Asserts that device record `d` ran within [start of `from`, end of
/// `until`], host calls of the API trace: times from the device, not made up.
fn within(d: &Value, from: &Value, until: &Value) {
    let (start, end) = (
        int(&d["Start (ns)"]),
        int(&d["Start (ns)"]) + int(&d["Duration (ns)"]),
    );
    let lo = int(&from["Start (ns)"]) - SLACK_NS;
    let hi = int(&until["Start (ns)"]) + int(&until["Duration (ns)"]) + SLACK_NS;
    assert!(int(&d["Duration (ns)"]) >= 0, "{d}");
    assert!(
        lo <= start && end <= hi,
        "device record {d} is not within {} .. {} ({from}, {until})",
        lo + SLACK_NS,
        hi - SLACK_NS
    );
}

/// The program traced with `-t cuda`, and what it and the report say.
struct Traced {
    /// Holds the report.
    _scratch: Scratch,
    err: String,
    /// The driver calls the program made itself (`cu-call` lines), with
    /// their results.
    driver_calls: Vec<(String, i64)>,
    report: std::path::PathBuf,
    meta: Value,
    /// The `cuda_api_trace` rows.
    rows: Vec<Value>,
}

/// Traces the program and checks what holds on every host: its runtime
/// calls (failing without a GPU, succeeding on one) are in the trace in
/// order with their results, and libcudart was probed.
fn trace_the_program(gpu: &Nvidia) -> Traced {
    let s = Scratch::new("cuda");
    let bin = cudart_workload("cuda_calls.c", &["-ldl"]);
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
    let out = stdout(&o);
    // What the program saw, in order.
    let said = |prefix: &str| -> Vec<(String, i64)> {
        out.lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(|l| {
                let (n, r) = l.split_once(' ').unwrap();
                (n.to_string(), r.parse().unwrap())
            })
            .collect()
    };
    let made = said("cuda-call ");
    let driver_calls = said("cu-call ");
    assert_eq!(made.len(), 7);
    match gpu {
        Nvidia::NoGpu(_) => {
            assert!(
                made.iter().any(|(_, r)| *r != 0),
                "without a GPU some calls must fail: {made:?}"
            );
        }
        Nvidia::Gpu(_) => {
            assert!(
                made.iter().all(|(_, r)| *r == 0),
                "on a GPU every call succeeds: {made:?}"
            );
            let count = out
                .lines()
                .find_map(|l| l.strip_prefix("device-count "))
                .unwrap();
            assert!(count.parse::<u32>().unwrap() >= 1, "{out}");
            assert!(out.contains("kernel launched sm_"), "{out}");
            assert_eq!(driver_calls.len(), 6, "{out}");
            assert!(
                driver_calls.iter().all(|(_, r)| *r == 0),
                "the driver compiled and ran the kernel: {driver_calls:?}"
            );
        }
    }
    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    let probed = meta["libraries"].as_object().unwrap();
    let count = probed
        .iter()
        .find(|(path, _)| path.ends_with("/libcudart.so.12"))
        .map(|(_, count)| count)
        .unwrap_or_else(|| panic!("libcudart was probed: {probed:?}"));
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
    let err = stderr(&o);
    Traced {
        _scratch: s,
        err,
        driver_calls,
        report,
        meta,
        rows,
    }
}

#[test]
fn real_libcudart_calls_and_their_errors_are_traced() {
    require_root();
    let gpu = nvidia_gpu();
    let t = trace_the_program(gpu);
    // The device path is the GPU test's (below); without a device there is
    // no device activity.
    if let Nvidia::NoGpu(_) = gpu {
        let device = stats_json(&t.report, "cuda_gpu_trace");
        let syncs = stats_json(&t.report, "cuda_gpu_sync");
        assert!(
            device.is_empty(),
            "no device, no device activity: {device:?}"
        );
        assert!(syncs.is_empty(), "no device, no synchronization: {syncs:?}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU and its driver"]
fn on_an_nvidia_gpu_the_copy_and_kernel_arrive_through_cupti_within_their_calls() {
    require_root();
    require_nvidia_gpu();
    let Traced {
        _scratch,
        err,
        driver_calls,
        report,
        meta,
        rows,
    } = trace_the_program(nvidia_gpu());
    let probed = meta["libraries"].as_object().unwrap();
    let device = stats_json(&report, "cuda_gpu_trace");
    let syncs = stats_json(&report, "cuda_gpu_sync");
    // The driver was probed too, and the program's own driver calls are in
    // the trace (the runtime's, made from libcudart, are left out).
    assert!(
        probed.keys().any(|p| p.ends_with("/libcuda.so.1")),
        "CUDA's driver was probed: {probed:?}"
    );
    for (name, ret) in &driver_calls {
        assert!(
            rows.iter()
                .any(|r| r["Name"] == name.as_str() && r["Result"].as_i64() == Some(*ret)),
            "{name} -> {ret} missing from the trace: {rows:?}"
        );
    }
    // The library asys injected ran CUPTI, whose records arrived.
    assert_eq!(meta["device_activity"], true, "{meta}");
    assert!(
        !err.contains("no device activity") && !err.contains("no CUDA device activity"),
        "{err}"
    );
    // The copy: 64 bytes host to device, joined to its cudaMemcpy by the
    // correlation id, and done between that call and the synchronize after it.
    let copies: Vec<&Value> = device
        .iter()
        .filter(|d| d["Name"] == "[CUDA memcpy Host-to-Device]" && d["Bytes (B)"] == 64)
        .collect();
    assert_eq!(copies.len(), 1, "one 64-byte copy: {device:?}");
    let memcpy = call(&rows, "cudaMemcpy");
    assert!(int(&memcpy["CorrId"]) != 0, "{memcpy}");
    assert_eq!(copies[0]["CorrId"], memcpy["CorrId"], "{device:?}");
    assert_eq!(copies[0]["CopyKind"], "Host-to-Device");
    within(copies[0], memcpy, call(&rows, "cudaDeviceSynchronize"));
    // The kernel: its name, its launch configuration, and its run between
    // the launch and the synchronize.
    let kernels: Vec<&Value> = device
        .iter()
        .filter(|d| d["Name"] == "asys_test_kernel")
        .collect();
    assert_eq!(kernels.len(), 1, "one kernel: {device:?}");
    let k = kernels[0];
    assert_eq!(
        [
            &k["GrdX"], &k["GrdY"], &k["GrdZ"], &k["BlkX"], &k["BlkY"], &k["BlkZ"]
        ]
        .map(int),
        [2, 1, 1, 32, 1, 1],
        "{k}"
    );
    within(
        k,
        call(&rows, "cuLaunchKernel"),
        call(&rows, "cuCtxSynchronize"),
    );
    // A launch made on the driver directly, outside any runtime call, is
    // joined to its call in entry mode too: CUPTI's driver launch callback
    // put the driver's correlation id in the slot.
    assert_eq!(
        k["CorrId"],
        call(&rows, "cuLaunchKernel")["CorrId"],
        "{k} joined to its cuLaunchKernel"
    );
    // CUPTI's kernel record: registers and a context (nsys's columns).
    assert!(int(&k["Reg/Trd"]) > 0, "{k}");
    assert!(k["Ctx"].is_i64(), "{k}");
    assert!(k["StcSMem (MB)"].is_number(), "{k}");
    // The synchronizes waited, and CUPTI recorded the waits.
    assert!(
        syncs.iter().any(|s| s["Type"] == "cudaDeviceSynchronize"),
        "a context synchronize: {syncs:?}"
    );
    let kernel_sum = stats_json(&report, "cuda_gpu_kern_sum");
    assert!(
        kernel_sum.iter().any(|r| r["Name"] == "asys_test_kernel"),
        "{kernel_sum:?}"
    );
}
