//! Reading another process's memory. What asys decodes there (CPython code
//! objects and thread states, the NVTX registration table) is the traced
//! process's to write, so the decoders read through [`RemoteMemory`]: the
//! same code runs over a live process ([`Process`], `process_vm_readv`) and,
//! in the fuzz targets (fuzz/), over an address space made of the fuzzer's
//! bytes.

/// The memory of one process, read by address.
pub trait RemoteMemory {
    /// The process, as errors name it.
    fn pid(&self) -> u32;

    /// `len` bytes at `addr`, all or nothing: None where any of them is not
    /// readable (unmapped, or past the end of the address space).
    fn read(&self, addr: u64, len: usize) -> Option<Vec<u8>>;

    /// The little-endian u64 at `addr`.
    fn read_u64(&self, addr: u64) -> Option<u64> {
        Some(u64::from_le_bytes(self.read(addr, 8)?.try_into().ok()?))
    }
}

/// A live process's memory, read with `process_vm_readv` (which fails,
/// rather than faults, where the other process has nothing mapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process(pub u32);

impl RemoteMemory for Process {
    fn pid(&self) -> u32 {
        self.0
    }

    fn read(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut out = vec![0u8; len];
        let local = libc::iovec {
            iov_base: out.as_mut_ptr().cast(),
            iov_len: len,
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        };
        // SAFETY: `local` is `out`, `len` bytes long; the kernel writes at
        // most that much there and reads the other process's memory
        // (failing, not faulting, where it is not mapped).
        let got = unsafe { libc::process_vm_readv(self.0 as i32, &local, 1, &remote, 1, 0) };
        (got >= 0 && got as usize == len).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_reads_its_own_memory_and_not_what_is_unmapped() {
        let values: [u64; 2] = [0x1122_3344_5566_7788, 9];
        let me = Process(std::process::id());
        assert_eq!(me.read_u64(values.as_ptr() as u64), Some(values[0]));
        assert_eq!(
            me.read(values.as_ptr() as u64, 16).map(|b| b.len()),
            Some(16)
        );
        assert!(me.read(8, 8).is_none());
        assert!(me.read(u64::MAX - 3, 8).is_none());
    }
}
