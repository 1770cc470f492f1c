//! `/proc/PID/maps`: the paths in it are the process's to choose (any
//! bytes but a newline), so its lines are parsed as untrusted text.
#![no_main]
use asys_fuzz::{
    procfs,
    untrusted_input::{check_amplification, check_names_kept_once},
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (maps, _vdso) = procfs::parse_maps(&String::from_utf8_lossy(data));
    let mut names = 0;
    for m in &maps {
        let _ = m.key();
        names += m.dev.len() + m.path.as_os_str().len();
    }
    check_names_kept_once("maps", data.len(), names);
    check_amplification(
        "maps",
        data.len(),
        maps.len() * size_of::<procfs::MapsEntry>() + names,
    );
});
