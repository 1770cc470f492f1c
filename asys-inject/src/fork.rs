//! Keeping the probe sites working in forked children.
//!
//! On Linux 6.18 a uprobe on a NOP5 is optimized on its first hit: the kernel
//! rewrites the NOP5 into a call to a per-process "uprobes trampoline" page.
//! A child forked after that inherits the rewritten instruction in its private
//! copy of the text page but not the trampoline page, and crashes (SIGSEGV at
//! the trampoline address) the first time it reaches the site. Seen here with
//! `fork_exec` under `asys profile`.
//!
//! The fix runs in the child right after fork: map the site page afresh from
//! the library file. The kernel installs the registered uprobes on a new
//! mapping (as for any mmap of a probed file), and optimizes them again for
//! the child on its first hit.
use std::{ffi::CString, io::Read};

fn page_of(addr: usize) -> usize {
    addr & !(page_size() - 1)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Finds (mapping start, file offset, path) of the file mapping holding `addr`.
fn mapping_of(addr: usize) -> Option<(usize, u64, String)> {
    let mut text = String::new();
    std::fs::File::open("/proc/self/maps")
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (range, _perms, offset) = (it.next()?, it.next()?, it.next()?);
        let (_dev, _inode) = (it.next()?, it.next()?);
        let Some(path) = it.next() else { continue };
        let (s, e) = range.split_once('-')?;
        let (s, e) = (
            usize::from_str_radix(s, 16).ok()?,
            usize::from_str_radix(e, 16).ok()?,
        );
        if addr >= s && addr < e && path.starts_with('/') {
            return Some((s, u64::from_str_radix(offset, 16).ok()?, path.to_string()));
        }
    }
    None
}

/// The memfd this library was loaded from, in a process of another mount
/// namespace that asys loaded it into (-1: loaded from a path). Kept open
/// there for this: a memfd's path in /proc/self/maps cannot be opened.
pub static LIBRARY_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Replaces the page holding `addr` with a fresh private mapping of the file.
fn remap_from_file(addr: usize) -> bool {
    let page = page_of(addr);
    let Some((start, offset, path)) = mapping_of(page) else {
        return false;
    };
    let memfd = LIBRARY_FD.load(std::sync::atomic::Ordering::Relaxed);
    // The memfd stays open; a file opened by its path is closed once mapped.
    let (fd, opened) = if path.starts_with("/memfd:") && memfd >= 0 {
        (memfd, false)
    } else {
        let Ok(cpath) = CString::new(path) else {
            return false;
        };
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return false;
        }
        (fd, true)
    };
    // SAFETY: replaces exactly the page of our own text that holds the
    // site with the same bytes from the file (MAP_FIXED over our own
    // mapping), in a child right after fork, before any thread runs there.
    let p = unsafe {
        libc::mmap(
            page as *mut libc::c_void,
            page_size(),
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_FIXED,
            fd,
            (offset + (page - start) as u64) as libc::off_t,
        )
    };
    if opened {
        // SAFETY: the descriptor opened above, used by nothing else.
        unsafe { libc::close(fd) };
    }
    p != libc::MAP_FAILED
}

extern "C" fn after_fork_in_child() {
    crate::correlation::after_fork();
    crate::flusher::after_fork();
    let sites = [
        crate::sites::asys_site_activity as *const () as usize,
        crate::sites::asys_site_api as *const () as usize,
        crate::sites::asys_site_lost as *const () as usize,
        crate::sites::asys_site_name as *const () as usize,
        crate::sites::asys_site_call as *const () as usize,
    ];
    let mut done: [usize; 5] = [0; 5];
    for (i, s) in sites.iter().enumerate() {
        let page = page_of(*s);
        if !done.contains(&page) {
            remap_from_file(*s);
            done[i] = page;
        }
    }
}

pub fn install() {
    // SAFETY: registers a handler that is an `extern "C" fn()` living as
    // long as the library (which is never unloaded).
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
}
