//! Naming again the frames a report's stack tables left without source
//! (`asys symbolize REPORT`): a stripped binary's frames are addresses, or
//! functions without file and line, until its debug file is found, on this
//! machine or another, by the build id and file offsets the report kept
//! (`modules`): the binary itself need not be there.
use std::collections::{BTreeSet, HashMap};

use asys_report::report::{rows::StackFrameRow, strings::StringTable};

use super::{
    ProcessMaps,
    debug_info::Roots,
    naming::{self, Key},
    unwind::{Frame, ModuleMapping, Unwinder},
};

/// What naming one table again did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Renamed {
    /// The distinct (pid, pc) frames that got names or source lines.
    pub frames: usize,
    /// The build ids (hex) whose debug files debuginfod gave.
    pub debuginfod: BTreeSet<String>,
}

/// One frame of a stack as the table holds it: its rows (the functions
/// inlined at its pc, then the one they were inlined into).
struct Run {
    rows: Vec<StackFrameRow>,
    key: Option<Key>,
}

/// Names again the frames of `rows` (one stack table, every stack's rows)
/// that have no source file: each is looked up at its file offset in the
/// mapping `maps` says held its pc (the recorded path's file when it is
/// here and of the recorded build, else the recorded build id's debug
/// file), and its rows replaced where that gives a source file or a name
/// for an address. `sampled`: each stack's first frame is a sampled
/// instruction (CPU samples), not a return address. Stacks keep their
/// order; depths are numbered again.
pub fn name_again(
    rows: Vec<StackFrameRow>,
    sampled: bool,
    maps: &ProcessMaps,
    strings: &mut StringTable,
    roots: &Roots,
) -> (Vec<StackFrameRow>, Renamed) {
    // The stacks, by (pid, tid, start), in the order first seen.
    let mut order: Vec<(u32, u32, i64)> = Vec::new();
    let mut stacks: HashMap<(u32, u32, i64), Vec<StackFrameRow>> = HashMap::new();
    for r in rows {
        let k = (r.pid, r.tid, r.call_start);
        let stack = stacks.entry(k).or_default();
        if stack.is_empty() {
            order.push(k);
        }
        stack.push(r);
    }
    let mut runs_of: Vec<Vec<Run>> = Vec::with_capacity(order.len());
    let mut wanted: BTreeSet<Key> = BTreeSet::new();
    for k in &order {
        let mut rows = stacks.remove(k).unwrap_or_default();
        rows.sort_by_key(|r| r.depth);
        let mut runs: Vec<Run> = Vec::new();
        let mut current: Vec<StackFrameRow> = Vec::new();
        for r in rows {
            let last = !r.inlined;
            current.push(r);
            if last {
                runs.push(Run {
                    rows: std::mem::take(&mut current),
                    key: None,
                });
            }
        }
        if !current.is_empty() {
            runs.push(Run {
                rows: current,
                key: None,
            });
        }
        for (n, run) in runs.iter_mut().enumerate() {
            let [row] = run.rows.as_slice() else {
                continue;
            };
            if row.file_id.is_some() {
                continue;
            }
            let key = (row.pid, row.pc, sampled && n == 0);
            wanted.insert(key);
            run.key = Some(key);
        }
        runs_of.push(runs);
    }
    let named = name(wanted, maps, strings, roots);
    let mut renamed = Renamed {
        frames: 0,
        debuginfod: named.debuginfod,
    };
    let mut better: HashMap<Key, Option<&[Frame]>> = HashMap::new();
    let mut out = Vec::new();
    for runs in runs_of {
        let mut depth = 0u32;
        for run in runs {
            let new = run.key.and_then(|k| {
                *better.entry(k).or_insert_with(|| {
                    let frames = named.frames.get(&k)?;
                    let old = strings.get(run.rows[0].function_id).unwrap_or("");
                    improves(frames, old).then(|| {
                        renamed.frames += 1;
                        frames.as_slice()
                    })
                })
            });
            match new {
                Some(frames) => {
                    let first = &run.rows[0];
                    for f in frames {
                        out.push(StackFrameRow {
                            depth,
                            function_id: strings.intern(&f.function),
                            file_id: f.file.as_deref().map(|f| strings.intern(f)),
                            line: f.line,
                            module_id: strings.intern(&f.module),
                            inlined: f.inlined,
                            ..first.clone()
                        });
                        depth += 1;
                    }
                }
                None => {
                    for r in run.rows {
                        out.push(StackFrameRow { depth, ..r });
                        depth += 1;
                    }
                }
            }
        }
    }
    (out, renamed)
}

/// Whether `frames` say more than the row named `old`: a source file, or
/// a name where the row had an address.
fn improves(frames: &[Frame], old: &str) -> bool {
    let Some(first) = frames.first() else {
        return false;
    };
    frames.iter().any(|f| f.file.is_some())
        || (old.starts_with("0x") && !first.function.starts_with("0x"))
}

/// The frames of `wanted`, named with the recorded mappings (files read at
/// their recorded paths: the processes are gone).
fn name(
    wanted: BTreeSet<Key>,
    maps: &ProcessMaps,
    strings: &StringTable,
    roots: &Roots,
) -> naming::Named {
    let mut by_pid: HashMap<u32, Vec<ModuleMapping>> = HashMap::new();
    for &(pid, _, _) in &wanted {
        by_pid
            .entry(pid)
            .or_insert_with(|| maps.newest(pid, strings, |_, path| path.to_string()));
    }
    let wanted = wanted
        .into_iter()
        .map(|k| {
            let m = by_pid[&k.0].iter().find(|m| k.1 >= m.start && k.1 < m.end);
            (k, m, true)
        })
        .collect();
    naming::name_frames(&mut Unwinder::default(), wanted, roots)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn frame(function: &str, file: Option<&str>) -> Frame {
        Frame {
            function: Arc::from(function),
            file: file.map(Arc::from),
            line: file.map(|_| 3),
            module: Arc::from("/bin/x"),
            inlined: false,
        }
    }

    #[test]
    fn only_a_source_file_or_a_name_for_an_address_improves_a_frame() {
        assert!(improves(&[frame("f", Some("x.c"))], "f"));
        assert!(improves(&[frame("f", None)], "0x401000"));
        assert!(!improves(&[frame("f", None)], "f"));
        assert!(!improves(&[frame("0x401000", None)], "0x401000"));
        assert!(!improves(&[], "0x401000"));
    }
}
