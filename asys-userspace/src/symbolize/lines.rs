//! Source lines and inlined frames of one binary's addresses, from DWARF
//! (the binary's own, or a separate debug file's: `debug_info.rs`). Each
//! binary's DWARF is loaded once; addr2line then parses a compilation unit's
//! line program and inlining tree only when an address in it is first asked
//! for, so a binary touched by a few samples costs little however large it is.
use std::sync::Arc;

use addr2line::gimli::{self, EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection, SectionKind};

use crate::elf::mapped::FileBytes;

/// Sections are read in place from the mapped file (or from their
/// decompressed copies), which `SourceLines` owns: see `load`.
type Reader = EndianSlice<'static, RunTimeEndian>;

#[derive(Debug, thiserror::Error)]
pub enum LinesError {
    #[error("not an ELF file we can read: {0}")]
    Parse(#[from] object::Error),
    #[error("bad DWARF: {0}")]
    Dwarf(#[from] gimli::Error),
}

/// One source frame at an address: a function, and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    /// Demangled; None where the DWARF names no function.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// The DWARF of one file, ready for address lookups.
pub struct SourceLines {
    // Declared first so that it is dropped first: it borrows the bytes below.
    ctx: addr2line::Context<Reader>,
    /// Compilation units left unparsed by the cap.
    #[cfg_attr(not(test), allow(dead_code))]
    units_left: u64,
    /// Decompressed bytes of the sections left out by the cap.
    #[cfg_attr(not(test), allow(dead_code))]
    bytes_left: u64,
    /// Sections that were compressed, decompressed.
    _decompressed: Vec<Box<[u8]>>,
    _file: Arc<FileBytes>,
}

/// Whether the ELF file in `data` carries DWARF line information (a stripped
/// binary's `.debug_*` sections are gone; a debug file's code sections are
/// NOBITS but its `.debug_*` are real).
pub fn has_dwarf(obj: &object::File<'_>) -> bool {
    [".debug_info", ".zdebug_info"].iter().any(|name| {
        obj.section_by_name(name)
            .is_some_and(|s| s.kind() != SectionKind::UninitializedData && s.size() > 0)
    })
}

impl SourceLines {
    /// Loads the DWARF sections of the ELF file `file` (read from `name`,
    /// which warnings give): in place, or decompressed where compressed
    /// (not copied: a large binary's DWARF is hundreds of MB); at most
    /// [`crate::elf::caps::MAX_DWARF_UNITS`] compilation units and
    /// [`crate::elf::caps::MAX_DWARF_DECOMPRESSED_BYTES`] decompressed.
    pub fn load(file: Arc<FileBytes>, name: &str) -> Result<Self, LinesError> {
        Self::load_within(file, name, &crate::elf::caps::Caps::DEFAULT)
    }

    /// [`Self::load`] under other caps (tests).
    pub fn load_within(
        file: Arc<FileBytes>,
        name: &str,
        caps: &crate::elf::caps::Caps,
    ) -> Result<Self, LinesError> {
        // SAFETY: the bytes of `file` (a mapping or a heap buffer) do not
        // move while `file` lives, and the Arc kept in `Self::_file` keeps
        // them alive as long as `ctx`, which is dropped before it (field
        // order); the decompressed sections are boxed (they do not move
        // either when the Vec holding the boxes grows) and kept alike.
        // `ctx` never hands out a reference that outlives `&self`
        // (`frames` copies what it returns).
        let data: &'static [u8] = unsafe { std::mem::transmute::<&[u8], &'static [u8]>(&file) };
        let obj = object::File::parse(data)?;
        let endian = if obj.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let mut decompressed: Vec<Box<[u8]>> = Vec::new();
        // Compressed sections are the one place the file chooses how much
        // asys allocates (a zlib stream inflates a thousandfold): past the
        // cap on decompressed bytes a section is left out, as if absent.
        let (mut inflated, mut bytes_left) = (0u64, 0u64);
        let mut load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
            let section = obj
                .section_by_name(id.name())
                .filter(|s| s.kind() != SectionKind::UninitializedData)
                .filter(|s| match s.compressed_data() {
                    Ok(c) if c.format != object::CompressionFormat::None => {
                        let fits = inflated.saturating_add(c.uncompressed_size)
                            <= caps.dwarf_decompressed_bytes;
                        match fits {
                            true => inflated += c.uncompressed_size,
                            false => bytes_left = bytes_left.saturating_add(c.uncompressed_size),
                        }
                        fits
                    }
                    _ => true,
                });
            let bytes: &'static [u8] = match section.and_then(|s| s.uncompressed_data().ok()) {
                None => &[],
                Some(std::borrow::Cow::Borrowed(b)) => b,
                Some(std::borrow::Cow::Owned(v)) => {
                    let boxed = v.into_boxed_slice();
                    // SAFETY: as above: the box is kept in `_decompressed`
                    // for as long as `ctx`, and its heap bytes do not move.
                    let b = unsafe { std::mem::transmute::<&[u8], &'static [u8]>(&boxed) };
                    decompressed.push(boxed);
                    b
                }
            };
            Ok(EndianSlice::new(bytes, endian))
        };
        let mut dwarf = gimli::Dwarf::load(&mut load)?;
        if bytes_left > 0 {
            crate::elf::caps::note(name, crate::elf::caps::Over::DwarfBytes, bytes_left);
        }
        let units_left = cap_units(&mut dwarf, name, caps.dwarf_units);
        Ok(Self {
            units_left,
            bytes_left,
            ctx: addr2line::Context::from_dwarf(dwarf)?,
            _decompressed: decompressed,
            _file: file,
        })
    }

    /// The frames at file address `vaddr`, the innermost inlined function
    /// first and the function the code was inlined into last (addr2line -i's
    /// order); empty where the DWARF does not cover `vaddr`.
    pub fn frames(&self, vaddr: u64) -> Vec<SourceFrame> {
        let mut out = Vec::new();
        let Ok(mut frames) = self.ctx.find_frames(vaddr).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = frames.next() {
            let function = f.function.as_ref().and_then(|n| {
                n.raw_name()
                    .ok()
                    .map(|s| crate::elf::demangle::demangle(&s).into_owned())
            });
            let (file, line) = match &f.location {
                Some(l) => (l.file.map(str::to_string), l.line),
                None => (None, None),
            };
            out.push(SourceFrame {
                function,
                file,
                line,
            });
        }
        out
    }
}

/// Keeps the first `cap` compilation units of `dwarf`'s `.debug_info`:
/// addr2line parses every unit's header, line program header and root
/// entry as it loads, and the file is its owner's to write (a million
/// one-byte units). The units past the cap are counted (their headers only
/// are read, each a skip by its length) and noted against `name`; returns
/// how many.
pub fn cap_units(dwarf: &mut gimli::Dwarf<Reader>, name: &str, cap: usize) -> u64 {
    use gimli::{Reader as _, Section};
    // `.debug_aranges` is addr2line's index of the units, one header per
    // unit: with more headers than the cap it is dropped (addr2line then
    // reads each kept unit's own ranges, as for a file without one), and
    // with the units cut it would name units that are not read.
    let mut aranges = dwarf.debug_aranges.headers();
    let mut headers = 0usize;
    while let Ok(Some(_)) = aranges.next() {
        headers += 1;
        if headers > cap {
            break;
        }
    }
    let mut units = dwarf.units();
    let mut kept = 0usize;
    let end = loop {
        match units.next() {
            Ok(Some(u)) if kept == cap => break u.offset().0,
            Ok(Some(_)) => kept += 1,
            // The end, or a header that does not parse (where addr2line
            // stops too).
            _ => {
                if headers > cap {
                    dwarf.debug_aranges = gimli::DebugAranges::from(EndianSlice::new(
                        &[],
                        dwarf.debug_aranges.reader().endian(),
                    ));
                }
                return 0;
            }
        }
    };
    let mut left = 1u64;
    while let Ok(Some(_)) = units.next() {
        left += 1;
    }
    let info = *dwarf.debug_info.reader();
    dwarf.debug_info = gimli::DebugInfo::from(info.range_to(..end));
    dwarf.debug_aranges = gimli::DebugAranges::from(EndianSlice::new(&[], info.endian()));
    crate::elf::caps::note(name, crate::elf::caps::Over::DwarfUnits, left);
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compilation_units_past_the_cap_are_left_and_counted() {
        // This test binary: one unit per crate and codegen unit, hundreds.
        let exe = std::env::current_exe().unwrap();
        let policy = asys_report::untrusted::open::Policy::NAMED;
        let data = Arc::new(FileBytes::map(&exe, &policy).unwrap());
        let name = exe.to_string_lossy();
        let caps = |units| crate::elf::caps::Caps {
            dwarf_units: units,
            ..crate::elf::caps::Caps::DEFAULT
        };
        let whole = SourceLines::load_within(data.clone(), &name, &caps(usize::MAX)).unwrap();
        assert_eq!(whole.units_left, 0);
        let two = SourceLines::load_within(data.clone(), &name, &caps(2)).unwrap();
        assert!(two.units_left > 10, "{} units left", two.units_left);
        let one = SourceLines::load_within(data, &name, &caps(1)).unwrap();
        assert_eq!(one.units_left, two.units_left + 1);
    }

    /// An ELF file whose one section, `.debug_info`, is compressed
    /// (`SHF_COMPRESSED`, zlib) and says it inflates to `size` bytes.
    fn elf_with_compressed_debug_info(size: u64) -> Vec<u8> {
        let mut f = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
        let names = b"\0.debug_info\0.shstrtab\0";
        let (data_at, names_at, sh_at) = (64u64, 96u64, 120u64);
        // ET_REL, EM_X86_64, version, entry, phoff, shoff, flags, ehsize,
        // phentsize, phnum, shentsize, shnum, shstrndx.
        f.extend([1u16, 62].iter().flat_map(|v| v.to_le_bytes()));
        f.extend(1u32.to_le_bytes());
        f.extend([0u64, 0, sh_at].iter().flat_map(|v| v.to_le_bytes()));
        f.extend(0u32.to_le_bytes());
        f.extend(
            [64u16, 56, 0, 64, 3, 2]
                .iter()
                .flat_map(|v| v.to_le_bytes()),
        );
        // Elf64_Chdr: ELFCOMPRESS_ZLIB, reserved, size, alignment; then
        // what is not zlib (never inflated here).
        f.extend([1u32, 0].iter().flat_map(|v| v.to_le_bytes()));
        f.extend([size, 1].iter().flat_map(|v| v.to_le_bytes()));
        f.extend([0x78, 0x9c, 0, 0, 0, 0, 0, 0]);
        f.extend(names);
        f.resize(sh_at as usize, 0);
        f.extend([0u8; 64]);
        // name, type, flags, addr, offset, size, link, info, align, entsize.
        let section = |f: &mut Vec<u8>, name: u32, kind: u32, flags: u64, at: u64, len: u64| {
            f.extend([name, kind].iter().flat_map(|v| v.to_le_bytes()));
            f.extend([flags, 0, at, len].iter().flat_map(|v| v.to_le_bytes()));
            f.extend([0u32, 0].iter().flat_map(|v| v.to_le_bytes()));
            f.extend([1u64, 0].iter().flat_map(|v| v.to_le_bytes()));
        };
        section(&mut f, 1, 1, 0x800, data_at, 32);
        section(&mut f, 13, 3, 0, names_at, names.len() as u64);
        f
    }

    #[test]
    fn a_compressed_section_past_the_bytes_cap_is_left_out_uninflated() {
        let caps = crate::elf::caps::Caps {
            dwarf_decompressed_bytes: 1 << 20,
            ..crate::elf::caps::Caps::DEFAULT
        };
        let load = |size| {
            let data = Arc::new(FileBytes::Owned(elf_with_compressed_debug_info(size)));
            SourceLines::load_within(data, "bomb.debug", &caps).unwrap()
        };
        // 64 GiB said: left out, never allocated.
        assert_eq!(load(64 << 30).bytes_left, 64 << 30);
        // Under the cap: inflated (here, failing: not zlib), not counted.
        assert_eq!(load(4096).bytes_left, 0);
    }
}
