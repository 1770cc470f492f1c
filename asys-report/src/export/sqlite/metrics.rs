//! The periodic samples of devices in nsys's tables: PPU metrics as
//! `GPU_METRICS` with their names in `TARGET_INFO_GPU_METRICS`, NIC
//! counters as `NET_NIC_METRIC` with `TARGET_INFO_NETWORK_METRICS`,
//! `TARGET_INFO_NIC_INFO` and `NIC_ID_MAP`. See docs/export.md.
use std::collections::BTreeMap;

use super::{
    ExportError, Writer, global_pid, insert,
    tables::{GpuMetric, GpuMetricInfo, NetworkMetricInfo, NicIdMap, NicInfo, NicMetric},
};

/// `GPU_METRICS.metricId`s and their names: one row per metric per sample.
/// nsys's values are integers, so utilisation is also given exactly, as the
/// busy time and the interval it is a share of.
const GPU_METRICS: [&str; 8] = [
    "PPU Utilization [%]",
    "PPU Busy [ns]",
    "Sample Interval [ns]",
    "SM Clock [MHz]",
    "Power [mW]",
    "Memory Used [bytes]",
    "Memory Total [bytes]",
    // Only of devices that report it (NVIDIA's, through NVML).
    "Memory Clock [MHz]",
];

/// nsys's `typeId` of a device: the low 8 bits are the GPU's number (what
/// nsys's own recipes take with `typeId & 0xFF`); asys puts above them the
/// pid whose runtime published the metrics, as every process using the
/// simulated runtime publishes its own.
fn type_id(pid: u32, device: u32) -> i64 {
    (i64::from(pid) << 8) | i64::from(device & 0xff)
}

/// Utilisation in whole percent, rounded to the nearest.
fn percent(busy: u64, interval: u64) -> i64 {
    if interval == 0 {
        return 0;
    }
    ((u128::from(busy) * 200 + u128::from(interval)) / (u128::from(interval) * 2)) as i64
}

pub fn gpu_metrics(w: &Writer) -> Result<(), ExportError> {
    // Per typeId: its pid and device, and whether it has a memory clock.
    let mut types: BTreeMap<i64, (u32, u32, bool)> = BTreeMap::new();
    {
        let mut ins = w.table::<GpuMetric>()?;
        crate::report::read::metrics::for_each_ppu_batch(
            w.report,
            |batch| -> Result<(), ExportError> {
                for s in batch {
                    let t = type_id(s.pid, s.device);
                    let ty = types.entry(t).or_insert((s.pid, s.device, false));
                    ty.2 |= s.mem_clock_mhz.is_some();
                    let values = [
                        percent(s.busy_ns, s.interval_ns),
                        s.busy_ns as i64,
                        s.interval_ns as i64,
                        i64::from(s.sm_clock_mhz),
                        s.power_mw as i64,
                        s.memory_used as i64,
                        s.memory_total as i64,
                    ];
                    let values = values.into_iter().chain(s.mem_clock_mhz.map(i64::from));
                    for (metric, value) in values.enumerate() {
                        let row = GpuMetric {
                            timestamp: Some(w.t(s.ts)),
                            typeId: t,
                            metricId: metric as i64,
                            value,
                            globalPid: Some(global_pid(s.pid)),
                        };
                        insert(&mut ins, w.path, &row)?;
                    }
                }
                Ok(())
            },
        )?;
    }
    let mut ins = w.table::<GpuMetricInfo>()?;
    for (t, (pid, device, mem_clock)) in types {
        let known = if mem_clock { 8 } else { 7 };
        for (metric, name) in GPU_METRICS.iter().enumerate().take(known) {
            let row = GpuMetricInfo {
                typeId: t,
                sourceId: i64::from(device),
                typeName: format!("PPU {device} (pid {pid})"),
                metricId: metric as i64,
                metricName: (*name).to_owned(),
            };
            insert(&mut ins, w.path, &row)?;
        }
    }
    Ok(())
}

/// `TARGET_INFO_NETWORK_METRICS`: list 0 are the interface counters of
/// /sys/class/net, in the order of `NicMetricRow::counters` (rx
/// bytes, rx packets, tx bytes, tx packets, rx drops, tx drops).
const NIC_METRICS: [(&str, &str, &str); 6] = [
    ("Bytes received", "bytes received in the interval", "bytes"),
    (
        "Packets received",
        "packets received in the interval",
        "packets",
    ),
    ("Bytes sent", "bytes sent in the interval", "bytes"),
    ("Packets sent", "packets sent in the interval", "packets"),
    (
        "Receive drops",
        "received packets dropped in the interval",
        "packets",
    ),
    (
        "Send drops",
        "packets to send dropped in the interval",
        "packets",
    ),
];

/// An interface's or RDMA port's name split into nsys's NIC and port: an
/// RDMA port is `DEV/PORT` (no interface name has a `/`); an interface is
/// port 0 of itself.
fn nic_and_port(name: &str) -> (&str, i64) {
    match name.split_once('/') {
        Some((dev, port)) => (dev, port.parse().unwrap_or(0)),
        None => (name, 0),
    }
}

/// The rise of a running total between two samples; a total that went
/// down (the interface re-created, the driver reloaded) counts from zero,
/// as in `nic_metrics_sum`.
fn rise(before: u64, after: u64) -> u64 {
    after.checked_sub(before).unwrap_or(after)
}

/// The NIC counters as nsys's per-interval values: one `NET_NIC_METRIC` row
/// per counter for each two successive samples of an interface or RDMA
/// port, `start` and `end` their times and `value` what the counter rose
/// by. List 0 of `TARGET_INFO_NETWORK_METRICS` are the counters of
/// `nic_metrics` (an RDMA port's in bytes and packets too), list 1 the RDMA
/// ports' hardware counters (`rdma_hw_counters`), by their file names.
/// `globalId` and `nicId` number the interfaces and RDMA devices in name
/// order; `portId` is an RDMA device's port, 0 for an interface.
pub fn nic_metrics(w: &Writer) -> Result<(), ExportError> {
    let mut info = w.table::<NetworkMetricInfo>()?;
    for (idx, (name, description, unit)) in NIC_METRICS.iter().enumerate() {
        let row = NetworkMetricInfo {
            metricsListId: 0,
            metricsIdx: idx as i64,
            name: (*name).to_owned(),
            description: (*description).to_owned(),
            unit: (*unit).to_owned(),
        };
        insert(&mut info, w.path, &row)?;
    }
    let devices = nic_samples(w)?;
    let hw = hw_counter_samples(w)?;
    // NIC ids in name order, over both tables.
    let mut nics: BTreeMap<String, i64> = devices
        .keys()
        .chain(hw.keys().map(|(d, _)| d))
        .map(|n| (nic_and_port(n).0.to_owned(), 0))
        .collect();
    {
        let mut nic_info = w.table::<NicInfo>()?;
        let mut id_map = w.table::<NicIdMap>()?;
        for (id, (name, v)) in nics.iter_mut().enumerate() {
            *v = id as i64;
            let row = NicInfo {
                globalId: Some(id as i64),
                stateName: String::new(),
                nicId: id as i64,
                name: name.clone(),
                ..Default::default()
            };
            insert(&mut nic_info, w.path, &row)?;
            let row = NicIdMap {
                nicId: id as i64,
                globalId: id as i64,
            };
            insert(&mut id_map, w.path, &row)?;
        }
    }
    let mut ins = w.table::<NicMetric>()?;
    let mut interval = |port: i64, id: i64, list: i64, idx: i64, (t0, t1): (i64, i64), rose| {
        let row = NicMetric {
            start: w.t(t0),
            end: w.t(t1),
            globalId: id,
            portId: port,
            metricsListId: list,
            metricsIdx: idx,
            value: rose as i64,
        };
        insert(&mut ins, w.path, &row)
    };
    for (name, mut samples) in devices {
        let (nic, port) = nic_and_port(&name);
        samples.sort_by_key(|s| s.0);
        for pair in samples.windows(2) {
            let ((t0, a), (t1, b)) = (pair[0], pair[1]);
            for k in 0..6 {
                interval(port, nics[nic], 0, k as i64, (t0, t1), rise(a[k], b[k]))?;
            }
        }
    }
    // Hardware counters: list 1, one index per counter name.
    let names: std::collections::BTreeSet<&str> = hw.keys().map(|(_, c)| c.as_str()).collect();
    let index: BTreeMap<&str, i64> = names
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, i as i64))
        .collect();
    for (name, &idx) in &index {
        let row = NetworkMetricInfo {
            metricsListId: 1,
            metricsIdx: idx,
            name: (*name).to_owned(),
            description: "RDMA hardware counter (hw_counters), its rise in the interval".into(),
            unit: "count".into(),
        };
        insert(&mut info, w.path, &row)?;
    }
    for ((port_name, counter), samples) in &hw {
        let (nic, port) = nic_and_port(port_name);
        let mut samples = samples.clone();
        samples.sort_by_key(|s| s.0);
        for pair in samples.windows(2) {
            let ((t0, a), (t1, b)) = (pair[0], pair[1]);
            let idx = index[counter.as_str()];
            interval(port, nics[nic], 1, idx, (t0, t1), rise(a, b))?;
        }
    }
    Ok(())
}

/// Per interface or RDMA port name: its samples (time, counters).
type NicSamples = BTreeMap<String, Vec<(i64, [u64; 6])>>;

fn nic_samples(w: &Writer) -> Result<NicSamples, ExportError> {
    let mut devices = NicSamples::new();
    crate::report::read::metrics::for_each_nic_batch(
        w.report,
        |batch| -> Result<(), ExportError> {
            for s in batch {
                let name = w.strings.get(s.device_id).unwrap_or("?").to_owned();
                devices.entry(name).or_default().push((s.ts, s.counters()));
            }
            Ok(())
        },
    )?;
    Ok(devices)
}

/// Per (port, counter name): its samples (time, value).
type HwSamples = BTreeMap<(String, String), Vec<(i64, u64)>>;

fn hw_counter_samples(w: &Writer) -> Result<HwSamples, ExportError> {
    let mut hw = HwSamples::new();
    crate::report::read::metrics::for_each_rdma_batch(
        w.report,
        |batch| -> Result<(), ExportError> {
            for s in batch {
                let name = |id| w.strings.get(id).unwrap_or("?").to_owned();
                hw.entry((name(s.device_id), name(s.counter_id)))
                    .or_default()
                    .push((s.ts, s.value));
            }
            Ok(())
        },
    )?;
    Ok(hw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_keep_the_device_in_the_low_byte_and_percent_rounds() {
        assert_eq!(type_id(1234, 3) & 0xff, 3);
        assert_eq!(type_id(1234, 3) >> 8, 1234);
        assert_eq!(percent(1, 3), 33);
        assert_eq!(percent(2, 3), 67);
        assert_eq!(percent(5, 5), 100);
        assert_eq!(percent(0, 0), 0);
    }

    #[test]
    fn rdma_ports_split_into_nic_and_port_and_totals_rise() {
        assert_eq!(nic_and_port("mlx5_0/2"), ("mlx5_0", 2));
        assert_eq!(nic_and_port("eth0"), ("eth0", 0));
        assert_eq!(rise(10, 25), 15);
        // Went down: counted again from zero.
        assert_eq!(rise(10, 4), 4);
    }
}
