//! `asys export`: write a report out in other formats (see docs/export.md).
use std::path::{Path, PathBuf};

use clap::Args;

use asys_report::{
    export::{self, ExportType},
    report::{
        container::Container,
        files::{ReplaceError, Replacement},
    },
};

#[derive(Args, Debug)]
#[command(override_usage = "asys export [<args>] <input-file> [<input-file>...]")]
pub struct ExportArgs {
    /// Formats to write, comma separated.
    #[arg(
        short = 't',
        long = "type",
        value_enum,
        value_delimiter = ',',
        required = true,
        value_name = "type[,type...]"
    )]
    pub types: Vec<ExportType>,

    /// Base name of what is written; each format adds its extension
    /// (default: the report's name without .asysrep).
    #[arg(short = 'o', long = "output", value_name = "base")]
    pub output: Option<PathBuf>,

    /// Replace what is already at the target (as `asys profile -f true`).
    #[arg(short = 'f', long = "force-overwrite", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub force: bool,

    /// Tables to write, comma separated (default: all the format has).
    #[arg(
        long = "tables",
        value_delimiter = ',',
        value_name = "table[,table...]"
    )]
    pub tables: Option<Vec<String>>,

    /// collapsed, flamegraph and pprof: only the samples in START/END,
    /// nanoseconds since the session start.
    #[arg(long = "time-range", value_name = "start/end")]
    pub time_range: Option<export::collapsed::TimeRange>,

    /// collapsed, flamegraph and pprof: the stacks of CPU samples, or the
    /// backtraces of API calls (recorded with --hggc-backtrace); pprof also
    /// off-CPU waits (recorded with --cpuctxsw).
    #[arg(long = "stacks", default_value = "samples", value_enum)]
    pub stacks: export::collapsed::Stacks,

    /// pprof: only the stacks of these processes.
    #[arg(
        long = "filter-pid",
        value_delimiter = ',',
        value_name = "pid[,pid...]"
    )]
    pub filter_pid: Vec<u32>,

    /// Every type: only what lies in START/END, ns since the session start
    /// (either side may be left out), as `asys stats --filter-time`.
    #[arg(long = "filter-time", value_name = "start/end")]
    pub filter_time: Option<asys_report::stats::filter::TimeFilter>,

    /// Every type: only what lies in the hgtx range(s)
    /// `name[@domain|@*][/index]`, as `asys stats --filter-hgtx`.
    #[arg(long = "filter-hgtx", value_name = "name[@domain][/index]")]
    pub filter_hgtx: Option<asys_report::stats::filter::RangeFilter>,

    /// Every type: only what lies in the NVTX range(s), as `--filter-hgtx`.
    #[arg(long = "filter-nvtx", value_name = "name[@domain][/index]")]
    pub filter_nvtx: Option<asys_report::stats::filter::RangeFilter>,

    /// kineto: the hgtx/NVTX ranges that are the iterations
    /// (`name[@domain|@*]`, as `--filter-hgtx`), written as
    /// `ProfilerStep#N`, the steps HTA analyzes per iteration.
    #[arg(long = "kineto-steps", value_name = "name[@domain]")]
    pub kineto_steps: Option<asys_report::stats::filter::RangeFilter>,

    /// kineto: HGGC runtime calls named as CUDA's (`hggcLaunchKernel` as
    /// `cudaLaunchKernel`), by which HTA's launch statistics and queue
    /// lengths find the calls that launch device work.
    #[arg(long = "kineto-cuda-names", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub kineto_cuda_names: bool,

    /// The report files (.asysrep). With several, parquetdir writes them all
    /// into one dataset folder (`-o BASE` gives BASE.parquetdir) and the
    /// other types one file per report (`BASE_REPORT.EXT`, or beside each
    /// report without `-o`); see docs/ranks.md.
    #[arg(value_name = "input-file")]
    pub files: Vec<PathBuf>,
}

fn base_of(report: &Path) -> PathBuf {
    match report.extension() {
        Some(e) if e == asys_report::report::EXTENSION => report.with_extension(""),
        _ => report.to_path_buf(),
    }
}

pub fn run(args: ExportArgs) -> anyhow::Result<u8> {
    if args.files.is_empty() {
        anyhow::bail!("no report file given (usage: asys export [<args>] <input-file>)");
    }
    if args.files.len() == 1 {
        return export_one(&args, &args.files[0], None, true);
    }
    let mut names = std::collections::BTreeSet::new();
    for f in &args.files {
        if !names.insert(base_of(f).file_name().map(|n| n.to_owned())) {
            anyhow::bail!(
                "two reports named {}: their exports would collide",
                f.display()
            );
        }
    }
    let shared = args.output.clone();
    // Every report's targets checked before any is written.
    for f in &args.files {
        export_one(&args, f, Some(shared.as_deref()), false)?;
    }
    for f in &args.files {
        export_one(&args, f, Some(shared.as_deref()), true)?;
    }
    Ok(0)
}

/// Where export type `t` of report `path` goes: `-o` (or the report's
/// name) for one report; with several (`shared`), the parquetdir folder is
/// the one `-o` names and every other type gets a file per report.
fn target_of(
    t: ExportType,
    path: &Path,
    output: Option<&Path>,
    shared: Option<Option<&Path>>,
) -> PathBuf {
    match (shared, output) {
        (None, Some(o)) => t.target(o),
        (None, None) => t.target(&base_of(path)),
        (Some(Some(o)), _) if t == ExportType::Parquetdir => t.target(o),
        (Some(Some(o)), _) => {
            let stem = base_of(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut name = o.as_os_str().to_owned();
            name.push("_");
            name.push(stem);
            t.target(Path::new(&name))
        }
        (Some(None), _) => t.target(&base_of(path)),
    }
}

/// Exports one report; with `write` false, only checks its targets.
fn export_one(
    args: &ExportArgs,
    path: &Path,
    shared: Option<Option<&Path>>,
    write: bool,
) -> anyhow::Result<u8> {
    if shared == Some(None) && args.types.contains(&ExportType::Parquetdir) {
        anyhow::bail!("several reports go into one parquetdir dataset: name it with -o BASE");
    }
    let mut types = args.types.clone();
    types.dedup();
    if args.kineto_steps.is_some() && !types.contains(&ExportType::Kineto) {
        anyhow::bail!("--kineto-steps is for --type kineto");
    }
    if !args.filter_pid.is_empty() && !types.contains(&ExportType::Pprof) {
        anyhow::bail!("--filter-pid is for --type pprof");
    }
    if args.stacks == export::collapsed::Stacks::Waits
        && types.iter().any(|&t| t != ExportType::Pprof)
    {
        anyhow::bail!("--stacks waits is for --type pprof only");
    }
    let report = open_filtered(args, path)?;
    // Check every target before writing any, so a refusal writes nothing.
    let targets: Vec<(ExportType, PathBuf)> = types
        .iter()
        .map(|&t| (t, target_of(t, path, args.output.as_deref(), shared)))
        .collect();
    let replace = check_targets(args, &report, &targets)?;
    let tables = Selection::of(args, &report);
    for (t, _) in &targets {
        tables.of_type(*t)?;
    }
    if !write {
        return Ok(0);
    }
    if types.contains(&ExportType::Kineto) {
        warn_of_missing_steps(args, &report, path);
    }
    for dir in replace {
        // remove_dir_all removes a link, never what it points to.
        std::fs::remove_dir_all(&dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    }
    for (t, target) in targets {
        write_one(args, &report, t, &target, tables.of_type(t)?)?;
        eprintln!(
            "Generated:\n    {}",
            crate::sink::report_path::absolute(&target).display()
        );
    }
    Ok(0)
}

/// The report, read through the window of --filter-hgtx/--filter-nvtx (as
/// stats reads it) where given.
fn open_filtered(args: &ExportArgs, path: &Path) -> anyhow::Result<Container> {
    let mut report = Container::open(path)?;
    if let Some(w) = report.recovered_warning() {
        eprintln!("asys: warning: {w}");
    }
    let filters = asys_report::stats::filter::Filters {
        time: args.filter_time,
        hgtx: args.filter_hgtx.clone(),
        nvtx: args.filter_nvtx.clone(),
    };
    if let Some(w) = filters.window(&report)? {
        report.window = Some(std::sync::Arc::new(w));
    }
    Ok(report)
}

/// Refuses a target that exists (without -f) or is not what it must be;
/// returns this report's old partitions of a parquetdir dataset, to be
/// replaced.
fn check_targets(
    args: &ExportArgs,
    report: &Container,
    targets: &[(ExportType, PathBuf)],
) -> anyhow::Result<Vec<PathBuf>> {
    let mut replace = Vec::new();
    for (t, target) in targets {
        if *t == ExportType::Parquetdir {
            // A dataset folder takes many reports: what must not be there
            // already is this report's own partitions.
            asys_report::trusted_path::check(target)?;
            if target.symlink_metadata().is_ok() && !target.is_dir() {
                anyhow::bail!("{} exists and is not a folder", target.display());
            }
            let old = export::parquetdir::Layout::new(target, report).existing()?;
            if !old.is_empty() && !args.force {
                anyhow::bail!(
                    "{} already holds report {} ({} partition(s)); use -f true to replace them",
                    target.display(),
                    report.path.display(),
                    old.len()
                );
            }
            replace.extend(old);
            continue;
        }
        crate::sink::report_path::check_destination(target, args.force).map_err(|e| match e {
            crate::sink::report_path::OutputError::Exists(p) => anyhow::anyhow!(
                "{} already exists; use -f true to overwrite it",
                p.display()
            ),
            e => e.into(),
        })?;
    }
    Ok(replace)
}

/// The tables --tables selects: nsys's names for sqlite, the report's for
/// every other type (each an error where --tables names an unknown one).
struct Selection {
    sqlite: Result<Vec<String>, export::ExportError>,
    report: Result<Vec<String>, export::ExportError>,
}

impl Selection {
    fn of(args: &ExportArgs, report: &Container) -> Self {
        let sqlite_all = export::sqlite::tables(report);
        let sqlite_all: Vec<&str> = sqlite_all.iter().map(String::as_str).collect();
        let report_all: Vec<&str> = report.tables().collect();
        let owned = |r: Result<Vec<&str>, export::ExportError>| {
            r.map(|v| v.into_iter().map(str::to_owned).collect())
        };
        Self {
            sqlite: owned(selected(&sqlite_all, args.tables.as_deref())),
            report: owned(selected(&report_all, args.tables.as_deref())),
        }
    }

    /// The selected tables for type `t`.
    fn of_type(&self, t: ExportType) -> anyhow::Result<Vec<&str>> {
        let chosen = match t {
            ExportType::Sqlite => &self.sqlite,
            _ => &self.report,
        };
        chosen
            .as_ref()
            .map(|v| v.iter().map(String::as_str).collect())
            .map_err(clone_error)
    }
}

/// `--kineto-steps` that names no range writes no step: said, not refused
/// (the trace is whole without them).
fn warn_of_missing_steps(args: &ExportArgs, report: &Container, path: &Path) {
    let Some(steps) = &args.kineto_steps else {
        return;
    };
    let found = [
        asys_report::report::read::ranges::HGTX,
        asys_report::report::read::ranges::NVTX,
    ]
    .into_iter()
    .filter(|f| report.tables().any(|t| t == f.table))
    .any(|f| steps.spans(report, f).is_ok());
    if !found {
        eprintln!(
            "asys: warning: --kineto-steps {steps} names no hgtx or NVTX range of {}: the trace has no ProfilerStep",
            path.display()
        );
    }
}

/// Writes type `t` of `report` (its tables `tables`) to `target`.
fn write_one(
    args: &ExportArgs,
    report: &Container,
    t: ExportType,
    target: &Path,
    tables: Vec<&str>,
) -> anyhow::Result<()> {
    let tables = &tables[..];
    match t {
        ExportType::Sqlite => {
            // Written beside the target and renamed over it, so the
            // target is never half-written and an existing one is only
            // replaced once the new one is whole.
            replaced(Replacement::of(target).make(|tmp| {
                export::sqlite::export(report, tmp, tables).map_err(anyhow::Error::from)
            }))?;
        }
        ExportType::Parquetdir => {
            let layout = export::parquetdir::Layout::new(target, report);
            export::parquetdir::export(report, &layout, tables)?;
        }
        ExportType::Collapsed | ExportType::Flamegraph => write_stacks(args, report, t, target)?,
        ExportType::Kineto => {
            let options = export::kineto::Options {
                steps: args.kineto_steps.clone(),
                tables: Some(tables.iter().map(|t| t.to_string()).collect()),
                cuda_names: args.kineto_cuda_names,
            };
            write_streamed(target, |out, path| {
                export::kineto::export(report, &options, out, path)
            })?;
        }
        ExportType::Pprof => {
            let options = export::pprof::Options {
                stacks: args.stacks,
                range: args.time_range,
                pids: args.filter_pid.iter().copied().collect(),
            };
            write_streamed(target, |out, path| {
                export::pprof::export(report, &options, out, path)
            })?;
        }
        ExportType::Perfetto => write_streamed(target, |out, path| {
            export::perfetto::export(report, tables, out, path)
        })?,
        ExportType::Jsonlines => write_streamed(target, |out, path| {
            export::jsonlines::export(report, tables, out, path)
        })?,
        ExportType::Arrow => {
            // Made beside the target and renamed over it once whole; an
            // old folder (or a link: removed, never followed) goes only
            // then, and only with -f (checked above).
            replaced(Replacement::of(target).make(|tmp| {
                std::fs::create_dir(tmp).map_err(|e| anyhow::anyhow!("{}: {e}", tmp.display()))?;
                export::arrow_ipc::export(report, tmp, tables).map_err(anyhow::Error::from)
            }))?;
        }
    }
    Ok(())
}

/// The folded stacks (`collapsed`) or their flame graph (`flamegraph`).
fn write_stacks(
    args: &ExportArgs,
    report: &Container,
    t: ExportType,
    target: &Path,
) -> anyhow::Result<()> {
    let what = args.stacks;
    let stacks = export::collapsed::folded_of(report, args.time_range, what)?;
    let mut bytes = Vec::new();
    if t == ExportType::Collapsed {
        export::collapsed::write_collapsed(&stacks, &mut bytes)?;
    } else {
        let title = match what {
            export::collapsed::Stacks::Samples => "CPU samples",
            export::collapsed::Stacks::Api => "API calls",
            export::collapsed::Stacks::Waits => "off-CPU waits",
        };
        let title = format!("{title} of {}", report.path.display());
        export::collapsed::write_flamegraph(&stacks, &title, what, &mut bytes)
            .map_err(|e| anyhow::anyhow!("drawing the flame graph: {e}"))?;
    }
    write_new(target, &bytes)
}

/// The tables `--tables` names (all of `available` when absent), in
/// `available`'s order; an unknown name is an error. Names match without
/// regard to case, as nsys's table names are often typed.
fn selected<'a>(
    available: &[&'a str],
    wanted: Option<&[String]>,
) -> Result<Vec<&'a str>, export::ExportError> {
    let Some(wanted) = wanted else {
        return Ok(available.to_vec());
    };
    let mut out = Vec::new();
    for w in wanted.iter().map(|w| w.trim()).filter(|w| !w.is_empty()) {
        match available.iter().find(|a| a.eq_ignore_ascii_case(w)) {
            Some(a) => out.push(*a),
            None => {
                return Err(export::ExportError::UnknownTable(
                    w.to_string(),
                    available.join(", "),
                ));
            }
        }
    }
    Ok(available
        .iter()
        .copied()
        .filter(|a| out.contains(a))
        .collect())
}

fn clone_error(e: &export::ExportError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Writes `bytes` to a new file beside `target` and renames it over it
/// (never writing through a link at the target); `asys stats -o` too.
pub(super) fn write_new(target: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    write_streamed(target, |mut out, path| {
        out.write_all(bytes)
            .and_then(|()| out.flush())
            .map_err(|e| export::ExportError::io(path, e))
    })
}

/// Streams what `write` writes into a new file beside `target`, and
/// renames that over `target` once whole (never writing through a link at
/// the target, never leaving a half-written one: [`Replacement`]).
pub(super) fn write_streamed(
    target: &Path,
    write: impl FnOnce(std::io::BufWriter<&mut std::fs::File>, &Path) -> Result<(), export::ExportError>,
) -> anyhow::Result<()> {
    replaced(
        Replacement::of(target)
            .write(|file| write(std::io::BufWriter::with_capacity(1 << 20, file), target)),
    )
}

/// A [`Replacement`]'s outcome with asys's messages: `PATH: error` for the
/// file system's errors, the writer's own otherwise.
fn replaced<T, E: Into<anyhow::Error>>(r: Result<T, ReplaceError<E>>) -> anyhow::Result<T> {
    r.map_err(|e| match e {
        ReplaceError::Io { path, source } => anyhow::anyhow!("{}: {source}", path.display()),
        ReplaceError::Write(e) => e.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_picked_by_name_in_the_formats_order() {
        let all = ["A", "B", "C"];
        let got = selected(&all, Some(&["c".into(), "A".into()])).unwrap();
        assert_eq!(got, ["A", "C"]);
        assert!(selected(&all, Some(&["D".into()])).is_err());
        assert_eq!(selected(&all, None).unwrap(), all);
    }

    #[test]
    fn the_default_base_is_the_reports_name() {
        assert_eq!(base_of(Path::new("d/r.asysrep")), PathBuf::from("d/r"));
    }
}
