//! The NVTX registration table of asys's injection library, in the traced
//! process's memory: the input is where the table is (a u64), then the
//! table's bytes (header, entries) as the decoder reads them there.
#![no_main]
use asys_fuzz::{
    nvtx_table,
    untrusted_input::{Cursor, FakeMemory, check_amplification, check_names_kept_once},
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor { data };
    let at = c.u64();
    let mem = FakeMemory {
        regions: vec![(at, c.data.to_vec())],
    };
    if let Some(r) = nvtx_table::decode(&mem, at) {
        let texts: usize = r
            .strings
            .values()
            .chain(r.domains.values())
            .map(String::len)
            .sum();
        check_names_kept_once("NVTX table", data.len(), texts);
        // A map entry: the handle, the String, and the tree's share.
        let kept = (r.strings.len() + r.domains.len()) * 48 + texts;
        check_amplification("NVTX table", data.len(), kept);
    }
});
