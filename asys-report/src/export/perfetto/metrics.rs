//! Counter tracks of the periodic samples (docs/metrics.md): each traced
//! process's memory (`host_memory`: RSS, anonymous, file-backed, under the
//! process), each PPU device's metrics (`ppu_metrics`: utilisation, SM
//! clock, power, memory used, under the process whose runtime published
//! them) and each network interface's counters (`nic_metrics`: tracks of
//! their own, as an interface belongs to no process; an RDMA port's are
//! among them, named `DEV/PORT`, and its hardware counters too). A value
//! per sample, at the sample's time.
use std::io::Write;

use super::{
    Trace, TrackKey,
    proto::{self, CounterDescriptor, Data, TrackDescriptor, TrackEvent},
};
use crate::{
    export::ExportError,
    report::schema::{
        host_memory as hm, nic_metrics as nm, ppu_metrics as pm, rdma_hw_counters as rh,
    },
};

/// A counter's value: bytes and counts are integers, a share is not.
enum Value {
    Int(i64),
    Real(f64),
}

/// A counter's unit: one of Perfetto's, or a name of its own.
#[derive(Clone, Copy)]
enum Unit {
    Bytes,
    Count,
    Named(&'static str),
}

impl<W: Write> Trace<'_, W> {
    /// The counter track `name` (under process `pid`, if any).
    fn counter_track(
        &mut self,
        pid: Option<u32>,
        name: String,
        unit: Unit,
    ) -> Result<u64, ExportError> {
        let key = TrackKey::Metric(pid, name);
        if let Some(&uuid) = self.tracks.get(&key) {
            return Ok(uuid);
        }
        let parent = pid.map(|p| self.process(p)).transpose()?;
        let (unit, unit_name) = match unit {
            Unit::Bytes => (Some(proto::UNIT_SIZE_BYTES), None),
            Unit::Count => (Some(proto::UNIT_COUNT), None),
            Unit::Named(n) => (None, Some(n.to_owned())),
        };
        let TrackKey::Metric(_, name) = &key else {
            unreachable!("made above")
        };
        let name = name.clone();
        self.describe(
            key,
            TrackDescriptor {
                parent_uuid: parent,
                name: Some(name),
                counter: Some(CounterDescriptor { unit, unit_name }),
                ..Default::default()
            },
        )
    }

    fn counter(&mut self, track: u64, ts: i64, v: Value) -> Result<(), ExportError> {
        let (counter_value, double_counter_value) = match v {
            Value::Int(v) => (Some(v), None),
            Value::Real(v) => (None, Some(v)),
        };
        self.packet(
            Some(ts),
            Data::TrackEvent(TrackEvent {
                r#type: Some(proto::TYPE_COUNTER),
                track_uuid: Some(track),
                counter_value,
                double_counter_value,
                ..Default::default()
            }),
        )
    }
}

/// `Host memory RSS`, `Host memory anon`, `Host memory file` per process.
pub(super) fn host_memory<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    let cols = [hm::TS, hm::PID, hm::RSS, hm::ANON, hm::FILE];
    for b in hm::scan(t.report, &cols)? {
        let b = b?;
        let v = hm::View(&b);
        let (ts, pid) = (v.ts()?, v.pid()?);
        let parts = [("RSS", v.rss()?), ("anon", v.anon()?), ("file", v.file()?)];
        for i in 0..b.num_rows() {
            for (part, values) in &parts {
                let track =
                    t.counter_track(Some(pid[i]), format!("Host memory {part}"), Unit::Bytes)?;
                t.counter(track, ts[i], Value::Int(values[i] as i64))?;
            }
        }
    }
    Ok(())
}

/// `PPU D utilization` (%, busy time over the interval before the sample),
/// `PPU D SM clock` (MHz), `PPU D power` (mW), `PPU D memory used` (bytes),
/// `PPU D memory clock` (MHz, of devices that report one: NVIDIA's),
/// under the process whose runtime published them.
pub(super) fn ppu_metrics<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    let cols = [
        pm::TS,
        pm::PID,
        pm::DEVICE,
        pm::INTERVAL_NS,
        pm::BUSY_NS,
        pm::SM_CLOCK_MHZ,
        pm::POWER_MW,
        pm::MEMORY_USED,
    ];
    // Reports from before NVML was read have no memory clock column.
    let has_mem_clock = pm::open(t.report)?.is_some_and(|r| r.has_column(pm::MEM_CLOCK_MHZ));
    let mut cols = cols.to_vec();
    if has_mem_clock {
        cols.push(pm::MEM_CLOCK_MHZ);
    }
    for b in pm::scan(t.report, &cols)? {
        let b = b?;
        let view = pm::View(&b);
        let (ts, pid, device) = (view.ts()?, view.pid()?, view.device()?);
        let (interval, busy) = (view.interval_ns()?, view.busy_ns()?);
        let (clock, power) = (view.sm_clock_mhz()?, view.power_mw()?);
        let used = view.memory_used()?;
        let mem_clock = if has_mem_clock {
            Some(view.mem_clock_mhz()?)
        } else {
            None
        };
        for i in 0..b.num_rows() {
            use arrow::array::Array;
            let d = device[i];
            let util = if interval[i] == 0 {
                0.0
            } else {
                busy[i] as f64 * 100.0 / interval[i] as f64
            };
            let counters = [
                ("utilization", Unit::Named("%"), Value::Real(util)),
                ("SM clock", Unit::Named("MHz"), Value::Int(clock[i].into())),
                ("power", Unit::Named("mW"), Value::Int(power[i] as i64)),
                ("memory used", Unit::Bytes, Value::Int(used[i] as i64)),
            ];
            let mem = mem_clock.filter(|m| !m.is_null(i)).map(|m| {
                (
                    "memory clock",
                    Unit::Named("MHz"),
                    Value::Int(m.value(i).into()),
                )
            });
            for (what, unit, v) in counters.into_iter().chain(mem) {
                let track = t.counter_track(Some(pid[i]), format!("PPU {d} {what}"), unit)?;
                t.counter(track, ts[i], v)?;
            }
        }
    }
    Ok(())
}

/// `NIC IFACE rx bytes`, `rx packets`, `tx bytes`, `tx packets`: what each
/// counter rose by since the interface's first sample (the kernel's totals
/// since it came up would draw a flat line far from zero). A counter that
/// went down (the interface re-created) counts on from where it stood.
pub(super) fn nic_metrics<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    const COUNTERS: [(&str, &str, Unit); 4] = [
        (nm::RX_BYTES, "rx bytes", Unit::Bytes),
        (nm::RX_PACKETS, "rx packets", Unit::Count),
        (nm::TX_BYTES, "tx bytes", Unit::Bytes),
        (nm::TX_PACKETS, "tx packets", Unit::Count),
    ];
    // Per (interface, counter): its last total and the rise so far.
    let mut rises: std::collections::HashMap<(u32, usize), (u64, u64)> = Default::default();
    let mut cols = vec![nm::TS, nm::DEVICE_ID];
    cols.extend(COUNTERS.iter().map(|c| c.0));
    for b in nm::scan(t.report, &cols)? {
        let b = b?;
        let view = nm::View(&b);
        let (ts, dev) = (view.ts()?, view.device_id()?);
        // In the order of COUNTERS.
        let values = [
            view.rx_bytes()?,
            view.rx_packets()?,
            view.tx_bytes()?,
            view.tx_packets()?,
        ];
        for i in 0..b.num_rows() {
            let name = t.strings.get(dev[i]).unwrap_or("?").to_owned();
            for (k, &(_, what, unit)) in COUNTERS.iter().enumerate() {
                let v = values[k][i];
                let (last, rise) = rises.entry((dev[i], k)).or_insert((v, 0));
                *rise += v.checked_sub(*last).unwrap_or(v);
                *last = v;
                let rise = *rise;
                let track = t.counter_track(None, format!("NIC {name} {what}"), unit)?;
                t.counter(track, ts[i], Value::Int(rise as i64))?;
            }
        }
    }
    Ok(())
}

/// `RDMA DEV/PORT COUNTER`: each hardware counter of an RDMA port
/// (`rdma_hw_counters`), as what it rose by since the port's first sample,
/// as for the NIC counters.
pub(super) fn rdma_hw_counters<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    let mut rises: std::collections::HashMap<(u32, u32), (u64, u64)> = Default::default();
    let cols = [rh::TS, rh::DEVICE_ID, rh::COUNTER_ID, rh::VALUE];
    for b in rh::scan(t.report, &cols)? {
        let b = b?;
        let view = rh::View(&b);
        let (ts, dev) = (view.ts()?, view.device_id()?);
        let (counter, value) = (view.counter_id()?, view.value()?);
        for i in 0..b.num_rows() {
            let v = value[i];
            let (last, rise) = rises.entry((dev[i], counter[i])).or_insert((v, 0));
            *rise += v.checked_sub(*last).unwrap_or(v);
            *last = v;
            let rise = *rise;
            let name = format!(
                "RDMA {} {}",
                t.strings.get(dev[i]).unwrap_or("?"),
                t.strings.get(counter[i]).unwrap_or("?")
            );
            let track = t.counter_track(None, name, Unit::Count)?;
            t.counter(track, ts[i], Value::Int(rise as i64))?;
        }
    }
    Ok(())
}
