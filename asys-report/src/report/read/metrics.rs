//! The metric samples: the traced processes' memory (`host_memory`), the
//! network interfaces' counters (`nic_metrics`), the RDMA ports' hardware
//! counters (`rdma_hw_counters`) and the PPU devices' metrics
//! (`ppu_metrics`), each read as the row the recorder wrote, one batch at a
//! time in table order (the exports stream them; the stats reports add
//! them up).
use super::for_each_batch;
use crate::report::{
    ReportError,
    container::Container,
    reader::Batch,
    rows::{HostMemoryRow, NicMetricRow, PpuMetricRow, RdmaCounterRow},
    schema::{host_memory as hm, nic_metrics as nm, ppu_metrics as pm, rdma_hw_counters as rh},
};

/// Every sample of the traced processes' memory, a batch at a time.
pub fn for_each_host_memory_batch<E: From<ReportError>>(
    report: &Container,
    each: impl FnMut(&[HostMemoryRow]) -> Result<(), E>,
) -> Result<(), E> {
    let columns = [
        hm::TS,
        hm::PID,
        hm::RSS,
        hm::ANON,
        hm::FILE,
        hm::SHMEM,
        hm::VM_SIZE,
    ];
    for_each_batch(hm::scan(report, &columns)?, host_memory_rows, each)
}

fn host_memory_rows(b: &Batch, out: &mut Vec<HostMemoryRow>) -> Result<(), ReportError> {
    let v = hm::View(b);
    let (ts, pid) = (v.ts()?, v.pid()?);
    let (rss, anon, file, shmem) = (v.rss()?, v.anon()?, v.file()?, v.shmem()?);
    let vm_size = v.vm_size()?;
    out.extend((0..b.num_rows()).map(|i| HostMemoryRow {
        ts: ts[i],
        pid: pid[i],
        rss: rss[i],
        anon: anon[i],
        file: file[i],
        shmem: shmem[i],
        vm_size: vm_size[i],
    }));
    Ok(())
}

/// The NIC counters in the order [`NicMetricRow::counters`] gives them.
pub const NIC_COUNTERS: [&str; 6] = [
    nm::RX_BYTES,
    nm::RX_PACKETS,
    nm::TX_BYTES,
    nm::TX_PACKETS,
    nm::RX_DROPPED,
    nm::TX_DROPPED,
];

impl NicMetricRow {
    /// The counters, in the order of [`NIC_COUNTERS`].
    pub fn counters(&self) -> [u64; 6] {
        [
            self.rx_bytes,
            self.rx_packets,
            self.tx_bytes,
            self.tx_packets,
            self.rx_dropped,
            self.tx_dropped,
        ]
    }
}

/// Every sample of the network interfaces' counters, a batch at a time.
pub fn for_each_nic_batch<E: From<ReportError>>(
    report: &Container,
    each: impl FnMut(&[NicMetricRow]) -> Result<(), E>,
) -> Result<(), E> {
    let columns = [[nm::TS, nm::DEVICE_ID].as_slice(), &NIC_COUNTERS].concat();
    for_each_batch(nm::scan(report, &columns)?, nic_rows, each)
}

fn nic_rows(b: &Batch, out: &mut Vec<NicMetricRow>) -> Result<(), ReportError> {
    let v = nm::View(b);
    let (ts, device) = (v.ts()?, v.device_id()?);
    let (rx_bytes, rx_packets) = (v.rx_bytes()?, v.rx_packets()?);
    let (tx_bytes, tx_packets) = (v.tx_bytes()?, v.tx_packets()?);
    let (rx_dropped, tx_dropped) = (v.rx_dropped()?, v.tx_dropped()?);
    out.extend((0..b.num_rows()).map(|i| NicMetricRow {
        ts: ts[i],
        device_id: device[i],
        rx_bytes: rx_bytes[i],
        rx_packets: rx_packets[i],
        tx_bytes: tx_bytes[i],
        tx_packets: tx_packets[i],
        rx_dropped: rx_dropped[i],
        tx_dropped: tx_dropped[i],
    }));
    Ok(())
}

/// Every sample of the RDMA ports' hardware counters, a batch at a time.
pub fn for_each_rdma_batch<E: From<ReportError>>(
    report: &Container,
    each: impl FnMut(&[RdmaCounterRow]) -> Result<(), E>,
) -> Result<(), E> {
    let columns = [rh::TS, rh::DEVICE_ID, rh::COUNTER_ID, rh::VALUE];
    for_each_batch(rh::scan(report, &columns)?, rdma_rows, each)
}

fn rdma_rows(b: &Batch, out: &mut Vec<RdmaCounterRow>) -> Result<(), ReportError> {
    let v = rh::View(b);
    let (ts, port, counter, value) = (v.ts()?, v.device_id()?, v.counter_id()?, v.value()?);
    out.extend((0..b.num_rows()).map(|i| RdmaCounterRow {
        ts: ts[i],
        device_id: port[i],
        counter_id: counter[i],
        value: value[i],
    }));
    Ok(())
}

impl PpuMetricRow {
    /// The share of the sample's interval during which the device ran
    /// something, in percent.
    pub fn utilization(&self) -> f64 {
        100.0 * self.busy_ns as f64 / self.interval_ns.max(1) as f64
    }
}

/// Every sample of the PPU devices' metrics, a batch at a time; the memory
/// clock is None where the device reports none, and in reports from before
/// NVML was read (no such column).
pub fn for_each_ppu_batch<E: From<ReportError>>(
    report: &Container,
    each: impl FnMut(&[PpuMetricRow]) -> Result<(), E>,
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
    if pm::open(report)?.is_some_and(|r| r.has_column(pm::MEM_CLOCK_MHZ)) {
        columns.push(pm::MEM_CLOCK_MHZ);
    }
    for_each_batch(pm::scan(report, &columns)?, ppu_rows, each)
}

fn ppu_rows(b: &Batch, out: &mut Vec<PpuMetricRow>) -> Result<(), ReportError> {
    let v = pm::View(b);
    let (ts, pid, device) = (v.ts()?, v.pid()?, v.device()?);
    let (interval, busy) = (v.interval_ns()?, v.busy_ns()?);
    let (clock, power) = (v.sm_clock_mhz()?, v.power_mw()?);
    let (used, total) = (v.memory_used()?, v.memory_total()?);
    let mem_clock = super::scanned(b, pm::MEM_CLOCK_MHZ, || v.mem_clock_mhz())?;
    out.extend((0..b.num_rows()).map(|i| PpuMetricRow {
        ts: ts[i],
        pid: pid[i],
        device: device[i],
        interval_ns: interval[i],
        busy_ns: busy[i],
        sm_clock_mhz: clock[i],
        power_mw: power[i],
        memory_used: used[i],
        memory_total: total[i],
        mem_clock_mhz: super::opt_in(mem_clock, i),
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{builder::ReportBuilder, schema};

    /// Each metric table reads back as written, and the NIC counters come
    /// in the order of their names.
    #[test]
    fn metric_samples_read_back_as_written() {
        let mut b = ReportBuilder::new().expect("builder");
        let (eth, port, counter) = (b.string("eth0"), b.string("mlx5_0/1"), b.string("rx"));
        let memory = vec![HostMemoryRow {
            ts: 10,
            pid: 3,
            rss: 100,
            anon: 60,
            file: 30,
            shmem: 10,
            vm_size: 900,
        }];
        let nic = vec![NicMetricRow {
            ts: 20,
            device_id: eth,
            rx_bytes: 1,
            rx_packets: 2,
            tx_bytes: 3,
            tx_packets: 4,
            rx_dropped: 5,
            tx_dropped: 6,
        }];
        let rdma = vec![RdmaCounterRow {
            ts: 30,
            device_id: port,
            counter_id: counter,
            value: 99,
        }];
        let ppu = vec![PpuMetricRow {
            ts: 40,
            pid: 3,
            device: 1,
            interval_ns: 1000,
            busy_ns: 250,
            sm_clock_mhz: 1500,
            power_mw: 70_000,
            memory_used: 1 << 30,
            memory_total: 1 << 34,
            mem_clock_mhz: Some(1200),
        }];
        b.table::<schema::host_memory::Table>(schema::HOST_MEMORY, &memory)
            .expect("host memory");
        b.table::<schema::nic_metrics::Table>(schema::NIC_METRICS, &nic)
            .expect("nic");
        b.table::<schema::rdma_hw_counters::Table>(schema::RDMA_HW_COUNTERS, &rdma)
            .expect("rdma");
        b.table::<schema::ppu_metrics::Table>(schema::PPU_METRICS, &ppu)
            .expect("ppu");
        let report = b.finish_temporary().expect("report");
        fn all<R: Clone>(
            read: impl FnOnce(
                &mut dyn FnMut(&[R]) -> Result<(), ReportError>,
            ) -> Result<(), ReportError>,
        ) -> Vec<R> {
            let mut out = Vec::new();
            read(&mut |batch| {
                out.extend_from_slice(batch);
                Ok(())
            })
            .expect("read");
            out
        }
        let got = all(|f| for_each_host_memory_batch(&report, f));
        assert_eq!(format!("{got:?}"), format!("{memory:?}"));
        let got = all(|f| for_each_nic_batch(&report, f));
        assert_eq!(format!("{got:?}"), format!("{nic:?}"));
        assert_eq!(got[0].counters(), [1, 2, 3, 4, 5, 6]);
        let got = all(|f| for_each_rdma_batch(&report, f));
        assert_eq!(format!("{got:?}"), format!("{rdma:?}"));
        let got = all(|f| for_each_ppu_batch(&report, f));
        assert_eq!(format!("{got:?}"), format!("{ppu:?}"));
        assert_eq!(got[0].utilization(), 25.0);
    }
}
