//! `asys attach`: trace processes that are already running, then detach and
//! leave them running.
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use crate::{
    apis, output, privileges, procfs,
    recording::{self, RecordSettings, Target},
};

#[derive(Args, Debug)]
#[command(override_usage = "asys attach [<args>] <pid>[,<pid>...]")]
pub struct AttachArgs {
    /// Trace items, comma separated (available: hggc; none).
    #[arg(
        short = 't',
        long = "trace",
        default_value = "hggc",
        value_name = "items"
    )]
    pub trace: String,

    /// Report name; macros %h %p %q{ENV} %i %% expand. ".asysrep" is added.
    #[arg(
        short = 'o',
        long = "output",
        default_value = "report%i",
        value_name = "name"
    )]
    pub output: String,

    /// Overwrite an existing report.
    #[arg(short = 'f', long = "force-overwrite", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub force_overwrite: bool,

    /// Collection duration in seconds; without it, Ctrl+C ends collection.
    #[arg(short = 'd', long = "duration", value_name = "seconds", value_parser = super::parse_seconds)]
    pub duration: Option<Duration>,

    /// Size of the kernel-to-asys event buffer in KiB (power of two).
    #[arg(long = "event-buffer-size", default_value = "8192", value_name = "KiB", value_parser = super::parse_buffer_kib)]
    pub event_buffer_size: u32,

    /// Print the summary reports when the collection ends.
    #[arg(long = "stats", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub stats: bool,

    /// Processes to attach to, comma separated.
    #[arg(value_name = "pid[,pid...]")]
    pub pids: Option<String>,
}

fn parse_pids(spec: &str) -> anyhow::Result<Vec<u32>> {
    let mut pids = Vec::new();
    for word in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let pid: u32 = word
            .parse()
            .ok()
            .filter(|&p| p > 0)
            .with_context(|| format!("invalid PID '{word}'"))?;
        if !procfs::process_exists(pid) {
            anyhow::bail!("no process with PID {pid}");
        }
        if pid == std::process::id() {
            anyhow::bail!("asys cannot attach to itself (PID {pid})");
        }
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    if pids.is_empty() {
        anyhow::bail!("no PID given (usage: asys attach [<args>] <pid>[,<pid>...])");
    }
    Ok(pids)
}

pub fn run(args: AttachArgs, argv: &[String]) -> anyhow::Result<u8> {
    let items = apis::parse_trace_items(&args.trace)?;
    let pids = parse_pids(args.pids.as_deref().unwrap_or(""))?;
    privileges::check()?;
    let out = output::expand(&args.output, Some(pids[0]))?;
    output::check_destination(&out, args.force_overwrite)?;
    let settings = RecordSettings {
        items,
        output: out,
        duration: args.duration,
        event_buffer_bytes: args.event_buffer_size,
        mode: "attach",
        command_line: argv.to_vec(),
    };
    let outcome = super::runtime()?
        .block_on(recording::record(settings, Target::Attach { pids }))
        .context("recording failed")?;
    super::print_outcome(&outcome);
    if args.stats {
        super::stats::print_default(&outcome.report)?;
    }
    Ok(0)
}
