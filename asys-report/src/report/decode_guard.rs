//! The boundary around the Parquet and Arrow decoders: a damaged file can
//! make them panic (an index out of range, an overflow), and a report must
//! give an error, never a crash. Every call into a decoder on data read from
//! a file goes through [`decoding`], which turns a panic into [`Panicked`]
//! and keeps the default panic message (a backtrace note) off the terminal:
//! the user sees one line naming the table instead.
//!
//! The release and debug profiles unwind on panic (no `panic = "abort"` in
//! the workspace), which `catch_unwind` needs.
use std::{
    cell::Cell,
    panic::{AssertUnwindSafe, PanicHookInfo},
    sync::{
        Once,
        atomic::{AtomicU64, Ordering},
    },
};

thread_local! {
    /// How deep this thread is inside [`decoding`] (boundaries may nest).
    static INSIDE: Cell<u32> = const { Cell::new(0) };
}

/// Panics caught at the boundary since the process started.
static CAUGHT: AtomicU64 = AtomicU64::new(0);

static HOOK: Once = Once::new();

/// A decoder panicked on the data it was given.
#[derive(Debug)]
pub struct Panicked;

/// Runs `f` (a call into a decoder), turning a panic into `Err(Panicked)`.
pub fn decoding<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    install_hook();
    INSIDE.with(|d| d.set(d.get() + 1));
    // The decoders' state is dropped with the panic and never looked at
    // again (the caller gets an error), so broken invariants cannot leak.
    let result = std::panic::catch_unwind(AssertUnwindSafe(f));
    INSIDE.with(|d| d.set(d.get().saturating_sub(1)));
    result.map_err(|_| {
        CAUGHT.fetch_add(1, Ordering::Relaxed);
        Panicked
    })
}

/// How many decoder panics were caught (the fuzz targets can fail on one:
/// ASYS_FUZZ_STRICT).
#[cfg_attr(not(any(test, fuzzing)), allow(dead_code))]
pub fn caught() -> u64 {
    CAUGHT.load(Ordering::Relaxed)
}

/// Wraps whatever hook is installed (the default one, or a fuzzer's) so that
/// a panic inside a boundary is silent; any other panic still reaches it.
/// Installed once: `set_hook` is process-wide, and swapping it around each
/// call would race between the threads that decode row groups.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if INSIDE.with(Cell::get) == 0 {
                previous(info);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_becomes_an_error_and_outside_code_still_works() {
        let before = caught();
        let r: Result<(), Panicked> = decoding(|| panic!("decoder bug"));
        assert!(r.is_err());
        assert!(caught() > before);
        assert_eq!(decoding(|| 7).ok(), Some(7));
        assert_eq!(INSIDE.with(Cell::get), 0);
    }
}
