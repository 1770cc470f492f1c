//! `--session` and `--session-new`, shared by the interactive subcommands.
use clap::Args;

use crate::session::{self, DEFAULT_NAME, client::Address};

#[derive(Args, Debug)]
pub struct SessionArg {
    /// The session to use, by name or ID (default: [default]).
    #[arg(long = "session", value_name = "name|id")]
    pub session: Option<String>,
}

impl SessionArg {
    /// The session asked for, which must exist.
    pub fn find(&self) -> anyhow::Result<Address> {
        let selector = self.session.as_deref().unwrap_or(DEFAULT_NAME);
        Ok(session::client::find(selector)?)
    }
}

/// The session a `launch` or `start` uses: a new one (`--session-new`), one
/// named (`--session`), or [default], made if it does not exist yet.
pub fn find_or_create(existing: &Option<String>, new: &Option<String>) -> anyhow::Result<Address> {
    if existing.is_some() && new.is_some() {
        anyhow::bail!("--session and --session-new cannot be used together");
    }
    if let Some(name) = new {
        return create(name);
    }
    if let Some(selector) = existing {
        return Ok(session::client::find(selector)?);
    }
    match session::client::find_by_name(DEFAULT_NAME)? {
        Some(a) => Ok(a),
        None => create(DEFAULT_NAME),
    }
}

/// A new session's daemon loads the probes at launch: checked before one
/// is left behind that could not.
fn create(name: &str) -> anyhow::Result<Address> {
    session::check_name(name)?;
    crate::cli::privileges::check()?;
    Ok(session::client::spawn_daemon(name)?)
}
