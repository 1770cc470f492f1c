//! The OS runtime item (`-t osrt`) on the kernel side: system calls from
//! the `raw_syscalls` tracepoints (asys-ebpf/src/syscalls.rs, named by
//! [`super::syscalls::SYSCALLS`]), and uprobes on the lock functions that
//! wait without a system call of their own (asys-ebpf/src/osrt_locks.rs).
//!
//! The lock uprobes are scoped to the traced processes (uprobe-multi's
//! pid): the kernel puts their breakpoints only in those processes'
//! memory, so the rest of the machine pays no trap on `pthread_mutex_lock`
//! (it used to pay two, about 15 us each on a VM, on every lock). The cost:
//! a process gets its link when asys sees it (its fork event, or its
//! libraries at exec or load), so a forked child's lock calls before that
//! moment are not recorded; its system calls are (the tracepoints follow
//! `TRACED`, which the kernel fills at the fork itself). System-wide, one
//! link per library serves every process.
use std::{
    collections::{HashMap, HashSet},
    os::fd::OwnedFd,
    path::{Path, PathBuf},
};

use asys_common::{Cookie, OSRT_SYSCALL_SLOTS};
use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap, MapData},
    programs::RawTracePoint,
};

use super::{LibraryId, ProbeInfo, TracerError, libraries::Libraries, multi};
use crate::apis::TraceItem;

/// The pseudo-library the system calls are listed under.
pub const SYSCALL_LIBRARY: &str = "[kernel system calls]";

/// One library's lock functions: where they are and their cookies.
struct LockSites {
    path: PathBuf,
    offsets: Vec<u64>,
    cookies: Vec<u64>,
}

pub struct Osrt {
    /// Set where probes attach as perf events (the `perf-uprobe` fallback).
    perf: Option<super::features::UprobePmu>,
    lock_entry: OwnedFd,
    lock_exit: OwnedFd,
    /// Where each traced process has the library of its lock functions and
    /// the dynamic loader: calls from in there are libc's own (see
    /// osrt_locks.rs). `code` is the copy asys keeps, to change one half.
    libc: BpfHashMap<MapData, u32, [u64; 4]>,
    code: HashMap<u32, [u64; 4]>,
    sites: HashMap<LibraryId, LockSites>,
    /// (pid, library) already linked; pid 0: for every process.
    linked: HashSet<(u32, LibraryId)>,
}

impl Osrt {
    /// Loads the lock programs (before any map leaves `ebpf`), names the
    /// system calls as probes and hands the kernel their cookies, and
    /// attaches the system-call tracepoints.
    pub fn load(
        ebpf: &mut Ebpf,
        object: &[u8],
        probes: &mut Vec<ProbeInfo>,
        libraries: &mut Libraries,
        perf: Option<super::features::UprobePmu>,
    ) -> Result<Self, TracerError> {
        let [lock_entry, lock_exit]: [_; 2] = multi::load(
            ebpf,
            object,
            &["osrt_lock_entry", "osrt_lock_exit"],
            perf.is_some(),
        )?
        .try_into()
        .expect("two programs asked, two loaded");
        let library = libraries.add_pseudo(SYSCALL_LIBRARY, super::syscalls::SYSCALLS.len());
        let mut table: Array<&mut MapData, u64> = Array::try_from(
            ebpf.map_mut("OSRT_SYSCALLS")
                .ok_or(TracerError::MissingMap("OSRT_SYSCALLS"))?,
        )
        .map_err(|source| TracerError::Map {
            name: "OSRT_SYSCALLS",
            source,
        })?;
        let family = TraceItem::Osrt.family_id();
        for &(nr, name) in super::syscalls::SYSCALLS {
            debug_assert!(nr < OSRT_SYSCALL_SLOTS);
            let signature = crate::apis::signature_in(TraceItem::Osrt, name);
            let id = u32::try_from(probes.len()).expect("fewer than 2^32 probes");
            // Arguments cost a read of the saved registers: only for the
            // calls whose row shows one (bytes of read and write).
            let args = if signature.bytes.is_some() {
                Cookie::ARGS
            } else {
                0
            };
            let cookie = Cookie::new(id, family).with(args);
            table
                .set(nr, cookie.0, 0)
                .map_err(|source| TracerError::Map {
                    name: "OSRT_SYSCALLS",
                    source,
                })?;
            probes.push(ProbeInfo {
                item: TraceItem::Osrt,
                name: name.to_string(),
                library,
                signature,
            });
        }
        for (name, tracepoint) in [
            ("osrt_sys_enter", "sys_enter"),
            ("osrt_sys_exit", "sys_exit"),
        ] {
            let prog: &mut RawTracePoint = super::program(ebpf, name)?;
            prog.load()
                .map_err(|source| TracerError::Program { name, source })?;
            prog.attach(tracepoint)
                .map_err(|source| TracerError::Program { name, source })?;
        }
        let libc = super::take_map(ebpf, "OSRT_LIBC")?;
        Ok(Self {
            perf,
            lock_entry,
            lock_exit,
            libc,
            code: HashMap::new(),
            sites: HashMap::new(),
            linked: HashSet::new(),
        })
    }

    /// Notes `library`'s lock functions (each offset once: a function
    /// exported under two versions is one probe), naming them as probes.
    /// Returns how many.
    pub fn add_library(
        &mut self,
        library: LibraryId,
        path: &Path,
        functions: Vec<crate::symbolize::elf::ExportedFunction>,
        probes: &mut Vec<ProbeInfo>,
    ) -> usize {
        let mut sites = LockSites {
            path: path.to_path_buf(),
            offsets: Vec::new(),
            cookies: Vec::new(),
        };
        for f in functions {
            if sites.offsets.contains(&f.file_offset) {
                continue;
            }
            let id = u32::try_from(probes.len()).expect("fewer than 2^32 probes");
            sites.offsets.push(f.file_offset);
            // With its first argument: the lock, condition or semaphore.
            sites.cookies.push(
                Cookie::new(id, TraceItem::Osrt.family_id())
                    .with(Cookie::ARGS)
                    .0,
            );
            probes.push(ProbeInfo {
                item: TraceItem::Osrt,
                signature: crate::apis::signature_in(TraceItem::Osrt, &f.name),
                name: f.name,
                library,
            });
        }
        let n = sites.offsets.len();
        if n > 0 {
            self.sites.insert(library, sites);
        }
        n
    }

    /// Notes where `process` has its dynamic loader's code ([start, end)).
    pub fn loader_at(&mut self, process: u32, code: [u64; 2]) {
        self.note_code(process, 2, code);
    }

    /// Sets half `at` (0: libc, 2: the loader) of `process`'s code ranges,
    /// again at each look (an exec maps them elsewhere). A full map only
    /// means libc's own lock calls of that process are rows too.
    fn note_code(&mut self, process: u32, at: usize, code: [u64; 2]) {
        let all = self.code.entry(process).or_default();
        all[at..at + 2].copy_from_slice(&code);
        let _ = self.libc.insert(process, *all, 0);
    }

    /// Links `library`'s lock probes for `pid` (None: every process,
    /// system-wide), once; the links go to `links`. `process` maps the
    /// library's code at `code` ([start, end)), noted for every process.
    pub fn link(
        &mut self,
        (process, code): (u32, [u64; 2]),
        pid: Option<u32>,
        library: LibraryId,
        links: &mut Vec<OwnedFd>,
    ) -> Result<(), TracerError> {
        if !self.sites.contains_key(&library) {
            return Ok(());
        }
        self.note_code(process, 0, code);
        let sites = &self.sites[&library];
        if self.linked.contains(&(0, library)) || !self.linked.insert((pid.unwrap_or(0), library)) {
            return Ok(());
        }
        let (path, offsets, cookies) = (&sites.path, &sites.offsets, &sites.cookies);
        let attach = |prog, ret| match self.perf {
            Some(pmu) => super::perf_uprobe::attach(prog, pmu, path, offsets, cookies, ret, pid),
            None => Ok(vec![multi::attach_scoped(
                prog, path, offsets, cookies, ret, pid,
            )?]),
        };
        match attach(&self.lock_entry, false).and_then(|mut e| {
            e.extend(attach(&self.lock_exit, true)?);
            Ok(e)
        }) {
            Ok(both) => links.extend(both),
            // The process is gone already: nothing of it to probe.
            Err(multi::MultiError::Attach { source, .. })
                if pid.is_some() && source.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }
}
