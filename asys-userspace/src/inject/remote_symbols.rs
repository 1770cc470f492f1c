//! Addresses of functions in another process: a symbol of a library it has
//! mapped, plus where the process mapped that library. Each file is opened
//! as the process maps it (`mapped_file`: no link followed, the mapped
//! inode checked) and read within asys's limits for another user's files.
use crate::{
    elf::ElfFile,
    process::{mapped_file, procfs::MapsEntry},
};

pub struct Symbols {
    pid: u32,
    maps: Vec<MapsEntry>,
}

impl Symbols {
    pub fn of(pid: u32) -> Self {
        let maps = crate::process::procfs::mappings_and_vdso(pid)
            .map(|(m, _)| m)
            .unwrap_or_default();
        Self { pid, maps }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn maps(&self) -> &[MapsEntry] {
        &self.maps
    }

    /// `name` in the C library (or, for glibc before 2.34's dlopen and
    /// dlerror, libdl).
    pub fn libc(&self, name: &str) -> Option<u64> {
        ["libc.so", "libc-", "libdl.so", "libdl-"]
            .iter()
            .find_map(|prefix| self.in_library(|file| file.starts_with(prefix), name))
    }

    /// The mapping of asys's injection library, if the process has one.
    pub fn injection_library(&self) -> Option<&MapsEntry> {
        self.maps
            .iter()
            .find(|m| crate::install_layout::is_injection_library(&m.path))
    }

    pub fn in_injection_library(&self, name: &str) -> Option<u64> {
        let m = self.injection_library()?;
        self.address_in(m, name)
    }

    /// `name` in the first mapped library whose file name `matches` says.
    fn in_library(&self, matches: impl Fn(&str) -> bool, name: &str) -> Option<u64> {
        let m = self.maps.iter().find(|m| {
            m.path
                .file_name()
                .is_some_and(|f| matches(&f.to_string_lossy()))
        })?;
        self.address_in(m, name)
    }

    /// `name`'s address in the process, from mapping `m` of its file.
    pub fn address_in(&self, m: &MapsEntry, name: &str) -> Option<u64> {
        let opened = mapped_file::open(self.pid, m).ok()?;
        let elf = ElfFile::read(&opened.fd_path()).ok()?;
        let vaddr = elf.symbol_vaddr(name)?;
        Some(self.bias_of(m, &elf)? + vaddr)
    }

    /// The symbols of `m`'s file whose names start with `prefix`, with their
    /// addresses in the process.
    pub fn prefixed_in(&self, m: &MapsEntry, prefix: &str) -> Vec<(String, u64)> {
        let Some(elf) = mapped_file::open(self.pid, m)
            .ok()
            .and_then(|o| ElfFile::read(&o.fd_path()).ok())
        else {
            return Vec::new();
        };
        let Some(bias) = self.bias_of(m, &elf) else {
            return Vec::new();
        };
        elf.symbols_with_prefix(prefix)
            .into_iter()
            .map(|(n, v)| (n, bias + v))
            .collect()
    }

    fn bias_of(&self, m: &MapsEntry, elf: &ElfFile) -> Option<u64> {
        // Any mapping of the file gives the bias: the first (offset 0) is
        // the one at the start of its first segment.
        let first = self
            .maps
            .iter()
            .filter(|o| (o.key().is_some() && o.key() == m.key()) || o.path == m.path)
            .min_by_key(|o| o.start)?;
        elf.load_bias(first.start, first.offset)
    }
}
