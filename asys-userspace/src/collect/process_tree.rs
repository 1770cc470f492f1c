//! The traced processes as collection sees them: every process seen (the
//! report's `pids`), the ones of the traced tree still running (`--wait`),
//! and the API names each process's injection library announced (a forked
//! child starts with its parent's, as it inherits the library's table).
use std::collections::{BTreeSet, HashMap};

/// Index of an API name in the collector's table of site-recorded APIs.
pub type SiteApiIndex = u32;

#[derive(Debug, Default)]
pub struct ProcessTree {
    seen: BTreeSet<u32>,
    /// The process seen last: consecutive events mostly come from one.
    last_seen: Option<u32>,
    live: BTreeSet<u32>,
    /// Per process, the injection library's API ids (1, 2, ...) to indexes;
    /// looked up for every site-recorded call.
    site_apis: HashMap<u32, Vec<Option<SiteApiIndex>>, foldhash::fast::RandomState>,
}

impl ProcessTree {
    /// Notes that `pid` made a call or was traced (the report lists it);
    /// true when it is not the process seen last (callers then look further:
    /// most events come from the same process as the one before).
    #[inline]
    pub fn saw(&mut self, pid: u32) -> bool {
        if self.last_seen != Some(pid) {
            self.seen.insert(pid);
            self.last_seen = Some(pid);
            return true;
        }
        false
    }

    /// Every process seen so far, in order.
    pub fn seen(&self) -> impl Iterator<Item = u32> + '_ {
        self.seen.iter().copied()
    }

    /// `pid` belongs to the traced tree and runs (a launched application, a
    /// child it forked).
    pub fn started(&mut self, pid: u32) {
        self.live.insert(pid);
    }

    /// `child` was forked by `parent`: it runs, and it knows its parent's
    /// API names.
    pub fn forked(&mut self, parent: u32, child: u32) {
        if let Some(names) = self.site_apis.get(&parent).cloned() {
            self.site_apis.insert(child, names);
        }
        self.live.insert(child);
    }

    pub fn exited(&mut self, pid: u32) {
        self.live.remove(&pid);
    }

    /// Keeps only the running processes for which `alive` says so (an exit
    /// event can be lost when the buffer is full: /proc decides).
    pub fn retain_live(&mut self, alive: impl FnMut(&u32) -> bool) {
        self.live.retain(alive);
    }

    /// Whether `pid` is a running process of the traced tree.
    pub fn is_live(&self, pid: u32) -> bool {
        self.live.contains(&pid)
    }

    /// Whether every process of the traced tree has exited.
    pub fn all_exited(&self) -> bool {
        self.live.is_empty()
    }

    /// The traced tree's running processes.
    pub fn live(&self) -> impl Iterator<Item = u32> + '_ {
        self.live.iter().copied()
    }

    /// `pid`'s injection library announced API `id` as the API at `index`.
    pub fn name_site_api(&mut self, pid: u32, id: u32, index: SiteApiIndex) {
        let ids = self.site_apis.entry(pid).or_default();
        let slot = id as usize;
        if ids.len() <= slot {
            // Ids count up from 1; one far out of line is not worth a huge table.
            if slot > 1 << 20 {
                return;
            }
            ids.resize(slot + 1, None);
        }
        ids[slot] = Some(index);
    }

    /// The API that `pid`'s id `id` stands for, if announced.
    #[inline]
    pub fn site_api(&self, pid: u32, id: u32) -> Option<SiteApiIndex> {
        *self.site_apis.get(&pid)?.get(id as usize)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_processes_are_listed_once_in_order() {
        let mut t = ProcessTree::default();
        for pid in [7, 7, 3, 7, 3, 9] {
            t.saw(pid);
        }
        assert_eq!(t.seen().collect::<Vec<_>>(), vec![3, 7, 9]);
    }

    #[test]
    fn the_tree_runs_until_every_process_exited() {
        let mut t = ProcessTree::default();
        t.started(10);
        t.forked(10, 11);
        t.forked(11, 12);
        assert_eq!(t.live().collect::<Vec<_>>(), vec![10, 11, 12]);
        t.exited(10);
        t.exited(12);
        assert!(!t.all_exited());
        // An exit event that was lost: /proc says 11 is gone.
        t.retain_live(|&p| p != 11);
        assert!(t.all_exited());
    }

    #[test]
    fn a_child_inherits_its_parents_names_but_not_later_ones() {
        let mut t = ProcessTree::default();
        t.name_site_api(10, 1, 100);
        t.name_site_api(10, 2, 101);
        t.forked(10, 11);
        assert_eq!(t.site_api(11, 1), Some(100));
        assert_eq!(t.site_api(11, 2), Some(101));
        // After the fork each numbers its own new names.
        t.name_site_api(10, 3, 102);
        t.name_site_api(11, 3, 200);
        assert_eq!(t.site_api(10, 3), Some(102));
        assert_eq!(t.site_api(11, 3), Some(200));
        assert_eq!(t.site_api(12, 1), None);
        assert_eq!(t.site_api(10, 4), None);
        assert_eq!(t.site_api(10, 0), None);
    }

    #[test]
    fn an_absurd_id_is_ignored_not_allocated() {
        let mut t = ProcessTree::default();
        t.name_site_api(1, u32::MAX, 5);
        assert_eq!(t.site_api(1, u32::MAX), None);
    }
}
