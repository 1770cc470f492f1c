//! python_sample_sum: where the Python code spent its sampled CPU time
//! (`--python-sampling`), as py-spy shows it: each sample with Python
//! frames counts as self time of its innermost Python frame, whatever
//! native code that frame was in (the evaluator, a C function it called,
//! a library's), and as total time of every Python function on its stack
//! (once per sample, however often it recurs). The interpreter's own
//! native frames (`_PyEval_EvalFrameDefault`, libpython, ...) are not shown:
//! only Python functions are rows, one per process, thread, qualified name
//! and file (two files' `<module>` are two rows), with the thread's Python
//! name (`threading.Thread.name`, `python_thread_names`; the name it had at
//! the sample: a thread renamed while it ran has a row per name). The
//! percentages are of the
//! samples with Python frames; samples without (threads that run no Python,
//! other processes, samples between `--python-sampling-frequency` reads)
//! are left out, as py-spy sees only Python threads.
use std::collections::HashMap;

use super::format::{Table, Value};
use crate::report::{
    ReportError,
    container::Container,
    read::{
        python_frames::{PyFrame, sample_python_stacks},
        python_thread_names::ThreadNames,
    },
    reader,
};

/// A function in a thread: (pid, tid, the thread's Python name, qualified
/// name, file) string ids, None where the thread had no Python name or the
/// code object was unreadable.
type Function = (u32, u32, Option<u32>, Option<u32>, Option<u32>);

/// The thread a stack was sampled in: pid, tid and Python name.
type Thread = (u32, u32, Option<u32>);

#[derive(Default)]
struct Counts {
    own: u64,
    total: u64,
    /// Samples per line: self samples count in `.0`, all in `.1`.
    lines: HashMap<Option<u32>, (u64, u64)>,
}

/// The samples with Python frames, and the counts of each function, of
/// the stacks given as (thread, frames innermost first).
fn tally<'a>(
    stacks: impl IntoIterator<Item = (Thread, &'a [PyFrame])>,
) -> (u64, HashMap<Function, Counts>) {
    let mut by_function: HashMap<Function, Counts> = HashMap::new();
    let mut samples = 0u64;
    for ((pid, tid, thread), frames) in stacks {
        let Some(innermost) = frames.first() else {
            continue;
        };
        samples += 1;
        let c = by_function
            .entry((pid, tid, thread, innermost.function, innermost.file))
            .or_default();
        c.own += 1;
        c.lines.entry(innermost.line).or_default().0 += 1;
        let mut seen: Vec<Function> = Vec::with_capacity(frames.len());
        for f in frames {
            let key = (pid, tid, thread, f.function, f.file);
            let c = by_function.entry(key).or_default();
            if !seen.contains(&key) {
                seen.push(key);
                c.total += 1;
            }
            c.lines.entry(f.line).or_default().1 += 1;
        }
    }
    (samples, by_function)
}

pub fn python_sample_sum(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let stacks = sample_python_stacks(report)?;
    let names = ThreadNames::read(report)?;
    let (samples, by_function) = tally(
        stacks
            .iter()
            .map(|(&(tid, ts), (pid, f))| ((*pid, tid, names.at(*pid, tid, ts)), f.as_slice())),
    );
    let grand = samples.max(1) as f64;
    let name = |id: Option<u32>| id.and_then(|id| strings.get(id));
    let mut rows: Vec<(Function, Counts)> = by_function.into_iter().collect();
    rows.sort_by(|(a, x), (b, y)| {
        (y.own, y.total, a.0, a.1, name(a.2), name(a.3), name(a.4)).cmp(&(
            x.own,
            x.total,
            b.0,
            b.1,
            name(b.2),
            name(b.3),
            name(b.4),
        ))
    });
    let rows = rows
        .into_iter()
        .map(|((pid, tid, thread, function, file), c)| {
            // The line most samples were at (self samples first); ties to
            // the first line, so that the table is the same every time.
            let line = c
                .lines
                .iter()
                .max_by_key(|(l, n)| (**n, std::cmp::Reverse(**l)))
                .and_then(|(l, _)| *l);
            vec![
                Value::Fixed(100.0 * c.own as f64 / grand, 1),
                Value::Int(c.own as i64),
                Value::Fixed(100.0 * c.total as f64 / grand, 1),
                Value::Int(c.total as i64),
                Value::Int(pid as i64),
                Value::Int(tid as i64),
                // Recorded escaped (the process chooses its threads' names).
                Value::Str(name(thread).unwrap_or("").to_string()),
                Value::Str(name(function).unwrap_or("[python unknown]").to_string()),
                Value::Str(name(file).unwrap_or("").to_string()),
                line.map_or(Value::Null, |l| Value::Int(l as i64)),
            ]
        })
        .collect();
    Ok(Table {
        stream: None,
        title: "Python Sample Summary (python_sample_sum)".into(),
        headers: vec![
            "Self (%)",
            "Self Samples",
            "Total (%)",
            "Total Samples",
            "Pid",
            "Tid",
            "Thread",
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

    fn py(function: u32, file: u32, line: u32) -> PyFrame {
        PyFrame {
            function: Some(function),
            file: Some(file),
            line: Some(line),
            is_entry: false,
        }
    }

    #[test]
    fn the_innermost_python_frame_gets_the_self_time() {
        // Function 1 `<module>` of files 10 and 11 (a module importing
        // another), 2 `spin` (recursing once) called from 10's <module>.
        let spin = [py(2, 10, 5), py(2, 10, 6), py(1, 10, 9)];
        let import = [py(1, 11, 3), py(1, 10, 1)];
        let t = (7, 8, Some(20));
        let stacks: Vec<(Thread, &[PyFrame])> =
            vec![(t, &spin), (t, &spin), (t, &spin), (t, &import), (t, &[])];
        let (samples, c) = tally(stacks);
        assert_eq!(samples, 4, "a sample without Python frames is left out");
        let get = |f, file| &c[&(7, 8, Some(20), Some(f), Some(file))];
        assert_eq!((get(2, 10).own, get(2, 10).total), (3, 3));
        assert_eq!((get(1, 10).own, get(1, 10).total), (0, 4));
        assert_eq!((get(1, 11).own, get(1, 11).total), (1, 1));
        // spin's self samples were all at line 5.
        assert_eq!(get(2, 10).lines[&Some(5)], (3, 3));
        assert_eq!(get(2, 10).lines[&Some(6)], (0, 3));
    }

    #[test]
    fn each_thread_and_each_of_its_names_has_rows_of_its_own() {
        let spin = [py(2, 10, 5)];
        // Thread 8 named 20, then renamed 21; thread 9 unnamed.
        let stacks: Vec<(Thread, &[PyFrame])> = vec![
            ((7, 8, Some(20)), &spin),
            ((7, 8, Some(21)), &spin),
            ((7, 8, Some(21)), &spin),
            ((7, 9, None), &spin),
        ];
        let (samples, c) = tally(stacks);
        assert_eq!(samples, 4);
        let own = |tid, name| c[&(7, tid, name, Some(2), Some(10))].own;
        assert_eq!(own(8, Some(20)), 1);
        assert_eq!(own(8, Some(21)), 2);
        assert_eq!(own(9, None), 1);
        assert_eq!(c.len(), 3);
    }
}
