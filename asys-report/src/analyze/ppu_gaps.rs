//! ppu_gaps: stretches where a process's device ran nothing at all (no
//! stream busy) for at least `gap=` ms, between its first and last work.
use std::collections::{HashMap, hash_map::Entry};

use super::{RuleSpec, data::Data, hint};
use crate::report::ReportError;
use crate::stats::format::{Table, Value};

const HINT: &str = "The device was idle: look at what the host did in this range (CPU work, \
                    synchronization, data loading) and overlap it with device work.";

pub fn run(data: &Data, spec: &RuleSpec) -> Result<Table, ReportError> {
    // Per (pid, device), the latest end so far: overlapping work on other
    // streams closes no gap.
    let mut busy_until: HashMap<(u32, u32), i64> = HashMap::new();
    let mut gaps = Vec::new();
    data.each_activity(|a| match busy_until.entry((a.pid, a.device)) {
        Entry::Vacant(v) => {
            v.insert(a.end);
        }
        Entry::Occupied(mut o) => {
            let until = *o.get();
            if a.start > until && (a.start - until) as u64 >= spec.gap_ns {
                gaps.push((until, a.start, a.pid, a.device, a.stream));
            }
            o.insert(until.max(a.end));
        }
    })?;
    // Longest first, as nsys sorts its gaps; then by time, process and
    // device.
    gaps.sort_by_key(|g| (std::cmp::Reverse(g.1 - g.0), g.0, g.2, g.3));
    Ok(Table {
        stream: None,
        title: format!(
            "PPU Gaps (ppu_gaps, gap >= {} ms)",
            spec.gap_ns as f64 / 1e6
        ),
        headers: vec![
            "Duration (ns)",
            "Start (ns)",
            "End (ns)",
            "PID",
            "Device ID",
            "Next Stream",
            "Hint",
        ],
        rows: gaps
            .into_iter()
            .map(|(start, end, pid, device, stream)| {
                vec![
                    Value::Int(end - start),
                    Value::Int(start),
                    Value::Int(end),
                    Value::Int(pid.into()),
                    Value::Int(device.into()),
                    Value::Int(stream.into()),
                    hint(HINT),
                ]
            })
            .collect(),
    })
}
