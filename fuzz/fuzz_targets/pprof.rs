//! A whole report file exported as pprof (every `--stacks`): what the
//! writer makes of any report must encode, decode again with prost to
//! the same profile, and hold to profile.proto's rules
//! (`export::pprof::check`).
#![no_main]
use asys_fuzz::memory_file;
use asys_report::export::{
    collapsed::Stacks,
    pprof::{self, Options, proto::Profile},
};
use asys_report::report::container::Container;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let (_file, path) = memory_file(data);
    let Ok(report) = Container::open(&path) else {
        return;
    };
    for stacks in [Stacks::Samples, Stacks::Waits, Stacks::Api] {
        let options = Options {
            stacks,
            ..Default::default()
        };
        // A damaged table is the readers' error to give, not a crash.
        let Ok(profile) = pprof::profile(&report, &options) else {
            continue;
        };
        let bytes = profile.encode_to_vec();
        let back = Profile::decode(&bytes[..]).expect("the written profile decodes");
        assert_eq!(back, profile, "{stacks:?}: decoded differs from written");
        if let Err(e) = pprof::check(&back) {
            panic!("{stacks:?}: an invalid profile: {e}");
        }
    }
});
