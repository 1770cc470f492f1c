//! One thread of a running process, stopped with ptrace and made to call
//! functions of its own (`dlopen`, then the injection library's entry
//! points), then given back exactly as it was: the steps gdb's `call`, py-spy
//! and wprof take.
//!
//! - Stopped with `PTRACE_SEIZE` + `PTRACE_INTERRUPT`, which neither sends a
//!   signal nor disturbs job control.
//! - Every register is saved: the general ones, and the whole extended state
//!   (`NT_X86_XSTATE`: x87, SSE, AVX, AVX-512), since the call clobbers what
//!   the ABI lets it and the thread may have been anywhere.
//! - A thread stopped inside a system call has it restarted afterwards: the
//!   call runs with `orig_rax` = -1 (no restart), and the saved registers put
//!   back, with the interrupted call's number and its `-ERESTART*` result,
//!   make the kernel restart it when the thread resumes, as after any stop.
//!   The application never sees `EINTR` from us.
//! - A signal that arrives while the thread is ours is taken off (it would
//!   otherwise run a handler on our call's frame) and given back when the
//!   thread is released: the first with its own `siginfo` at the release,
//!   the others queued again to the thread.
//! - The call returns to address 0; the fault there (`SIGSEGV` at rip 0) is
//!   the sign that it returned, and is not delivered.
//!
//! Whatever happens (an error, a timeout, a panic unwinding through here),
//! [`StoppedThread`]'s drop puts the registers back and detaches: nothing is
//! left stopped or traced.
use std::time::{Duration, Instant};

use nix::{sys::ptrace, unistd::Pid};

/// The `siginfo` code of a signal the kernel sent (`bpf_send_signal`: the
/// loader hook's SIGSTOP, which asys answers itself).
const SI_KERNEL: i32 = 0x80;
/// `tgkill`'s code: the kernel refuses it to `rt_tgsigqueueinfo` from
/// another process, as it refuses every code >= 0.
const SI_TKILL: i32 = -6;
const NT_X86_XSTATE: libc::c_int = 0x202;
const NT_PRFPREG: libc::c_int = 2;
/// Room for the largest XSAVE area the kernel hands out (AMX tiles included).
const XSTATE_MAX: usize = 16 << 10;
/// Bytes below the thread's stack pointer left alone: the ABI's red zone,
/// which a leaf function may be using, and a margin.
const STACK_SKIP: u64 = 128 + 256;

#[derive(Debug, thiserror::Error)]
pub enum StopError {
    #[error("ptrace refused ({0})")]
    Refused(nix::errno::Errno),
    #[error("exited (status {0}) while asys had it stopped")]
    Exited(i32),
    #[error("was killed by signal {0} while asys had it stopped")]
    Killed(i32),
    #[error("did not stop within {0:?}")]
    NoStop(Duration),
    #[error("the call did not return within {0:?}; its registers were put back")]
    Timeout(Duration),
    #[error(
        "the call faulted (signal {signal} at {address:#x}, touching {touched:#x}, stack at {stack:#x}); its registers were put back"
    )]
    Faulted {
        signal: i32,
        address: u64,
        /// The address the faulting instruction touched (`si_addr`).
        touched: u64,
        /// The stack pointer then.
        stack: u64,
    },
    #[error("{0}")]
    Ptrace(nix::errno::Errno),
    #[error("writing its memory: {0}")]
    Memory(std::io::Error),
}

/// An argument of a remote call.
pub enum Arg<'a> {
    Value(u64),
    /// Copied onto the thread's stack; the call gets its address.
    Bytes(&'a [u8]),
    /// A zeroed buffer of this many bytes on the thread's stack; the call
    /// gets its address, and [`Returned::buffers`] its bytes afterwards.
    Buffer(usize),
}

pub struct Returned {
    pub value: u64,
    /// The [`Arg::Buffer`]s, in order, as the call left them.
    pub buffers: Vec<Vec<u8>>,
}

/// How the thread stopped.
enum Stop {
    /// A ptrace event stop (`PTRACE_EVENT_STOP`: the interrupt, or a group
    /// stop).
    Event,
    /// A signal-delivery stop.
    Signal(i32),
}

/// A thread stopped with ptrace: released (registers back, detached, signals
/// given back) when dropped.
pub struct StoppedThread {
    tgid: i32,
    tid: i32,
    saved: libc::user_regs_struct,
    /// The extended register state and the regset it came from.
    xstate: Vec<u8>,
    xstate_set: libc::c_int,
    /// Signals taken off while the thread was ours.
    deferred: Vec<libc::siginfo_t>,
    /// At a signal-delivery stop (where a release can hand a signal over).
    at_signal_stop: bool,
    attached: bool,
    /// The registers were saved: only then are they put back (a thread
    /// that stopped only after asys gave up waiting keeps its own).
    saved_ok: bool,
}

impl StoppedThread {
    /// Seizes thread `tid` of process `tgid` and stops it, within `timeout`.
    pub fn stop(tgid: u32, tid: u32, timeout: Duration) -> Result<Self, StopError> {
        let pid = Pid::from_raw(tid as i32);
        ptrace::seize(pid, ptrace::Options::empty()).map_err(StopError::Refused)?;
        let mut me = Self {
            tgid: tgid as i32,
            tid: tid as i32,
            // SAFETY: a plain C struct of integers; all-zero is a value.
            saved: unsafe { std::mem::zeroed() },
            xstate: Vec::new(),
            xstate_set: NT_X86_XSTATE,
            deferred: Vec::new(),
            at_signal_stop: false,
            attached: true,
            saved_ok: false,
        };
        match me.stop_and_save(timeout) {
            Ok(()) => Ok(me),
            Err(e) => Err(me.why_gone(e)),
        }
    }

    fn stop_and_save(&mut self, timeout: Duration) -> Result<(), StopError> {
        let pid = Pid::from_raw(self.tid);
        ptrace::interrupt(pid).map_err(StopError::Ptrace)?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.wait(deadline)? {
                Some(Stop::Event) => break,
                Some(Stop::Signal(sig)) => {
                    self.take_signal(sig)?;
                    self.resume()?;
                }
                None => return Err(StopError::NoStop(timeout)),
            }
        }
        self.saved = ptrace::getregs(pid).map_err(StopError::Ptrace)?;
        self.save_xstate()?;
        self.saved_ok = true;
        Ok(())
    }

    /// A ptrace request that found no thread (`ESRCH`) raced the thread's
    /// death: what killed it is the error to report, and its exit is ours
    /// to collect as its tracer (its parent waits for it until then).
    fn why_gone(&mut self, e: StopError) -> StopError {
        if !matches!(e, StopError::Ptrace(nix::errno::Errno::ESRCH)) {
            return e;
        }
        match self.wait(Instant::now() + Duration::from_secs(1)) {
            Err(gone @ (StopError::Killed(_) | StopError::Exited(_))) => gone,
            _ => e,
        }
    }

    /// Keeps the thread stopped for `how_long`; Err if the process dies
    /// meanwhile.
    pub fn hold(&mut self, how_long: Duration) -> Result<(), StopError> {
        let deadline = Instant::now() + how_long;
        while Instant::now() < deadline {
            if let Some(Stop::Signal(sig)) = self.wait(deadline)? {
                // A signal arrives for a stopped tracee: kept, as in a call.
                self.take_signal(sig)?;
            }
        }
        Ok(())
    }

    /// Calls `func` in the thread with `args` (at most six, in registers)
    /// and returns its result, waiting at most `timeout`.
    pub fn call(
        &mut self,
        func: u64,
        args: &[Arg<'_>],
        timeout: Duration,
    ) -> Result<Returned, StopError> {
        assert!(args.len() <= 6, "a remote call takes at most six arguments");
        let pid = Pid::from_raw(self.tid);
        let mut regs = self.saved;
        let mut sp = self.saved.rsp.wrapping_sub(STACK_SKIP) & !15;
        let mut values = Vec::with_capacity(args.len());
        let mut buffers = Vec::new();
        for arg in args {
            values.push(match arg {
                Arg::Value(v) => *v,
                Arg::Bytes(b) => {
                    sp = (sp - b.len() as u64) & !15;
                    self.write(sp, b)?;
                    sp
                }
                Arg::Buffer(n) => {
                    sp = (sp - *n as u64) & !15;
                    self.write(sp, &vec![0; *n])?;
                    buffers.push((sp, *n));
                    sp
                }
            });
        }
        // The return address: 0, where the return faults and we see it.
        sp -= 8;
        self.write(sp, &0u64.to_le_bytes())?;
        regs.rsp = sp;
        regs.rip = func;
        regs.rax = 0;
        // No system call restart on the way into our call.
        regs.orig_rax = u64::MAX;
        // The ABI wants the direction flag clear at a call; no single step.
        regs.eflags &= !((1 << 10) | (1 << 8));
        let slots = [
            &mut regs.rdi,
            &mut regs.rsi,
            &mut regs.rdx,
            &mut regs.rcx,
            &mut regs.r8,
            &mut regs.r9,
        ];
        for (slot, v) in slots.into_iter().zip(values) {
            *slot = v;
        }
        ptrace::setregs(pid, regs).map_err(StopError::Ptrace)?;
        self.resume()?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.wait(deadline)? {
                None => {
                    // Stuck (a lock another thread holds, most likely): the
                    // thread is taken back to where it was.
                    ptrace::interrupt(pid).map_err(StopError::Ptrace)?;
                    while !matches!(self.wait(Instant::now() + timeout)?, Some(Stop::Event)) {
                        self.resume()?;
                    }
                    return Err(StopError::Timeout(timeout));
                }
                Some(Stop::Event) => self.resume()?,
                Some(Stop::Signal(sig)) => {
                    let now = ptrace::getregs(pid).map_err(StopError::Ptrace)?;
                    if sig == libc::SIGSEGV && now.rip == 0 {
                        self.at_signal_stop = true;
                        let buffers = buffers
                            .iter()
                            .map(|&(addr, n)| self.read(addr, n))
                            .collect::<Result<_, _>>()?;
                        return Ok(Returned {
                            value: now.rax,
                            buffers,
                        });
                    }
                    if let Some(fault) = self.fault_of_call(sig, &now)? {
                        self.at_signal_stop = true;
                        return Err(fault);
                    }
                    self.take_signal(sig)?;
                    self.resume()?;
                }
            }
        }
    }

    /// A fault the kernel raised for our call's own code (not a signal
    /// someone sent): the call is abandoned.
    fn fault_of_call(
        &self,
        sig: i32,
        regs: &libc::user_regs_struct,
    ) -> Result<Option<StopError>, StopError> {
        if ![libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE].contains(&sig) {
            return Ok(None);
        }
        let info = ptrace::getsiginfo(Pid::from_raw(self.tid)).map_err(StopError::Ptrace)?;
        Ok(
            (info.si_code > 0 && info.si_code != SI_KERNEL).then_some(StopError::Faulted {
                signal: sig,
                address: regs.rip,
                // SAFETY: for the fault signals the kernel fills in si_addr.
                touched: unsafe { info.si_addr() } as u64,
                stack: regs.rsp,
            }),
        )
    }

    /// At a signal-delivery stop for `sig`: keeps the signal to give back
    /// at the release, unless it is the loader hook's SIGSTOP (asys looks at
    /// the process's libraries itself after each load it makes it do).
    fn take_signal(&mut self, sig: i32) -> Result<(), StopError> {
        let info = ptrace::getsiginfo(Pid::from_raw(self.tid)).map_err(StopError::Ptrace)?;
        if !(sig == libc::SIGSTOP && info.si_code == SI_KERNEL) {
            self.deferred.push(info);
        }
        Ok(())
    }

    fn resume(&mut self) -> Result<(), StopError> {
        self.at_signal_stop = false;
        // SAFETY: PTRACE_CONT with no signal; no memory is passed.
        let r = unsafe { libc::ptrace(libc::PTRACE_CONT, self.tid, 0usize, 0usize) };
        if r < 0 {
            return Err(StopError::Ptrace(nix::errno::Errno::last()));
        }
        Ok(())
    }

    /// Waits for the thread's next stop until `deadline` (None: not by then).
    fn wait(&mut self, deadline: Instant) -> Result<Option<Stop>, StopError> {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status into our local.
            let r = unsafe { libc::waitpid(self.tid, &mut status, libc::__WALL | libc::WNOHANG) };
            if r < 0 {
                let e = nix::errno::Errno::last();
                if e == nix::errno::Errno::EINTR {
                    continue;
                }
                return Err(StopError::Ptrace(e));
            }
            if r == 0 {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            if libc::WIFEXITED(status) {
                self.attached = false;
                return Err(StopError::Exited(libc::WEXITSTATUS(status)));
            }
            if libc::WIFSIGNALED(status) {
                self.attached = false;
                return Err(StopError::Killed(libc::WTERMSIG(status)));
            }
            if libc::WIFSTOPPED(status) {
                let event = status >> 16;
                return Ok(Some(if event == 0 {
                    Stop::Signal(libc::WSTOPSIG(status))
                } else {
                    Stop::Event
                }));
            }
        }
    }

    fn save_xstate(&mut self) -> Result<(), StopError> {
        for set in [NT_X86_XSTATE, NT_PRFPREG] {
            let mut buf = vec![0u8; XSTATE_MAX];
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let (tid, request) = (self.tid, libc::PTRACE_GETREGSET);
            // SAFETY: PTRACE_GETREGSET writes at most iov_len bytes into
            // `buf` and the length it wrote into `iov`.
            let r = unsafe { libc::ptrace(request, tid, set as usize, &mut iov) };
            if r == 0 {
                buf.truncate(iov.iov_len);
                self.xstate = buf;
                self.xstate_set = set;
                return Ok(());
            }
        }
        Err(StopError::Ptrace(nix::errno::Errno::last()))
    }

    fn restore(&mut self) -> Result<(), StopError> {
        let pid = Pid::from_raw(self.tid);
        ptrace::setregs(pid, self.saved).map_err(StopError::Ptrace)?;
        let mut iov = libc::iovec {
            iov_base: self.xstate.as_mut_ptr().cast(),
            iov_len: self.xstate.len(),
        };
        // SAFETY: PTRACE_SETREGSET reads iov_len bytes of our saved image.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETREGSET,
                self.tid,
                self.xstate_set as usize,
                &mut iov,
            )
        };
        if r < 0 {
            return Err(StopError::Ptrace(nix::errno::Errno::last()));
        }
        Ok(())
    }

    /// Puts the registers back, detaches and gives back the signals taken
    /// off. Errors are the process's end (it died meanwhile): nothing is
    /// left to release then.
    pub fn release(mut self) -> Result<(), StopError> {
        self.release_now()
    }

    fn release_now(&mut self) -> Result<(), StopError> {
        if !self.attached {
            return Ok(());
        }
        self.attached = false;
        let restored = if self.saved_ok {
            self.restore()
        } else {
            Ok(())
        };
        let mut deferred = std::mem::take(&mut self.deferred).into_iter();
        // At a signal-delivery stop the first signal is handed over with its
        // own siginfo; elsewhere a detach cannot carry one.
        let first = if self.at_signal_stop {
            deferred
                .next()
                .filter(|info| ptrace::setsiginfo(Pid::from_raw(self.tid), info).is_ok())
        } else {
            None
        };
        let sig = first.map_or(0, |i| i.si_signo as usize);
        // SAFETY: PTRACE_DETACH with a signal number (or 0); no memory.
        let r = unsafe { libc::ptrace(libc::PTRACE_DETACH, self.tid, 0usize, sig) };
        let detached = if r < 0 {
            Err(StopError::Ptrace(nix::errno::Errno::last()))
        } else {
            Ok(())
        };
        for info in deferred {
            self.queue_again(&info);
        }
        restored.and(detached)
    }

    /// Queues a signal taken off again to the thread: with its siginfo
    /// where the kernel allows that from another process, else as tgkill.
    fn queue_again(&self, info: &libc::siginfo_t) {
        let mut info = *info;
        if info.si_code < 0 && info.si_code != SI_TKILL {
            // SAFETY: rt_tgsigqueueinfo reads the siginfo we pass.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_rt_tgsigqueueinfo,
                    self.tgid,
                    self.tid,
                    info.si_signo,
                    &mut info as *mut libc::siginfo_t,
                )
            };
            if r == 0 {
                return;
            }
        }
        // SAFETY: tgkill has no memory effects.
        unsafe { libc::syscall(libc::SYS_tgkill, self.tgid, self.tid, info.si_signo) };
    }

    /// Writes `bytes` at `addr` in the process (writable memory only).
    pub fn write(&self, addr: u64, bytes: &[u8]) -> Result<(), StopError> {
        let local = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: reads `bytes` (local) and writes the other process's
        // memory, failing, not faulting, where it is not writable.
        let n = unsafe { libc::process_vm_writev(self.tgid, &local, 1, &remote, 1, 0) };
        if n < 0 || n as usize != bytes.len() {
            return Err(StopError::Memory(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn read(&self, addr: u64, n: usize) -> Result<Vec<u8>, StopError> {
        use crate::process::remote_memory::RemoteMemory as _;
        crate::process::remote_memory::Process(self.tgid as u32)
            .read(addr, n)
            .ok_or_else(|| StopError::Memory(std::io::Error::last_os_error()))
    }
}

impl Drop for StoppedThread {
    fn drop(&mut self) {
        let _ = self.release_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HANDLED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    extern "C" fn count(_: libc::c_int) {
        HANDLED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// A forked child blocked in `read` on a pipe, with a SIGUSR1 handler
    /// (SA_RESTART) that counts. Once a byte comes it exits with: 0 if the
    /// read returned it, 10 + the number of SIGUSR1 handled if it did but
    /// the handler ran, 2 if the read failed (EINTR included).
    fn blocked_child() -> (i32, i32) {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into `fds`.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child calls only async-signal-safe functions
        // (sigaction, read, _exit) before it exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above; `count` is an extern "C" handler.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = count as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
                let mut b = 0u8;
                let n = libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
                let handled = HANDLED.load(std::sync::atomic::Ordering::SeqCst) as i32;
                libc::_exit(match (n, handled) {
                    (1, 0) => 0,
                    (1, h) => 10 + h,
                    _ => 2,
                });
            }
        }
        // SAFETY: our copy of the read end.
        unsafe { libc::close(fds[0]) };
        (pid, fds[1])
    }

    fn finish(pid: i32, w: i32) -> i32 {
        // SAFETY: writes one byte from a local; waitpid writes the status.
        unsafe {
            assert_eq!(libc::write(w, b"x".as_ptr().cast(), 1), 1);
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
            assert!(libc::WIFEXITED(status), "status {status:#x}");
            libc::WEXITSTATUS(status)
        }
    }

    fn wait_blocked(pid: i32) {
        for _ in 0..2000 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            if stat
                .rsplit_once(')')
                .unwrap()
                .1
                .trim_start()
                .starts_with('S')
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the child never blocked");
    }

    #[test]
    fn a_call_in_a_thread_blocked_in_read_returns_and_the_read_is_restarted() {
        let (pid, w) = blocked_child();
        wait_blocked(pid);
        let mut t = StoppedThread::stop(pid as u32, pid as u32, Duration::from_secs(5)).unwrap();
        // The child is a fork of this process: getpid is at the same address.
        let r = t
            .call(
                libc::getpid as *const () as u64,
                &[],
                Duration::from_secs(5),
            )
            .unwrap();
        assert_eq!(r.value as i32, pid);
        // An argument copied to its stack, a buffer read back.
        let r = t
            .call(
                libc::strcpy as *const () as u64,
                &[Arg::Buffer(16), Arg::Bytes(b"copied\0")],
                Duration::from_secs(5),
            )
            .unwrap();
        assert_eq!(&r.buffers[0][..7], b"copied\0");
        t.release().unwrap();
        assert_eq!(finish(pid, w), 0, "the read failed or a handler ran");
    }

    #[test]
    fn a_signal_that_arrives_while_the_thread_is_held_is_handled_once_after() {
        let (pid, w) = blocked_child();
        wait_blocked(pid);
        let mut t = StoppedThread::stop(pid as u32, pid as u32, Duration::from_secs(5)).unwrap();
        // SAFETY: kill has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
        t.hold(Duration::from_millis(50)).unwrap();
        // The call runs with the signal pending: it is taken off then.
        t.call(
            libc::getpid as *const () as u64,
            &[],
            Duration::from_secs(5),
        )
        .unwrap();
        t.release().unwrap();
        // Handled once, after the release; the read restarted (SA_RESTART).
        assert_eq!(finish(pid, w), 11);
    }
}
