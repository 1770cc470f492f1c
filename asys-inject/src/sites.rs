//! The probe sites. Each is a naked function whose first bytes are exactly a
//! 5-byte NOP (`0f 1f 44 00 00`) followed by `ret`: asys attaches uprobes at
//! their first byte, and the kernel optimizes a uprobe on a NOP5 into a call.
use asys_common::ActivityRecord;

/// One device activity record, times on CLOCK_MONOTONIC.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn asys_site_activity(_record: *const ActivityRecord) {
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret")
}

/// At the entry of every runtime API call, with the call's correlation id
/// (the id its device records carry). asys tags the call it is recording.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn asys_site_api(_correlation: u32) {
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret")
}

/// At the exit of every runtime API call when asys records the API here
/// (`--api-probes site`): the whole call in one probe hit. `args` points to 8
/// values in register layout; `start` is CLOCK_MONOTONIC at entry.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn asys_site_call(
    _correlation: u32,
    _name_id: u32,
    _args: *const u64,
    _result: u64,
    _start: u64,
) {
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret")
}

/// Names API id `id` (first use of a name in this process).
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn asys_site_name(_id: u32, _name: *const libc::c_char) {
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret")
}

/// `n` records could not be delivered.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn asys_site_lost(_n: u64) {
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret")
}
