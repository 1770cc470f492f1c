//! User-defined probes (`--probe`): each probe's program (where its
//! arguments are and what they are), a call probe's saved entry, and the
//! hits, with or without string arguments.
use core::mem::offset_of;

use crate::EventHeader;

/// User-defined probes (`--probe`): at most this many per run.
pub const MAX_USER_PROBES: u32 = 64;
/// Typed arguments per user-defined probe.
pub const MAX_PROBE_ARGS: usize = 6;
/// Bytes of a `str` argument kept (with its terminating NUL).
pub const PROBE_STR_BYTES: usize = 64;

/// Where a user-defined probe's argument is: [`ProbeArg::loc`].
pub const ARG_NONE: u8 = 0;
/// In a register: `pt_regs` at byte offset `reg`.
pub const ARG_REG: u8 = 1;
/// In memory at register `reg` plus `offset` (a USDT `-8@16(%rbp)`), plus
/// register `index` times `scale` where `scale` is not 0 (`-4@8(%rdx,%rsi,4)`);
/// `reg` is [`NO_REG`] where there is no base (`-8@4096(,%rdi,8)`).
pub const ARG_MEM: u8 = 2;
/// The constant `offset` (a USDT `$5`).
pub const ARG_CONST: u8 = 3;
/// In the tracepoint's record at `offset`, `size` bytes.
pub const ARG_TP_FIELD: u8 = 4;
/// A tracepoint `__data_loc` string: the u32 at `offset` holds its offset
/// (low 16 bits) and length (high 16 bits) in the record.
pub const ARG_TP_DATA_LOC: u8 = 5;
/// A tracepoint `char[N]` inline at `offset`.
pub const ARG_TP_INLINE_STR: u8 = 6;

/// What an argument's value is: [`ProbeArg::kind`].
pub const ARG_I32: u8 = 0;
pub const ARG_U32: u8 = 1;
pub const ARG_I64: u8 = 2;
pub const ARG_U64: u8 = 3;
pub const ARG_PTR: u8 = 4;
/// The value is the address of a NUL-terminated string, copied into the
/// hit's `strs` slot of the argument.
pub const ARG_STR: u8 = 5;

/// [`ProbeArg::reg`] of a memory operand without a base register.
pub const NO_REG: u8 = 0xff;

/// One argument of a user-defined probe: where it is and what it is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeArg {
    pub loc: u8,
    pub kind: u8,
    /// Bytes of the value that count (1, 2, 4 or 8): read at a memory
    /// location; of a register (read whole) or a constant, the low ones.
    pub size: u8,
    /// 1: the value is sign-extended from `size` bytes, 0: zero-extended
    /// (a USDT note's `-4@` and `4@`).
    pub signed: u8,
    /// Byte offset of the register (of a memory operand: the base
    /// register, or [`NO_REG`]) in `struct pt_regs`; a kernel function's
    /// argument index times 8. One byte: `pt_regs` is 168 bytes.
    pub reg: u8,
    /// Byte offset in `struct pt_regs` of a memory operand's index
    /// register, read where `scale` is not 0.
    pub index: u8,
    /// The index register's multiplier (1, 2, 4 or 8); 0: no index.
    pub scale: u8,
    pub _pad: u8,
    /// Memory offset from the register, the constant, or the record offset.
    pub offset: i64,
}

impl ProbeArg {
    /// `v` (a whole register, a constant, or `size` bytes read from
    /// memory) as the argument's size and sign say: its low `size` bytes,
    /// sign-extended when `signed`, else zero-extended, to 64 bits. The
    /// type asked for (`i32`, `u32`, ...) is applied to this value.
    ///
    /// Without a branch: the eBPF programs extend up to six arguments per
    /// hit, and a seven-way match on each multiplied the paths Linux 6.1's
    /// verifier walks past its million-instruction limit (it refused
    /// `user_probe`, so every `--probe` failed there). `size` is 1, 2, 4 or
    /// 8 (0 reads as 8); the shift keeps its low bytes.
    #[inline(always)]
    pub fn extend(&self, v: u64) -> u64 {
        let shift = 64u32.wrapping_sub(u32::from(self.size) * 8) & 63;
        let high = v << shift;
        let sign_extended = ((high as i64) >> shift) as u64;
        let zero_extended = high >> shift;
        // All ones where signed, else zero.
        let signed = 0u64.wrapping_sub(u64::from(self.signed & 1));
        (sign_extended & signed) | (zero_extended & !signed)
    }
}

// An element of `UserProbe::args`, 16 bytes as it always was; no hidden
// padding (Pod). Its fields lie where the eBPF side reads them.
const _: () = assert!(size_of::<ProbeArg>() == 16);
const _: () = assert!(offset_of!(ProbeArg, signed) == 3);
const _: () = assert!(offset_of!(ProbeArg, reg) == 4);
const _: () = assert!(offset_of!(ProbeArg, index) == 5);
const _: () = assert!(offset_of!(ProbeArg, scale) == 6);
const _: () = assert!(offset_of!(ProbeArg, offset) == 8);

/// A user-defined probe's program: which arguments to read and how its hits
/// are reported. Userspace writes one per probe id into `USER_PROBES`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserProbe {
    pub args: [ProbeArg; MAX_PROBE_ARGS],
    pub nargs: u32,
    /// [`PROBE_KERNEL`], [`PROBE_CALL`].
    pub flags: u32,
}

// The `USER_PROBES` map's value, written whole by userspace.
const _: () = assert!(size_of::<UserProbe>() == 16 * MAX_PROBE_ARGS + 8);

/// Pointers (`str`) are kernel addresses: a kprobe's or a tracepoint's.
pub const PROBE_KERNEL: u32 = 1;
/// An entry whose return probe (same id) reports one row with both times.
pub const PROBE_CALL: u32 = 2;
/// Some argument is a string: hits are [`ProbeHitEvent`]s (else
/// [`ProbeHitShortEvent`]s).
pub const PROBE_HAS_STR: u32 = 4;
/// Each hit is followed by the user stack above it (`--probe-backtrace`),
/// an [`ApiStackEvent`](crate::ApiStackEvent) keyed by the hit's `start`.
pub const PROBE_USTACK: u32 = 8;
/// The probe is at a function's first instruction: its stack is sent as
/// the caller's right after the call returns (the return address at `rsp`
/// as the pc), the shape the unwinder expects of a stack that did not come
/// from a sample.
pub const PROBE_AT_ENTRY: u32 = 16;

/// The cookie of a user-defined probe's link: its id, plus this bit on the
/// return probe of a call pair or a plain return probe.
pub const PROBE_COOKIE_RETURN: u64 = 1 << 32;

/// `ProbeHitEvent::flags`: the hit has a return value.
pub const HIT_HAS_RET: u32 = 1;

/// Key of a call probe's saved entry: the thread, and its stack pointer at
/// the entry (a user function's return finds it at its own minus 8, so a
/// recursive call's inner return never takes the outer entry; 0 for kernel
/// functions, matched per thread and probe).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeCallKey {
    pub tid: u32,
    pub probe: u32,
    pub sp: u64,
}

// A map key: no hidden padding, or equal keys could differ in their bytes.
const _: () = assert!(size_of::<ProbeCallKey>() == 16);

/// What a call probe's entry saves for its return: the entry's time and
/// arguments (a string argument's pointer: the string is read at the
/// return, when the function has touched its page).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ProbeCallEntry {
    pub start: u64,
    pub flags: u32,
    pub _pad: u32,
    pub args: [u64; MAX_PROBE_ARGS],
}

// A call probe's saved entry (the `PROBE_CALLS` map's value): 64 bytes, as
// docs/probes.md says.
const _: () = assert!(size_of::<ProbeCallEntry>() == 64);

/// A hit of a user-defined probe without string arguments.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProbeHitShortEvent {
    pub header: EventHeader,
    pub probe: u32,
    pub flags: u32,
    pub start: u64,
    pub ret: u64,
    pub args: [u64; MAX_PROBE_ARGS],
}

// 96 bytes, as docs/probes.md says; collect/decode.rs reads it whole and
// widens it. Its fields lie where a `ProbeHitEvent`'s do.
const _: () = assert!(size_of::<ProbeHitShortEvent>() == 96);
const _: () = assert!(offset_of!(ProbeHitShortEvent, header) == 0);
const _: () = assert!(offset_of!(ProbeHitShortEvent, probe) == offset_of!(ProbeHitEvent, probe));
const _: () = assert!(offset_of!(ProbeHitShortEvent, flags) == offset_of!(ProbeHitEvent, flags));
const _: () = assert!(offset_of!(ProbeHitShortEvent, start) == offset_of!(ProbeHitEvent, start));
const _: () = assert!(offset_of!(ProbeHitShortEvent, ret) == offset_of!(ProbeHitEvent, ret));
const _: () = assert!(offset_of!(ProbeHitShortEvent, args) == offset_of!(ProbeHitEvent, args));

impl ProbeHitShortEvent {
    /// As a [`ProbeHitEvent`] with empty strings.
    pub fn widen(&self) -> ProbeHitEvent {
        ProbeHitEvent {
            header: self.header,
            probe: self.probe,
            flags: self.flags,
            start: self.start,
            ret: self.ret,
            args: self.args,
            strs: [[0; PROBE_STR_BYTES]; MAX_PROBE_ARGS],
        }
    }
}

/// One hit of a user-defined probe; a call pair is one hit with its entry's
/// time in `start` (otherwise `start` is the header's time).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProbeHitEvent {
    pub header: EventHeader,
    pub probe: u32,
    /// [`HIT_HAS_RET`]; bit 8 + i: argument i could not be read.
    pub flags: u32,
    pub start: u64,
    pub ret: u64,
    pub args: [u64; MAX_PROBE_ARGS],
    pub strs: [[u8; PROBE_STR_BYTES]; MAX_PROBE_ARGS],
}

// collect/decode.rs reads it whole; the eBPF side (user_probe.rs) writes
// each slot of `strs` only up to its NUL, where userspace
// (kernel/user_probes.rs) cuts it.
const _: () = assert!(size_of::<ProbeHitEvent>() == 96 + PROBE_STR_BYTES * MAX_PROBE_ARGS);
const _: () = assert!(offset_of!(ProbeHitEvent, header) == 0);
const _: () = assert!(offset_of!(ProbeHitEvent, probe) == 24);
const _: () = assert!(offset_of!(ProbeHitEvent, flags) == 28);
const _: () = assert!(offset_of!(ProbeHitEvent, start) == 32);
const _: () = assert!(offset_of!(ProbeHitEvent, ret) == 40);
const _: () = assert!(offset_of!(ProbeHitEvent, args) == 48);
const _: () = assert!(offset_of!(ProbeHitEvent, strs) == 96);

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(size: u8, signed: bool) -> ProbeArg {
        ProbeArg {
            size,
            signed: u8::from(signed),
            ..ProbeArg::default()
        }
    }

    #[test]
    fn values_take_the_size_and_sign_of_their_note() {
        // (size, signed, value as read, value as the note says)
        let table: [(u8, bool, u64, i128); 10] = [
            // `4@$-202182160`: the constant's low 4 bytes, unsigned.
            (4, false, -202_182_160i64 as u64, 4_092_785_136),
            (4, true, -202_182_160i64 as u64, -202_182_160),
            // `-2@$-3600`, and the same bytes unsigned.
            (2, true, -3600i64 as u64, -3600),
            (2, false, -3600i64 as u64, 61_936),
            // `1@$-16`, `-1@$-16`.
            (1, false, -16i64 as u64, 240),
            (1, true, -16i64 as u64, -16),
            // A register read whole: upper bytes that are not the value's.
            (4, true, 0xdead_beef_ffff_fffe, -2),
            (2, false, 0xdead_beef_0001_f1f0, 0xf1f0),
            (8, true, u64::MAX, -1),
            (8, false, u64::MAX, u64::MAX as i128),
        ];
        for (size, signed, raw, want) in table {
            let got = arg(size, signed).extend(raw);
            let got = if signed || size < 8 {
                i128::from(got as i64)
            } else {
                i128::from(got)
            };
            assert_eq!(got, want, "{size}@ signed {signed} of {raw:#x}");
        }
    }
}
