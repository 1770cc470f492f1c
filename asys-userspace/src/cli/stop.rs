//! `asys stop`: stop collecting and write the report; the application runs on.
use clap::Args;

use crate::session::{client, protocol::Request};

#[derive(Args, Debug)]
#[command(override_usage = "asys stop [<args>]")]
pub struct StopArgs {
    #[command(flatten)]
    pub session: super::session_args::SessionArg,
}

pub fn run(args: StopArgs) -> anyhow::Result<u8> {
    let addr = args.session.find()?;
    let r = client::ask_ok(&addr, &Request::Stop, &[])?;
    eprintln!("{}", r.message);
    Ok(0)
}
