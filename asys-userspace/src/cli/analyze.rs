//! `asys analyze`: runs rules over a report and prints their findings.
use std::{io::Write, path::PathBuf};

use anyhow::Context as _;
use clap::Args;

use asys_report::{
    analyze::{self, Rule, RuleSpec, data::Data},
    stats::format::{self, Format},
};

#[derive(Args, Debug)]
#[command(override_usage = "asys analyze [<args>] <input-file> [<input-file>...]")]
pub struct AnalyzeArgs {
    /// A rule to run, with its arguments: `name[:arg=value...]`; repeat for
    /// more (default: every rule; `help` lists them).
    #[arg(short = 'r', long = "rule", value_name = "name[:arg=value...]")]
    pub rules: Vec<String>,

    /// Output format.
    #[arg(short = 'f', long = "format", default_value = "column", value_enum)]
    pub format: Format,

    /// Write each rule's findings to `<base>_<rule>.<format>` instead of the console.
    #[arg(short = 'o', long = "output", value_name = "base")]
    pub output: Option<PathBuf>,

    /// Replace files `--output` names that already exist.
    #[arg(long = "force-overwrite", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub force_overwrite: bool,

    /// The report files (.asysrep); several are read as one job's ranks
    /// (see docs/ranks.md).
    #[arg(value_name = "input-file")]
    pub files: Vec<PathBuf>,
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<u8> {
    if args.rules.iter().any(|r| r == "help") {
        let mut out = std::io::stdout().lock();
        for name in Rule::names() {
            writeln!(out, "{name}")?;
        }
        return Ok(0);
    }
    // Every rule checked before the report is read: a typo costs nothing.
    let mut specs: Vec<RuleSpec> = if args.rules.is_empty() {
        Rule::ALL.into_iter().map(RuleSpec::new).collect()
    } else {
        args.rules
            .iter()
            .map(|r| RuleSpec::parse(r))
            .collect::<Result<_, _>>()?
    };
    let Some(path) = args.files.first() else {
        anyhow::bail!("no report file given (usage: asys analyze [<args>] <input-file>)");
    };
    let (tables, notes) = if args.files.len() > 1 {
        super::ranks::analyze(&args.files, &specs)?
    } else {
        // A report, or an SQLite export read back into one.
        let report = super::stats::open(path)?;
        if args.rules.is_empty() && !report.unavailable.is_empty() {
            // By default, the rules an SQLite export has the data for.
            specs.retain(|s| Rule::FROM_SQLITE.contains(&s.rule));
            let names: Vec<&str> = specs.iter().map(|s| s.rule.name()).collect();
            eprintln!(
                "asys: {} is an SQLite export: running the rules it has the data for ({})",
                path.display(),
                names.join(", ")
            );
        }
        let rules: Vec<Rule> = specs.iter().map(|s| s.rule).collect();
        let data = Data::load_for(&report, &rules).map_err(|e| {
            let names: Vec<&str> = rules.iter().map(|r| r.name()).collect();
            super::stats::lacking(&format!("rule(s) {}", names.join(",")), &report, e)
        })?;
        let tables: Vec<_> = specs
            .iter()
            .map(|s| {
                let t = analyze::run(s, &data).map_err(|e| {
                    super::stats::lacking(&format!("rule {}", s.rule.name()), &report, e)
                })?;
                Ok((s.rule, t))
            })
            .collect::<anyhow::Result<_>>()?;
        let notes: Vec<String> = asys_report::stats::drops_note(&report)
            .into_iter()
            .collect();
        (tables, notes)
    };
    match &args.output {
        None if args.format == Format::Json && tables.len() > 1 => {
            // One JSON document, each rule's rows under its name, so that the
            // output of several rules still parses.
            let mut all = serde_json::Map::new();
            for (rule, t) in &tables {
                let mut buf = Vec::new();
                format::write(&mut buf, t, Format::Json)?;
                all.insert(rule.name().into(), serde_json::from_slice(&buf)?);
            }
            let mut out = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut out, &all)?;
            writeln!(out)?;
        }
        None => {
            let mut out = std::io::stdout().lock();
            for (_, t) in &tables {
                write_table(&mut out, t, args.format)?;
            }
            out.flush()?;
        }
        Some(base) => {
            let targets: Vec<PathBuf> = tables
                .iter()
                .map(|(rule, _)| {
                    PathBuf::from(format!(
                        "{}_{}.{}",
                        base.display(),
                        rule.name(),
                        extension(args.format)
                    ))
                })
                .collect();
            // Every target checked before any is written: a refusal writes
            // nothing, and a link at a target is never followed.
            for t in &targets {
                crate::sink::report_path::check_destination(t, args.force_overwrite).map_err(
                    |e| match e {
                        crate::sink::report_path::OutputError::Exists(p) => anyhow::anyhow!(
                            "{} already exists; use --force-overwrite true to overwrite it",
                            p.display()
                        ),
                        e => e.into(),
                    },
                )?;
            }
            for (file, (_, t)) in targets.iter().zip(&tables) {
                let mut bytes = Vec::new();
                write_table(&mut bytes, t, args.format)?;
                super::export::write_new(file, &bytes)
                    .with_context(|| format!("cannot write {}", file.display()))?;
                eprintln!("asys: wrote {}", file.display());
            }
        }
    }
    for note in notes {
        eprintln!("asys: warning: {note}");
    }
    Ok(0)
}

/// A rule's table; on the console, a rule that found nothing says so, as
/// nsys does, rather than printing an empty table.
fn write_table(out: &mut dyn Write, t: &format::Table, f: Format) -> std::io::Result<()> {
    if t.rows.is_empty() && matches!(f, Format::Column | Format::Table) {
        writeln!(
            out,
            "\n ** {}:\n\nThere were no problems detected.\n",
            asys_report::text_safety::visible(&t.title)
        )
    } else {
        format::write(out, t, f)
    }
}

fn extension(f: Format) -> &'static str {
    match f {
        Format::Column | Format::Table => "txt",
        Format::Csv => "csv",
        Format::Tsv => "tsv",
        Format::Json => "json",
    }
}
