//! `asys attach`: trace processes that are already running, then detach and
//! leave them running.
use anyhow::Context as _;
use clap::Args;

use crate::{cli::privileges, process::procfs, record::Target, sink::report_path};
use asys_report::recorded_settings::Mode;

#[derive(Args, Debug)]
#[command(override_usage = "asys attach [<args>] <pid>[,<pid>...]")]
pub struct AttachArgs {
    #[command(flatten)]
    pub common: super::collection::CollectionArgs,

    #[command(flatten)]
    pub capture: super::capture::CaptureArgs,

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

pub fn run(mut args: AttachArgs, argv: &[String]) -> anyhow::Result<u8> {
    args.common.apply_always_on()?;
    if args.common.ppu_help() {
        return Ok(0);
    }
    let items = args.common.trace_items();
    args.capture.check(&items, &args.common)?;
    let pids = parse_pids(args.pids.as_deref().unwrap_or(""))?;
    privileges::check()?;
    let out = report_path::expand(&args.common.out.output, Some(pids[0]))?;
    report_path::check_destination(&out, args.common.out.force_overwrite)?;
    let mut settings = args.common.settings(items, out, Mode::Attach, argv);
    settings.name_template = Some((args.common.out.output.clone(), Some(pids[0])));
    args.capture.apply(&mut settings);
    args.common.record(settings, Target::Attach { pids })?;
    Ok(0)
}
