//! metadata.json: parsed alone, then as the metadata of a report (with its
//! checksum member right, so the checks behind it are reached).
#![no_main]
use asys_fuzz::{every_report, memory_file, tar_of};
use asys_report::report;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = serde_json::from_slice::<report::metadata::Metadata>(data) {
        let _ = m.recovered_warning(std::path::Path::new("r.asysrep"));
        let _ = (m.total_drops(), m.drops_by_source(), m.texts_unreadable());
    }
    let crc = format!("{:08x}\n", crc32fast::hash(data));
    let bytes = tar_of(&[
        (report::container::METADATA_MEMBER, data),
        (report::container::METADATA_CRC_MEMBER, crc.as_bytes()),
    ]);
    let (_file, path) = memory_file(&bytes);
    if let Ok(r) = report::container::Container::open(&path) {
        every_report(&r);
    }
});
