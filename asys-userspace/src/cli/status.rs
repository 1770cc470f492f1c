//! `asys status [--environment]`: the state of the CLI, or what this machine
//! allows for tracing and which accelerator runtimes it has.
use std::path::{Path, PathBuf};

use clap::Args;

#[derive(Args, Debug)]
#[command(override_usage = "asys status [--environment]")]
pub struct StatusArgs {
    /// Report on the machine: privileges, BPF, BTF, perf events, tracefs,
    /// each kernel feature asys uses and each fallback a run would use
    /// (ASYS_KERNEL_FALLBACK=perf-uprobe,... forces them), accelerator
    /// runtimes and devices.
    #[arg(short = 'e', long = "environment")]
    pub environment: bool,
}

struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Library folders where runtimes usually live, plus LD_LIBRARY_PATH.
fn library_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/local/lib",
        "/lib/x86_64-linux-gnu",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

fn find_libraries(prefixes: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in library_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if prefixes.iter().any(|p| name.starts_with(p)) && name.contains(".so") {
                found.push(e.path());
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

fn environment() -> Vec<Check> {
    let mut checks = Vec::new();
    let privileged = crate::cli::privileges::check().is_ok();
    host_checks(&mut checks, privileged);
    kernel_checks(&mut checks, privileged);
    if privileged {
        checks.push(programs_check());
    }
    checks.push(runtimes_check());
    checks.push(devices_check());
    checks.push(injection_library_check());
    checks
}

/// Privileges, the kernel's release, tracefs and perf events.
fn host_checks(checks: &mut Vec<Check>, privileged: bool) {
    checks.push(Check {
        name: "privileges",
        ok: privileged,
        detail: if privileged {
            "root or CAP_BPF + CAP_PERFMON".into()
        } else {
            "tracing needs root, or CAP_BPF and CAP_PERFMON".into()
        },
    });
    checks.push(Check {
        name: "kernel",
        ok: true,
        detail: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
    });
    let tracefs = Path::new("/sys/kernel/tracing/events").exists();
    checks.push(Check {
        name: "tracefs",
        ok: tracefs || privileged,
        detail: if tracefs {
            "mounted at /sys/kernel/tracing".into()
        } else {
            "not mounted (asys mounts it when run as root)".into()
        },
    });
    checks.push(Check {
        name: "perf events",
        ok: true,
        detail: format!(
            "perf_event_paranoid = {}",
            read("/proc/sys/kernel/perf_event_paranoid").unwrap_or_else(|| "?".into())
        ),
    });
}

/// The real test: load and verify asys's programs, then unload them.
fn programs_check() -> Check {
    let loaded = crate::kernel::Tracer::load(&crate::kernel::LoadSettings {
        items: Vec::new(),
        event_buffer_bytes: 4096,
        osrt_threshold_ns: 0,
        api_via_sites: false,
        backtrace_threshold_ns: None,
        hggc_set: Default::default(),
        probes: Vec::new(),
        probe_backtrace: false,
        // A default recording's programs: no Python walks.
        python_walks: 0,
    });
    Check {
        name: "eBPF programs",
        ok: loaded.is_ok(),
        detail: match loaded {
            Ok(t) => {
                t.detach();
                "loaded and verified".into()
            }
            Err(e) => e.to_string(),
        },
    }
}

/// The accelerator runtimes found in the usual folders.
fn runtimes_check() -> Check {
    let runtimes = find_libraries(&[
        "libhggcrt",
        "libhgtx",
        "libacblas",
        "libacdnn",
        "libpccl",
        "libcudart",
        "libcuda.",
        "libnccl",
        "libcublas.",
        "libcudnn.",
        "libcupti",
    ]);
    Check {
        name: "accelerator runtimes",
        ok: true,
        detail: if runtimes.is_empty() {
            "none in the usual folders or LD_LIBRARY_PATH (asys also finds them in processes)"
                .into()
        } else {
            runtimes
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        },
    }
}

/// NVIDIA's device nodes.
fn devices_check() -> Check {
    let nvidia: Vec<String> = std::fs::read_dir("/dev")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.starts_with("nvidia")
                        && n[6..].chars().all(|c| c.is_ascii_digit())
                        && n.len() > 6
                })
                .collect()
        })
        .unwrap_or_default();
    Check {
        name: "devices",
        ok: true,
        detail: if nvidia.is_empty() {
            "no NVIDIA device nodes; the simulated HGGC runtime needs none".into()
        } else {
            format!("{} NVIDIA GPU(s): {}", nvidia.len(), nvidia.join(", "))
        },
    }
}

/// The injection library where asys's layout puts it (device activity
/// needs it).
fn injection_library_check() -> Check {
    let inject = crate::install_layout::injection_library().filter(|p| p.exists());
    Check {
        name: "injection library",
        ok: inject.is_some(),
        detail: inject.map(|p| p.display().to_string()).unwrap_or_else(|| {
            format!(
                "missing: no {} (no device activity)",
                crate::install_layout::injection_library_places()
            )
        }),
    }
}

/// Each kernel feature asys uses, and each fallback it would use here.
fn kernel_checks(checks: &mut Vec<Check>, privileged: bool) {
    use crate::kernel::features::{Fallback, KernelSupport};
    let support = match KernelSupport::detect(privileged) {
        Ok(s) => s,
        Err(e) => {
            checks.push(Check {
                name: "kernel features",
                ok: false,
                detail: e.to_string(),
            });
            return;
        }
    };
    for (name, found, what) in support.features() {
        checks.push(Check {
            name,
            // Missing features with a fallback are not failures; the floor
            // is checked below.
            ok: found != Some(false)
                || !matches!(name, "ring_buffer" | "bpf_cookie" | "bpf_send_signal"),
            detail: format!(
                "{}: {what}",
                match found {
                    Some(true) => "found",
                    Some(false) => "missing",
                    None => "unknown (needs privileges to try)",
                }
            ),
        });
    }
    let floor = support.require_floor();
    checks.push(Check {
        name: "kernel floor",
        ok: floor.is_ok(),
        detail: match floor {
            Ok(()) => "Linux 5.15 or newer features present".into(),
            Err(e) => e.to_string(),
        },
    });
    // Which fallbacks a run would use: those known from the features, and
    // those the tracepoint formats decide.
    let mut fallbacks: Vec<String> = [Fallback::PerfUprobe, Fallback::EntryProbes]
        .into_iter()
        .filter(|f| support.uses(*f))
        .map(|f| match f {
            Fallback::EntryProbes => format!("{} (only with --api-probes site)", f.name()),
            _ => f.name().to_string(),
        })
        .collect();
    let exit_group_dead =
        crate::kernel::tracepoint_format::TracepointFormat::read("sched", "sched_process_exit")
            .map(|f| f.field("group_dead").is_some());
    let forced = |f| support.forced.contains(&f);
    if forced(Fallback::ExitByMainThread)
        || forced(Fallback::ExitBySignalLive)
        || matches!(exit_group_dead, Ok(false))
    {
        fallbacks.push(
            if forced(Fallback::ExitByMainThread) || !support.btf {
                Fallback::ExitByMainThread
            } else {
                Fallback::ExitBySignalLive
            }
            .name()
            .into(),
        );
    }
    if support.forced.contains(&Fallback::DebugfsFormat)
        || (!Path::new("/sys/kernel/tracing/events").exists()
            && Path::new("/sys/kernel/debug/tracing/events").exists())
    {
        fallbacks.push(Fallback::DebugfsFormat.name().into());
    }
    checks.push(Check {
        name: "fallbacks",
        ok: true,
        detail: if fallbacks.is_empty() {
            "none needed".into()
        } else {
            let forced = if support.forced.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} forces {})",
                    crate::kernel::features::FORCE_ENV,
                    support
                        .forced
                        .iter()
                        .map(|f| f.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            format!("{}{forced}", fallbacks.join(", "))
        },
    });
}

pub fn run(args: StatusArgs) -> anyhow::Result<u8> {
    if !args.environment {
        let sessions = crate::session::client::all()?;
        crate::session::client::tell_notes();
        let version = env!("CARGO_PKG_VERSION");
        let uid = crate::runtime_dir::euid();
        if sessions.is_empty() {
            println!(
                "asys {version}: no sessions of uid {uid} (begin one with 'asys launch' or 'asys start')"
            );
        } else {
            let names: Vec<String> = sessions
                .iter()
                .map(|a| asys_report::text_safety::visible(&a.label()).into_owned())
                .collect();
            println!(
                "asys {version}: {} session(s) of uid {uid}: {} (details: 'asys sessions list')",
                names.len(),
                names.join(", ")
            );
        }
        println!("run 'asys status --environment' to check this machine");
        return Ok(0);
    }
    let checks = environment();
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in &checks {
        println!(
            "{:<width$}  {:<4}  {}",
            c.name,
            if c.ok { "ok" } else { "FAIL" },
            c.detail
        );
    }
    let essential = ["privileges", "kernel floor", "eBPF programs"];
    let fine = checks
        .iter()
        .filter(|c| essential.contains(&c.name))
        .all(|c| c.ok);
    Ok(if fine { 0 } else { 1 })
}
