//! Uprobe-multi links: one BPF link carries every probe of a program on one
//! library. aya 0.14 attaches uprobes one perf event at a time, and the kernel
//! tears each of those down under a global mutex with an RCU-tasks grace period
//! (about 0.1 s each here): 60 probes took 6 s to detach. A uprobe-multi link
//! unregisters all its probes with one grace period.
//!
//! The program must be loaded with expected_attach_type BPF_TRACE_UPROBE_MULTI,
//! which aya 0.14 cannot do, so the API programs are loaded here from the same
//! object, with aya-obj relocating their map references to aya's maps.
use std::{
    collections::HashSet,
    ffi::CString,
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd},
    os::unix::ffi::OsStrExt,
    path::Path,
};

use aya::{Ebpf, maps::Map};
use aya_obj::generated::{
    BPF_F_UPROBE_MULTI_RETURN, bpf_attach_type::BPF_TRACE_UPROBE_MULTI, bpf_attr, bpf_cmd,
    bpf_prog_type::BPF_PROG_TYPE_KPROBE,
};

#[derive(Debug, thiserror::Error)]
pub enum MultiError {
    #[error("parsing the eBPF object: {0}")]
    Parse(#[from] aya_obj::ParseError),
    #[error("relocating {0}: {1}")]
    Relocate(&'static str, String),
    #[error("program {0} is not in the eBPF object")]
    Missing(&'static str),
    #[error("the kernel rejected eBPF program {name} ({source}); verifier: {log}")]
    Load {
        name: &'static str,
        source: std::io::Error,
        log: String,
    },
    #[error("attaching {count} probes to {path}: {source}")]
    Attach {
        count: usize,
        path: String,
        source: std::io::Error,
    },
}

/// The `bpf()` system call: its non-negative result, or the error.
///
/// The caller makes `attr` a valid, fully initialised bpf_attr for `cmd`,
/// every pointer in it (names, instructions, buffers) outliving the call.
pub(super) fn bpf_call(cmd: bpf_cmd, attr: &mut bpf_attr) -> std::io::Result<libc::c_long> {
    // SAFETY: as the caller makes it (above); the kernel reads at most
    // size_of::<bpf_attr>() bytes of it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut bpf_attr,
            size_of::<bpf_attr>() as libc::c_long,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc)
}

/// [`bpf_call`] for the commands that return a new file descriptor.
/// Instructions the verifier processed to accept the loaded program `fd`
/// (Linux 5.16+; None on an older kernel).
pub(super) fn verified_instructions(fd: std::os::fd::BorrowedFd<'_>) -> Option<u32> {
    // SAFETY: both are plain C structs for which all zeroes is valid.
    let (mut info, mut attr): (aya_obj::generated::bpf_prog_info, bpf_attr) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    // The union's `info` member, the one BPF_OBJ_GET_INFO_BY_FD reads; the
    // kernel writes at most info_len bytes to `info`, which lives until the
    // call returns.
    attr.info.bpf_fd = fd.as_raw_fd() as u32;
    attr.info.info_len = size_of_val(&info) as u32;
    attr.info.info = (&raw mut info) as u64;
    bpf_call(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr).ok()?;
    (info.verified_insns > 0).then_some(info.verified_insns)
}

pub(super) fn bpf(cmd: bpf_cmd, attr: &mut bpf_attr) -> std::io::Result<OwnedFd> {
    let fd = bpf_call(cmd, attr)?;
    // SAFETY: these commands return a new file descriptor that nothing
    // else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The file descriptors of `ebpf`'s maps by name, for relocation.
fn map_fds(ebpf: &Ebpf) -> Vec<(String, RawFd)> {
    ebpf.maps()
        .filter_map(|(name, map)| {
            let data = match map {
                Map::RingBuf(d)
                | Map::HashMap(d)
                | Map::LruHashMap(d)
                | Map::PerCpuArray(d)
                | Map::Array(d) => d,
                _ => return None,
            };
            Some((name.to_string(), data.fd().as_fd().as_raw_fd()))
        })
        .collect()
}

/// Loads `names` from `object` as uprobe-multi programs that share `ebpf`'s
/// maps, or with `perf_event` as plain kprobe programs for perf-event
/// uprobes (`perf_uprobe.rs`; the kernel gives a uprobe-multi program's
/// `bpf_get_attach_cookie` the multi link's context, so one program cannot
/// serve both). Call before any map is taken out of `ebpf`.
pub fn load(
    ebpf: &Ebpf,
    object: &[u8],
    names: &[&'static str],
    perf_event: bool,
) -> Result<Vec<OwnedFd>, MultiError> {
    let expected = if perf_event {
        0
    } else {
        BPF_TRACE_UPROBE_MULTI as u32
    };
    let kind = ProgKind {
        prog_type: BPF_PROG_TYPE_KPROBE as u32,
        expected_attach_type: expected,
        attach_btf_id: 0,
    };
    load_as(
        ebpf,
        object,
        &names.iter().map(|&n| (n, kind)).collect::<Vec<_>>(),
    )
}

/// How a program is loaded: its type, expected attach type and, for
/// fentry/fexit, the kernel function's BTF id.
#[derive(Debug, Clone, Copy)]
pub struct ProgKind {
    pub prog_type: u32,
    pub expected_attach_type: u32,
    pub attach_btf_id: u32,
}

/// Loads each `(name, kind)` from `object`, sharing `ebpf`'s maps (see
/// [`load`]); a name may come more than once (an fentry program per
/// function).
pub fn load_as(
    ebpf: &Ebpf,
    object: &[u8],
    programs: &[(&'static str, ProgKind)],
) -> Result<Vec<OwnedFd>, MultiError> {
    let mut obj = aya_obj::Object::parse(object)?;
    let fds = map_fds(ebpf);
    let maps = obj.maps.clone();
    let text_sections: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
    obj.relocate_maps(
        fds.iter()
            .filter_map(|(n, fd)| maps.get(n).map(|m| (n.as_str(), *fd, m))),
        &text_sections,
    )
    .map_err(|e| MultiError::Relocate("maps", e.to_string()))?;
    obj.relocate_calls(&text_sections)
        .map_err(|e| MultiError::Relocate("calls", e.to_string()))?;
    programs
        .iter()
        .map(|&(name, kind)| {
            let prog = obj.programs.get(name).ok_or(MultiError::Missing(name))?;
            let func = obj
                .functions
                .get(&prog.function_key())
                .ok_or(MultiError::Missing(name))?;
            let mut log = vec![0u8; 1 << 20];
            // SAFETY: bpf_attr is a union of plain integer structs, for
            // which all-zero is the kernel's "unset".
            let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
            // SAFETY: the union's BPF_PROG_LOAD member, the one this command reads.
            let a = unsafe { &mut attr.__bindgen_anon_3 };
            a.prog_type = kind.prog_type;
            a.expected_attach_type = kind.expected_attach_type;
            a.attach_btf_id = kind.attach_btf_id;
            a.insns = func.instructions.as_ptr() as u64;
            a.insn_cnt = func.instructions.len() as u32;
            a.license = prog.license.as_ptr() as u64;
            for (dst, src) in a.prog_name.iter_mut().zip(name.bytes().take(15)) {
                *dst = src as libc::c_char;
            }
            match bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr) {
                Ok(fd) => Ok(fd),
                Err(_) => {
                    // Load again with the verifier log to say why.
                    // SAFETY: the same member, as above.
                    let a = unsafe { &mut attr.__bindgen_anon_3 };
                    a.log_level = 1;
                    a.log_buf = log.as_mut_ptr() as u64;
                    a.log_size = log.len() as u32;
                    let source =
                        bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr)
                            .err()
                            .unwrap_or_else(|| {
                                std::io::Error::other("load failed once and then succeeded")
                            });
                    let end = log.iter().position(|&b| b == 0).unwrap_or(0);
                    let text = String::from_utf8_lossy(&log[..end]);
                    let tail: Vec<&str> = text.lines().rev().take(3).collect();
                    Err(MultiError::Load {
                        name,
                        source,
                        log: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
                    })
                }
            }
        })
        .collect()
}

/// Attaches `prog` at `offsets` in the file at `path`, each probe with its
/// cookie, for every process; `ret` makes them return probes.
pub fn attach(
    prog: &OwnedFd,
    path: &Path,
    offsets: &[u64],
    cookies: &[u64],
    ret: bool,
) -> Result<OwnedFd, MultiError> {
    attach_scoped(prog, path, offsets, cookies, ret, None)
}

/// [`attach`], for the process `pid` alone when given: the kernel then
/// puts the breakpoints only in that process's memory, so other processes
/// mapping the same file pay no trap (its forks inherit the breakpoints
/// but run no program until they get a link of their own).
pub fn attach_scoped(
    prog: &OwnedFd,
    path: &Path,
    offsets: &[u64],
    cookies: &[u64],
    ret: bool,
    pid: Option<u32>,
) -> Result<OwnedFd, MultiError> {
    let err = |source| MultiError::Attach {
        count: offsets.len(),
        path: path.display().to_string(),
        source,
    };
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| err(std::io::Error::other("path contains NUL")))?;
    // SAFETY: all-zero is a valid bpf_attr (plain integers), "unset".
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the union's BPF_LINK_CREATE member, the one this command reads.
    let l = unsafe { &mut attr.link_create };
    l.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    l.attach_type = BPF_TRACE_UPROBE_MULTI as u32;
    // SAFETY: the uprobe_multi member, which BPF_TRACE_UPROBE_MULTI reads.
    let m = unsafe { &mut l.__bindgen_anon_3.uprobe_multi };
    m.path = cpath.as_ptr() as u64;
    m.offsets = offsets.as_ptr() as u64;
    m.cookies = cookies.as_ptr() as u64;
    m.cnt = offsets.len() as u32;
    m.flags = if ret { BPF_F_UPROBE_MULTI_RETURN } else { 0 };
    m.pid = pid.unwrap_or(0);
    bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr).map_err(err)
}
