//! `asys stats`: print summaries of a report.
use std::{
    io::Write,
    path::{Path, PathBuf},
};

use clap::Args;

use asys_report::{
    report::{ReportError, container::Container},
    stats::{
        self, filter,
        format::{Format, Style, Table, TimeUnit},
    },
};

#[derive(Args, Debug)]
#[command(
    override_usage = "asys stats [<args>] <input-file> [<input-file>...]\n       asys stats [<args>] --compare <A> <B>"
)]
pub struct StatsArgs {
    /// Reports to print, comma separated (`help` lists them; see docs/stats.md)
    /// [default: hggc_api_sum; with --compare: hggc_api_sum,hggc_ppu_kern_sum,hgtx_sum].
    #[arg(short = 'r', long = "report", value_name = "name[,name...]")]
    pub report: Option<String>,

    /// Output format.
    #[arg(short = 'f', long = "format", default_value = "column", value_enum)]
    pub format: Format,

    /// Where reports go: `-` or `console` (stdout), `@command` (each report
    /// piped into a shell command), or a base name giving one file
    /// `<base>_<report>.<ext>` per report.
    #[arg(short = 'o', long = "output", value_name = "-|console|@command|base")]
    pub output: Option<Destination>,

    /// Replace files `--output` names that already exist.
    #[arg(long = "force-overwrite", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub force_overwrite: bool,

    /// Only what lies in START/END, ns since the session start (either side
    /// may be left out).
    #[arg(long = "filter-time", value_name = "start/end")]
    pub filter_time: Option<filter::TimeFilter>,

    /// Only what lies in the hgtx range(s) `name[@domain|@*][/index]`.
    #[arg(long = "filter-hgtx", value_name = "name[@domain][/index]")]
    pub filter_hgtx: Option<filter::RangeFilter>,

    /// Only what lies in the NVTX range(s) `name[@domain|@*][/index]`.
    #[arg(long = "filter-nvtx", value_name = "name[@domain][/index]")]
    pub filter_nvtx: Option<filter::RangeFilter>,

    /// Unit of time columns.
    #[arg(long = "timeunit", default_value = "nsec", value_enum)]
    pub timeunit: TimeUnit,

    /// Describe the reports: no argument lists them, NAME describes one, ALL every one.
    #[arg(long = "help-reports", value_name = "NAME|ALL", num_args = 0..=1, default_missing_value = "")]
    pub help_reports: Option<String>,

    /// Compare two reports: per API, kernel and range, the change from A to B
    /// in count, total, mean and median, largest change of total first.
    #[arg(long = "compare", num_args = 2, value_names = ["A", "B"], conflicts_with = "files")]
    pub compare: Option<Vec<PathBuf>>,

    /// The report files (.asysrep, or an SQLite file `asys export` wrote);
    /// several are read as one job's ranks (see docs/ranks.md).
    #[arg(value_name = "input-file")]
    pub files: Vec<PathBuf>,
}

/// Where `--output` sends the reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Console,
    /// `@command`: run with `sh -c` once per report, the report on its stdin.
    Command(String),
    /// `<base>_<report>.<ext>` per report.
    Files(PathBuf),
}

impl std::str::FromStr for Destination {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "" => return Err("an empty --output".into()),
            "-" | "console" => Self::Console,
            s => match s.strip_prefix('@') {
                Some("") => return Err("no command after '@' in --output".into()),
                Some(c) => Self::Command(c.to_string()),
                None => Self::Files(PathBuf::from(s)),
            },
        })
    }
}

/// Reports computed when `--report` is not given.
const DEFAULT_REPORTS: &str = "hggc_api_sum";
const DEFAULT_COMPARE: &str = "hggc_api_sum,hggc_ppu_kern_sum,hgtx_sum";

/// What one `asys stats` run does, from its options.
#[derive(Debug, Clone)]
pub struct Settings {
    pub reports: Vec<String>,
    pub format: Format,
    pub style: Style,
    pub destination: Destination,
    pub force: bool,
    pub filters: filter::Filters,
}

impl Settings {
    fn of(args: &StatsArgs) -> anyhow::Result<Self> {
        let default = if args.compare.is_some() {
            DEFAULT_COMPARE
        } else {
            DEFAULT_REPORTS
        };
        let reports: Vec<String> = args
            .report
            .as_deref()
            .unwrap_or(default)
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect();
        if reports.is_empty() {
            anyhow::bail!("no report named (--report NAME[,NAME...])");
        }
        // Every name checked before any report is read: a typo costs nothing.
        if let Some(bad) = reports
            .iter()
            .find(|n| stats::find(n).is_none() && stats::desync::find(n).is_none())
        {
            anyhow::bail!("unknown report '{bad}' (available: {})", names().join(", "));
        }
        Ok(Self {
            reports,
            format: args.format,
            style: Style {
                time_unit: args.timeunit,
            },
            destination: args.output.clone().unwrap_or(Destination::Console),
            force: args.force_overwrite,
            filters: filter::Filters {
                time: args.filter_time,
                hgtx: args.filter_hgtx.clone(),
                nvtx: args.filter_nvtx.clone(),
            },
        })
    }
}

/// Every report name: those of one report, then those of a set of ranks.
fn names() -> Vec<&'static str> {
    let one = stats::REPORTS.iter().map(|(n, _)| *n);
    one.chain(stats::desync::SET_REPORTS.iter().map(|(n, _)| *n))
        .collect()
}

pub fn run(args: StatsArgs) -> anyhow::Result<u8> {
    if let Some(which) = &args.help_reports {
        return help_reports(which);
    }
    // `--report help`: the names, one a line.
    if args
        .report
        .as_deref()
        .is_some_and(|r| r.split(',').any(|n| n.trim() == "help"))
    {
        let mut out = std::io::stdout().lock();
        for name in names() {
            writeln!(out, "{name}")?;
        }
        return Ok(0);
    }
    let settings = Settings::of(&args)?;
    let tables = match &args.compare {
        Some(ab) => {
            let [a, b] = &ab[..] else {
                anyhow::bail!("--compare takes two reports");
            };
            compare(&settings, &mut open(a)?, &mut open(b)?)?
        }
        None => {
            let Some(path) = args.files.first() else {
                anyhow::bail!("no report file given (usage: asys stats [<args>] <input-file>)");
            };
            let of_a_set = |n: &String| stats::desync::find(n).is_some();
            if args.files.len() > 1 || settings.reports.iter().any(of_a_set) {
                let tables = super::ranks::stats(&args.files, &settings)?;
                emit(&settings, &tables)?;
                return Ok(0);
            }
            let mut report = open(path)?;
            let tables = compute(&settings, &mut report)?;
            if let Some(note) = stats::drops_note(&report) {
                eprintln!("asys: warning: {note}");
            }
            tables
        }
    };
    emit(&settings, &tables)?;
    Ok(0)
}

/// Opens `path`: a report, or an SQLite file `asys export` wrote (read
/// back into a temporary report).
pub fn open(path: &Path) -> anyhow::Result<Container> {
    let report = asys_report::import::open(path)?;
    if let Some(w) = report.recovered_warning() {
        eprintln!("asys: warning: {w}");
    }
    // An SQLite input is read as it is on disk, never changed: what a
    // writer left in its write-ahead log is said, not applied.
    if !report.unavailable.is_empty()
        && let Some(wal) = asys_report::import::sqlite::unapplied_wal(path)
    {
        eprintln!(
            "asys: warning: {} was not read: changes in it that were never written into {} are \
             not in these results (asys opens SQLite inputs immutable and applies no log)",
            wal.display(),
            path.display()
        );
    }
    Ok(report)
}

/// The reports `settings` names, computed on `report` through its filters.
/// Every table is computed before any is printed, so an error prints
/// nothing half-way; a streamed table (a trace) has checked its columns by
/// then, and only a table damaged within can still end its output early
/// (a file target is then not renamed into place).
pub fn compute(
    settings: &Settings,
    report: &mut Container,
) -> anyhow::Result<Vec<(String, Table)>> {
    if let Some(w) = settings.filters.window(report)? {
        report.window = Some(std::sync::Arc::new(w));
    }
    settings
        .reports
        .iter()
        .map(|name| {
            let f = stats::find(name).expect("checked in Settings::of");
            let table = f(report).map_err(|e| lacking(&format!("report {name}"), report, e))?;
            Ok((name.clone(), table))
        })
        .collect()
}

/// What is wrong when `what` (a report, rules) fails on `report`: for a
/// file read back from SQLite, the data the export does not hold.
pub fn lacking(what: &str, report: &Container, e: ReportError) -> anyhow::Error {
    let imported = !report.unavailable.is_empty();
    match e {
        ReportError::Unavailable { table, .. } => anyhow::anyhow!(
            "{what} needs table {table}, which an SQLite export does not hold ({})",
            report.path.display()
        ),
        ReportError::Column {
            table,
            column,
            problem: "missing",
            ..
        } if imported => anyhow::anyhow!(
            "{what} needs column {column} of table {table}, which an SQLite export does not hold ({})",
            report.path.display()
        ),
        e => e.into(),
    }
}

/// The compare tables of `settings`'s reports, from A to B.
fn compare(
    settings: &Settings,
    a: &mut Container,
    b: &mut Container,
) -> anyhow::Result<Vec<(String, Table)>> {
    // A comparison matches rows by name: streamed tables are taken whole.
    let mut ta = compute(settings, a)?;
    let mut tb = compute(settings, b)?;
    for (_, t) in ta.iter_mut().chain(tb.iter_mut()) {
        t.hold()?;
    }
    ta.iter()
        .zip(&tb)
        .map(|((name, x), (_, y))| {
            Ok((
                format!("{name}_compare"),
                stats::compare::compare(name, x, y)?,
            ))
        })
        .collect()
}

/// The text of `table` in `settings`'s format and style.
fn render(settings: &Settings, table: &Table) -> std::io::Result<Vec<u8>> {
    let mut b = Vec::new();
    write_table(settings, table, &mut b)?;
    Ok(b)
}

/// Writes `table` in `settings`'s format and style to `out`.
fn write_table(settings: &Settings, table: &Table, out: &mut dyn Write) -> std::io::Result<()> {
    stats::format::write_styled(out, table, settings.format, settings.style)
}

/// The file extension of a format, as nsys names its per-report files.
fn extension(f: Format) -> &'static str {
    match f {
        Format::Csv => "csv",
        Format::Tsv => "tsv",
        Format::Json => "json",
        Format::Column | Format::Table => "txt",
    }
}

/// `<base>_<report>.<ext>`.
fn target(base: &Path, report: &str, format: Format) -> PathBuf {
    let mut name = base.as_os_str().to_owned();
    name.push(format!("_{report}.{}", extension(format)));
    PathBuf::from(name)
}

/// Sends each table where `settings` says.
fn emit(settings: &Settings, tables: &[(String, Table)]) -> anyhow::Result<()> {
    match &settings.destination {
        Destination::Console => {
            let mut out = std::io::stdout().lock();
            for (_, t) in tables {
                if t.stream.is_some() {
                    // Too large to hold as text: written as it is made.
                    let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut out);
                    write_table(settings, t, &mut w)?;
                    w.flush()?;
                } else {
                    out.write_all(&render(settings, t)?)?;
                }
            }
            out.flush()?;
        }
        Destination::Command(cmd) => {
            for (name, t) in tables {
                pipe(cmd, name, |w| write_table(settings, t, w))?;
            }
        }
        Destination::Files(base) => {
            let targets: Vec<PathBuf> = tables
                .iter()
                .map(|(name, _)| target(base, name, settings.format))
                .collect();
            // Every target checked before any is written: a refusal writes nothing.
            for t in &targets {
                crate::sink::report_path::check_destination(t, settings.force).map_err(
                    |e| match e {
                        crate::sink::report_path::OutputError::Exists(p) => anyhow::anyhow!(
                            "{} already exists; use --force-overwrite true to overwrite it",
                            p.display()
                        ),
                        e => e.into(),
                    },
                )?;
            }
            for (t, (_, table)) in targets.iter().zip(tables) {
                super::export::write_streamed(t, |mut out, path| {
                    write_table(settings, table, &mut out)
                        .and_then(|()| out.flush())
                        .map_err(|e| asys_report::export::ExportError::io(path, e))
                })?;
                eprintln!(
                    "Generated:\n    {}",
                    crate::sink::report_path::absolute(t).display()
                );
            }
        }
    }
    Ok(())
}

/// Runs `sh -c cmd` with `text` on its stdin (its output is asys's).
fn pipe(
    cmd: &str,
    report: &str,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    use std::process::{Command, Stdio};
    let mut child = Command::new("/bin/sh")
        .args(["-c", cmd])
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run '{cmd}': {e}"))?;
    // A command may end without reading all of its input (`head`, or a
    // failure): asys dies of SIGPIPE elsewhere (main restores the default, as
    // tools in a pipeline do), but here the write must fail with EPIPE so that
    // the command's own exit status decides.
    // SAFETY: changing a signal's disposition while asys has one thread (the
    // readers' scoped threads ended with the computing), restored right after
    // the write.
    let before = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let written = child.stdin.take().map(|i| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, i);
        write(&mut w).and_then(|()| w.flush())
    });
    // SAFETY: as above, putting back the disposition read there.
    unsafe { libc::signal(libc::SIGPIPE, before) };
    let status = child
        .wait()
        .map_err(|e| anyhow::anyhow!("waiting for '{cmd}': {e}"))?;
    if !status.success() {
        anyhow::bail!("'{cmd}' failed ({status}) on report {report}");
    }
    // A command that ends without reading everything (`head`) is its choice.
    match written {
        Some(Err(e)) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            anyhow::bail!("writing report {report} to '{cmd}': {e}")
        }
        _ => Ok(()),
    }
}

/// `--help-reports [NAME|ALL]`.
fn help_reports(which: &str) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    let about = |n: &str| stats::about::about(n).unwrap_or("");
    match which {
        "" => {
            writeln!(
                out,
                "The reports of asys stats (--help-reports NAME describes one, ALL every one):\n"
            )?;
            let width = names().iter().map(|n| n.len()).max().unwrap_or(0);
            for n in names() {
                // The report's title: its description up to the first ':'.
                let title = about(n).split(':').next().unwrap_or("");
                writeln!(out, "  {n:<width$}  {title}")?;
            }
        }
        "ALL" | "all" => {
            for n in names() {
                writeln!(out, "{n}\n    {}\n", about(n))?;
            }
        }
        n => match stats::about::about(n) {
            Some(d) => writeln!(out, "{n}\n    {d}")?,
            None => anyhow::bail!("unknown report '{n}' (available: {})", names().join(", ")),
        },
    }
    Ok(0)
}

/// What `--stats true` prints at the end of a collection: the summary of
/// each kind of data the report holds.
pub fn print_default(path: &std::path::Path, memory_usage: bool) -> anyhow::Result<()> {
    let report = Container::open(path)?;
    if let Some(w) = report.recovered_warning() {
        eprintln!("asys: warning: {w}");
    }
    let tables = &report.metadata.tables;
    let has = |t: &str| tables.get(t).copied().unwrap_or(0) > 0;
    let mut out = std::io::stdout().lock();
    // The device activity of a CUDA run is summarized under nsys's name.
    let device_summary = if has("cuda_api") && !has("hggc_api") {
        "cuda_gpu_kern_sum"
    } else {
        "hggc_ppu_kern_sum"
    };
    for (table, summary) in [
        ("hggc_api", "hggc_api_sum"),
        ("hggc_activity", device_summary),
        ("hgtx_api", "hgtx_sum"),
        ("nvtx_api", "nvtx_sum"),
        ("osrt_api", "osrt_sum"),
        ("cuda_api", "cuda_api_sum"),
        ("acblas_api", "acblas_api_sum"),
        ("acdnn_api", "acdnn_api_sum"),
        ("pccl_api", "pccl_op_sum"),
        ("cublas_api", "cublas_api_sum"),
        ("cudnn_api", "cudnn_api_sum"),
        ("nccl_api", "nccl_api_sum"),
    ] {
        if has(table) {
            let t = stats::find(summary).expect("listed")(&report)?;
            stats::format::write(&mut out, &t, Format::Column)?;
        }
    }
    if memory_usage && has("hggc_api") {
        let t = stats::find("device_memory_usage_summary").expect("listed")(&report)?;
        stats::format::write(&mut out, &t, Format::Column)?;
    }
    Ok(())
}
