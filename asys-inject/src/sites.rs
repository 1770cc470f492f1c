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

/// The runtime's API callback: site 0 on entry, 1 on exit, with the call's
/// correlation id (the id its device records carry), the API's name id (see
/// [`asys_site_name`]), its arguments (8 values, register layout) and, at
/// exit, its result.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn asys_site_api(
    _site: u32,
    _correlation: u32,
    _name_id: u32,
    _args: *const u64,
    _result: u64,
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
