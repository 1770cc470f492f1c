//! Numbers for API names, so a site passes a small id instead of a string.
//! The runtime's names are string constants, so the pointer identifies the
//! name; the first time one is seen it is numbered and announced through
//! `asys_site_name`. Forked children inherit the table, and asys copies the
//! parent's names to the child.
//!
//! This runs on every API call in site mode, so a known name is found
//! without a lock: an open-addressing table of atomics that only the
//! (locked) numbering of a new name writes, publishing a slot's id before
//! its key. Names past the table's room fall back to a locked map.
use std::{
    collections::HashMap,
    sync::{
        Mutex,
        atomic::{AtomicU32, AtomicUsize, Ordering},
    },
};

const SLOTS: usize = 1024;

static KEYS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static IDS: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];

/// Numbering: the count of names so far, and those that found no slot.
static NEW: Mutex<(u32, Option<HashMap<usize, u32>>)> = Mutex::new((0, None));

fn first_slot(key: usize) -> usize {
    // Fibonacci hashing of the pointer; its low bits are alignment.
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) % SLOTS
}

/// The known id of `key`, or the free slot where it would go (None: full).
fn find(key: usize) -> Result<u32, Option<usize>> {
    let mut i = first_slot(key);
    for _ in 0..SLOTS {
        match KEYS[i].load(Ordering::Acquire) {
            0 => return Err(Some(i)),
            k if k == key => return Ok(IDS[i].load(Ordering::Relaxed)),
            _ => i = (i + 1) % SLOTS,
        }
    }
    Err(None)
}

pub fn id(name: *const libc::c_char) -> u32 {
    keyed(name as usize, name)
}

/// The id of the name that `key` stands for (nonzero; a name pointer, or a
/// number of the caller's that no pointer can be), `name` announced on
/// first use.
pub fn keyed(key: usize, name: *const libc::c_char) -> u32 {
    if key == 0 || name.is_null() {
        return 0;
    }
    if let Ok(id) = find(key) {
        return id;
    }
    let mut new = NEW.lock().unwrap_or_else(|e| e.into_inner());
    // Numbered by another thread since the look above?
    let slot = match find(key) {
        Ok(id) => return id,
        Err(slot) => slot,
    };
    if let Some(&id) = new.1.as_ref().and_then(|m| m.get(&key)) {
        return id;
    }
    new.0 += 1;
    let id = new.0;
    // Announced before it is published: a thread that finds the id in the
    // table reports its call after the name, so asys never sees an id it
    // cannot name (the ring buffer keeps the order of reservations).
    crate::sites::asys_site_name(id, resident_copy(name));
    match slot {
        Some(i) => {
            IDS[i].store(id, Ordering::Relaxed);
            // Release: a reader that sees the key sees the id.
            KEYS[i].store(key, Ordering::Release);
        }
        None => {
            new.1.get_or_insert_with(HashMap::new).insert(key, id);
        }
    }
    id
}

/// A copy of `name` in memory we just wrote, kept for the process's life:
/// the probe reads the name without faulting, and a library's string in a
/// page not yet touched (CUPTI's function names, before their first use)
/// reads as nothing. One copy per name.
pub fn resident_copy(name: *const libc::c_char) -> *const libc::c_char {
    // SAFETY: a NUL-terminated string of the runtime's (checked non-null
    // by the callers), read here in full, which faults its pages in.
    let owned = unsafe { std::ffi::CStr::from_ptr(name) }.to_owned();
    Box::leak(owned.into_boxed_c_str()).as_ptr()
}
