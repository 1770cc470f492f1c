//! Trace items as users combine them (`-t cuda,nvtx,osrt` is nsys's
//! default), each exact in company as it is alone. Every item set runs the
//! same four applications, on real libraries:
//! - `cuda_app.c` without a CUDA driver: NVIDIA's libcudart, cuBLAS, cuDNN
//!   and NCCL from PyPI, a C NVTX client (NVIDIA's NVTX v3 header), sleeps
//!   and a blocked mutex;
//! - the same with a stand-in `libcuda.so.1` mapped and initialized, which
//!   loads asys's injection library at cuInit as the real driver does;
//! - a Python process using the `nvtx` package, calling libcudart through
//!   ctypes, with no driver (a DataLoader worker, or code before cuInit);
//! - `sim_app.c` on the simulated hggc runtime, with hgtx ranges.
//!
//! Ground truth is what each application printed it did. For each item of
//! the set its calls, ranges and OS calls are counted exactly; an item not
//! in the set records nothing. `-t cuda` without device activity says why.
use std::{collections::BTreeMap, path::PathBuf};

use asys_tests::*;
use serde_json::Value;

/// What an application said it did.
#[derive(Default, Debug)]
struct Truth {
    /// Calls per item, per function.
    calls: BTreeMap<&'static str, BTreeMap<String, i64>>,
    /// Push/pop ranges by name.
    ranges: BTreeMap<String, i64>,
    sleeps: i64,
    blocked_locks: i64,
}

fn item_of(function: &str) -> &'static str {
    const PREFIXES: [(&str, &str); 6] = [
        ("cublas", "cublas"),
        ("cudnn", "cudnn"),
        ("nccl", "nccl"),
        ("hggc", "hggc"),
        ("hgtx", "hgtx"),
        ("cu", "cuda"),
    ];
    PREFIXES
        .iter()
        .find(|(p, _)| function.starts_with(p))
        .map(|(_, item)| *item)
        .unwrap_or_else(|| panic!("no item calls {function}"))
}

fn truth(out: &str) -> Truth {
    let mut t = Truth::default();
    for line in out.lines() {
        if let Some(call) = line.strip_prefix("call ") {
            let name = call.split(' ').next().unwrap().to_string();
            *t.calls
                .entry(item_of(&name))
                .or_default()
                .entry(name)
                .or_default() += 1;
        } else if let Some(range) = line.strip_prefix("range ") {
            *t.ranges.entry(range.to_string()).or_default() += 1;
        } else if line == "sleep" {
            t.sleeps += 1;
        } else if line == "blocked-lock" {
            t.blocked_locks += 1;
        }
    }
    t
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum App {
    CudaNoDriver,
    CudaWithDriver,
    PythonNvtx,
    Sim,
}

const APPS: [App; 4] = [
    App::CudaNoDriver,
    App::CudaWithDriver,
    App::PythonNvtx,
    App::Sim,
];

struct Built {
    cuda_app: PathBuf,
    driver: PathBuf,
    sim_app: PathBuf,
    python_app: PathBuf,
}

fn build() -> Built {
    // tally.h and blocked_lock.h, beside the applications.
    let includes = [format!(
        "-I{}",
        workspace().join("tests/workloads").display()
    )];
    let nvtx = format!(
        "-I{}",
        site_packages().join("nvidia/nvtx/include").display()
    );
    let mut args = includes.to_vec();
    args.extend([nvtx, "-ldl".into(), "-lpthread".into()]);
    for (package, file) in [
        ("cuda_runtime", "libcudart.so.12"),
        ("cublas", "libcublas.so.12"),
        ("cudnn", "libcudnn.so.9"),
        ("nccl", "libnccl.so.2"),
    ] {
        let lib = wheel_lib(package);
        args.push(format!("-L{}", lib.display()));
        args.push(format!("-l:{file}"));
        args.push(format!("-Wl,-rpath,{}", lib.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cuda_app = c_workload("cuda_app.c", &args);
    let driver = build_workload(
        "libcuda_standin.c",
        "libcuda.so.1",
        &[
            "-O1",
            "-shared",
            "-fPIC",
            "-DSTANDIN_LOADS_INJECTION",
            "-Wl,-soname,libcuda.so.1",
            "-ldl",
        ],
    );
    let sim_app = {
        let lib = sim().join("lib");
        let mut args = includes.to_vec();
        args.extend([
            format!("-I{}", sim().join("include").display()),
            format!("-L{}", lib.display()),
            format!("-Wl,-rpath,{}", lib.display()),
            "-lhggcrt".into(),
            "-lhgtx".into(),
            "-lpthread".into(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        c_workload("sim_app.c", &args)
    };
    let python_app = workload_source("python_nvtx_app.py");
    Built {
        cuda_app,
        driver,
        sim_app,
        python_app,
    }
}

/// Profiles `app` under `-t items`; returns the report, and the app's
/// output and asys's.
fn profile(s: &Scratch, b: &Built, items: &str, app: App) -> (PathBuf, String, String) {
    let report = s.path(&format!("{}-{app:?}", items.replace(',', "-")));
    let mut cmd = asys();
    cmd.args(["profile", "-t", items, "-o", report.to_str().unwrap()]);
    match app {
        App::CudaNoDriver => cmd.arg(&b.cuda_app),
        App::CudaWithDriver => cmd
            .args(["-e", &format!("COMBO_DRIVER={}", b.driver.display())])
            .arg(&b.cuda_app),
        App::PythonNvtx => cmd
            .arg(pyenv().join("bin/python"))
            .arg(&b.python_app)
            .arg(wheel_lib("cuda_runtime").join("libcudart.so.12")),
        App::Sim => cmd.arg(&b.sim_app),
    };
    let o = cmd.finish();
    assert!(o.status.success(), "{items} {app:?}: {}", stderr(&o));
    (report.with_extension("asysrep"), stdout(&o), stderr(&o))
}

fn int(v: &Value) -> i64 {
    v.as_i64().or_else(|| v.as_u64().map(|u| u as i64)).unwrap()
}

/// Rows per value of `key` in a report.
fn count_by(rows: &[Value], key: &str) -> BTreeMap<String, i64> {
    let mut n = BTreeMap::new();
    for r in rows {
        *n.entry(r[key].as_str().unwrap().to_string()).or_default() += 1;
    }
    n
}

/// Runs every application under `-t items` and checks each item.
fn check_set(items: &str) {
    require_root();
    let s = Scratch::new(&format!("combo-{}", items.replace(',', "-")));
    let b = build();
    let wanted: Vec<&str> = items.split(',').collect();
    for app in APPS {
        let (report, out, err) = profile(&s, &b, items, app);
        let t = truth(&out);
        let ctx = format!("-t {items}, {app:?}");
        // API calls, per item: exactly the application's, or none.
        for item in ["cuda", "cublas", "cudnn", "nccl", "hggc", "hgtx"] {
            let got: BTreeMap<String, i64> = stats_json(&report, &format!("{item}_api_sum"))
                .iter()
                .map(|r| {
                    (
                        r["Name"].as_str().unwrap().to_string(),
                        int(&r["Num Calls"]),
                    )
                })
                .collect();
            let want = if wanted.contains(&item) {
                t.calls.get(item).cloned().unwrap_or_default()
            } else {
                BTreeMap::new()
            };
            assert_eq!(
                got, want,
                "{ctx}: {item}_api_sum against the app's own tally"
            );
        }
        // Ranges: NVTX from the C client and the nvtx package, hgtx from
        // the simulated runtime's.
        for (item, table) in [
            ("nvtx", "nvtx_pushpop_trace"),
            ("hgtx", "hgtx_pushpop_trace"),
        ] {
            let of_item = match app {
                App::Sim => item == "hgtx",
                _ => item == "nvtx",
            };
            let want = if wanted.contains(&item) && of_item {
                t.ranges.clone()
            } else {
                BTreeMap::new()
            };
            let got = count_by(&stats_json(&report, table), "Name");
            assert_eq!(got, want, "{ctx}: {table} against the app's ranges");
        }
        // OS calls: each sleep a row, and the one blocked lock.
        let osrt = stats_json(&report, "osrt_trace");
        if wanted.contains(&"osrt") {
            let by_name = count_by(&osrt, "Name");
            let n = |name: &str| by_name.get(name).copied().unwrap_or(0);
            assert_eq!(n("clock_nanosleep"), t.sleeps, "{ctx}: {by_name:?}");
            if app != App::PythonNvtx {
                assert_eq!(
                    n("pthread_mutex_lock"),
                    t.blocked_locks,
                    "{ctx}: {by_name:?}"
                );
            }
        } else {
            assert!(osrt.is_empty(), "{ctx}: {osrt:?}");
        }
        // A CUDA run with no device activity says why, in one line.
        let why: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("no CUDA device activity was recorded"))
            .collect();
        let reason = match app {
            _ if !wanted.contains(&"cuda") => None,
            App::CudaNoDriver | App::PythonNvtx => Some("no traced process loaded CUDA's driver"),
            App::CudaWithDriver => Some("CUPTI delivered no record"),
            App::Sim => None,
        };
        match reason {
            Some(r) => assert!(
                why.len() == 1 && why[0].contains(r),
                "{ctx}: expected one line saying {r:?}:\n{err}"
            ),
            None => assert!(why.is_empty(), "{ctx}: {err}"),
        }
    }
}

#[test]
fn cuda_nvtx() {
    check_set("cuda,nvtx");
}

#[test]
fn cuda_nvtx_osrt() {
    check_set("cuda,nvtx,osrt");
}

#[test]
fn cuda_cublas_cudnn_nccl_nvtx() {
    check_set("cuda,cublas,cudnn,nccl,nvtx");
}

#[test]
fn nvtx_osrt() {
    check_set("nvtx,osrt");
}

#[test]
fn hggc_hgtx_osrt() {
    check_set("hggc,hgtx,osrt");
}
