//! nic_metrics_sum: per network interface, what its counters rose by over
//! the samples of `--nic-metrics` (the `nic_metrics` table), and the
//! average and peak rates between two samples. A counter that went down
//! (the interface was re-created) counts again from zero.
use std::collections::BTreeMap;

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, read::metrics::for_each_nic_batch, reader};

#[derive(Default)]
struct Device {
    samples: Vec<(i64, [u64; 6])>,
}

pub fn nic_metrics_sum(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let mut devices: BTreeMap<u32, Device> = BTreeMap::new();
    for_each_nic_batch(report, |batch| {
        for s in batch {
            devices
                .entry(s.device_id)
                .or_default()
                .samples
                .push((s.ts, s.counters()));
        }
        Ok::<_, ReportError>(())
    })?;
    let mut rows = Vec::new();
    for (id, mut d) in devices {
        d.samples.sort_by_key(|s| s.0);
        let mut total = [0u64; 6];
        // Peak bytes per second, rx and tx, over one interval.
        let mut peak = [0f64; 2];
        for w in d.samples.windows(2) {
            let ((t0, a), (t1, b)) = (w[0], w[1]);
            let mut delta = [0u64; 6];
            for k in 0..6 {
                delta[k] = b[k].checked_sub(a[k]).unwrap_or(b[k]);
                total[k] = total[k].saturating_add(delta[k]);
            }
            let secs = super::duration(t0, t1) as f64 / 1e9;
            if secs > 0.0 {
                peak[0] = peak[0].max(delta[0] as f64 / secs);
                peak[1] = peak[1].max(delta[2] as f64 / secs);
            }
        }
        let span = match (d.samples.first(), d.samples.last()) {
            (Some(a), Some(b)) => super::duration(a.0, b.0),
            _ => 0,
        };
        let rate = |v: u64| {
            if span == 0 {
                Value::Null
            } else {
                Value::Fixed(v as f64 / (span as f64 / 1e9), 1)
            }
        };
        let mut row = vec![
            Value::Str(strings.get(id).unwrap_or("?").to_string()),
            Value::Int(d.samples.len() as i64),
            Value::Int(span as i64),
        ];
        row.extend(total.iter().map(|&v| Value::Int(v as i64)));
        row.extend([
            rate(total[0]),
            rate(total[2]),
            Value::Fixed(peak[0], 1),
            Value::Fixed(peak[1], 1),
        ]);
        rows.push(row);
    }
    Ok(Table {
        stream: None,
        title: "NIC Metrics Summary (nic_metrics_sum)".into(),
        headers: [
            "Device",
            "Samples",
            "Span (ns)",
            "RX Bytes",
            "RX Packets",
            "TX Bytes",
            "TX Packets",
            "RX Dropped",
            "TX Dropped",
            "Avg RX (B/s)",
            "Avg TX (B/s)",
            "Peak RX (B/s)",
            "Peak TX (B/s)",
        ]
        .to_vec(),
        rows,
    })
}
