//! The OS runtime (`-t osrt`): what the system call programs keep per
//! thread, and the lock waits they send with the user stack above them.
use core::mem::offset_of;

use crate::ApiCallEvent;

/// Highest x86-64 system call number the osrt programs look up, plus one:
/// the size of the `OSRT_SYSCALLS` array (numbers reach about 470 on 6.18).
pub const OSRT_SYSCALL_SLOTS: u32 = 512;

/// What the osrt programs keep per thread (the `OSRT_THREADS` LRU map, by
/// thread id): the system call in flight.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OsrtThread {
    /// Entry time of the system call in flight; 0 when none is followed.
    pub syscall_start: u64,
    /// Its cookie from `OSRT_SYSCALLS`.
    pub syscall_cookie: u64,
    /// Its arguments (rdi, rsi, rdx, r10, r8, r9), when the cookie asks,
    /// and always for a lock wait.
    pub syscall_args: [u64; 6],
    /// The entry time of a call that exited with a restart code: kept
    /// until the next entry, which continues it if it is its restart.
    pub restart_start: u64,
    /// And the time it exited so.
    pub restart_end: u64,
    /// [`LOCK_WAIT_IN_FLIGHT`]: the call in flight is a lock wait (a futex
    /// wait made by a lock library's code); [`LOCK_WAIT_RESTART`]: one was
    /// interrupted and comes back as `restart_syscall`; 0: neither.
    pub lock_wait: u32,
    pub _pad: u32,
}

// The `OSRT_THREADS` map's value; no hidden padding (Pod).
const _: () = assert!(size_of::<OsrtThread>() == 88);

/// [`OsrtThread::lock_wait`] values.
pub const LOCK_WAIT_IN_FLIGHT: u32 = 1;
pub const LOCK_WAIT_RESTART: u32 = 2;

/// Bytes of user stack copied with a lock wait: enough for the lock
/// library's frames between the futex system call and the caller (at most
/// 272 bytes in Debian 12's glibc 2.36), with room to spare.
pub const LOCK_STACK_BYTES: usize = 1024;

/// A lock wait (osrt): a futex wait system call made by the code of a
/// library with pthread lock functions, with the user registers and stack
/// at the call, from which userspace finds the lock function that waited
/// (its DWARF call frame information) and names the row after it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LockWaitEvent {
    /// The wait as a call: the futex system call's cookie, entry time,
    /// result and arguments (the futex word, the operation, ...);
    /// `header.kind` is [`EventKind::LockWait`](crate::EventKind::LockWait).
    pub call: ApiCallEvent,
    /// User registers at the system call: the instruction after it, the
    /// stack and frame pointers.
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// Valid bytes of `stack`, copied from `sp` upwards.
    pub len: u64,
    pub stack: [u8; LOCK_STACK_BYTES],
}

// collect/decode.rs reads it whole, its header from the start of `call`;
// the eBPF side (syscalls.rs) writes only `len` bytes of `stack`, and
// userspace (kernel/osrt.rs) unwinds those.
const _: () = assert!(size_of::<LockWaitEvent>() == 160 + LOCK_STACK_BYTES);
const _: () = assert!(offset_of!(LockWaitEvent, call) == 0);
const _: () = assert!(offset_of!(LockWaitEvent, ip) == 128);
const _: () = assert!(offset_of!(LockWaitEvent, sp) == 136);
const _: () = assert!(offset_of!(LockWaitEvent, bp) == 144);
const _: () = assert!(offset_of!(LockWaitEvent, len) == 152);
const _: () = assert!(offset_of!(LockWaitEvent, stack) == 160);
