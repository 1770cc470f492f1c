//! What refuses an injection, found before the process is touched where it
//! can be, each named in one line. The process then keeps its host calls.
use std::os::unix::fs::MetadataExt as _;

#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "it is traced already, by process {tracer} ({name}): ptrace allows one tracer \
         (TracerPid in /proc/{pid}/status)"
    )]
    AlreadyTraced { pid: u32, tracer: u32, name: String },
    #[error(
        "it runs under a seccomp {mode} (Seccomp: {level} in /proc/{pid}/status), which may \
         forbid, or kill it for, the system calls of loading a library"
    )]
    Seccomp {
        pid: u32,
        level: u32,
        mode: &'static str,
    },
    #[error(
        "it is stopped (state {state} in /proc/{pid}/stat): running code in it would resume it"
    )]
    Stopped { pid: u32, state: char },
    #[error(
        "Yama's ptrace_scope is 3 (/proc/sys/kernel/yama/ptrace_scope): no process may be traced"
    )]
    YamaNoAttach,
    #[error("ptrace refused ({errno}){why}")]
    Ptrace {
        errno: nix::errno::Errno,
        why: String,
    },
}

/// The refusals that /proc tells of before anything is stopped.
pub fn check(pid: u32) -> Result<(), Refusal> {
    if yama_scope() == Some(3) {
        return Err(Refusal::YamaNoAttach);
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    if let Some(tracer) = field("TracerPid").filter(|&t| t != 0) {
        let name = std::fs::read_to_string(format!("/proc/{tracer}/comm"))
            .map(|n| asys_report::text_safety::escaped_name(n.trim_end()).into_owned())
            .unwrap_or_else(|_| "gone".into());
        return Err(Refusal::AlreadyTraced { pid, tracer, name });
    }
    // A process stopped by job control (or by its debugger) is left as it
    // is: the calls would have to resume it.
    if let Some(state) =
        crate::process::procfs::process_state(pid).filter(|s| matches!(s, 'T' | 't'))
    {
        return Err(Refusal::Stopped { pid, state });
    }
    if let Some(level) = field("Seccomp").filter(|&s| s != 0) {
        return Err(Refusal::Seccomp {
            pid,
            level,
            mode: if level == 1 { "strict mode" } else { "filter" },
        });
    }
    Ok(())
}

/// Why `PTRACE_SEIZE` failed, as far as asys can tell.
pub fn refused_by_ptrace(pid: u32, errno: nix::errno::Errno) -> Refusal {
    let why = match (errno, yama_scope()) {
        (nix::errno::Errno::EPERM, Some(2)) => {
            ": Yama's ptrace_scope is 2 (admin only) and asys lacks CAP_SYS_PTRACE".to_string()
        }
        (nix::errno::Errno::EPERM, _) => format!(
            ": asys may not trace process {pid} (another user's, or asys lacks CAP_SYS_PTRACE)"
        ),
        _ => String::new(),
    };
    Refusal::Ptrace { errno, why }
}

fn yama_scope() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `pid` sees the files asys sees (the same mount namespace).
pub fn same_mount_namespace(pid: u32) -> bool {
    let ns = |p: String| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    match (
        ns("/proc/self/ns/mnt".into()),
        ns(format!("/proc/{pid}/ns/mnt")),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Whether thread `tid` of `pid` has exited (a zombie leader whose other
/// threads run on).
pub fn is_zombie_thread(pid: u32, tid: u32) -> bool {
    crate::process::procfs::thread_state(pid, tid).is_none_or(|st| st == 'Z' || st == 'X')
}
