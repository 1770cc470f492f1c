//! What the CLI and a session daemon say to each other: one JSON line each
//! way. `Launch` also carries the caller's stdin, stdout and stderr (as
//! SCM_RIGHTS), which the application gets.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// The session's state (also how `sessions list` finds out).
    Info,
    /// Launch the application. `argv` is the whole `asys launch ...` command
    /// line (the daemon reads the trace options from it); the environment
    /// and the resolved program come from the caller.
    Launch {
        argv: Vec<String>,
        program: PathBuf,
        app_args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: PathBuf,
        show_output: bool,
    },
    /// Start collecting into `output` (already expanded, absolute); with a
    /// capture range, recording waits for it.
    Start {
        output: PathBuf,
        force: bool,
        capture: Option<CaptureSpec>,
    },
    /// Stop collecting and write the report; the application runs on.
    Stop,
    /// Stop collecting and discard what was collected.
    Cancel,
    /// Write the report if collecting, end the application with `signal`
    /// (none: leave it running without asys), end the session.
    Shutdown { signal: Option<i32> },
}

/// `start -c ... [-p ...] [--capture-range-end ...]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaptureSpec {
    /// `-p` with `-c hgtx`; None: the profiler API.
    pub hgtx: Option<crate::apis::HgtxRange>,
    pub end: crate::settings::CaptureEnd,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    /// For the user: what happened, or why not.
    pub message: String,
    pub info: Option<Info>,
    /// Reports written by this request.
    pub reports: Vec<PathBuf>,
    /// What went wrong in the session since the last answer with no client
    /// waiting (a range's report that could not be written): said once.
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl Response {
    pub fn ok(message: impl Into<String>) -> Self {
        Self {
            ok: true,
            message: message.into(),
            ..Default::default()
        }
    }

    pub fn err(message: impl Into<String>) -> Self {
        Self {
            ok: false,
            message: message.into(),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// Nothing launched or collecting yet.
    Created,
    /// `start` came first: collection begins when the application launches.
    StartPending,
    /// The application runs, nothing is collected.
    Launched,
    /// Collection waits for its capture range to begin.
    Armed,
    Collecting,
}

impl State {
    pub fn label(self) -> &'static str {
        match self {
            State::Created => "Created",
            State::StartPending => "StartPending",
            State::Launched => "Launched",
            State::Armed => "Armed",
            State::Collecting => "Collecting",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Info {
    pub id: u32,
    pub name: String,
    pub owner_uid: u32,
    pub daemon_pid: u32,
    pub state: State,
    /// The launched application's pid.
    pub app_pid: Option<u32>,
    /// When the session was created (seconds since the epoch).
    pub created_unix: u64,
    /// Reports written so far.
    pub reports: u32,
    /// Reports that could not be written, and why (the last few).
    #[serde(default)]
    pub failures: Vec<String>,
}

/// The descriptor on which a new daemon says "ok ID", "taken -" or
/// "error WHY" to the command that started it.
pub const READY_FD: std::os::fd::RawFd = 3;
