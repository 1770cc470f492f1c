//! `cargo xtask vm-test [6.1|6.12 ...]`: a subset of the integration tests
//! run inside Debian's real 6.1 and 6.12 kernels, booted under qemu.
//!
//! This machine's own kernel (6.18) has every feature asys uses and no
//! kprobes; users run older kernels built with kprobes. Each kernel here is
//! Debian's `linux-image-*-amd64-unsigned` package, fetched with `apt-get
//! download` and unpacked under `target/vm/KERNEL/` (kept: a second run
//! fetches nothing). The guest boots from a busybox initramfs that loads
//! the 9p and overlay modules, mounts the host's `/` read-only over 9p with
//! a tmpfs overlay on top (so the guest writes without touching the host),
//! chroots into it and runs the test binaries built here, at the same
//! paths, with `ASYS_BIN` set: no Rust toolchain runs in the guest. Each
//! binary's output goes to a writable 9p folder the host reads after.
//!
//! Emulation is software only (TCG: nested KVM hangs on this machine kind),
//! 10 to 20 times slower for CPU-bound code, so the subset is few cheap
//! tests, none of which judges wall time (see [`SUBSET`]).
//!
//! A failed boot, a guest that does not end within its limit, or a kernel
//! oops on the console is a failure that prints the console's last lines,
//! never a skip.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::{ensure_command, ensure_file, root, run, target_dir};

/// A kernel the VM pass boots: its name on the command line and the Debian
/// package names it is looked up by (the newest with an install candidate).
struct Kernel {
    name: &'static str,
    /// `apt-cache search --names-only` pattern of its image packages.
    package_pattern: &'static str,
}

const KERNELS: [Kernel; 2] = [
    // Debian 12's own kernel: before uprobe-multi links (6.6) and before
    // `group_dead` in sched_process_exit, so asys takes the perf-uprobe and
    // exit-by-signal-live fallbacks for real.
    Kernel {
        name: "6.1",
        package_pattern: r"^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$",
    },
    // Debian 12's backported 6.12: uprobe-multi, with kprobes.
    Kernel {
        name: "6.12",
        package_pattern: r"^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$",
    },
];

/// The modules the initramfs loads (with what they depend on, first): the
/// virtio PCI transport, 9p over it, and overlayfs.
const MODULES: [&str; 4] = ["virtio_pci", "9pnet_virtio", "9p", "overlay"];

/// `ASYS_TEST_TIME_SCALE` in the guest (tests/src `time_scale` and
/// `emulated`): software emulation runs CPU-bound code 10 to 20 times
/// slower, so the few checks of asys's own wall time, its event ring's
/// size and its sampling rate allow for it there (docs/kernels.md says
/// which and why: the system-wide window's `-d 5` took 8.9 to 12.6 s
/// there, against a bound of 6 s).
const TIME_SCALE: u32 = 10;

/// How long one kernel's guest may run, boot to power-off.
const GUEST_LIMIT: Duration = Duration::from_secs(20 * 60);

/// One test binary's part of the subset: the tests file and the exact test
/// names, each with what kernel-dependent path it covers.
struct Part {
    file: &'static str,
    tests: &'static [(&'static str, &'static str)],
}

/// The tests run in each guest. None judges wall time: under emulation a
/// command takes 10 to 20 times longer and swings by several times between
/// runs, so a wall-time bound would fail on emulation, not on asys (the
/// tests that judge call times against the workload's own clock reading
/// compare two clocks of the same guest and stay in). Each is cheap: few
/// calls, one short workload.
const SUBSET: &[Part] = &[
    Part {
        file: "probes",
        tests: &[
            (
                "kernel_function_probes_count_every_call_or_are_refused_naming_the_feature",
                "kprobe, kretprobe and kcall, counted exactly",
            ),
            (
                "a_call_probe_pairs_entry_and_return_as_the_workload_logged",
                "ucall probes",
            ),
            (
                "entry_return_and_offset_probes_each_count_every_call",
                "uprobe, uretprobe and offset probes",
            ),
            (
                "libstdcxx_throw_and_catch_markers_count_every_exception",
                "USDT markers",
            ),
            (
                "cpython_function_markers_set_their_semaphores_only_while_asys_runs",
                "USDT semaphores in Debian's python3.11",
            ),
            (
                "a_tracepoint_counts_a_system_call_exactly_in_both_scopes",
                "tracepoint probes",
            ),
        ],
    },
    Part {
        file: "fallbacks",
        tests: &[(
            "status_names_the_fallbacks_this_kernel_needs",
            "status --environment naming each fallback",
        )],
    },
    Part {
        file: "profile",
        tests: &[
            (
                "follows_fork_and_exec_across_the_process_tree",
                "library tracking across fork, exec and exit",
            ),
            (
                "a_runtime_loaded_later_with_dlopen_is_traced_from_its_first_call",
                "the loader hook: a library dlopen'ed late",
            ),
        ],
    },
    Part {
        file: "vendor_libraries",
        tests: &[(
            "cublas_calls_are_the_applications",
            "API calls of a real NVIDIA wheel's library (libcublas, 926 functions probed)",
        )],
    },
    Part {
        file: "waits",
        tests: &[
            (
                "lock_waits_show_their_time_state_and_the_thread_that_released_the_lock",
                "off-CPU waits (futex) and their waker",
            ),
            (
                "samples_in_system_calls_carry_kernel_stacks_named_from_kallsyms",
                "CPU samples with kernel stacks",
            ),
        ],
    },
    Part {
        file: "hgtx",
        tests: &[(
            "push_pop_nesting_and_start_end_ranges_match_ground_truth",
            "ranges",
        )],
    },
    Part {
        file: "osrt",
        tests: &[
            (
                "each_sleep_is_one_row_and_the_forked_child_is_traced",
                "osrt system calls",
            ),
            (
                "each_kind_of_lock_waits_one_row_as_long_as_it_waited",
                "osrt lock (futex) waits",
            ),
        ],
    },
    Part {
        file: "python",
        tests: &[("each_thread_gets_its_own_python_frames", "Python frames")],
    },
    Part {
        file: "sampling",
        tests: &[(
            "samples_follow_the_cpu_time_of_each_function_and_unwind_without_frame_pointers",
            "CPU sampling with DWARF unwinding",
        )],
    },
    Part {
        file: "attach_tree",
        tests: &[(
            "without_sampling_the_attached_tree_is_traced_all_the_same",
            "attach of a process tree",
        )],
    },
    Part {
        file: "attach_device",
        tests: &[(
            "an_attach_records_the_device_work_launched_inside_its_window_each_joined",
            "the injection library loaded into a running process (ptrace, dlopen)",
        )],
    },
    Part {
        file: "attach_refusals",
        tests: &[(
            "a_process_killed_while_asys_has_it_stopped_is_reported_and_nothing_stays_stopped",
            "a process killed while asys holds it stopped",
        )],
    },
    Part {
        file: "system_wide",
        tests: &[
            (
                "three_unrelated_processes_each_attributed_right",
                "system-wide mode",
            ),
            (
                "system_wide_cuda_for_5_s_is_exact_lossless_on_time_and_has_nothing_foreign",
                "system-wide mode's exact window",
            ),
        ],
    },
    Part {
        file: "flight_recorder",
        tests: &[(
            "a_flight_report_holds_exactly_the_last_seconds_before_its_trigger",
            "the flight recorder's window",
        )],
    },
];

/// Takes `flag VALUE` out of `args`.
fn take_option(args: &mut Vec<String>, flag: &str) -> anyhow::Result<Option<String>> {
    let Some(i) = args.iter().position(|a| a == flag) else {
        return Ok(None);
    };
    let value = args
        .get(i + 1)
        .with_context(|| format!("{flag} takes a value"))?
        .clone();
    args.drain(i..i + 2);
    Ok(Some(value))
}

pub fn run_task(args: &[String]) -> anyhow::Result<()> {
    let mut args = args.to_vec();
    // --only TEXT[,TEXT...]: the subset's tests whose FILE::NAME contains
    // one of the TEXTs.
    let only = take_option(&mut args, "--only")?;
    // --run 'COMMAND': instead of the tests, one shell command in the
    // guest (as root, in the checkout), its output printed: to look at
    // what a kernel does (a verifier's work, a start-up's time).
    let command = take_option(&mut args, "--run")?;
    let tests: Vec<(&str, &str)> = SUBSET
        .iter()
        .flat_map(|p| p.tests.iter().map(move |(t, _)| (p.file, *t)))
        .filter(|(f, t)| {
            only.as_ref()
                .is_none_or(|o| o.split(',').any(|o| format!("{f}::{t}").contains(o)))
        })
        .collect();
    if tests.is_empty() {
        bail!("no test of the subset matches --only {only:?}");
    }
    let kernels: Vec<&Kernel> = if args.is_empty() {
        KERNELS.iter().collect()
    } else {
        args.iter()
            .map(|a| {
                KERNELS
                    .iter()
                    .find(|k| k.name == a)
                    .with_context(|| format!("unknown kernel {a:?}: vm-test takes 6.1 and 6.12"))
            })
            .collect::<anyhow::Result<_>>()?
    };
    ensure_tools()?;
    crate::build_asys(false)?;
    let binaries = match command {
        Some(_) => BTreeMap::new(),
        None => build_test_binaries()?,
    };
    let mut failed = Vec::new();
    for kernel in kernels {
        let started = Instant::now();
        if let Some(command) = &command {
            let (rc, output) = run_command(kernel, command)?;
            print!("{output}");
            println!(
                "vm-test {}: `{command}` exited {rc} after {:.0} s",
                kernel.name,
                started.elapsed().as_secs_f64()
            );
            if rc != "0" {
                failed.push(format!("{} (exit {rc})", kernel.name));
            }
            continue;
        }
        let outcome = run_kernel(kernel, &binaries, &tests);
        let wall = started.elapsed().as_secs_f64();
        match outcome {
            Ok(o) => {
                print!("{}", o.render(kernel.name));
                println!("vm-test {}: wall time {wall:.0} s", kernel.name);
                if o.passed == 0 && o.failures.is_empty() {
                    failed.push(format!("{} (no test passed)", kernel.name));
                } else if !o.failures.is_empty() {
                    // The closing line names each failed test and why: a CI
                    // log's tail may be all that is read.
                    let why: Vec<String> = o
                        .failures
                        .iter()
                        .map(|(bin, test, output)| format!("{bin}::{test}: {}", panic_line(output)))
                        .collect();
                    failed.push(format!("{} ({})", kernel.name, why.join("; ")));
                }
            }
            Err(e) => {
                println!("vm-test {}: FAILED after {wall:.0} s: {e:#}", kernel.name);
                failed.push(format!("{} ({e:#})", kernel.name));
            }
        }
    }
    if !failed.is_empty() {
        bail!("the VM pass failed on {}", failed.join(", "));
    }
    Ok(())
}

/// The message of a failed test's panic, on one line (at most 300
/// characters), or its output's last line when it did not panic.
fn panic_line(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let message = match lines.iter().position(|l| l.contains("panicked at")) {
        Some(i) => lines[i + 1..]
            .iter()
            .take_while(|l| !l.starts_with("note: ") && !l.trim().is_empty())
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(" "),
        None => lines
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map_or(String::new(), |l| l.trim().to_string()),
    };
    message.chars().take(300).collect()
}

/// Builds the subset's test binaries; returns each file's executable.
fn build_test_binaries() -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut c = crate::cargo();
    c.args([
        "test",
        "-p",
        "asys-tests",
        "--no-run",
        "--message-format=json",
    ]);
    for part in SUBSET {
        c.args(["--test", part.file]);
    }
    let out = c
        .stderr(Stdio::inherit())
        .output()
        .context("building the test binaries")?;
    if !out.status.success() {
        bail!("building the test binaries failed: {}", out.status);
    }
    let mut found = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" || v["profile"]["test"] != true {
            continue;
        }
        if let (Some(name), Some(exe)) = (v["target"]["name"].as_str(), v["executable"].as_str()) {
            found.insert(name.to_string(), PathBuf::from(exe));
        }
    }
    for part in SUBSET {
        if !found.contains_key(part.file) {
            bail!(
                "cargo built no test binary for tests/tests/{}.rs",
                part.file
            );
        }
    }
    Ok(found)
}

/// What one kernel's guest ran.
struct Outcome {
    release: String,
    passed: usize,
    /// (binary, test or what went wrong, its output).
    failures: Vec<(String, String, String)>,
    /// (binary, test, result).
    ran: Vec<(String, String, String)>,
}

impl Outcome {
    fn render(&self, kernel: &str) -> String {
        let mut s = format!(
            "== vm-test {kernel} (guest kernel {}): {} passed, {} failed ==\n",
            self.release,
            self.passed,
            self.failures.len()
        );
        for (bin, test, result) in &self.ran {
            s += &format!("  {result:14} {bin}::{test}\n");
        }
        for (bin, test, output) in &self.failures {
            s += &format!("---- FAILED {bin}::{test} ----\n{output}\n");
        }
        s
    }
}

/// What booting a guest needs on this machine.
fn ensure_tools() -> anyhow::Result<()> {
    ensure_command(
        "qemu-system-x86_64",
        "qemu-system-x86",
        "the VM pass's emulator",
    )?;
    ensure_file("/bin/busybox", "busybox-static", "the VM pass's initramfs")?;
    ensure_command("cpio", "cpio", "the VM pass's initramfs archive")?;
    ensure_command("modinfo", "kmod", "the VM pass's module dependencies")
}

/// Boots the kernel named `name` (6.1, 6.12) to run one shell command, as
/// `--run` does; returns its exit status and output.
pub fn run_in_guest(name: &str, command: &str) -> anyhow::Result<(String, String)> {
    let kernel = KERNELS
        .iter()
        .find(|k| k.name == name)
        .with_context(|| format!("no kernel {name} in the VM pass"))?;
    ensure_tools()?;
    run_command(kernel, command)
}

/// Boots the kernel to run `command` alone; returns its exit status and
/// output.
fn run_command(kernel: &Kernel, command: &str) -> anyhow::Result<(String, String)> {
    let (dir, out, vmlinuz, initrd) = prepare_guest(kernel)?;
    let o = out.join("run");
    let script = format!(
        "{}sh -c {} > {o}.out 2>&1; echo $? > {o}.rc\nsync\n",
        script_head(),
        shell_quote(command),
        o = o.display()
    );
    std::fs::write(dir.join("run-tests.sh"), script)?;
    let console = boot(&vmlinuz, &initrd, &out)?;
    check_console(&console)?;
    let rc = std::fs::read_to_string(o.with_extension("rc")).unwrap_or_else(|_| "missing".into());
    let output = std::fs::read_to_string(o.with_extension("out")).unwrap_or_default();
    Ok((rc.trim().to_string(), output))
}

/// `s` as one single-quoted word of sh.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn vm_dir(kernel: &Kernel) -> PathBuf {
    target_dir().join("vm").join(kernel.name)
}

fn run_kernel(
    kernel: &Kernel,
    binaries: &BTreeMap<String, PathBuf>,
    tests: &[(&str, &str)],
) -> anyhow::Result<Outcome> {
    let (dir, out, vmlinuz, initrd) = prepare_guest(kernel)?;
    let script = dir.join("run-tests.sh");
    std::fs::write(&script, guest_script(binaries, tests, &out))?;
    let console = boot(&vmlinuz, &initrd, &out)?;
    check_console(&console)?;
    let release = console
        .iter()
        .find_map(|l| l.strip_prefix("vm: status: kernel "))
        .map(|l| l.trim().trim_start_matches("ok").trim().to_string())
        .unwrap_or_else(|| "?".into());
    let mut outcome = Outcome {
        release,
        passed: 0,
        failures: Vec::new(),
        ran: Vec::new(),
    };
    for (file, test) in tests {
        let stem = out.join(format!("{file}__{test}"));
        let text = std::fs::read_to_string(stem.with_extension("out")).unwrap_or_default();
        let rc = std::fs::read_to_string(stem.with_extension("rc")).unwrap_or_default();
        let seconds = console
            .iter()
            .find_map(|l| {
                l.strip_prefix(&format!("vm: test {file}::{test} exited "))?
                    .split_once(" after ")
                    .map(|(_, t)| t.trim().to_string())
            })
            .unwrap_or_else(|| "?".into());
        let result = libtest_results(&text)
            .remove(*test)
            .unwrap_or_else(|| "missing".into());
        let result = if result == "ok" && rc.trim() != "0" {
            format!("ok but exit {}", rc.trim())
        } else {
            result
        };
        outcome.ran.push((
            (*file).into(),
            (*test).into(),
            format!("{result} ({seconds})"),
        ));
        if result == "ok" {
            outcome.passed += 1;
        } else {
            outcome
                .failures
                .push(((*file).into(), (*test).into(), failure_output(&text, test)));
        }
    }
    Ok(outcome)
}

/// The kernel fetched and its initramfs built, and an empty `out` folder:
/// (the kernel's folder, `out`, the kernel image, the initramfs).
fn prepare_guest(kernel: &Kernel) -> anyhow::Result<(PathBuf, PathBuf, PathBuf, PathBuf)> {
    let dir = vm_dir(kernel);
    let unpacked = fetch_kernel(kernel, &dir)?;
    let vmlinuz = only_entry(&unpacked.join("boot"), "vmlinuz-")?;
    let modules_root = only_entry(&unpacked.join("lib/modules"), "")?;
    let initrd = build_initramfs(&dir, &modules_root)?;
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out)?;
    Ok((dir, out, vmlinuz, initrd))
}

/// Fails on a kernel oops, or a guest that did not reach the end of its
/// script, with the console's last lines.
fn check_console(console: &[String]) -> anyhow::Result<()> {
    let last = |n: usize| {
        console
            .iter()
            .rev()
            .take(n)
            .rev()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    };
    if let Some(bad) = console.iter().find(|l| {
        ["Oops:", "BUG:", "Call Trace:"]
            .iter()
            .any(|m| l.contains(m))
    }) {
        bail!(
            "the guest kernel oopsed ({bad}); its console's last lines:\n{}",
            last(60)
        );
    }
    if !console.iter().any(|l| l.starts_with("vm: tests done")) {
        bail!(
            "the guest did not finish its tests (failed boot, or a guest that hung); its \
             console's last lines:\n{}",
            last(60)
        );
    }
    Ok(())
}

/// `test NAME ... ok|FAILED|ignored` lines of libtest's output.
fn libtest_results(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("test ")?;
            let (name, result) = rest.split_once(" ... ")?;
            Some((name.to_string(), result.trim().to_string()))
        })
        .collect()
}

/// A failed test's captured output (libtest's `---- NAME stdout ----`
/// section), or the binary's last lines if there is none.
fn failure_output(text: &str, test: &str) -> String {
    let header = format!("---- {test} stdout ----");
    if let Some(start) = text.find(&header) {
        let body = &text[start + header.len()..];
        let end = body
            .find("\n---- ")
            .or_else(|| body.find("\nfailures:"))
            .unwrap_or(body.len());
        return body[..end].trim().to_string();
    }
    text.lines()
        .rev()
        .take(30)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The one entry of `dir` whose name starts with `prefix`.
fn only_entry(dir: &Path, prefix: &str) -> anyhow::Result<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    if found.len() != 1 {
        bail!(
            "{} holds {} entries named {prefix}*, not one",
            dir.display(),
            found.len()
        );
    }
    Ok(found.remove(0))
}

/// Fetches and unpacks the kernel's package into `dir/root` once; returns
/// that folder.
fn fetch_kernel(kernel: &Kernel, dir: &Path) -> anyhow::Result<PathBuf> {
    let root = dir.join("root");
    let done = dir.join("unpacked");
    if done.exists() {
        return Ok(root);
    }
    let package = newest_package(kernel)?;
    println!("vm-test {}: fetching {package}", kernel.name);
    let debs = dir.join("deb");
    let _ = std::fs::remove_dir_all(&debs);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&debs)?;
    run(Command::new("apt-get")
        .args(["download", "-q"])
        .arg(&package)
        .current_dir(&debs))?;
    let deb = only_entry(&debs, "linux-image-")?;
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
    std::fs::remove_file(&deb)?;
    std::fs::write(&done, format!("{package}\n"))?;
    Ok(root)
}

/// The newest package matching the kernel's pattern that apt can fetch.
fn newest_package(kernel: &Kernel) -> anyhow::Result<String> {
    let out = Command::new("apt-cache")
        .args(["search", "--names-only", kernel.package_pattern])
        .output()
        .context("apt-cache search")?;
    let mut best: Option<(Vec<u64>, String)> = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let policy = Command::new("apt-cache").args(["policy", name]).output()?;
        let candidate = String::from_utf8_lossy(&policy.stdout)
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Candidate:")
                    .map(|c| c.trim().to_string())
            });
        let Some(candidate) = candidate.filter(|c| c != "(none)") else {
            continue;
        };
        // Debian versions of one kernel line compare by their numbers.
        let key: Vec<u64> = candidate
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        if best.as_ref().is_none_or(|(k, _)| key > *k) {
            best = Some((key, name.to_string()));
        }
    }
    best.map(|(_, n)| n).with_context(|| {
        format!(
            "no package matching {} has an install candidate (apt-get update?)",
            kernel.package_pattern
        )
    })
}

/// Builds `dir/initrd`: busybox, the modules in load order, and /init.
fn build_initramfs(dir: &Path, modules_root: &Path) -> anyhow::Result<PathBuf> {
    let tree = dir.join("initramfs");
    let _ = std::fs::remove_dir_all(&tree);
    for d in [
        "bin", "modules", "proc", "sys", "dev", "host", "upper", "newroot", "out",
    ] {
        std::fs::create_dir_all(tree.join(d))?;
    }
    std::fs::copy("/bin/busybox", tree.join("bin/busybox"))?;
    let order = module_order(modules_root)?;
    let mut names = Vec::new();
    for rel in &order {
        let src = modules_root.join(rel);
        let file = Path::new(rel)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let name = file
            .trim_end_matches(".xz")
            .trim_end_matches(".zst")
            .to_string();
        let dst = tree.join("modules").join(&name);
        if file.ends_with(".xz") || file.ends_with(".zst") {
            // busybox's insmod takes a plain module.
            let tool = if file.ends_with(".xz") { "xz" } else { "zstd" };
            let out = Command::new(tool).args(["-dc"]).arg(&src).output()?;
            if !out.status.success() {
                bail!("{tool} -dc {} failed", src.display());
            }
            std::fs::write(&dst, out.stdout)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
        names.push(name);
    }
    std::fs::write(tree.join("modules/order"), names.join("\n") + "\n")?;
    let init = tree.join("init");
    std::fs::write(&init, INIT)?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755))?;
    let initrd = dir.join("initrd");
    run(Command::new("sh")
        .arg("-c")
        .arg(format!(
            "find . -print0 | cpio --quiet --null -o -H newc > {}",
            initrd.display()
        ))
        .current_dir(&tree))?;
    Ok(initrd)
}

/// The module files to load (relative to `modules_root`), each after what
/// it depends on (`modinfo -F depends`: the dependencies change between
/// builds, and the package ships no modules.dep, which depmod makes at
/// install); modules built into the kernel (modules.builtin) need none.
fn module_order(modules_root: &Path) -> anyhow::Result<Vec<String>> {
    let builtin = std::fs::read_to_string(modules_root.join("modules.builtin")).unwrap_or_default();
    let name_of = |path: &str| {
        Path::new(path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .split(".ko")
            .next()
            .unwrap()
            .replace('-', "_")
    };
    // modules.order lists every module file the package has.
    let listed = std::fs::read_to_string(modules_root.join("modules.order"))
        .context("reading modules.order")?;
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for line in listed.lines() {
        let rel = line.trim();
        for candidate in [rel.to_string(), format!("{rel}.xz"), format!("{rel}.zst")] {
            if modules_root.join(&candidate).exists() {
                files.insert(name_of(rel), candidate);
                break;
            }
        }
    }
    let builtin: Vec<String> = builtin.lines().map(name_of).collect();
    let mut order = Vec::new();
    let mut stack: Vec<(String, bool)> = MODULES
        .iter()
        .rev()
        .map(|m| (m.to_string(), false))
        .collect();
    // Depth first: a module goes in after every module it depends on.
    while let Some((name, deps_done)) = stack.pop() {
        if builtin.contains(&name) {
            continue;
        }
        let Some(rel) = files.get(&name) else {
            bail!("the kernel has no module {name} and does not build it in");
        };
        if order.contains(rel) {
            continue;
        }
        if deps_done {
            order.push(rel.clone());
            continue;
        }
        let out = Command::new("modinfo")
            .args(["-F", "depends"])
            .arg(modules_root.join(rel))
            .output()
            .context("running modinfo")?;
        if !out.status.success() {
            bail!("modinfo -F depends {rel} failed");
        }
        stack.push((name, true));
        for dep in String::from_utf8_lossy(&out.stdout).trim().split(',') {
            if !dep.is_empty() {
                stack.push((dep.replace('-', "_"), false));
            }
        }
    }
    Ok(order)
}

/// The initramfs's /init: loads the modules, mounts the host's root
/// read-only over 9p under a tmpfs overlay, the kernel file systems inside,
/// and runs the test script (the kernel command line's `asys_script=`)
/// chrooted there. It powers off at the end: init exiting panics.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do
  insmod /modules/$m || echo "vm: insmod $m failed"
done
script=$(sed -n 's/.*asys_script=\([^ ]*\).*/\1/p' /proc/cmdline)
out=$(sed -n 's/.*asys_out=\([^ ]*\).*/\1/p' /proc/cmdline)
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro host /host || echo "vm: 9p mount failed"
mount -t tmpfs -o size=2g upper /upper
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/host,upperdir=/upper/u,workdir=/upper/w /newroot || echo "vm: overlay mount failed"
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs shm /newroot/dev/shm
mount -t tmpfs tmp /newroot/tmp
mount -t tracefs tracefs /newroot/sys/kernel/tracing
mount -t debugfs debugfs /newroot/sys/kernel/debug
mount -t bpf bpf /newroot/sys/fs/bpf
mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup
mount -t tmpfs run /newroot/run
mkdir -p /newroot$out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /newroot$out || echo "vm: out mount failed"
echo "vm: booted"
chroot /newroot /bin/sh $script
echo "vm: tests done"
sync
poweroff -f
"#;

/// The script the guest runs in the chroot: each test alone (`--exact`),
/// its output and exit status to the shared `out` folder, its start and end
/// on the console. asys and its status come first, which pages the binary
/// in and names the fallbacks the kernel takes.
fn guest_script(
    binaries: &BTreeMap<String, PathBuf>,
    tests: &[(&str, &str)],
    out: &Path,
) -> String {
    let mut s = script_head();
    s += "$ASYS_BIN status --environment | sed 's/^/vm: status: /'\n";
    for (file, test) in tests {
        let exe = &binaries[*file];
        let o = out.join(format!("{file}__{test}"));
        s += &format!(
            "t0=$(date +%s); {} --exact --test-threads=1 --show-output {test} > {o}.out 2>&1; \
             rc=$?; echo $rc > {o}.rc; echo \"vm: test {file}::{test} exited $rc \
             after $(($(date +%s) - t0)) s\"\n",
            exe.display(),
            o = o.display(),
        );
    }
    s += "sync\n";
    s
}

/// The guest script's start: its environment (the tests' and `--run`'s),
/// and the checkout as the working folder.
fn script_head() -> String {
    // ASYS_BIN, as for the tests, runs another build (a planted bug's).
    let asys = std::env::var_os("ASYS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("debug/asys"));
    let mut s = String::from("#!/bin/sh\n");
    s += "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n";
    s += &format!(
        "export HOME=/root ASYS_BIN={} ASYS_TEST_REQUIRE_KPROBES=1 \
         ASYS_TEST_PYTHON=/usr/bin/python3.11 ASYS_TEST_TIME_SCALE={TIME_SCALE}\n",
        asys.display()
    );
    s += &format!("export CARGO_TARGET_DIR={}\n", target_dir().display());
    s += &format!("cd {}\n", root().display());
    s
}

/// Boots the guest and returns its console's lines (echoing the `vm:` ones
/// as they come); kills it past [`GUEST_LIMIT`].
fn boot(vmlinuz: &Path, initrd: &Path, out: &Path) -> anyhow::Result<Vec<String>> {
    let script = out.parent().unwrap().join("run-tests.sh");
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args([
        "-accel",
        "tcg,thread=multi",
        "-cpu",
        "max",
        "-m",
        "4096",
        "-smp",
        "2",
    ])
    .args(["-nographic", "-no-reboot", "-kernel"])
    .arg(vmlinuz)
    .arg("-initrd")
    .arg(initrd)
    .arg("-append")
    .arg(format!(
        // The TSC as clocksource, as on real hardware: under TCG the kernel
        // would pick HPET, whose clock reads are system calls, not vDSO code.
        "console=ttyS0 quiet panic=-1 clocksource=tsc tsc=reliable asys_script={} asys_out={}",
        script.display(),
        out.display()
    ))
    .arg("-virtfs")
    .arg("local,path=/,mount_tag=host,security_model=none,multidevs=remap,readonly=on")
    .arg("-virtfs")
    .arg(format!(
        "local,path={},mount_tag=out,security_model=none",
        out.display()
    ))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = qemu.spawn().context("starting qemu-system-x86_64")?;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let lines = Arc::clone(&lines);
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                let Ok(line) = line else { break };
                let line = String::from_utf8_lossy(&line)
                    .trim_end_matches('\r')
                    .to_string();
                if line.starts_with("vm: ") {
                    println!("  {line}");
                }
                lines.lock().unwrap().push(line);
            }
        })
    };
    let errs = {
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
            s
        })
    };
    let deadline = Instant::now() + GUEST_LIMIT;
    let mut timed_out = false;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            timed_out = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = reader.join();
    let qemu_err = errs.join().unwrap_or_default();
    let lines = std::mem::take(&mut *lines.lock().unwrap());
    if timed_out {
        bail!(
            "the guest did not end within {} s; its console's last lines:\n{}",
            GUEST_LIMIT.as_secs(),
            lines
                .iter()
                .rev()
                .take(60)
                .rev()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    if lines.is_empty() {
        bail!("qemu printed nothing: {qemu_err}");
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::panic_line;

    #[test]
    fn a_failed_tests_panic_message_becomes_one_line() {
        let output = "running 1 test\n\nthread 'x' panicked at tests/tests/a.rs:10:5:\n\
                      assertion `left == right` failed: window\n  left: 17\n right: 5\n\
                      note: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_line(output),
            "assertion `left == right` failed: window left: 17 right: 5"
        );
        assert_eq!(panic_line("it was killed\nSIGSEGV\n\n"), "SIGSEGV");
    }
}
