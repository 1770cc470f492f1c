//! The running kernel's tracepoint layouts, written by userspace at load
//! time (see `TracepointLayout`): the programs read each field at the offset
//! the kernel's format file gives, never at one fixed when asys was built.
use asys_common::TracepointLayout;

/// Overwritten by userspace before the programs are loaded (aya's
/// `override_global`); read-only, so the verifier sees the values as
/// constants.
#[unsafe(no_mangle)]
static TP_LAYOUT: TracepointLayout = TracepointLayout::LINUX_6_18;

#[inline(always)]
pub fn layout() -> TracepointLayout {
    // SAFETY: a plain read of a static. Volatile so that the compiler does
    // not fold in the build-time value: the loader replaces it.
    unsafe { core::ptr::read_volatile(&TP_LAYOUT) }
}

/// Which Python walks the programs hold (`asys_common::PYTHON_WALK_*`),
/// overwritten by userspace before loading like [`TP_LAYOUT`]: a walk that
/// is off is dead code to the verifier, which then neither spends its
/// instruction budget on it nor refuses a program over it.
#[unsafe(no_mangle)]
static PYTHON_WALKS: u32 = 0;

#[inline(always)]
pub fn python_walks() -> u32 {
    // SAFETY: as in layout().
    unsafe { core::ptr::read_volatile(&PYTHON_WALKS) }
}
