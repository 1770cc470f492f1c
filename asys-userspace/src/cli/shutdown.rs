//! `asys shutdown`: end the session; the report is written if collecting,
//! and the launched application is ended (`--kill`).
use std::time::Duration;

use clap::Args;

use crate::{
    session::{client, protocol::Request},
    settings::Kill,
};

#[derive(Args, Debug)]
#[command(override_usage = "asys shutdown [<args>]")]
pub struct ShutdownArgs {
    #[command(flatten)]
    pub session: super::session_args::SessionArg,

    /// Signal for the launched application: none (it runs on without
    /// asys), sigterm, sigkill, or a signal number.
    #[arg(long = "kill", default_value = "sigterm", value_name = "signal", value_parser = super::profile::parse_kill)]
    pub kill: Kill,
}

pub fn run(args: ShutdownArgs) -> anyhow::Result<u8> {
    let addr = args.session.find()?;
    let signal = match args.kill {
        Kill::None => None,
        Kill::Signal(s) => Some(s),
    };
    let r = client::ask_ok(&addr, &Request::Shutdown { signal }, &[])?;
    if !r.message.is_empty() {
        eprintln!("{}", r.message);
    }
    // The session is over once its name is free again.
    client::wait_gone(&addr, Duration::from_secs(10));
    Ok(0)
}
