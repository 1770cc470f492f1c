//! Uprobes attached one perf event each, where the kernel has no uprobe-multi
//! links (before 6.6) or the `perf-uprobe` fallback is forced: a uprobe PMU
//! event per offset (for every process: pid -1 on CPU 0, filtered in the
//! kernel by `TRACED` like the multi links), and a BPF perf link on it that
//! carries the probe's cookie, so the programs read it with
//! `bpf_get_attach_cookie` as they do under a multi link. The programs must
//! then be loaded as plain kprobe programs (see `multi::load`).
//!
//! The link keeps its perf event alive; closing the link removes the probe.
//! Each costs a grace period to remove, under a global kernel mutex (see
//! `multi.rs`): past a few, a background process removes them
//! (`unlinker.rs`).
use std::{
    ffi::CString,
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::ffi::OsStrExt,
    },
    path::Path,
};

use aya_obj::generated::{
    PERF_FLAG_FD_CLOEXEC, bpf_attach_type::BPF_PERF_EVENT, bpf_attr, bpf_cmd, perf_event_attr,
};

use super::{features::UprobePmu, multi::MultiError};

/// One probe per offset, each a link fd; `ret` makes them return probes.
/// `pid`: only in that process (the kernel filters a task's uprobe events
/// by its address space, so every thread of it counts); None: every process.
pub fn attach(
    prog: &OwnedFd,
    pmu: UprobePmu,
    path: &Path,
    offsets: &[u64],
    cookies: &[u64],
    ret: bool,
    pid: Option<u32>,
) -> Result<Vec<OwnedFd>, MultiError> {
    let err = |source| MultiError::Attach {
        count: offsets.len(),
        path: path.display().to_string(),
        source,
    };
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| err(std::io::Error::other("path contains NUL")))?;
    // Any asys's background unlinker pauses meanwhile (see unlinker.rs).
    let _attaching = super::unlinker::attaching();
    offsets
        .iter()
        .zip(cookies)
        .map(|(&offset, &cookie)| {
            let event = open(pmu, &cpath, offset, ret, pid).map_err(err)?;
            link(prog, &event, cookie).map_err(err)
            // `event` closes here: the link holds the perf event.
        })
        .collect()
}

fn open(
    pmu: UprobePmu,
    path: &CString,
    offset: u64,
    ret: bool,
    pid: Option<u32>,
) -> std::io::Result<OwnedFd> {
    // SAFETY: perf_event_attr is plain integers; all-zero is "unset".
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.size = size_of::<perf_event_attr>() as u32;
    attr.type_ = pmu.perf_type;
    if ret {
        attr.config = 1 << pmu.retprobe_bit;
    }
    // config1: the file's path; config2: the offset in it.
    attr.__bindgen_anon_3.config1 = path.as_ptr() as u64;
    attr.__bindgen_anon_4.config2 = offset;
    // pid -1 with cpu 0 is every process (uprobes fire on any CPU); a
    // process with cpu -1 is that process on any CPU.
    let (pid, cpu) = match pid {
        Some(pid) => (pid as libc::c_int, -1),
        None => (-1, 0),
    };
    // `path` outlives the call.
    perf_event_open(&attr, pid, cpu)
}

/// `perf_event_open` of `attr` for `pid` on `cpu` (no group, close on exec).
/// Any path or buffer `attr` points to outlives the call.
pub(super) fn perf_event_open(
    attr: &perf_event_attr,
    pid: libc::c_int,
    cpu: libc::c_int,
) -> std::io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid perf_event_attr, and what it points to
    // outlives the call (above).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const perf_event_attr,
            pid,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
}

/// A BPF link of `prog` to the perf event `event`, with `cookie`.
pub(super) fn link(prog: &OwnedFd, event: &OwnedFd, cookie: u64) -> std::io::Result<OwnedFd> {
    // SAFETY: all-zero is a valid bpf_attr (plain integers), "unset".
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the union's BPF_LINK_CREATE member, the one this command reads.
    let l = unsafe { &mut attr.link_create };
    l.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    l.__bindgen_anon_2.target_fd = event.as_raw_fd() as u32;
    l.attach_type = BPF_PERF_EVENT as u32;
    // The perf_event member, which BPF_PERF_EVENT reads (a write to a
    // union field is safe).
    l.__bindgen_anon_3.perf_event.bpf_cookie = cookie;
    super::multi::bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr)
}
