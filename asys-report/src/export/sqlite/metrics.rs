//! The periodic samples of devices in nsys's tables: PPU metrics as
//! `GPU_METRICS` with their names in `TARGET_INFO_GPU_METRICS`, NIC
//! counters as `NET_NIC_METRIC` with `TARGET_INFO_NETWORK_METRICS`,
//! `TARGET_INFO_NIC_INFO` and `NIC_ID_MAP`. See docs/export.md.
use std::collections::BTreeMap;

use arrow::datatypes::{Int64Type, UInt32Type, UInt64Type};
use rusqlite::params;

use super::{ExportError, Writer, global_pid};
use crate::report::{
    reader,
    schema::{self, nic_metrics as nm, ppu_metrics as pm, rdma_hw_counters as rh},
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
    w.exec(
        "CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER NOT NULL, \
         metricId INTEGER NOT NULL, value INTEGER NOT NULL, globalPid INTEGER);\
         CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, \
         sourceId INTEGER NOT NULL, typeName TEXT NOT NULL, metricId INTEGER NOT NULL, \
         metricName TEXT NOT NULL);",
    )?;
    // Per typeId: its pid and device, and whether it has a memory clock.
    let mut types: BTreeMap<i64, (u32, u32, bool)> = BTreeMap::new();
    // Reports from before NVML was read have no memory clock column.
    let has_mem_clock = reader::open(w.report, schema::PPU_METRICS)?
        .is_some_and(|t| t.has_column(pm::MEM_CLOCK_MHZ));
    {
        let mut ins =
            w.db.prepare("INSERT INTO GPU_METRICS VALUES (?1, ?2, ?3, ?4, ?5)")
                .map_err(|e| w.sql(e))?;
        let mut cols = vec![
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
        if has_mem_clock {
            cols.push(pm::MEM_CLOCK_MHZ);
        }
        for b in reader::scan(w.report, schema::PPU_METRICS, &cols)? {
            let b = b?;
            let ts = b.values::<Int64Type>(pm::TS)?;
            let pid = b.values::<UInt32Type>(pm::PID)?;
            let device = b.values::<UInt32Type>(pm::DEVICE)?;
            let interval = b.values::<UInt64Type>(pm::INTERVAL_NS)?;
            let busy = b.values::<UInt64Type>(pm::BUSY_NS)?;
            let clock = b.values::<UInt32Type>(pm::SM_CLOCK_MHZ)?;
            let power = b.values::<UInt64Type>(pm::POWER_MW)?;
            let used = b.values::<UInt64Type>(pm::MEMORY_USED)?;
            let total = b.values::<UInt64Type>(pm::MEMORY_TOTAL)?;
            let mem_clock = if has_mem_clock {
                Some(b.prim::<UInt32Type>(pm::MEM_CLOCK_MHZ)?)
            } else {
                None
            };
            for i in 0..b.num_rows() {
                use arrow::array::Array;
                let t = type_id(pid[i], device[i]);
                let mem = mem_clock.and_then(|m| (!m.is_null(i)).then(|| m.value(i)));
                let ty = types.entry(t).or_insert((pid[i], device[i], false));
                ty.2 |= mem.is_some();
                let values = [
                    percent(busy[i], interval[i]),
                    busy[i] as i64,
                    interval[i] as i64,
                    i64::from(clock[i]),
                    power[i] as i64,
                    used[i] as i64,
                    total[i] as i64,
                ];
                let values = values.into_iter().chain(mem.map(i64::from));
                for (metric, v) in values.enumerate() {
                    ins.execute(params![w.t(ts[i]), t, metric as i64, v, global_pid(pid[i])])
                        .map_err(|e| w.sql(e))?;
                }
            }
        }
    }
    let mut ins =
        w.db.prepare("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?1, ?2, ?3, ?4, ?5)")
            .map_err(|e| w.sql(e))?;
    for (t, (pid, device, mem_clock)) in types {
        let known = if mem_clock { 8 } else { 7 };
        for (metric, name) in GPU_METRICS.iter().enumerate().take(known) {
            ins.execute(params![
                t,
                device,
                format!("PPU {device} (pid {pid})"),
                metric as i64,
                name
            ])
            .map_err(|e| w.sql(e))?;
        }
    }
    Ok(())
}

/// `TARGET_INFO_NETWORK_METRICS`: list 0 are the interface counters of
/// /sys/class/net, in the order of the `nic_metrics` columns read below.
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
const NIC_COUNTERS: [&str; 6] = [
    nm::RX_BYTES,
    nm::RX_PACKETS,
    nm::TX_BYTES,
    nm::TX_PACKETS,
    nm::RX_DROPPED,
    nm::TX_DROPPED,
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
    w.exec(
        "CREATE TABLE NET_NIC_METRIC (start INTEGER NOT NULL, end INTEGER NOT NULL, \
         globalId INTEGER NOT NULL, portId INTEGER NOT NULL, metricsListId INTEGER NOT NULL, \
         metricsIdx INTEGER NOT NULL, value INTEGER NOT NULL);\
         CREATE TABLE TARGET_INFO_NETWORK_METRICS (metricsListId INTEGER NOT NULL, \
         metricsIdx INTEGER NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL, \
         unit TEXT NOT NULL);\
         CREATE TABLE TARGET_INFO_NIC_INFO (globalId INTEGER, stateName TEXT NOT NULL, \
         nicId INTEGER NOT NULL, name TEXT NOT NULL, deviceId INTEGER NOT NULL, \
         vendorId INTEGER NOT NULL, linkLayer INTEGER NOT NULL);\
         CREATE TABLE NIC_ID_MAP (nicId INTEGER NOT NULL, globalId INTEGER NOT NULL);",
    )?;
    for (idx, (name, description, unit)) in NIC_METRICS.iter().enumerate() {
        w.db.execute(
            "INSERT INTO TARGET_INFO_NETWORK_METRICS VALUES (0, ?1, ?2, ?3, ?4)",
            params![idx as i64, name, description, unit],
        )
        .map_err(|e| w.sql(e))?;
    }
    // Per interface or port name: its samples (time, counters).
    let mut devices: BTreeMap<String, Vec<(i64, [u64; 6])>> = BTreeMap::new();
    let mut cols = vec![nm::TS, nm::DEVICE_ID];
    cols.extend(NIC_COUNTERS);
    for b in reader::scan(w.report, schema::NIC_METRICS, &cols)? {
        let b = b?;
        let ts = b.values::<Int64Type>(nm::TS)?;
        let dev = b.values::<UInt32Type>(nm::DEVICE_ID)?;
        let counters = NIC_COUNTERS
            .iter()
            .map(|c| b.values::<UInt64Type>(c))
            .collect::<Result<Vec<_>, _>>()?;
        for i in 0..b.num_rows() {
            let name = w.strings.get(dev[i]).unwrap_or("?").to_owned();
            let values = std::array::from_fn(|k| counters[k][i]);
            devices.entry(name).or_default().push((ts[i], values));
        }
    }
    // Per (port, counter name): its samples (time, value).
    let mut hw: BTreeMap<(String, String), Vec<(i64, u64)>> = BTreeMap::new();
    let cols = [rh::TS, rh::DEVICE_ID, rh::COUNTER_ID, rh::VALUE];
    for b in reader::scan(w.report, schema::RDMA_HW_COUNTERS, &cols)? {
        let b = b?;
        let ts = b.values::<Int64Type>(rh::TS)?;
        let dev = b.values::<UInt32Type>(rh::DEVICE_ID)?;
        let counter = b.values::<UInt32Type>(rh::COUNTER_ID)?;
        let value = b.values::<UInt64Type>(rh::VALUE)?;
        for i in 0..b.num_rows() {
            let name = |id| w.strings.get(id).unwrap_or("?").to_owned();
            hw.entry((name(dev[i]), name(counter[i])))
                .or_default()
                .push((ts[i], value[i]));
        }
    }
    // NIC ids in name order, over both tables.
    let mut nics: BTreeMap<String, i64> = devices
        .keys()
        .chain(hw.keys().map(|(d, _)| d))
        .map(|n| (nic_and_port(n).0.to_owned(), 0))
        .collect();
    for (id, (name, v)) in nics.iter_mut().enumerate() {
        *v = id as i64;
        w.db.execute(
            "INSERT INTO TARGET_INFO_NIC_INFO VALUES (?1, '', ?1, ?2, 0, 0, 0)",
            params![id as i64, name],
        )
        .and_then(|_| {
            w.db.execute("INSERT INTO NIC_ID_MAP VALUES (?1, ?1)", params![id as i64])
        })
        .map_err(|e| w.sql(e))?;
    }
    let mut ins =
        w.db.prepare("INSERT INTO NET_NIC_METRIC VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
            .map_err(|e| w.sql(e))?;
    for (name, mut samples) in devices {
        let (nic, port) = nic_and_port(&name);
        let id = nics[nic];
        samples.sort_by_key(|s| s.0);
        for pair in samples.windows(2) {
            let ((t0, a), (t1, b)) = (pair[0], pair[1]);
            for k in 0..6 {
                ins.execute(params![
                    w.t(t0),
                    w.t(t1),
                    id,
                    port,
                    0,
                    k as i64,
                    rise(a[k], b[k]) as i64
                ])
                .map_err(|e| w.sql(e))?;
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
        w.db.execute(
            "INSERT INTO TARGET_INFO_NETWORK_METRICS VALUES (1, ?1, ?2, ?3, 'count')",
            params![
                idx,
                name,
                "RDMA hardware counter (hw_counters), its rise in the interval"
            ],
        )
        .map_err(|e| w.sql(e))?;
    }
    for ((port_name, counter), samples) in &hw {
        let (nic, port) = nic_and_port(port_name);
        let mut samples = samples.clone();
        samples.sort_by_key(|s| s.0);
        for pair in samples.windows(2) {
            let ((t0, a), (t1, b)) = (pair[0], pair[1]);
            ins.execute(params![
                w.t(t0),
                w.t(t1),
                nics[nic],
                port,
                1,
                index[counter.as_str()],
                rise(a, b) as i64
            ])
            .map_err(|e| w.sql(e))?;
        }
    }
    Ok(())
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
