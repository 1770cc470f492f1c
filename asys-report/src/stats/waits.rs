//! cpu_wait_sum: why threads waited. Each time a thread left a CPU
//! (`sched`) until it next came onto one is one off-CPU interval, grouped
//! per thread and the state it left in (sleeping, uninterruptible,
//! preempted, ...), with the threads that woke it (`sched_wakeups`) and
//! the kernel stacks it most often left from and was woken from
//! (`kernel_stacks`, with `-s`), and the Python stack it most often left
//! from (`python_switch_frames`, with `--python-sampling`).
use std::collections::{BTreeMap, HashMap};

use super::{
    api_sum::{summarize, time_columns, time_headers},
    format::{Table, Value},
};
use crate::report::{
    ReportError,
    container::Container,
    read::{
        python_frames::{self, PyFrame, switch_python_stacks},
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
    /// Python stack at the switch-out (its [`STACK_FRAMES`] innermost
    /// frames) → waits.
    python_stacks: HashMap<Vec<PythonFrameKey>, u64>,
}

/// What a Python frame of a wait's stack is counted by: its function,
/// file and line string ids and line.
type PythonFrameKey = (Option<u32>, Option<u32>, Option<u32>);

/// One off-CPU interval of a thread: its switch-out and when it next came
/// onto a CPU.
pub(crate) struct OffCpu<'a> {
    pub out: &'a SchedRow,
    pub back: i64,
}

/// Every off-CPU interval of `switches` (in time order): from a thread's
/// switch-out to its next switch-in (intervals open at either end of the
/// recording are left out), in the order they end.
pub(crate) fn off_cpu_intervals(switches: &[SchedRow]) -> Vec<OffCpu<'_>> {
    let mut left: HashMap<u32, &SchedRow> = HashMap::new();
    let mut out = Vec::new();
    for s in switches {
        if s.prev_tid != 0 {
            left.insert(s.prev_tid, s);
        }
        if s.next_tid != 0
            && let Some(o) = left.remove(&s.next_tid)
        {
            out.push(OffCpu { out: o, back: s.ts });
        }
    }
    out
}

/// Every context switch, in time order.
pub(crate) fn switches(report: &Container) -> Result<Vec<SchedRow>, ReportError> {
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

/// The names of string ids, "?" for one the string table lacks.
type Names<'a> = &'a dyn Fn(u32) -> &'a str;

/// What the waits are read from: the switches in time order, the wake-ups
/// per woken thread, and the kernel stacks of switch-outs and wake-ups.
struct Sources {
    switches: Vec<SchedRow>,
    wakeups: HashMap<u32, Vec<WakeupRow>>,
    stacks: HashMap<(u32, i64), Vec<u32>>,
    waking_stacks: HashMap<(u32, i64), Vec<u32>>,
    /// The Python frames of the waits as they left the CPU, by (tid, ts).
    python: python_frames::PythonStacks,
}

impl Sources {
    fn read(report: &Container) -> Result<Self, ReportError> {
        Ok(Self {
            switches: switches(report)?,
            wakeups: wakeups(report)?,
            stacks: kernel_stacks(report, KernelStackSource::Switch)?,
            waking_stacks: kernel_stacks(report, KernelStackSource::Waking)?,
            python: switch_python_stacks(report)?,
        })
    }
}

pub fn cpu_wait_sum(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let name = |id: u32| strings.get(id).unwrap_or("?");
    let groups = group_waits(report, Sources::read(report)?, &name);
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
        "Python Stack",
    ]);
    Ok(Table {
        stream: None,
        title: "CPU Wait Summary (cpu_wait_sum)".into(),
        headers,
        rows: wait_rows(groups, &name, &strings),
    })
}

/// Each off-CPU interval of a thread (a switch-out to its next switch-in)
/// in the group of its thread and the state it left in, with its waker and
/// kernel stacks. Process-tree recordings count only the traced
/// processes' threads.
fn group_waits(
    report: &Container,
    mut from: Sources,
    name: Names<'_>,
) -> BTreeMap<(u32, String), Group> {
    let tree_only = report.metadata.cpuctxsw == crate::recorded_settings::Scope::ProcessTree;
    // Per thread: when it left, in which state, and (once on a CPU again)
    // since when it runs.
    let mut left: HashMap<u32, &SchedRow> = HashMap::new();
    let mut on_since: HashMap<u32, i64> = HashMap::new();
    let mut groups: BTreeMap<(u32, String), Group> = BTreeMap::new();
    for s in &from.switches {
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
        let since = on_since.get(&tid).copied().unwrap_or(i64::MIN);
        if let Some(list) = from.wakeups.get_mut(&tid) {
            count_waker(g, list, since, s.ts, &from.waking_stacks, name);
        }
        if let Some(frames) = from.stacks.get(&(out.prev_tid, out.ts)) {
            *g.stacks
                .entry(stack_key(frames, &SCHEDULER_FRAMES, name))
                .or_default() += 1;
        }
        if let Some((_, frames)) = from.python.get(&(out.prev_tid, out.ts)) {
            let key = frames
                .iter()
                .take(STACK_FRAMES)
                .map(|f| (f.function, f.file, f.line))
                .collect();
            *g.python_stacks.entry(key).or_default() += 1;
        }
        on_since.insert(tid, s.ts);
    }
    groups
}

/// Counts the waker of a wait that ended at `until`: the last wake-up of
/// the thread (`list`, in time order) since it last came onto a CPU at
/// `since` (a wake-up may be issued just before the thread is off), with
/// the waker's kernel stack. The wake-ups up to `until` are used up.
fn count_waker(
    g: &mut Group,
    list: &mut Vec<WakeupRow>,
    since: i64,
    until: i64,
    waking_stacks: &HashMap<(u32, i64), Vec<u32>>,
    name: Names<'_>,
) {
    let upto = list.partition_point(|w| w.ts <= until);
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

/// The most frequent Python stack, as `inner <- outer` frames named
/// `function (file:line)`.
fn most_frequent_python(
    stacks: &HashMap<Vec<PythonFrameKey>, u64>,
    strings: &crate::report::strings::StringTable,
) -> String {
    stacks
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(frames, _)| {
            frames
                .iter()
                .map(|&(function, file, line)| {
                    let f = PyFrame {
                        function,
                        file,
                        line,
                        is_entry: false,
                    };
                    python_frames::frame_name(&f, strings)
                })
                .collect::<Vec<_>>()
                .join(" <- ")
        })
        .unwrap_or_default()
}

/// One row per group, longest total first (as every *_sum report), the
/// percentages of all the waits' time.
fn wait_rows(
    groups: BTreeMap<(u32, String), Group>,
    name: Names<'_>,
    strings: &crate::report::strings::StringTable,
) -> Vec<Vec<Value>> {
    let mut grand = 0u64;
    let mut summarized = Vec::new();
    for ((tid, state), mut g) in groups {
        let s = summarize(&mut g.waits);
        grand = grand.saturating_add(s.total);
        summarized.push((tid, state, g, s));
    }
    let mut rows: Vec<(u64, Vec<Value>)> = summarized
        .into_iter()
        .map(|(tid, state, g, s)| {
            let mut row = time_columns(&s, grand);
            row.extend(group_columns(tid, &state, &g, name));
            row.push(Value::Str(most_frequent_python(&g.python_stacks, strings)));
            (s.total, row)
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    rows.into_iter().map(|(_, r)| r).collect()
}

/// A group's columns after the times: its state and reason, thread, top
/// waker and other wakers, and most frequent kernel stacks.
fn group_columns(tid: u32, state: &str, g: &Group, name: Names<'_>) -> [Value; 11] {
    let mut wakers: Vec<(u32, u32, u64)> = g.wakers.iter().map(|(&t, &(c, n))| (t, c, n)).collect();
    wakers.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let top = wakers.first();
    let others = wakers
        .iter()
        .skip(1)
        .take(OTHER_WAKERS)
        .map(|&(t, c, n)| format!("{} ({t}) x{n}", name(c)))
        .collect::<Vec<_>>()
        .join(", ");
    [
        Value::Str(state.to_string()),
        Value::Str(task_state::reason(state).into()),
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
        Value::Str(most_frequent(&g.stacks, name)),
        Value::Str(most_frequent(&g.waker_stacks, name)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{
        builder::ReportBuilder,
        rows::{KernelFrameRow, PythonFrameRow},
        schema::{self, KernelStackSource},
    };

    /// The states the threads leave in: sleeping, blocked, preempted.
    const STATES: (i64, i64, i64) = (1, 2, 0);

    /// Thread 100 sleeps twice on CPU 0 (woken by 200, then 300) and is
    /// blocked once (woken by 200), with the kernel stack it left from the
    /// first time; thread 101 is preempted once, woken by no one. The
    /// report, and its switches.
    fn report() -> (Container, Vec<SchedRow>) {
        let mut b = ReportBuilder::new().expect("builder");
        let (worker, waker, other, idle) = (
            b.string("worker"),
            b.string("waker"),
            b.string("other"),
            b.string("swapper"),
        );
        let (sleeping, blocked, preempted) = STATES;
        let switch = |ts, prev_tid, prev_state, next_tid| SchedRow {
            ts,
            cpu: 0,
            prev_pid: if prev_tid == 0 { 0 } else { 9 },
            prev_tid,
            prev_state,
            prev_comm: if prev_tid == 0 { idle } else { worker },
            next_tid,
            next_comm: if next_tid == 0 { idle } else { worker },
        };
        let switches = vec![
            switch(10, 100, sleeping, 0),
            switch(30, 0, preempted, 100),
            switch(50, 100, sleeping, 101),
            switch(55, 101, preempted, 0),
            switch(90, 0, preempted, 100),
            switch(100, 100, blocked, 101),
            switch(160, 101, preempted, 100),
        ];
        let wake = |ts, waker_tid, waker_comm| WakeupRow {
            ts,
            cpu: 1,
            waker_pid: waker_tid,
            waker_tid,
            waker_comm,
            wakee_tid: 100,
            target_cpu: 0,
        };
        let wakeups = vec![
            wake(25, 200, waker),
            wake(80, 300, other),
            wake(150, 200, waker),
        ];
        let frame = |depth, name: &str, b: &mut ReportBuilder| KernelFrameRow {
            ts: 10,
            tid: 100,
            source: KernelStackSource::Switch,
            depth,
            addr: 0xffff_0000 + u64::from(depth),
            name_id: b.string(name),
        };
        let stack = vec![
            frame(0, "__schedule+0x10", &mut b),
            frame(1, "schedule+0x20", &mut b),
            frame(2, "futex_wait+0x30", &mut b),
            frame(3, "do_futex+0x40", &mut b),
        ];
        b.table::<schema::sched::Table>(schema::SCHED, &switches)
            .expect("sched");
        b.table::<schema::sched_wakeups::Table>(schema::SCHED_WAKEUPS, &wakeups)
            .expect("wakeups");
        b.table::<schema::kernel_stacks::Table>(schema::KERNEL_STACKS, &stack)
            .expect("stacks");
        // The Python stack of the first sleep: `get` (queue.py:180) called
        // by `worker` (app.py:12).
        let (get, worker, queue, app) = (
            b.string("Queue.get"),
            b.string("worker"),
            b.string("queue.py"),
            b.string("app.py"),
        );
        let py = |depth, function, file, line| PythonFrameRow {
            ts: 10,
            pid: 9,
            tid: 100,
            depth,
            code: 0x1000 + u64::from(depth),
            function_id: Some(function),
            file_id: Some(file),
            line: Some(line),
            is_entry: false,
        };
        let python = vec![py(0, get, queue, 180), py(1, worker, app, 12)];
        b.table::<schema::python_switch_frames::Table>(schema::PYTHON_SWITCH_FRAMES, &python)
            .expect("python frames");
        (b.finish_temporary().expect("report"), switches)
    }

    #[test]
    fn waits_are_grouped_per_thread_and_state_with_their_wakers() {
        let (report, switches) = report();
        let (sleeping, blocked, preempted) = STATES;
        let t = cpu_wait_sum(&report).expect("cpu_wait_sum");

        // Each wait: from a thread's switch-out to its next switch-in.
        let mut want: BTreeMap<(i64, String), Vec<i64>> = BTreeMap::new();
        for (i, out) in switches.iter().enumerate() {
            let Some(back) = switches[i + 1..]
                .iter()
                .find(|s| s.next_tid == out.prev_tid)
            else {
                continue;
            };
            if out.prev_tid != 0 {
                want.entry((out.prev_tid.into(), task_state::letters(out.prev_state)))
                    .or_default()
                    .push(back.ts - out.ts);
            }
        }
        let int = |v: &Value| match v {
            Value::Int(i) => *i,
            v => panic!("{v:?}"),
        };
        let text = |v: &Value| match v {
            Value::Str(s) => s.clone(),
            v => panic!("{v:?}"),
        };
        let got: BTreeMap<(i64, String), (i64, i64)> = t
            .column("Tid")
            .into_iter()
            .zip(t.column("State"))
            .zip(
                t.column("Total Time (ns)")
                    .into_iter()
                    .zip(t.column("Num Waits")),
            )
            .map(|((tid, state), (total, n))| ((int(tid), text(state)), (int(total), int(n))))
            .collect();
        let totals: BTreeMap<(i64, String), (i64, i64)> = want
            .iter()
            .map(|(k, w)| (k.clone(), (w.iter().sum(), w.len() as i64)))
            .collect();
        assert_eq!(got, totals);
        // Longest total first.
        let order: Vec<i64> = t.column("Total Time (ns)").into_iter().map(int).collect();
        assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}");

        // The sleeps' wakers: 200 once, 300 once (a tie: the lower tid is
        // on top); the block's: 200. Thread 101 was woken by no one.
        let row = |tid: i64, state: &str| {
            (0..t.rows.len())
                .find(|&i| int(t.column("Tid")[i]) == tid && text(t.column("State")[i]) == state)
                .expect("row")
        };
        let s = row(100, &task_state::letters(sleeping));
        assert_eq!(int(t.column("Top Waker Tid")[s]), 200);
        assert_eq!(int(t.column("Top Waker Wakes")[s]), 1);
        assert_eq!(text(t.column("Other Wakers")[s]), "other (300) x1");
        assert_eq!(text(t.column("Reason")[s]), task_state::reason("S"));
        // The stack it left from, the scheduler's own frames dropped.
        assert_eq!(text(t.column("Kernel Stack")[s]), "futex_wait <- do_futex");
        // And the Python stack it left with, innermost first.
        assert_eq!(
            text(t.column("Python Stack")[s]),
            "Queue.get (queue.py:180) <- worker (app.py:12)"
        );
        let d = row(100, &task_state::letters(blocked));
        assert_eq!(int(t.column("Top Waker Tid")[d]), 200);
        assert_eq!(text(t.column("Kernel Stack")[d]), "");
        assert_eq!(text(t.column("Python Stack")[d]), "");
        let r = row(101, &task_state::letters(preempted));
        assert_eq!(t.column("Top Waker Tid")[r], &Value::Str(String::new()));
    }
}
