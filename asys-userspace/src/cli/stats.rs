//! `asys stats`: print summaries of a report.
use std::{io::Write, path::PathBuf};

use clap::Args;

use crate::{
    report::container::Container,
    stats::{self, format::Format},
};

#[derive(Args, Debug)]
#[command(override_usage = "asys stats [<args>] <input-file>")]
pub struct StatsArgs {
    /// Reports to print, comma separated (see the list in docs/report-format.md).
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

    /// The report file (.asysrep).
    #[arg(value_name = "input-file")]
    pub file: Option<PathBuf>,
}

pub fn run(args: StatsArgs) -> anyhow::Result<u8> {
    let Some(path) = args.file else {
        anyhow::bail!("no report file given (usage: asys stats [<args>] <input-file>)");
    };
    let report = Container::open(&path)?;
    // Compute every table before printing any, so an error prints nothing half-way.
    let mut tables = Vec::new();
    for name in args
        .report
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
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

/// What `--stats true` prints at the end of a collection.
pub fn print_default(path: &std::path::Path) -> anyhow::Result<()> {
    let report = Container::open(path)?;
    let table = stats::find("hggc_api_sum").expect("listed")(&report)?;
    stats::format::write(&mut std::io::stdout().lock(), &table, Format::Column)?;
    Ok(())
}
