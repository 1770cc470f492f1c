//! `asys profile`: launch an application under tracing.
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use crate::{
    apis, launch, output, privileges,
    recording::{self, RecordSettings, Target},
};

#[derive(Args, Debug)]
#[command(override_usage = "asys profile [<args>] <application> [<application args>]")]
pub struct ProfileArgs {
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

    /// Collection duration in seconds; the application is then sent SIGTERM.
    #[arg(short = 'd', long = "duration", value_name = "seconds", value_parser = super::parse_seconds)]
    pub duration: Option<Duration>,

    /// Size of the kernel-to-asys event buffer in KiB (power of two).
    #[arg(long = "event-buffer-size", default_value = "8192", value_name = "KiB", value_parser = super::parse_buffer_kib)]
    pub event_buffer_size: u32,

    /// Print the summary reports when the collection ends.
    #[arg(long = "stats", default_value = "false", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub stats: bool,

    /// The application and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "application"
    )]
    pub command: Vec<String>,
}

pub fn run(args: ProfileArgs, argv: &[String]) -> anyhow::Result<u8> {
    let items = apis::parse_trace_items(&args.trace)?;
    let Some(app) = args.command.first() else {
        anyhow::bail!(
            "no application given (usage: asys profile [<args>] <application> [<application args>])"
        );
    };
    let program = launch::resolve(app, std::env::var_os("PATH").as_deref())?;
    privileges::check()?;
    // Check the destination before starting anything; %p is known only later.
    let early = output::expand(&args.output, Some(0))?;
    output::check_destination(&early, args.force_overwrite || args.output.contains("%p"))?;

    let env: Vec<(String, String)> = std::env::vars().collect();
    let child = launch::spawn_suspended(&program, &args.command, &env)?;
    let out = match output::expand(&args.output, Some(child.pid))
        .and_then(|p| output::check_destination(&p, args.force_overwrite).map(|_| p))
    {
        Ok(p) => p,
        Err(e) => {
            child.abandon();
            return Err(e.into());
        }
    };
    let settings = RecordSettings {
        items,
        output: out,
        duration: args.duration,
        event_buffer_bytes: args.event_buffer_size,
        mode: "profile",
        command_line: argv.to_vec(),
    };
    let outcome = super::runtime()?
        .block_on(recording::record(
            settings,
            Target::Launch { child, program },
        ))
        .context("recording failed")?;
    super::print_outcome(&outcome);
    if args.stats {
        super::stats::print_default(&outcome.report)?;
    }
    let code = outcome.exit_code.unwrap_or(0);
    Ok(code.clamp(0, 255) as u8)
}
