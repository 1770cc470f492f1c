//! ppu_gaps: stretches where a process's device ran nothing at all (no
//! stream busy) for at least `gap=` ms, between its first and last work.
use super::{RuleSpec, data::Data, hint};
use crate::stats::format::{Table, Value};

const HINT: &str = "The device was idle: look at what the host did in this range (CPU work, \
                    synchronization, data loading) and overlap it with device work.";

pub fn run(data: &Data, spec: &RuleSpec) -> Table {
    let mut gaps = Vec::new();
    for ((pid, device), work) in data.by_device() {
        // `busy_until`: the latest end so far, so overlapping work on other
        // streams closes no gap.
        let mut busy_until: Option<i64> = None;
        for a in work {
            if let Some(until) = busy_until
                && a.start > until
                && (a.start - until) as u64 >= spec.gap_ns
            {
                gaps.push((until, a.start, pid, device, a.stream));
            }
            busy_until = Some(busy_until.map_or(a.end, |u| u.max(a.end)));
        }
    }
    // Longest first, as nsys sorts its gaps.
    gaps.sort_by_key(|g| (std::cmp::Reverse(g.1 - g.0), g.0));
    Table {
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
    }
}
