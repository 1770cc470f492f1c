//! The NVTX strings and domains registered so far, where `asys attach` can
//! read them: a process registers its strings once, usually at its start,
//! and an attach that comes later sees only the handles in its ranges. The
//! table is a static exported as `asys_nvtx_registry` (layout in
//! asys-common), which asys finds in this library's ELF and reads with
//! process_vm_readv.
use std::{
    cell::UnsafeCell,
    ffi::{CStr, c_char},
    sync::atomic::{AtomicU32, Ordering},
};

use asys_common::{
    NVTX_REGISTRY_CAPACITY, NVTX_REGISTRY_MAGIC, NVTX_REGISTRY_TEXT, NVTX_REGISTRY_VERSION,
    NvtxRegistration, NvtxRegistryHeader,
};

/// [`asys_common::NvtxRegistryHeader`]'s layout, with `taken` atomic,
/// then the entries.
#[repr(C)]
pub struct Registry {
    magic: u64,
    version: u32,
    capacity: u32,
    taken: AtomicU32,
    _pad: u32,
    entries: [UnsafeCell<NvtxRegistration>; NVTX_REGISTRY_CAPACITY],
}

// asys reads the header's fields where `NvtxRegistryHeader` has them, and
// the entries right after it (asys-userspace's registered_names/table.rs).
const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(Registry, magic) == offset_of!(NvtxRegistryHeader, magic));
    assert!(offset_of!(Registry, version) == offset_of!(NvtxRegistryHeader, version));
    assert!(offset_of!(Registry, capacity) == offset_of!(NvtxRegistryHeader, capacity));
    assert!(offset_of!(Registry, taken) == offset_of!(NvtxRegistryHeader, taken));
    assert!(offset_of!(Registry, entries) == size_of::<NvtxRegistryHeader>());
};

// SAFETY: an entry is written only by the one thread whose fetch_add on
// `taken` handed it that index, its `ready` last (atomically, release);
// nothing in the process reads entries (asys reads them from outside).
unsafe impl Sync for Registry {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: UnsafeCell<NvtxRegistration> = UnsafeCell::new(NvtxRegistration {
    ready: 0,
    kind: 0,
    handle: 0,
    text: [0; NVTX_REGISTRY_TEXT],
});

#[unsafe(no_mangle)]
#[used]
pub static asys_nvtx_registry: Registry = Registry {
    magic: NVTX_REGISTRY_MAGIC,
    version: NVTX_REGISTRY_VERSION,
    capacity: NVTX_REGISTRY_CAPACITY as u32,
    taken: AtomicU32::new(0),
    _pad: 0,
    entries: [EMPTY; NVTX_REGISTRY_CAPACITY],
};

/// Notes that `handle` names `text`.
///
/// # Safety
/// `text` is null or a NUL-terminated string valid for the call.
pub unsafe fn note(kind: u32, handle: u64, text: *const c_char) {
    let r = &asys_nvtx_registry;
    let at = r.taken.fetch_add(1, Ordering::Relaxed) as usize;
    let Some(entry) = r.entries.get(at) else {
        // Full: asys counts the registrations past the capacity (`taken`).
        return;
    };
    let mut bytes = [0u8; NVTX_REGISTRY_TEXT];
    if !text.is_null() {
        // SAFETY: non-null, and NUL-terminated as the caller promises.
        let s = unsafe { CStr::from_ptr(text) }.to_bytes();
        let n = s.len().min(NVTX_REGISTRY_TEXT - 1);
        bytes[..n].copy_from_slice(&s[..n]);
    }
    let p = entry.get();
    // SAFETY: index `at` was handed to this thread alone (see `Sync`); the
    // fields are written before `ready`, which goes last.
    unsafe {
        (*p).kind = kind;
        (*p).handle = handle;
        (*p).text = bytes;
        AtomicU32::from_ptr(&raw mut (*p).ready).store(1, Ordering::Release);
    }
}
