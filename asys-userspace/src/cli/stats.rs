//! `asys stats`: print summaries of a report.
use std::{io::Write, path::PathBuf};

use clap::Args;

use crate::{
    report::container::Container,
    stats::{self, format::Format},
};

#[derive(Args, Debug)]
#[command(override_usage = "asys stats [<args>] <input-file> [<input-file>...]")]
pub struct StatsArgs {
    /// Reports to print, comma separated (`help` lists them; see docs/report-format.md).
    #[arg(
        short = 'r',
        long = "report",
        default_value = "hggc_api_sum",
        value_name = "name[,name...]"
    )]
    pub report: String,

    /// Output format.
    #[arg(short = 'f', long = "format", default_value = "column", value_enum)]
    pub format: Format,

    /// The report files (.asysrep); several are read as one job's ranks
    /// (see docs/ranks.md).
    #[arg(value_name = "input-file")]
    pub files: Vec<PathBuf>,
}

pub fn run(args: StatsArgs) -> anyhow::Result<u8> {
    // `--report help`: the names, one a line, as nsys's --help-reports lists them.
    if args.report.split(',').any(|n| n.trim() == "help") {
        let mut out = std::io::stdout().lock();
        for (name, _) in stats::REPORTS {
            writeln!(out, "{name}")?;
        }
        for (name, _) in stats::desync::SET_REPORTS {
            writeln!(out, "{name}")?;
        }
        return Ok(0);
    }
    let Some(path) = args.files.first().cloned() else {
        anyhow::bail!("no report file given (usage: asys stats [<args>] <input-file>)");
    };
    let names: Vec<&str> = args
        .report
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        anyhow::bail!("no report named (--report NAME[,NAME...])");
    }
    if args.files.len() > 1 || names.iter().any(|n| stats::desync::find(n).is_some()) {
        return super::ranks::stats(&args.files, &names, args.format);
    }
    let report = Container::open(&path)?;
    if let Some(w) = report.recovered_warning() {
        eprintln!("asys: warning: {w}");
    }
    // Compute every table before printing any, so an error prints nothing half-way.
    let mut tables = Vec::new();
    for name in names {
        let Some(f) = stats::find(name) else {
            let names: Vec<&str> = stats::REPORTS.iter().map(|(n, _)| *n).collect();
            anyhow::bail!("unknown report '{name}' (available: {})", names.join(", "));
        };
        tables.push(f(&report)?);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for t in &tables {
        stats::format::write(&mut out, t, args.format)?;
    }
    out.flush()?;
    if let Some(note) = stats::drops_note(&report) {
        eprintln!("asys: warning: {note}");
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
    for (table, summary) in [
        ("hggc_api", "hggc_api_sum"),
        ("hggc_activity", "hggc_ppu_kern_sum"),
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
