//! A session's control socket: taking the name and id (abstract-socket
//! locks), answering requests one at a time on a plain thread, and checking
//! who asks (SO_PEERCRED: only the owner or root).
use std::{
    io::Write as _,
    os::{
        fd::{AsRawFd, OwnedFd},
        linux::net::SocketAddrExt,
        unix::net::{SocketAddr, UnixListener, UnixStream},
    },
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{
    CONTROL_PREFIX, ID_LOCK_PREFIX, NAME_LOCK_PREFIX,
    protocol::{Info, Request, Response, State},
};

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
pub fn announce_profile(name: &str, app_pid: u32) {
    let Ok((listener, locks, id)) = bind(name) else {
        return;
    };
    let info = Arc::new(Mutex::new(Info {
        id,
        name: name.to_string(),
        // SAFETY: getuid has no preconditions.
        owner_uid: unsafe { libc::getuid() },
        daemon_pid: std::process::id(),
        state: State::Collecting,
        app_pid: Some(app_pid),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        reports: 0,
    }));
    let (jobs_tx, mut jobs_rx) = tokio::sync::mpsc::channel::<Job>(1);
    let (last_tx, _last_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _locks = locks;
        serve(listener, info, jobs_tx, last_tx)
    });
    std::thread::spawn(move || {
        while let Some(job) = jobs_rx.blocking_recv() {
            let _ = job.reply.send(Response::err(
                "a profile session is controlled by its 'asys profile' command \
                 (it ends with its application, --duration or Ctrl+C)",
            ));
        }
    });
}

pub enum BindError {
    Taken,
    Io(std::io::Error),
}

fn abstract_addr(name: &str) -> std::io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(name.as_bytes())
}

/// Takes the name, the first free id, then listens on the control socket.
pub fn bind(name: &str) -> Result<(UnixListener, Vec<UnixListener>, u32), BindError> {
    let lock = |n: &str| UnixListener::bind_addr(&abstract_addr(n)?);
    let name_lock = match lock(&format!("{NAME_LOCK_PREFIX}{name}")) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Err(BindError::Taken),
        Err(e) => return Err(BindError::Io(e)),
    };
    for id in 1..=u16::MAX as u32 {
        let id_lock = match lock(&format!("{ID_LOCK_PREFIX}{id}")) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(BindError::Io(e)),
        };
        let control = lock(&format!("{CONTROL_PREFIX}{id}/{name}")).map_err(BindError::Io)?;
        return Ok((control, vec![name_lock, id_lock], id));
    }
    Err(BindError::Io(std::io::Error::other("no free session id")))
}

/// The uid of the process at the other end.
fn peer_uid(stream: &UnixStream) -> Option<u32> {
    // SAFETY: ucred is three integers; zero is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.uid)
}

/// Answers requests one at a time: `Info` from the shared state, the rest by
/// the driver. Only the owner and root are served.
pub fn serve(
    listener: UnixListener,
    info: Arc<Mutex<Info>>,
    jobs: tokio::sync::mpsc::Sender<Job>,
    last: std::sync::mpsc::Sender<()>,
) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
        let owner = info.lock().map(|i| i.owner_uid).unwrap_or(0);
        let uid = peer_uid(&conn);
        let mut ends_session = false;
        let response = match super::fdpass::recv_line(&conn, 1 << 22) {
            Err(_) => continue,
            Ok(_) if uid != Some(owner) && uid != Some(0) => Response::err(format!(
                "permission denied: the session belongs to uid {owner} (only its owner or root may use it)"
            )),
            Ok((line, fds)) => match serde_json::from_slice::<Request>(&line) {
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
            },
        };
        let mut line = serde_json::to_vec(&response).expect("responses serialize");
        line.push(b'\n');
        let _ = conn.write_all(&line);
        drop(conn);
        if ends_session && response.ok {
            let _ = last.send(());
        }
    }
}
