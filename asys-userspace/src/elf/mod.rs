//! ELF facts asys needs: exported functions with their file offsets (where
//! uprobes go), the build id, address-to-symbol lookup for symbolizing, and
//! symbol names demangled as GNU tools print them (`demangle`).
//! Below the stages that read binaries (`kernel/` placing probes, `collect/`,
//! `symbolize/`), which all use it; it imports none of them.
use std::path::{Path, PathBuf};

pub mod caps;
pub mod demangle;
pub mod mapped;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not an ELF file we can read: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: object::Error,
    },
}

#[derive(Debug, Clone)]
pub struct ExportedFunction {
    pub name: String,
    /// Offset in the file, which is what the kernel's uprobe wants.
    pub file_offset: u64,
}

/// A parsed ELF file, owning its (mapped) bytes.
pub struct ElfFile {
    path: PathBuf,
    data: mapped::FileBytes,
    /// Its function symbols by address, read at the first lookup.
    functions: std::sync::OnceLock<Functions>,
}

/// A file's function symbols (defined, `STT_FUNC`), read once within
/// [`caps::Caps::DEFAULT`], so that each address looked up costs a binary
/// search, not a pass over every symbol (the symbolize stage looks up
/// every distinct kernel address a process launched, and the file is its
/// owner's: millions of each would be hours).
struct Functions {
    /// (address, size, where the name lies in the file), by address; the
    /// symbols of one address in table order (`.symtab`, then `.dynsym`).
    by_address: Vec<(u64, u64, std::ops::Range<usize>)>,
    /// The furthest end (address + size) of the symbols up to each one: a
    /// lookup walking back from an address stops where no symbol before
    /// can hold it.
    reach: Vec<u64>,
}

impl ElfFile {
    /// The ELF file at `path`, a path of a mapped file (`/proc/PID/maps`,
    /// or a descriptor asys holds): no link on the way is followed.
    pub fn read(path: &Path) -> Result<Self, ElfError> {
        Self::read_with(path, &asys_report::untrusted::open::Policy::MAPPED)
    }

    /// The ELF file at `path`, opened under `policy`.
    pub fn read_with(
        path: &Path,
        policy: &asys_report::untrusted::open::Policy,
    ) -> Result<Self, ElfError> {
        let data = mapped::FileBytes::map(path, policy).map_err(|source| ElfError::Io {
            path: path.into(),
            source,
        })?;
        let me = Self {
            path: path.into(),
            data,
            functions: std::sync::OnceLock::new(),
        };
        me.object()?;
        Ok(me)
    }

    fn object(&self) -> Result<object::File<'_>, ElfError> {
        object::File::parse(&*self.data).map_err(|source| ElfError::Parse {
            path: self.path.clone(),
            source,
        })
    }

    /// Defined, exported functions named `<prefix><Uppercase>...` for one of
    /// `prefixes` (API names: hggcMalloc, cudaMalloc, hgtxRangePushA), so that
    /// an application's own `hgtx_scale_kernel` is not taken for an API. An
    /// empty prefix matches every function.
    pub fn exported_functions(&self, prefixes: &[&str]) -> Result<Vec<ExportedFunction>, ElfError> {
        // Versioned duplicates (name@VER) are the same code.
        self.exported_functions_where(|name| prefixes.iter().any(|p| is_api_name(name, p)))
    }

    /// Defined, exported functions named exactly one of `names` (osrt's
    /// lock functions): each name is tested before anything is copied, so
    /// a library of 100,000 exports costs a pass over its symbols, not
    /// 100,000 names.
    pub fn exported_functions_named(
        &self,
        names: &[&str],
    ) -> Result<Vec<ExportedFunction>, ElfError> {
        self.exported_functions_where(|name| names.contains(&name))
    }

    /// Defined, exported functions whose names `take` takes, sorted and
    /// deduplicated by name. The dynamic symbols are read within
    /// [`caps::Caps::DEFAULT`]: every library a traced process maps is
    /// looked at, and it is its owner's to write.
    fn exported_functions_where(
        &self,
        take: impl Fn(&str) -> bool,
    ) -> Result<Vec<ExportedFunction>, ElfError> {
        let obj = self.object()?;
        let mut out = Vec::new();
        caps::for_each_in(
            obj.dynamic_symbols(),
            &self.path.to_string_lossy(),
            &caps::Caps::DEFAULT,
            |sym| sym.kind() == SymbolKind::Text && !sym.is_undefined() && sym.is_global(),
            |sym, name| {
                if let Ok(name) = std::str::from_utf8(name)
                    && take(name)
                    && let Some(file_offset) = vaddr_to_file_offset(&obj, sym.address())
                {
                    out.push(ExportedFunction {
                        name: name.to_string(),
                        file_offset,
                    });
                }
                true
            },
        );
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out.dedup_by(|a, b| a.name == b.name);
        Ok(out)
    }

    /// The first defined symbol of `all` named `name` that `want` takes,
    /// read within [`caps::Caps::DEFAULT`].
    fn find_symbol<'d, 'f>(
        &self,
        all: impl Iterator<Item = object::Symbol<'d, 'f>>,
        name: &str,
        want: impl Fn(&object::Symbol<'d, 'f>) -> bool,
    ) -> Option<object::Symbol<'d, 'f>>
    where
        'd: 'f,
    {
        let mut found = None;
        caps::for_each_in(
            all,
            &self.path.to_string_lossy(),
            &caps::Caps::DEFAULT,
            |s| !s.is_undefined() && want(s),
            |s, n| {
                if n == name.as_bytes() {
                    found = Some(s);
                }
                found.is_none()
            },
        );
        found
    }

    /// The file offset of a dynamic symbol, e.g. `_dl_debug_state` in ld.so.
    pub fn dynamic_symbol_offset(&self, name: &str) -> Result<Option<u64>, ElfError> {
        let obj = self.object()?;
        Ok(self
            .find_symbol(obj.dynamic_symbols(), name, |_| true)
            .and_then(|s| vaddr_to_file_offset(&obj, s.address())))
    }

    /// The address (vaddr) of the defined dynamic symbol `name`, data too.
    pub fn dynamic_symbol_vaddr(&self, name: &str) -> Option<u64> {
        let obj = self.object().ok()?;
        self.find_symbol(obj.dynamic_symbols(), name, |_| true)
            .map(|s| s.address())
    }

    /// The address (vaddr) of the defined function or object `name` in the
    /// dynamic symbols or, where the file keeps it, the full symbol table
    /// (a local symbol: NVTX's globals in a module built with its headers).
    pub fn symbol_vaddr(&self, name: &str) -> Option<u64> {
        let obj = self.object().ok()?;
        let all = obj.dynamic_symbols().chain(obj.symbols());
        self.find_symbol(all, name, |s| s.address() != 0)
            .map(|s| s.address())
    }

    /// The defined symbols (full table and dynamic) whose names start with
    /// `prefix`, with their addresses (vaddr): versioned names such as
    /// NVTX's `nvtxExtPayloadSlots_v3_bpl0x0104`. Read within
    /// [`caps::Caps::DEFAULT`]: the file is its process's to write.
    pub fn symbols_with_prefix(&self, prefix: &str) -> Vec<(String, u64)> {
        let Ok(obj) = self.object() else {
            return Vec::new();
        };
        let mut out: Vec<(String, u64)> = Vec::new();
        caps::for_each_symbol(
            &obj,
            &self.path.to_string_lossy(),
            &caps::Caps::DEFAULT,
            |s| !s.is_undefined() && s.address() != 0,
            |s, name| {
                if name.starts_with(prefix.as_bytes())
                    && let Ok(name) = std::str::from_utf8(name)
                {
                    out.push((name.to_string(), s.address()));
                }
                true
            },
        );
        out.sort();
        out.dedup();
        out
    }

    /// What to add to this file's addresses (vaddr) to get a process's,
    /// given one of its mappings of the file: `start`, at file offset
    /// `offset`. The kernel maps each loadable segment from its page: the
    /// mapping's offset is the segment's offset rounded down to a page.
    pub fn load_bias(&self, start: u64, offset: u64) -> Option<u64> {
        const PAGE: u64 = 4096;
        let obj = self.object().ok()?;
        obj.segments().find_map(|seg| {
            let (off, _) = seg.file_range();
            (off & !(PAGE - 1) == offset)
                .then(|| start.checked_sub(seg.address() & !(PAGE - 1)))
                .flatten()
        })
    }

    pub fn build_id(&self) -> Option<String> {
        let obj = self.object().ok()?;
        let id = obj.build_id().ok()??;
        Some(id.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The function containing the file offset `off`: (name, offset into it).
    /// Symbols are read within [`caps::Caps::DEFAULT`] (a mapped file is
    /// its owner's to write), once.
    pub fn symbolize_file_offset(&self, off: u64) -> Option<String> {
        let obj = self.object().ok()?;
        let vaddr = file_offset_to_vaddr(&obj, off)?;
        let f = self.functions.get_or_init(|| self.functions(&obj));
        // The symbol holding `vaddr` with the greatest address, the first
        // in table order among those of that address (as a pass over the
        // table keeping the first of each greater address picks it).
        let inside = |(a, size, _): &(u64, u64, std::ops::Range<usize>)| {
            vaddr < a.saturating_add(*size) || (*size == 0 && vaddr == *a)
        };
        let name_of =
            |i: usize| std::str::from_utf8(self.data.get(f.by_address[i].2.clone())?).ok();
        let mut best: Option<(u64, &str)> = None;
        for i in (0..f.by_address.partition_point(|s| s.0 <= vaddr)).rev() {
            let a = f.by_address[i].0;
            if best.is_some_and(|(b, _)| b != a) || (f.reach[i] <= vaddr && a != vaddr) {
                break;
            }
            if inside(&f.by_address[i])
                && let Some(name) = name_of(i)
            {
                best = Some((a, name));
            }
        }
        best.map(|(a, name)| {
            if a == vaddr {
                name.to_string()
            } else {
                format!("{name}+{:#x}", vaddr - a)
            }
        })
    }

    /// The function symbols of `obj` (this file), by address.
    fn functions(&self, obj: &object::File<'_>) -> Functions {
        let base = self.data.as_ptr() as usize;
        let mut by_address = Vec::new();
        caps::for_each_symbol(
            obj,
            &self.path.to_string_lossy(),
            &caps::Caps::DEFAULT,
            |s| s.kind() == SymbolKind::Text && !s.is_undefined(),
            |s, name| {
                // The name is a slice of the file's string table.
                if let Some(at) = (name.as_ptr() as usize).checked_sub(base) {
                    by_address.push((s.address(), s.size(), at..at + name.len()));
                }
                true
            },
        );
        // Stable: one address's symbols stay in table order.
        by_address.sort_by_key(|s| s.0);
        let reach = by_address
            .iter()
            .scan(0u64, |end, (a, size, _)| {
                *end = (*end).max(a.saturating_add(*size));
                Some(*end)
            })
            .collect();
        Functions { by_address, reach }
    }
}

fn is_api_name(name: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || name
            .strip_prefix(prefix)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|c| c.is_ascii_uppercase())
}

fn vaddr_to_file_offset(obj: &object::File<'_>, vaddr: u64) -> Option<u64> {
    for seg in obj.segments() {
        let (foff, fsize) = seg.file_range();
        if vaddr >= seg.address() && vaddr < seg.address() + fsize {
            return Some(vaddr - seg.address() + foff);
        }
    }
    // Objects without program headers: fall back to sections.
    for sec in obj.sections() {
        if let Some((foff, _)) = sec.file_range()
            && vaddr >= sec.address()
            && vaddr < sec.address() + sec.size()
        {
            return Some(vaddr - sec.address() + foff);
        }
    }
    None
}

fn file_offset_to_vaddr(obj: &object::File<'_>, off: u64) -> Option<u64> {
    obj.segments().find_map(|seg| {
        let (foff, fsize) = seg.file_range();
        (off >= foff && off < foff + fsize).then(|| off - foff + seg.address())
    })
}

/// The program interpreter (PT_INTERP) of an executable, if it has one
/// (`path` is a program asys's user named: links are followed).
pub fn interpreter(path: &Path) -> Option<PathBuf> {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let data = mapped::FileBytes::map(path, &asys_report::untrusted::open::Policy::NAMED).ok()?;
    let elf = ElfFile64::<object::LittleEndian>::parse(&*data).ok()?;
    let endian = elf.endian();
    for ph in elf.elf_program_headers() {
        if ph.p_type(endian) == object::elf::PT_INTERP {
            let bytes = ph.data(endian, &*data).ok()?;
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            return Some(PathBuf::from(
                String::from_utf8_lossy(&bytes[..end]).into_owned(),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn symbols_are_looked_up_through_the_caps() {
        let dir = std::env::temp_dir().join(format!("asys-elf-caps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.so");
        let data = super::caps::tests::elf_with_symbols(1000, |i| format!("f{i}").into_bytes());
        std::fs::write(&path, data).unwrap();
        let elf = super::ElfFile::read(&path).unwrap();
        assert_eq!(elf.symbol_vaddr("f999"), Some(0x1000 + 999));
        assert_eq!(elf.symbol_vaddr("g"), None);
        assert_eq!(elf.symbols_with_prefix("f99").len(), 11);
        assert_eq!(elf.symbolize_file_offset(0x1005).as_deref(), Some("f5"));
        // Past every symbol's end: none (found without a walk back over
        // the thousand before it).
        assert_eq!(elf.symbolize_file_offset(0x1400), None);
        // Not in the dynamic symbols: the file has none.
        assert_eq!(elf.dynamic_symbol_vaddr("f5"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn api_names_need_an_uppercase_letter_after_the_prefix() {
        assert!(super::is_api_name("hggcMalloc", "hggc"));
        assert!(super::is_api_name("cudaGetDeviceCount", "cuda"));
        assert!(!super::is_api_name("hgtx_scale_kernel", "hgtx"));
        assert!(!super::is_api_name("hggc", "hggc"));
        assert!(super::is_api_name("read", ""));
    }
}
