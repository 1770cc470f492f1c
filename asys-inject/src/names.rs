//! Numbers for API names, so a site passes a small id instead of a string.
//! The runtime's names are string constants, so the pointer identifies the
//! name; the first time one is seen it is numbered and announced through
//! `asys_site_name`. Forked children inherit the table, and asys copies the
//! parent's names to the child.
use std::{collections::HashMap, sync::RwLock};

static IDS: RwLock<Option<HashMap<usize, u32>>> = RwLock::new(None);

pub fn id(name: *const libc::c_char) -> u32 {
    let key = name as usize;
    if let Some(&id) = IDS
        .read()
        .ok()
        .and_then(|m| m.as_ref()?.get(&key).copied())
        .as_ref()
    {
        return id;
    }
    let mut map = IDS.write().unwrap_or_else(|e| e.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(&id) = map.get(&key) {
        return id;
    }
    let id = map.len() as u32 + 1;
    map.insert(key, id);
    crate::sites::asys_site_name(id, name);
    id
}
