//! Starting the application so that tracing is in place before its first
//! instruction: the child is forked, waits on a pipe until asys has added it
//! to the traced set, then execs. Exec failures come back on a second pipe.
//!
//! A top-level module because several stages share it: `cli/` (profile,
//! launch, the session daemon) starts the application, `record/` waits on
//! it, and `kernel/`'s unlinker uses its pipe.
use std::{
    ffi::CString,
    io::Read,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
};

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("application '{0}' not found")]
    NotFound(String),
    #[error("application '{0}' is not an executable file")]
    NotExecutable(String),
    #[error("cannot start '{app}': {source}")]
    Exec {
        app: String,
        #[source]
        source: std::io::Error,
    },
    #[error("argument contains a NUL byte")]
    Nul,
}

/// Finds APP as a shell would: a path if it has a slash, else on PATH.
pub fn resolve(app: &str, path_var: Option<&std::ffi::OsStr>) -> Result<PathBuf, LaunchError> {
    let is_exec = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if app.contains('/') {
        let p = PathBuf::from(app);
        if !p.exists() {
            return Err(LaunchError::NotFound(app.into()));
        }
        if !is_exec(&p) {
            return Err(LaunchError::NotExecutable(app.into()));
        }
        return Ok(p);
    }
    let path_var = path_var
        .map(|v| v.to_os_string())
        .unwrap_or_else(|| "/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path_var) {
        let p = dir.join(app);
        if is_exec(&p) {
            return Ok(p);
        }
    }
    Err(LaunchError::NotFound(app.into()))
}

/// A forked child held before exec.
pub struct Suspended {
    pub pid: u32,
    go: OwnedFd,
    err: OwnedFd,
    app: String,
}

pub(crate) fn pipe(flags: i32) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the two-int array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Where the application's standard streams go.
#[derive(Debug, Clone, Copy)]
pub enum Stdio {
    /// asys's own.
    Inherit,
    /// stdout and stderr to /dev/null.
    Quiet,
    /// These stdin, stdout, stderr (a session's, from `asys launch`).
    Fds([std::os::fd::RawFd; 3]),
}

/// Forks a child that will exec `program` with `argv` and the environment
/// `env` once [`Suspended::release`] is called.
pub fn spawn_suspended(
    program: &Path,
    argv: &[String],
    env: &[(String, String)],
    stdio: Stdio,
) -> Result<Suspended, LaunchError> {
    spawn(program, argv, env, stdio, None)
}

/// [`spawn_suspended`] in the folder `cwd` (a session's application starts
/// where `asys launch` ran, not where the daemon is).
pub fn spawn_suspended_in(
    program: &Path,
    argv: &[String],
    env: &[(String, String)],
    stdio: Stdio,
    cwd: &Path,
) -> Result<Suspended, LaunchError> {
    spawn(program, argv, env, stdio, Some(cwd))
}

fn spawn(
    program: &Path,
    argv: &[String],
    env: &[(String, String)],
    stdio: Stdio,
    cwd: Option<&Path>,
) -> Result<Suspended, LaunchError> {
    let cstr = |b: &[u8]| CString::new(b).map_err(|_| LaunchError::Nul);
    let prog = cstr(program.as_os_str().as_bytes())?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| cstr(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let envs: Vec<CString> = env
        .iter()
        .map(|(k, v)| cstr(format!("{k}={v}").as_bytes()))
        .collect::<Result<_, _>>()?;
    let cwd = cwd.map(|d| cstr(d.as_os_str().as_bytes())).transpose()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = envs.iter().map(|a| a.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    let app = argv.first().cloned().unwrap_or_default();
    let exec_err = |source| LaunchError::Exec {
        app: app.clone(),
        source,
    };
    let (go_r, go_w) = pipe(libc::O_CLOEXEC).map_err(exec_err)?;
    let (err_r, err_w) = pipe(libc::O_CLOEXEC).map_err(exec_err)?;
    let own_group = !in_terminal_foreground();
    if own_group {
        adopt_orphans();
    }
    // SAFETY: the child only makes async-signal-safe calls (below) until it
    // execs or _exits, so forking a multi-threaded process is sound.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(exec_err(std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // Child: only async-signal-safe calls from here on.
        // SAFETY: read, chdir, open, dup2, execve, write and _exit are
        // async-signal-safe; every pointer passed (the byte buffer, the C
        // strings and the NULL-terminated argv/envp arrays) was built before
        // the fork and outlives these calls.
        unsafe {
            // The parent's ends: with a copy of the write end held here, the
            // read below would never see end-of-file, and a child whose asys
            // died before letting it go would wait for ever.
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            if own_group {
                libc::setpgid(0, 0);
            }
            let mut b = 0u8;
            let n = libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
            if n != 1 {
                libc::_exit(127);
            }
            if let Some(dir) = &cwd
                && libc::chdir(dir.as_ptr()) != 0
            {
                let errno = *libc::__errno_location();
                libc::write(err_w.as_raw_fd(), (&errno as *const i32).cast(), 4);
                libc::_exit(127);
            }
            match stdio {
                Stdio::Inherit => {}
                Stdio::Quiet => {
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
                    if null >= 0 {
                        libc::dup2(null, 1);
                        libc::dup2(null, 2);
                    }
                }
                Stdio::Fds(fds) => {
                    for (to, from) in fds.into_iter().enumerate() {
                        if from >= 0 {
                            libc::dup2(from, to as i32);
                        }
                    }
                }
            }
            libc::execve(prog.as_ptr(), arg_ptrs.as_ptr(), env_ptrs.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_w.as_raw_fd(), (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    if own_group {
        // Also from this side, as a shell does: whichever runs first, the
        // child is in its group before it execs.
        // SAFETY: setpgid on our own child; no memory is touched.
        unsafe { libc::setpgid(pid, pid) };
    }
    drop(go_r);
    drop(err_w);
    Ok(Suspended {
        pid: pid as u32,
        go: go_w,
        err: err_r,
        app,
    })
}

impl Suspended {
    /// Lets the child exec; fails if exec did.
    pub fn release(self) -> Result<u32, LaunchError> {
        // SAFETY: writes one byte from a live one-byte array to our own pipe.
        let n = unsafe { libc::write(self.go.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        if n != 1 {
            return Err(LaunchError::Exec {
                app: self.app,
                source: std::io::Error::last_os_error(),
            });
        }
        drop(self.go);
        let mut errno = [0u8; 4];
        let mut f = std::fs::File::from(self.err);
        match f.read(&mut errno) {
            Ok(4) => {
                reap(self.pid);
                Err(LaunchError::Exec {
                    app: self.app,
                    source: std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno)),
                })
            }
            _ => Ok(self.pid),
        }
    }

    /// Kills the held child (asys gave up before starting it).
    pub fn abandon(self) {
        // SAFETY: kill has no memory effects; the pid is our own unreaped child.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        reap(self.pid);
    }
}

fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: waitpid writes only the status int it is given.
    unsafe { libc::waitpid(pid as i32, &mut status, 0) };
}

/// Whether asys runs in its terminal's foreground process group (a job in
/// the foreground of an interactive shell).
///
/// The application is stopped (SIGSTOP) while asys probes each library it
/// loads. A process group with a stopped member gets SIGHUP and SIGCONT
/// from the kernel when it becomes orphaned: when asys's parent exits and
/// no member has a parent outside the group in its session, as happens to
/// `(asys profile ./app &)` when the subshell returns. The application then
/// died of SIGHUP. So, unless asys is in the foreground (where the shell
/// waits for it, and the application needs the terminal: its keyboard
/// signals and its input), the application gets a process group of its own,
/// whose parent, asys, is outside it in the same session: never orphaned
/// while asys runs, and asys continues everything it stopped before it
/// ends.
fn in_terminal_foreground() -> bool {
    // SAFETY: getpgrp has no memory effects.
    let group = unsafe { libc::getpgrp() };
    // SAFETY: tcgetpgrp has no memory effects; a descriptor that is not a
    // terminal answers -1.
    (0..3).any(|fd| unsafe { libc::tcgetpgrp(fd) } == group)
}

/// Makes asys the child subreaper of what it launches.
///
/// The application's group stays whole when the application itself exits
/// first: its children (a daemon's first fork, a shell's background job)
/// are reparented, and a group whose members' parents are all gone from
/// the session is orphaned. If one of them is stopped at that moment (asys
/// stops a process while it probes a library the process loads), the
/// kernel sends the whole group SIGHUP and SIGCONT, and the child dies of
/// it before it ran (seen: `sh -c 'setsid sh -c ... & exit 0'`, where the
/// `setsid` stopped at its libc load died and its daemon never ran). As the
/// subreaper, asys becomes their parent: in the session, outside the group,
/// so the group is never orphaned while asys runs.
///
/// asys does not reap them: waiting for any child would take the exit of
/// children asys waits for elsewhere. An adopted child that exits stays a
/// zombie until asys ends (then init reaps it); the process tree counts a
/// zombie as exited.
fn adopt_orphans() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes integers only and
    // changes only this process's attribute.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if r != 0 {
        eprintln!(
            "asys: warning: cannot adopt the application's orphans ({}); a child stopped at a \
             library load when its parent exits may die of SIGHUP",
            std::io::Error::last_os_error()
        );
    }
}

/// A signal's name, as `kill -l` gives it.
pub fn signal_name(sig: i32) -> String {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(sig).ok().and_then(|i| NAMES.get(i)) {
        Some(n) if !n.is_empty() => (*n).to_string(),
        _ => format!("signal {sig}"),
    }
}

/// Waits for `pid` and returns the shell-style exit code (128+N for signal N).
/// An application that a signal ended is named, with the signal, as nsys
/// does: a death asys did not cause (SIGHUP, SIGSEGV, the OOM killer's
/// SIGKILL) must not pass for an exit.
pub fn wait(pid: u32) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes only the status int it is given.
        let r = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
        if r == pid as i32 {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return -1;
        }
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let core = if libc::WCOREDUMP(status) {
            ", core dumped"
        } else {
            ""
        };
        eprintln!(
            "asys: the application (pid {pid}) was ended by {} ({sig}{core})",
            signal_name(sig)
        );
        128 + sig
    } else {
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held child whose asys goes away without letting it exec (an error
    /// after the fork, a crash) exits by itself instead of waiting for ever.
    #[test]
    fn a_held_child_exits_when_asys_lets_go_of_it() {
        let child = spawn_suspended(
            Path::new("/bin/true"),
            &["true".to_string()],
            &[],
            Stdio::Quiet,
        )
        .expect("fork");
        let pid = child.pid as i32;
        // As if asys had died: its ends of the pipes close, nothing more.
        drop(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut status = 0;
        loop {
            // SAFETY: waitpid writes only the status int it is given.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if std::time::Instant::now() >= deadline {
                // SAFETY: kill has no memory effects; pid is our own child.
                // (It holds the test's output open: it must not outlive it.)
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("the held child is still waiting");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 127);
    }
}
