//! host_memory_sum: per traced process, its memory over the samples of
//! `--host-memory-sampling` (the `host_memory` table): minimum, average
//! (of the samples, which are evenly spaced) and maximum of the resident
//! set, and the average and maximum of its anonymous, file-backed and
//! shared parts.
use std::collections::BTreeMap;

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, schema::host_memory as hm};

/// Bytes to MiB, as the report shows them.
const MIB: f64 = (1u64 << 20) as f64;

#[derive(Default)]
struct Process {
    samples: u64,
    first: i64,
    last: i64,
    rss: Stat,
    anon: Stat,
    file: Stat,
    shmem: Stat,
}

/// Minimum, sum and maximum of one quantity.
#[derive(Default)]
struct Stat {
    min: u64,
    sum: u128,
    max: u64,
}

impl Stat {
    fn add(&mut self, v: u64, first: bool) {
        self.min = if first { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    fn avg(&self, n: u64) -> f64 {
        self.sum as f64 / n.max(1) as f64
    }
}

pub fn host_memory_sum(report: &Container) -> Result<Table, ReportError> {
    let columns = [hm::TS, hm::PID, hm::RSS, hm::ANON, hm::FILE, hm::SHMEM];
    let mut procs: BTreeMap<u32, Process> = BTreeMap::new();
    for b in hm::scan(report, &columns)? {
        let b = b?;
        let v = hm::View(&b);
        let (ts, pid) = (v.ts()?, v.pid()?);
        let (rss, anon, file, shmem) = (v.rss()?, v.anon()?, v.file()?, v.shmem()?);
        for i in 0..b.num_rows() {
            let p = procs.entry(pid[i]).or_default();
            let first = p.samples == 0;
            let t = ts[i];
            p.first = if first { t } else { p.first.min(t) };
            p.last = p.last.max(t);
            p.samples += 1;
            p.rss.add(rss[i], first);
            p.anon.add(anon[i], first);
            p.file.add(file[i], first);
            p.shmem.add(shmem[i], first);
        }
    }
    let mib = |v: f64| Value::Fixed(v / MIB, 3);
    let rows = procs
        .into_iter()
        .map(|(pid, p)| {
            let n = p.samples;
            vec![
                Value::Int(pid as i64),
                Value::Int(n as i64),
                Value::Int(super::duration(p.first, p.last) as i64),
                mib(p.rss.min as f64),
                mib(p.rss.avg(n)),
                mib(p.rss.max as f64),
                mib(p.anon.avg(n)),
                mib(p.anon.max as f64),
                mib(p.file.avg(n)),
                mib(p.file.max as f64),
                mib(p.shmem.max as f64),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: "Host Memory Summary (host_memory_sum)".into(),
        headers: [
            "Pid",
            "Samples",
            "Span (ns)",
            "Min RSS (MiB)",
            "Avg RSS (MiB)",
            "Max RSS (MiB)",
            "Avg Anon (MiB)",
            "Max Anon (MiB)",
            "Avg File (MiB)",
            "Max File (MiB)",
            "Max Shmem (MiB)",
        ]
        .to_vec(),
        rows,
    })
}
