//! Interactive sessions (`launch`, `start`, `stop`, `cancel`, `shutdown`,
//! `sessions list`). A session outlives the command that created it, so it
//! lives in a small daemon (`asys __session-daemon`), one per session. The
//! CLI talks to it over a Unix socket `ID.NAME` in the caller's private
//! session folder ([`dir`]): no other user can create, squat or reach a
//! name there. Both ends check the other (SO_PEERCRED) before a byte goes
//! out: the client that the daemon is its own uid running this asys, the
//! daemon that the client is its owner or root.
pub mod client;
pub mod dir;
pub mod fdpass;
pub mod peer;
pub mod protocol;
pub mod server;

/// The session name of `launch`, `start`, `stop`, ... without `--session`.
pub const DEFAULT_NAME: &str = "[default]";

/// The longest request a daemon reads: a `Launch` carries the caller's
/// environment, which is seldom more than a few KiB.
pub const MAX_REQUEST: usize = 256 * 1024;
/// How long a client may take to send its whole request.
pub const REQUEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "invalid session name '{0}' (1 to 64 printable characters, no spaces, '/' or '%', not starting with '.')"
    )]
    BadName(String),
    #[error("no session {0} (see 'asys sessions list')")]
    Unknown(String),
    #[error("a session named '{0}' already exists (see 'asys sessions list')")]
    NameTaken(String),
    #[error("session {0}: {1}")]
    Refused(String, String),
    #[error("{0} is served by {1}: refusing to talk to it")]
    Impostor(String, String),
    #[error(
        "request for session {0} is {1} bytes, more than the {MAX_REQUEST} a session reads (a very large environment?)"
    )]
    TooLarge(String, usize),
    #[error(transparent)]
    Dir(#[from] crate::runtime_dir::DirError),
    #[error("session {0} did not answer: {1}")]
    NoAnswer(String, std::io::Error),
    #[error("cannot start the session daemon: {0}")]
    Spawn(std::io::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Names are part of socket names and of `sessions list`'s columns.
pub fn check_name(name: &str) -> Result<(), SessionError> {
    // Names are file names in the session folder; '.' would be its lock or
    // a hidden file.
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '/' && c != '%');
    if ok {
        Ok(())
    } else {
        Err(SessionError::BadName(name.into()))
    }
}
