//! `asys start`: start collecting in a session (made if needed).
use anyhow::Context as _;
use clap::Args;

use crate::{
    session::{
        client,
        protocol::{CaptureSpec, Request},
    },
    sink::report_path,
};

#[derive(Args, Debug)]
#[command(override_usage = "asys start [<args>]")]
pub struct StartArgs {
    #[command(flatten)]
    pub out: super::collection::OutputArgs,

    /// Create a new session with this name.
    #[arg(long = "session-new", value_name = "name")]
    pub session_new: Option<String>,

    /// The session to start (by name or ID).
    #[arg(long = "session", value_name = "name|id")]
    pub session: Option<String>,

    #[command(flatten)]
    pub capture: super::capture::CaptureArgs,
}

pub fn run(args: StartArgs) -> anyhow::Result<u8> {
    // Checked before a session is made for it.
    report_path::expand(&args.out.output, None)?;
    args.capture.check_pairing()?;
    let capture = args.capture.enabled().then(|| CaptureSpec {
        hgtx: args.capture.hgtx_capture.clone(),
        end: args.capture.capture_range_end,
    });
    let addr = super::session_args::find_or_create(&args.session, &args.session_new)?;
    let info = client::ask_ok(&addr, &Request::Info, &[])?.info;
    let app_pid = info.and_then(|i| i.app_pid);
    // Before launch, %p waits for the application's pid.
    let out = match app_pid {
        Some(pid) => report_path::expand(&args.out.output, Some(pid))?,
        None => report_path::expand_pid_later(&args.out.output)?,
    };
    let out = std::path::absolute(&out).context("the report's path")?;
    report_path::check_destination(&out, args.out.force_overwrite)?;
    let r = client::ask_ok(
        &addr,
        &Request::Start {
            output: out,
            force: args.out.force_overwrite,
            capture,
        },
        &[],
    )?;
    eprintln!("asys: session {}: {}", addr.label(), r.message);
    Ok(0)
}
