//! `asys recover DIR`: a report from the folder a recording that did not
//! finish (asys killed, the machine down, the disk full) left beside its
//! report.
use std::path::PathBuf;

use clap::Args;

use crate::record::salvage;

#[derive(Args, Debug)]
#[command(override_usage = "asys recover [<args>] DIR")]
pub struct RecoverArgs {
    /// The recording's folder (NAME.asysrep.unfinished-PID).
    pub dir: PathBuf,
    /// The report to write [default: the report the recording would have written].
    #[arg(short = 'o', long = "output", value_name = "REPORT")]
    pub output: Option<PathBuf>,
    /// Overwrite the report if it exists.
    #[arg(short = 'f', long = "force-overwrite")]
    pub force: bool,
}

pub fn run(args: RecoverArgs) -> anyhow::Result<u8> {
    if !args.dir.is_dir() {
        anyhow::bail!("{} is not a folder", args.dir.display());
    }
    let output = match args.output {
        Some(o) if o.as_os_str().is_empty() => anyhow::bail!("-o needs a report name"),
        Some(o)
            if o.extension()
                .is_some_and(|e| e == asys_report::report::EXTENSION) =>
        {
            Some(o)
        }
        Some(o) => Some(PathBuf::from(format!(
            "{}.{}",
            o.display(),
            asys_report::report::EXTENSION
        ))),
        None => None,
    };
    let r = salvage::recover(
        &args.dir,
        &salvage::Options {
            output,
            force: args.force,
            reason: None,
        },
    )?;
    let rows: Vec<String> = r
        .tables
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    eprintln!(
        "asys: recovered {:.1} s of recording ({} checkpoints; {}): {}",
        r.seconds,
        r.checkpoints,
        r.reason,
        if rows.is_empty() {
            "no rows".to_string()
        } else {
            rows.join(", ")
        }
    );
    if r.ignored_chunks > 0 {
        eprintln!(
            "asys: {} chunk(s) written after the last checkpoint were incomplete and left out",
            r.ignored_chunks
        );
    }
    eprintln!(
        "Generated:\n    {}",
        crate::sink::report_path::absolute(&r.report).display()
    );
    Ok(0)
}
