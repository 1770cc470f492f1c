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
use crate::export::ExportError;

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
    crate::report::read::metrics::for_each_host_memory_batch(t.report, |samples| {
        for s in samples {
            for (part, value) in [("RSS", s.rss), ("anon", s.anon), ("file", s.file)] {
                let track =
                    t.counter_track(Some(s.pid), format!("Host memory {part}"), Unit::Bytes)?;
                t.counter(track, s.ts, Value::Int(value as i64))?;
            }
        }
        Ok(())
    })
}

/// `PPU D utilization` (%, busy time over the interval before the sample),
/// `PPU D SM clock` (MHz), `PPU D power` (mW), `PPU D memory used` (bytes),
/// `PPU D memory clock` (MHz, of devices that report one: NVIDIA's),
/// under the process whose runtime published them.
pub(super) fn ppu_metrics<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    crate::report::read::metrics::for_each_ppu_batch(t.report, |samples| {
        for s in samples {
            let d = s.device;
            let util = if s.interval_ns == 0 {
                0.0
            } else {
                s.busy_ns as f64 * 100.0 / s.interval_ns as f64
            };
            let counters = [
                ("utilization", Unit::Named("%"), Value::Real(util)),
                (
                    "SM clock",
                    Unit::Named("MHz"),
                    Value::Int(s.sm_clock_mhz.into()),
                ),
                ("power", Unit::Named("mW"), Value::Int(s.power_mw as i64)),
                ("memory used", Unit::Bytes, Value::Int(s.memory_used as i64)),
            ];
            let mem = s
                .mem_clock_mhz
                .map(|m| ("memory clock", Unit::Named("MHz"), Value::Int(m.into())));
            for (what, unit, v) in counters.into_iter().chain(mem) {
                let track = t.counter_track(Some(s.pid), format!("PPU {d} {what}"), unit)?;
                t.counter(track, s.ts, v)?;
            }
        }
        Ok(())
    })
}

/// `NIC IFACE rx bytes`, `rx packets`, `tx bytes`, `tx packets`: what each
/// counter rose by since the interface's first sample (the kernel's totals
/// since it came up would draw a flat line far from zero). A counter that
/// went down (the interface re-created) counts on from where it stood.
pub(super) fn nic_metrics<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    // The first four of the NIC counters, in their order.
    const COUNTERS: [(&str, Unit); 4] = [
        ("rx bytes", Unit::Bytes),
        ("rx packets", Unit::Count),
        ("tx bytes", Unit::Bytes),
        ("tx packets", Unit::Count),
    ];
    // Per (interface, counter): its last total and the rise so far.
    let mut rises: std::collections::HashMap<(u32, usize), (u64, u64)> = Default::default();
    crate::report::read::metrics::for_each_nic_batch(t.report, |samples| {
        for s in samples {
            let name = t.strings.get(s.device_id).unwrap_or("?").to_owned();
            let counters = s.counters();
            for (k, &(what, unit)) in COUNTERS.iter().enumerate() {
                let v = counters[k];
                let (last, rise) = rises.entry((s.device_id, k)).or_insert((v, 0));
                *rise += v.checked_sub(*last).unwrap_or(v);
                *last = v;
                let rise = *rise;
                let track = t.counter_track(None, format!("NIC {name} {what}"), unit)?;
                t.counter(track, s.ts, Value::Int(rise as i64))?;
            }
        }
        Ok(())
    })
}

/// `RDMA DEV/PORT COUNTER`: each hardware counter of an RDMA port
/// (`rdma_hw_counters`), as what it rose by since the port's first sample,
/// as for the NIC counters.
pub(super) fn rdma_hw_counters<W: Write>(t: &mut Trace<W>) -> Result<(), ExportError> {
    let mut rises: std::collections::HashMap<(u32, u32), (u64, u64)> = Default::default();
    crate::report::read::metrics::for_each_rdma_batch(
        t.report,
        |batch| -> Result<(), ExportError> {
            for s in batch {
                let (last, rise) = rises
                    .entry((s.device_id, s.counter_id))
                    .or_insert((s.value, 0));
                *rise += s.value.checked_sub(*last).unwrap_or(s.value);
                *last = s.value;
                let rise = *rise;
                let name = format!(
                    "RDMA {} {}",
                    t.strings.get(s.device_id).unwrap_or("?"),
                    t.strings.get(s.counter_id).unwrap_or("?")
                );
                let track = t.counter_track(None, name, Unit::Count)?;
                t.counter(track, s.ts, Value::Int(rise as i64))?;
            }
            Ok(())
        },
    )
}
