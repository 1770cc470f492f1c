//! asys's kernel side: uprobes on accelerator runtimes, process lifecycle
//! tracepoints and the dynamic loader hook. Filtering happens here: only
//! processes in `TRACED` produce events.
#![no_std]
// The compare-and-swap of capture state (capture.rs).
#![allow(internal_features)]
#![feature(core_intrinsics)]
#![no_main]

mod activity;
mod api;
mod call_stack;
mod caller_filter;
mod capture;
mod kernel_stack;
mod layout;
mod loader;
mod maps;
mod process;
mod python;
mod sample;
mod sched;
mod syscalls;
mod text;
mod user_probe;
mod wakeup;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
