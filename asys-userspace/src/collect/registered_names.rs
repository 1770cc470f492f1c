//! NVTX strings and domains a process registered before asys reached it
//! (`attach`, system-wide): NVTX hands the application a handle once, and
//! its ranges then carry only the handle. asys's injection library keeps
//! every registration in a table it exports (`asys_nvtx_registry`, layout in
//! asys-common); this reads it from the process with process_vm_readv,
//! checking what it reads, so that those ranges are named in the report.
//! The table's decoding is in `table` (fuzzed on its own, fuzz/).
pub mod table;

use asys_common::NVTX_REGISTRY_SYMBOL;
pub use table::Registered;

/// The table of `pid`'s injection library, if it maps one (None: it does
/// not, or its table could not be read or is not one asys knows).
pub fn read(pid: u32) -> Option<Registered> {
    let (maps, _) = crate::process::procfs::mappings_and_vdso(pid).ok()?;
    // The library asys points NVTX_INJECTION64_PATH at, under its own name.
    let m = maps.iter().find(|m| {
        m.executable
            && m.path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libasys_inject"))
    })?;
    // The mapped file itself, by descriptor: the path may since have been
    // replaced by anything (a FIFO would block a plain open forever).
    let opened = crate::process::mapped_file::open(pid, m).ok()?;
    let elf = crate::elf::ElfFile::read(&opened.fd_path()).ok()?;
    let symbol = elf.dynamic_symbol_vaddr(NVTX_REGISTRY_SYMBOL)?;
    // Where the file's addresses land in this process.
    let bias = elf.load_bias(m.start, m.offset)?;
    let at = bias.checked_add(symbol)?;
    table::decode(&crate::process::remote_memory::Process(pid), at)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_without_the_injection_library_has_no_table() {
        // The table's decoding is tested in `table`.
        assert!(super::read(std::process::id()).is_none());
    }
}
