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

/// At the entry of a runtime API call, with the call's correlation id (the
/// id its device records carry) and the address of the thread's
/// correlation slot (see `correlation` in lib.rs). asys tags the call it is
/// recording and remembers the slot, where its exit probe reads the ids of
/// the calls that do not come here.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn asys_site_api(_correlation: u32, _slot: *const u32) {
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret")
}

/// At the exit of every runtime API call when asys records the API here
/// (`--api-probes site`): the whole call in one probe hit. Called only
/// through [`report_call`], which passes everything in registers so that
/// the probe reads no user memory for it (see `call_site` in asys-ebpf):
/// rdi the name id, rsi the correlation id, rdx the result, rcx the start
/// (CLOCK_MONOTONIC), r8..r15 the eight argument slots.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn asys_site_call() {
    core::arch::naked_asm!(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00", "ret")
}

/// Reports one API call at [`asys_site_call`]. `args` are the runtime's 8
/// argument slots in register layout.
#[inline(always)]
pub fn report_call(name_id: u32, correlation: u32, result: u64, start: u64, args: &[u64; 8]) {
    // SAFETY: the site is `nop5; ret`: it reads no register, writes none but
    // rsp (its own return), and touches no memory; the uprobe on it only
    // reads the registers. The C ABI's caller-saved registers are declared
    // clobbered all the same, and the stack is aligned for a call here.
    unsafe {
        core::arch::asm!(
            "call rax",
            in("rax") asys_site_call as *const () as usize,
            in("rdi") u64::from(name_id),
            in("rsi") u64::from(correlation),
            in("rdx") result,
            in("rcx") start,
            in("r8") args[0],
            in("r9") args[1],
            in("r10") args[2],
            in("r11") args[3],
            in("r12") args[4],
            in("r13") args[5],
            in("r14") args[6],
            in("r15") args[7],
            clobber_abi("C"),
        );
    }
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
