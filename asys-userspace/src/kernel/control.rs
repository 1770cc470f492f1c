//! What userspace tells the programs while they run: their settings (the
//! `SETTINGS` map, rewritten whole on every change: only userspace writes
//! it) and the recording and capture state (the `STATE` map, shared field
//! by field with the kernel: see `state.rs`). Recording on and off, capture
//! ranges, the caller filter, the cgroup filter and system-wide tracing are
//! all switched here.
use asys_common::{KernelState, Settings};
use aya::{
    Ebpf,
    maps::{Array, MapData},
};

use super::{LoadSettings, TracerError, state::StateMap, take_map};
use crate::{apis::HgtxRange, settings::CaptureEnd};
use asys_report::trace_items::TraceItem;

pub struct Control {
    /// The kernel's copy of `settings`.
    settings_map: Array<MapData, Settings>,
    settings: Settings,
    /// Recording and capture state, shared with the kernel field by field.
    state: StateMap,
    /// The hgtx range (and domain) that opens a capture.
    capture_names: Array<MapData, [u8; asys_common::TEXT_LEN]>,
}

impl Control {
    /// Takes the programs' settings and state maps out of `ebpf` and writes
    /// the settings at load.
    pub(super) fn take(ebpf: &mut Ebpf, load: &LoadSettings) -> Result<Self, TracerError> {
        let mut settings = Settings {
            // A quarter of the ring: see Settings::wake_bytes.
            wake_bytes: u64::from(load.event_buffer_bytes / 4),
            // Never recorded: system-wide, osrt would record asys's own
            // reads of the events (and samples, its own sampling).
            self_pid: std::process::id().into(),
            ..Settings::default()
        };
        settings.min_duration[TraceItem::Osrt.family_id() as usize] = load.osrt_threshold_ns;
        if let Some(ns) = load.backtrace_threshold_ns {
            // 0 means off in the kernel; "all calls" is a threshold of 1 ns.
            settings.stack_threshold[TraceItem::Hggc.family_id() as usize] = ns.max(1);
        }
        let mut settings_map: Array<MapData, Settings> = take_map(ebpf, "SETTINGS")?;
        settings_map
            .set(0, settings, 0)
            .map_err(|source| TracerError::Map {
                name: "SETTINGS",
                source,
            })?;
        let state = StateMap::new(
            ebpf.take_map("STATE")
                .ok_or(TracerError::MissingMap("STATE"))?,
        )?;
        Ok(Self {
            settings_map,
            settings,
            state,
            capture_names: take_map(ebpf, "CAPTURE_NAMES")?,
        })
    }

    /// The settings as the kernel has them.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Changes the settings and hands the kernel the whole new copy: only
    /// userspace writes them, so the copy here is always the current one.
    pub(super) fn update(&mut self, change: impl FnOnce(&mut Settings)) -> Result<(), TracerError> {
        let mut next = self.settings;
        change(&mut next);
        self.settings_map
            .set(0, next, 0)
            .map_err(|source| TracerError::Map {
                name: "SETTINGS",
                source,
            })?;
        self.settings = next;
        Ok(())
    }

    /// Turns recording of calls and activity on or off; processes stay
    /// tracked either way (off until collection starts, e.g. `--delay`).
    pub fn set_recording(&mut self, on: bool) -> Result<(), TracerError> {
        self.state.set(KernelState::RECORDING, on as u64);
        Ok(())
    }

    /// Capture ranges no longer start or stop recording (a session's
    /// collection ended); recording is off.
    pub fn disarm_capture(&mut self) -> Result<(), TracerError> {
        self.update(|s| {
            s.capture_api = 0;
            s.capture_hgtx = 0;
        })?;
        self.set_recording(false)
    }

    /// Arms a capture range: `hgtx` (else the profiler API) opens and
    /// closes recording, `end` says what its end does.
    pub fn arm_capture(
        &mut self,
        hgtx: Option<&HgtxRange>,
        end: CaptureEnd,
    ) -> Result<(), TracerError> {
        let end_none = end == CaptureEnd::None;
        self.state.set(KernelState::CAPTURE_DONE, 0);
        self.update(|s| {
            s.capture_end_none = end_none as u64;
            s.capture_repeat = end.reopens() as u64;
        })?;
        match hgtx {
            Some(range) => self.arm_capture_hgtx(range),
            None => self.update(|s| s.capture_api = 1),
        }
    }

    /// Stops recording, and keeps capture ranges from starting it again
    /// (`--max-report-size`).
    pub fn stop_recording_for_good(&mut self) -> Result<(), TracerError> {
        self.state.set(KernelState::CAPTURE_DONE, 1);
        self.set_recording(false)
    }

    /// `-c hgtx -p TEMPLATE`: the matching hgtx range opens and closes
    /// recording in the kernel (the rest is [`Self::arm_capture`]'s).
    fn arm_capture_hgtx(&mut self, range: &HgtxRange) -> Result<(), TracerError> {
        use crate::apis::HgtxDomain;
        let map_err = |source| TracerError::Map {
            name: "CAPTURE_NAMES",
            source,
        };
        let padded = |s: &str| {
            let mut b = [0u8; asys_common::TEXT_LEN];
            b[..s.len()].copy_from_slice(s.as_bytes());
            b
        };
        let names = &mut self.capture_names;
        names.set(0, padded(&range.name), 0).map_err(map_err)?;
        let mode = match &range.domain {
            HgtxDomain::Default => asys_common::DOMAIN_DEFAULT,
            HgtxDomain::Any => asys_common::DOMAIN_ANY,
            HgtxDomain::Named(d) => {
                names.set(1, padded(d), 0).map_err(map_err)?;
                asys_common::DOMAIN_NAMED
            }
        };
        self.update(|s| {
            s.capture_domain_mode = mode;
            s.capture_hgtx = 1;
        })
    }

    /// Keeps (`families` set: the item families whose vendor-internal calls
    /// are left out) or records (0: `--trace-vendor-internal true`) the
    /// calls a vendor's libraries make of their own items.
    pub(super) fn filter_callers(&mut self, families: u64) -> Result<(), TracerError> {
        self.update(|s| s.caller_filter = families)
    }

    /// Restricts system-wide tracing (and system-wide samples) to the
    /// processes of `filter`'s cgroup and those below it, checked in the
    /// kernel by cgroup id (`--cgroup`, `--container`).
    pub fn filter_cgroup(
        &mut self,
        filter: &crate::process::cgroup::CgroupFilter,
    ) -> Result<(), TracerError> {
        self.update(|s| {
            s.cgroup_id = filter.id;
            s.cgroup_level = filter.level.into();
        })
    }

    /// Counts every process on the machine as traced (`-s system-wide`).
    pub fn trace_system_wide(&mut self) -> Result<(), TracerError> {
        self.update(|s| s.system_wide = 1)
    }
}
