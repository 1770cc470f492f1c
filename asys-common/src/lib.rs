//! Event types shared by the eBPF programs and the `asys` binary.
//!
//! Every record that crosses the ring buffer starts with an [`EventHeader`] whose
//! `kind` is one of [`EventKind`]. Kinds reserve id ranges per category (as kunai
//! does) so later sources slot in without renumbering: 1..99 accelerator API
//! calls, 100..199 process lifecycle, 200..299 loader notifications.
#![no_std]

/// Largest number of integer arguments captured per API call: the six argument
/// registers of the x86-64 SysV ABI plus the first two stack slots.
pub const MAX_ARGS: usize = 8;

/// The key of the `STOPPED` map that asys's watchdog sets once asys has
/// died, telling the loader hook to stop nothing more (no process has tgid
/// 0, so the key never stands for a stopped process).
pub const STOPPED_DISARMED: u32 = 0;

/// A `STOPPED` value: the loader hook stopped the process and announced the
/// load with an event in the ring; userspace continues it when it reads it.
pub const STOPPED_ANNOUNCED: u32 = 1;
/// A `STOPPED` value: the loader hook stopped the process but the ring was
/// full, so no event tells of it. Userspace looks for these in `STOPPED`
/// itself (each collection tick), probes the process and continues it: a
/// burst of other events must not cost a launched process its library's
/// probes.
pub const STOPPED_UNANNOUNCED: u32 = 2;

/// Depth of nested API calls tracked per thread before entries are dropped.
/// A power of two: the slot index is masked with `MAX_CALL_DEPTH - 1`.
/// Deeper calls are counted (the thread's depth stays in step) but not
/// stored, and each one that would have been recorded counts a
/// [`DropSource::ApiDepth`].
pub const MAX_CALL_DEPTH: u32 = 4;

/// Most executable ranges of vendor libraries kept per process for the
/// caller filter ([`CallerRanges`]).
pub const MAX_CALLER_RANGES: usize = 64;

/// The 64-bit BPF cookie each API probe carries (and a site-recorded call's
/// event carries in its place): which probe fired and what the kernel must do
/// for it. Both sides build and read it only through these methods, so its
/// layout is written down once, here:
///
/// | bits   | meaning |
/// | ------ | ------- |
/// | 0..32  | probe id (index of the tracer's probe), or the injection library's name id |
/// | 32     | [`Cookie::ARGS`]: the call's event carries its register arguments |
/// | 33     | [`Cookie::STACK_ARGS`]: arguments 7 and 8 (on the stack) are read too |
/// | 34     | [`Cookie::CORRELATED`]: the correlation id is in the thread's slot |
/// | 40..48 | capture-range and hgtx flags |
/// | 48..56 | the API family (trace item), for per-family settings |
/// | 56..60 | 1 + the index of an argument whose text is captured (0: none) |
/// | 60..64 | text flags, [`Cookie::SITE`], [`Cookie::READ_OUT0`] |
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cookie(pub u64);

impl Cookie {
    /// The event carries the call's six register arguments; without it the
    /// call is reported as an [`ApiCallShortEvent`] (its signature reads none).
    pub const ARGS: u64 = 1 << 32;
    /// Arguments 7 and 8 live on the stack and cost a user-memory read: only
    /// functions whose signature reads them ask for it.
    pub const STACK_ARGS: u64 = 1 << 33;
    /// The runtime reports this function to the injection library's API
    /// callback, which leaves the call's correlation id in the thread's
    /// slot ([`ThreadCalls::correlation_slot`]) for the exit probe.
    pub const CORRELATED: u64 = 1 << 34;
    /// The probed function starts / stops the capture range (`-c
    /// hggcProfilerApi`: hggcProfilerStart/Stop, cudaProfilerStart/Stop).
    pub const CAPTURE_START: u64 = COOKIE_CAPTURE_START;
    pub const CAPTURE_STOP: u64 = COOKIE_CAPTURE_STOP;
    /// Argument 0 is an out-pointer whose pointee (8 bytes) is read when the
    /// call returns (e.g. `hggcMalloc`).
    pub const READ_OUT0: u64 = 1 << 63;
    /// A call recorded through the injection library's API callback site
    /// instead of uprobes on the runtime; the id is then the injection
    /// library's name id for the API (see [`ApiNameEvent`]).
    pub const SITE: u64 = 1 << 62;
    /// The text argument points to an NVTX-style event attributes struct.
    pub const TEXT_ATTRIBUTES: u64 = 1 << 60;
    /// The text is `wchar_t` (UTF-32): captured as raw bytes, decoded in userspace.
    pub const TEXT_WIDE: u64 = 1 << 61;

    const FAMILY_SHIFT: u32 = 48;
    const TEXT_SHIFT: u32 = 56;

    /// The cookie of probe `id` of API family `family`.
    pub const fn new(id: u32, family: u32) -> Self {
        Self(id as u64 | ((family as u64 & 0xff) << Self::FAMILY_SHIFT))
    }

    /// The cookie of a call the injection library reports for name `id`.
    pub const fn site(id: u32) -> Self {
        Self(id as u64 | Self::SITE)
    }

    /// This cookie with `flags` (the `Cookie::*` and `COOKIE_HGTX_*` bits) set.
    pub const fn with(self, flags: u64) -> Self {
        Self(self.0 | flags)
    }

    /// This cookie asking for the text of argument `index` (< 15).
    pub const fn with_text(self, index: usize, attributes: bool, wide: bool) -> Self {
        let mut v = self.0 | (((index as u64 + 1) & 0xf) << Self::TEXT_SHIFT);
        if attributes {
            v |= Self::TEXT_ATTRIBUTES;
        }
        if wide {
            v |= Self::TEXT_WIDE;
        }
        Self(v)
    }

    pub const fn id(self) -> u32 {
        self.0 as u32
    }

    pub const fn family(self) -> u32 {
        ((self.0 >> Self::FAMILY_SHIFT) & 0xff) as u32
    }

    /// Whether any of `flags` is set.
    pub const fn has(self, flags: u64) -> bool {
        self.0 & flags != 0
    }

    /// 1 + the index of the argument whose text is captured; 0 for none.
    pub const fn text_arg(self) -> usize {
        ((self.0 >> Self::TEXT_SHIFT) & 0xf) as usize
    }
}

/// Mask of the id inside a raw cookie ([`Cookie::id`] reads it).
pub const COOKIE_ID_MASK: u64 = 0xffff_ffff;
/// [`Cookie::SITE`] for code that holds the raw value.
pub const COOKIE_SITE: u64 = Cookie::SITE;

/// Flags of [`Cookie`] for capture ranges and hgtx (kept as plain bits:
/// userspace's API tables combine them).
pub const COOKIE_CAPTURE_START: u64 = 1 << 40;
pub const COOKIE_CAPTURE_STOP: u64 = 1 << 41;
/// hgtx functions that matter to `-c hgtx`: a push / a start whose message
/// may open the range, a pop / an end that may close it, a domain create
/// whose name may be the template's domain; `IN_DOMAIN`: a `hgtxDomain*`
/// function (the domain handle is argument 0).
pub const COOKIE_HGTX_PUSH: u64 = 1 << 42;
pub const COOKIE_HGTX_START: u64 = 1 << 43;
pub const COOKIE_HGTX_POP: u64 = 1 << 44;
pub const COOKIE_HGTX_END: u64 = 1 << 45;
pub const COOKIE_HGTX_DOMAIN_CREATE: u64 = 1 << 46;
pub const COOKIE_HGTX_IN_DOMAIN: u64 = 1 << 47;
pub const COOKIE_HGTX_ANY: u64 = COOKIE_HGTX_PUSH
    | COOKIE_HGTX_START
    | COOKIE_HGTX_POP
    | COOKIE_HGTX_END
    | COOKIE_HGTX_DOMAIN_CREATE;
/// Offsets in an NVTX v2 / HGTX event attributes struct.
pub const ATTRIBUTES_MESSAGE_TYPE: usize = 32;
pub const ATTRIBUTES_MESSAGE: usize = 40;
/// NVTX message types: the message is an ASCII string / a registered handle.
pub const MESSAGE_TYPE_ASCII: i32 = 1;
pub const MESSAGE_TYPE_UNICODE: i32 = 2;
pub const MESSAGE_TYPE_REGISTERED: i32 = 3;
/// Longest text captured from an API argument.
pub const TEXT_LEN: usize = 64;
/// Number of API families the kernel keeps settings for.
pub const MAX_FAMILIES: u32 = 16;

#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    ApiCall = 1,
    /// An API call with a text argument (range names, marks, domains).
    ApiCallText = 2,
    /// The user stack of the caller of the API call just reported on the
    /// same thread (`--hggc-backtrace`).
    ApiStack = 3,
    /// An API call whose signature reads no argument: [`ApiCallShortEvent`].
    ApiCallShort = 4,
    /// A futex wait made by a lock library (osrt): [`LockWaitEvent`].
    LockWait = 5,
    ProcessFork = 100,
    ProcessExec = 101,
    ProcessExit = 102,
    LibraryLoad = 200,
    /// The injection library named an API id (site-recorded calls).
    ApiName = 201,
    /// Device activity (kernel, copy, memset) from the injection library.
    DeviceActivity = 300,
    /// The capture range opened or closed.
    Capture = 400,
    /// A CPU switched from one thread to another (`--cpuctxsw`).
    SchedSwitch = 500,
    /// A thread woke another (`sched_waking`, with `--cpuctxsw`).
    SchedWaking = 501,
    /// A CPU sample (`-s`) without its stack (`-b none`).
    CpuSample = 600,
    /// A CPU sample with a copy of the user stack.
    CpuSampleStack = 601,
    /// The kernel stack of the sample or switch just reported on the same
    /// thread: [`KernelStackEvent`].
    KernelStack = 602,
    /// The Python frames of the CPU sample just reported on the same thread
    /// (`--python-sampling`): [`PythonStackEvent`].
    PythonStack = 603,
    /// A hit of a user-defined probe (`--probe`) with string arguments:
    /// [`ProbeHitEvent`].
    ProbeHit = 700,
    /// A hit of a user-defined probe without string arguments:
    /// [`ProbeHitShortEvent`] (a fifth of the size: no string slots).
    ProbeHitShort = 701,
}

impl EventKind {
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::ApiCall,
            2 => Self::ApiCallText,
            3 => Self::ApiStack,
            4 => Self::ApiCallShort,
            5 => Self::LockWait,
            100 => Self::ProcessFork,
            101 => Self::ProcessExec,
            102 => Self::ProcessExit,
            200 => Self::LibraryLoad,
            201 => Self::ApiName,
            300 => Self::DeviceActivity,
            400 => Self::Capture,
            500 => Self::SchedSwitch,
            501 => Self::SchedWaking,
            600 => Self::CpuSample,
            601 => Self::CpuSampleStack,
            602 => Self::KernelStack,
            603 => Self::PythonStack,
            700 => Self::ProbeHit,
            701 => Self::ProbeHitShort,
            _ => return None,
        })
    }
}

/// Where events can be lost; each has a slot in the `DROPS` per-CPU array.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropSource {
    /// The ring buffer was full when an API call completed.
    ApiRingFull = 0,
    /// An API call nested deeper than [`MAX_CALL_DEPTH`] on one thread.
    ApiDepth = 1,
    /// The per-thread call map was full.
    ApiEntryMapFull = 2,
    /// The ring buffer was full for a process event.
    ProcRingFull = 3,
    /// The ring buffer was full for a loader notification of a process the
    /// hook does not stop (system-wide, or past its first loads with osrt
    /// alone), or one it could not note in `STOPPED`. The process is noted
    /// in `LOADS_UNANNOUNCED` and userspace scans it at its next tick: a
    /// library no process had loaded before misses the calls made until
    /// then. A process the hook stops is noted in `STOPPED` as
    /// [`STOPPED_UNANNOUNCED`] instead, and nothing is lost.
    LoaderRingFull = 4,
    /// The ring buffer was full for a device activity record.
    ActivityRingFull = 5,
    /// The injection library lost activity records (the driver's buffer
    /// callback reported them dropped, or a record could not be read).
    ActivityLost = 6,
    /// The ring buffer was full for an API name (site-recorded calls).
    ApiNameRingFull = 7,
    /// The ring buffer was full for a call stack.
    StackRingFull = 8,
    /// The ring buffer was full for a capture range notification.
    CaptureRingFull = 9,
    /// Not a lost event: a call's text argument (a range or domain name)
    /// could not be read because its page was not in memory (a uprobe may
    /// not fault); the call is recorded without its text.
    TextUnreadable = 10,
    /// The ring buffer was full for a context switch.
    SchedRingFull = 11,
    /// Not a lost event: `-c hgtx` could not read a name to compare (its
    /// page was not in memory), so that call could not open the range.
    CaptureTextUnreadable = 12,
    /// The ring buffer was full for a CPU sample.
    SampleRingFull = 13,
    /// A CPU sample taken in the kernel whose user registers could not be
    /// read: the sample is lost.
    SampleRegsUnreadable = 14,
    /// A scheduler tracepoint's fields could not be read: a context switch
    /// is lost, or a fork goes untraced.
    SchedUnreadable = 15,
    /// A fork of a traced process could not be added to `TRACED` (the map
    /// was full): the child and its calls go untraced.
    TracedMapFull = 16,
    /// A process the loader hook stopped could not be noted in `STOPPED`;
    /// userspace continues it from its event, but not if asys is ending.
    StoppedMapFull = 17,
    /// The settings or state map could not be read (never expected: a
    /// one-entry array): the probe did nothing.
    ConfigUnreadable = 18,
    /// A process (or a thread that existed before the attach) could not be
    /// added to `TRACED` by userspace: it goes untraced (the kernel's own
    /// failed inserts, at forks, are [`DropSource::TracedMapFull`]).
    TracedInsertFailed = 19,
    /// A Python frame of a sampled CPython thread could not be read
    /// (`--python-sampling`; its page was not in memory): the sample's
    /// Python stack ends before it, or, for its thread state, has none.
    PythonFrameUnreadable = 20,
    /// The ring buffer was full for a hit of a user-defined probe.
    ProbeRingFull = 21,
    /// A user-defined call probe's entry could not be saved for its return
    /// (the entry map was full): that call is not reported.
    ProbeEntryMapFull = 22,
    /// Not a lost event: an argument of a user-defined probe could not be
    /// read (a page not in memory, a bad pointer); the hit is reported with
    /// that argument empty.
    ProbeArgUnreadable = 23,
}

pub const DROP_SOURCES: u32 = 24;

impl DropSource {
    pub const ALL: [DropSource; DROP_SOURCES as usize] = [
        Self::ApiRingFull,
        Self::ApiDepth,
        Self::ApiEntryMapFull,
        Self::ProcRingFull,
        Self::LoaderRingFull,
        Self::ActivityRingFull,
        Self::ActivityLost,
        Self::ApiNameRingFull,
        Self::StackRingFull,
        Self::CaptureRingFull,
        Self::TextUnreadable,
        Self::SchedRingFull,
        Self::CaptureTextUnreadable,
        Self::SampleRingFull,
        Self::SampleRegsUnreadable,
        Self::SchedUnreadable,
        Self::TracedMapFull,
        Self::StoppedMapFull,
        Self::ConfigUnreadable,
        Self::TracedInsertFailed,
        Self::PythonFrameUnreadable,
        Self::ProbeRingFull,
        Self::ProbeEntryMapFull,
        Self::ProbeArgUnreadable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::ApiRingFull => "api_ring_full",
            Self::ApiDepth => "api_call_depth",
            Self::ApiEntryMapFull => "api_entry_map_full",
            Self::ProcRingFull => "process_ring_full",
            Self::LoaderRingFull => "loader_ring_full",
            Self::ActivityRingFull => "activity_ring_full",
            Self::ActivityLost => "activity_lost",
            Self::ApiNameRingFull => "api_name_ring_full",
            Self::StackRingFull => "stack_ring_full",
            Self::CaptureRingFull => "capture_ring_full",
            Self::TextUnreadable => TEXT_UNREADABLE,
            Self::SchedRingFull => "sched_ring_full",
            Self::CaptureTextUnreadable => CAPTURE_TEXT_UNREADABLE,
            Self::SampleRingFull => "sample_ring_full",
            Self::SampleRegsUnreadable => "sample_regs_unreadable",
            Self::SchedUnreadable => "sched_unreadable",
            Self::TracedMapFull => "traced_map_full",
            Self::StoppedMapFull => "stopped_map_full",
            Self::ConfigUnreadable => "config_unreadable",
            Self::TracedInsertFailed => "traced_insert_failed",
            Self::PythonFrameUnreadable => "python_frame_unreadable",
            Self::ProbeRingFull => "probe_ring_full",
            Self::ProbeEntryMapFull => "probe_entry_map_full",
            Self::ProbeArgUnreadable => PROBE_ARG_UNREADABLE,
        }
    }
}

/// The name of [`DropSource::TextUnreadable`].
pub const TEXT_UNREADABLE: &str = "api_text_unreadable";
/// The name of [`DropSource::ProbeArgUnreadable`].
pub const PROBE_ARG_UNREADABLE: &str = "probe_arg_unreadable";
/// The name of [`DropSource::CaptureTextUnreadable`].
pub const CAPTURE_TEXT_UNREADABLE: &str = "capture_text_unreadable";

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventHeader {
    pub kind: u32,
    pub cpu: u32,
    /// CLOCK_MONOTONIC, ns.
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
}

/// What the entry probe saves for its exit probe.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiEntry {
    pub cookie: u64,
    pub start: u64,
    pub args: [u64; MAX_ARGS],
    /// Correlation id the runtime gave the call, set from the injection
    /// library's API callback site; 0 when unknown.
    pub correlation: u64,
    /// A registered-string handle given instead of text, else 0.
    pub text_handle: u64,
    /// 1 when `text` holds raw UTF-32 (wchar_t) rather than a C string.
    pub text_wide: u64,
    /// 1 when the text could not be read at entry (its page not in memory
    /// yet); the return probe tries again, once the callee has touched it.
    pub text_unread: u64,
    /// Text captured at entry when the cookie asks for it (NUL-terminated).
    pub text: [u8; TEXT_LEN],
    /// The stack pointer at the entry (pointing at the return address): the
    /// return of this call is the one whose stack pointer is `sp + 8`.
    pub sp: u64,
    /// The return address the entry found at `sp`: a call entering later at
    /// the same stack pointer finds another one there when it was jumped to
    /// (a tail call: the first call's return probe replaced it), and the
    /// same one when it is a new call from the same site (the first one's
    /// return was missed).
    pub ret_addr: u64,
    /// 1: the call is reported at its return; 0: a placeholder, kept only so
    /// that the thread's stack stays in step (not recording at the entry,
    /// or a vendor library's call of its own item).
    pub recorded: u64,
}

/// The API calls in flight on one thread: a small stack of entries.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThreadCalls {
    /// Calls in flight, recorded or not; may exceed [`MAX_CALL_DEPTH`]
    /// (only the outermost `MAX_CALL_DEPTH` are stored in `entries`).
    pub depth: u32,
    /// What the return of the call in flight is wanted for (`-c hgtx`):
    /// [`PENDING_RANGE_ID`], [`PENDING_DOMAIN`], [`PENDING_RETRY_OPEN`],
    /// [`PENDING_RETRY_DOMAIN`], or 0.
    pub pending: u32,
    /// With a retry: the call's cookie and its first three arguments (the
    /// name could not be read at entry; it is read again at the return).
    pub pending_cookie: u64,
    pub pending_args: [u64; 3],
    /// With [`PENDING_RETRY_OPEN`]: the push level the range would have.
    pub pending_level: u64,
    /// The stack pointer at the entry of the hgtx call that set `pending`:
    /// only its own return takes the value (not that of a call it makes).
    pub pending_sp: u64,
    /// Open hgtx push/pop ranges: of the default domain, of other domains.
    pub hgtx_depth: [u32; 2],
    /// Where the injection library keeps this thread's latest correlation id
    /// (a u32 in its thread-local storage), learnt from its `asys_site_api`
    /// announcements; 0 when unknown. The exit probe reads it, so that the
    /// library needs a probe hit only now and then, not on every call.
    pub correlation_slot: u64,
    pub entries: [ApiEntry; MAX_CALL_DEPTH as usize],
}

/// One completed API call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ApiCallEvent {
    pub header: EventHeader,
    /// The probe's cookie: probe id in the low 32 bits, flags above.
    pub cookie: u64,
    /// Entry time; `header.ts` is the exit time.
    pub start: u64,
    /// Raw return register (rax).
    pub ret: u64,
    pub args: [u64; MAX_ARGS],
    /// `*args[0]` read at exit when the cookie asks for it, else 0.
    pub out0: u64,
    /// See [`ApiEntry::correlation`].
    pub correlation: u64,
}

/// A completed API call whose signature reads no argument: 56 bytes on the
/// ring instead of 128, for the calls that are most of a busy application's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ApiCallShortEvent {
    pub header: EventHeader,
    pub cookie: u64,
    pub start: u64,
    pub ret: u64,
    pub correlation: u64,
}

impl ApiCallShortEvent {
    /// The same call as an [`ApiCallEvent`] (no arguments, no out-pointer).
    pub fn widen(&self) -> ApiCallEvent {
        ApiCallEvent {
            header: EventHeader {
                kind: EventKind::ApiCall as u32,
                ..self.header
            },
            cookie: self.cookie,
            start: self.start,
            ret: self.ret,
            args: [0; MAX_ARGS],
            out0: 0,
            correlation: self.correlation,
        }
    }
}

/// An API call with the text of one argument.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiTextEvent {
    pub call: ApiCallEvent,
    pub text_handle: u64,
    /// See [`ApiEntry::text_wide`].
    pub text_wide: u64,
    pub text: [u8; TEXT_LEN],
}

/// Bytes of user stack copied for a call stack (unwound in userspace with the
/// binaries' DWARF CFI, so frame pointers are not needed).
pub const STACK_BYTES: usize = 8192;

/// The caller's registers and stack at the return of a slow API call.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ApiStackEvent {
    pub header: EventHeader,
    /// Start of the call this stack belongs to (with `header.tid`, a key).
    pub call_start: u64,
    /// Registers right after the call returned: the return address, and the
    /// caller's stack and frame pointers.
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// Valid bytes of `stack`, copied from `sp` upwards.
    pub len: u64,
    pub stack: [u8; STACK_BYTES],
}
pub const ACTIVITY_KERNEL: u32 = 1;
pub const ACTIVITY_MEMCPY: u32 = 2;
pub const ACTIVITY_MEMSET: u32 = 3;
/// A synchronization (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION): a host wait on an
/// event, a stream or a context; `sync_type` says which, `event` names the
/// event waited on. Only CUPTI gives these.
pub const ACTIVITY_SYNC: u32 = 4;
/// A whole CUDA graph's execution (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, under
/// `--cuda-graph-trace graph`): `graph_id` is the graph's.
pub const ACTIVITY_GRAPH: u32 = 5;
/// Set in `kind` on records from CUPTI (CUDA): no hggc call waits for them.
pub const ACTIVITY_FROM_CUPTI: u32 = 1 << 8;
/// The kernel/memcpy/memset part of `kind`.
pub const ACTIVITY_KIND_MASK: u32 = 0xff;

/// One device activity record as the injection library hands it to its probe
/// site `asys_site_activity`: times already on the host's CLOCK_MONOTONIC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityRecord {
    pub kind: u32,
    pub correlation: u32,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub stream: u32,
    pub bytes: u64,
    pub copy_kind: u32,
    pub shared_mem: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Kernel function address in the process (HGPTI), or the kernel's name
    /// id, with [`KERNEL_NAME_BIT`] (CUPTI).
    pub func: u64,
    /// Device clock minus CLOCK_MONOTONIC used for the conversion (ns).
    pub clock_offset: i64,
    /// Memory kinds of a copy's source and destination, a memset's
    /// destination (CUPTI_ACTIVITY_MEMORY_KIND_*: 1 pageable, 2 pinned,
    /// 3 device; 0 unknown).
    pub src_kind: u32,
    pub dst_kind: u32,
    /// The rest of CUPTI's kernel record (`CUpti_ActivityKernel9`), valid on
    /// a kernel with [`ACTIVITY_FROM_CUPTI`]; HGPTI gives none of them (0).
    pub registers_per_thread: u32,
    /// Static and dynamic shared memory per block (bytes); `shared_mem`
    /// keeps their sum, as HGPTI's single figure.
    pub static_shared: u32,
    pub dynamic_shared: u32,
    /// Local memory per thread and for the whole kernel (bytes).
    pub local_per_thread: u32,
    pub local_total: u32,
    /// CUDA context id (kernels, copies, memsets, syncs, graphs).
    pub context: u32,
    /// The graph a kernel ran in (0: launched on its own), or the graph of
    /// an [`ACTIVITY_GRAPH`] record.
    pub graph_id: u32,
    /// A sync's CUDA event id (CUPTI's `cudaEventId`).
    pub event: u32,
    /// The graph node a kernel was (0: launched on its own).
    pub graph_node_id: u64,
    /// The green context (0: none; CUPTI 12's kernel record has no field for
    /// it, so CUDA 12 leaves it 0).
    pub green_context: u32,
    /// A sync's CUpti_ActivitySynchronizationType (1 event synchronize,
    /// 2 stream wait event, 3 stream synchronize, 4 context synchronize).
    pub sync_type: u32,
}

/// A device activity record on its way to userspace.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityEvent {
    pub header: EventHeader,
    pub record: ActivityRecord,
}

/// A context switch; the header's pid/tid are the thread switched out (the
/// idle task is 0), on the header's CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SchedEvent {
    pub header: EventHeader,
    /// The state the thread left in: 0 runnable (preempted), else the
    /// kernel's TASK_* bits (1 S: sleeping, 2 D: uninterruptible, ...).
    pub prev_state: i64,
    /// The thread switched in (its process id is not known here).
    pub next_tid: u32,
    pub _pad: u32,
    pub prev_comm: [u8; 16],
    pub next_comm: [u8; 16],
}

/// A wake-up (`sched_waking`): the header is the waker (the thread running
/// when the wake-up was issued) on its CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WakingEvent {
    pub header: EventHeader,
    /// The thread woken.
    pub wakee_tid: u32,
    /// The CPU it was queued on.
    pub target_cpu: u32,
    pub waker_comm: [u8; 16],
}

/// Return addresses of a kernel stack kept per sample or switch.
pub const KERNEL_STACK_DEPTH: usize = 32;
/// [`KernelStackEvent::source`]: the stack of a CPU sample in the kernel.
pub const KSTACK_SAMPLE: u32 = 0;
/// [`KernelStackEvent::source`]: the stack of a thread switched out.
pub const KSTACK_SWITCH: u32 = 1;
/// [`KernelStackEvent::source`]: the waker's stack at a wake-up.
pub const KSTACK_WAKING: u32 = 2;

/// The kernel stack (`bpf_get_stack`) of a sample, a switch-out or a
/// waker at its wake-up, which
/// `owner_ts` and the header's tid identify.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelStackEvent {
    pub header: EventHeader,
    /// The `ts` of the sample's or switch's own event.
    pub owner_ts: u64,
    pub source: u32,
    /// Valid entries of `ips`, innermost first.
    pub depth: u32,
    pub ips: [u64; KERNEL_STACK_DEPTH],
}

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

/// A CPU sample and a copy of the user stack from `sample.sp` upwards.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CpuSampleStackEvent {
    pub sample: CpuSampleEvent,
    /// Valid bytes of `stack`.
    pub len: u64,
    pub stack: [u8; STACK_BYTES],
}

/// Most Python frames read per sample (`--python-sampling`).
pub const PYTHON_FRAMES: usize = 32;
/// Most thread states of an interpreter looked through for the sampled
/// thread's.
pub const PYTHON_THREADS: u32 = 64;

/// One Python frame (`_PyInterpreterFrame`; 3.10: `PyFrameObject`) of a
/// sampled thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PythonFrame {
    /// `f_code`: the code object's address in the process.
    pub code: u64,
    /// `prev_instr`: the instruction it runs (or last ran), in the code
    /// object's `co_code_adaptive` (3.10: `f_lasti`, code units, as a u32).
    pub prev_instr: u64,
    /// The code object's `co_qualname` (3.10: `co_name`) pointer and
    /// `co_firstlineno`: with
    /// the address they tell a code object from one allocated later where
    /// a freed one was.
    pub qualname: u64,
    pub first_line: u32,
    /// 1: the first frame one C-level call of the evaluator ran.
    pub is_entry: u32,
}

/// The Python frames, innermost first, of the CPU sample of the same thread
/// stamped `owner_ts`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PythonStackEvent {
    pub header: EventHeader,
    pub owner_ts: u64,
    /// Valid entries of `frames`.
    pub depth: u32,
    /// 1: more frames followed (not read); 2: a frame could not be read.
    pub cut: u32,
    pub frames: [PythonFrame; PYTHON_FRAMES],
}

/// [`PythonStackEvent::cut`].
pub const PYTHON_CUT_DEPTH: u32 = 1;
pub const PYTHON_CUT_UNREADABLE: u32 = 2;

/// What the sample program needs to read a CPython process's frames:
/// `_PyRuntime`'s address and the offsets of the fields it follows (bytes),
/// one entry per process in `PYTHON_PROCESSES`, written by userspace.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonProcess {
    pub runtime: u64,
    pub runtime_interpreters_head: u32,
    pub interp_threads_head: u32,
    pub tstate_next: u32,
    pub tstate_native_id: u32,
    pub tstate_cframe: u32,
    pub cframe_current_frame: u32,
    pub frame_code: u32,
    pub frame_previous: u32,
    pub frame_prev_instr: u32,
    pub frame_is_entry: u32,
    /// `co_qualname` and `co_firstlineno` of a code object.
    pub code_qualname: u32,
    pub code_first_line: u32,
    /// Least time between two Python stacks of one thread
    /// (`--python-sampling-frequency`); 0: every sample.
    pub min_interval_ns: u64,
    /// `PyCode_Type`'s address, with [`PYTHON_CHECK_CODE`]: a frame whose
    /// executable is of another type is skipped.
    pub code_type: u64,
    /// `_PyInterpreterFrame.owner` (one byte), with [`PYTHON_ENTRY_BY_SHIM`].
    pub frame_owner: u32,
    /// `PYTHON_*` flags: how this version links thread and frames.
    pub flags: u32,
    /// With [`PYTHON_TID_VIA_PTHREAD`]: where glibc's `struct pthread`
    /// keeps the thread's id (`tid`, a u32).
    pub pthread_tid: u32,
    pub reserved: u32,
}

/// [`PythonProcess::flags`]: the thread's innermost frame is
/// `tstate->cframe->current_frame` (3.11, 3.12); without it
/// `tstate->current_frame` (3.13; 3.10's `tstate->frame`), at
/// `tstate_cframe`.
pub const PYTHON_VIA_CFRAME: u32 = 1;
/// Each C-level evaluator call pushes a shim frame (owner
/// [`PYTHON_OWNED_BY_CSTACK`], 3.12+): it is skipped, and the frame before
/// it is the entry frame. Without it the entry frame has the `is_entry`
/// byte (3.11).
pub const PYTHON_ENTRY_BY_SHIM: u32 = 2;
/// The frame's executable is checked to be a code object (3.13's
/// `f_executable`).
pub const PYTHON_CHECK_CODE: u32 = 4;
/// 3.10: the thread state has no native id; the u64 at `tstate_native_id`
/// is its `thread_id` (`pthread_self()`, the address of glibc's `struct
/// pthread`), and the thread's id is the u32 at `pthread_tid` in it.
pub const PYTHON_TID_VIA_PTHREAD: u32 = 8;
/// 3.10: frames are `PyFrameObject`s, each run by its own C-level
/// evaluator call (so each is an entry frame), and the instruction at
/// `frame_prev_instr` is `f_lasti`, an int of code units (-1: not started).
pub const PYTHON_FRAME_OBJECTS: u32 = 16;
/// `FRAME_OWNED_BY_CSTACK` (3.12, 3.13's `pycore_frame.h`).
pub const PYTHON_OWNED_BY_CSTACK: u8 = 3;

/// Fork, exec and exit of a traced process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEvent {
    pub header: EventHeader,
    /// Fork: the new task's id. Exec/exit: the process id.
    pub child_pid: u32,
    pub _pad: u32,
    pub comm: [u8; 16],
}

/// The dynamic loader changed a traced process's link map (start-up or
/// dlopen/dlclose). The process has been sent SIGSTOP by the probe when
/// `stopped` is 1 and waits for userspace to attach new probes and SIGCONT it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LibraryLoadEvent {
    pub header: EventHeader,
    pub stopped: u32,
    pub _pad: u32,
}

/// What userspace tells the kernel, in the `SETTINGS` map's one entry. Only
/// userspace writes it (always whole: it keeps the current copy), so nothing
/// the kernel changes is ever overwritten by it; what the kernel writes too is
/// in [`KernelState`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// 1: every process on the machine counts as traced (`-s system-wide`).
    pub system_wide: u64,
    /// Context switches recorded: [`SCHED_NONE`], [`SCHED_PROCESS_TREE`] (of
    /// traced threads), [`SCHED_SYSTEM_WIDE`].
    pub sched: u64,
    /// CPU samples recorded (`-s`), in the same scopes as `sched`.
    pub sample: u64,
    /// 1: samples carry a copy of the user stack (`-b fp|dwarf`).
    pub sample_stack: u64,
    /// asys's own process id: never sampled (system-wide it would sample
    /// itself reading the samples).
    pub self_pid: u64,
    /// 1: the profiler API opens and closes the capture range.
    pub capture_api: u64,
    /// 1: hgtx ranges named like `CAPTURE_NAMES[0]` open and close the
    /// capture range (`-c hgtx -p TEMPLATE`).
    pub capture_hgtx: u64,
    /// 1: the end of the capture range does not stop recording
    /// (`--capture-range-end none`).
    pub capture_end_none: u64,
    /// 1: a closed capture range may open again (`--capture-range-end repeat`).
    pub capture_repeat: u64,
    /// Which domains match: [`DOMAIN_DEFAULT`], [`DOMAIN_ANY`], [`DOMAIN_NAMED`].
    pub capture_domain_mode: u64,
    /// Wake the event reader once this many bytes wait in the ring (it also
    /// polls on a timer): a quarter of the ring, so most calls skip the
    /// cost of a wake-up and a burst still cannot fill the ring unseen.
    pub wake_bytes: u64,
    /// Per API family: calls shorter than this many ns are not reported (the
    /// `--osrt-threshold` of the OS runtime family; 0 for the others).
    pub min_duration: [u64; MAX_FAMILIES as usize],
    /// Per API family: calls at least this long (ns) get the caller's stack
    /// (`--hggc-backtrace all:<ns>`); 0 turns stacks off.
    pub stack_threshold: [u64; MAX_FAMILIES as usize],
    /// System-wide, only processes in this cgroup v2 (or below it) count as
    /// traced (`--cgroup`, `--container`): the directory's inode, what
    /// `bpf_get_current_ancestor_cgroup_id(cgroup_level)` gives for them;
    /// 0: every process.
    pub cgroup_id: u64,
    /// The cgroup's depth below the hierarchy's root (the root is 0).
    pub cgroup_level: u64,
    /// The families (bit `1 << family`) whose calls are recorded only when
    /// they come from outside the item's own libraries ([`CallerRanges`]);
    /// 0 with `--trace-vendor-internal true`, which records them all.
    pub caller_filter: u64,
}

/// What the kernel writes too, in the `STATE` map's one entry: userspace
/// writes single fields of it in place (the map is memory-mapped), never the
/// whole entry, so neither side clobbers the other's writes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelState {
    /// 1 while calls and activity are recorded: set by userspace (collection
    /// starts, `--delay`, a session's stop) and by capture ranges.
    pub recording: u64,
    /// Set when a capture range closed (by the kernel) or recording stopped
    /// for good (by userspace): later starts are ignored (the first start
    /// and the first stop win).
    pub capture_done: u64,
    /// The handle `hgtxDomainCreateA(CAPTURE_NAMES[1])` returned (DOMAIN_NAMED).
    pub capture_domain_handle: u64,
    /// The open range: its thread, its push level, its kind
    /// ([`RANGE_PUSH_DEFAULT`], [`RANGE_PUSH_DOMAIN`], [`RANGE_START`]) and,
    /// for start/end ranges, its id.
    pub capture_owner: u64,
    pub capture_level: u64,
    pub capture_kind: u64,
    pub capture_range_id: u64,
}

impl KernelState {
    /// Byte offsets of the fields userspace writes in place.
    pub const RECORDING: usize = core::mem::offset_of!(KernelState, recording);
    pub const CAPTURE_DONE: usize = core::mem::offset_of!(KernelState, capture_done);
}

pub const SCHED_NONE: u64 = 0;
pub const SCHED_PROCESS_TREE: u64 = 1;
pub const SCHED_SYSTEM_WIDE: u64 = 2;

pub const DOMAIN_DEFAULT: u64 = 0;
pub const DOMAIN_ANY: u64 = 1;
pub const DOMAIN_NAMED: u64 = 2;
pub const RANGE_PUSH_DEFAULT: u64 = 0;
pub const RANGE_PUSH_DOMAIN: u64 = 1;
pub const RANGE_START: u64 = 2;
pub const PENDING_RANGE_ID: u32 = 1;
pub const PENDING_DOMAIN: u32 = 2;
pub const PENDING_RETRY_OPEN: u32 = 3;
pub const PENDING_RETRY_DOMAIN: u32 = 4;

/// Marks a kernel name's id in [`ApiNameEvent`] and in a CUDA kernel
/// record's `func`.
pub const KERNEL_NAME_BIT: u32 = 0x8000_0000;

/// Longest name carried by an [`ApiNameEvent`]: API names are short, but
/// CUDA kernel names (ids with the high bit set) are mangled C++ templates.
pub const API_NAME_LEN: usize = 1024;

/// `asys_site_name(id, name)`: the injection library numbers the API names it
/// sees; calls recorded through its sites carry the number. Ids with
/// [`KERNEL_NAME_BIT`] name CUDA kernels instead: a kernel's activity record
/// carries the id in `func`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiNameEvent {
    pub header: EventHeader,
    pub id: u32,
    pub _pad: u32,
    pub name: [u8; API_NAME_LEN],
}

/// The capture range opened (`started` 1) or closed (0) in a traced process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CaptureEvent {
    pub header: EventHeader,
    pub started: u64,
}

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
    /// `header.kind` is [`EventKind::LockWait`].
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

/// One executable range of a vendor library in a process, and the API
/// families (bit `1 << family`) for which a call from it is the vendor's own
/// (left out unless [`Settings::vendor_internal`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallerRange {
    pub start: u64,
    pub end: u64,
    pub families: u64,
}

/// A process's vendor library ranges, in the `CALLER_RANGES` map by tgid:
/// userspace writes them from the process's mappings; a fork copies its
/// parent's. Without an entry the kernel falls back to recording only the
/// outermost call of a family on each thread.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CallerRanges {
    pub count: u64,
    pub ranges: [CallerRange; MAX_CALLER_RANGES],
}

/// Per-process tracing state kept in the `TRACED` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TracedProcess {
    /// Whether the loader hook stops the process at a library load:
    /// [`STOP_EVERY_LOAD`] so that probes go in before any new library code
    /// runs; [`STOP_UNTIL_PLACED`] until userspace has seen where its lock
    /// libraries are (osrt alone, which adds no probes: userspace then sets
    /// 0); 0 never.
    pub stop_on_load: u32,
    /// What an exec sets `stop_on_load` to (the new image maps its
    /// libraries anew); 0: an exec leaves it.
    pub stop_after_exec: u32,
}

/// [`TracedProcess::stop_on_load`] values.
pub const STOP_EVERY_LOAD: u32 = 1;
pub const STOP_UNTIL_PLACED: u32 = 2;

/// Where the fields the process and scheduler programs read lie in their
/// tracepoints' records on the running kernel. Userspace reads the format
/// files in tracefs at load time and writes this into the programs'
/// read-only `TP_LAYOUT` global before they are verified (the layouts moved
/// between kernels: `child_pid` of `sched_process_fork` is at 44 on 6.1 and
/// at 20 on 6.18, where the comms became `__data_loc` strings).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracepointLayout {
    /// `sched_process_fork.child_pid` (pid_t).
    pub fork_child_pid: u32,
    /// `sched_process_exit.group_dead` (bool), or [`LAYOUT_ABSENT`] on
    /// kernels whose tracepoint lacks it: a process then ends with its main
    /// thread.
    pub exit_group_dead: u32,
    /// `sched_switch.prev_state` (long).
    pub switch_prev_state: u32,
    /// `sched_switch.next_comm`: `char[16]` inline, or a `__data_loc` word
    /// (offset in the low 16 bits, length in the high 16) when
    /// `switch_next_comm_data_loc` is 1.
    pub switch_next_comm: u32,
    pub switch_next_comm_data_loc: u32,
    /// `sched_switch.next_pid` (pid_t).
    pub switch_next_pid: u32,
    /// Where `exit_group_dead` is absent and the kernel has BTF: the byte
    /// offsets of `task_struct.signal` and `signal_struct.live` (the count
    /// of live threads, 0 once the last one is exiting, which is what
    /// `group_dead` says); [`LAYOUT_ABSENT`] otherwise.
    pub task_signal: u32,
    pub signal_live: u32,
    /// `sched_waking.pid` (pid_t): the thread woken.
    pub waking_pid: u32,
    /// `sched_waking.target_cpu` (int).
    pub waking_target_cpu: u32,
}

/// A field the running kernel's tracepoint does not have.
pub const LAYOUT_ABSENT: u32 = u32::MAX;

impl TracepointLayout {
    /// Linux 6.18's layout: what the programs hold until userspace writes
    /// the running kernel's.
    pub const LINUX_6_18: Self = Self {
        fork_child_pid: 20,
        exit_group_dead: 32,
        switch_prev_state: 32,
        switch_next_comm: 40,
        switch_next_comm_data_loc: 0,
        switch_next_pid: 56,
        task_signal: LAYOUT_ABSENT,
        signal_live: LAYOUT_ABSENT,
        waking_pid: 24,
        waking_target_cpu: 32,
    };
}

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
/// In memory at register `reg` plus `offset` (a USDT `-8@16(%rbp)`).
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

/// One argument of a user-defined probe: where it is and what it is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeArg {
    pub loc: u8,
    pub kind: u8,
    /// Bytes read at the location (1, 2, 4 or 8; a register is read whole).
    pub size: u8,
    /// 1: the value read is sign-extended from `size` bytes.
    pub signed: u8,
    /// Byte offset of the register in `struct pt_regs`.
    pub reg: u32,
    /// Memory offset from the register, the constant, or the record offset.
    pub offset: i64,
}

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

/// Pointers (`str`) are kernel addresses: a kprobe's or a tracepoint's.
pub const PROBE_KERNEL: u32 = 1;
/// An entry whose return probe (same id) reports one row with both times.
pub const PROBE_CALL: u32 = 2;
/// Some argument is a string: hits are [`ProbeHitEvent`]s (else
/// [`ProbeHitShortEvent`]s).
pub const PROBE_HAS_STR: u32 = 4;
/// Each hit is followed by the user stack above it (`--probe-backtrace`),
/// an [`ApiStackEvent`] keyed by the hit's `start`.
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

#[cfg(feature = "user")]
mod pod {
    use super::*;

    /// `aya::Pod` for types userspace reads out of maps and the ring buffer.
    macro_rules! pod {
        ($($t:ty),* $(,)?) => {$(
            // SAFETY: each type listed is `#[repr(C)]`, made only of integers
            // and arrays of integers (and of such types), with explicit `_pad`
            // fields where the alignment would leave a hole, so every bit
            // pattern is a valid value and none has uninitialised padding.
            unsafe impl aya::Pod for $t {}
        )*};
    }

    pod!(
        ProbeArg,
        UserProbe,
        ProbeCallKey,
        ProbeCallEntry,
        ProbeHitShortEvent,
        ProbeHitEvent,
        EventHeader,
        SchedEvent,
        ApiEntry,
        ThreadCalls,
        ApiCallEvent,
        ProcessEvent,
        LibraryLoadEvent,
        TracedProcess,
        ActivityEvent,
        ApiNameEvent,
        ApiTextEvent,
        ApiStackEvent,
        CpuSampleEvent,
        CpuSampleStackEvent,
        WakingEvent,
        KernelStackEvent,
        PythonStackEvent,
        PythonProcess,
        CaptureEvent,
        ApiCallShortEvent,
        Settings,
        KernelState,
        OsrtThread,
        LockWaitEvent,
        CallerRange,
        CallerRanges,
        TracepointLayout,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_fields_do_not_overlap() {
        let c = Cookie::new(0xdead_beef, 0xab)
            .with(Cookie::ARGS | Cookie::STACK_ARGS | Cookie::CORRELATED | Cookie::READ_OUT0)
            .with(COOKIE_HGTX_ANY | COOKIE_HGTX_IN_DOMAIN | Cookie::CAPTURE_START)
            .with_text(14, true, true);
        assert_eq!(c.id(), 0xdead_beef);
        assert_eq!(c.family(), 0xab);
        assert_eq!(c.text_arg(), 15);
        for flag in [
            Cookie::ARGS,
            Cookie::STACK_ARGS,
            Cookie::CORRELATED,
            Cookie::READ_OUT0,
            Cookie::TEXT_ATTRIBUTES,
            Cookie::TEXT_WIDE,
            Cookie::CAPTURE_START,
            COOKIE_HGTX_IN_DOMAIN,
        ] {
            assert!(c.has(flag));
        }
        assert!(!c.has(Cookie::SITE | Cookie::CAPTURE_STOP));
        let plain = Cookie::new(7, 3);
        assert_eq!((plain.id(), plain.family(), plain.text_arg()), (7, 3, 0));
        assert_eq!(Cookie::site(9).id(), 9);
        assert!(Cookie::site(9).has(Cookie::SITE));
    }

    #[test]
    fn a_short_call_widens_to_the_same_call_without_arguments() {
        let short = ApiCallShortEvent {
            header: EventHeader {
                kind: EventKind::ApiCallShort as u32,
                cpu: 1,
                ts: 20,
                pid: 3,
                tid: 4,
            },
            cookie: 5,
            start: 10,
            ret: 6,
            correlation: 7,
        };
        let wide = short.widen();
        assert_eq!(wide.header.kind, EventKind::ApiCall as u32);
        assert_eq!(
            (wide.header.ts, wide.header.pid, wide.header.tid),
            (20, 3, 4)
        );
        assert_eq!(
            (wide.cookie, wide.start, wide.ret, wide.correlation),
            (5, 10, 6, 7)
        );
        assert_eq!((wide.args, wide.out0), ([0; MAX_ARGS], 0));
        assert_eq!(size_of::<ApiCallShortEvent>(), 56);
    }
}

/// The injection library's table of NVTX strings and domains registered so
/// far (`nvtxDomainRegisterStringA`, `nvtxDomainCreateA`), exported as
/// [`NVTX_REGISTRY_SYMBOL`]: `asys attach` reads it from the process
/// (process_vm_readv) to name the ranges that use what was registered
/// before it attached. Append-only; an entry counts once its `ready` is 1
/// (written last, with release ordering).
pub const NVTX_REGISTRY_SYMBOL: &str = "asys_nvtx_registry";
/// "ASYSNVTX", little-endian: what a reader checks first.
pub const NVTX_REGISTRY_MAGIC: u64 = u64::from_le_bytes(*b"ASYSNVTX");
pub const NVTX_REGISTRY_VERSION: u32 = 1;
/// Registrations kept; later ones are counted in `overflow`, not kept.
pub const NVTX_REGISTRY_CAPACITY: usize = 1024;
/// Bytes of text kept per registration (NUL-terminated, cut to fit).
pub const NVTX_REGISTRY_TEXT: usize = 112;
/// [`NvtxRegistration::kind`]: a registered string, a domain.
pub const NVTX_REGISTERED_STRING: u32 = 1;
pub const NVTX_REGISTERED_DOMAIN: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NvtxRegistration {
    /// 1 once the rest is written.
    pub ready: u32,
    pub kind: u32,
    /// The handle the registration returned.
    pub handle: u64,
    pub text: [u8; NVTX_REGISTRY_TEXT],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NvtxRegistryHeader {
    pub magic: u64,
    pub version: u32,
    pub capacity: u32,
    /// Entries taken (may pass `capacity`: those past it are not kept).
    pub taken: u32,
    pub _pad: u32,
}
