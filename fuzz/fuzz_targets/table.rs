//! One table's Parquet bytes (the first input byte picks the table, by its
//! position in asys-report's `ALL_TABLES`) read by every stats report,
//! behind no container checks: the decoders and the reports' own code see
//! whatever the fuzzer makes.
#![no_main]
use asys_fuzz::{every_report, memory_file};
use asys_report::report::{ALL_TABLES, container::Container};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, parquet)) = data.split_first() else {
        return;
    };
    let table = ALL_TABLES[pick as usize % ALL_TABLES.len()];
    let (file, path) = memory_file(parquet);
    let report = Container::unchecked(file, &path, table, parquet.len() as u64);
    if let Ok(Some(t)) = asys_report::report::reader::open(&report, table) {
        let _ = t.num_rows();
    }
    every_report(&report);
});
