//! Capture ranges (`-c hggcProfilerApi`, `-c hgtx`): the event that says a
//! range opened or closed, and the values of the settings, state and
//! per-thread fields the kernel follows ranges with.
use core::mem::offset_of;

use crate::EventHeader;

/// The capture range opened (`started` 1) or closed (0) in a traced process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CaptureEvent {
    pub header: EventHeader,
    pub started: u64,
}

// collect/decode.rs reads it whole; with `LibraryLoadEvent` the smallest
// record.
const _: () = assert!(size_of::<CaptureEvent>() == 32);
const _: () = assert!(offset_of!(CaptureEvent, header) == 0);
const _: () = assert!(offset_of!(CaptureEvent, started) == 24);

/// [`Settings::capture_domain_mode`](crate::Settings::capture_domain_mode)
/// values: the default domain's ranges match, any domain's, the named one's.
pub const DOMAIN_DEFAULT: u64 = 0;
pub const DOMAIN_ANY: u64 = 1;
pub const DOMAIN_NAMED: u64 = 2;
/// [`KernelState::capture_kind`](crate::KernelState::capture_kind) values:
/// the open range is a push of the default domain, a push of another, a start.
pub const RANGE_PUSH_DEFAULT: u64 = 0;
pub const RANGE_PUSH_DOMAIN: u64 = 1;
pub const RANGE_START: u64 = 2;

/// [`ThreadCalls::pending`](crate::ThreadCalls::pending) values.
pub const PENDING_RANGE_ID: u32 = 1;
pub const PENDING_DOMAIN: u32 = 2;
pub const PENDING_RETRY_OPEN: u32 = 3;
pub const PENDING_RETRY_DOMAIN: u32 = 4;
