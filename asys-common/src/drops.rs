//! Where events can be lost: the [`DropSource`] slots of the kernel's
//! `DROPS` per-CPU counters, and the names the report gives them.
/// Where events can be lost; each has a slot in the `DROPS` per-CPU array.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropSource {
    /// The ring buffer was full when an API call completed.
    ApiRingFull = 0,
    /// An API call nested deeper than [`MAX_CALL_DEPTH`](crate::MAX_CALL_DEPTH) on one thread.
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
    /// [`STOPPED_UNANNOUNCED`](crate::STOPPED_UNANNOUNCED) instead, and nothing is lost.
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
    /// Not a lost event: a traced CPython thread left the CPU to wait
    /// sooner after its last wait's Python stack than
    /// `PythonProcess::wait_interval_us`, so this wait has no Python stack
    /// (the bound on what a thread that blocks very often costs).
    PythonWaitStackSkipped = 24,
}

pub const DROP_SOURCES: u32 = 25;

// The `DROPS` array has `DROP_SOURCES` slots, which the kernel indexes by
// `source as u32` and userspace (kernel/mod.rs) reads back by walking
// `DropSource::ALL`: slot i must be `ALL[i]`'s, each once.
const _: () = {
    let mut i = 0;
    while i < DropSource::ALL.len() {
        assert!(DropSource::ALL[i] as usize == i);
        i += 1;
    }
};

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
        Self::PythonWaitStackSkipped,
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
            Self::PythonWaitStackSkipped => PYTHON_WAIT_STACK_SKIPPED,
        }
    }
}

/// The name of [`DropSource::TextUnreadable`].
pub const TEXT_UNREADABLE: &str = "api_text_unreadable";
/// The name of [`DropSource::ProbeArgUnreadable`].
pub const PROBE_ARG_UNREADABLE: &str = "probe_arg_unreadable";
/// The name of [`DropSource::PythonWaitStackSkipped`].
pub const PYTHON_WAIT_STACK_SKIPPED: &str = "python_wait_stack_skipped";
/// The name of [`DropSource::CaptureTextUnreadable`].
pub const CAPTURE_TEXT_UNREADABLE: &str = "capture_text_unreadable";
