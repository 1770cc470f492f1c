//! NVTX strings and domains a process registered before asys reached it
//! (`attach`, system-wide): NVTX hands the application a handle once, and
//! its ranges then carry only the handle. asys's injection library keeps
//! every registration in a table it exports (`asys_nvtx_registry`, layout in
//! asys-common); this reads it from the process with process_vm_readv,
//! checking what it reads, so that those ranges are named in the report.
use std::collections::BTreeMap;

use asys_common::{
    NVTX_REGISTERED_DOMAIN, NVTX_REGISTERED_STRING, NVTX_REGISTRY_CAPACITY, NVTX_REGISTRY_MAGIC,
    NVTX_REGISTRY_SYMBOL, NVTX_REGISTRY_VERSION, NvtxRegistration, NvtxRegistryHeader,
};

/// What one process had registered: handle → name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Registered {
    pub strings: BTreeMap<u64, String>,
    pub domains: BTreeMap<u64, String>,
    /// Registrations the table could not give (past its capacity, or being
    /// written as it was read): their ranges stay unnamed, and are counted.
    pub unread: u64,
}

/// The table of `pid`'s injection library, if it maps one (None: it does
/// not, or its table could not be read or is not one asys knows).
pub fn read(pid: u32) -> Option<Registered> {
    let (maps, _) = crate::procfs::mappings_and_vdso(pid).ok()?;
    // The library asys points NVTX_INJECTION64_PATH at, under its own name.
    let m = maps.iter().find(|m| {
        m.executable
            && m.path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libasys_inject"))
    })?;
    let elf = crate::symbolize::elf::ElfFile::read(&m.path).ok()?;
    let symbol = elf.dynamic_symbol_vaddr(NVTX_REGISTRY_SYMBOL)?;
    // Where the file's addresses land in this process.
    let bias = elf.load_bias(m.start, m.offset)?;
    let at = bias.checked_add(symbol)?;
    let header: NvtxRegistryHeader = read_remote(pid, at)?;
    if header.magic != NVTX_REGISTRY_MAGIC
        || header.version != NVTX_REGISTRY_VERSION
        || header.capacity as usize != NVTX_REGISTRY_CAPACITY
    {
        return None;
    }
    let taken = header.taken as usize;
    let kept = taken.min(NVTX_REGISTRY_CAPACITY);
    let mut out = Registered {
        unread: (taken - kept) as u64,
        ..Default::default()
    };
    let first = at + size_of::<NvtxRegistryHeader>() as u64;
    let entries: Vec<NvtxRegistration> = read_remote_many(pid, first, kept)?;
    for e in entries {
        let len = e.text.iter().position(|&b| b == 0);
        let (true, Some(len)) = (e.ready == 1, len) else {
            out.unread += 1;
            continue;
        };
        let text = String::from_utf8_lossy(&e.text[..len]).into_owned();
        match e.kind {
            NVTX_REGISTERED_STRING => out.strings.insert(e.handle, text),
            NVTX_REGISTERED_DOMAIN => out.domains.insert(e.handle, text),
            _ => {
                out.unread += 1;
                continue;
            }
        };
    }
    Some(out)
}

/// One `T` at `addr` in `pid`'s memory.
fn read_remote<T: Copy>(pid: u32, addr: u64) -> Option<T> {
    read_remote_many(pid, addr, 1)?.pop()
}

/// `n` consecutive `T`s at `addr` in `pid`'s memory, all or nothing. `T`
/// must be plain data (integers and arrays of them): any bytes are a value.
fn read_remote_many<T: Copy>(pid: u32, addr: u64, n: usize) -> Option<Vec<T>> {
    let bytes = n.checked_mul(size_of::<T>())?;
    let mut out: Vec<T> = Vec::with_capacity(n);
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: bytes,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: bytes,
    };
    // SAFETY: `local` is the spare capacity of `out`, `bytes` long; the
    // kernel writes at most that much there, and reads the other process's
    // memory (failing, not faulting, where it is not mapped).
    let got = unsafe { libc::process_vm_readv(pid as i32, &local, 1, &remote, 1, 0) };
    if got < 0 || got as usize != bytes {
        return None;
    }
    // SAFETY: all `n` values were written in full, and the callers' `T`s
    // (asys-common's registry types) are integers and arrays of integers,
    // for which any bytes are a value.
    unsafe { out.set_len(n) };
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_its_own_memory_through_the_same_call() {
        // The reader works on any process; asys's own memory is one.
        let values: [u64; 3] = [7, 8, 9];
        let got: Vec<u64> =
            super::read_remote_many(std::process::id(), values.as_ptr() as u64, 3).unwrap();
        assert_eq!(got, values);
        // An unmapped address reads as nothing, not as a crash.
        assert!(super::read_remote::<u64>(std::process::id(), 8).is_none());
        // No injection library mapped here: no table.
        assert!(super::read(std::process::id()).is_none());
    }
}
