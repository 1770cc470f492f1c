//! The periodic samplers of the collect stage: the traced processes'
//! memory (`--host-memory-sampling`), the network interfaces' counters
//! (`--nic-metrics`) and the PPU devices' metrics (`--ppu-metrics-device`). They are read from /proc and /sys, not traced, so
//! they run on the collection loop's own timer (see `Collector::run`)
//! rather than on a thread of their own: a sample is a few small reads,
//! and the rows go through the same recorder as every other table (and
//! with it into the checkpoints that crash recovery keeps).
pub mod nic_counters;
pub mod nvml;
pub mod ppu;

use std::{collections::HashSet, time::Duration};

use crate::{
    process::procfs,
    settings::{Metrics, PpuDevices},
    sink::recorder::Recorder,
};
use asys_report::report::{
    ReportError,
    rows::{HostMemoryRow, NicMetricRow, PpuMetricRow, RdmaCounterRow},
};

/// A source sampled every `period_ns`, next at `next` (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy)]
struct Every {
    period_ns: u64,
    next: u64,
}

impl Every {
    fn hz(hz: u32) -> Self {
        Self {
            period_ns: 1_000_000_000 / u64::from(hz.max(1)),
            next: 0,
        }
    }

    /// Whether a sample is due at `now` (or `force`d); if so, the next one
    /// is a period later.
    fn due(&mut self, now: u64, force: bool) -> bool {
        // Half a period of slack: the timer that calls this ticks at the
        // shortest period of all sources and may fire a little early.
        if !force && now + self.period_ns / 2 < self.next {
            return false;
        }
        self.next = now + self.period_ns;
        true
    }
}

/// The samplers `--host-memory-sampling` and `--nic-metrics` ask for.
#[derive(Debug)]
pub struct Sampler {
    host_memory: Option<Every>,
    nic: Option<(Every, Vec<String>)>,
    ppu: Option<(Every, PpuDevices, ppu::Previous)>,
    /// NVIDIA devices, where NVML could be loaded, and when each was last
    /// read (its utilisation is over NVML's own period; asys weighs it by
    /// the time since its last read).
    nvml: Option<(nvml::Nvml, std::collections::HashMap<u32, u64>)>,
    /// Processes whose status could not be read (exited): not read again.
    gone: HashSet<u32>,
}

impl Sampler {
    /// None when no sampler is asked for.
    pub fn new(m: &Metrics) -> Option<Self> {
        if m.nic {
            let mut present: Vec<String> = nic_counters::read_all(&[])
                .into_iter()
                .map(|c| c.name)
                .collect();
            // RDMA devices are named by themselves or by one port (`DEV/PORT`).
            for p in nic_counters::read_rdma(&[]) {
                let dev = p.name.split('/').next().unwrap_or("").to_owned();
                present.push(dev);
                present.push(p.name);
            }
            for name in m.nic_include.iter().filter(|n| !present.contains(n)) {
                // Not an error: the interface may come up during the run.
                eprintln!("asys: --nic-device-include: no interface {name} (yet)");
            }
        }
        let nvml = if m.ppu == PpuDevices::None {
            None
        } else {
            match nvml::Nvml::open() {
                Ok(n) => Some((n, Default::default())),
                Err(e) => {
                    // Once, at the start: the simulated devices are still read.
                    eprintln!("asys: warning: --ppu-metrics-device: {e}");
                    None
                }
            }
        };
        m.any().then(|| Self {
            nvml,
            host_memory: m.host_memory_hz.map(Every::hz),
            nic: m.nic.then(|| (Every::hz(m.nic_hz), m.nic_include.clone())),
            ppu: (m.ppu != PpuDevices::None)
                .then(|| (Every::hz(m.ppu_hz), m.ppu.clone(), ppu::Previous::default())),
            gone: HashSet::new(),
        })
    }

    /// How often the collection loop should call [`Self::sample`]: the
    /// shortest period asked for.
    pub fn tick(&self) -> Duration {
        let periods = self
            .host_memory
            .iter()
            .map(|e| e.period_ns)
            .chain(self.nic.iter().map(|(e, _)| e.period_ns))
            .chain(self.ppu.iter().map(|(e, _, _)| e.period_ns));
        Duration::from_nanos(periods.min().unwrap_or(100_000_000))
    }

    /// Samples every source due at `now` (all with `force`: the end of a
    /// collection window); `pids` are the traced processes.
    pub fn sample(
        &mut self,
        now: u64,
        force: bool,
        pids: impl Iterator<Item = u32>,
        rec: &mut Recorder,
    ) -> Result<(), ReportError> {
        self.sample_host_memory(now, force, pids, rec)?;
        self.sample_nics(now, force, rec)?;
        self.sample_devices(now, force, rec)
    }

    /// Each traced process's memory (`--host-memory-sampling`), if due; a
    /// process found gone is not read again.
    fn sample_host_memory(
        &mut self,
        now: u64,
        force: bool,
        pids: impl Iterator<Item = u32>,
        rec: &mut Recorder,
    ) -> Result<(), ReportError> {
        let ts = now as i64;
        if let Some(every) = &mut self.host_memory
            && every.due(now, force)
        {
            for pid in pids {
                if self.gone.contains(&pid) {
                    continue;
                }
                match procfs::memory_status(pid) {
                    Some(m) => rec.host_memory(HostMemoryRow {
                        ts,
                        pid,
                        rss: m.rss,
                        anon: m.anon,
                        file: m.file,
                        shmem: m.shmem,
                        vm_size: m.vm_size,
                    })?,
                    None => {
                        self.gone.insert(pid);
                    }
                }
            }
        }
        Ok(())
    }

    /// The NICs' and RDMA ports' counters (`--nic-metrics`), if due.
    fn sample_nics(
        &mut self,
        now: u64,
        force: bool,
        rec: &mut Recorder,
    ) -> Result<(), ReportError> {
        let ts = now as i64;
        if let Some((every, include)) = &mut self.nic
            && every.due(now, force)
        {
            let rdma = nic_counters::read_rdma(include);
            for p in &rdma {
                let device_id = rec.strings.intern(&p.name);
                for (counter, value) in &p.hw {
                    let counter_id = rec.strings.intern(counter);
                    rec.rdma_hw_counter(RdmaCounterRow {
                        ts,
                        device_id,
                        counter_id,
                        value: *value,
                    })?;
                }
            }
            // A port whose counters were not all read this time has no
            // sample now (RdmaPort::counters).
            let ports = rdma.into_iter().filter_map(|p| p.counters);
            for c in nic_counters::read_all(include).into_iter().chain(ports) {
                let device_id = rec.strings.intern(&c.name);
                rec.nic_metric(NicMetricRow {
                    ts,
                    device_id,
                    rx_bytes: c.rx_bytes,
                    rx_packets: c.rx_packets,
                    tx_bytes: c.tx_bytes,
                    tx_packets: c.tx_packets,
                    rx_dropped: c.rx_dropped,
                    tx_dropped: c.tx_dropped,
                })?;
            }
        }
        Ok(())
    }

    /// The devices' metrics (`--ppu-metrics-device`), if due: the simulated
    /// PPUs' per process, NVIDIA's per device through NVML.
    fn sample_devices(
        &mut self,
        now: u64,
        force: bool,
        rec: &mut Recorder,
    ) -> Result<(), ReportError> {
        if let Some((every, devices, previous)) = &mut self.ppu
            && every.due(now, force)
        {
            for (pid, device) in ppu::files() {
                if !ppu::wanted(devices, device) {
                    continue;
                }
                let Some(c) = ppu::read(pid, device) else {
                    continue;
                };
                // The read's own time: busy time is counted up to it.
                let at = c.at;
                if let Some((interval_ns, busy_ns)) = previous.interval(&c, at) {
                    rec.ppu_metric(PpuMetricRow {
                        ts: at as i64,
                        pid,
                        device,
                        interval_ns,
                        busy_ns,
                        sm_clock_mhz: c.sm_clock_mhz,
                        power_mw: c.power_mw,
                        memory_used: c.memory_used,
                        memory_total: c.memory_total,
                        mem_clock_mhz: None,
                    })?;
                }
            }
            if let Some((nvml, last)) = &mut self.nvml {
                sample_nvml(nvml, last, devices, rec)?;
            }
        }
        Ok(())
    }
}

/// NVIDIA's devices through NVML: one row per wanted device, from its
/// second read on (the first only starts the interval, as for a simulated
/// device); `last` holds each device's last read time.
fn sample_nvml(
    nvml: &mut nvml::Nvml,
    last: &mut std::collections::HashMap<u32, u64>,
    devices: &crate::settings::PpuDevices,
    rec: &mut Recorder,
) -> Result<(), ReportError> {
    for r in nvml.read() {
        if !ppu::wanted(devices, r.device) {
            continue;
        }
        let at = crate::clock::monotonic_ns() as u64;
        let Some(before) = last.insert(r.device, at) else {
            continue;
        };
        let interval_ns = at.saturating_sub(before);
        if interval_ns == 0 {
            continue;
        }
        rec.ppu_metric(PpuMetricRow {
            ts: at as i64,
            // The whole device, not one process's.
            pid: 0,
            device: r.device,
            interval_ns,
            busy_ns: nvml::busy_ns(r.gpu_percent, interval_ns),
            sm_clock_mhz: r.sm_clock_mhz,
            power_mw: r.power_mw,
            memory_used: r.memory_used,
            memory_total: r.memory_total,
            mem_clock_mhz: Some(r.mem_clock_mhz),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_due_once_per_period_or_when_forced() {
        let mut e = Every::hz(10);
        assert!(e.due(1_000, false));
        assert!(!e.due(1_000 + 10_000_000, false));
        // Within half a period of the next: due (the timer fires early).
        assert!(e.due(1_000 + 60_000_000, false));
        assert!(e.due(1_000 + 61_000_000, true));
    }

    #[test]
    fn no_sampler_without_a_source() {
        assert!(Sampler::new(&Metrics::default()).is_none());
        let s = Sampler::new(&Metrics {
            host_memory_hz: Some(50),
            nic: true,
            nic_hz: 10,
            nic_include: vec![],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.tick(), Duration::from_millis(20));
    }
}
