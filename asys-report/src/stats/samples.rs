//! cpu_sample_sum: where the sampled CPU time went (`-s`), per process and
//! function: samples in the function itself (self, the innermost frame) and
//! samples with the function anywhere on the stack (total, counted once per
//! sample), like `perf report --children`. Each function's source line is
//! the one most of its samples were at (its self samples where it has any),
//! and a function only ever seen inlined into another is marked so.
//! Samples taken in the kernel have their kernel frames innermost
//! (`kernel_stacks`), named `[k] function` in the module `[kernel]`.
//! With `--python-sampling`, each `_PyEval_EvalFrameDefault` frame is
//! replaced by the Python frames it ran (`python_frames`, the rule in
//! [`crate::report::read::python_frames`]), named by qualified name in the module
//! `[python]`, with their file and line as Source; one row per qualified
//! name and file.
use std::collections::{BTreeSet, HashMap};

use arrow::array::Array;

use super::format::{Table, Value};
use crate::report::{
    ReportError,
    container::Container,
    read::{
        python_frames::{self, PyFrame},
        stacks::sample_kernel_stacks,
    },
    reader, schema,
};

/// A frame by (function, module) string ids and [`NO_FILE`]; a kernel frame
/// by (its index among the kernel functions, [`KERNEL`], [`NO_FILE`]); a
/// Python frame by (qualified name, [`PYTHON`], file): two functions of
/// one name in two files (every module's `<module>`) are two rows.
type Frame = (u32, u32, u32);

/// The file of a frame that is not Python's, or of a Python frame whose
/// code object was unreadable.
const NO_FILE: u32 = u32::MAX;

/// The module of kernel frames.
const KERNEL: u32 = u32::MAX - 1;
/// The module of Python frames.
const PYTHON: u32 = u32::MAX - 2;

/// Where a frame was: (file string id, line), and whether inlined there.
type Place = (Option<u32>, Option<u32>, bool);

/// One sample's stack: its innermost frame and every frame on it.
#[derive(Default)]
struct SampleStack {
    /// Its user frames by depth (0 innermost), in any order.
    user: Vec<(u32, (Frame, Place))>,
    /// Its innermost kernel frame, for samples in the kernel.
    kernel_innermost: Option<(Frame, Place)>,
    all: BTreeSet<(Frame, Place)>,
}

#[derive(Default)]
struct Counts {
    own: u64,
    total: u64,
    /// Samples per place: self samples count in `.0`, all in `.1`.
    places: HashMap<Place, (u64, u64)>,
}

pub fn cpu_sample_sum(report: &Container) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let samples = sample_pids(report)?;
    let mut stacks = user_stacks(report)?;
    let kernel_functions = add_kernel_frames(report, &strings, &mut stacks)?;
    let mut python = Python {
        frames: python_frames::sample_python_frames(report)?,
        eval_ids: BTreeSet::new(),
    };
    // The evaluator's frames are looked for only where there are Python
    // frames to put in their place (a scan of every string otherwise).
    if !python.frames.is_empty() {
        python.eval_ids = python_frames::eval_frame_ids(&strings)
            .into_iter()
            .collect();
    }
    let mut by_function: HashMap<(u32, Frame), Counts> = HashMap::new();
    for (key, &pid) in &samples {
        let stack = stacks.remove(key).unwrap_or_default();
        count_sample(
            pid,
            stack,
            python.frames.remove(key),
            &python.eval_ids,
            &mut by_function,
        );
    }
    let grand = samples.len().max(1) as f64;
    let mut rows: Vec<Vec<Value>> = by_function
        .into_iter()
        .map(|((pid, frame), c)| row(pid, frame, &c, grand, &kernel_functions, &strings))
        .collect();
    sort_rows(&mut rows);
    Ok(Table {
        stream: None,
        title: "CPU Sample Summary (cpu_sample_sum)".into(),
        headers: vec![
            "Self (%)",
            "Self Samples",
            "Total Samples",
            "Pid",
            "Function",
            "Module",
            "Source",
            "Inlined",
        ],
        rows,
    })
}

/// The Python frames of the samples (`--python-sampling`) and the string
/// ids of the evaluator's native frame that they replace.
struct Python {
    frames: HashMap<(u32, i64), Vec<PyFrame>>,
    eval_ids: BTreeSet<u32>,
}

/// Every sample, (tid, ts) → pid: every sample counts, named or not.
fn sample_pids(report: &Container) -> Result<HashMap<(u32, i64), u32>, ReportError> {
    use schema::cpu_samples as cs;
    let mut samples = HashMap::new();
    for b in cs::scan(report, &[cs::TS, cs::PID, cs::TID])? {
        let b = b?;
        let v = cs::View(&b);
        let (ts, pid, tid) = (v.ts()?, v.pid()?, v.tid()?);
        for i in 0..b.num_rows() {
            samples.insert((tid[i], ts[i]), pid[i]);
        }
    }
    Ok(samples)
}

/// Per sample, (tid, ts): its user frames, with where each was.
fn user_stacks(report: &Container) -> Result<HashMap<(u32, i64), SampleStack>, ReportError> {
    use schema::cpu_sample_stacks as st;
    let mut stacks: HashMap<(u32, i64), SampleStack> = HashMap::new();
    let columns = [
        st::TID,
        st::TS,
        st::DEPTH,
        st::FUNCTION_ID,
        st::MODULE_ID,
        st::FILE_ID,
        st::LINE,
        st::INLINED,
    ];
    for b in st::scan(report, &columns)? {
        let b = b?;
        let v = st::View(&b);
        let (tid, ts, depth) = (v.tid()?, v.ts()?, v.depth()?);
        let (function, module) = (v.function_id()?, v.module_id()?);
        let (file, line, inlined) = (v.file_id()?, v.line()?, v.inlined()?);
        for i in 0..b.num_rows() {
            let place = (
                file.is_valid(i).then(|| file.value(i)),
                line.is_valid(i).then(|| line.value(i)),
                inlined.is_valid(i) && inlined.value(i),
            );
            let frame = ((function[i], module[i], NO_FILE), place);
            let entry = stacks.entry((tid[i], ts[i])).or_default();
            entry.user.push((depth[i], frame));
        }
    }
    Ok(stacks)
}

/// Adds the kernel frames of the samples taken in the kernel to their
/// stacks; returns the kernel functions, which a kernel frame names by
/// index (the kernel's names are not in the string table, and their
/// offsets are dropped, so that one function is one row).
fn add_kernel_frames(
    report: &Container,
    strings: &crate::report::strings::StringTable,
    stacks: &mut HashMap<(u32, i64), SampleStack>,
) -> Result<Vec<String>, ReportError> {
    let mut kernel_functions: Vec<String> = Vec::new();
    let mut kernel_ids: HashMap<String, u32> = HashMap::new();
    let no_place = (None, None, false);
    for (key, functions) in sample_kernel_stacks(report, strings)? {
        let entry = stacks.entry(key).or_default();
        for (depth, function) in functions.into_iter().enumerate() {
            let id = match kernel_ids.get(&function) {
                Some(&id) => id,
                None => {
                    let id = kernel_functions.len() as u32;
                    kernel_ids.insert(function.clone(), id);
                    kernel_functions.push(function);
                    id
                }
            };
            if depth == 0 {
                entry.kernel_innermost = Some(((id, KERNEL, NO_FILE), no_place));
            }
            entry.all.insert(((id, KERNEL, NO_FILE), no_place));
        }
    }
    Ok(kernel_functions)
}

/// A sample's user frames, innermost first, with its Python frames (when
/// it has any) where the evaluator ran them.
fn user_frames(
    mut user: Vec<(u32, (Frame, Place))>,
    python: Option<Vec<PyFrame>>,
    eval_ids: &BTreeSet<u32>,
) -> Vec<(Frame, Place)> {
    use python_frames::{Merged, merge};
    user.sort_unstable_by_key(|&(depth, _)| depth);
    let Some(py) = python else {
        return user.into_iter().map(|(_, f)| f).collect();
    };
    merge(
        user.into_iter().map(|(_, f)| f),
        |((function, _, _), _)| eval_ids.contains(function),
        &py,
    )
    .into_iter()
    .map(|m| match m {
        Merged::Native(f) => f,
        Merged::Python(p) => (
            (
                p.function.unwrap_or(u32::MAX),
                PYTHON,
                p.file.unwrap_or(NO_FILE),
            ),
            (p.file, p.line, false),
        ),
    })
    .collect()
}

/// Counts one sample of `pid`: a self sample for its innermost frame (the
/// kernel's, for a sample in the kernel; "unknown" for a sample with no
/// frame), and a sample for every function on its stack.
fn count_sample(
    pid: u32,
    stack: SampleStack,
    python: Option<Vec<PyFrame>>,
    eval_ids: &BTreeSet<u32>,
    by_function: &mut HashMap<(u32, Frame), Counts>,
) {
    let unknown = ((u32::MAX, u32::MAX, NO_FILE), (None, None, false));
    let SampleStack {
        user,
        kernel_innermost,
        mut all,
    } = stack;
    let user = user_frames(user, python, eval_ids);
    let innermost = user.first().copied();
    all.extend(user);
    let innermost = kernel_innermost.or(innermost);
    let (frame, place) = innermost.unwrap_or(unknown);
    let c = by_function.entry((pid, frame)).or_default();
    c.own += 1;
    c.places.entry(place).or_default().0 += 1;
    // A function counts once per sample, however often it recurs.
    let mut seen = BTreeSet::new();
    for (frame, place) in all {
        let c = by_function.entry((pid, frame)).or_default();
        if seen.insert(frame) {
            c.total += 1;
        }
        c.places.entry(place).or_default().1 += 1;
    }
    if innermost.is_none() {
        by_function.entry((pid, unknown.0)).or_default().total += 1;
    }
}

/// The row of one function of `pid`: its share of the `grand` samples, its
/// counts, names and the place most of its samples were at.
fn row(
    pid: u32,
    (function, module, _): Frame,
    c: &Counts,
    grand: f64,
    kernel_functions: &[String],
    strings: &crate::report::strings::StringTable,
) -> Vec<Value> {
    let name = |id: u32, fallback: &str| -> String {
        if id == u32::MAX {
            return fallback.to_string();
        }
        strings.get(id).unwrap_or(fallback).to_string()
    };
    let (function, module) = if module == KERNEL {
        (
            format!("[k] {}", kernel_functions[function as usize]),
            "[kernel]".to_string(),
        )
    } else if module == PYTHON {
        (name(function, "[python unknown]"), "[python]".to_string())
    } else {
        (name(function, "[unknown]"), name(module, ""))
    };
    // The place most samples were at (self samples first); ties
    // by file and line, so that the table is the same every time.
    let place = c
        .places
        .iter()
        .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)))
        .map(|(p, _)| *p);
    let source = match place {
        Some((Some(file), line, _)) => match line {
            Some(l) => format!("{}:{l}", name(file, "?")),
            None => name(file, "?"),
        },
        _ => String::new(),
    };
    let inlined = place.is_some_and(|p| p.2);
    vec![
        Value::Fixed(100.0 * c.own as f64 / grand, 1),
        Value::Int(c.own as i64),
        Value::Int(c.total as i64),
        Value::Int(pid as i64),
        Value::Str(function),
        Value::Str(module.rsplit('/').next().unwrap_or(&module).to_string()),
        Value::Str(source),
        Value::Str(if inlined { "yes" } else { "" }.into()),
    ]
}

/// Most self samples first, then most samples; ties by process and what
/// the row shows, not by the ids of functions (numbered in the order
/// samples were read, which is not the same in every run): rows whose
/// keys are equal are equal.
fn sort_rows(rows: &mut [Vec<Value>]) {
    let key = |r: &[Value]| match r {
        [
            _,
            Value::Int(own),
            Value::Int(total),
            Value::Int(pid),
            Value::Str(f),
            Value::Str(m),
            Value::Str(s),
            Value::Str(inlined),
        ] => (
            std::cmp::Reverse(*own),
            std::cmp::Reverse(*total),
            *pid,
            f.clone(),
            m.clone(),
            s.clone(),
            inlined.clone(),
        ),
        _ => unreachable!("rows are made by row()"),
    };
    rows.sort_by_cached_key(|r| key(r));
}
