//! Unwinding user stacks copied by the kernel, with the binaries' DWARF call
//! frame information (.eh_frame), so that code built without frame pointers
//! unwinds too. Frames are named afterwards, binary by binary (`naming.rs`).
use std::{collections::HashMap, path::Path};

use addr2line::gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, RegisterRule, UnwindContext,
    UnwindSection, X86_64,
};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

/// A file mapping of the process, as recorded in the modules table.
#[derive(Debug, Clone)]
pub struct ModuleMapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    /// As recorded: the module's name in frames.
    pub path: String,
    /// Where its bytes are read: `path`, or for a file of another mount
    /// namespace the descriptor asys kept for it (`mapped_file`).
    pub file: String,
    /// The build id recorded for the mapping (hex), if the file had one.
    pub build_id: Option<String>,
}

/// Where a stack starts: instruction, stack and frame pointers.
#[derive(Debug, Clone, Copy)]
pub struct Registers {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// One named frame.
#[derive(Debug, Clone)]
pub struct Frame {
    // Shared: a binary's frames repeat the same names, files and module
    // (hundreds of thousands of frames when every address is named).
    pub function: std::sync::Arc<str>,
    pub file: Option<std::sync::Arc<str>>,
    pub line: Option<u32>,
    pub module: std::sync::Arc<str>,
    /// Inlined into the next frame of the same pc.
    pub inlined: bool,
}

/// What unwinding needs from one ELF file, loaded once.
pub struct Binary {
    pub data: std::sync::Arc<crate::elf::mapped::FileBytes>,
    /// Its GNU build id (hex), compared with the one recorded.
    pub build_id: Option<String>,
    eh_frame: Option<(u64, std::ops::Range<usize>)>,
    /// The binary-search table over `.eh_frame` (a linear scan of a large
    /// binary's `.eh_frame` per frame is far too slow for samples).
    eh_frame_hdr: Option<(u64, std::ops::Range<usize>)>,
    text: u64,
    /// (file offset, size, vaddr) of the loadable segments.
    segments: Vec<(u64, u64, u64)>,
    /// Function symbols (.symtab, and .dynsym) by address: (address, size,
    /// where the name lies in `data`). Names stay in the file until a frame
    /// asks for one: a large binary has hundreds of thousands of symbols, and
    /// copying each name out took most of the symbolize stage.
    functions: Vec<(u64, u64, std::ops::Range<usize>, u64)>,
}

impl Binary {
    fn load(path: &str) -> Option<Self> {
        let data = if path == crate::process::procfs::VDSO {
            crate::elf::mapped::FileBytes::Owned(own_vdso()?)
        } else {
            crate::elf::mapped::FileBytes::map(
                Path::new(path),
                &asys_report::untrusted::open::Policy::MAPPED,
            )
            .ok()?
        };
        Self::from_bytes(std::sync::Arc::new(data), path)
    }

    /// The binary (or debug file: its symbol table names what a stripped
    /// binary's cannot) whose bytes are `data`, read from `file` (named in
    /// warnings), its symbols within [`crate::elf::caps::Caps::DEFAULT`].
    pub fn from_bytes(
        data: std::sync::Arc<crate::elf::mapped::FileBytes>,
        file: &str,
    ) -> Option<Self> {
        Self::from_bytes_within(data, file, &crate::elf::caps::Caps::DEFAULT)
    }

    /// [`Self::from_bytes`] under other caps (tests).
    pub fn from_bytes_within(
        data: std::sync::Arc<crate::elf::mapped::FileBytes>,
        file: &str,
        caps: &crate::elf::caps::Caps,
    ) -> Option<Self> {
        let obj = object::File::parse(&**data).ok()?;
        let section = |name: &str| {
            obj.section_by_name(name).and_then(|s| {
                let (off, size) = s.file_range()?;
                Some((s.address(), off as usize..(off + size) as usize))
            })
        };
        let eh_frame = section(".eh_frame");
        let eh_frame_hdr = section(".eh_frame_hdr");
        let text = obj
            .section_by_name(".text")
            .map(|s| s.address())
            .unwrap_or(0);
        let segments = obj
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let base = data.as_ptr() as usize;
        // Where each section ends: a function symbol names the code up to
        // the next one in its section, past its size too (as binutils'
        // addr2line and perf name it): sizeless symbols of hand-written
        // code (crt's `_init`, `deregister_tm_clones`) and the padding
        // between functions would otherwise go unnamed.
        let section_end = |s: &object::Symbol<'_, '_>| {
            s.section_index()
                .and_then(|i| obj.section_by_index(i).ok())
                .map(|sec| sec.address() + sec.size())
                .unwrap_or(s.address() + s.size().max(1))
        };
        // The file is its owner's to write: a cap on the symbols and name
        // bytes read (what is left is counted and warned about).
        let mut functions: Vec<(u64, u64, std::ops::Range<usize>, u64)> = Vec::new();
        crate::elf::caps::for_each_symbol(
            &obj,
            file,
            caps,
            |s| s.kind() == object::SymbolKind::Text && s.address() != 0,
            |s, name| {
                // The name is a slice of the file's string table.
                if let Some(at) = (name.as_ptr() as usize).checked_sub(base) {
                    functions.push((s.address(), s.size(), at..at + name.len(), section_end(&s)));
                }
                true
            },
        );
        // By address, then size and name: the same pick among aliases as
        // when names were copied out.
        functions.sort_unstable_by(|a, b| {
            (a.0, a.1)
                .cmp(&(b.0, b.1))
                .then_with(|| data.get(a.2.clone()).cmp(&data.get(b.2.clone())))
        });
        functions.dedup_by_key(|f| f.0);
        let build_id = obj.build_id().ok().flatten().map(super::debug_info::hex);
        Some(Self {
            build_id,
            data: data.clone(),
            eh_frame,
            eh_frame_hdr,
            text,
            segments,
            functions,
        })
    }

    /// The function symbol holding `vaddr`, demangled.
    pub fn function_at(&self, vaddr: u64) -> Option<String> {
        let i = self
            .functions
            .partition_point(|f| f.0 <= vaddr)
            .checked_sub(1)?;
        let (_, _, name, end) = &self.functions[i];
        let name = String::from_utf8_lossy(self.data.get(name.clone())?);
        (vaddr < *end).then(|| crate::elf::demangle::demangle(&name).into_owned())
    }

    pub fn vaddr(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, size, _)| file_offset >= *off && file_offset < off + size)
            .map(|(off, _, vaddr)| file_offset - off + vaddr)
    }
}

/// A copy of asys's own vDSO image: every process on this kernel maps the same
/// one (for its architecture), at its own address.
fn own_vdso() -> Option<Vec<u8>> {
    let (start, end) = crate::process::procfs::vdso(std::process::id())?;
    // SAFETY: the kernel maps asys's own vDSO readable at [start, end) for as
    // long as asys runs, and never writes it.
    let image = unsafe { std::slice::from_raw_parts(start as *const u8, (end - start) as usize) };
    Some(image.to_vec())
}

/// The word at `addr` of a stack copied from `sp` upwards, if copied.
fn read_stack(stack: &[u8], sp: u64, addr: u64) -> Option<u64> {
    let at = addr.checked_sub(sp)? as usize;
    let bytes = stack.get(at..at + 8)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// How a frame in JIT-compiled code (no call frame information) is
/// stepped through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitCode {
    /// By its frame pointer, which JITs keep (V8).
    FramePointer,
    /// A CPython 3.12+ `-X perf` trampoline, a copy of
    /// `_Py_trampoline_func_start` (`Python/asm_trampoline.S`, x86-64:
    /// `sub $8,%rsp; call *%rcx; add $8,%rsp; ret`, no frame pointer kept,
    /// no call frame information): at its only return address its frame is
    /// 16 bytes, the return address on top. An interpreter built without
    /// frame pointers (Debian's) would otherwise lose every caller.
    CpythonTrampoline,
}

/// Caches binaries across the stacks of one report.
#[derive(Default)]
pub struct Unwinder {
    binaries: HashMap<String, Option<Binary>>,
}

impl Unwinder {
    /// The binary read at `path`, loaded once.
    pub fn binary(&mut self, path: &str) -> Option<&Binary> {
        self.binaries
            .entry(path.to_string())
            .or_insert_with(|| Binary::load(path))
            .as_ref()
    }

    /// The binary already loaded at `path` (for the naming threads, which
    /// share the loaded binaries).
    pub fn loaded(&self, path: &str) -> Option<&Binary> {
        self.binaries.get(path)?.as_ref()
    }

    /// The binary of mapping `m`, unless it is not the file recorded (its
    /// build id differs: rebuilt since): its call frame information would
    /// be another build's, so unwinding stops there.
    fn binary_as_recorded(&mut self, m: &ModuleMapping) -> Option<&Binary> {
        let bin = self.binary(&m.file)?;
        match (&m.build_id, &bin.build_id) {
            (Some(recorded), now) if now.as_ref() != Some(recorded) => None,
            _ => Some(bin),
        }
    }

    /// The program counters of the stack: `ip` first (a return address),
    /// then each caller's, at most `depth`. `jit`: whether an address outside
    /// every file mapping is JIT-compiled code (named in a perf map), and
    /// how such code, which has no call frame information, is stepped
    /// through.
    pub fn unwind(
        &mut self,
        maps: &[ModuleMapping],
        Registers { ip, sp, bp }: Registers,
        stack: &[u8],
        depth: usize,
        exact_first: bool,
        jit: &dyn Fn(u64) -> Option<JitCode>,
    ) -> Vec<u64> {
        let read = |addr: u64| read_stack(stack, sp, addr);
        let (mut pc, mut rsp, mut rbp) = (ip, sp, bp);
        let mut pcs = Vec::new();
        let mut ctx = UnwindContext::new();
        // One frame-pointer step: the caller's frame pointer and return
        // address saved at rbp; None when rbp does not point into the stack
        // above rsp (then it is not a frame pointer).
        let fp_step = |rsp: u64, rbp: u64| -> Option<(u64, u64, u64)> {
            if rbp < rsp {
                return None;
            }
            let (next, ra) = (read(rbp)?, read(rbp.wrapping_add(8))?);
            Some((ra, rbp.wrapping_add(16), next))
        };
        while pcs.len() < depth && pc != 0 {
            pcs.push(pc);
            let Some(m) = maps.iter().find(|m| pc >= m.start && pc < m.end) else {
                let code = jit(pc);
                // A sampled instruction pointer may be anywhere in the
                // trampoline, not at its return address.
                let returned = pcs.len() > 1 || !exact_first;
                if code == Some(JitCode::CpythonTrampoline)
                    && returned
                    && let Some(ra) = read(rsp.wrapping_add(8))
                {
                    (pc, rsp) = (ra, rsp.wrapping_add(16));
                    continue;
                }
                match fp_step(rsp, rbp) {
                    Some((ra, cfa, next)) if code.is_some() && cfa > rsp => {
                        (pc, rsp, rbp) = (ra, cfa, next);
                        continue;
                    }
                    _ => break,
                }
            };
            let Some(bin) = self.binary_as_recorded(m) else {
                break;
            };
            // A return address: look up the call instruction before it; a
            // sampled instruction pointer is looked up as it is.
            let back = if pcs.len() == 1 && exact_first { 0 } else { 1 };
            let Some(vaddr) = bin.vaddr(pc - back - m.start + m.offset) else {
                break;
            };
            let Some((eh_addr, range)) = bin.eh_frame.clone() else {
                break;
            };
            let eh = EhFrame::new(&bin.data[range], LittleEndian);
            let mut bases = BaseAddresses::default()
                .set_eh_frame(eh_addr)
                .set_text(bin.text);
            if let Some((hdr_addr, _)) = &bin.eh_frame_hdr {
                bases = bases.set_eh_frame_hdr(*hdr_addr);
            }
            let table = bin.eh_frame_hdr.clone().and_then(|(_, hdr)| {
                EhFrameHdr::new(&bin.data[hdr], LittleEndian)
                    .parse(&bases, 8)
                    .ok()
            });
            let row = match table.as_ref().and_then(|t| t.table()) {
                Some(table) => table.unwind_info_for_address(
                    &eh,
                    &bases,
                    &mut ctx,
                    vaddr,
                    EhFrame::cie_from_offset,
                ),
                None => {
                    eh.unwind_info_for_address(&bases, &mut ctx, vaddr, EhFrame::cie_from_offset)
                }
            };
            let Ok(row) = row else {
                break;
            };
            let cfa = match row.cfa() {
                CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RSP => {
                    rsp.wrapping_add_signed(*offset)
                }
                CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RBP => {
                    rbp.wrapping_add_signed(*offset)
                }
                _ => break,
            };
            let ra = match row.register(X86_64::RA) {
                Some(RegisterRule::Offset(o)) => read(cfa.wrapping_add_signed(o)),
                _ => None,
            };
            if let Some(RegisterRule::Offset(o)) = row.register(X86_64::RBP) {
                rbp = read(cfa.wrapping_add_signed(o)).unwrap_or(rbp);
            }
            let Some(ra) = ra else { break };
            // The stack grows down: a caller's frame is above its callee's.
            if cfa <= rsp {
                break;
            }
            rsp = cfa;
            pc = ra;
        }
        pcs
    }

    /// Walks the frame-pointer chain (`-b fp`): no call frame information
    /// needed, but code built without frame pointers loses its callers.
    pub fn unwind_fp(Registers { ip, sp, bp }: Registers, stack: &[u8], depth: usize) -> Vec<u64> {
        let read = |addr: u64| read_stack(stack, sp, addr);
        let mut pcs = vec![ip];
        let mut frame = bp;
        while pcs.len() < depth {
            let (Some(next), Some(ra)) = (read(frame), read(frame.wrapping_add(8))) else {
                break;
            };
            if ra == 0 {
                break;
            }
            pcs.push(ra);
            // The stack grows down: a caller's frame is above its callee's.
            if next <= frame {
                break;
            }
            frame = next;
        }
        pcs
    }
}

#[cfg(test)]
mod tests {
    use super::Binary;

    #[test]
    fn a_binary_past_the_cap_names_from_the_symbols_it_kept() {
        use crate::elf::caps::{
            Caps,
            tests::{caps, elf_with_symbols},
        };
        let data = elf_with_symbols(5000, |i| format!("f{i}").into_bytes());
        let data = std::sync::Arc::new(crate::elf::mapped::FileBytes::Owned(data));
        let bin =
            Binary::from_bytes_within(data.clone(), "capped.so", &caps(1000, u64::MAX)).unwrap();
        // f0..f999 kept, at 0x1000..0x13e7; f1000 on (0x13e8 on) not: the
        // last kept names the rest of its section.
        assert_eq!(bin.function_at(0x1000).as_deref(), Some("f0"));
        assert_eq!(bin.function_at(0x13e7).as_deref(), Some("f999"));
        assert_eq!(bin.function_at(0x13e8).as_deref(), Some("f999"));
        let whole = Binary::from_bytes_within(data, "whole.so", &Caps::DEFAULT).unwrap();
        assert_eq!(whole.function_at(0x13e8).as_deref(), Some("f1000"));
    }
}
