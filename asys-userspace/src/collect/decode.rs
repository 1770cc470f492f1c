//! Ring-buffer records to typed events: a pure function of the bytes, with no
//! kernel, process or report behind it, so every layout is unit-tested here.
use asys_common::{
    ActivityEvent, ApiCallEvent, ApiCallShortEvent, ApiNameEvent, ApiStackEvent, ApiTextEvent,
    CaptureEvent, CpuSampleEvent, CpuSampleStackEvent, EventHeader, EventKind, KernelStackEvent,
    LibraryLoadEvent, LockWaitEvent, ProbeHitEvent, ProbeHitShortEvent, ProcessEvent,
    PythonStackEvent, SchedEvent, WakingEvent,
};

/// A process lifecycle event's kind: the `process_events` table's.
pub use asys_report::report::schema::ProcessKind;

/// Registers and copied user stack of a call stack or a CPU sample, borrowed
/// from the ring buffer (up to 8 KiB: not copied until a row needs it).
#[derive(Debug, Clone, Copy)]
pub struct StackView<'a> {
    pub header: EventHeader,
    /// The call's start (API stacks) or the sample's time (samples).
    pub key: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub stack: &'a [u8],
}

/// One record of the ring buffer, decoded.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    ApiCall(ApiCallEvent),
    ApiCallText(ApiTextEvent),
    ApiStack(StackView<'a>),
    /// A futex wait of a lock library (osrt), to be named after its lock
    /// function. Boxed: it carries 1 KiB of stack, and is rare (waits over
    /// `--osrt-threshold`).
    LockWait(Box<LockWaitEvent>),
    Process(ProcessKind, ProcessEvent),
    LibraryLoad(LibraryLoadEvent),
    /// Boxed: it carries up to 1 KiB of name (CUDA kernel names), and is
    /// rare (once per name and process).
    ApiName(Box<ApiNameEvent>),
    DeviceActivity(ActivityEvent),
    Capture(CaptureEvent),
    SchedSwitch(SchedEvent),
    SchedWaking(WakingEvent),
    /// The kernel stack of a sample or a switch (`owner_ts` is its time).
    KernelStack(KernelStackEvent),
    /// A CPU sample; the stack is empty without `-b fp|dwarf`.
    CpuSample(CpuSampleEvent, StackView<'a>),
    /// The Python frames of a sample (`owner_ts` is its time).
    /// Boxed: three times the size of any other event, and rarer.
    PythonStack(Box<PythonStackEvent>),
    /// The Python frames of a thread as it left the CPU to wait (`owner_ts`
    /// is the switch's time). Boxed as [`Event::PythonStack`].
    PythonSwitchStack(Box<PythonStackEvent>),
    /// A hit of a user-defined probe (`--probe`). Boxed: it carries six
    /// 64-byte string slots.
    ProbeHit(Box<ProbeHitEvent>),
}

impl Event<'_> {
    /// When a recorded window must hold this event to keep it: a call's
    /// start (its stack goes with it), a switch's or a sample's time. None
    /// for what is not bound to a window: bookkeeping, and device activity
    /// (the device ran it when it ran it; its call is what the window holds).
    pub fn window_time(&self) -> Option<u64> {
        match self {
            Event::ApiCall(ev) => Some(ev.start),
            Event::ApiCallText(ev) => Some(ev.call.start),
            Event::ApiStack(view) => Some(view.key),
            Event::LockWait(ev) => Some(ev.call.start),
            Event::SchedSwitch(ev) => Some(ev.header.ts),
            Event::SchedWaking(ev) => Some(ev.header.ts),
            Event::KernelStack(ev) => Some(ev.owner_ts),
            Event::PythonStack(ev) | Event::PythonSwitchStack(ev) => Some(ev.owner_ts),
            Event::CpuSample(ev, _) => Some(ev.header.ts),
            Event::ProbeHit(ev) => Some(ev.start),
            _ => None,
        }
    }

    /// Whether this event is recorded data (as opposed to bookkeeping: process
    /// lifecycle, loader, names, capture ranges), which `--max-report-size`
    /// stops writing.
    pub fn is_data(&self) -> bool {
        matches!(
            self,
            Event::ApiCall(_)
                | Event::ApiCallText(_)
                | Event::ApiStack(_)
                | Event::LockWait(_)
                | Event::DeviceActivity(_)
                | Event::SchedSwitch(_)
                | Event::SchedWaking(_)
                | Event::KernelStack(_)
                | Event::PythonStack(_)
                | Event::PythonSwitchStack(_)
                | Event::CpuSample(..)
                | Event::ProbeHit(_)
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("a record of {0} bytes is shorter than an event header")]
    Short(usize),
    #[error("unknown event kind {0}")]
    UnknownKind(u32),
    #[error("a {kind:?} record of {len} bytes, at least {need} expected")]
    Truncated {
        kind: EventKind,
        len: usize,
        need: usize,
    },
}

/// Decodes one ring-buffer record.
pub fn decode(bytes: &[u8]) -> Result<Event<'_>, DecodeError> {
    let header: EventHeader = read(bytes).ok_or(DecodeError::Short(bytes.len()))?;
    let kind = EventKind::from_u32(header.kind).ok_or(DecodeError::UnknownKind(header.kind))?;
    let truncated = |need: usize| DecodeError::Truncated {
        kind,
        len: bytes.len(),
        need,
    };
    macro_rules! fixed {
        ($t:ty) => {
            read::<$t>(bytes).ok_or_else(|| truncated(size_of::<$t>()))?
        };
    }
    Ok(match kind {
        EventKind::ApiCall => Event::ApiCall(fixed!(ApiCallEvent)),
        // A call whose signature reads no argument comes without them.
        EventKind::ApiCallShort => Event::ApiCall(fixed!(ApiCallShortEvent).widen()),
        EventKind::ApiCallText => Event::ApiCallText(fixed!(ApiTextEvent)),
        EventKind::LockWait => Event::LockWait(Box::new(fixed!(LockWaitEvent))),
        EventKind::ApiStack => {
            let need = size_of::<ApiStackEvent>();
            if bytes.len() < need {
                return Err(truncated(need));
            }
            let stack_at = std::mem::offset_of!(ApiStackEvent, stack);
            let prefix: StackPrefix = fixed!(StackPrefix);
            Event::ApiStack(StackView {
                header: prefix.header,
                key: prefix.key,
                ip: prefix.ip,
                sp: prefix.sp,
                bp: prefix.bp,
                stack: stack_bytes(bytes, stack_at, prefix.len),
            })
        }
        EventKind::ProcessFork => Event::Process(ProcessKind::Fork, fixed!(ProcessEvent)),
        EventKind::ProcessExec => Event::Process(ProcessKind::Exec, fixed!(ProcessEvent)),
        EventKind::ProcessExit => Event::Process(ProcessKind::Exit, fixed!(ProcessEvent)),
        EventKind::LibraryLoad => Event::LibraryLoad(fixed!(LibraryLoadEvent)),
        EventKind::ApiName => Event::ApiName(Box::new(fixed!(ApiNameEvent))),
        EventKind::DeviceActivity => Event::DeviceActivity(fixed!(ActivityEvent)),
        EventKind::Capture => Event::Capture(fixed!(CaptureEvent)),
        EventKind::SchedSwitch => Event::SchedSwitch(fixed!(SchedEvent)),
        EventKind::SchedWaking => Event::SchedWaking(fixed!(WakingEvent)),
        EventKind::KernelStack => Event::KernelStack(fixed!(KernelStackEvent)),
        EventKind::PythonStack => Event::PythonStack(Box::new(fixed!(PythonStackEvent))),
        EventKind::PythonSwitchStack => {
            Event::PythonSwitchStack(Box::new(fixed!(PythonStackEvent)))
        }
        EventKind::ProbeHit => Event::ProbeHit(Box::new(fixed!(ProbeHitEvent))),
        EventKind::ProbeHitShort => Event::ProbeHit(Box::new(fixed!(ProbeHitShortEvent).widen())),
        EventKind::CpuSample => {
            let sample = fixed!(CpuSampleEvent);
            Event::CpuSample(sample, sample_view(&sample, &[]))
        }
        EventKind::CpuSampleStack => {
            let need = size_of::<CpuSampleStackEvent>();
            if bytes.len() < need {
                return Err(truncated(need));
            }
            let sample = fixed!(CpuSampleEvent);
            let len_at = std::mem::offset_of!(CpuSampleStackEvent, len);
            let len: u64 = read(&bytes[len_at..]).ok_or_else(|| truncated(need))?;
            let stack = stack_bytes(bytes, std::mem::offset_of!(CpuSampleStackEvent, stack), len);
            Event::CpuSample(sample, sample_view(&sample, stack))
        }
    })
}

/// The fields of an [`ApiStackEvent`] before its stack copy.
#[repr(C)]
#[derive(Clone, Copy)]
struct StackPrefix {
    header: EventHeader,
    key: u64,
    ip: u64,
    sp: u64,
    bp: u64,
    len: u64,
}

// SAFETY: plain integers, `#[repr(C)]`, no padding: any bytes are a value.
unsafe impl aya::Pod for StackPrefix {}

const _: () = {
    use std::mem::offset_of;
    // StackPrefix must mirror ApiStackEvent's fields before its stack.
    assert!(offset_of!(ApiStackEvent, header) == offset_of!(StackPrefix, header));
    assert!(offset_of!(ApiStackEvent, call_start) == offset_of!(StackPrefix, key));
    assert!(offset_of!(ApiStackEvent, ip) == offset_of!(StackPrefix, ip));
    assert!(offset_of!(ApiStackEvent, sp) == offset_of!(StackPrefix, sp));
    assert!(offset_of!(ApiStackEvent, bp) == offset_of!(StackPrefix, bp));
    assert!(offset_of!(ApiStackEvent, len) == offset_of!(StackPrefix, len));
    assert!(size_of::<StackPrefix>() == offset_of!(ApiStackEvent, stack));
};

fn sample_view<'a>(s: &CpuSampleEvent, stack: &'a [u8]) -> StackView<'a> {
    StackView {
        header: s.header,
        key: s.header.ts,
        ip: s.ip,
        sp: s.sp,
        bp: s.bp,
        stack,
    }
}

/// The valid part of a stack copy: `len` bytes from `at`, never past the record.
fn stack_bytes(bytes: &[u8], at: usize, len: u64) -> &[u8] {
    let avail = bytes.len().saturating_sub(at);
    let len = usize::try_from(len).unwrap_or(usize::MAX).min(avail);
    &bytes[at..at + len]
}

/// A `T` from the start of `bytes`, or None if they are too few.
fn read<T: aya::Pod>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: `T: Pod` is plain old data (any bit pattern is a value) and the
    // length was checked; ring-buffer records are 8-byte aligned, but the read
    // does not rely on it.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use asys_common::STACK_BYTES;

    fn bytes_of<T: aya::Pod>(v: &T) -> Vec<u8> {
        // SAFETY: a Pod value is its bytes; the slice lives as long as `v`.
        unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
    }

    fn header(kind: EventKind) -> EventHeader {
        EventHeader {
            kind: kind as u32,
            cpu: 1,
            ts: 1_000,
            pid: 42,
            tid: 43,
        }
    }

    #[test]
    fn a_call_is_in_a_window_by_its_start_a_switch_by_its_time() {
        let call = ApiCallEvent {
            header: header(EventKind::ApiCall),
            start: 700,
            ..Default::default()
        };
        // The exit stamps the header; the window holds the call by its start.
        assert_eq!(Event::ApiCall(call).window_time(), Some(700));
        let switch = SchedEvent {
            header: header(EventKind::SchedSwitch),
            ..Default::default()
        };
        assert_eq!(Event::SchedSwitch(switch).window_time(), Some(1_000));
        // Bookkeeping is not bound to a window.
        let exit = ProcessEvent {
            header: header(EventKind::ProcessExit),
            ..Default::default()
        };
        assert_eq!(Event::Process(ProcessKind::Exit, exit).window_time(), None);
    }

    #[test]
    fn a_lock_wait_round_trips_with_its_stack() {
        let mut ev = LockWaitEvent {
            call: ApiCallEvent {
                header: header(EventKind::LockWait),
                cookie: 5,
                start: 600,
                args: [0x5000, 128, 2, 0, 0, 0, 0, 0],
                ..Default::default()
            },
            ip: 0x7f00_0000_1234,
            sp: 0x7ffd_0000_0000,
            bp: 1,
            len: 512,
            stack: [0; asys_common::LOCK_STACK_BYTES],
        };
        ev.stack[8] = 0xab;
        let bytes = bytes_of(&ev);
        let Event::LockWait(got) = decode(&bytes).unwrap() else {
            panic!("not a lock wait");
        };
        assert_eq!(
            (got.call.start, got.call.args[0], got.ip, got.sp, got.len),
            (600, 0x5000, ev.ip, ev.sp, 512)
        );
        assert_eq!(got.stack[8], 0xab);
        assert_eq!(Event::LockWait(got).window_time(), Some(600));
        assert!(matches!(
            decode(&bytes[..bytes.len() - 1]),
            Err(DecodeError::Truncated {
                kind: EventKind::LockWait,
                ..
            })
        ));
    }

    #[test]
    fn api_call_round_trips() {
        let ev = ApiCallEvent {
            header: header(EventKind::ApiCall),
            cookie: 7 | (3 << 48),
            start: 900,
            ret: u64::MAX,
            args: [1, 2, 3, 4, 5, 6, 7, 8],
            out0: 0xdead,
            correlation: 99,
        };
        let Event::ApiCall(got) = decode(&bytes_of(&ev)).unwrap() else {
            panic!("not an API call");
        };
        assert_eq!(
            (
                got.cookie,
                got.start,
                got.ret,
                got.args,
                got.out0,
                got.correlation
            ),
            (ev.cookie, 900, u64::MAX, ev.args, 0xdead, 99)
        );
        assert_eq!(
            (got.header.pid, got.header.tid, got.header.ts),
            (42, 43, 1_000)
        );
        assert!(decode(&bytes_of(&ev)).unwrap().is_data());
    }

    #[test]
    fn a_short_call_decodes_as_a_call_without_arguments() {
        let ev = ApiCallShortEvent {
            header: header(EventKind::ApiCallShort),
            cookie: 9,
            start: 900,
            ret: 7,
            correlation: 5,
        };
        let bytes = bytes_of(&ev);
        let Event::ApiCall(got) = decode(&bytes).unwrap() else {
            panic!("not an API call");
        };
        assert_eq!(
            (got.cookie, got.start, got.ret, got.correlation),
            (9, 900, 7, 5)
        );
        assert_eq!((got.args, got.out0), ([0; asys_common::MAX_ARGS], 0));
        assert_eq!(got.header.ts, 1_000);
        // Cut short, it is an error, not a read past the record.
        assert!(matches!(
            decode(&bytes[..bytes.len() - 1]),
            Err(DecodeError::Truncated {
                kind: EventKind::ApiCallShort,
                ..
            })
        ));
    }

    #[test]
    fn short_unknown_and_truncated_records_are_errors_not_panics() {
        assert_eq!(decode(&[0; 8]).unwrap_err(), DecodeError::Short(8));
        let mut unknown = bytes_of(&header(EventKind::ApiCall));
        let kind_at = std::mem::offset_of!(EventHeader, kind);
        unknown[kind_at..kind_at + size_of::<u32>()].copy_from_slice(&77u32.to_ne_bytes());
        assert_eq!(decode(&unknown).unwrap_err(), DecodeError::UnknownKind(77));
        let h = bytes_of(&header(EventKind::ApiCall));
        assert!(matches!(
            decode(&h).unwrap_err(),
            DecodeError::Truncated {
                kind: EventKind::ApiCall,
                ..
            }
        ));
        let h = bytes_of(&header(EventKind::CpuSampleStack));
        assert!(matches!(decode(&h), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn a_python_stack_decodes_whole_and_a_short_one_is_refused() {
        let mut ev = asys_common::PythonStackEvent {
            header: header(EventKind::PythonStack),
            owner_ts: 990,
            depth: 2,
            cut: asys_common::PYTHON_CUT_UNREADABLE,
            frames: [asys_common::PythonFrame::default(); asys_common::PYTHON_FRAMES],
        };
        ev.frames[1] = asys_common::PythonFrame {
            code: 0x7f00_0000_1000,
            prev_instr: 0x7f00_0000_10c0,
            ident: 0x7f00_0000_2000,
            first_line: 7,
            is_entry: 1,
        };
        let bytes = bytes_of(&ev);
        let Event::PythonStack(got) = decode(&bytes).unwrap() else {
            panic!("not a Python stack");
        };
        assert_eq!((got.owner_ts, got.depth, got.cut), (990, 2, 2));
        assert_eq!(
            (
                got.frames[1].code,
                got.frames[1].prev_instr,
                got.frames[1].is_entry
            ),
            (0x7f00_0000_1000, 0x7f00_0000_10c0, 1)
        );
        assert!(matches!(
            decode(&bytes[..bytes.len() - 1]),
            Err(DecodeError::Truncated { .. })
        ));
        // The same frames taken at a switch-out are told apart by kind.
        ev.header = header(EventKind::PythonSwitchStack);
        let bytes = bytes_of(&ev);
        let Event::PythonSwitchStack(got) = decode(&bytes).unwrap() else {
            panic!("not a switch's Python stack");
        };
        assert_eq!((got.owner_ts, got.depth), (990, 2));
    }

    #[test]
    fn process_kinds_are_told_apart() {
        for (kind, want) in [
            (EventKind::ProcessFork, ProcessKind::Fork),
            (EventKind::ProcessExec, ProcessKind::Exec),
            (EventKind::ProcessExit, ProcessKind::Exit),
        ] {
            let ev = ProcessEvent {
                header: header(kind),
                child_pid: 5,
                _pad: 0,
                comm: *b"worker\0\0\0\0\0\0\0\0\0\0",
            };
            let Event::Process(k, got) = decode(&bytes_of(&ev)).unwrap() else {
                panic!("not a process event");
            };
            assert_eq!((k, got.child_pid), (want, 5));
            assert!(!decode(&bytes_of(&ev)).unwrap().is_data());
        }
    }

    #[test]
    fn stacks_are_borrowed_and_cut_to_their_length() {
        let mut ev = ApiStackEvent {
            header: header(EventKind::ApiStack),
            call_start: 555,
            ip: 0x10,
            sp: 0x20,
            bp: 0x30,
            len: 16,
            stack: [0; STACK_BYTES],
        };
        ev.stack[..16].copy_from_slice(&[9; 16]);
        let bytes = bytes_of(&ev);
        let Event::ApiStack(view) = decode(&bytes).unwrap() else {
            panic!("not a stack");
        };
        assert_eq!(
            (view.key, view.ip, view.sp, view.bp),
            (555, 0x10, 0x20, 0x30)
        );
        assert_eq!(view.stack, &[9; 16]);
        // A length the kernel got wrong never reads past the record.
        ev.len = u64::MAX;
        let bytes = bytes_of(&ev);
        let Event::ApiStack(view) = decode(&bytes).unwrap() else {
            panic!("not a stack");
        };
        assert_eq!(view.stack.len(), STACK_BYTES);
    }

    #[test]
    fn samples_with_and_without_stacks() {
        let sample = CpuSampleEvent {
            header: header(EventKind::CpuSample),
            kernel: 1,
            _pad: 0,
            ip: 0x401000,
            sp: 0x7ff0,
            bp: 0,
        };
        let bytes = bytes_of(&sample);
        let Event::CpuSample(s, view) = decode(&bytes).unwrap() else {
            panic!("not a sample");
        };
        assert_eq!(
            (s.kernel, view.ip, view.key, view.stack.len()),
            (1, 0x401000, 1_000, 0)
        );
        let mut with = CpuSampleStackEvent {
            sample,
            len: 8,
            stack: [0; STACK_BYTES],
        };
        with.sample.header.kind = EventKind::CpuSampleStack as u32;
        with.stack[..8].copy_from_slice(&0x1234u64.to_ne_bytes());
        let bytes = bytes_of(&with);
        let Event::CpuSample(_, view) = decode(&bytes).unwrap() else {
            panic!("not a sample");
        };
        assert_eq!(view.stack, &0x1234u64.to_ne_bytes());
    }
}
