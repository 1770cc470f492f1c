//! cpu_wait_sum: why threads waited. Each time a thread left a CPU
//! (`sched`) until it next came onto one is one off-CPU interval, grouped
//! per thread and the state it left in (sleeping, uninterruptible,
//! preempted, ...), with the threads that woke it (`sched_wakeups`) and
//! the kernel stacks it most often left from and was woken from
//! (`kernel_stacks`, with `-s`).
use std::collections::{BTreeMap, HashMap};

use super::{
    api_sum::{summarize, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{
    ReportError,
    container::Container,
    read::{
        sched,
        stacks::{kernel_function as function, kernel_stacks},
    },
    reader,
    rows::{SchedRow, WakeupRow},
    schema::KernelStackSource,
    task_state,
};

/// Frames of the scheduler itself, above the reason a thread left.
const SCHEDULER_FRAMES: [&str; 4] = ["__schedule", "schedule", "__traceiter_", "preempt_schedule"];
/// Frames of the wake-up itself, above what the waker was doing.
const WAKING_FRAMES: [&str; 2] = ["__traceiter_", "try_to_wake_up"];
/// Frames shown of a wait's kernel stack.
const STACK_FRAMES: usize = 4;
/// Wakers named in `Other Wakers`.
const OTHER_WAKERS: usize = 3;

/// One thread's waits in one state.
#[derive(Default)]
struct Group {
    pid: u32,
    comm: u32,
    waits: Vec<u64>,
    /// Waker tid → (its name, wakes).
    wakers: HashMap<u32, (u32, u64)>,
    /// Kernel stack at the switch-out (names, innermost scheduler frames
    /// dropped) → waits.
    stacks: HashMap<Vec<u32>, u64>,
    /// The wakers' kernel stacks at the wake-ups → wake-ups.
    waker_stacks: HashMap<Vec<u32>, u64>,
}

/// Every context switch, in time order.
fn switches(report: &Container) -> Result<Vec<SchedRow>, ReportError> {
    let mut out = sched::switches(report)?;
    out.sort_by_key(|s| s.ts);
    Ok(out)
}

/// Wake-ups per woken thread, in time order.
fn wakeups(report: &Container) -> Result<HashMap<u32, Vec<WakeupRow>>, ReportError> {
    let mut out: HashMap<u32, Vec<WakeupRow>> = HashMap::new();
    for w in sched::wakeups(report)? {
        out.entry(w.wakee_tid).or_default().push(w);
    }
    for v in out.values_mut() {
        v.sort_by_key(|w| w.ts);
    }
    Ok(out)
}

/// What a stack is counted by: its first [`STACK_FRAMES`] frames below
/// those whose function starts with one of `skip`.
fn stack_key<'a>(frames: &[u32], skip: &[&str], name: impl Fn(u32) -> &'a str) -> Vec<u32> {
    frames
        .iter()
        .copied()
        .skip_while(|&n| {
            let f = function(name(n));
            skip.iter().any(|p| f.starts_with(p))
        })
        .take(STACK_FRAMES)
        .collect()
}

/// The most frequent stack, as `inner <- outer` functions.
fn most_frequent<'a>(stacks: &HashMap<Vec<u32>, u64>, name: impl Fn(u32) -> &'a str) -> String {
    stacks
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(frames, _)| {
            frames
                .iter()
                .map(|&n| function(name(n)))
                .collect::<Vec<_>>()
                .join(" <- ")
        })
        .unwrap_or_default()
}

pub fn cpu_wait_sum(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let switches = switches(report)?;
    let mut wakeups = wakeups(report)?;
    let stacks = kernel_stacks(report, KernelStackSource::Switch)?;
    let waking_stacks = kernel_stacks(report, KernelStackSource::Waking)?;
    let tree_only = report.metadata.cpuctxsw == crate::recorded_settings::Scope::ProcessTree;
    let name = |id: u32| strings.get(id).unwrap_or("?");
    // Per thread: when it left, in which state, and (once on a CPU again)
    // since when it runs.
    let mut left: HashMap<u32, &SchedRow> = HashMap::new();
    let mut on_since: HashMap<u32, i64> = HashMap::new();
    let mut groups: BTreeMap<(u32, String), Group> = BTreeMap::new();
    for s in &switches {
        if s.prev_tid != 0 {
            left.insert(s.prev_tid, s);
        }
        let tid = s.next_tid;
        // The idle task, and the first switch-in of a thread (it left
        // before the recording).
        let Some(out) = (tid != 0).then(|| left.remove(&tid)).flatten() else {
            on_since.insert(tid, s.ts);
            continue;
        };
        if tree_only && !report.metadata.pids.contains(&out.prev_pid) {
            on_since.insert(tid, s.ts);
            continue;
        }
        let state = task_state::letters(out.prev_state);
        let g = groups.entry((tid, state)).or_default();
        g.pid = out.prev_pid;
        g.comm = out.prev_comm;
        g.waits.push(super::duration(out.ts, s.ts));
        // The waker: the last wake-up of the thread since it last came onto
        // a CPU (a wake-up may be issued just before the thread is off).
        let since = on_since.get(&tid).copied().unwrap_or(i64::MIN);
        if let Some(list) = wakeups.get_mut(&tid) {
            let upto = list.partition_point(|w| w.ts <= s.ts);
            if let Some(w) = list[..upto].last().filter(|w| w.ts >= since) {
                let e = g.wakers.entry(w.waker_tid).or_insert((w.waker_comm, 0));
                e.1 += 1;
                if let Some(frames) = waking_stacks.get(&(w.waker_tid, w.ts)) {
                    *g.waker_stacks
                        .entry(stack_key(frames, &WAKING_FRAMES, name))
                        .or_default() += 1;
                }
            }
            list.drain(..upto);
        }
        if let Some(frames) = stacks.get(&(out.prev_tid, out.ts)) {
            *g.stacks
                .entry(stack_key(frames, &SCHEDULER_FRAMES, name))
                .or_default() += 1;
        }
        on_since.insert(tid, s.ts);
    }
    let mut rows: Vec<(u64, Vec<Value>)> = Vec::new();
    let mut grand = 0u64;
    let mut summarized = Vec::new();
    for ((tid, state), mut g) in groups {
        let s = summarize(&mut g.waits);
        grand = grand.saturating_add(s.total);
        summarized.push((tid, state, g, s));
    }
    for (tid, state, g, s) in summarized {
        let mut wakers: Vec<(u32, u32, u64)> =
            g.wakers.iter().map(|(&t, &(c, n))| (t, c, n)).collect();
        wakers.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let top = wakers.first();
        let others = wakers
            .iter()
            .skip(1)
            .take(OTHER_WAKERS)
            .map(|&(t, c, n)| format!("{} ({t}) x{n}", name(c)))
            .collect::<Vec<_>>()
            .join(", ");
        let stack = most_frequent(&g.stacks, name);
        let waker_stack = most_frequent(&g.waker_stacks, name);
        let mut row = time_columns(&s, grand);
        row.extend([
            Value::Str(state.clone()),
            Value::Str(task_state::reason(&state).into()),
            Value::Int(g.pid as i64),
            Value::Int(tid as i64),
            Value::Str(name(g.comm).into()),
            match top {
                Some(&(t, _, _)) => Value::Int(t as i64),
                None => Value::Str(String::new()),
            },
            Value::Str(
                top.map(|&(_, c, _)| name(c).to_string())
                    .unwrap_or_default(),
            ),
            Value::Int(top.map(|w| w.2).unwrap_or(0) as i64),
            Value::Str(others),
            Value::Str(stack),
            Value::Str(waker_stack),
        ]);
        rows.push((s.total, row));
    }
    // Longest total first, as every *_sum report.
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut headers = time_headers("Num Waits");
    headers.extend([
        "State",
        "Reason",
        "Pid",
        "Tid",
        "Name",
        "Top Waker Tid",
        "Top Waker",
        "Top Waker Wakes",
        "Other Wakers",
        "Kernel Stack",
        "Waker Stack",
    ]);
    Ok(Table {
        stream: None,
        title: "CPU Wait Summary (cpu_wait_sum)".into(),
        headers,
        rows: rows.into_iter().map(|(_, r)| r).collect(),
    })
}
