//! ppu_time_util: a process's device span (its first work's start to its
//! last work's end) cut into `chunks=` equal parts; the parts busy less than
//! `threshold=` percent of their time are reported.
use std::collections::BTreeMap;

use super::{RuleSpec, data::Data, hint};
use crate::report::ReportError;
use crate::stats::format::{Table, Value};

const HINT: &str = "The device was busy for little of this range: give it more work at once \
                    (larger batches, more streams) or remove the host work between launches.";

/// One (pid, device): its chunks' edges and busy time, and the busy stretch
/// being built (work overlapping or touching it extends it).
struct Span {
    first: i64,
    span: i128,
    covered: Vec<i64>,
    open: Option<(i64, i64)>,
}

impl Span {
    fn new(first: i64, last: i64, chunks: u32) -> Self {
        Self {
            first,
            span: i128::from(last) - i128::from(first),
            covered: vec![0; chunks as usize],
            open: None,
        }
    }

    /// The start of chunk `k` (the end of the last one for `k` = chunks).
    fn edge(&self, k: usize) -> i64 {
        (i128::from(self.first) + self.span * k as i128 / self.covered.len() as i128) as i64
    }

    /// Adds a finished busy stretch to the chunks it overlaps.
    fn close(&mut self, (bs, be): (i64, i64)) {
        let n = self.covered.len();
        // The first chunk ending after `bs` (edges only grow): a binary
        // search, as a report has millions of stretches.
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.edge(mid + 1) <= bs {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let mut k = lo;
        while k < n && self.edge(k) < be {
            let overlap = be.min(self.edge(k + 1)) - bs.max(self.edge(k));
            if overlap > 0 {
                self.covered[k] += overlap;
            }
            k += 1;
        }
    }

    fn take(&mut self, start: i64, end: i64) {
        match &mut self.open {
            Some(b) if start <= b.1 => b.1 = b.1.max(end),
            _ => {
                if let Some(b) = self.open.replace((start, end.max(start))) {
                    self.close(b);
                }
            }
        }
    }
}

pub fn run(data: &Data, spec: &RuleSpec) -> Result<Table, ReportError> {
    let mut spans: BTreeMap<(u32, u32), Span> = data
        .device_spans()?
        .into_iter()
        .map(|(k, (first, last))| (k, Span::new(first, last, spec.chunks)))
        .collect();
    data.each_activity(|a| {
        if let Some(s) = spans.get_mut(&(a.pid, a.device))
            && s.span > 0
        {
            s.take(a.start, a.end);
        }
    })?;
    let mut rows = Vec::new();
    for ((pid, device), mut s) in spans {
        if s.span <= 0 {
            continue;
        }
        if let Some(b) = s.open.take() {
            s.close(b);
        }
        for k in 0..s.covered.len() {
            let (cs, ce) = (s.edge(k), s.edge(k + 1));
            if ce <= cs {
                continue;
            }
            let util = s.covered[k] as f64 * 100.0 / (ce - cs) as f64;
            if util < spec.threshold {
                rows.push(vec![
                    Value::Int(ce - cs),
                    Value::Int(cs),
                    Value::Int(ce),
                    Value::Fixed(util, 1),
                    Value::Int(pid.into()),
                    Value::Int(device.into()),
                    hint(HINT),
                ]);
            }
        }
    }
    Ok(Table {
        stream: None,
        title: format!(
            "PPU Time Utilization (ppu_time_util, below {}% in {} chunks)",
            spec.threshold, spec.chunks
        ),
        headers: vec![
            "Duration (ns)",
            "Start (ns)",
            "End (ns)",
            "Utilization (%)",
            "PID",
            "Device ID",
            "Hint",
        ],
        rows,
    })
}
