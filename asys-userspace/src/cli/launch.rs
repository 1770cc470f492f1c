//! `asys launch`: start an application under a session, ready to be
//! profiled; `asys start` and `asys stop` then collect.
use anyhow::Context as _;
use clap::{Args, CommandFactory as _, parser::ValueSource};

use crate::{cli::privileges, session::protocol::Request, spawn};

#[derive(Args, Debug)]
#[command(override_usage = "asys launch [<args>] <application> [<application args>]")]
pub struct LaunchArgs {
    #[command(flatten)]
    pub common: super::collection::CollectionArgs,

    #[command(flatten)]
    pub env: super::environment::EnvArgs,

    /// When the application is done: when the launched process exits
    /// (primary), or when every process of its tree has (all).
    #[arg(long = "wait", default_value = "all", value_enum)]
    pub wait: crate::settings::Wait,

    /// Create a new session with this name.
    #[arg(long = "session-new", value_name = "name")]
    pub session_new: Option<String>,

    /// Launch into this existing session (by name or ID).
    #[arg(long = "session", value_name = "name|id")]
    pub session: Option<String>,

    /// The application and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "application"
    )]
    pub command: Vec<String>,
}

/// Options of `profile` that belong to `start` in a session.
const START_OPTIONS: [(&str, &str); 8] = [
    ("output", "-o"),
    ("force_overwrite", "-f"),
    ("duration", "-d"),
    ("stats", "--stats"),
    ("max_report_size", "--max-report-size"),
    ("flight_recorder", "--flight-recorder"),
    ("flight_trigger", "--flight-trigger"),
    ("always_on", "--always-on"),
];

pub fn run(args: LaunchArgs, argv: &[String]) -> anyhow::Result<u8> {
    let matches = super::Cli::command().try_get_matches_from(argv)?;
    if let Some(m) = matches.subcommand_matches("launch") {
        for (id, flag) in START_OPTIONS {
            if m.value_source(id) == Some(ValueSource::CommandLine) {
                anyhow::bail!("{flag} is not an option of launch");
            }
        }
    }
    if args.common.ppu_help() {
        return Ok(0);
    }
    let items = args.common.trace_items();
    let Some(app) = args.command.first() else {
        anyhow::bail!(
            "no application given (usage: asys launch [<args>] <application> [<application args>])"
        );
    };
    super::not_an_option(app, "launch")?;
    let program = spawn::resolve(app, std::env::var_os("PATH").as_deref())?;
    let program = std::path::absolute(&program).unwrap_or(program);
    privileges::check()?;
    let env = args.env.build(&items, &args.common)?;
    let addr = super::session_args::find_or_create(&args.session, &args.session_new)?;
    let request = Request::Launch {
        argv: argv.to_vec(),
        program,
        app_args: args.command.clone(),
        env,
        cwd: std::env::current_dir().context("the current folder")?,
        show_output: args.env.show_output,
    };
    let r = crate::session::client::ask_ok(&addr, &request, &crate::session::client::own_stdio())?;
    eprintln!("asys: session {}: {}", addr.label(), r.message);
    Ok(0)
}
