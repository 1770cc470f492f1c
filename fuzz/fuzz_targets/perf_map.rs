//! A perf map (`/tmp/perf-PID.map`), its bytes read as asys streams the
//! file: parsed whole, then within a budget of half its size. What the
//! parser keeps must stay within a fixed multiple of the file, a budget
//! must hold, and what it leaves out must be counted.
#![no_main]
use asys_fuzz::{
    jit_map::{self, JitSymbol, JitSymbols},
    untrusted_input::{check_amplification, check_names_kept_once, text_bytes},
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let full = jit_map::perf_map_from(data, u64::MAX).expect("a slice reads");
    let symbols = &full.symbols;
    let names = text_bytes(symbols.iter().map(|s| &*s.name));
    check_names_kept_once("perf map", data.len(), names);
    check_amplification(
        "perf map",
        data.len(),
        symbols.len() * size_of::<JitSymbol>() + names,
    );
    let room = data.len() as u64 / 2;
    let part = jit_map::perf_map_from(data, room).expect("a slice reads");
    assert!(
        part.cost <= room,
        "{} bytes kept in a {room}-byte budget",
        part.cost
    );
    assert_eq!(part.symbols[..], symbols[..part.symbols.len()]);
    assert!(
        part.symbols.len() as u64 + part.left_out >= symbols.len() as u64,
        "symbols left out uncounted"
    );
    let named = JitSymbols::new(
        symbols
            .iter()
            .enumerate()
            .map(|(i, s)| (s.start, s.size, i as u32, 0))
            .collect(),
    );
    for s in symbols {
        let _ = named.find(s.start);
        let _ = named.find(s.start.wrapping_add(s.size));
    }
});
