//! The injection library's table of registered NVTX strings and domains,
//! which `asys attach` reads from a process's memory.
use core::mem::offset_of;

/// The injection library's table of NVTX strings and domains registered so
/// far (`nvtxDomainRegisterStringA`, `nvtxDomainCreateA`), exported as
/// [`NVTX_REGISTRY_SYMBOL`]: `asys attach` reads it from the process
/// (process_vm_readv) to name the ranges that use what was registered
/// before it attached. Append-only; an entry counts once its `ready` is 1
/// (written last, with release ordering).
pub const NVTX_REGISTRY_SYMBOL: &str = "asys_nvtx_registry";
/// "ASYSNVTX", little-endian: what a reader checks first.
pub const NVTX_REGISTRY_MAGIC: u64 = u64::from_le_bytes(*b"ASYSNVTX");
pub const NVTX_REGISTRY_VERSION: u32 = 1;
/// Registrations kept; later ones are counted in `overflow`, not kept.
pub const NVTX_REGISTRY_CAPACITY: usize = 1024;
/// Bytes of text kept per registration (NUL-terminated, cut to fit).
pub const NVTX_REGISTRY_TEXT: usize = 112;
/// [`NvtxRegistration::kind`]: a registered string, a domain.
pub const NVTX_REGISTERED_STRING: u32 = 1;
pub const NVTX_REGISTERED_DOMAIN: u32 = 2;

/// One registration: a string or a domain and the handle it was given.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NvtxRegistration {
    /// 1 once the rest is written.
    pub ready: u32,
    pub kind: u32,
    /// The handle the registration returned.
    pub handle: u64,
    pub text: [u8; NVTX_REGISTRY_TEXT],
}

// Userspace (collect/registered_names/table.rs) takes each field of an
// entry from the bytes at its offset, and the text up to its NUL.
const _: () = assert!(size_of::<NvtxRegistration>() == 16 + NVTX_REGISTRY_TEXT);
const _: () = assert!(offset_of!(NvtxRegistration, ready) == 0);
const _: () = assert!(offset_of!(NvtxRegistration, kind) == 4);
const _: () = assert!(offset_of!(NvtxRegistration, handle) == 8);
const _: () = assert!(offset_of!(NvtxRegistration, text) == 16);

/// The start of the table; [`NVTX_REGISTRY_CAPACITY`] entries follow it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NvtxRegistryHeader {
    pub magic: u64,
    pub version: u32,
    pub capacity: u32,
    /// Entries taken (may pass `capacity`: those past it are not kept).
    pub taken: u32,
    pub _pad: u32,
}

// Userspace (collect/registered_names/table.rs) takes each field from the
// bytes at its offset and the entries from right after the header; the
// injection library's `Registry` (nvtx_registry.rs) lays it out again with
// `taken` atomic, and asserts that it matches.
const _: () = assert!(size_of::<NvtxRegistryHeader>() == 24);
const _: () = assert!(offset_of!(NvtxRegistryHeader, magic) == 0);
const _: () = assert!(offset_of!(NvtxRegistryHeader, version) == 8);
const _: () = assert!(offset_of!(NvtxRegistryHeader, capacity) == 12);
const _: () = assert!(offset_of!(NvtxRegistryHeader, taken) == 16);
