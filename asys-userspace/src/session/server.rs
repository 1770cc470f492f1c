//! A session's control socket: taking an id and the name in the caller's
//! session folder, answering each connection on a thread of its own, and
//! checking who asks (SO_PEERCRED: only the owner or root) before reading
//! a byte.
use std::{
    collections::HashSet,
    io::Write as _,
    os::{
        fd::OwnedFd,
        unix::net::{UnixListener, UnixStream},
    },
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use super::{
    MAX_REQUEST, REQUEST_DEADLINE, dir, peer,
    protocol::{Info, Request, Response, State},
};
use crate::runtime_dir;

/// Connections answered at once; more are turned away at once, so a flood
/// from the owner cannot exhaust the daemon's threads.
const MAX_CONNECTIONS: usize = 64;

/// A request for the driver, and where its answer goes.
pub struct Job {
    pub request: Request,
    pub fds: Vec<OwnedFd>,
    pub reply: std::sync::mpsc::Sender<Response>,
}

/// Makes an `asys profile` visible to `sessions list` under `name`
/// (`profile-<pid>-<application>`): it answers `Info` and refuses the rest,
/// since a profile is controlled by its own command. Best effort: a name
/// already taken only means it is not listed.
pub fn announce_profile(name: &str, app_pid: u32) -> Option<SocketFile> {
    let (listener, file, id) = bind(name).ok()?;
    let info = Arc::new(Mutex::new(Info {
        id,
        name: name.to_string(),
        owner_uid: runtime_dir::euid(),
        daemon_pid: std::process::id(),
        state: State::Collecting,
        app_pid: Some(app_pid),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        reports: 0,
        failures: Vec::new(),
    }));
    let (jobs_tx, mut jobs_rx) = tokio::sync::mpsc::channel::<Job>(1);
    let (last_tx, _last_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || serve(listener, info, jobs_tx, last_tx));
    std::thread::spawn(move || {
        while let Some(job) = jobs_rx.blocking_recv() {
            let _ = job.reply.send(Response::err(
                "a profile session is controlled by its 'asys profile' command \
                 (it ends with its application, --duration or Ctrl+C)",
            ));
        }
    });
    Some(file)
}

pub enum BindError {
    Taken,
    Dir(crate::runtime_dir::DirError),
    Io(std::io::Error),
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindError::Taken => f.write_str("the name is taken"),
            BindError::Dir(e) => e.fmt(f),
            BindError::Io(e) => e.fmt(f),
        }
    }
}

/// A session's socket file, removed when the session ends. Dropped while
/// the listener is still open, so no later session's file of the same name
/// can be the one removed (a live socket is never taken for stale).
pub struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Takes the name and the lowest free id in the caller's session folder,
/// then listens on `ID.NAME`. A socket nobody listens on (its daemon was
/// killed) is removed, and its name and id are free again.
pub fn bind(name: &str) -> Result<(UnixListener, SocketFile, u32), BindError> {
    let dir = runtime_dir::ensure().map_err(BindError::Dir)?;
    let _lock = dir::Lock::take(&dir).map_err(BindError::Io)?;
    let mut used = HashSet::new();
    let listening = dir::listening_paths();
    for entry in std::fs::read_dir(&dir).map_err(BindError::Io)? {
        let Ok(entry) = entry else { continue };
        let Some((id, other)) = entry.file_name().to_str().and_then(dir::parse_socket_name) else {
            continue;
        };
        let path = entry.path();
        // Listed as listening: live, and not bothered with a connection.
        // Otherwise a connection refused says nobody listens any more.
        let live = listening.as_ref().is_some_and(|l| l.contains(&path));
        if !live
            && let Err(e) = UnixStream::connect(&path)
            && e.raw_os_error() == Some(libc::ECONNREFUSED)
        {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        if other == name {
            return Err(BindError::Taken);
        }
        used.insert(id);
    }
    let id = (1..=u32::from(u16::MAX))
        .find(|id| !used.contains(id))
        .ok_or_else(|| BindError::Io(std::io::Error::other("no free session id")))?;
    let path = dir::socket_path(&dir, id, name);
    let listener = UnixListener::bind(&path).map_err(BindError::Io)?;
    Ok((listener, SocketFile(path), id))
}

/// Answers each connection on a thread of its own: `Info` from the shared
/// state, the rest by the driver. A slow or silent client delays nobody.
pub fn serve(
    listener: UnixListener,
    info: Arc<Mutex<Info>>,
    jobs: tokio::sync::mpsc::Sender<Job>,
    last: std::sync::mpsc::Sender<()>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let mut conn = match conn {
            Ok(c) => c,
            Err(_) => {
                // Out of descriptors, say: give the others time to end.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = conn.set_write_timeout(Some(REQUEST_DEADLINE));
            reply(&mut conn, &Response::err("the session is busy; try again"));
            continue;
        }
        let slot = Slot(active.clone());
        let (info, jobs, last) = (info.clone(), jobs.clone(), last.clone());
        // Should the thread not start, the closure is dropped with the
        // connection and the slot: the client sees it closed unanswered.
        let _ = std::thread::Builder::new()
            .name("session-conn".into())
            .spawn(move || {
                let _slot = slot;
                answer(conn, &info, &jobs, &last);
            });
    }
}

/// One of the [`MAX_CONNECTIONS`], given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn reply(conn: &mut UnixStream, response: &Response) {
    let mut line = serde_json::to_vec(response).expect("responses serialize");
    line.push(b'\n');
    let _ = conn.write_all(&line);
}

/// One connection: the peer is checked before anything is read, and the
/// whole request must arrive within [`REQUEST_DEADLINE`] and
/// [`MAX_REQUEST`] bytes.
fn answer(
    mut conn: UnixStream,
    info: &Mutex<Info>,
    jobs: &tokio::sync::mpsc::Sender<Job>,
    last: &std::sync::mpsc::Sender<()>,
) {
    let _ = conn.set_write_timeout(Some(REQUEST_DEADLINE));
    let owner = info.lock().map(|i| i.owner_uid).unwrap_or(0);
    match peer::of(&conn) {
        Ok(p) if p.uid == owner || p.uid == 0 => {}
        Ok(p) => {
            reply(
                &mut conn,
                &Response::err(format!(
                    "permission denied: the session belongs to uid {owner}, not {} \
                     (only its owner or root may use it)",
                    p.uid
                )),
            );
            return;
        }
        Err(_) => return,
    }
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let Ok((line, fds)) = super::fdpass::recv_line(&conn, MAX_REQUEST, deadline) else {
        // Too slow, too long, or gone: nothing to answer.
        return;
    };
    let mut ends_session = false;
    let response = match serde_json::from_slice::<Request>(&line) {
        Err(e) => Response::err(format!("bad request: {e}")),
        Ok(Request::Info) => Response {
            ok: true,
            info: info.lock().ok().map(|i| i.clone()),
            ..Default::default()
        },
        Ok(request) => {
            ends_session = matches!(request, Request::Shutdown { .. });
            let (tx, rx) = std::sync::mpsc::channel();
            let job = Job {
                request,
                fds,
                reply: tx,
            };
            if jobs.blocking_send(job).is_err() {
                Response::err("the session is ending")
            } else {
                rx.recv()
                    .unwrap_or_else(|_| Response::err("the session ended"))
            }
        }
    };
    reply(&mut conn, &response);
    drop(conn);
    if ends_session && response.ok {
        let _ = last.send(());
    }
}
