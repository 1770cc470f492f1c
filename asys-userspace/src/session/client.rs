//! The CLI's side: finding sessions, asking them, and starting a daemon.
use std::{
    io::{BufRead, BufReader},
    os::{
        fd::{AsRawFd, RawFd},
        linux::net::SocketAddrExt,
        unix::net::{SocketAddr, UnixStream},
    },
    time::Duration,
};

use super::{
    CONTROL_PREFIX, SessionError,
    protocol::{Request, Response},
};

/// A session's address: its id and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub id: u32,
    pub name: String,
}

impl Address {
    pub fn socket_name(&self) -> String {
        format!("{CONTROL_PREFIX}{}/{}", self.id, self.name)
    }

    pub fn label(&self) -> String {
        format!("'{}' (ID {})", self.name, self.id)
    }
}

/// Every session's control socket the kernel lists (listening sockets only).
pub fn all() -> Vec<Address> {
    let text = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut out: Vec<Address> = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            // Num RefCount Protocol Flags Type St Inode Path; 00010000: listening.
            if cols.len() < 8 || cols[3] != "00010000" {
                return None;
            }
            let rest = cols[7].strip_prefix('@')?.strip_prefix(CONTROL_PREFIX)?;
            let (id, name) = rest.split_once('/')?;
            Some(Address {
                id: id.parse().ok()?,
                name: name.to_string(),
            })
        })
        .collect();
    out.sort_by_key(|a| a.id);
    out.dedup();
    out
}

/// `--session NAME|ID`: an id if it is a number (and no session has it as
/// a name), else a name.
pub fn find(selector: &str) -> Result<Address, SessionError> {
    let sessions = all();
    if let Some(a) = sessions.iter().find(|a| a.name == selector) {
        return Ok(a.clone());
    }
    if let Ok(id) = selector.parse::<u32>()
        && let Some(a) = sessions.iter().find(|a| a.id == id)
    {
        return Ok(a.clone());
    }
    Err(SessionError::Unknown(format!("'{selector}'")))
}

pub fn find_by_name(name: &str) -> Option<Address> {
    all().into_iter().find(|a| a.name == name)
}

/// Sends `req` (with `fds` attached) and waits for the answer.
pub fn ask(addr: &Address, req: &Request, fds: &[RawFd]) -> Result<Response, SessionError> {
    let no_answer = |e| SessionError::NoAnswer(addr.label(), e);
    let sock_addr = SocketAddr::from_abstract_name(addr.socket_name().as_bytes())?;
    let stream = UnixStream::connect_addr(&sock_addr).map_err(no_answer)?;
    let mut line = serde_json::to_vec(req).expect("requests serialize");
    line.push(b'\n');
    super::fdpass::send(&stream, &line, fds).map_err(no_answer)?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(no_answer)?;
    if answer.is_empty() {
        return Err(no_answer(std::io::ErrorKind::UnexpectedEof.into()));
    }
    serde_json::from_str(&answer).map_err(|e| no_answer(std::io::Error::other(e)))
}

/// Like [`ask`], but a refusal is an error.
pub fn ask_ok(addr: &Address, req: &Request, fds: &[RawFd]) -> Result<Response, SessionError> {
    let r = ask(addr, req, fds)?;
    if r.ok {
        Ok(r)
    } else {
        Err(SessionError::Refused(addr.label(), r.message))
    }
}

/// Starts a daemon for a new session called `name` (checked with
/// [`super::check_name`]) and waits until it listens. The daemon reports its
/// id, or why it could not start, on a pipe.
pub fn spawn_daemon(name: &str) -> Result<Address, SessionError> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().map_err(SessionError::Spawn)?;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the two-int array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SessionError::Spawn(std::io::Error::last_os_error()));
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__session-daemon")
        .arg(name)
        // It holds no folder: the application starts where launch ran, and
        // reports go where start said.
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the hook runs in the forked child before exec and only calls
    // setsid and dup2, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // Its own session: the terminal's signals are not for it.
            libc::setsid();
            if libc::dup2(write_fd, super::protocol::READY_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // SAFETY: write_fd is ours (from pipe2 above) and not used again here.
    unsafe { libc::close(write_fd) };
    // SAFETY: read_fd is ours (from pipe2 above) and owned by nothing else.
    let read = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(read_fd) };
    // Not waited for: it outlives this command (init reaps it).
    let _child = spawned.map_err(SessionError::Spawn)?;
    let mut line = String::new();
    let _ = BufReader::new(read).read_line(&mut line);
    match line.trim().split_once(' ') {
        Some(("ok", id)) => Ok(Address {
            id: id.parse().map_err(|_| {
                SessionError::Spawn(std::io::Error::other(format!("bad answer {line:?}")))
            })?,
            name: name.to_string(),
        }),
        Some(("taken", _)) => Err(SessionError::NameTaken(name.into())),
        Some(("error", why)) => Err(SessionError::Spawn(std::io::Error::other(why.to_string()))),
        _ => Err(SessionError::Spawn(std::io::Error::other(
            "the session daemon exited without a word",
        ))),
    }
}

/// The caller's stdin, stdout and stderr, for `Launch`.
pub fn own_stdio() -> [RawFd; 3] {
    [
        std::io::stdin().as_raw_fd(),
        std::io::stdout().as_raw_fd(),
        std::io::stderr().as_raw_fd(),
    ]
}

/// Waits up to `timeout` for a session's socket to go away.
pub fn wait_gone(addr: &Address, timeout: Duration) -> bool {
    let end = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < end {
        if !all().contains(addr) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
