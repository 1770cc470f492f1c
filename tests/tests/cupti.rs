//! The injection library in CUDA processes: real libcudart and real CUPTI
//! from PyPI (nvidia-cuda-runtime-cu12, nvidia-cuda-cupti-cu12).
//!
//! Without a GPU there is no libcuda, so nothing calls `InitializeInjection`
//! on its own: the program does what CUDA's driver does at `cuInit` (dlopen
//! the library `CUDA_INJECTION64_PATH` names, call its `InitializeInjection`),
//! then makes its runtime calls. The library must find CUPTI beside
//! libcudart, say why CUPTI gives nothing (no driver), return success, and
//! change nothing the program sees; the report has the host calls.
//!
//! On an NVIDIA GPU host ([`nvidia_gpu`]) the real driver loads the library
//! at `cuInit` (the program leaves it to the driver: `REAL_CUDA_DRIVER`), and
//! CUPTI must work: no warning, the calls unchanged, and the memset the
//! program makes recorded as device activity, joined to its call.
use asys_tests::*;

fn program() -> std::path::PathBuf {
    assert!(
        site_packages()
            .join("nvidia/cuda_cupti/lib/libcupti.so.12")
            .exists(),
        "CUPTI from PyPI (cargo xtask pyenv)"
    );
    cudart_workload("cupti_host.c", &["-ldl"])
}

/// The lines the program printed about its calls.
fn calls(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with("cuda-call ") || l.starts_with("device-count "))
        .map(str::to_string)
        .collect()
}

/// How far a device time may lie outside the host calls around it: the
/// clock offset CUPTI's times are converted with is good to microseconds
/// (docs/cuda.md).
const SLACK_NS: i64 = 1_000_000;

fn int(v: &serde_json::Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// The program traced with `-t cuda`: the scratch folder holding the
/// report, and the `cuda_api_trace` rows.
struct Traced {
    _scratch: Scratch,
    report: std::path::PathBuf,
    traced: Vec<serde_json::Value>,
}

/// Runs the program untraced, then traced, and checks what holds on every
/// host: the library was injected (by the program's stand-in for the driver
/// without a GPU, by CUDA's driver on one), nothing the program saw changed,
/// and the report has its host calls with their results.
fn trace_the_program(gpu: bool) -> Traced {
    let s = Scratch::new("cupti");
    let bin = program();
    // Untraced: what the program sees on its own.
    let mut plain = std::process::Command::new(&bin);
    if gpu {
        plain.env("REAL_CUDA_DRIVER", "1");
    }
    let plain = plain.output().unwrap();
    assert!(plain.status.success());
    assert!(stdout(&plain).contains("injection none"));
    let report = s.path("r");
    let mut cmd = asys();
    cmd.args(["profile", "-t", "cuda", "-o", report.to_str().unwrap()]);
    if gpu {
        cmd.args(["-e", "REAL_CUDA_DRIVER=1"]);
    }
    let o = cmd.arg(&bin).finish();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let err = stderr(&o);
    let inject = out
        .lines()
        .find_map(|l| l.strip_prefix("injection "))
        .unwrap();
    if gpu {
        // asys pointed CUDA's driver at its library, which found CUPTI
        // (from PyPI, beside libcudart, unless the host has its own first)
        // and CUPTI took it: not one warning.
        assert!(
            inject.starts_with("by-driver ") && inject.contains("libasys_inject.so"),
            "{inject}"
        );
        assert!(
            !err.lines().any(|l| l.starts_with("asys-inject: warning")),
            "{err}"
        );
        assert!(!err.contains("no CUDA device activity"), "{err}");
    } else {
        // asys pointed CUDA at its library, which returned success.
        assert!(
            inject.contains("libasys_inject.so") && inject.ends_with(" 1"),
            "{inject}"
        );
        // It found CUPTI from PyPI beside libcudart and says why there is no
        // device activity, naming CUPTI's own reason.
        let warning = err
            .lines()
            .find(|l| l.starts_with("asys-inject: warning: no device activity"))
            .unwrap_or_else(|| panic!("no warning: {err}"));
        assert!(warning.contains("CUPTI refused"), "{warning}");
        assert!(warning.contains("(error "), "CUPTI's code: {warning}");
        assert!(warning.contains("host calls only"), "{warning}");
    }
    // Nothing the program saw changed (on a GPU: every call succeeded).
    assert_eq!(calls(&out), calls(&stdout(&plain)));
    if gpu {
        assert!(
            calls(&out)
                .iter()
                .filter_map(|l| l.strip_prefix("cuda-call "))
                .all(|l| l.ends_with(" 0")),
            "{out}"
        );
    }
    // The report has the host calls, with their results.
    let report = report.with_extension("asysrep");
    let traced = stats_json(&report, "cuda_api_trace");
    for line in calls(&out)
        .iter()
        .filter_map(|l| l.strip_prefix("cuda-call "))
    {
        let (name, ret) = line.split_once(' ').unwrap();
        let ret: i64 = ret.parse().unwrap();
        assert!(
            traced
                .iter()
                .any(|r| r["Name"] == name && r["Result"].as_i64() == Some(ret)),
            "{name} -> {ret} not traced: {traced:?}"
        );
    }
    Traced {
        _scratch: s,
        report,
        traced,
    }
}

#[test]
fn the_injection_library_finds_pypi_cupti_and_changes_nothing_the_program_sees() {
    require_root();
    let gpu = matches!(nvidia_gpu(), Nvidia::Gpu(_));
    let t = trace_the_program(gpu);
    // The device path is the GPU test's (below); without a device there is
    // no device activity.
    if !gpu {
        let device = stats_json(&t.report, "cuda_gpu_trace");
        assert!(device.is_empty(), "{device:?}");
        assert!(stats_json(&t.report, "cuda_gpu_kern_sum").is_empty());
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU and its driver"]
fn on_an_nvidia_gpu_the_memset_arrives_through_cupti_joined_to_its_call() {
    require_root();
    require_nvidia_gpu();
    let Traced {
        _scratch,
        report,
        traced,
    } = trace_the_program(true);
    let device = stats_json(&report, "cuda_gpu_trace");
    // The memset came through CUPTI and the library's sites: 1 MiB, joined
    // to its cudaMemset by the correlation id, on the device between that
    // call and the synchronize after it (device times, converted to the
    // host's clock).
    assert_eq!(metadata(&report)["device_activity"], true);
    let call = |name: &str| {
        traced
            .iter()
            .find(|r| r["Name"] == name)
            .unwrap_or_else(|| panic!("{name} not traced: {traced:?}"))
    };
    let memsets: Vec<_> = device
        .iter()
        .filter(|d| d["Name"] == "[CUDA memset]")
        .collect();
    assert_eq!(memsets.len(), 1, "{device:?}");
    let (d, memset, sync) = (
        memsets[0],
        call("cudaMemset"),
        call("cudaDeviceSynchronize"),
    );
    assert_eq!(d["Bytes (B)"], 1 << 20, "{d}");
    assert!(int(&memset["CorrId"]) != 0, "{memset}");
    assert_eq!(d["CorrId"], memset["CorrId"], "{d} {memset}");
    let start = int(&d["Start (ns)"]);
    let end = start + int(&d["Duration (ns)"]);
    assert!(int(&d["Duration (ns)"]) >= 0, "{d}");
    assert!(
        int(&memset["Start (ns)"]) - SLACK_NS <= start
            && end <= int(&sync["Start (ns)"]) + int(&sync["Duration (ns)"]) + SLACK_NS,
        "the memset {d} is not within {memset} .. {sync}"
    );
    let mem_sum = stats_json(&report, "cuda_gpu_mem_time_sum");
    assert!(
        mem_sum.iter().any(|r| r["Operation"] == "[CUDA memset]"),
        "{mem_sum:?}"
    );
}

#[test]
fn a_cupti_path_that_holds_no_cupti_is_named_in_the_warning() {
    require_root();
    let s = Scratch::new("cupti-path");
    let bin = program();
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "cuda",
        "--cupti-path",
        "/nonexistent/cupti",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.lines().any(
            |l| l.starts_with("asys-inject: warning: no device activity")
                && l.contains("no libcupti found (looked in /nonexistent/cupti)")
        ),
        "{err}"
    );
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.starts_with("injection ") && l.ends_with(" 1"))
    );
    assert!(!stats_json(&report.with_extension("asysrep"), "cuda_api_trace").is_empty());
}

/// With `-t cuda` alone the injection library's sites are probed in any
/// process that loaded it, except one of the hggc runtime without CUDA's
/// driver (whose device records are none of `-t cuda`'s business): a
/// stand-in `libhggcrt.so` mapped before the library leaves them alone; a
/// stand-in `libcuda.so.1`, or no driver at all (the library loaded as the
/// NVTX tool before `cuInit`, or CUPTI refusing), gets them probed.
#[test]
fn the_sites_are_probed_unless_the_process_is_an_hggc_one() {
    require_root();
    let s = Scratch::new("cupti-driver");
    let bin = program();
    let mut device_activity = Vec::new();
    for (i, stand_in) in [None, Some("libcuda.so.1"), Some("libhggcrt.so")]
        .into_iter()
        .enumerate()
    {
        let report = s.path(&format!("r{i}"));
        let mut cmd = asys();
        cmd.args(["profile", "-t", "cuda", "-o", report.to_str().unwrap()]);
        if let Some(name) = stand_in {
            let lib = build_workload(
                "not_a_driver.c",
                name,
                &["-shared", "-fPIC", &format!("-Wl,-soname,{name}")],
            );
            cmd.args(["-e", &format!("FAKE_CUDA_DRIVER={}", lib.display())]);
        }
        let o = cmd.arg(&bin).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stdout(&o)
                .lines()
                .any(|l| l.starts_with("injection ") && l.ends_with(" 1")),
            "{}",
            stdout(&o)
        );
        let meta = metadata(&report.with_extension("asysrep"));
        device_activity.push(meta["device_activity"].as_bool().unwrap());
    }
    match nvidia_gpu() {
        Nvidia::NoGpu(_) => assert_eq!(device_activity, [true, true, false]),
        // On a GPU host the process with the hggc stand-in loads the real
        // driver too (CUPTI, started by its InitializeInjection, and
        // libcudart at its first call load libcuda.so.1): from the scan at
        // that load on it is a CUDA process, whose sites are probed.
        Nvidia::Gpu(_) => assert_eq!(device_activity, [true, true, true]),
    }
}
