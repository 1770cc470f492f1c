//! Decoding the injection library's NVTX registration table
//! (`asys_nvtx_registry`, layout in asys-common) from a process's memory.
//! The table is in the traced process, which may write anything there: the
//! header is checked, at most [`NVTX_REGISTRY_CAPACITY`] entries are read,
//! and each field is taken from the bytes by hand (no byte is trusted to be
//! a valid value of anything but an integer). Kept apart from the I/O that
//! finds the table, so that the fuzz targets (fuzz/) run this very code.
use std::{collections::BTreeMap, mem::offset_of};

use asys_common::{
    NVTX_REGISTERED_DOMAIN, NVTX_REGISTERED_STRING, NVTX_REGISTRY_CAPACITY, NVTX_REGISTRY_MAGIC,
    NVTX_REGISTRY_TEXT, NVTX_REGISTRY_VERSION, NvtxRegistration, NvtxRegistryHeader,
};

use crate::process::remote_memory::RemoteMemory;

/// What one process had registered: handle → name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Registered {
    pub strings: BTreeMap<u64, String>,
    pub domains: BTreeMap<u64, String>,
    /// Registrations the table could not give (past its capacity, or being
    /// written as it was read): their ranges stay unnamed, and are counted.
    pub unread: u64,
}

const HEADER: usize = size_of::<NvtxRegistryHeader>();
const ENTRY: usize = size_of::<NvtxRegistration>();

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The table at `at` in `mem`; None when it cannot be read or is not one
/// asys knows (another magic, version or capacity).
pub fn decode(mem: &impl RemoteMemory, at: u64) -> Option<Registered> {
    let header = mem.read(at, HEADER)?;
    if u64_at(&header, offset_of!(NvtxRegistryHeader, magic)) != NVTX_REGISTRY_MAGIC
        || u32_at(&header, offset_of!(NvtxRegistryHeader, version)) != NVTX_REGISTRY_VERSION
        || u32_at(&header, offset_of!(NvtxRegistryHeader, capacity)) as usize
            != NVTX_REGISTRY_CAPACITY
    {
        return None;
    }
    let taken = u32_at(&header, offset_of!(NvtxRegistryHeader, taken)) as usize;
    let kept = taken.min(NVTX_REGISTRY_CAPACITY);
    let mut out = Registered {
        unread: (taken - kept) as u64,
        ..Default::default()
    };
    // All entries in one read: a table being written is read as one
    // moment, as far as the kernel allows.
    let entries = mem.read(at.checked_add(HEADER as u64)?, kept * ENTRY)?;
    for e in entries.chunks_exact(ENTRY) {
        let text_at = offset_of!(NvtxRegistration, text);
        let text = &e[text_at..text_at + NVTX_REGISTRY_TEXT];
        let len = text.iter().position(|&b| b == 0);
        let ready = u32_at(e, offset_of!(NvtxRegistration, ready));
        let (1, Some(len)) = (ready, len) else {
            out.unread += 1;
            continue;
        };
        let handle = u64_at(e, offset_of!(NvtxRegistration, handle));
        let text = String::from_utf8_lossy(&text[..len]).into_owned();
        match u32_at(e, offset_of!(NvtxRegistration, kind)) {
            NVTX_REGISTERED_STRING => out.strings.insert(handle, text),
            NVTX_REGISTERED_DOMAIN => out.domains.insert(handle, text),
            _ => {
                out.unread += 1;
                continue;
            }
        };
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::remote_memory::Process;

    /// A table as the injection library lays it out, in bytes.
    fn table(taken: u32, entries: &[(u32, u32, u64, &[u8])]) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&NVTX_REGISTRY_MAGIC.to_le_bytes());
        t.extend_from_slice(&NVTX_REGISTRY_VERSION.to_le_bytes());
        t.extend_from_slice(&(NVTX_REGISTRY_CAPACITY as u32).to_le_bytes());
        t.extend_from_slice(&taken.to_le_bytes());
        t.extend_from_slice(&0u32.to_le_bytes());
        assert_eq!(t.len(), HEADER);
        for &(ready, kind, handle, text) in entries {
            t.extend_from_slice(&ready.to_le_bytes());
            t.extend_from_slice(&kind.to_le_bytes());
            t.extend_from_slice(&handle.to_le_bytes());
            let mut fixed = [0u8; NVTX_REGISTRY_TEXT];
            fixed[..text.len()].copy_from_slice(text);
            t.extend_from_slice(&fixed);
        }
        t
    }

    #[test]
    fn a_table_in_this_process_reads_through_process_vm_readv() {
        let full = [b'x'; NVTX_REGISTRY_TEXT];
        let t = table(
            6,
            &[
                (1, NVTX_REGISTERED_STRING, 7, b"step"),
                (1, NVTX_REGISTERED_DOMAIN, 8, b"dom"),
                // Being written, unterminated, of an unknown kind.
                (0, NVTX_REGISTERED_STRING, 9, b"half"),
                (1, NVTX_REGISTERED_STRING, 10, &full),
                (1, 99, 11, b"odd"),
                (1, NVTX_REGISTERED_STRING, 12, b"\xffbad"),
            ],
        );
        let me = Process(std::process::id());
        let r = decode(&me, t.as_ptr() as u64).unwrap();
        assert_eq!(r.strings.get(&7).map(String::as_str), Some("step"));
        assert_eq!(r.domains.get(&8).map(String::as_str), Some("dom"));
        assert_eq!(r.strings.get(&12).map(String::as_str), Some("\u{fffd}bad"));
        assert_eq!(r.unread, 3);
        // More taken than the table holds: those past its end are counted.
        let mut over = table(NVTX_REGISTRY_CAPACITY as u32 + 5, &[]);
        over.resize(HEADER + NVTX_REGISTRY_CAPACITY * ENTRY, 0);
        let r = decode(&me, over.as_ptr() as u64).unwrap();
        assert_eq!(r.unread, NVTX_REGISTRY_CAPACITY as u64 + 5);
        // Another magic, and a table at the top of memory: none.
        let mut bad = t.clone();
        bad[0] ^= 1;
        assert!(decode(&me, bad.as_ptr() as u64).is_none());
        assert!(decode(&me, u64::MAX - 8).is_none());
    }
}
