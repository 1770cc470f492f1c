//! Removing perf-event uprobes without making anyone wait for it.
//!
//! On kernels without uprobe-multi links (before 6.6, or the `perf-uprobe`
//! fallback forced) each probed function is two perf events, and the kernel
//! removes each one under its global `event_mutex`, with a grace period:
//! about 0.1 s each here, one after another whatever the number of threads.
//! PyTorch's CUDA libraries under `-t cuda,cublas,cudnn,nccl` are 3,434
//! events, which took 369 s to remove after the application had ended; asys
//! printed nothing in that time and Ctrl+C could not end it.
//!
//! Every other BPF link and perf event costs a grace period too (a
//! uprobe-multi link, a tracepoint's perf event): 40 to 100 ms each, most of
//! a short run's wall time.
//!
//! Once recording is off nothing waits for those removals, so asys hands them
//! to a process of its own ([`hand_off`]): a grandchild in a session of its
//! own, with no terminal and no descriptor but BPF objects and perf events
//! (what `/proc/self/fd` names `anon_inode:bpf-*` and
//! `anon_inode:[perf_event]`), that waits until the tracer has dropped all
//! its own copies (a link is removed by whoever closes it last), closes its
//! copies one by one and exits. asys ends at once. While it works, the
//! probes still trap in processes that map those libraries (the programs
//! find no traced process and return), which is why asys says that it is
//! running when that is long (perf-event uprobes). The loader hooks are not
//! handed off: they are gone, and what they stopped continued, before.
//!
//! Creating a perf-event uprobe, or a tracepoint's perf event, takes the same
//! kernel mutex, so another asys attaching would wait behind each removal.
//! Attachers hold a shared lock on `.perf-uprobes.lock` in asys's runtime
//! folder ([`attaching`]) while they load (tracepoints, perf events) and
//! while they attach a batch of perf-event uprobes, and the unlinker closes
//! a link only once it could take that lock exclusively (trying without
//! blocking, 20 ms apart, and letting it go at once, so that unlinkers never
//! wait for each other): an attaching asys waits at most for one removal in
//! flight.
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Past this many perf-event uprobes asys says that a background process
/// removes them (fewer take under two seconds).
pub const HAND_OFF_MIN: usize = 16;

const LOCK_FILE: &str = ".perf-uprobes.lock";

/// The lock file, opened without following a link, in the caller's own
/// runtime folder (0700; root's is /run/asys). None if it cannot be had:
/// then nobody coordinates, which costs time and nothing else.
fn lock_file() -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = crate::runtime_dir::ensure().ok()?;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(dir.join(LOCK_FILE))
        .ok()
}

/// Held while perf-event uprobes are created: an unlinker of any asys
/// pauses meanwhile.
pub struct Attaching(#[allow(dead_code)] Option<std::fs::File>);

/// Takes the shared lock (waiting for at most one removal in flight).
pub fn attaching() -> Attaching {
    let file = lock_file().filter(|f| {
        loop {
            // SAFETY: flock on a descriptor we own; released when it closes.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH) } == 0 {
                return true;
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return false;
            }
        }
    });
    Attaching(file)
}

/// Hands `links`, and every other BPF object and perf event asys holds, to
/// a background process that closes them; returns its pid and the write end
/// of its go pipe, which the caller closes once it has dropped its own
/// copies of all of them (end of file starts the unlinker). On failure the
/// links come back, to be closed in place.
pub fn hand_off(links: Vec<OwnedFd>) -> Result<(u32, OwnedFd), (Vec<OwnedFd>, std::io::Error)> {
    let lock = lock_file();
    let lock_fd: RawFd = lock.as_ref().map_or(-1, |f| f.as_raw_fd());
    // Everything the grandchild uses is made before the fork: it may only
    // make async-signal-safe calls (asys has other threads).
    let order: Vec<RawFd> = links.iter().map(|l| l.as_raw_fd()).collect();
    let highest = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(1024);
    let pipe = || crate::spawn::pipe(libc::O_CLOEXEC);
    let (pid_r, pid_w) = match pipe() {
        Ok(p) => p,
        Err(e) => return Err((links, e)),
    };
    let (go_r, go_w) = match pipe() {
        Ok(p) => p,
        Err(e) => return Err((links, e)),
    };
    let fds = ChildFds {
        pid_w: pid_w.as_raw_fd(),
        go_r: go_r.as_raw_fd(),
        go_w: go_w.as_raw_fd(),
        pid_r: pid_r.as_raw_fd(),
        lock: lock_fd,
        highest: highest.max(lock_fd),
    };
    // SAFETY: the child and grandchild only make async-signal-safe calls
    // (fork, setsid, open, dup2, readlink, close, close_range, flock,
    // nanosleep, read, write, _exit) on memory prepared before the fork.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err((links, std::io::Error::last_os_error()));
    }
    if child == 0 {
        // SAFETY: see above.
        unsafe { unlink_in_child(&fds, &order) }
    }
    drop(pid_w);
    drop(go_r);
    let mut b = [0u8; 4];
    let n = std::io::Read::read(&mut std::fs::File::from(pid_r), &mut b).unwrap_or(0);
    // SAFETY: waitpid on our own child, writing only the status int.
    unsafe { libc::waitpid(child, &mut 0, 0) };
    if n != 4 {
        return Err((
            links,
            std::io::Error::other("the unlinking process did not start"),
        ));
    }
    // Our copies close here, while the unlinker's keep the probes.
    drop(links);
    Ok((u32::from_ne_bytes(b), go_w))
}

/// The descriptors the child needs, as numbers (made before the fork).
struct ChildFds {
    pid_w: RawFd,
    pid_r: RawFd,
    go_r: RawFd,
    go_w: RawFd,
    lock: RawFd,
    /// The highest descriptor open at the fork.
    highest: RawFd,
}

/// Whether descriptor `fd` is a BPF object or a perf event (readlink of
/// /proc/self/fd/N, built without allocating).
///
/// # Safety
/// Async-signal-safe: only readlink.
unsafe fn is_bpf_or_perf(fd: RawFd) -> bool {
    let mut path = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0\0";
    let mut digits = [0u8; 10];
    let (mut n, mut v) = (0, fd as u32);
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for k in 0..n {
        path[14 + k] = digits[n - 1 - k];
    }
    let mut target = [0u8; 32];
    // SAFETY: a NUL-terminated path (at most 10 digits after 14 bytes, in
    // 25) and a buffer of the length given.
    let len = unsafe { libc::readlink(path.as_ptr().cast(), target.as_mut_ptr().cast(), 32) };
    let target = &target[..len.max(0) as usize];
    target.starts_with(b"anon_inode:bpf") || target.starts_with(b"anon_inode:[perf_event]")
}

/// The child: forks the unlinker and exits, so that the unlinker is nobody's
/// child to reap (a session daemon lives on).
///
/// # Safety
/// Called in a freshly forked child of a multi-threaded process: only
/// async-signal-safe calls.
unsafe fn unlink_in_child(fds: &ChildFds, order: &[RawFd]) -> ! {
    // SAFETY: async-signal-safe calls only (the function's contract).
    unsafe {
        libc::setsid();
        let pid = libc::fork();
        if pid != 0 {
            if pid > 0 {
                let b = (pid as u32).to_ne_bytes();
                libc::write(fds.pid_w, b.as_ptr().cast(), 4);
            }
            libc::_exit(0);
        }
        // The unlinker: no terminal, no pipe a caller waits on for its end
        // of file, no descriptor but BPF objects, perf events, the lock and
        // the go pipe's read end.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
        for fd in [fds.pid_w, fds.pid_r, fds.go_w] {
            libc::close(fd);
        }
        for fd in 3..=fds.highest {
            if fd != fds.lock && fd != fds.go_r && !is_bpf_or_perf(fd) {
                libc::close(fd);
            }
        }
        libc::syscall(
            libc::SYS_close_range,
            (fds.highest + 1) as u32,
            u32::MAX,
            0u32,
        );
        // Killable as any process: asys's threads block some signals, and
        // a fork keeps the forking thread's mask.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(sig, libc::SIG_DFL);
        }
        libc::prctl(libc::PR_SET_NAME, c"asys-unlink".as_ptr());
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
        // Until asys has dropped its copies (end of file on the go pipe).
        let mut b = 0u8;
        while libc::read(fds.go_r, (&mut b as *mut u8).cast(), 1) < 0
            && *libc::__errno_location() == libc::EINTR
        {}
        libc::close(fds.go_r);
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        // The links first, in asys's order, then whatever else is left.
        #[allow(clippy::while_immutable_condition)]
        let close = |fd: RawFd| {
            // Only when no asys is attaching: the exclusive lock is free.
            // It is let go before the close, so that unlinkers never wait
            // for each other (an attacher arriving meanwhile waits for
            // this one removal). A lock that fails otherwise is not
            // waited for.
            while fds.lock >= 0 {
                // (`fds.lock` is the same each time: the loop ends by break.)
                if libc::flock(fds.lock, libc::LOCK_EX | libc::LOCK_NB) == 0 {
                    libc::flock(fds.lock, libc::LOCK_UN);
                    break;
                }
                let e = *libc::__errno_location();
                if e != libc::EWOULDBLOCK && e != libc::EINTR {
                    break;
                }
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
            libc::close(fd);
        };
        for &fd in order {
            close(fd);
        }
        for fd in 3..=fds.highest {
            if fd != fds.lock && libc::fcntl(fd, libc::F_GETFD) >= 0 {
                close(fd);
            }
        }
        libc::_exit(0)
    }
}
