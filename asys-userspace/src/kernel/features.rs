//! What the running kernel offers asys, found by trying (BPF commands that
//! succeed or fail) or by looking (files in /sys and /proc), and the
//! fallbacks asys uses where something is missing.
//!
//! The floor is Linux 5.15: BPF cookies on perf-event links, which every
//! probe needs to say which function fired, came in 5.15 (ring buffers in
//! 5.8, `bpf_send_signal` in 5.3). Above it:
//!
//! | missing                                 | fallback              |
//! | --------------------------------------- | --------------------- |
//! | uprobe-multi links (6.6)                | `perf-uprobe`: one perf event per probe (slow to detach) |
//! | tracefs at /sys/kernel/tracing          | `debugfs-format`: formats under /sys/kernel/debug/tracing |
//! | `group_dead` in sched_process_exit      | `exit-by-signal-live`: the exit program reads `current->signal->live` at offsets from BTF |
//! | that, and BTF                           | `exit-by-main-thread`: a process ends with its main thread |
//! | optimized NOP5 uprobes (6.18, x86-64)   | `entry-probes`: `--api-probes site` records with entry probes |
//!
//! `ASYS_KERNEL_FALLBACK=perf-uprobe,debugfs-format,...` forces fallbacks on
//! a kernel that would not need them (tests, and users checking a path).
use std::{collections::BTreeSet, os::fd::AsRawFd, path::Path, sync::OnceLock};

use aya_obj::generated::{
    bpf_attach_type::BPF_TRACE_UPROBE_MULTI, bpf_attr, bpf_cmd, bpf_map_type::BPF_MAP_TYPE_RINGBUF,
    bpf_prog_type::BPF_PROG_TYPE_KPROBE,
};

/// The variable that forces fallbacks (comma-separated names).
pub const FORCE_ENV: &str = "ASYS_KERNEL_FALLBACK";

#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    #[error(
        "{FORCE_ENV}: unknown fallback {0:?} (known: perf-uprobe, debugfs-format, exit-by-signal-live, exit-by-main-thread, entry-probes)"
    )]
    UnknownFallback(String),
    #[error(
        "this kernel ({release}) lacks {feature} (Linux {since}); asys needs Linux 5.15 or newer"
    )]
    Missing {
        release: String,
        feature: &'static str,
        since: &'static str,
    },
    #[error(
        "this kernel ({0}) has neither uprobe-multi links (Linux 6.6) nor the uprobe perf PMU (/sys/bus/event_source/devices/uprobe): no way to attach uprobes"
    )]
    NoUprobes(String),
}

/// A way around something the kernel lacks.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Fallback {
    /// Uprobes attached one perf event each (the uprobe PMU, a BPF perf
    /// link with the probe's cookie) instead of uprobe-multi links.
    PerfUprobe,
    /// Tracepoint formats read under /sys/kernel/debug/tracing.
    DebugfsFormat,
    /// sched_process_exit has no `group_dead`: the exit program reads
    /// `current->signal->live` (0 once the last thread is exiting) at the
    /// offsets the kernel's BTF gives. Exact.
    ExitBySignalLive,
    /// No `group_dead` and no BTF: a process ends when its main thread does
    /// (early if the main thread leaves by pthread_exit).
    ExitByMainThread,
    /// NOP5 sites cost an int3 trap like an entry probe: `--api-probes
    /// site` records through entry probes on the runtime instead.
    EntryProbes,
}

impl Fallback {
    pub const ALL: [Fallback; 5] = [
        Self::PerfUprobe,
        Self::DebugfsFormat,
        Self::ExitBySignalLive,
        Self::ExitByMainThread,
        Self::EntryProbes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::PerfUprobe => "perf-uprobe",
            Self::DebugfsFormat => "debugfs-format",
            Self::ExitBySignalLive => "exit-by-signal-live",
            Self::ExitByMainThread => "exit-by-main-thread",
            Self::EntryProbes => "entry-probes",
        }
    }

    /// What the fallback stands in for, for `asys status --environment`.
    pub fn instead_of(self) -> &'static str {
        match self {
            Self::PerfUprobe => "uprobe-multi links",
            Self::DebugfsFormat => "tracefs at /sys/kernel/tracing",
            Self::ExitBySignalLive => "group_dead in sched_process_exit",
            Self::ExitByMainThread => "group_dead in sched_process_exit, and BTF",
            Self::EntryProbes => "optimized NOP5 sites for --api-probes site",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// The fallbacks `ASYS_KERNEL_FALLBACK` forces.
pub fn forced() -> Result<BTreeSet<Fallback>, FeatureError> {
    let Some(v) = std::env::var_os(FORCE_ENV) else {
        return Ok(BTreeSet::new());
    };
    v.to_string_lossy()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| Fallback::parse(s).ok_or_else(|| FeatureError::UnknownFallback(s.to_string())))
        .collect()
}

/// The uprobe perf PMU: its perf type, and the config bit that makes a
/// probe a return probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UprobePmu {
    pub perf_type: u32,
    pub retprobe_bit: u32,
}

impl UprobePmu {
    pub fn read() -> Option<Self> {
        let dir = Path::new("/sys/bus/event_source/devices/uprobe");
        let perf_type = std::fs::read_to_string(dir.join("type"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        // "config:0": the bit of attr.config.
        let retprobe_bit = std::fs::read_to_string(dir.join("format/retprobe"))
            .ok()?
            .trim()
            .strip_prefix("config:")?
            .parse()
            .ok()?;
        Some(Self {
            perf_type,
            retprobe_bit,
        })
    }
}

/// What was found. `None`: not known (BPF probes need privileges).
#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelSupport {
    pub release: String,
    pub btf: bool,
    pub ring_buffer: Option<bool>,
    pub attach_cookie: Option<bool>,
    pub send_signal: Option<bool>,
    pub uprobe_multi: Option<bool>,
    #[serde(skip)]
    pub uprobe_pmu: Option<UprobePmu>,
    pub optimized_nop5: bool,
    /// Forced by `ASYS_KERNEL_FALLBACK`.
    pub forced: BTreeSet<Fallback>,
}

impl KernelSupport {
    /// Looks at the kernel; with `privileged`, also tries the BPF commands.
    pub fn detect(privileged: bool) -> Result<Self, FeatureError> {
        let probe = |f: fn() -> Option<bool>| if privileged { f() } else { None };
        Ok(Self {
            release: release(),
            btf: Path::new("/sys/kernel/btf/vmlinux").exists(),
            ring_buffer: probe(ring_buffer),
            attach_cookie: probe(|| helper_loads(HELPER_GET_ATTACH_COOKIE)),
            send_signal: probe(|| helper_loads(HELPER_SEND_SIGNAL)),
            uprobe_multi: probe(uprobe_multi),
            uprobe_pmu: UprobePmu::read(),
            optimized_nop5: optimized_nop5(),
            forced: forced()?,
        })
    }

    /// The features by name, for the report's metadata and `status`.
    pub fn features(&self) -> Vec<(&'static str, Option<bool>, &'static str)> {
        vec![
            ("btf", Some(self.btf), "/sys/kernel/btf/vmlinux"),
            (
                "ring_buffer",
                self.ring_buffer,
                "BPF ring buffer maps (5.8)",
            ),
            (
                "bpf_cookie",
                self.attach_cookie,
                "bpf_get_attach_cookie in kprobe programs (5.15)",
            ),
            ("bpf_send_signal", self.send_signal, "the helper (5.3)"),
            (
                "uprobe_multi",
                self.uprobe_multi,
                "uprobe-multi links (6.6)",
            ),
            (
                "uprobe_pmu",
                Some(self.uprobe_pmu.is_some()),
                "/sys/bus/event_source/devices/uprobe",
            ),
            (
                "optimized_nop5",
                Some(self.optimized_nop5),
                "the uprobe system call answers ENXIO (6.18, x86-64)",
            ),
        ]
    }

    /// Errors on what asys cannot do without.
    pub fn require_floor(&self) -> Result<(), FeatureError> {
        for (known, feature, since) in [
            (self.ring_buffer, "BPF ring buffers", "5.8"),
            (
                self.attach_cookie,
                "BPF cookies (bpf_get_attach_cookie)",
                "5.15",
            ),
            (self.send_signal, "the bpf_send_signal helper", "5.3"),
        ] {
            if known == Some(false) {
                return Err(FeatureError::Missing {
                    release: self.release.clone(),
                    feature,
                    since,
                });
            }
        }
        if self.uses(Fallback::PerfUprobe) && self.uprobe_pmu.is_none() {
            return Err(FeatureError::NoUprobes(self.release.clone()));
        }
        Ok(())
    }

    /// Whether the fallback is used (forced, or for want of the feature);
    /// the exit and format fallbacks are known only once the formats are
    /// read (see `Tracer`).
    pub fn uses(&self, f: Fallback) -> bool {
        self.forced.contains(&f)
            || match f {
                Fallback::PerfUprobe => self.uprobe_multi == Some(false),
                Fallback::EntryProbes => !self.optimized_nop5,
                Fallback::DebugfsFormat
                | Fallback::ExitBySignalLive
                | Fallback::ExitByMainThread => false,
            }
    }
}

/// Set when `--api-probes site` was asked for and falls back to entry
/// probes: decided before the application starts (its injection library
/// must not record at its sites then, or every call would count twice).
static SITES_FELL_BACK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `--api-probes site` can be honoured: the kernel optimizes NOP5
/// sites and `entry-probes` is not forced. Where it cannot, each site
/// would cost an int3 trap like the entry probe it replaces, on top of the
/// injection library's callback, so asys records with entry probes (which
/// need no injection library) and notes the fallback for the tracer.
pub fn sites_usable() -> Result<bool, FeatureError> {
    let usable = !forced()?.contains(&Fallback::EntryProbes) && optimized_nop5();
    if !usable {
        SITES_FELL_BACK.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(usable)
}

pub(crate) fn sites_fell_back() -> bool {
    SITES_FELL_BACK.load(std::sync::atomic::Ordering::Relaxed)
}

/// The fallbacks the tracer of this process uses, once loaded: what a
/// report's metadata records.
static IN_USE: OnceLock<(KernelSupport, BTreeSet<Fallback>)> = OnceLock::new();

pub(crate) fn set_in_use(support: KernelSupport, fallbacks: BTreeSet<Fallback>) {
    // A second tracer in the same process finds the same kernel.
    let _ = IN_USE.set((support, fallbacks));
}

/// The kernel's features and the fallbacks in use, for `metadata.json`.
pub fn in_use() -> Option<&'static (KernelSupport, BTreeSet<Fallback>)> {
    IN_USE.get()
}

pub fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Linux 6.18 on x86-64 turns a uprobe on a 5-byte NOP into a call to a
/// per-process trampoline on its first hit; the trampoline enters the kernel
/// through the `uprobe` system call (336). Called from anywhere else that
/// call fails with ENXIO, where older kernels answer ENOSYS: the probe
/// libbpf uses too. (Reading /proc/kallsyms for `arch_uprobe_optimize`
/// would also tell, at 0.1-0.2 s per start.)
fn optimized_nop5() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    const NR_UPROBE: libc::c_long = 336;
    // SAFETY: a system call without arguments; outside a uprobe trampoline
    // it only returns an error (ENOSYS where the number is unassigned).
    let rc = unsafe { libc::syscall(NR_UPROBE) };
    rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO)
}

const HELPER_SEND_SIGNAL: i32 = 109;
const HELPER_GET_ATTACH_COOKIE: i32 = 174;

/// One BPF instruction: opcode, registers (dst low nibble), offset, imm.
const fn insn(code: u8, dst: u8, imm: i32) -> u64 {
    code as u64 | ((dst as u64 & 0xf) << 8) | ((imm as u32 as u64) << 32)
}
const MOV64_IMM: u8 = 0xb7;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

fn load_kprobe(insns: &[u64], expected_attach_type: u32) -> std::io::Result<std::os::fd::OwnedFd> {
    // SAFETY: all-zero is the kernel's "unset" for this union of integers.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the BPF_PROG_LOAD member, the one this command reads.
    let a = unsafe { &mut attr.__bindgen_anon_3 };
    a.prog_type = BPF_PROG_TYPE_KPROBE as u32;
    a.expected_attach_type = expected_attach_type;
    a.insns = insns.as_ptr() as u64;
    a.insn_cnt = insns.len() as u32;
    a.license = c"GPL".as_ptr() as u64;
    super::multi::bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr)
}

/// What a probe's BPF command says: done (Some(true)), refused for want
/// of privileges (None: not known), refused otherwise (Some(false)).
fn outcome<T>(r: std::io::Result<T>) -> Option<bool> {
    match r {
        Ok(_) => Some(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) => None,
        Err(_) => Some(false),
    }
}

/// Whether a kprobe program calling helper `id` passes the verifier (an
/// unknown helper is refused).
fn helper_loads(id: i32) -> Option<bool> {
    // r1 is the context at entry (what bpf_get_attach_cookie takes); the
    // signal helper gets 0, which is never sent (the program never runs).
    let prog = if id == HELPER_SEND_SIGNAL {
        vec![
            insn(MOV64_IMM, 1, 0),
            insn(CALL, 0, id),
            insn(MOV64_IMM, 0, 0),
            insn(EXIT, 0, 0),
        ]
    } else {
        vec![insn(CALL, 0, id), insn(MOV64_IMM, 0, 0), insn(EXIT, 0, 0)]
    };
    outcome(load_kprobe(&prog, 0))
}

fn ring_buffer() -> Option<bool> {
    // SAFETY: as in `load_kprobe`.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the BPF_MAP_CREATE member.
    let m = unsafe { &mut attr.__bindgen_anon_1 };
    m.map_type = BPF_MAP_TYPE_RINGBUF as u32;
    m.max_entries = 4096;
    outcome(super::multi::bpf(bpf_cmd::BPF_MAP_CREATE, &mut attr))
}

/// As libbpf probes it: a uprobe-multi link on "/" fails with EBADF (not a
/// regular file) where the kernel has them, with EINVAL where the attach
/// type is unknown.
fn uprobe_multi() -> Option<bool> {
    let prog = match load_kprobe(
        &[insn(MOV64_IMM, 0, 0), insn(EXIT, 0, 0)],
        BPF_TRACE_UPROBE_MULTI as u32,
    ) {
        Ok(p) => p,
        Err(e) => return outcome::<()>(Err(e)).map(|_| false),
    };
    let offset = 0u64;
    // SAFETY: as in `load_kprobe`.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the BPF_LINK_CREATE member.
    let l = unsafe { &mut attr.link_create };
    l.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    l.attach_type = BPF_TRACE_UPROBE_MULTI as u32;
    // SAFETY: the uprobe_multi member, which this attach type reads.
    let m = unsafe { &mut l.__bindgen_anon_3.uprobe_multi };
    m.path = c"/".as_ptr() as u64;
    m.offsets = &offset as *const u64 as u64;
    m.cnt = 1;
    match super::multi::bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr) {
        Ok(_) => Some(true),
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => Some(true),
        Err(e) => outcome::<()>(Err(e)),
    }
}

/// What this process's tracer found and uses, for the report's metadata;
/// None before a tracer loads.
pub fn support_of_this_run() -> Option<asys_report::report::metadata::KernelSupport> {
    let (support, fallbacks) = in_use()?;
    Some(asys_report::report::metadata::KernelSupport {
        features: support
            .features()
            .into_iter()
            .map(|(name, found, _)| (name.to_string(), found))
            .collect(),
        fallbacks: fallbacks.iter().map(|f| f.name().to_string()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_names_round_trip_and_unknown_ones_are_named() {
        for f in Fallback::ALL {
            assert_eq!(Fallback::parse(f.name()), Some(f));
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.name()));
        }
        assert_eq!(Fallback::parse("perf_uprobe"), None);
        let e = FeatureError::UnknownFallback("nope".into()).to_string();
        assert!(
            e.starts_with("ASYS_KERNEL_FALLBACK: unknown fallback \"nope\""),
            "{e}"
        );
    }

    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        // mov r1, 0 / call 174 / exit, as `bpftool prog dump xlated` shows.
        assert_eq!(insn(MOV64_IMM, 1, 0), 0x0000_0000_0000_01b7);
        assert_eq!(insn(CALL, 0, 174), 0x0000_00ae_0000_0085);
        assert_eq!(insn(EXIT, 0, 0), 0x95);
    }

    #[test]
    fn a_missing_floor_feature_names_itself_and_the_minimum() {
        let s = KernelSupport {
            release: "5.10.0".into(),
            btf: true,
            ring_buffer: Some(true),
            attach_cookie: Some(false),
            send_signal: Some(true),
            uprobe_multi: Some(false),
            uprobe_pmu: Some(UprobePmu {
                perf_type: 8,
                retprobe_bit: 0,
            }),
            optimized_nop5: false,
            forced: BTreeSet::new(),
        };
        assert_eq!(
            s.require_floor().unwrap_err().to_string(),
            "this kernel (5.10.0) lacks BPF cookies (bpf_get_attach_cookie) (Linux 5.15); asys needs Linux 5.15 or newer"
        );
        assert!(s.uses(Fallback::PerfUprobe));
        assert!(s.uses(Fallback::EntryProbes));
        let no_pmu = KernelSupport {
            attach_cookie: Some(true),
            uprobe_pmu: None,
            ..s
        };
        assert!(matches!(
            no_pmu.require_floor(),
            Err(FeatureError::NoUprobes(_))
        ));
    }
}
