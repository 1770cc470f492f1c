//! A jitdump (`jit-PID.dump`), its bytes read as asys streams the file:
//! parsed whole, then within a budget of half its size. What the parser
//! keeps must stay within a fixed multiple of the file (a MOVE record must
//! not copy the name it moves), and a budget must hold.
#![no_main]
use std::io::Cursor;

use asys_fuzz::{
    jit_map::{self, JitSymbol},
    untrusted_input::{check_amplification, check_names_kept_once, text_bytes},
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let full = jit_map::jitdump_from(Cursor::new(data), len, u64::MAX).expect("a slice reads");
    let symbols = &full.symbols;
    let names = text_bytes(symbols.iter().map(|s| &*s.name));
    check_names_kept_once("jitdump", data.len(), names);
    check_amplification(
        "jitdump",
        data.len(),
        symbols.len() * size_of::<JitSymbol>() + names,
    );
    let room = len / 2;
    let part = jit_map::jitdump_from(Cursor::new(data), len, room).expect("a slice reads");
    assert!(
        part.cost <= room,
        "{} bytes kept in a {room}-byte budget",
        part.cost
    );
    assert!(part.symbols.len() <= symbols.len());
});
