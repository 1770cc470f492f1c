//! `--type collapsed` (folded stacks, `outer;...;inner COUNT`, what
//! flamegraph.pl, inferno and speedscope read) and `--type flamegraph`
//! (that, drawn as an SVG by inferno) from the report's CPU samples or
//! from the backtraces of its API calls (`--stacks`).
//! Samples taken in the kernel end with their kernel frames (`[k]
//! function`), as in `cpu_sample_sum`.
use std::{
    collections::{BTreeMap, HashMap},
    io::Write,
};

use super::ExportError;
use crate::report::read::{processes::Commands, python_frames, stacks::sample_kernel_stacks};
use crate::report::{
    container::Container,
    reader,
    schema::{self, cpu_sample_stacks as st, cpu_samples as cs},
};

/// A sample with no stack (its unwind failed, or stacks were not kept)
/// still counts, under this one frame.
const NO_STACK: &str = "[no stack]";

/// `--time-range A/B`: nanoseconds since the session start, A included and
/// B not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    pub start: i64,
    pub end: i64,
}

impl std::str::FromStr for TimeRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected START/END in nanoseconds, got '{s}'");
        let (a, b) = s.split_once('/').ok_or_else(bad)?;
        let (start, end) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if end <= start {
            return Err(format!("the range '{s}' ends before it starts"));
        }
        Ok(Self { start, end })
    }
}

/// Whose stacks a flame graph draws.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Stacks {
    /// CPU samples (`-s`): where the threads spent their CPU time.
    #[default]
    Samples,
    /// The backtraces of API calls (`--hggc-backtrace`): which code paths
    /// made the calls, each call counted once, its API name the leaf.
    Api,
    /// Off-CPU waits (`--cpuctxsw`), each from a thread's switch-out to its
    /// next switch-in, with its kernel and Python stacks there
    /// (`--type pprof` only).
    Waits,
}

impl Stacks {
    /// What the flame graph counts, for its title and tooltips.
    pub fn count_name(self) -> &'static str {
        match self {
            Self::Samples => "samples",
            Self::Api => "calls",
            Self::Waits => "waits",
        }
    }
}

/// Folded stacks of `what`, each with its count, in name order.
pub fn folded_of(
    report: &Container,
    range: Option<TimeRange>,
    what: Stacks,
) -> Result<BTreeMap<String, u64>, ExportError> {
    match what {
        Stacks::Samples => folded(report, range),
        Stacks::Api => folded_calls(report, range),
        Stacks::Waits => Err(ExportError::Unsupported(
            "--stacks waits is written by --type pprof only",
        )),
    }
}

/// Folded stacks of the API calls (every `*_api` table) with a recorded
/// backtrace that start in `range`: the process's command outermost, then
/// the backtrace, then the API's name. A call with no backtrace is left
/// out: these are the code paths of the calls that were unwound.
pub fn folded_calls(
    report: &Container,
    range: Option<TimeRange>,
) -> Result<BTreeMap<String, u64>, ExportError> {
    use schema::{api, api_stacks as ast};
    let origin = report.metadata.start_monotonic_ns;
    let inside = |ts: i64| range.is_none_or(|r| (r.start..r.end).contains(&(ts - origin)));
    let strings = reader::string_table(report)?;
    let name = |id: u32| strings.get(id).unwrap_or("[unknown]");
    let mut stacks: HashMap<(u32, u32, i64), Vec<(u32, u32)>> = HashMap::new();
    let cols = [
        ast::PID,
        ast::TID,
        ast::CALL_START,
        ast::DEPTH,
        ast::FUNCTION_ID,
    ];
    for b in ast::scan(report, &cols)? {
        let b = b?;
        let v = ast::View(&b);
        let (pid, tid, ts) = (v.pid()?, v.tid()?, v.call_start()?);
        let (depth, f) = (v.depth()?, v.function_id()?);
        for i in 0..b.num_rows() {
            if inside(ts[i]) {
                stacks
                    .entry((pid[i], tid[i], ts[i]))
                    .or_default()
                    .push((depth[i], f[i]));
            }
        }
    }
    let commands = Commands::read(report)?;
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    let tables: Vec<&str> = report.tables().filter(|t| t.ends_with("_api")).collect();
    for table in tables {
        for b in api::scan(
            report,
            table,
            &[api::PID, api::TID, api::START, api::NAME_ID],
        )? {
            let b = b?;
            let v = api::View(&b);
            let (pid, tid, start, api_name) = (v.pid()?, v.tid()?, v.start()?, v.name_id()?);
            for i in 0..b.num_rows() {
                let Some(frames) = stacks.get_mut(&(pid[i], tid[i], start[i])) else {
                    continue;
                };
                let command = commands
                    .process(pid[i])
                    .map(|c| name(c).to_string())
                    .unwrap_or_else(|| format!("[{}]", pid[i]));
                let mut line = sanitize(&command);
                frames.sort_unstable_by_key(|&(depth, _)| std::cmp::Reverse(depth));
                for &(_, f) in frames.iter() {
                    line.push(';');
                    line.push_str(&sanitize(name(f)));
                }
                line.push(';');
                line.push_str(&sanitize(name(api_name[i])));
                *out.entry(line).or_default() += 1;
            }
        }
    }
    Ok(out)
}

/// Folded stacks of the samples in `range` (all when None), each with its
/// count, in name order. The process's command is the outermost frame, so
/// the processes of a report are side by side.
pub fn folded(
    report: &Container,
    range: Option<TimeRange>,
) -> Result<BTreeMap<String, u64>, ExportError> {
    let origin = report.metadata.start_monotonic_ns;
    let inside = |ts: i64| range.is_none_or(|r| (r.start..r.end).contains(&(ts - origin)));
    let strings = reader::string_table(report)?;
    let name = |id: u32| strings.get(id).unwrap_or("[unknown]");
    // Frames per sample, (depth, function) in any order.
    let mut stacks: HashMap<(u32, u32, i64), Vec<(u32, u32)>> = HashMap::new();
    let cols = [st::PID, st::TID, st::TS, st::DEPTH, st::FUNCTION_ID];
    for b in st::scan(report, &cols)? {
        let b = b?;
        let v = st::View(&b);
        let (pid, tid, ts) = (v.pid()?, v.tid()?, v.ts()?);
        let (depth, f) = (v.depth()?, v.function_id()?);
        for i in 0..b.num_rows() {
            if inside(ts[i]) {
                stacks
                    .entry((pid[i], tid[i], ts[i]))
                    .or_default()
                    .push((depth[i], f[i]));
            }
        }
    }
    let mut kernel = sample_kernel_stacks(report, &strings)?;
    let mut python = python_frames::sample_python_frames(report)?;
    let commands = Commands::read(report)?;
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for b in cs::scan(report, &[cs::TS, cs::PID, cs::TID])? {
        let b = b?;
        let v = cs::View(&b);
        let (ts, pid, tid) = (v.ts()?, v.pid()?, v.tid()?);
        for i in 0..b.num_rows() {
            if !inside(ts[i]) {
                continue;
            }
            let command = commands
                .process(pid[i])
                .map(|c| name(c).to_string())
                .unwrap_or_else(|| format!("[{}]", pid[i]));
            let mut line = sanitize(&command);
            match stacks.get_mut(&(pid[i], tid[i], ts[i])) {
                Some(frames) if !frames.is_empty() => {
                    frames.sort_unstable_by_key(|&(depth, _)| depth);
                    // Python frames where the evaluator ran them
                    // (`--python-sampling`; read::python_frames).
                    let py = python.remove(&(tid[i], ts[i])).unwrap_or_default();
                    let merged = python_frames::merge(
                        frames.iter().map(|&(_, f)| f),
                        |&f| name(f) == python_frames::EVAL_FRAME,
                        &py,
                    );
                    // Outermost first.
                    for m in merged.iter().rev() {
                        line.push(';');
                        match m {
                            python_frames::Merged::Native(f) => line.push_str(&sanitize(name(*f))),
                            python_frames::Merged::Python(p) => {
                                line.push_str(&sanitize(&python_frames::frame_name(p, &strings)))
                            }
                        }
                    }
                }
                _ => {
                    line.push(';');
                    line.push_str(NO_STACK);
                }
            }
            if let Some(functions) = kernel.remove(&(tid[i], ts[i])) {
                // Innermost last, below the user frames.
                for f in functions.iter().rev() {
                    line.push_str(";[k] ");
                    line.push_str(&sanitize(f));
                }
            }
            *out.entry(line).or_default() += 1;
        }
    }
    Ok(out)
}

/// A frame name as a folded line can hold it: `;` separates frames and a
/// line ends each stack, so neither may be in a name; and as XML can hold
/// it, for the flame graph: controls (a line break included), NUL and the
/// other characters XML refuses are escaped visibly (`\x00`,
/// [`crate::text_safety::escaped_name`]).
fn sanitize(name: &str) -> String {
    crate::text_safety::escaped_name(&name.replace(';', ":")).into_owned()
}

/// The folded lines, one a line.
pub fn write_collapsed(
    stacks: &BTreeMap<String, u64>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    for (line, n) in stacks {
        writeln!(out, "{line} {n}")?;
    }
    Ok(())
}

/// The flame graph of `stacks` as an SVG.
pub fn write_flamegraph(
    stacks: &BTreeMap<String, u64>,
    title: &str,
    what: Stacks,
    out: &mut impl Write,
) -> Result<(), String> {
    // Names are escaped where the stacks are folded; stacks from elsewhere,
    // and the title (a report's path), are too: one character XML refuses
    // (a NUL) and a browser shows nothing but the error.
    let xml = crate::text_safety::escaped_name;
    let lines: Vec<String> = stacks
        .iter()
        .map(|(l, n)| format!("{} {n}", xml(l)))
        .collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = xml(title).into_owned();
    options.count_name = what.count_name().into();
    if lines.is_empty() {
        // inferno refuses an empty profile; an empty graph says it plainly.
        options.title = format!("{} (no {})", xml(title), what.count_name());
        let empty = [format!("{NO_STACK} 0")];
        return inferno::flamegraph::from_lines(
            &mut options,
            empty.iter().map(String::as_str),
            out,
        )
        .map_err(|e| e.to_string());
    }
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_ranges_parse_and_refuse_nonsense() {
        assert_eq!(
            "10/20".parse::<TimeRange>().unwrap(),
            TimeRange { start: 10, end: 20 }
        );
        assert!("20/10".parse::<TimeRange>().is_err());
        assert!("x/10".parse::<TimeRange>().is_err());
        assert!("10".parse::<TimeRange>().is_err());
    }

    #[test]
    fn names_cannot_break_a_folded_line() {
        assert_eq!(sanitize("a;b\nc\rd"), "a:b\\x0ac\\x0dd");
    }

    #[test]
    fn a_flame_graph_holds_no_character_xml_refuses() {
        // A Python class body named "\0" (gzip.py's, under PyTorch), a
        // name with U+FFFF, a title with a control.
        let stacks = BTreeMap::from([
            (
                format!("app;{} (gzip.py:1);f\u{ffff}", sanitize("\0")),
                2u64,
            ),
            ("app;g\u{1}h".to_string(), 1u64),
        ]);
        let mut svg = Vec::new();
        write_flamegraph(&stacks, "t\u{7}", Stacks::Samples, &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        let bad: Vec<char> = svg
            .chars()
            .filter(|&c| crate::text_safety::invalid_in_xml(c))
            .collect();
        assert!(bad.is_empty(), "{bad:?}");
        assert!(svg.contains("\\x00 (gzip.py:1)"), "{svg}");
        assert!(svg.contains("f\\u{ffff}") && svg.contains("g\\x01h"));
    }

    #[test]
    fn a_flame_graph_is_svg() {
        let stacks = BTreeMap::from([("app;main;burn".to_string(), 3u64)]);
        let mut svg = Vec::new();
        write_flamegraph(&stacks, "t", Stacks::Samples, &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("<svg") && svg.contains("burn"));
    }
}
