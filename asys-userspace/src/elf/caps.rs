//! How much of one ELF file's symbol tables and DWARF asys reads. Run as
//! root, asys symbolizes the files other users' processes map, and such a
//! file is its owner's to write: a `.symtab` of a hundred million entries,
//! names that overlap so that each one read scans the same unterminated
//! megabytes again, a million one-byte compilation units. Each reader of a
//! mapped file's symbols or DWARF therefore stops at a cap, keeps what it
//! read, counts what it left (the report's `drops`: `elf_symbols_over_cap`,
//! `dwarf_units_over_cap`) and warns once per file, naming it escaped.
//!
//! The counts are process-wide: the symbolize stage reads a file from
//! several places (launch names, API stacks, sampled stacks, each with its
//! own cache), and the file is counted and warned about once however many
//! read it; [`take_counts`] hands them to the report being written and
//! starts the next report's afresh.
use std::{
    collections::BTreeSet,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use asys_report::report::metadata;
use object::{Object, ObjectSymbol};

/// Symbols read from one file (its `.symtab` and `.dynsym` together). A
/// symbol costs the symbolize stage 40 bytes kept and a sort, so this bounds
/// one file at about 160 MB and seconds of work; the largest real binaries
/// (browsers and ML libraries built with their symbols) have a few million
/// at most, so real files are read whole.
pub const MAX_SYMBOLS: usize = 4_000_000;

/// Bytes of symbol names read from one file. Names are not copied, but
/// each is found by scanning its string table for the NUL that ends it, so
/// names that share one long unterminated tail would cost the table's size
/// per symbol; this bounds the scanning. Real files' names reach a hundred
/// MB: PyPI's libtorch_cpu.so (torch 2.15) has 78 MB of `.strtab` and 5 MB
/// of `.dynstr` (a 64 MiB cap left 4,812 of its symbols unnamed).
pub const MAX_SYMBOL_NAME_BYTES: u64 = 256 << 20;

/// DWARF compilation units parsed from one file for source lines.
/// addr2line reads every unit's header, line program header and root
/// entry when the file is loaded (a few hundred bytes kept each, more for a
/// unit with many files), before any address is looked up; a build has one
/// unit per source file, tens of thousands for the largest.
pub const MAX_DWARF_UNITS: usize = 100_000;

/// Bytes of compressed DWARF sections (`SHF_COMPRESSED`, `.zdebug_*`)
/// decompressed for one file, the sizes their headers declare. The one
/// allocation a file sizes itself: a zlib stream inflates a thousandfold,
/// so without it a 4 MB section could cost 4 GB. Real compressed debug
/// information inflates three- to tenfold: a large library's is a few
/// hundred MB decompressed.
pub const MAX_DWARF_DECOMPRESSED_BYTES: u64 = 1 << 30;

/// The caps one read runs under: the constants above, lowered by tests.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub symbols: usize,
    pub name_bytes: u64,
    pub dwarf_units: usize,
    pub dwarf_decompressed_bytes: u64,
}

impl Caps {
    pub const DEFAULT: Caps = Caps {
        symbols: MAX_SYMBOLS,
        name_bytes: MAX_SYMBOL_NAME_BYTES,
        dwarf_units: MAX_DWARF_UNITS,
        dwarf_decompressed_bytes: MAX_DWARF_DECOMPRESSED_BYTES,
    };
}

/// What a cap left out of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Over {
    /// Symbols not read (past [`MAX_SYMBOLS`] or [`MAX_SYMBOL_NAME_BYTES`]).
    Symbols,
    /// Compilation units not parsed (past [`MAX_DWARF_UNITS`]).
    DwarfUnits,
    /// Decompressed bytes of the DWARF sections left out (past
    /// [`MAX_DWARF_DECOMPRESSED_BYTES`]).
    DwarfBytes,
}

impl Over {
    /// Its `drops` source in the report.
    pub const fn drops_source(self) -> &'static str {
        match self {
            Over::Symbols => metadata::ELF_SYMBOLS_OVER_CAP,
            Over::DwarfUnits => metadata::DWARF_UNITS_OVER_CAP,
            Over::DwarfBytes => metadata::DWARF_BYTES_OVER_CAP,
        }
    }
}

static SYMBOLS_LEFT: AtomicU64 = AtomicU64::new(0);
static DWARF_UNITS_LEFT: AtomicU64 = AtomicU64::new(0);
static DWARF_BYTES_LEFT: AtomicU64 = AtomicU64::new(0);
/// The files counted and warned about since the last [`take_counts`].
static NOTED: Mutex<BTreeSet<(Over, String)>> = Mutex::new(BTreeSet::new());

/// `left` items of `file` were left out by a cap: counted and warned about
/// the first time this file is (a file read again, by another stage, left
/// out the same).
pub fn note(file: &str, over: Over, left: u64) {
    let first = NOTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((over, file.to_string()));
    if !first {
        return;
    }
    let (counter, what) = match over {
        Over::Symbols => (
            &SYMBOLS_LEFT,
            format!(
                "past asys's cap on the symbols read from one file ({MAX_SYMBOLS} symbols or {} MiB of names); {left} symbols left unread",
                MAX_SYMBOL_NAME_BYTES >> 20
            ),
        ),
        Over::DwarfUnits => (
            &DWARF_UNITS_LEFT,
            format!(
                "past asys's cap on the DWARF compilation units read from one file ({MAX_DWARF_UNITS}); {left} units left unread"
            ),
        ),
        Over::DwarfBytes => (
            &DWARF_BYTES_LEFT,
            format!(
                "past asys's cap on the compressed DWARF decompressed from one file ({} MiB); sections of {left} bytes left unread",
                MAX_DWARF_DECOMPRESSED_BYTES >> 20
            ),
        ),
    };
    counter.fetch_add(left, Ordering::Relaxed);
    eprintln!(
        "asys: warning: {}: {what} (counted in drops as {})",
        asys_report::text_safety::escaped_name(file),
        over.drops_source()
    );
}

/// What the caps left out since the last call, by `drops` source (zero
/// where nothing was), and a fresh start for the next report.
pub fn take_counts() -> [(&'static str, u64); 3] {
    NOTED.lock().unwrap_or_else(|e| e.into_inner()).clear();
    [
        (
            Over::Symbols.drops_source(),
            SYMBOLS_LEFT.swap(0, Ordering::Relaxed),
        ),
        (
            Over::DwarfUnits.drops_source(),
            DWARF_UNITS_LEFT.swap(0, Ordering::Relaxed),
        ),
        (
            Over::DwarfBytes.drops_source(),
            DWARF_BYTES_LEFT.swap(0, Ordering::Relaxed),
        ),
    ]
}

/// Calls `f` with each symbol of `obj` that `want` takes (its full table,
/// then its dynamic one) and the symbol's name, until `f` returns false or
/// `caps` say stop: see [`for_each_in`].
pub fn for_each_symbol<'d, 'f>(
    obj: &'f object::File<'d>,
    file: &str,
    caps: &Caps,
    want: impl Fn(&object::Symbol<'d, 'f>) -> bool,
    f: impl FnMut(object::Symbol<'d, 'f>, &'d [u8]) -> bool,
) -> u64 {
    for_each_in(
        obj.symbols().chain(obj.dynamic_symbols()),
        file,
        caps,
        want,
        f,
    )
}

/// Calls `f` with each symbol of `all` (symbols of one file) that `want`
/// takes and the symbol's name, until `f` returns false or `caps` say stop:
/// [`Caps::symbols`] symbols looked at, or [`Caps::name_bytes`] of names
/// read. `want` sees the symbol before its name is read (a name costs a
/// scan of the string table; a symbol skipped costs nothing). What a cap
/// left is noted against `file`; returns how many symbols that was.
pub fn for_each_in<'d, 'f>(
    mut all: impl Iterator<Item = object::Symbol<'d, 'f>>,
    file: &str,
    caps: &Caps,
    want: impl Fn(&object::Symbol<'d, 'f>) -> bool,
    mut f: impl FnMut(object::Symbol<'d, 'f>, &'d [u8]) -> bool,
) -> u64
where
    'd: 'f,
{
    let mut name_bytes = 0u64;
    for _ in 0..caps.symbols {
        let Some(sym) = all.next() else {
            return 0;
        };
        if !want(&sym) {
            continue;
        }
        let Ok(name) = sym.name_bytes() else {
            continue;
        };
        name_bytes = name_bytes.saturating_add(name.len() as u64);
        if name_bytes > caps.name_bytes {
            // This one too: its name is past the cap.
            let left = 1 + all.count() as u64;
            note(file, Over::Symbols, left);
            return left;
        }
        if !f(sym, name) {
            return 0;
        }
    }
    // Counted, not read: a symbol's entry is looked at, its name is not.
    let left = all.count() as u64;
    if left > 0 {
        note(file, Over::Symbols, left);
    }
    left
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{Caps, for_each_symbol};

    /// An x86-64 ELF shared object whose one loadable segment (file offset
    /// 0, address 0, 0x2000 bytes) holds `.text` at 0x1000, and whose
    /// `.symtab` has `n` functions in it, named `name(i)` (the tests'
    /// hostile file; tests/tests/hostile_neighbours.rs writes the same).
    pub(crate) fn elf_with_symbols(n: usize, name: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
        const TEXT: usize = 0x1000;
        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; 24];
        for i in 0..n {
            let at = strtab.len() as u32;
            strtab.extend(name(i));
            strtab.push(0);
            symtab.extend(at.to_le_bytes());
            // STB_GLOBAL, STT_FUNC; st_other; st_shndx: .text.
            symtab.extend([0x12, 0, 1, 0]);
            symtab.extend(((TEXT + i % TEXT) as u64).to_le_bytes());
            symtab.extend(1u64.to_le_bytes());
        }
        let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
        let mut f = vec![0u8; 2 * TEXT];
        // jmp . (the hostile process spins there).
        f[TEXT..TEXT + 2].copy_from_slice(&[0xeb, 0xfe]);
        let sym_at = f.len();
        f.extend(&symtab);
        let str_at = f.len();
        f.extend(&strtab);
        let shstr_at = f.len();
        f.extend(shstrtab);
        while !f.len().is_multiple_of(8) {
            f.push(0);
        }
        let sh_at = f.len();
        let u16s = |v: &mut Vec<u8>, xs: &[u16]| xs.iter().for_each(|x| v.extend(x.to_le_bytes()));
        // name, type, flags, addr, offset, size, link, info, align, entsize.
        let section =
            |v: &mut Vec<u8>, s: (u32, u32, u64, u64, usize, usize, u32, u32, u64, u64)| {
                v.extend(s.0.to_le_bytes());
                v.extend(s.1.to_le_bytes());
                v.extend(s.2.to_le_bytes());
                v.extend(s.3.to_le_bytes());
                v.extend((s.4 as u64).to_le_bytes());
                v.extend((s.5 as u64).to_le_bytes());
                v.extend(s.6.to_le_bytes());
                v.extend(s.7.to_le_bytes());
                v.extend(s.8.to_le_bytes());
                v.extend(s.9.to_le_bytes());
            };
        f.extend([0u8; 64]);
        section(&mut f, (1, 1, 6, TEXT as u64, TEXT, TEXT, 0, 0, 16, 0));
        section(&mut f, (7, 2, 0, 0, sym_at, symtab.len(), 3, 1, 8, 24));
        section(&mut f, (15, 3, 0, 0, str_at, strtab.len(), 0, 0, 1, 0));
        section(&mut f, (23, 3, 0, 0, shstr_at, shstrtab.len(), 0, 0, 1, 0));
        let mut h = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
        // ET_DYN, EM_X86_64; version, entry, phoff, shoff, flags.
        u16s(&mut h, &[3, 62]);
        h.extend(1u32.to_le_bytes());
        h.extend(0u64.to_le_bytes());
        h.extend(64u64.to_le_bytes());
        h.extend((sh_at as u64).to_le_bytes());
        h.extend(0u32.to_le_bytes());
        // ehsize, phentsize, phnum, shentsize, shnum, shstrndx.
        u16s(&mut h, &[64, 56, 1, 64, 5, 4]);
        // PT_LOAD, R+X, offset 0, vaddr, paddr, filesz, memsz, align.
        h.extend(1u32.to_le_bytes());
        h.extend(5u32.to_le_bytes());
        for v in [0, 0, 0, 2 * TEXT as u64, 2 * TEXT as u64, TEXT as u64] {
            h.extend(v.to_le_bytes());
        }
        f[..h.len()].copy_from_slice(&h);
        f
    }

    pub(crate) fn caps(symbols: usize, name_bytes: u64) -> Caps {
        Caps {
            symbols,
            name_bytes,
            ..Caps::DEFAULT
        }
    }

    #[test]
    fn symbols_past_the_cap_are_left_and_counted() {
        let data = elf_with_symbols(1000, |i| format!("f{i}").into_bytes());
        let obj = object::File::parse(&*data).unwrap();
        let mut seen = Vec::new();
        let left = for_each_symbol(
            &obj,
            "capped.so",
            &caps(300, u64::MAX),
            |_| true,
            |_, n| {
                seen.push(n.to_vec());
                true
            },
        );
        // (object skips the null symbol.)
        assert_eq!(seen.len(), 300);
        assert_eq!(seen[0], b"f0");
        assert_eq!(left, 1000 - 300);
        // Under the cap: everything, nothing left.
        let mut n = 0;
        let left = for_each_symbol(
            &obj,
            "whole.so",
            &caps(2000, u64::MAX),
            |_| true,
            |_, _| {
                n += 1;
                true
            },
        );
        assert_eq!((n, left), (1000, 0));
    }

    #[test]
    fn names_sharing_one_long_tail_stop_at_the_name_bytes_cap() {
        // Every name is the same megabyte (one string, read once per
        // symbol): 10,000 symbols would scan 10 GB.
        let mut data = elf_with_symbols(10_000, |i| {
            if i == 0 {
                vec![b'a'; 1 << 20]
            } else {
                Vec::new()
            }
        });
        // Each symbol's name at the megabyte's start.
        let obj = object::File::parse(&*data).unwrap();
        let sym_at = {
            use object::{Object, ObjectSection};
            obj.section_by_name(".symtab")
                .unwrap()
                .file_range()
                .unwrap()
                .0 as usize
        };
        for i in 1..=10_000 {
            data[sym_at + 24 * i..sym_at + 24 * i + 4].copy_from_slice(&1u32.to_le_bytes());
        }
        let obj = object::File::parse(&*data).unwrap();
        let t = std::time::Instant::now();
        let mut n = 0;
        let left = for_each_symbol(
            &obj,
            "tails.so",
            &caps(usize::MAX, 8 << 20),
            |_| true,
            |_, _| {
                n += 1;
                true
            },
        );
        assert_eq!(n, 8);
        assert_eq!(left, 10_000 - 8);
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }
}
