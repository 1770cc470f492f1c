//! ppu_metrics_sum and ppu_metric_trace: the PPU devices' metrics of
//! `--ppu-metrics-device` (the `ppu_metrics` table). Utilisation is the
//! share of each sample's interval during which the device ran something.
use std::collections::BTreeMap;

use super::format::{Table, Value};
use crate::report::{
    ReportError, container::Container, read::metrics::for_each_ppu_batch, rows::PpuMetricRow,
};

const MIB: f64 = (1u64 << 20) as f64;

/// Every sample, in time order (then by device and process).
fn samples(report: &Container) -> Result<Vec<PpuMetricRow>, ReportError> {
    let mut v = Vec::new();
    for_each_ppu_batch(report, |batch| {
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
                Value::Fixed(s.memory_used as f64 / MIB, 3),
                Value::Fixed(s.memory_total as f64 / MIB, 1),
                Value::Int(s.sm_clock_mhz as i64),
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
        e.used_max = e.used_max.max(s.memory_used);
        e.used_sum += u128::from(s.memory_used);
        e.clock_sum += u64::from(s.sm_clock_mhz);
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
