//! The system calls osrt reports, by x86-64 number, each named after the
//! libc function that makes it (the name nsys shows for the call, and
//! strace's): `usleep`, `nanosleep` and `sleep` all end in one
//! `clock_nanosleep`, so a sleep is one row named `clock_nanosleep`;
//! `open`, `open64` and `fopen` end in `openat`; `waitpid` in `wait4`;
//! `send`/`recv` in `sendto`/`recvfrom`; `fread`/`fwrite` in `read`/`write`.
//!
//! Left out on purpose: `futex`, which is how a pthread lock waits (a
//! futex wait made by libc's lock code is a row of the lock function that
//! waited: see kernel/osrt.rs), and the calls that do not block or move
//! data (getpid, brk, rt_sigaction...).
//!
//! The numbers are the x86-64 ABI's (arch/x86/entry/syscalls/syscall_64.tbl,
//! never changed once assigned), taken from the libc crate so that none is
//! mistyped; the kernel side reads x86-64 registers, so the table is too.
pub const SYSCALLS: &[(u32, &str)] = &[
    (libc::SYS_read as u32, "read"),
    (libc::SYS_write as u32, "write"),
    (libc::SYS_open as u32, "open"),
    (libc::SYS_close as u32, "close"),
    (libc::SYS_poll as u32, "poll"),
    (libc::SYS_mmap as u32, "mmap"),
    (libc::SYS_munmap as u32, "munmap"),
    (libc::SYS_ioctl as u32, "ioctl"),
    (libc::SYS_pread64 as u32, "pread64"),
    (libc::SYS_pwrite64 as u32, "pwrite64"),
    (libc::SYS_readv as u32, "readv"),
    (libc::SYS_writev as u32, "writev"),
    (libc::SYS_select as u32, "select"),
    (libc::SYS_pause as u32, "pause"),
    (libc::SYS_nanosleep as u32, "nanosleep"),
    (libc::SYS_connect as u32, "connect"),
    (libc::SYS_accept as u32, "accept"),
    (libc::SYS_sendto as u32, "sendto"),
    (libc::SYS_recvfrom as u32, "recvfrom"),
    (libc::SYS_sendmsg as u32, "sendmsg"),
    (libc::SYS_recvmsg as u32, "recvmsg"),
    (libc::SYS_wait4 as u32, "wait4"),
    (libc::SYS_fsync as u32, "fsync"),
    (libc::SYS_fdatasync as u32, "fdatasync"),
    (libc::SYS_creat as u32, "creat"),
    (libc::SYS_clock_nanosleep as u32, "clock_nanosleep"),
    (libc::SYS_epoll_wait as u32, "epoll_wait"),
    (libc::SYS_waitid as u32, "waitid"),
    (libc::SYS_openat as u32, "openat"),
    (libc::SYS_pselect6 as u32, "pselect6"),
    (libc::SYS_ppoll as u32, "ppoll"),
    (libc::SYS_epoll_pwait as u32, "epoll_pwait"),
    (libc::SYS_accept4 as u32, "accept4"),
    (libc::SYS_preadv as u32, "preadv"),
    (libc::SYS_pwritev as u32, "pwritev"),
    (libc::SYS_recvmmsg as u32, "recvmmsg"),
    (libc::SYS_sendmmsg as u32, "sendmmsg"),
    (libc::SYS_openat2 as u32, "openat2"),
    (libc::SYS_epoll_pwait2 as u32, "epoll_pwait2"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique_and_fit_the_kernel_table() {
        let mut seen = std::collections::BTreeSet::new();
        for (nr, name) in SYSCALLS {
            assert!(*nr < asys_common::OSRT_SYSCALL_SLOTS, "{name}");
            assert!(seen.insert(*nr), "{nr} twice");
        }
    }
}
