//! Files asys has looked at, identified by (device, inode) so that one library
//! reached through several paths is probed once.
use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

pub type LibraryId = u32;

#[derive(Debug, Clone)]
pub struct Probed {
    pub path: PathBuf,
    pub probed_functions: usize,
    pub loader_hooked: bool,
    pub build_id: Option<String>,
    /// The items whose functions were probed in it (the caller filter
    /// counts calls from it as their own).
    pub items: Vec<crate::apis::TraceItem>,
}

#[derive(Default)]
pub struct Libraries {
    by_inode: HashMap<(u64, u64), LibraryId>,
    all: Vec<Probed>,
}

impl Libraries {
    /// The id of the file at `path`, and whether it is new; None if it cannot
    /// be stat'ed (gone since it was mapped).
    pub fn intern(&mut self, path: &Path) -> Option<(LibraryId, bool)> {
        let md = std::fs::metadata(path).ok()?;
        let key = (md.dev(), md.ino());
        if let Some(&id) = self.by_inode.get(&key) {
            return Some((id, false));
        }
        let id = self.all.len() as LibraryId;
        self.all.push(Probed {
            path: path.to_path_buf(),
            probed_functions: 0,
            loader_hooked: false,
            build_id: None,
            items: Vec::new(),
        });
        self.by_inode.insert(key, id);
        Some((id, true))
    }

    pub fn get(&self, id: LibraryId) -> &Probed {
        &self.all[id as usize]
    }

    pub fn get_mut(&mut self, id: LibraryId) -> &mut Probed {
        &mut self.all[id as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &Probed> {
        self.all.iter()
    }
}
