//! The text an API call passes (a range's message, a name): read from the
//! caller's memory at the entry (api.rs), again at the return if it was not
//! in memory yet, and by the hgtx capture range's match (capture.rs).
use asys_common::{
    ATTRIBUTES_MESSAGE, ATTRIBUTES_MESSAGE_TYPE, ApiEntry, MESSAGE_TYPE_ASCII,
    MESSAGE_TYPE_REGISTERED, MESSAGE_TYPE_UNICODE,
};
use aya_ebpf::helpers::{
    bpf_probe_read_user, bpf_probe_read_user_buf, bpf_probe_read_user_str_bytes,
};

/// Reads the text an argument gives: a C string, or the message of an event
/// attributes struct (a C string, or a registered handle kept as is).
/// False when a C string could not be read: a uprobe may not fault, and a
/// string in a page the process has not touched yet is not in memory.
#[inline(never)]
pub fn capture_text(entry: &mut ApiEntry, ptr: u64, attributes: bool, wide: bool) -> bool {
    let mut text_ptr = ptr;
    let mut wide = wide;
    if attributes {
        let base = ptr as *const u8;
        let kind =
            // SAFETY: bpf_probe_read_user fails instead of faulting.
            unsafe {
            bpf_probe_read_user(base.wrapping_add(ATTRIBUTES_MESSAGE_TYPE) as *const i32)
        }
        .unwrap_or(0);
        let message =
            // SAFETY: as above.
            unsafe { bpf_probe_read_user(base.wrapping_add(ATTRIBUTES_MESSAGE) as *const u64) }
                .unwrap_or(0);
        match kind {
            MESSAGE_TYPE_ASCII => text_ptr = message,
            MESSAGE_TYPE_UNICODE => {
                text_ptr = message;
                wide = true;
            }
            MESSAGE_TYPE_REGISTERED => {
                entry.text_handle = message;
                return true;
            }
            _ => return true,
        }
    }
    if text_ptr == 0 {
        return true;
    }
    if wide {
        // No string helper for UTF-32: take the whole window, or nothing if
        // it crosses into unmapped memory; userspace stops at the first 0.
        entry.text_wide = 1;
        // SAFETY: fails instead of faulting; the destination is ours.
        if unsafe { bpf_probe_read_user_buf(text_ptr as *const u8, &mut entry.text) }.is_err() {
            entry.text[..4].copy_from_slice(&[0; 4]);
        }
    // SAFETY: fails instead of faulting; the destination is ours.
    } else if unsafe { bpf_probe_read_user_str_bytes(text_ptr as *const u8, &mut entry.text) }
        .is_err()
    {
        entry.text[0] = 0;
        return false;
    }
    true
}
