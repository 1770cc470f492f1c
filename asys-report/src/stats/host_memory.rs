//! host_memory_sum: per traced process, its memory over the samples of
//! `--host-memory-sampling` (the `host_memory` table): minimum, average
//! (of the samples, which are evenly spaced) and maximum of the resident
//! set, and the average and maximum of its anonymous, file-backed and
//! shared parts.
use std::collections::BTreeMap;

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, read::metrics::for_each_host_memory_batch};

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
    let mut procs: BTreeMap<u32, Process> = BTreeMap::new();
    for_each_host_memory_batch(report, |batch| {
        for s in batch {
            let p = procs.entry(s.pid).or_default();
            let first = p.samples == 0;
            p.first = if first { s.ts } else { p.first.min(s.ts) };
            p.last = p.last.max(s.ts);
            p.samples += 1;
            p.rss.add(s.rss, first);
            p.anon.add(s.anon, first);
            p.file.add(s.file, first);
            p.shmem.add(s.shmem, first);
        }
        Ok::<_, ReportError>(())
    })?;
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
