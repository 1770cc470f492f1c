//! python_wall_sum: where Python threads spent their wall time, on a CPU
//! and waiting, by innermost Python frame (py-spy's `--idle` view), per
//! thread. On-CPU time comes from the CPU samples with Python frames
//! (`python_frames`): the thread's sampled CPU time (its samples × the
//! sampling period) shared out over its samples' innermost frames.
//! Waiting time comes from the off-CPU intervals (`sched`) the thread began
//! by leaving to wait (sleeping, S, or uninterruptible, D; preempted
//! intervals are not waits its code chose), each given to the Python stack
//! recorded at that switch-out (`python_switch_frames`). A wait without
//! one (sooner after the thread's last one than the
//! `--python-sampling-frequency` interval, or lost) is shown as
//! `[no python stack]`, so that every wait's time is in the table.
//! `Total` columns count a frame wherever it is on the stack (once per
//! sample or wait): a caller's line (the user's `q.get()`) has the waiting
//! time of the waits below it.
use std::collections::{HashMap, HashSet};

use super::format::{Table, Value};
use crate::report::{
    ReportError,
    container::Container,
    read::python_frames::{PyFrame, sample_python_stacks, switch_python_stacks},
    reader, schema,
    task_state::CANONICAL,
};

/// The row of waits and samples without Python frames.
pub const NO_PYTHON_STACK: &str = "[no python stack]";

/// States a thread leaves the CPU in to wait: S and D.
const WAITING: i64 = CANONICAL[0].0 | CANONICAL[1].0;

/// A row: (pid, tid, function, file, line); None for the frame of
/// [`NO_PYTHON_STACK`].
type Key = (u32, u32, Option<PyPlace>);
/// A Python frame's function, file and line.
type PyPlace = (Option<u32>, Option<u32>, Option<u32>);

#[derive(Default, Debug, Clone, Copy, PartialEq)]
struct Times {
    /// Self: the frame was innermost.
    on_cpu: f64,
    waiting: u64,
    samples: u64,
    waits: u64,
    /// Total: the frame was anywhere on the stack.
    total_on_cpu: f64,
    total_waiting: u64,
}

/// Adds `frames` (innermost first; empty: no stack) to the rows of
/// `pid`/`tid` with `add`, self to the innermost, total to each frame once.
fn add_stack(
    rows: &mut HashMap<Key, Times>,
    pid: u32,
    tid: u32,
    frames: &[PyFrame],
    add_self: impl Fn(&mut Times),
    add_total: impl Fn(&mut Times),
) {
    let place = |f: &PyFrame| (f.function, f.file, f.line);
    let Some(inner) = frames.first() else {
        let t = rows.entry((pid, tid, None)).or_default();
        add_self(t);
        add_total(t);
        return;
    };
    add_self(rows.entry((pid, tid, Some(place(inner)))).or_default());
    let mut seen: HashSet<PyPlace> = HashSet::new();
    for f in frames {
        if seen.insert(place(f)) {
            add_total(rows.entry((pid, tid, Some(place(f)))).or_default());
        }
    }
}

/// Every sample's thread, (tid, ts) → tid's samples counted per thread.
fn samples_per_thread(report: &Container) -> Result<HashMap<u32, u64>, ReportError> {
    use schema::cpu_samples as cs;
    let mut out: HashMap<u32, u64> = HashMap::new();
    for b in cs::scan(report, &[cs::TID])? {
        let b = b?;
        for &tid in cs::View(&b).tid()? {
            *out.entry(tid).or_default() += 1;
        }
    }
    Ok(out)
}

/// The rows of every thread with Python frames (in samples or waits).
fn tally(report: &Container) -> Result<HashMap<Key, Times>, ReportError> {
    let samples = sample_python_stacks(report)?;
    let waits = switch_python_stacks(report)?;
    let period = report.metadata.sample_period_ns as f64;
    // Python threads and their processes.
    let threads: HashMap<u32, u32> = samples
        .iter()
        .chain(waits.iter())
        .map(|(&(tid, _), &(pid, _))| (tid, pid))
        .collect();
    let mut rows: HashMap<Key, Times> = HashMap::new();
    // On a CPU: each thread's samples with Python frames share its sampled
    // CPU time (with --python-sampling-frequency below the sampling rate,
    // the samples between two reads have none).
    let all_samples = samples_per_thread(report)?;
    let mut with_frames: HashMap<u32, u64> = HashMap::new();
    for &(tid, _) in samples.keys() {
        *with_frames.entry(tid).or_default() += 1;
    }
    for (&(tid, _), (pid, frames)) in &samples {
        let all = all_samples
            .get(&tid)
            .copied()
            .unwrap_or(0)
            .max(with_frames[&tid]);
        let weight = period * all as f64 / with_frames[&tid] as f64;
        add_stack(
            &mut rows,
            *pid,
            tid,
            frames,
            |t| {
                t.on_cpu += weight;
                t.samples += 1;
            },
            |t| t.total_on_cpu += weight,
        );
    }
    // Waiting: each S or D interval of a Python thread, given to the
    // stack it left with.
    let switches = super::waits::switches(report)?;
    for w in super::waits::off_cpu_intervals(&switches) {
        let tid = w.out.prev_tid;
        if w.out.prev_state & WAITING == 0 {
            continue;
        }
        let Some(&pid) = threads.get(&tid) else {
            continue;
        };
        let time = super::duration(w.out.ts, w.back);
        let frames = waits
            .get(&(tid, w.out.ts))
            .map_or(&[][..], |(_, f)| f.as_slice());
        add_stack(
            &mut rows,
            pid,
            tid,
            frames,
            |t| {
                t.waiting += time;
                t.waits += 1;
            },
            |t| t.total_waiting += time,
        );
    }
    Ok(rows)
}

pub fn python_wall_sum(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let rows = tally(report)?;
    let wall = |t: &Times| t.on_cpu + t.waiting as f64;
    let grand = rows.values().map(wall).sum::<f64>().max(1.0);
    let name = |id: Option<u32>| id.and_then(|id| strings.get(id));
    let mut rows: Vec<(Key, Times)> = rows.into_iter().collect();
    // Longest wall time first; then total, thread and names, so that the
    // table is the same every time.
    let order = |(k, t): &(Key, Times)| {
        let (function, file, line) = k.2.unwrap_or((None, None, None));
        (
            std::cmp::Reverse(wall(t) as u64),
            std::cmp::Reverse((t.total_on_cpu + t.total_waiting as f64) as u64),
            k.0,
            k.1,
            name(function),
            name(file),
            line,
        )
    };
    rows.sort_by(|a, b| order(a).cmp(&order(b)));
    let rows = rows
        .into_iter()
        .map(|((pid, tid, place), t)| {
            let (function, file, line) = match place {
                Some((function, file, line)) => (
                    name(function).unwrap_or("[python unknown]"),
                    name(file).unwrap_or(""),
                    line.map_or(Value::Null, |l| Value::Int(l as i64)),
                ),
                None => (NO_PYTHON_STACK, "", Value::Null),
            };
            vec![
                Value::Fixed(100.0 * wall(&t) / grand, 1),
                Value::Int(wall(&t).round() as i64),
                Value::Int(t.on_cpu.round() as i64),
                Value::Int(t.waiting as i64),
                Value::Int((t.total_on_cpu + t.total_waiting as f64).round() as i64),
                Value::Int(t.total_waiting as i64),
                Value::Int(t.samples as i64),
                Value::Int(t.waits as i64),
                Value::Int(pid as i64),
                Value::Int(tid as i64),
                Value::Str(function.to_string()),
                Value::Str(file.to_string()),
                line,
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: "Python Wall Time Summary (python_wall_sum)".into(),
        headers: vec![
            "Wall (%)",
            "Wall Time (ns)",
            "On-CPU Time (ns)",
            "Waiting Time (ns)",
            "Total Wall Time (ns)",
            "Total Waiting Time (ns)",
            "Samples",
            "Waits",
            "Pid",
            "Tid",
            "Function",
            "File",
            "Line",
        ],
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(function: u32, line: u32) -> PyFrame {
        PyFrame {
            function: Some(function),
            file: Some(9),
            line: Some(line),
            is_entry: false,
        }
    }

    #[test]
    fn a_wait_is_self_time_of_its_innermost_frame_and_total_time_of_its_callers() {
        let mut rows = HashMap::new();
        // `wait` (line 3) called from `get` (line 5), itself recursing
        // once at line 5: total counts it once.
        let stack = [py(1, 3), py(2, 5), py(2, 5)];
        for time in [100, 20] {
            add_stack(
                &mut rows,
                7,
                8,
                &stack,
                |t| {
                    t.waiting += time;
                    t.waits += 1;
                },
                |t| t.total_waiting += time,
            );
        }
        add_stack(
            &mut rows,
            7,
            8,
            &[],
            |t| t.waiting += 4,
            |t| t.total_waiting += 4,
        );
        let get = |place| rows[&(7, 8, place)];
        let wait = get(Some((Some(1), Some(9), Some(3))));
        assert_eq!(
            (wait.waiting, wait.waits, wait.total_waiting),
            (120, 2, 120)
        );
        let caller = get(Some((Some(2), Some(9), Some(5))));
        assert_eq!(
            (caller.waiting, caller.waits, caller.total_waiting),
            (0, 0, 120)
        );
        assert_eq!(
            get(None).waiting,
            4,
            "a wait without a stack is its own row"
        );
    }
}
