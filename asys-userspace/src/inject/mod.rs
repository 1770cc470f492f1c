//! Loading asys's injection library into a process that is already running,
//! so that an attach (or a system-wide run with `--inject running`) records
//! its device activity and NVTX ranges, not only its host calls. A process
//! that asys launches gets the library from the runtime at its start
//! (`HGGC_INJECTION64_PATH`, `CUDA_INJECTION64_PATH`); a running one has
//! started without it.
//!
//! The steps, each on one thread stopped with ptrace (`ptrace.rs`):
//! 1. refusals first, each one line naming its cause (`preflight.rs`);
//! 2. `dlopen` of the library in the process: by its path where the process
//!    shares asys's mount namespace, else from a memfd the process creates
//!    and asys fills (`/proc/self/fd/N` in the process);
//! 3. asys probes the library's sites (the caller's `hook`), so that no
//!    record comes before a probe is there to take it;
//! 4. `asys_inject_attach`: activity and API callbacks from now on;
//! 5. with NVTX traced, each NVTX v3 module of the process adopts the
//!    library as its tool (`nvtx.rs`).
//!
//! At the end, [`quiesce`] has the library disable activity and flush it.
//! The library stays loaded: see asys-inject's attach.rs.
mod nvtx;
mod preflight;
pub mod ptrace;
mod remote_symbols;

use std::{path::Path, time::Duration};

use ptrace::{Arg, StopError, StoppedThread};
use remote_symbols::Symbols;

pub use preflight::Refusal;

/// How long a thread may take to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a call in the process may take: `dlopen` of the library, its
/// relocations and constructors (slow under emulation).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest reason the library hands back.
const REASON_BYTES: usize = 1024;
/// `RTLD_NOW`, and glibc's `__RTLD_DLOPEN` for `__libc_dlopen_mode`.
const RTLD_NOW: u64 = 2;
const RTLD_DLOPEN: u64 = 0x8000_0000;
const MFD_CLOEXEC: u64 = 1;

pub use crate::settings::InjectRequest as Request;

#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("the process {0}")]
    Stop(#[from] StopError),
    #[error("no dlopen in the process (neither libc nor libdl exports one)")]
    NoDlopen,
    #[error("dlopen of the injection library failed in the process: {0}")]
    Dlopen(String),
    #[error("the injection library in the process has no {0} (another build of asys?)")]
    NoEntry(&'static str),
    #[error("copying the injection library into the process: {0}")]
    Copy(std::io::Error),
    #[error("asys could not probe the injection library's sites: {0}")]
    Hook(String),
}

/// How the library came to be in the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loaded {
    /// Loaded now, by its path.
    ByPath,
    /// Loaded now, from a memfd (the process is in another mount namespace).
    FromMemfd,
    /// Already there (an earlier attach, or the process's start).
    Reused,
}

/// What the library said of device activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// Recorded from now on; with the warnings the library gave, if any.
    On(Option<String>),
    /// Recorded since the process started (the runtime loaded the library).
    AlreadyOn,
    /// Not recorded: why.
    Off(String),
    /// Not asked for (NVTX only).
    NotAsked,
}

#[derive(Debug, Clone)]
pub struct Injected {
    pub loaded: Loaded,
    pub activity: Activity,
    /// NVTX modules that adopted the library as their tool.
    pub nvtx_modules: usize,
}

/// Whether `pid` maps something an injection serves: the simulated runtime
/// (hggc), CUDA's runtime or driver (cuda), or an NVTX v3 module (nvtx).
pub fn wanted_in(pid: u32, request: &Request) -> bool {
    let Ok((maps, _)) = crate::process::procfs::mappings_and_vdso(pid) else {
        return false;
    };
    maps.iter().any(|m| {
        let name = m
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        request.activity
            && (name.starts_with("libhggcrt.so")
                || name.starts_with("libcudart.so")
                || crate::apis::is_cuda_driver(&name))
            || request.nvtx && nvtx::is_candidate(&m.path)
    })
}

/// Loads the library into `pid` (or finds it there) and starts its activity
/// from now on. `hook` probes the process's new mappings (the library's
/// sites) between the load and the start.
pub fn inject(
    pid: u32,
    request: &Request,
    hook: &mut dyn FnMut(u32) -> Result<(), String>,
) -> Result<Injected, InjectError> {
    preflight::check(pid)?;
    let symbols = Symbols::of(pid);
    let mut thread = stop_a_thread(pid)?;
    hold_for_fault_tests(&mut thread)?;
    let (loaded, memfd) = match symbols.injection_library() {
        Some(_) => (Loaded::Reused, None),
        None => load(pid, &mut thread, &symbols, &request.library)?,
    };
    hook(pid).map_err(InjectError::Hook)?;
    // Read again: the library is mapped now.
    let symbols = Symbols::of(pid);
    let attach = symbols
        .in_injection_library("asys_inject_attach")
        .ok_or(InjectError::NoEntry("asys_inject_attach"))?;
    let settings: String = request
        .settings
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        // The library maps its sites' page afresh from it in a forked child.
        .chain(memfd.map(|fd| format!("ASYS_LIBRARY_FD={fd}\n")))
        .chain(std::iter::once("\0".to_string()))
        .collect();
    let activity = if request.activity {
        let r = thread.call(
            attach,
            &[
                Arg::Bytes(settings.as_bytes()),
                Arg::Buffer(REASON_BYTES),
                Arg::Value(REASON_BYTES as u64),
            ],
            CALL_TIMEOUT,
        )?;
        let reason = c_string(&r.buffers[0]);
        match r.value as u32 {
            1 => Activity::On((!reason.is_empty()).then_some(reason)),
            2 => Activity::AlreadyOn,
            _ => Activity::Off(reason),
        }
    } else {
        Activity::NotAsked
    };
    let nvtx_modules = if request.nvtx {
        nvtx::adopt(pid, &mut thread, &symbols)
    } else {
        0
    };
    let injected = Injected {
        loaded,
        activity,
        nvtx_modules,
    };
    thread.release()?;
    Ok(injected)
}

/// How an attach's end left the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiesced {
    /// Activity disabled and flushed.
    Stopped,
    /// Left recording: the process started with it (not asys's attach).
    LeftAsStarted,
}

/// At the end of an attach: has the library in `pid` disable activity and
/// flush its records (through the sites, still probed).
pub fn quiesce(pid: u32) -> Result<Quiesced, InjectError> {
    let symbols = Symbols::of(pid);
    let detach = symbols
        .in_injection_library("asys_inject_detach")
        .ok_or(InjectError::NoEntry("asys_inject_detach"))?;
    let mut thread = stop_a_thread(pid)?;
    let r = thread.call(detach, &[], CALL_TIMEOUT)?;
    thread.release()?;
    Ok(if r.value as u32 == 1 {
        Quiesced::Stopped
    } else {
        Quiesced::LeftAsStarted
    })
}

/// `ASYS_INJECT_HOLD_MS`: holds the stopped thread this long before the
/// load, so that a test can kill the process while asys has it stopped.
fn hold_for_fault_tests(thread: &mut StoppedThread) -> Result<(), StopError> {
    match std::env::var("ASYS_INJECT_HOLD_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(ms) => thread.hold(Duration::from_millis(ms)),
        None => Ok(()),
    }
}

/// Stops the process's main thread, or its first live thread if the main
/// one has exited (a zombie leader cannot run a call).
fn stop_a_thread(pid: u32) -> Result<StoppedThread, InjectError> {
    let mut tids = crate::process::procfs::task_ids(pid);
    // The main thread first.
    tids.sort_by_key(|&t| t != pid);
    let tid = tids
        .into_iter()
        .find(|&t| !preflight::is_zombie_thread(pid, t))
        .unwrap_or(pid);
    StoppedThread::stop(pid, tid, STOP_TIMEOUT).map_err(|e| match e {
        StopError::Refused(errno) => preflight::refused_by_ptrace(pid, errno).into(),
        e => e.into(),
    })
}

/// `dlopen`s the library in the stopped thread's process; returns how, and
/// the process's descriptor of the memfd it came from, if it did.
fn load(
    pid: u32,
    thread: &mut StoppedThread,
    symbols: &Symbols,
    library: &Path,
) -> Result<(Loaded, Option<u64>), InjectError> {
    let (dlopen, mode) = match symbols.libc("dlopen") {
        Some(f) => (f, RTLD_NOW),
        // glibc before 2.34 keeps dlopen in libdl, which the process may not
        // have loaded; its libc has this one, for its own use.
        None => (
            symbols
                .libc("__libc_dlopen_mode")
                .ok_or(InjectError::NoDlopen)?,
            RTLD_NOW | RTLD_DLOPEN,
        ),
    };
    let (path, loaded, memfd) = if preflight::same_mount_namespace(pid) {
        (
            library.as_os_str().as_encoded_bytes().to_vec(),
            Loaded::ByPath,
            None,
        )
    } else {
        let fd = copy_into_memfd(pid, thread, symbols, library)?;
        (
            format!("/proc/self/fd/{fd}").into_bytes(),
            Loaded::FromMemfd,
            Some(fd),
        )
    };
    let mut path = path;
    path.push(0);
    let handle = thread
        .call(dlopen, &[Arg::Bytes(&path), Arg::Value(mode)], CALL_TIMEOUT)?
        .value;
    if handle == 0 {
        let why = dlerror(thread, symbols);
        if let (Some(fd), Some(close)) = (memfd, symbols.libc("close")) {
            thread.call(close, &[Arg::Value(fd)], CALL_TIMEOUT)?;
        }
        return Err(InjectError::Dlopen(why));
    }
    // A memfd stays open (close-on-exec): a forked child maps the library's
    // site page afresh from it (see asys-inject's fork.rs).
    Ok((loaded, memfd))
}

/// The process's `dlerror()` text.
fn dlerror(thread: &mut StoppedThread, symbols: &Symbols) -> String {
    use crate::process::remote_memory::RemoteMemory as _;
    let Some(f) = symbols.libc("dlerror") else {
        return "no dlerror in the process to say why".into();
    };
    let Ok(r) = thread.call(f, &[], CALL_TIMEOUT) else {
        return "dlerror failed".into();
    };
    if r.value == 0 {
        return "no reason given".into();
    }
    let mem = crate::process::remote_memory::Process(symbols.pid());
    let bytes = mem
        .read(r.value, 512)
        .or_else(|| mem.read(r.value, 64))
        .unwrap_or_default();
    asys_report::text_safety::escaped_name(&c_string(&bytes)).into_owned()
}

/// Creates a memfd in the process, fills it with the library (through a
/// duplicate of the process's descriptor: no path is looked up) and
/// returns the process's descriptor number.
fn copy_into_memfd(
    pid: u32,
    thread: &mut StoppedThread,
    symbols: &Symbols,
    library: &Path,
) -> Result<u64, InjectError> {
    use std::os::fd::FromRawFd as _;
    let name = b"libasys_inject.so\0";
    let fd = match symbols.libc("memfd_create") {
        Some(f) => {
            thread
                .call(
                    f,
                    &[Arg::Bytes(name), Arg::Value(MFD_CLOEXEC)],
                    CALL_TIMEOUT,
                )?
                .value
        }
        None => {
            let syscall = symbols.libc("syscall").ok_or(InjectError::NoDlopen)?;
            thread
                .call(
                    syscall,
                    &[
                        Arg::Value(libc::SYS_memfd_create as u64),
                        Arg::Bytes(name),
                        Arg::Value(MFD_CLOEXEC),
                    ],
                    CALL_TIMEOUT,
                )?
                .value
        }
    } as i64;
    if fd < 0 {
        return Err(InjectError::Copy(std::io::Error::other(
            "memfd_create failed in the process",
        )));
    }
    // SAFETY: pidfd_open and pidfd_getfd return new descriptors (or -1) and
    // touch no memory of ours.
    let dup = unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid as i32, 0) as i32;
        if pidfd < 0 {
            return Err(InjectError::Copy(std::io::Error::last_os_error()));
        }
        let dup = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd as i32, 0) as i32;
        libc::close(pidfd);
        dup
    };
    if dup < 0 {
        return Err(InjectError::Copy(std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor pidfd_getfd just gave us, owned from here.
    let mut memfd = unsafe { std::fs::File::from_raw_fd(dup) };
    let mut source = std::fs::File::open(library).map_err(InjectError::Copy)?;
    std::io::copy(&mut source, &mut memfd).map_err(InjectError::Copy)?;
    Ok(fd as u64)
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
