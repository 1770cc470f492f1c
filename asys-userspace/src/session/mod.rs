//! Interactive sessions (`launch`, `start`, `stop`, `cancel`, `shutdown`,
//! `sessions list`). A session outlives the command that created it, so it
//! lives in a small daemon (`asys __session-daemon`), one per session. The
//! CLI talks to it over an abstract Unix socket, `@asys-session/<id>/<name>`:
//! abstract names need no folder, vanish with the daemon, and are listed in
//! /proc/net/unix. Every request carries the caller's credentials
//! (SO_PEERCRED); only the session's owner or root is served.
pub mod client;
pub mod fdpass;
pub mod protocol;
pub mod server;

/// The session name of `launch`, `start`, `stop`, ... without `--session`.
pub const DEFAULT_NAME: &str = "[default]";

/// Prefix of a session's control socket in the abstract namespace.
const CONTROL_PREFIX: &str = "asys-session/";
/// Locks that make ids and names unique (bound, never listening).
const ID_LOCK_PREFIX: &str = "asys-session-id/";
const NAME_LOCK_PREFIX: &str = "asys-session-name/";

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("invalid session name '{0}' (1 to 64 printable characters, no spaces or '/')")]
    BadName(String),
    #[error("no session {0} (see 'asys sessions list')")]
    Unknown(String),
    #[error("a session named '{0}' already exists (see 'asys sessions list')")]
    NameTaken(String),
    #[error("session {0}: {1}")]
    Refused(String, String),
    #[error("session {0} did not answer: {1}")]
    NoAnswer(String, std::io::Error),
    #[error("cannot start the session daemon: {0}")]
    Spawn(std::io::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Names are part of socket names and of `sessions list`'s columns.
pub fn check_name(name: &str) -> Result<(), SessionError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '/' && c != '%');
    if ok {
        Ok(())
    } else {
        Err(SessionError::BadName(name.into()))
    }
}
