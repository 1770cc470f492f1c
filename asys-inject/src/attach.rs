//! Loaded into a running process. asys (asys-userspace's `inject/`) stops
//! one thread of the process with ptrace, has it `dlopen` this library,
//! probes the library's sites, and then has it call [`asys_inject_attach`]:
//! activity and API callbacks are subscribed from that moment, as CUPTI
//! allows after the context exists, so work launched from then on is
//! recorded. At the end of the attach asys has it call
//! [`asys_inject_detach`]: activity is disabled and every record flushed.
//!
//! The library is never unloaded: the runtime may still hold our callbacks
//! (a buffer in flight, a callback running on another thread), and `dlclose`
//! under them would leave the process calling unmapped code. A quiesced
//! library costs a poll every 100 ms on its flusher thread, and the next
//! attach re-uses it.
use std::{
    ffi::{CStr, c_char},
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU8, Ordering},
    },
};

/// How the library was started in this process.
static STARTED_BY: AtomicU8 = AtomicU8::new(NOT_STARTED);
const NOT_STARTED: u8 = 0;
const BY_ATTACH: u8 = 1;
const AT_INIT: u8 = 2;

/// The runtime started the library at its initialization (the process was
/// launched with the injection variables): an attach finds it recording.
pub(crate) fn started_at_init() {
    STARTED_BY.store(AT_INIT, Ordering::Release);
}

/// Set while [`asys_inject_attach`] runs: warnings go to asys, not to the
/// application's stderr.
static ATTACHING: AtomicBool = AtomicBool::new(false);
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether an attach (not the runtime's initialization) is starting the
/// library now.
pub(crate) fn attaching() -> bool {
    ATTACHING.load(Ordering::Acquire)
}

/// Keeps `what` for asys if an attach is running; false otherwise.
pub(crate) fn keep_warning(what: &str) -> bool {
    if !ATTACHING.load(Ordering::Acquire) {
        return false;
    }
    if let Ok(mut w) = WARNINGS.lock() {
        w.push(what.to_string());
    }
    true
}

/// What an attach found: 1 device activity is recorded from now on; 2 it
/// was already, since the process started (nothing is changed); 0 it is
/// not, and `reason` (`reason_len` bytes, asys's) says why. `settings` are
/// the variables asys would have put in a launched process's environment,
/// as `NAME=VALUE` lines. Warnings that do not stop the activity are in
/// `reason` too. Called by asys through ptrace, on a thread it stopped.
///
/// # Safety
/// `settings` is NUL-terminated; `reason` holds `reason_len` writable bytes
/// (or is null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn asys_inject_attach(
    settings: *const c_char,
    reason: *mut c_char,
    reason_len: usize,
) -> i32 {
    if STARTED_BY.load(Ordering::Acquire) == AT_INIT {
        return 2;
    }
    if !settings.is_null() {
        // SAFETY: NUL-terminated, as the contract says.
        crate::config::set(&unsafe { CStr::from_ptr(settings) }.to_string_lossy());
    }
    if let Some(fd) = crate::config::var("ASYS_LIBRARY_FD").and_then(|v| v.parse().ok()) {
        crate::fork::LIBRARY_FD.store(fd, Ordering::Relaxed);
    }
    ATTACHING.store(true, Ordering::Release);
    crate::correlation::announce_again();
    let started = crate::start();
    ATTACHING.store(false, Ordering::Release);
    let mut text: Vec<String> = WARNINGS
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default();
    let ok = match started {
        Ok(()) => {
            STARTED_BY.store(BY_ATTACH, Ordering::Release);
            1
        }
        Err(why) => {
            // asys words its own line; the library's environment-mode
            // sentence would say it twice.
            let why = why
                .strip_prefix("no device activity for this process: ")
                .unwrap_or(&why)
                .to_string();
            text.insert(0, why);
            0
        }
    };
    // SAFETY: `reason_len` writable bytes, as the contract says.
    unsafe { write_reason(&text.join("; "), reason, reason_len) };
    ok
}

/// At the end of an attach: quiesces what [`asys_inject_attach`] started.
/// Returns 1 when it did; 0 when the library was started by the runtime at
/// its initialization (the process was launched with the injection
/// variables), whose activity is left as it was.
#[unsafe(no_mangle)]
pub extern "C" fn asys_inject_detach() -> i32 {
    if STARTED_BY
        .compare_exchange(BY_ATTACH, NOT_STARTED, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return 0;
    }
    crate::quiesce();
    1
}

/// Writes `text` into `out` (`len` bytes), cut to fit, NUL-terminated.
///
/// # Safety
/// `out` is null or holds `len` writable bytes.
unsafe fn write_reason(text: &str, out: *mut c_char, len: usize) {
    if out.is_null() || len == 0 {
        return;
    }
    let n = text.len().min(len - 1);
    // SAFETY: n + 1 <= len bytes of `out`, which the caller gave us.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_cut_to_its_buffer_and_terminated() {
        let mut buf = [0x55 as c_char; 8];
        // SAFETY: an 8-byte buffer of ours.
        unsafe { write_reason("no device activity", buf.as_mut_ptr(), buf.len()) };
        // SAFETY: terminated within the buffer, as checked here.
        let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(s.to_str().unwrap(), "no devi");
    }
}
