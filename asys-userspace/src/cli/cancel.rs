//! `asys cancel`: stop collecting and discard what was collected.
use clap::Args;

use crate::session::{client, protocol::Request};

#[derive(Args, Debug)]
#[command(override_usage = "asys cancel [<args>]")]
pub struct CancelArgs {
    #[command(flatten)]
    pub session: super::session_args::SessionArg,
}

pub fn run(args: CancelArgs) -> anyhow::Result<u8> {
    let addr = args.session.find()?;
    let r = client::ask_ok(&addr, &Request::Cancel, &[])?;
    eprintln!("asys: session {}: {}", addr.label(), r.message);
    Ok(0)
}
