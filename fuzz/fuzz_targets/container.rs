//! A whole report file: Container::open, then every stats report.
#![no_main]
use asys_fuzz::{every_report, memory_file};
use asys_report::report::container::Container;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (_file, path) = memory_file(data);
    if let Ok(report) = Container::open(&path) {
        every_report(&report);
    }
});
