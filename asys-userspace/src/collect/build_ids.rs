//! The GNU build id of every file a traced process maps, recorded with the
//! mapping, so that the symbolize stage can tell a binary rebuilt since it
//! was mapped from the one that ran (`symbolize/naming.rs`). Read once per
//! file (device, inode): processes map the same libraries over and over.
use std::{collections::HashMap, sync::Mutex};

use object::Object;

use crate::process::procfs::MapsEntry;

/// Build id (None: none) by the file's (device, inode).
type Seen = HashMap<(u64, u64), Option<String>>;

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

/// The build id (hex) of the file `m` of process `pid` maps, read from that
/// very file (`mapped_file::open`); None if it has none or cannot be read.
pub fn of_mapping(pid: u32, m: &MapsEntry) -> Option<String> {
    let key = m.key();
    if let Some(k) = key
        && let Some(known) = SEEN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_default()
            .get(&k)
    {
        return known.clone();
    }
    let id = read(pid, m);
    if let Some(k) = key {
        SEEN.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_default()
            .insert(k, id.clone());
    }
    id
}

fn read(pid: u32, m: &MapsEntry) -> Option<String> {
    let f = crate::process::mapped_file::open(pid, m).ok()?;
    let data = crate::elf::mapped::FileBytes::map_file(&f.file, f.len).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    let id = obj.build_id().ok()??;
    Some(crate::symbolize::debug_info::hex(id))
}
