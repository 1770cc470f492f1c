//! nic_metrics_sum: per network interface, what its counters rose by over
//! the samples of `--nic-metrics` (the `nic_metrics` table), and the
//! average and peak rates between two samples. A counter that went down
//! (the interface was re-created) counts again from zero.
use std::collections::BTreeMap;

use super::format::{Table, Value};
use crate::report::{
    ReportError,
    container::Container,
    reader,
    schema::{nic_metrics as nm, rdma_hw_counters as rh},
};

/// The counters of one sample, in the table's order.
const COUNTERS: [&str; 6] = [
    nm::RX_BYTES,
    nm::RX_PACKETS,
    nm::TX_BYTES,
    nm::TX_PACKETS,
    nm::RX_DROPPED,
    nm::TX_DROPPED,
];

/// One sample of an interface's counters, as the report and the Perfetto
/// export read it: its time, the interface (a string id), and the counters
/// in the order of [`COUNTERS`].
#[derive(Clone, Copy)]
pub(crate) struct Sample {
    pub ts: i64,
    pub device: u32,
    pub counters: [u64; 6],
}

/// Every sample of the report, one batch at a time in table order: `each`
/// gets a batch's samples. By batch because the Perfetto export streams
/// them, while the report here groups them by interface; one reader serves
/// both.
pub(crate) fn for_each_batch<E: From<ReportError>>(
    report: &Container,
    mut each: impl FnMut(&[Sample]) -> Result<(), E>,
) -> Result<(), E> {
    let mut columns = vec![nm::TS, nm::DEVICE_ID];
    columns.extend(COUNTERS);
    let mut batch = Vec::new();
    for b in nm::scan(report, &columns)? {
        let b = b?;
        let v = nm::View(&b);
        let (ts, dev) = (v.ts()?, v.device_id()?);
        // In the order of COUNTERS.
        let counters = [
            v.rx_bytes()?,
            v.rx_packets()?,
            v.tx_bytes()?,
            v.tx_packets()?,
            v.rx_dropped()?,
            v.tx_dropped()?,
        ];
        batch.clear();
        batch.extend((0..b.num_rows()).map(|i| Sample {
            ts: ts[i],
            device: dev[i],
            counters: std::array::from_fn(|k| counters[k][i]),
        }));
        each(&batch)?;
    }
    Ok(())
}

/// One sample of an RDMA port's hardware counter (`rdma_hw_counters`):
/// its time, the port (`DEV/PORT`) and the counter (string ids), and the
/// value.
#[derive(Clone, Copy)]
pub(crate) struct RdmaSample {
    pub ts: i64,
    pub port: u32,
    pub counter: u32,
    pub value: u64,
}

/// Every RDMA counter sample, one batch at a time in table order, as
/// [`for_each_batch`] gives the interfaces' (the SQLite and Perfetto
/// exports read them).
pub(crate) fn for_each_rdma_batch<E: From<ReportError>>(
    report: &Container,
    mut each: impl FnMut(&[RdmaSample]) -> Result<(), E>,
) -> Result<(), E> {
    let mut batch = Vec::new();
    for b in rh::scan(report, &[rh::TS, rh::DEVICE_ID, rh::COUNTER_ID, rh::VALUE])? {
        let b = b?;
        let v = rh::View(&b);
        let (ts, port, counter, value) = (v.ts()?, v.device_id()?, v.counter_id()?, v.value()?);
        batch.clear();
        batch.extend((0..b.num_rows()).map(|i| RdmaSample {
            ts: ts[i],
            port: port[i],
            counter: counter[i],
            value: value[i],
        }));
        each(&batch)?;
    }
    Ok(())
}

#[derive(Default)]
struct Device {
    samples: Vec<(i64, [u64; 6])>,
}

pub fn nic_metrics_sum(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let mut devices: BTreeMap<u32, Device> = BTreeMap::new();
    for_each_batch(report, |batch| {
        for s in batch {
            devices
                .entry(s.device)
                .or_default()
                .samples
                .push((s.ts, s.counters));
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
