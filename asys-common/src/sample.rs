//! CPU samples (`-s`): the thread on the CPU and its user registers, with or
//! without a copy of its user stack.
use core::mem::offset_of;

use crate::{EventHeader, STACK_BYTES};

/// One CPU sample: the thread on the CPU when the sampling timer fired.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuSampleEvent {
    pub header: EventHeader,
    /// 1: the CPU was in the kernel (a system call, a fault); the user
    /// registers below are where the thread entered it.
    pub kernel: u32,
    pub _pad: u32,
    /// User registers: instruction, stack and frame pointers.
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

// collect/decode.rs reads it whole, from a `CpuSample` record and from the
// start of a `CpuSampleStack` one.
const _: () = assert!(size_of::<CpuSampleEvent>() == 56);
const _: () = assert!(offset_of!(CpuSampleEvent, header) == 0);
const _: () = assert!(offset_of!(CpuSampleEvent, kernel) == 24);
const _: () = assert!(offset_of!(CpuSampleEvent, ip) == 32);
const _: () = assert!(offset_of!(CpuSampleEvent, sp) == 40);
const _: () = assert!(offset_of!(CpuSampleEvent, bp) == 48);

/// A CPU sample and a copy of the user stack from `sample.sp` upwards.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CpuSampleStackEvent {
    pub sample: CpuSampleEvent,
    /// Valid bytes of `stack`.
    pub len: u64,
    pub stack: [u8; STACK_BYTES],
}

// The eBPF side (sample.rs) writes only `len` bytes of `stack`;
// collect/decode.rs reads `sample` from the record's start, `len` at its
// offset, and slices `len` bytes from `stack`, never past the record.
const _: () = assert!(size_of::<CpuSampleStackEvent>() == 64 + STACK_BYTES);
const _: () = assert!(offset_of!(CpuSampleStackEvent, sample) == 0);
const _: () = assert!(offset_of!(CpuSampleStackEvent, len) == 56);
const _: () = assert!(offset_of!(CpuSampleStackEvent, stack) == 64);
