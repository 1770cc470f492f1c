//! The Python frames of CPU samples (`python_frames`, `--python-sampling`)
//! and the rule that puts them into the sample's native stack: each
//! `_PyEval_EvalFrameDefault` native frame, innermost first, is replaced by
//! the Python frames it ran. One C-level call of the evaluator runs Python
//! frames from the innermost one outwards up to and including an entry frame
//! (`isEntry`: the first frame that call ran; Python calling Python does not
//! recurse in C in 3.11-3.13), so the Python frames split into runs, each ending
//! at an entry frame, and the n-th evaluator frame from the innermost gets
//! the n-th run. Evaluator frames left over (a stack cut short on the Python
//! side) stay as they are; runs left over (a native stack cut short) go
//! outermost, in order.
use std::collections::HashMap;

use crate::report::{ReportError, container::Container, schema};

/// The evaluator's native frame that Python frames replace.
pub const EVAL_FRAME: &str = "_PyEval_EvalFrameDefault";

/// One Python frame of a sample's stack: string ids of its function
/// (qualified name) and file, its line; None where the code object was
/// unreadable. What a stack keeps of a `python_frames` row
/// ([`PythonFrameRow`](crate::report::rows::PythonFrameRow)): the sample
/// and depth are where the frame is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyFrame {
    pub function: Option<u32>,
    pub file: Option<u32>,
    pub line: Option<u32>,
    pub is_entry: bool,
}

/// A frame of a merged stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merged<T> {
    Native(T),
    Python(PyFrame),
}

/// The Python frames of each sample, by (tid, ts), innermost first.
pub fn sample_python_frames(
    report: &Container,
) -> Result<HashMap<(u32, i64), Vec<PyFrame>>, ReportError> {
    Ok(sample_python_stacks(report)?
        .into_iter()
        .map(|(key, (_, frames))| (key, frames))
        .collect())
}

/// Each sample's process and Python frames (innermost first), by (tid, ts).
pub type PythonStacks = HashMap<(u32, i64), (u32, Vec<PyFrame>)>;

/// The stacks of `$table`, a table with `python_frames`'s columns, through
/// its own declaration's typed view.
macro_rules! read_stacks {
    ($table:ident, $report:expr) => {{
        use schema::$table as p;
        // By (tid, ts): the pid, and (depth, frame) in any order.
        type Read = HashMap<(u32, i64), (u32, Vec<(u32, PyFrame)>)>;
        let mut frames: Read = HashMap::new();
        let columns = [
            p::TS,
            p::PID,
            p::TID,
            p::DEPTH,
            p::FUNCTION_ID,
            p::FILE_ID,
            p::LINE,
            p::IS_ENTRY,
        ];
        for b in p::scan($report, &columns)? {
            let b = b?;
            let v = p::View(&b);
            let (ts, pid, tid, depth) = (v.ts()?, v.pid()?, v.tid()?, v.depth()?);
            let (function, file, line) = (v.function_id()?, v.file_id()?, v.line()?);
            let entry = v.is_entry()?;
            let opt = super::opt;
            for i in 0..b.num_rows() {
                frames
                    .entry((tid[i], ts[i]))
                    .or_insert_with(|| (pid[i], Vec::new()))
                    .1
                    .push((
                        depth[i],
                        PyFrame {
                            function: opt(function, i),
                            file: opt(file, i),
                            line: opt(line, i),
                            is_entry: arrow::array::Array::is_valid(entry, i) && entry.value(i),
                        },
                    ));
            }
        }
        Ok(frames
            .into_iter()
            .map(|(key, (pid, mut f))| {
                f.sort_unstable_by_key(|&(d, _)| d);
                (key, (pid, f.into_iter().map(|(_, f)| f).collect()))
            })
            .collect())
    }};
}
/// The process and the Python frames (innermost first) of each sample, by
/// (tid, ts).
pub fn sample_python_stacks(report: &Container) -> Result<PythonStacks, ReportError> {
    read_stacks!(python_frames, report)
}

/// The process and the Python frames (innermost first) of each switch-out
/// to wait that has them (`python_switch_frames`), by (tid, the switch's
/// ts).
pub fn switch_python_stacks(report: &Container) -> Result<PythonStacks, ReportError> {
    read_stacks!(python_switch_frames, report)
}

/// The string ids of the evaluator's native frame ([`EVAL_FRAME`]), which
/// Python frames replace.
pub fn eval_frame_ids(strings: &crate::report::strings::StringTable) -> Vec<u32> {
    (0..strings.values().len() as u32)
        .filter(|&id| strings.get(id) == Some(EVAL_FRAME))
        .collect()
}

/// `natives` (innermost first) with each evaluator frame replaced by the
/// Python frames it ran (`python`, innermost first), as the module says.
pub fn merge<T>(
    natives: impl IntoIterator<Item = T>,
    is_eval: impl Fn(&T) -> bool,
    python: &[PyFrame],
) -> Vec<Merged<T>> {
    let mut runs = python
        .split_inclusive(|f| f.is_entry)
        .filter(|r| !r.is_empty());
    let mut out = Vec::new();
    for n in natives {
        if is_eval(&n)
            && let Some(run) = runs.next()
        {
            out.extend(run.iter().copied().map(Merged::Python));
        } else {
            out.push(Merged::Native(n));
        }
    }
    for run in runs {
        out.extend(run.iter().copied().map(Merged::Python));
    }
    out
}

/// How a Python frame is named in folded stacks and the Perfetto export:
/// `function (file:line)`, as py-spy names them; escaped as recorded names
/// are ([`crate::text_safety::escaped_name`]: a report written before they
/// were may hold a NUL).
pub fn frame_name(f: &PyFrame, strings: &crate::report::strings::StringTable) -> String {
    let get = |id: Option<u32>| id.and_then(|id| strings.get(id));
    let function = get(f.function).unwrap_or("[python unknown]");
    let name = match (get(f.file), f.line) {
        (Some(file), Some(line)) => format!("{function} ({file}:{line})"),
        (Some(file), None) => format!("{function} ({file})"),
        _ => function.to_string(),
    };
    match crate::text_safety::escaped_name(&name) {
        std::borrow::Cow::Borrowed(_) => name,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(function: u32, is_entry: bool) -> PyFrame {
        PyFrame {
            function: Some(function),
            file: None,
            line: None,
            is_entry,
        }
    }

    #[test]
    fn each_evaluator_frame_gets_the_python_frames_up_to_its_entry_frame() {
        // main → Py_RunMain → eval (runs 3 ← 2 ← 1 entry... ) → PyObject_Call
        // → eval (runs 5, entry) → clock_gettime; innermost first.
        let natives = [
            "clock_gettime",
            EVAL_FRAME,
            "PyObject_Call",
            EVAL_FRAME,
            "main",
        ];
        let python = [py(5, true), py(3, false), py(2, false), py(1, true)];
        let merged = merge(natives, |n| *n == EVAL_FRAME, &python);
        assert_eq!(
            merged,
            vec![
                Merged::Native("clock_gettime"),
                Merged::Python(py(5, true)),
                Merged::Native("PyObject_Call"),
                Merged::Python(py(3, false)),
                Merged::Python(py(2, false)),
                Merged::Python(py(1, true)),
                Merged::Native("main"),
            ]
        );
    }

    #[test]
    fn leftovers_stay_native_or_go_outermost() {
        let natives = ["f", EVAL_FRAME, EVAL_FRAME];
        let merged = merge(natives, |n| *n == EVAL_FRAME, &[py(1, true)]);
        assert_eq!(
            merged,
            vec![
                Merged::Native("f"),
                Merged::Python(py(1, true)),
                Merged::Native(EVAL_FRAME),
            ]
        );
        let merged = merge(["f"], |n| *n == EVAL_FRAME, &[py(2, true), py(1, true)]);
        assert_eq!(
            merged,
            vec![
                Merged::Native("f"),
                Merged::Python(py(2, true)),
                Merged::Python(py(1, true)),
            ]
        );
        // No Python frames: the stack as it was.
        let merged = merge(natives, |n| *n == EVAL_FRAME, &[]);
        assert_eq!(merged.len(), 3);
    }
}
