//! The CLI's side: finding sessions, asking them, and starting a daemon.
use std::{
    io::{BufRead, BufReader},
    os::{
        fd::{AsRawFd, RawFd},
        unix::net::UnixStream,
    },
    path::PathBuf,
    time::Duration,
};

use super::{
    MAX_REQUEST, SessionError, dir, peer,
    protocol::{Request, Response},
};
use crate::runtime_dir;

/// A session's address: its id, name and socket file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub id: u32,
    pub name: String,
    pub path: PathBuf,
}

impl Address {
    pub fn label(&self) -> String {
        format!("'{}' (ID {})", self.name, self.id)
    }
}

/// The caller's sessions whose daemons listen, by id.
pub fn all() -> Result<Vec<Address>, SessionError> {
    let Some(dir) = runtime_dir::open(false)? else {
        return Ok(Vec::new());
    };
    let listening = dir::listening_paths();
    let entries = std::fs::read_dir(&dir).map_err(|e| runtime_dir::DirError::Io(dir.clone(), e))?;
    let mut out: Vec<Address> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let (id, name) = dir::parse_socket_name(e.file_name().to_str()?)?;
            let path = e.path();
            if let Some(l) = &listening
                && !l.contains(&path)
            {
                return None;
            }
            Some(Address { id, name, path })
        })
        .collect();
    out.sort_by_key(|a| a.id);
    Ok(out)
}

/// `--session NAME|ID`: an id if it is a number (and no session has it as
/// a name), else a name.
pub fn find(selector: &str) -> Result<Address, SessionError> {
    let sessions = all()?;
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

pub fn find_by_name(name: &str) -> Result<Option<Address>, SessionError> {
    Ok(all()?.into_iter().find(|a| a.name == name))
}

/// Connects to a session and makes sure its daemon is ours: our uid,
/// running this asys executable. Nothing is sent before that.
fn connect(addr: &Address) -> Result<UnixStream, SessionError> {
    let stream = match UnixStream::connect(&addr.path) {
        Ok(s) => s,
        // It ended since it was listed.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ECONNREFUSED) | Some(libc::ENOENT)
            ) =>
        {
            return Err(SessionError::Unknown(addr.label()));
        }
        Err(e) => return Err(SessionError::NoAnswer(addr.label(), e)),
    };
    let impostor = |why: String| SessionError::Impostor(format!("session {}", addr.label()), why);
    let p = peer::of(&stream).map_err(|e| SessionError::NoAnswer(addr.label(), e))?;
    let me = runtime_dir::euid();
    if p.uid != me {
        return Err(impostor(format!("uid {}, not {me}", p.uid)));
    }
    match peer::runs_this_executable(p.pid) {
        Ok(true) => Ok(stream),
        // Its process is gone or exiting (no executable any more); nothing
        // was sent, and there is nobody to talk to.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(SessionError::NoAnswer(
            addr.label(),
            std::io::Error::other(format!("its daemon (pid {}) is ending", p.pid)),
        )),
        Ok(false) => Err(impostor(format!(
            "pid {}, which does not run this asys executable",
            p.pid
        ))),
        Err(e) => Err(impostor(format!(
            "pid {}, whose executable cannot be checked ({e})",
            p.pid
        ))),
    }
}

/// Sends `req` (with `fds` attached) and waits for the answer.
pub fn ask(addr: &Address, req: &Request, fds: &[RawFd]) -> Result<Response, SessionError> {
    let no_answer = |e| SessionError::NoAnswer(addr.label(), e);
    let mut line = serde_json::to_vec(req).expect("requests serialize");
    line.push(b'\n');
    if line.len() > MAX_REQUEST {
        return Err(SessionError::TooLarge(addr.label(), line.len()));
    }
    let stream = connect(addr)?;
    super::fdpass::send(&stream, &line, fds).map_err(no_answer)?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(no_answer)?;
    if answer.is_empty() {
        return Err(no_answer(std::io::ErrorKind::UnexpectedEof.into()));
    }
    let response: Response =
        serde_json::from_str(&answer).map_err(|e| no_answer(std::io::Error::other(e)))?;
    for w in &response.warnings {
        eprintln!("asys: warning: session {}: {w}", addr.label());
    }
    Ok(response)
}

/// Says what ended sessions could not write (their notes, see
/// [`dir::take_notes`]), once.
pub fn tell_notes() {
    for (name, lines) in dir::take_notes() {
        for l in lines {
            eprintln!("asys: warning: session '{name}' (ended): {l}");
        }
    }
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
    // A folder we cannot trust is said here, not by the daemon.
    runtime_dir::ensure()?;
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
        Some(("ok", id)) => {
            let id = id.parse().map_err(|_| {
                SessionError::Spawn(std::io::Error::other(format!("bad answer {line:?}")))
            })?;
            let dir = runtime_dir::ensure()?;
            Ok(Address {
                id,
                name: name.to_string(),
                path: dir::socket_path(&dir, id, name),
            })
        }
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
        if !all().is_ok_and(|a| a.contains(addr)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
