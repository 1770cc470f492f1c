//! The `STATE` map, memory-mapped: the kernel and userspace both write its
//! one [`KernelState`] entry, so userspace writes single fields in place
//! (atomically, as the programs do) instead of rewriting the entry with a
//! map update, which could undo a write the kernel made in between (a
//! capture range opening just as userspace marks it done).
use std::{
    os::fd::{AsFd, AsRawFd},
    ptr::NonNull,
    sync::atomic::{AtomicU64, Ordering},
};

use asys_common::KernelState;
use aya::maps::{Map, MapData};

use super::TracerError;

pub struct StateMap {
    base: NonNull<u8>,
    len: usize,
    /// Kept open with the mapping, though the mapping alone would keep the
    /// map alive.
    _map: MapData,
}

// SAFETY: the mapping is shared memory that every access reaches through
// atomics; nothing in it is tied to the thread that mapped it.
unsafe impl Send for StateMap {}
// SAFETY: as above; `set` takes `&mut self` anyway.
unsafe impl Sync for StateMap {}

impl StateMap {
    pub fn new(map: Map) -> Result<Self, TracerError> {
        let Map::Array(map) = map else {
            return Err(TracerError::MissingMap("STATE"));
        };
        // An array map's values start at offset 0 of its mapping.
        // SAFETY: sysconf has no memory effects.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = size_of::<KernelState>().div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd; the kernel checks
        // that the map was made mmapable and that `len` fits.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(TracerError::State(std::io::Error::last_os_error()));
        }
        let base = NonNull::new(addr.cast::<u8>())
            .ok_or_else(|| TracerError::State(std::io::Error::other("mmap returned null")))?;
        Ok(Self {
            base,
            len,
            _map: map,
        })
    }

    /// Writes the u64 field at byte `offset` (a `KernelState::*` offset).
    pub fn set(&mut self, offset: usize, value: u64) {
        assert!(
            offset.is_multiple_of(8) && offset + 8 <= size_of::<KernelState>(),
            "not a KernelState field: {offset}"
        );
        // SAFETY: the offset is an aligned u64 field inside the mapping,
        // which lives as long as self; the kernel accesses it as a u64 too.
        let field = unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast::<u64>()) };
        field.store(value, Ordering::SeqCst);
    }
}

impl Drop for StateMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
