//! cpu_ctxsw_sum: time on CPU per thread, from the recorded context switches
//! (`--cpuctxsw`). A thread's slice runs from the switch that brings it onto
//! a CPU to the next switch on that CPU; slices cut by the start of the
//! collection are not counted.
use std::collections::{BTreeMap, HashMap};

use super::{
    api_sum::{summarize, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{ReportError, container::Container, read::sched::switches, reader};

/// The low byte of prev_state is the task state; 0 is runnable (preempted:
/// an involuntary switch). Higher bits flag preemption, not sleep.
fn voluntary(state: i64) -> bool {
    state & 0xff != 0
}

#[derive(Default)]
struct Thread {
    pid: u32,
    /// Its command name at its latest switch (after an exec, the new one).
    comm: u32,
    comm_ts: i64,
    slices: Vec<u64>,
    voluntary: u64,
    involuntary: u64,
}

pub fn ctxsw_sum(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let mut switches = switches(report)?;
    switches.sort_by_key(|s| (s.cpu, s.ts));
    let mut threads: HashMap<u32, Thread> = HashMap::new();
    // Per CPU: who runs since when (unknown before its first switch).
    let mut on_cpu: HashMap<u32, (u32, i64)> = HashMap::new();
    for s in &switches {
        let t = threads.entry(s.prev_tid).or_default();
        // Switches are in CPU order, not time order: the name is the one of
        // the latest switch, wherever it was.
        if s.ts >= t.comm_ts {
            t.pid = s.prev_pid;
            t.comm = s.prev_comm;
            t.comm_ts = s.ts;
        }
        if voluntary(s.prev_state) {
            t.voluntary += 1;
        } else {
            t.involuntary += 1;
        }
        if let Some(&(tid, since)) = on_cpu.get(&s.cpu)
            && tid == s.prev_tid
        {
            t.slices.push(super::duration(since, s.ts));
        }
        on_cpu.insert(s.cpu, (s.next_tid, s.ts));
    }
    // Longest total first, as every *_sum report.
    // Process-tree: a switch is recorded when a traced thread leaves or
    // comes; the other side's threads are not the report's.
    let tree_only = report.metadata.cpuctxsw == crate::recorded_settings::Scope::ProcessTree;
    let mut sums: BTreeMap<(std::cmp::Reverse<u64>, u32), (Thread, super::api_sum::Summary)> =
        BTreeMap::new();
    for (tid, mut t) in threads {
        if t.slices.is_empty() || (tree_only && !report.metadata.pids.contains(&t.pid)) {
            continue;
        }
        let s = summarize(&mut t.slices);
        sums.insert((std::cmp::Reverse(s.total), tid), (t, s));
    }
    let grand = sums
        .values()
        .fold(0u64, |a, (_, s)| a.saturating_add(s.total));
    let rows = sums
        .into_iter()
        .map(|((_, tid), (t, s))| {
            let mut row = time_columns(&s, grand);
            let name = if tid == 0 {
                "[idle]".to_string()
            } else {
                strings.get(t.comm).unwrap_or("?").to_string()
            };
            row.extend([
                Value::Int(t.voluntary as i64),
                Value::Int(t.involuntary as i64),
                Value::Int(t.pid as i64),
                Value::Int(tid as i64),
                Value::Str(name),
            ]);
            row
        })
        .collect();
    let mut headers = time_headers("Num Slices");
    headers.extend(["Voluntary", "Involuntary", "Pid", "Tid", "Name"]);
    Ok(Table {
        stream: None,
        title: "CPU Context Switch Summary (cpu_ctxsw_sum)".into(),
        headers,
        rows,
    })
}
