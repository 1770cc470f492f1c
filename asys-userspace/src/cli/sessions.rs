//! `asys sessions list`: the caller's own sessions (each user's live in a
//! folder of their own, root's too).
use clap::{Args, Subcommand};

use crate::session::{SessionError, client, protocol::Request};

#[derive(Args, Debug)]
#[command(override_usage = "asys sessions list")]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub action: SessionsAction,
}

#[derive(Subcommand, Debug)]
pub enum SessionsAction {
    /// List active sessions.
    List {
        /// Print the header row.
        #[arg(short = 'p', long = "show-header", default_value = "true", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
        show_header: bool,
    },
}

pub fn run(args: SessionsArgs) -> anyhow::Result<u8> {
    let SessionsAction::List { show_header } = args.action;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let sessions = client::all()?;
    client::tell_notes();
    if show_header {
        println!(
            "{:>4}  {:>8}  {:<12}  {:>8}  {:>6}  NAME",
            "ID", "TIME", "STATE", "LAUNCH", "UID"
        );
    }
    for addr in sessions {
        let r = match client::ask(&addr, &Request::Info, &[]) {
            Ok(r) => r,
            // It ended since it was listed.
            Err(SessionError::Unknown(_)) => continue,
            Err(e) => {
                eprintln!("asys: {e}");
                continue;
            }
        };
        let Some(info) = r.info.filter(|_| r.ok) else {
            continue;
        };
        let age = now.saturating_sub(info.created_unix);
        println!(
            "{:>4}  {:>8}  {:<12}  {:>8}  {:>6}  {}",
            info.id,
            format!("{:02}:{:02}:{:02}", age / 3600, age / 60 % 60, age % 60),
            info.state.label(),
            info.app_pid
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
            info.owner_uid,
            // Names are checked when a session is made; escaped all the same,
            // since the daemon's answer is what is printed here.
            asys_report::text_safety::visible(&info.name)
        );
    }
    Ok(0)
}
