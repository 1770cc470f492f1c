//! ppu_metrics_sum and ppu_metric_trace: the PPU devices' metrics of
//! `--ppu-metrics-device` (the `ppu_metrics` table). Utilisation is the
//! share of each sample's interval during which the device ran something.
use std::collections::BTreeMap;

use arrow::array::Array;

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, schema::ppu_metrics as pm};

const MIB: f64 = (1u64 << 20) as f64;

/// One sample of a device's metrics, as the reports and the Perfetto
/// export read it.
#[derive(Clone, Copy)]
pub(crate) struct Sample {
    pub ts: i64,
    pub pid: u32,
    pub device: u32,
    pub interval_ns: u64,
    pub busy_ns: u64,
    pub clock: u32,
    pub power_mw: u64,
    pub used: u64,
    pub total: u64,
    /// None where the device reports none, and in reports from before
    /// NVML was read (no such column).
    pub mem_clock: Option<u32>,
}

impl Sample {
    fn utilization(&self) -> f64 {
        100.0 * self.busy_ns as f64 / self.interval_ns.max(1) as f64
    }
}

/// Every sample of the report, one batch at a time in table order: `each`
/// gets a batch's samples. By batch because the Perfetto export streams
/// them in table order, while the reports here sort them ([`samples`]);
/// one reader serves both.
pub(crate) fn for_each_batch<E: From<ReportError>>(
    report: &Container,
    mut each: impl FnMut(&[Sample]) -> Result<(), E>,
) -> Result<(), E> {
    let mut columns = vec![
        pm::TS,
        pm::PID,
        pm::DEVICE,
        pm::INTERVAL_NS,
        pm::BUSY_NS,
        pm::SM_CLOCK_MHZ,
        pm::POWER_MW,
        pm::MEMORY_USED,
        pm::MEMORY_TOTAL,
    ];
    // Reports from before NVML was read have no memory clock column.
    let has_mem_clock = pm::open(report)?.is_some_and(|r| r.has_column(pm::MEM_CLOCK_MHZ));
    if has_mem_clock {
        columns.push(pm::MEM_CLOCK_MHZ);
    }
    let mut batch = Vec::new();
    for b in pm::scan(report, &columns)? {
        let b = b?;
        let view = pm::View(&b);
        let (ts, pid, device) = (view.ts()?, view.pid()?, view.device()?);
        let (interval, busy) = (view.interval_ns()?, view.busy_ns()?);
        let (clock, power) = (view.sm_clock_mhz()?, view.power_mw()?);
        let (used, total) = (view.memory_used()?, view.memory_total()?);
        let mem_clock = if has_mem_clock {
            Some(view.mem_clock_mhz()?)
        } else {
            None
        };
        batch.clear();
        batch.extend((0..b.num_rows()).map(|i| Sample {
            ts: ts[i],
            pid: pid[i],
            device: device[i],
            interval_ns: interval[i],
            busy_ns: busy[i],
            clock: clock[i],
            power_mw: power[i],
            used: used[i],
            total: total[i],
            mem_clock: mem_clock.filter(|m| m.is_valid(i)).map(|m| m.value(i)),
        }));
        each(&batch)?;
    }
    Ok(())
}

/// Every sample, in time order (then by device and process).
fn samples(report: &Container) -> Result<Vec<Sample>, ReportError> {
    let mut v = Vec::new();
    for_each_batch(report, |batch| {
        v.extend_from_slice(batch);
        Ok::<_, ReportError>(())
    })?;
    v.sort_by_key(|s| (s.ts, s.device, s.pid));
    Ok(v)
}

/// Every sample in time order.
pub fn ppu_metric_trace(report: &Container) -> Result<Table, ReportError> {
    let rows = samples(report)?
        .iter()
        .map(|s| {
            vec![
                Value::Int(s.ts.saturating_sub(s.interval_ns as i64)),
                Value::Int(s.ts),
                Value::Int(s.device as i64),
                Value::Int(s.pid as i64),
                Value::Fixed(s.utilization(), 1),
                Value::Fixed(s.used as f64 / MIB, 3),
                Value::Fixed(s.total as f64 / MIB, 1),
                Value::Int(s.clock as i64),
                Value::Fixed(s.power_mw as f64 / 1000.0, 3),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: "PPU Metrics Trace (ppu_metric_trace)".into(),
        headers: vec![
            "Start (ns)",
            "End (ns)",
            "Device",
            "Pid",
            "Utilization (%)",
            "Memory Used (MiB)",
            "Memory Total (MiB)",
            "SM Clock (MHz)",
            "Power (W)",
        ],
        rows,
    })
}

#[derive(Default)]
struct Sum {
    n: u64,
    busy: u64,
    interval: u64,
    util_min: f64,
    util_max: f64,
    used_max: u64,
    used_sum: u128,
    clock_sum: u64,
    power_sum: u128,
    power_max: u64,
}

/// Per device (and the process that reported it): utilisation over all
/// samples (busy time over sampled time) and its extremes, memory used,
/// clock and power.
pub fn ppu_metrics_sum(report: &Container) -> Result<Table, ReportError> {
    let mut sums: BTreeMap<(u32, u32), Sum> = BTreeMap::new();
    for s in samples(report)? {
        let e = sums.entry((s.device, s.pid)).or_default();
        let u = s.utilization();
        if e.n == 0 {
            e.util_min = u;
        }
        e.n += 1;
        e.busy += s.busy_ns;
        e.interval += s.interval_ns;
        e.util_min = e.util_min.min(u);
        e.util_max = e.util_max.max(u);
        e.used_max = e.used_max.max(s.used);
        e.used_sum += u128::from(s.used);
        e.clock_sum += u64::from(s.clock);
        e.power_sum += u128::from(s.power_mw);
        e.power_max = e.power_max.max(s.power_mw);
    }
    let rows = sums
        .into_iter()
        .map(|((device, pid), e)| {
            let n = e.n.max(1) as f64;
            vec![
                Value::Int(device as i64),
                Value::Int(pid as i64),
                Value::Int(e.n as i64),
                Value::Fixed(100.0 * e.busy as f64 / e.interval.max(1) as f64, 1),
                Value::Fixed(e.util_min, 1),
                Value::Fixed(e.util_max, 1),
                Value::Fixed(e.used_sum as f64 / n / MIB, 3),
                Value::Fixed(e.used_max as f64 / MIB, 3),
                Value::Fixed(e.clock_sum as f64 / n, 1),
                Value::Fixed(e.power_sum as f64 / n / 1000.0, 3),
                Value::Fixed(e.power_max as f64 / 1000.0, 3),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: "PPU Metrics Summary (ppu_metrics_sum)".into(),
        headers: vec![
            "Device",
            "Pid",
            "Samples",
            "Avg Utilization (%)",
            "Min Utilization (%)",
            "Max Utilization (%)",
            "Avg Memory Used (MiB)",
            "Max Memory Used (MiB)",
            "Avg SM Clock (MHz)",
            "Avg Power (W)",
            "Max Power (W)",
        ],
        rows,
    })
}
