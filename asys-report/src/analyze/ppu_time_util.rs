//! ppu_time_util: a process's device span (its first work's start to its
//! last work's end) cut into `chunks=` equal parts; the parts busy less than
//! `threshold=` percent of their time are reported.
use super::{RuleSpec, data::Data, hint};
use crate::stats::format::{Table, Value};

const HINT: &str = "The device was busy for little of this range: give it more work at once \
                    (larger batches, more streams) or remove the host work between launches.";

pub fn run(data: &Data, spec: &RuleSpec) -> Table {
    let mut rows = Vec::new();
    for ((pid, device), work) in data.by_device() {
        let first = work.iter().map(|a| a.start).min().unwrap_or(0);
        let last = work.iter().map(|a| a.end).max().unwrap_or(0);
        let span = i128::from(last) - i128::from(first);
        if span <= 0 {
            continue;
        }
        // Merged busy intervals (work is sorted by start), so two streams
        // busy at once count once.
        let mut busy: Vec<(i64, i64)> = Vec::new();
        for a in &work {
            match busy.last_mut() {
                Some(b) if a.start <= b.1 => b.1 = b.1.max(a.end),
                _ => busy.push((a.start, a.end.max(a.start))),
            }
        }
        let n = i128::from(spec.chunks);
        let edge = |k: i128| (i128::from(first) + span * k / n) as i64;
        let mut j = 0;
        for k in 0..n {
            let (cs, ce) = (edge(k), edge(k + 1));
            if ce <= cs {
                continue;
            }
            // Intervals ending before this chunk never matter again.
            while j < busy.len() && busy[j].1 <= cs {
                j += 1;
            }
            let covered: i64 = busy[j..]
                .iter()
                .take_while(|b| b.0 < ce)
                .map(|b| b.1.min(ce) - b.0.max(cs))
                .filter(|d| *d > 0)
                .sum();
            let util = covered as f64 * 100.0 / (ce - cs) as f64;
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
    Table {
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
    }
}
