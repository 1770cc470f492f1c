//! Files asys has looked at, identified by (device, inode) so that one library
//! reached through several paths (a container's bind mount and the host's
//! path, two containers sharing an image layer) is probed once.
use std::{collections::HashMap, fs::File, path::PathBuf};

pub type LibraryId = u32;

#[derive(Debug)]
pub struct ProbedLibrary {
    /// The path it was first seen by: the mapping's path, inside the mapping
    /// process's mount namespace (for reports; not for opening).
    pub path: PathBuf,
    pub probed_functions: usize,
    pub loader_hooked: bool,
    pub build_id: Option<String>,
    /// The opened, verified file, while probes may still be attached to it
    /// (closed once examined if it got none: a system-wide scan looks at
    /// thousands of files).
    file: Option<File>,
    /// Some probe link was made on it.
    attached: bool,
    /// The items whose functions were probed in it (the caller filter
    /// counts calls from it as their own).
    pub items: Vec<asys_report::trace_items::TraceItem>,
    /// The injection library's probe sites are hooked in it.
    pub sites_hooked: bool,
}

impl ProbedLibrary {
    /// The path that names this very file for the kernel's uprobe attach and
    /// for reading its ELF (whatever mount namespace it came from): its open
    /// descriptor in /proc/self/fd. None once closed.
    pub fn attach_path(&self) -> Option<PathBuf> {
        use std::os::fd::AsRawFd;
        self.file
            .as_ref()
            .map(|f| PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())))
    }

    /// Notes that a probe link was made on it (its file stays open).
    pub fn attached(&mut self) {
        self.attached = true;
    }

    /// Closes the file if nothing was attached to it.
    pub fn close_if_unused(&mut self) {
        if !self.attached {
            self.file = None;
        }
    }
}

#[derive(Default)]
pub struct Libraries {
    by_inode: HashMap<(u64, u64), LibraryId>,
    all: Vec<ProbedLibrary>,
}

impl Libraries {
    /// The library with this (device, inode), if seen before.
    pub fn lookup(&self, key: (u64, u64)) -> Option<LibraryId> {
        self.by_inode.get(&key).copied()
    }

    /// The id of `file` (opened and verified by the caller, with its
    /// (device, inode) `key`), seen at `path`; and whether it is new. A file
    /// seen before keeps its first path and its own open descriptor.
    pub fn intern(&mut self, key: (u64, u64), path: PathBuf, file: File) -> (LibraryId, bool) {
        if let Some(&id) = self.by_inode.get(&key) {
            let lib = &mut self.all[id as usize];
            // Closed after an earlier look: open again (a loader hook asked
            // for later, say).
            lib.file.get_or_insert(file);
            return (id, false);
        }
        let id = self.all.len() as LibraryId;
        self.all.push(ProbedLibrary {
            path,
            probed_functions: 0,
            loader_hooked: false,
            build_id: None,
            file: Some(file),
            attached: false,
            items: Vec::new(),
            sites_hooked: false,
        });
        self.by_inode.insert(key, id);
        (id, true)
    }

    /// Also finds `id` by `key`: the (device, inode) a maps file shows for
    /// it, when that is not what `fstat` gave (btrfs subvolumes), so that the
    /// next scan knows the file without opening it.
    pub fn alias(&mut self, key: (u64, u64), id: LibraryId) {
        self.by_inode.entry(key).or_insert(id);
    }

    /// An entry for what is probed without a file: the kernel's system
    /// calls (osrt), named `name` in the report's list of libraries.
    pub fn add_pseudo(&mut self, name: &str, functions: usize) -> LibraryId {
        let id = self.all.len() as LibraryId;
        self.all.push(ProbedLibrary {
            path: PathBuf::from(name),
            probed_functions: functions,
            loader_hooked: false,
            build_id: None,
            file: None,
            attached: false,
            items: Vec::new(),
            sites_hooked: false,
        });
        id
    }

    pub fn get(&self, id: LibraryId) -> &ProbedLibrary {
        &self.all[id as usize]
    }

    pub fn get_mut(&mut self, id: LibraryId) -> &mut ProbedLibrary {
        &mut self.all[id as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &ProbedLibrary> {
        self.all.iter()
    }
}
