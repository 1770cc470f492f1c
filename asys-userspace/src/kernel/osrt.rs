//! The OS runtime item (`-t osrt`) on the kernel side: system calls from
//! the `raw_syscalls` tracepoints (asys-ebpf/src/syscalls.rs, named by
//! [`super::syscalls::SYSCALLS`]), and lock waits from the same
//! tracepoints: the futex waits made by the code of a library with the
//! pthread lock functions (libc), each named here after the lock function
//! that waited (see [`Osrt::name_wait`]).
//!
//! Nothing is probed in libc: a lock that does not wait makes no system
//! call and costs nothing, and one that waits pays the tracepoints'
//! cost (hundreds of ns) once, against the microseconds it waits. (osrt
//! used to put an entry and a return uprobe on every lock function: two
//! int3 traps, about 15 us each on a VM, on every call, which made a
//! PyTorch step three times slower.)
use std::{collections::HashMap, ops::Range, path::Path};

use addr2line::gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, ParsedEhFrameHdr, RegisterRule,
    UnwindContext, UnwindSection, X86_64,
};
use asys_common::{ApiCallEvent, Cookie, LockWaitEvent, OSRT_SYSCALL_SLOTS};
use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap, MapData},
    programs::RawTracePoint,
};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

use super::{LibraryId, ProbeInfo, TracerError, probed_files::Libraries};
use crate::{apis::ProbedFunctions as _, elf::mapped::FileBytes};
use asys_report::trace_items::TraceItem;

/// The pseudo-library the system calls are listed under.
pub const SYSCALL_LIBRARY: &str = "[kernel system calls]";

/// Frames of a lock library walked at most, from the system call out.
const MAX_FRAMES: usize = 32;

/// A library with lock functions (libc; libpthread in glibc before 2.34):
/// what naming its lock waits needs (None: unreadable, no wait in it is
/// named).
struct LockLibrary {
    code: Option<LockCode>,
}

/// Where a lock library lies in one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placed {
    library: LibraryId,
    start: u64,
    end: u64,
    offset: u64,
}

/// What asys knows of a traced process's code: its lock libraries, and its
/// dynamic loader's code ([start, end)).
#[derive(Default)]
struct ProcessCode {
    locks: Vec<Placed>,
    loader: Option<[u64; 2]>,
}

pub struct Osrt {
    /// Per traced process: its lock libraries' code ranges, for the
    /// kernel's filter (see asys-ebpf/src/syscalls.rs).
    libc: BpfHashMap<MapData, u32, [u64; 4]>,
    processes: HashMap<u32, ProcessCode>,
    libraries: HashMap<LibraryId, LockLibrary>,
}

impl Osrt {
    /// Names the system calls (and futex, for lock waits) as probes, hands
    /// the kernel their cookies, and attaches the system-call tracepoints.
    pub fn load(
        ebpf: &mut Ebpf,
        probes: &mut Vec<ProbeInfo>,
        libraries: &mut Libraries,
    ) -> Result<Self, TracerError> {
        let calls = super::syscalls::SYSCALLS;
        let library = libraries.add_pseudo(SYSCALL_LIBRARY, calls.len());
        let mut table: Array<&mut MapData, u64> = Array::try_from(
            ebpf.map_mut("OSRT_SYSCALLS")
                .ok_or(TracerError::MissingMap("OSRT_SYSCALLS"))?,
        )
        .map_err(|source| TracerError::Map {
            name: "OSRT_SYSCALLS",
            source,
        })?;
        let family = TraceItem::Osrt.family_id();
        // futex is no row of its own: its cookie marks the call for the
        // kernel, and a wait made by a lock library becomes a row of the
        // lock function that made it (see name_wait).
        let futex = [(libc::SYS_futex as u32, "futex")];
        for &(nr, name) in calls.iter().chain(&futex) {
            debug_assert!(nr < OSRT_SYSCALL_SLOTS);
            let signature = crate::apis::signature_in(TraceItem::Osrt, name);
            let id = u32::try_from(probes.len()).expect("fewer than 2^32 probes");
            // Arguments cost a read of the saved registers: only for the
            // calls whose row shows one (bytes of read and write). A lock
            // wait's are always read.
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
            libc,
            processes: HashMap::new(),
            libraries: HashMap::new(),
        })
    }

    /// Notes `library`'s lock functions (each name once), naming them as
    /// probes: the names of its lock waits. Returns how many.
    pub fn add_library(
        &mut self,
        library: LibraryId,
        path: &Path,
        functions: Vec<crate::elf::ExportedFunction>,
        probes: &mut Vec<ProbeInfo>,
    ) -> usize {
        let mut ids = HashMap::new();
        for f in functions {
            if ids.contains_key(&f.name) {
                continue;
            }
            let id = u32::try_from(probes.len()).expect("fewer than 2^32 probes");
            ids.insert(f.name.clone(), id);
            probes.push(ProbeInfo {
                item: TraceItem::Osrt,
                signature: crate::apis::signature_in(TraceItem::Osrt, &f.name),
                name: f.name,
                library,
            });
        }
        let n = ids.len();
        if n > 0 {
            // Read now: the file is not kept open.
            let code = LockCode::read(path, &ids);
            self.libraries.insert(library, LockLibrary { code });
        }
        n
    }

    /// Notes where `process` has its dynamic loader's code ([start, end)):
    /// a lock call from there is libc's own (pthread_create takes the
    /// loader's locks, through the loader), not one the program made.
    pub fn loader_at(&mut self, process: u32, code: [u64; 2]) {
        self.processes.entry(process).or_default().loader = Some(code);
    }

    /// A fork (or a thread) of `parent`: it maps the same lock libraries
    /// (the kernel copied their ranges for its filter).
    pub fn forked(&mut self, parent: u32, child: u32) {
        if let Some(code) = self.processes.get(&parent) {
            let copy = ProcessCode {
                locks: code.locks.clone(),
                loader: code.loader,
            };
            self.processes.insert(child, copy);
        }
    }

    /// `process` executed a new image (the kernel dropped its ranges).
    pub fn executed(&mut self, process: u32) {
        self.processes.remove(&process);
    }

    /// Notes that `process` maps `library` at `mapping` (executable), if it
    /// is a lock library, again at each look (an exec maps it elsewhere),
    /// and tells the kernel where the process's lock libraries are. Returns
    /// whether this placed it anew.
    pub fn link(
        &mut self,
        process: u32,
        mapping: &crate::process::procfs::MapsEntry,
        library: LibraryId,
    ) -> bool {
        if !self.libraries.contains_key(&library) {
            return false;
        }
        let placed = Placed {
            library,
            start: mapping.start,
            end: mapping.end,
            offset: mapping.offset,
        };
        let code = self.processes.entry(process).or_default();
        if code.locks.contains(&placed) {
            return false;
        }
        code.locks.retain(|p| p.library != library);
        code.locks.push(placed);
        // Two ranges fit; more (never seen) and the kernel sends all the
        // process's futex waits, to be sorted out here.
        // A full map only costs the filter: the waits are still sorted here.
        let _ = match code.locks.as_slice() {
            [a] => self.libc.insert(process, [a.start, a.end, 0, 0], 0),
            [a, b] => self
                .libc
                .insert(process, [a.start, a.end, b.start, b.end], 0),
            _ => self.libc.remove(&process),
        };
        true
    }

    /// The row of a lock wait: the futex wait as a call of the lock
    /// function that made it, or None if no lock function of the program's
    /// made it.
    ///
    /// The stack is unwound from the system call with the lock library's
    /// call frame information (`.eh_frame`: it needs neither frame pointers
    /// nor debug symbols) for as long as it stays in the lock libraries; the
    /// last frame there is the function the program called. It names the
    /// row if it is a lock function, or code that only a lock function
    /// jumps to (a tail call, such as `sem_wait`'s to its slow path, or its
    /// cold part). The frame before it, the caller, must not be the dynamic
    /// loader's.
    pub fn name_wait(&self, ev: &LockWaitEvent) -> Option<ApiCallEvent> {
        let id = self.unwind_wait(ev)?;
        let mut call = ev.call;
        call.header.kind = asys_common::EventKind::ApiCall as u32;
        call.cookie = Cookie::new(id, TraceItem::Osrt.family_id())
            .with(Cookie::ARGS)
            .0;
        Some(call)
    }

    fn unwind_wait(&self, ev: &LockWaitEvent) -> Option<u32> {
        let pid = ev.call.header.pid;
        let process = self.processes.get(&pid)?;
        let len = (ev.len as usize).min(ev.stack.len());
        let stack = &ev.stack[..len];
        let (mut pc, mut sp, mut bp) = (ev.ip, ev.sp, ev.bp);
        // The outermost frame in the lock libraries so far.
        let mut outermost = None;
        for _ in 0..MAX_FRAMES {
            let Some(placed) = process
                .locks
                .iter()
                .find(|p| (p.start..p.end).contains(&pc))
            else {
                break;
            };
            let code = self.libraries.get(&placed.library)?.code.as_ref()?;
            // The instruction after the system call, then return addresses:
            // the call is the instruction before.
            let file_offset = (pc - 1 - placed.start) + placed.offset;
            let vaddr = code.vaddr(file_offset)?;
            outermost = Some((placed.library, vaddr));
            let (cfa, ra, next_bp) = code.step(vaddr, sp, bp, |at| read_stack(stack, ev.sp, at))?;
            // The stack grows down: a caller's frame is above its callee's.
            if cfa <= sp {
                return None;
            }
            (pc, sp, bp) = (ra, cfa, next_bp);
        }
        let (library, vaddr) = outermost?;
        if process.locks.iter().any(|p| (p.start..p.end).contains(&pc)) {
            // Deeper than MAX_FRAMES in the lock libraries.
            return None;
        }
        if pc == 0 || process.loader.is_some_and(|[s, e]| (s..e).contains(&pc)) {
            return None;
        }
        self.libraries[&library]
            .code
            .as_ref()
            .and_then(|code| code.function_at(vaddr))
    }
}

/// The u64 at `addr` of a stack copied from `sp`, if the copy holds it.
fn read_stack(stack: &[u8], sp: u64, addr: u64) -> Option<u64> {
    let at = usize::try_from(addr.checked_sub(sp)?).ok()?;
    let bytes = stack.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// What naming a lock wait needs of a lock library's file: its call frame
/// information, and which code belongs to which lock function.
struct LockCode {
    data: FileBytes,
    eh_frame: (u64, Range<usize>),
    eh_frame_hdr: Option<(u64, Range<usize>)>,
    text: u64,
    /// (file offset, size in the file, vaddr) of the loadable segments.
    segments: Vec<(u64, u64, u64)>,
    /// [start, end) vaddrs and the probe id of the lock function whose code
    /// it is, sorted by start.
    functions: Vec<(u64, u64, u32)>,
}

impl LockCode {
    fn read(path: &Path, probes: &HashMap<String, u32>) -> Option<Self> {
        let data = FileBytes::map(path, &asys_report::untrusted::open::Policy::MAPPED).ok()?;
        let (eh_frame, eh_frame_hdr, text, segments) = {
            let obj = object::File::parse(&*data).ok()?;
            let section = |name: &str| {
                obj.section_by_name(name).and_then(|s| {
                    let (off, size) = s.file_range()?;
                    Some((s.address(), off as usize..(off + size) as usize))
                })
            };
            let segments = obj
                .segments()
                .map(|s| {
                    let (off, size) = s.file_range();
                    (off, size, s.address())
                })
                .collect();
            (
                section(".eh_frame")?,
                section(".eh_frame_hdr"),
                obj.section_by_name(".text").map_or(0, |s| s.address()),
                segments,
            )
        };
        let mut me = Self {
            data,
            eh_frame,
            eh_frame_hdr,
            text,
            segments,
            functions: Vec::new(),
        };
        me.functions = me.lock_functions(probes);
        Some(me)
    }

    /// The code of each lock function: its symbol's range (each version of
    /// it), and the code only it jumps to, found by [`Self::jumps_out`].
    /// Where two lock functions jump to the same code
    /// (`pthread_mutex_timedlock` and `pthread_mutex_clocklock`), the one
    /// listed first in the item's functions names it.
    fn lock_functions(&self, probes: &HashMap<String, u32>) -> Vec<(u64, u64, u32)> {
        let Ok(obj) = object::File::parse(&*self.data) else {
            return Vec::new();
        };
        let order = match TraceItem::Osrt.functions() {
            crate::apis::Functions::Named(names) => names,
            crate::apis::Functions::Prefixed(_) => &[],
        };
        let rank = |id: u32| {
            probes
                .iter()
                .find(|&(_, &i)| i == id)
                .and_then(|(name, _)| order.iter().position(|n| n == name))
                .unwrap_or(usize::MAX)
        };
        let exported: Vec<(u64, u64, Option<u32>)> = obj
            .dynamic_symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && !s.is_undefined() && s.size() > 0)
            .map(|s| {
                let id = s.name().ok().and_then(|n| probes.get(n)).copied();
                (s.address(), s.address() + s.size(), id)
            })
            .collect();
        let mut own: Vec<(u64, u64, u32)> = exported
            .iter()
            .filter_map(|&(s, e, id)| Some((s, e, id?)))
            .collect();
        own.sort_by_key(|&(start, _, id)| (rank(id), start));
        own.dedup();
        let mut functions = own.clone();
        let inside = |functions: &[(u64, u64, u32)], at: u64| {
            functions.iter().any(|&(s, e, _)| (s..e).contains(&at))
        };
        // Code another exported function's range holds is that function's
        // (a misread byte's target would be a wrong guess there).
        let exported_elsewhere = |at: u64| exported.iter().any(|&(s, e, _)| (s..e).contains(&at));
        // Two steps out: a function's tail call, and that code's own.
        let mut from = own;
        for _ in 0..2 {
            let mut next = Vec::new();
            for &(start, end, id) in &from {
                for target in self.jumps_out(start, end) {
                    if inside(&functions, target) || exported_elsewhere(target) {
                        continue;
                    }
                    if let Some((s, e)) = self.fde_range(target)
                        && !exported_elsewhere(s)
                        && !inside(&functions, s)
                    {
                        functions.push((s, e, id));
                        next.push((s, e, id));
                    }
                }
            }
            from = next;
        }
        functions.sort_by_key(|&(start, ..)| start);
        functions
    }

    /// The probe id of the lock function whose code holds `vaddr`.
    fn function_at(&self, vaddr: u64) -> Option<u32> {
        let i = self.functions.partition_point(|&(s, ..)| s <= vaddr);
        let &(s, e, id) = self.functions.get(i.checked_sub(1)?)?;
        (s..e).contains(&vaddr).then_some(id)
    }

    /// Where the code [start, end) jumps outside itself: the targets of its
    /// `jmp rel32` (e9) and `jcc rel32` (0f 80..8f), read as the bytes come
    /// (no decoder: a target must also be code with call frame
    /// information, which a misread byte almost never gives).
    fn jumps_out(&self, start: u64, end: u64) -> Vec<u64> {
        let Some(bytes) = self.bytes_at(start, end) else {
            return Vec::new();
        };
        let rel32 = |at: usize| -> Option<i64> {
            Some(i32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as i64)
        };
        let mut out = Vec::new();
        for i in 0..bytes.len() {
            let (len, rel) = match (bytes[i], bytes.get(i + 1)) {
                (0xe9, _) => (5, rel32(i + 1)),
                (0x0f, Some(0x80..=0x8f)) => (6, rel32(i + 2)),
                _ => continue,
            };
            let Some(rel) = rel else { continue };
            let target = (start + i as u64 + len).wrapping_add_signed(rel);
            if !(start..end).contains(&target) {
                out.push(target);
            }
        }
        out
    }

    /// The bytes of vaddrs [start, end), from the file.
    fn bytes_at(&self, start: u64, end: u64) -> Option<&[u8]> {
        let &(off, size, vaddr) = self
            .segments
            .iter()
            .find(|&&(_, size, vaddr)| start >= vaddr && end <= vaddr + size)?;
        let _ = size;
        let from = usize::try_from(off + (start - vaddr)).ok()?;
        let to = usize::try_from(off + (end - vaddr)).ok()?;
        self.data.get(from..to)
    }

    /// The vaddr of a file offset.
    fn vaddr(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(off, size, _)| file_offset >= off && file_offset < off + size)
            .map(|&(off, _, vaddr)| vaddr + (file_offset - off))
    }

    fn bases(&self) -> BaseAddresses {
        let mut bases = BaseAddresses::default()
            .set_eh_frame(self.eh_frame.0)
            .set_text(self.text);
        if let Some((hdr, _)) = &self.eh_frame_hdr {
            bases = bases.set_eh_frame_hdr(*hdr);
        }
        bases
    }

    fn hdr(&self, bases: &BaseAddresses) -> Option<ParsedEhFrameHdr<EhFrameReader<'_>>> {
        let (_, range) = self.eh_frame_hdr.clone()?;
        EhFrameHdr::new(&self.data[range], LittleEndian)
            .parse(bases, 8)
            .ok()
    }

    fn eh(&self) -> EhFrame<EhFrameReader<'_>> {
        EhFrame::new(&self.data[self.eh_frame.1.clone()], LittleEndian)
    }

    /// [start, end) of the function (its call frame information's) that
    /// holds `vaddr`.
    fn fde_range(&self, vaddr: u64) -> Option<(u64, u64)> {
        let bases = self.bases();
        let eh = self.eh();
        let fde = match self.hdr(&bases).as_ref().and_then(|h| h.table()) {
            Some(table) => table
                .fde_for_address(&eh, &bases, vaddr, EhFrame::cie_from_offset)
                .ok()?,
            None => eh
                .fde_for_address(&bases, vaddr, EhFrame::cie_from_offset)
                .ok()?,
        };
        let start = fde.initial_address();
        Some((start, start + fde.len()))
    }

    /// One frame out from code at `vaddr` (a call's return address less
    /// one) whose stack pointer is `sp`: its caller's stack pointer (the
    /// frame's CFA), return address and frame pointer.
    fn step(
        &self,
        vaddr: u64,
        sp: u64,
        bp: u64,
        read: impl Fn(u64) -> Option<u64>,
    ) -> Option<(u64, u64, u64)> {
        let bases = self.bases();
        let eh = self.eh();
        let mut ctx = UnwindContext::new();
        let row = match self.hdr(&bases).as_ref().and_then(|h| h.table()) {
            Some(table) => table
                .unwind_info_for_address(&eh, &bases, &mut ctx, vaddr, EhFrame::cie_from_offset)
                .ok()?,
            None => eh
                .unwind_info_for_address(&bases, &mut ctx, vaddr, EhFrame::cie_from_offset)
                .ok()?,
        };
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RSP => {
                sp.wrapping_add_signed(*offset)
            }
            CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RBP => {
                bp.wrapping_add_signed(*offset)
            }
            _ => return None,
        };
        let ra = match row.register(X86_64::RA) {
            Some(RegisterRule::Offset(o)) => read(cfa.wrapping_add_signed(o))?,
            _ => return None,
        };
        let bp = match row.register(X86_64::RBP) {
            Some(RegisterRule::Offset(o)) => read(cfa.wrapping_add_signed(o)).unwrap_or(bp),
            _ => bp,
        };
        Some((cfa, ra, bp))
    }
}

type EhFrameReader<'a> = addr2line::gimli::EndianSlice<'a, LittleEndian>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_copy_reads_only_what_it_holds() {
        let stack: Vec<u8> = (0u8..24).collect();
        assert_eq!(
            read_stack(&stack, 0x1000, 0x1008),
            Some(u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]))
        );
        assert_eq!(
            read_stack(&stack, 0x1000, 0x1010).map(|v| v as u8),
            Some(16)
        );
        assert_eq!(read_stack(&stack, 0x1000, 0x1011), None);
        assert_eq!(read_stack(&stack, 0x1000, 0xff8), None);
    }

    /// The C library this machine runs: each lock function's code, and the
    /// slow paths that `sem_wait` and `pthread_join` jump to (glibc 2.34+
    /// tail-calls them: no frame of the lock function is left on the stack).
    #[test]
    fn lock_code_covers_the_functions_and_the_code_they_jump_to() {
        // Read as asys reads a mapped file: no link on the way (/lib is one).
        let candidates = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6"];
        let path = candidates
            .into_iter()
            .find_map(|p| std::fs::canonicalize(p).ok())
            .unwrap_or_else(|| panic!("no C library at {candidates:?}: this test reads glibc's"));
        let path = path.as_path();
        let names = match TraceItem::Osrt.functions() {
            crate::apis::Functions::Named(n) => n,
            crate::apis::Functions::Prefixed(_) => unreachable!(),
        };
        let probes: HashMap<String, u32> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), i as u32))
            .collect();
        let code = LockCode::read(path, &probes).expect("libc reads");
        let obj = object::File::parse(&*code.data).unwrap();
        let address = |name: &str| {
            obj.dynamic_symbols()
                .find(|s| s.name() == Ok(name) && !s.is_undefined())
                .map(|s| s.address())
        };
        let mutex = address("pthread_mutex_lock").unwrap_or_else(|| {
            panic!(
                "{} defines no pthread_mutex_lock: glibc before 2.34 keeps the locks in \
                 libpthread, and this test reads glibc 2.34 or later",
                path.display()
            )
        });
        assert_eq!(code.function_at(mutex), Some(probes["pthread_mutex_lock"]));
        assert_eq!(
            code.function_at(mutex + 1),
            Some(probes["pthread_mutex_lock"])
        );
        // Not lock functions.
        assert_eq!(code.function_at(address("malloc").unwrap()), None);
        assert_eq!(code.function_at(address("pthread_create").unwrap()), None);
        // An unlock never waits; its code is no lock function's (however a
        // misread byte of a lock function might point into it).
        assert_eq!(
            code.function_at(address("pthread_rwlock_unlock").unwrap()),
            None
        );
        // Where sem_wait's code jumps (if it tail-calls its slow path), it
        // is still sem_wait's.
        let sem_wait = address("sem_wait").unwrap();
        let size = obj
            .dynamic_symbols()
            .find(|s| s.name() == Ok("sem_wait"))
            .unwrap()
            .size();
        for target in code.jumps_out(sem_wait, sem_wait + size) {
            if code.fde_range(target).is_some() {
                assert_eq!(code.function_at(target), Some(probes["sem_wait"]));
            }
        }
    }
}
