//! What collection counted, per kind of event: an array indexed by an enum,
//! so counting an event is one add, never a string key.
use std::collections::BTreeMap;

/// A kind of event collection counts; the report's metadata (`events`) lists
/// each by its [`Counter::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Counter {
    ApiCalls,
    ProcessEvents,
    DeviceActivity,
    ApiStacks,
    ContextSwitches,
    CpuSamples,
    LoaderEvents,
    /// Library loads at which the loader hook stopped a process but could
    /// not announce it (the event ring was full): found in `STOPPED`
    /// instead, probed and continued all the same.
    UnannouncedLoads,
    /// Library loads the loader hook could neither announce nor stop for
    /// (the ring was full; system-wide): the process was scanned late, at
    /// the next tick. Each is also a `loader_ring_full` drop: calls into a
    /// library no process had loaded before went unrecorded until then.
    LateLoadScans,
    /// Recorded data the kernel sent after `--max-report-size` was reached:
    /// counted, not written.
    PastMaxReportSize,
    /// Records that could not be decoded (an unknown kind, too short).
    UnknownEvents,
    /// Hits of user-defined probes (`--probe`).
    ProbeHits,
}

impl Counter {
    pub const ALL: [Counter; 12] = [
        Counter::ApiCalls,
        Counter::ProcessEvents,
        Counter::DeviceActivity,
        Counter::ApiStacks,
        Counter::ContextSwitches,
        Counter::CpuSamples,
        Counter::LoaderEvents,
        Counter::UnannouncedLoads,
        Counter::LateLoadScans,
        Counter::PastMaxReportSize,
        Counter::UnknownEvents,
        Counter::ProbeHits,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Counter::ApiCalls => "api_calls",
            Counter::ProcessEvents => "process_events",
            Counter::DeviceActivity => "device_activity",
            Counter::ApiStacks => "api_stacks",
            Counter::ContextSwitches => "context_switches",
            Counter::CpuSamples => "cpu_samples",
            Counter::LoaderEvents => "loader_events",
            Counter::UnannouncedLoads => "unannounced_loads",
            Counter::LateLoadScans => "late_load_scans",
            Counter::PastMaxReportSize => "past_max_report_size",
            Counter::UnknownEvents => "unknown_events",
            Counter::ProbeHits => "probe_hits",
        }
    }
}

/// Counts per [`Counter`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters([u64; Counter::ALL.len()]);

impl Counters {
    #[inline]
    pub fn add(&mut self, c: Counter, n: u64) {
        self.0[c as usize] += n;
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.0[c as usize]
    }

    pub fn clear(&mut self) {
        self.0 = Default::default();
    }

    /// By name, the counters that counted something (as the metadata lists them).
    pub fn to_map(&self) -> BTreeMap<String, u64> {
        Counter::ALL
            .iter()
            .filter(|&&c| self.get(c) > 0)
            .map(|&c| (c.name().to_string(), self.get(c)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_has_its_own_slot_and_name() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i, "{c:?} out of order in ALL");
        }
        let names: std::collections::BTreeSet<_> = Counter::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), Counter::ALL.len());
    }

    #[test]
    fn counts_add_up_and_only_nonzero_ones_are_listed() {
        let mut c = Counters::default();
        c.add(Counter::ApiCalls, 2);
        c.add(Counter::ApiCalls, 3);
        c.add(Counter::CpuSamples, 1);
        assert_eq!(c.get(Counter::ApiCalls), 5);
        let m = c.to_map();
        assert_eq!(m.len(), 2);
        assert_eq!(m["api_calls"], 5);
        assert_eq!(m["cpu_samples"], 1);
        c.clear();
        assert!(c.to_map().is_empty());
    }
}
