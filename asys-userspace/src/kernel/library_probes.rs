//! The probes placed in libraries as processes map them: each file is
//! looked at once (`examine`), a runtime of a traced item gets one entry
//! and one return probe link over its item's functions, a dynamic loader
//! gets the loader hook, and asys's injection library gets its sites.
//! The table of probed functions (a cookie's id is its index), the probed
//! files, and osrt's lock libraries live here, with every link made.
use std::collections::BTreeMap;

use asys_common::{CallerRanges, Cookie};
use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, MapData},
};

use super::{
    EBPF_OBJECT, LibraryId, LoadSettings, ProbeInfo, ProbedLibrary, TracerError, caller_ranges,
    features, multi, osrt, perf_uprobe, probed_files, take_map,
};
use crate::apis::{Functions, ProbedFunctions as _, Signature};
use asys_report::trace_items::TraceItem;

/// Whether looking at a mapping placed its process's lock library (osrt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LockLibrary {
    NotHere,
    Placed,
}

pub struct LibraryProbes {
    items: Vec<TraceItem>,
    /// The items asked for (`items` leaves out those recorded at sites).
    requested: Vec<TraceItem>,
    probes: Vec<ProbeInfo>,
    libraries: probed_files::Libraries,
    /// api_entry, api_exit, loader_hook and the sites' programs, loaded
    /// for uprobe-multi links.
    programs: UprobePrograms,
    /// Every uprobe-multi link made; closing one removes all its probes
    /// (and waits for a grace period: see `close_in_parallel`).
    links: Vec<std::os::fd::OwnedFd>,
    /// The loader hooks' links, apart: they are closed first when the
    /// tracer goes, so that no hook stops a process after the last look at
    /// STOPPED.
    loader_links: Vec<std::os::fd::OwnedFd>,
    /// Which hggc APIs to probe (`--hggc-trace-set`).
    hggc_set: crate::apis::HggcTraceSet,
    /// Items for which some library had functions to probe.
    found_items: std::collections::BTreeSet<TraceItem>,
    injection_hooked: bool,
    /// `-t osrt`: where each process's lock libraries are, to name its lock
    /// waits (system calls need nothing more once loaded).
    osrt: Option<osrt::Osrt>,
    /// Whether hggc is traced: the injection library's sites (device
    /// activity, site-recorded calls) are probed only then, so that another
    /// item's report holds nothing of a process that happens to load it.
    hooks_sites: bool,
    /// The sites serve only cuda here (not hggc): they are hooked from the
    /// first process that maps both the library and CUDA's driver, so that
    /// a process of the simulated runtime, none of `-t cuda`'s business, is
    /// not probed (and its optimized sites need not be restored at the end).
    sites_for_cuda_only: bool,
    /// Each process's executable ranges of probed libraries, for the
    /// kernel's caller filter.
    caller_ranges: BpfHashMap<MapData, u32, CallerRanges>,
}

impl LibraryProbes {
    /// The probe table for `load`'s items, with osrt's system calls and
    /// lock functions where osrt is traced; nothing placed yet.
    pub(super) fn new(
        ebpf: &mut Ebpf,
        load: &LoadSettings,
        programs: UprobePrograms,
    ) -> Result<Self, TracerError> {
        let items = &load.items;
        let mut probes = Vec::new();
        let mut libraries = probed_files::Libraries::default();
        let osrt = if items.contains(&TraceItem::Osrt) {
            Some(osrt::Osrt::load(ebpf, &mut probes, &mut libraries)?)
        } else {
            None
        };
        Ok(Self {
            requested: items.clone(),
            items: probed_items(load),
            probes,
            libraries,
            programs,
            links: Vec::new(),
            loader_links: Vec::new(),
            hggc_set: load.hggc_set,
            // System calls are there in every process.
            found_items: osrt.iter().map(|_| TraceItem::Osrt).collect(),
            injection_hooked: false,
            osrt,
            // The injection library serves hggc (HGPTI) and cuda (CUPTI).
            hooks_sites: items.contains(&TraceItem::Hggc) || items.contains(&TraceItem::Cuda),
            sites_for_cuda_only: items.contains(&TraceItem::Cuda)
                && !items.contains(&TraceItem::Hggc),
            caller_ranges: take_map(ebpf, "CALLER_RANGES")?,
        })
    }

    /// Whether osrt is traced.
    pub(super) fn traces_osrt(&self) -> bool {
        self.osrt.is_some()
    }

    /// The item families whose calls from a vendor's own libraries the
    /// caller filter leaves out.
    pub(super) fn filtered_families(&self) -> u64 {
        caller_ranges::filtered_families(&self.items)
    }

    /// Takes every link but the loader hooks' (for the unlinker).
    pub(super) fn take_links(&mut self) -> Vec<std::os::fd::OwnedFd> {
        std::mem::take(&mut self.links)
    }

    /// Takes the loader hooks' links (closed first when tracing ends).
    pub(super) fn take_loader_links(&mut self) -> Vec<std::os::fd::OwnedFd> {
        std::mem::take(&mut self.loader_links)
    }

    /// Whether probes attach as perf events (this kernel's fallback).
    pub(super) fn uses_perf_events(&self) -> bool {
        self.programs.perf.is_some()
    }

    /// The uprobe programs with their names (for their skipped runs).
    pub(super) fn programs_named(&self) -> [(&'static str, std::os::fd::BorrowedFd<'_>); 8] {
        self.programs.named()
    }

    /// Attaches the loader hook to the dynamic loader at `path`, a path of
    /// asys's own mount namespace (the launched program's interpreter),
    /// once per file.
    pub fn hook_loader(&mut self, path: &std::path::Path) -> Result<(), TracerError> {
        // The launched program's interpreter: its path is the program's
        // to name, so it is opened as any such file (links followed, as
        // PT_INTERP's usually is one, but never blocking).
        let Ok(opened) =
            asys_report::untrusted::open::open(path, &asys_report::untrusted::open::Policy::NAMED)
        else {
            return Ok(());
        };
        let (id, _) = self
            .libraries
            .intern(opened.key, path.to_path_buf(), opened.file);
        let hooked = self.hook_loader_of(id);
        self.libraries.get_mut(id).close_if_unused();
        hooked
    }

    /// Attaches the loader hook to library `id` if it is a dynamic loader
    /// and not hooked yet.
    fn hook_loader_of(&mut self, id: LibraryId) -> Result<(), TracerError> {
        let lib = self.libraries.get(id);
        if lib.loader_hooked {
            return Ok(());
        }
        let Some(path) = lib.attach_path() else {
            return Ok(());
        };
        let elf = crate::elf::ElfFile::read(&path)?;
        let Some(offset) = elf.dynamic_symbol_offset("_dl_debug_state")? else {
            return Ok(());
        };
        let p = &self.programs;
        let links = p.attach(&p.loader_hook, &path, &[offset], &[0], false)?;
        self.loader_links.extend(links);
        let lib = self.libraries.get_mut(id);
        lib.loader_hooked = true;
        lib.attached();
        Ok(())
    }

    /// Looks at one file that process `pid` maps (`m`), once per file: if it
    /// is a runtime of a traced item its functions of that item are probed;
    /// if it is a dynamic loader or asys's injection library it is hooked.
    /// The file is opened as the process sees it (`mapped_file`), so a
    /// process in another mount namespace is probed in its own library.
    fn examine(
        &mut self,
        pid: u32,
        m: &crate::process::procfs::MapsEntry,
    ) -> Result<Option<LibraryId>, TracerError> {
        // The injection library's sites, where this process wants them. Its
        // NVTX functions are probed whatever the sites (an `nvtx` range
        // comes through them in any process that loaded the library as its
        // NVTX tool).
        let sites_here = self.hooks_sites
            && crate::install_layout::is_injection_library(&m.path)
            && !(self.sites_for_cuda_only && is_hggc_only_process(pid));
        let known = m.key().and_then(|k| self.libraries.lookup(k));
        if let Some(id) = known
            && (!sites_here || self.libraries.get(id).sites_hooked)
        {
            return Ok(Some(id));
        }
        let Ok(opened) = crate::process::mapped_file::open(pid, m) else {
            // Gone since it was mapped, or not the file mapped any more.
            return Ok(None);
        };
        let (id, fresh) = self
            .libraries
            .intern(opened.key, m.path.clone(), opened.file);
        if let Some(key) = m.key() {
            self.libraries.alias(key, id);
        }
        let examined = if fresh {
            self.examine_new(id, sites_here)
        } else if sites_here {
            // Seen first in a process that did not want its sites.
            self.hook_sites_of(id)
        } else {
            Ok(())
        };
        // Whatever happened, a file that got no probe is not kept open.
        self.libraries.get_mut(id).close_if_unused();
        examined.map(|()| Some(id))
    }

    /// [`Self::examine`] for a file that process `pid` maps (its executable
    /// `mapping`): for osrt, where it lies is noted if it has lock
    /// functions (libc) or is the dynamic loader, and it says whether that
    /// placed the process's lock library.
    pub(super) fn examine_in(
        &mut self,
        pid: u32,
        mapping: &crate::process::procfs::MapsEntry,
    ) -> Result<(Option<LibraryId>, LockLibrary), TracerError> {
        let id = self.examine(pid, mapping)?;
        let mut lock_library = LockLibrary::NotHere;
        if let (Some(id), Some(osrt)) = (id, self.osrt.as_mut()) {
            if self.libraries.get(id).loader_hooked {
                osrt.loader_at(pid, [mapping.start, mapping.end]);
            }
            if osrt.link(pid, mapping, id) {
                lock_library = LockLibrary::Placed;
            }
        }
        Ok((id, lock_library))
    }

    /// A fork (or a thread) of `parent`: the child maps what its parent
    /// does, osrt's lock libraries too, until its exec.
    pub fn forked(&mut self, parent: u32, child: u32) {
        if let Some(osrt) = self.osrt.as_mut() {
            osrt.forked(parent, child);
        }
    }

    /// `pid` executed a new image: what osrt knew of its old one is gone.
    pub fn executed(&mut self, pid: u32) {
        if let Some(osrt) = self.osrt.as_mut() {
            osrt.executed(pid);
        }
    }

    /// A lock wait as the call of the lock function that waited (osrt), or
    /// None if it is no call of the program's (see [`osrt::Osrt::name_wait`]).
    pub fn name_lock_wait(
        &self,
        ev: &asys_common::LockWaitEvent,
    ) -> Option<asys_common::ApiCallEvent> {
        self.osrt.as_ref()?.name_wait(ev)
    }

    /// Hooks the sites of the injection library `id`, examined before
    /// without them.
    fn hook_sites_of(&mut self, id: LibraryId) -> Result<(), TracerError> {
        let Some(path) = self.libraries.get(id).attach_path() else {
            return Ok(());
        };
        let Ok(elf) = crate::elf::ElfFile::read(&path) else {
            return Ok(());
        };
        self.hook_sites(&elf, id, &path)
    }

    fn examine_new(&mut self, id: LibraryId, sites: bool) -> Result<(), TracerError> {
        let Some(path) = self.libraries.get(id).attach_path() else {
            return Ok(());
        };
        let path = path.as_path();
        let Ok(elf) = crate::elf::ElfFile::read(path) else {
            // Not an ELF file we can read (e.g. a data file mapped executable).
            return Ok(());
        };
        if elf.dynamic_symbol_offset("_dl_debug_state")?.is_some() {
            self.hook_loader_of(id)?;
        }
        if sites {
            self.hook_sites(&elf, id, path)?;
        }
        // The name the process mapped it by (`path` is the descriptor's).
        let file_name = self
            .libraries
            .get(id)
            .path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let mut probed = 0;
        for item in self.items.clone() {
            let mut functions = match item.functions() {
                Functions::Prefixed(prefixes) => elf.exported_functions(prefixes)?,
                Functions::Named(names) => elf.exported_functions_named(names)?,
            };
            let only_here = item.library_functions(&file_name);
            if !only_here.is_empty() {
                functions.extend(elf.exported_functions(only_here)?);
                functions.sort_by(|a, b| a.name.cmp(&b.name));
                functions.dedup_by(|a, b| a.name == b.name);
            }
            if item == TraceItem::Hggc {
                functions.retain(|f| self.hggc_set.wants_api(&f.name));
            }
            if let (TraceItem::Osrt, Some(osrt)) = (item, self.osrt.as_mut()) {
                // Placed per process, by examine_in; nothing is probed in
                // it (lock waits come from the system calls).
                if osrt.add_library(id, path, functions, &mut self.probes) > 0 {
                    self.found_items.insert(item);
                }
                continue;
            }
            probed += self.attach_functions(item, id, path, functions)?;
        }
        let lib = self.libraries.get_mut(id);
        lib.build_id = elf.build_id();
        lib.probed_functions = probed;
        if probed > 0 {
            lib.attached();
        }
        Ok(())
    }

    /// Probes `functions` of `path` for `item`: one entry and one return
    /// uprobe-multi link, for every process (the kernel filters by TRACED).
    fn attach_functions(
        &mut self,
        item: TraceItem,
        library: LibraryId,
        path: &std::path::Path,
        functions: Vec<crate::elf::ExportedFunction>,
    ) -> Result<usize, TracerError> {
        let (mut offsets, mut cookies) = (Vec::new(), Vec::new());
        let driver = path
            .file_name()
            .is_some_and(|n| crate::apis::is_cuda_driver(&n.to_string_lossy()));
        for f in functions {
            let signature = crate::apis::signature_in(item, &item.api_name(&f.name));
            let id = u32::try_from(self.probes.len()).expect("fewer than 2^32 probes");
            let mut cookie =
                Cookie::new(id, item.family_id()).with(argument_flags(item, &signature));
            if signature.reads_out0() {
                cookie = cookie.with(Cookie::READ_OUT0);
            }
            if item == TraceItem::Hggc || (item == TraceItem::Cuda && !driver) {
                // The runtime reports its API to the injection library
                // (HGPTI's callbacks, CUPTI's runtime-API callbacks; the
                // CUDA driver API has none of ours, so its calls, made
                // inside runtime calls, must not take their ids).
                cookie = cookie.with(Cookie::CORRELATED);
            }
            match f.name.as_str() {
                "hggcProfilerStart" | "cudaProfilerStart" => {
                    cookie = cookie.with(Cookie::CAPTURE_START)
                }
                "hggcProfilerStop" | "cudaProfilerStop" => {
                    cookie = cookie.with(Cookie::CAPTURE_STOP)
                }
                _ => {}
            }
            if matches!(item, TraceItem::Hgtx | TraceItem::Nvtx) {
                cookie = cookie.with(crate::apis::hgtx_capture_flags(&f.name));
            }
            if let Some(t) = signature.text {
                cookie = cookie.with_text(t.index, t.attributes, t.wide);
            }
            offsets.push(f.file_offset);
            cookies.push(cookie.0);
            self.probes.push(ProbeInfo {
                item,
                name: item.api_name(&f.name),
                library,
                signature,
            });
        }
        if !offsets.is_empty() {
            self.found_items.insert(item);
            self.libraries.get_mut(library).items.push(item);
            let p = &self.programs;
            let entry = p.attach(&p.api_entry, path, &offsets, &cookies, false)?;
            let exit = p.attach(&p.api_exit, path, &offsets, &cookies, true)?;
            self.links.extend(entry.into_iter().chain(exit));
        }
        Ok(offsets.len())
    }

    /// Attaches the site programs if `elf` is asys's injection library.
    fn hook_sites(
        &mut self,
        elf: &crate::elf::ElfFile,
        library: LibraryId,
        path: &std::path::Path,
    ) -> Result<(), TracerError> {
        let sites = elf.exported_functions(&[""])?;
        for (name, prog) in SITES.iter().zip([
            &self.programs.activity_site,
            &self.programs.api_site,
            &self.programs.lost_site,
            &self.programs.name_site,
            &self.programs.call_site,
        ]) {
            if let Some(site) = sites.iter().find(|f| f.name == *name) {
                let links = self
                    .programs
                    .attach(prog, path, &[site.file_offset], &[0], false)?;
                self.links.extend(links);
                self.injection_hooked = true;
                self.libraries.get_mut(library).attached();
                self.libraries.get_mut(library).sites_hooked = true;
            }
        }
        Ok(())
    }

    /// Requested items for which no traced process mapped a library with
    /// their functions.
    pub fn items_not_found(&self) -> Vec<TraceItem> {
        self.items
            .iter()
            .copied()
            .filter(|i| !self.found_items.contains(i))
            .collect()
    }

    /// Whether `item` was asked for. The injection library's sites serve
    /// hggc and cuda alike, in every process that loaded it: what they
    /// report of an item not asked for is not recorded.
    pub fn traces(&self, item: TraceItem) -> bool {
        self.requested.contains(&item)
    }

    /// Which hggc APIs are wanted (`--hggc-trace-set`).
    pub fn hggc_set(&self) -> &crate::apis::HggcTraceSet {
        &self.hggc_set
    }

    /// Whether an injection library's sites were found and probed.
    pub fn injection_hooked(&self) -> bool {
        self.injection_hooked
    }

    pub fn probe(&self, cookie: u64) -> Option<&ProbeInfo> {
        self.probes.get(Cookie(cookie).id() as usize)
    }

    pub fn library(&self, id: LibraryId) -> &ProbedLibrary {
        self.libraries.get(id)
    }

    /// Libraries with probes, and how many functions each.
    pub fn probed_libraries(&self) -> BTreeMap<String, usize> {
        self.libraries
            .iter()
            .filter(|l| l.probed_functions > 0)
            .map(|l| (l.path.display().to_string(), l.probed_functions))
            .collect()
    }

    /// The `libraries` table: every library with probes, by the id its
    /// calls' rows carry.
    pub fn library_table(&self) -> Vec<asys_report::report::rows::LibraryRow> {
        self.libraries
            .iter()
            .enumerate()
            .filter(|(_, lib)| !lib.items.is_empty())
            .map(|(id, lib)| asys_report::report::rows::LibraryRow {
                id: id as LibraryId,
                path: lib.path.display().to_string(),
                build_id: lib.build_id.clone(),
                items: lib
                    .items
                    .iter()
                    .map(|i| i.name())
                    .collect::<Vec<_>>()
                    .join(","),
                functions: u32::try_from(lib.probed_functions).unwrap_or(u32::MAX),
            })
            .collect()
    }

    /// Tells the kernel which of `pid`'s executable ranges (start, end, the
    /// library mapped there) belong to libraries asys probes, for the caller
    /// filter. Called on every scan of its mappings (start, exec, dlopen).
    pub(super) fn set_caller_ranges(
        &mut self,
        pid: u32,
        mapped: &[(u64, u64, LibraryId)],
    ) -> Result<(), TracerError> {
        let ranges = mapped.iter().map(|&(start, end, id)| {
            let lib = self.libraries.get(id);
            asys_common::CallerRange {
                start,
                end,
                families: caller_ranges::own_families(&lib.path, &lib.items),
            }
        });
        let (value, cut) = caller_ranges::kernel_value(ranges);
        if cut > 0 {
            eprintln!(
                "asys: warning: process {pid} maps more than {} vendor library ranges; \
                 calls from {cut} of them count as the application's",
                asys_common::MAX_CALLER_RANGES
            );
        }
        let map_err = |source| TracerError::Map {
            name: "CALLER_RANGES",
            source,
        };
        let map = &mut self.caller_ranges;
        if value.count == 0 {
            // Nothing of a vendor here (yet): every call is the application's.
            let _ = map.remove(&pid);
            return Ok(());
        }
        map.insert(pid, value, 0).map_err(map_err)
    }
}

pub(super) struct UprobePrograms {
    /// Set where probes attach as perf events (`perf_uprobe.rs`): the
    /// programs below were then loaded as plain kprobe programs.
    perf: Option<features::UprobePmu>,
    api_entry: std::os::fd::OwnedFd,
    api_exit: std::os::fd::OwnedFd,
    loader_hook: std::os::fd::OwnedFd,
    activity_site: std::os::fd::OwnedFd,
    api_site: std::os::fd::OwnedFd,
    lost_site: std::os::fd::OwnedFd,
    name_site: std::os::fd::OwnedFd,
    call_site: std::os::fd::OwnedFd,
}

impl UprobePrograms {
    /// Each program with its name (for their skipped runs).
    fn named(&self) -> [(&'static str, std::os::fd::BorrowedFd<'_>); 8] {
        use std::os::fd::AsFd;
        [
            ("api_entry", self.api_entry.as_fd()),
            ("api_exit", self.api_exit.as_fd()),
            ("loader_hook", self.loader_hook.as_fd()),
            ("activity_site", self.activity_site.as_fd()),
            ("api_site", self.api_site.as_fd()),
            ("lost_site", self.lost_site.as_fd()),
            ("name_site", self.name_site.as_fd()),
            ("call_site", self.call_site.as_fd()),
        ]
    }

    /// Attaches `prog` at `offsets` in `path` the way this kernel allows:
    /// one uprobe-multi link, or one perf-event link per probe.
    fn attach(
        &self,
        prog: &std::os::fd::OwnedFd,
        path: &std::path::Path,
        offsets: &[u64],
        cookies: &[u64],
        ret: bool,
    ) -> Result<Vec<std::os::fd::OwnedFd>, multi::MultiError> {
        match self.perf {
            Some(pmu) => perf_uprobe::attach(prog, pmu, path, offsets, cookies, ret, None),
            None => Ok(vec![multi::attach(prog, path, offsets, cookies, ret)?]),
        }
    }
}

/// Whether process `pid` is an hggc process and not a CUDA one: it maps the
/// hggc runtime (`libhggc*`, which loaded the injection library for HGPTI)
/// and not CUDA's driver. With `-t cuda` alone such a process's sites are
/// none of asys's business. Any other process that loaded the injection
/// library (a CUDA process, or one that loaded it as its NVTX tool before
/// `cuInit`, or without CUDA at all) gets them. A process gone says no.
fn is_hggc_only_process(pid: u32) -> bool {
    let named = |m: &crate::process::procfs::MapsEntry, test: fn(&str) -> bool| {
        m.path
            .file_name()
            .is_some_and(|n| test(&n.to_string_lossy()))
    };
    crate::process::procfs::mappings_and_vdso(pid).is_ok_and(|(maps, _)| {
        maps.iter().any(|m| named(m, |n| n.starts_with("libhggc")))
            && !maps.iter().any(|m| named(m, crate::apis::is_cuda_driver))
    })
}

/// The injection library's probe sites and the program each one gets.
const SITES: [&str; 5] = [
    "asys_site_activity",
    "asys_site_api",
    "asys_site_lost",
    "asys_site_name",
    "asys_site_call",
];

/// Loads the programs attached per library (see [`multi::load`]: before
/// any map is taken out of `ebpf`), as perf-event programs where `perf`.
pub(super) fn load_uprobe_programs(
    ebpf: &Ebpf,
    perf: Option<features::UprobePmu>,
) -> Result<UprobePrograms, TracerError> {
    let names = [
        "api_entry",
        "api_exit",
        "loader_hook",
        "activity_site",
        "api_site",
        "lost_site",
        "name_site",
        "call_site",
    ];
    let [
        api_entry,
        api_exit,
        loader_hook,
        activity_site,
        api_site,
        lost_site,
        name_site,
        call_site,
    ]: [_; 8] = multi::load(ebpf, EBPF_OBJECT, &names, perf.is_some())?
        .try_into()
        .expect("eight programs asked, eight loaded");
    Ok(UprobePrograms {
        perf,
        api_entry,
        api_exit,
        loader_hook,
        activity_site,
        api_site,
        lost_site,
        name_site,
        call_site,
    })
}

/// The items probed in the runtimes' libraries: through the sites, the
/// runtime itself gets no probes (HGPTI's callbacks, CUPTI's for CUDA's
/// runtime and driver).
fn probed_items(settings: &LoadSettings) -> Vec<TraceItem> {
    settings
        .items
        .iter()
        .copied()
        .filter(|i| !(settings.api_via_sites && matches!(i, TraceItem::Hggc | TraceItem::Cuda)))
        .collect()
}

/// The cookie flags that say which arguments the kernel reads for a
/// function: register arguments only when the signature decodes one (or
/// the family's statistics read raw arguments), the two stack slots only
/// when an argument index reaches them. A call with neither travels as a
/// short event, and its report row has no raw arguments (they would be
/// whatever the registers held).
fn argument_flags(item: TraceItem, signature: &Signature) -> u64 {
    // hgtx/NVTX statistics read raw arguments (handles, ids); libc calls and
    // collectives keep theirs, as every call of them always did.
    let raw_args_read = matches!(
        item,
        TraceItem::Hgtx | TraceItem::Nvtx | TraceItem::Osrt | TraceItem::Pccl | TraceItem::Nccl
    );
    let ptr = signature.ptr.map(|p| match p {
        crate::apis::PtrArg::Arg(i) => i,
        crate::apis::PtrArg::Out0 => 0,
    });
    let highest = [
        signature.bytes,
        signature.kind,
        signature.stream,
        signature.device,
        ptr,
        signature.text.map(|t| t.index),
        signature.count_dtype.map(|(c, d)| c.max(d)),
        // hggcLaunchKernel's sharedMem is argument 7, on the stack.
        signature.launch.then_some(6),
    ]
    .into_iter()
    .flatten()
    .max();
    match highest {
        _ if raw_args_read => Cookie::ARGS | Cookie::STACK_ARGS,
        Some(i) if i >= 6 => Cookie::ARGS | Cookie::STACK_ARGS,
        Some(_) => Cookie::ARGS,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::signature_in;
    use asys_common::Cookie;

    #[test]
    fn only_signatures_that_read_arguments_get_them() {
        let flags = |item, name| argument_flags(item, &signature_in(item, name));
        assert_eq!(flags(TraceItem::Hggc, "hggcGetLastError"), 0);
        assert_eq!(flags(TraceItem::Hggc, "hggcDeviceSynchronize"), 0);
        assert_eq!(flags(TraceItem::Hggc, "hggcMalloc"), Cookie::ARGS);
        assert_eq!(flags(TraceItem::Hggc, "hggcMemcpyAsync"), Cookie::ARGS);
        // sharedMem, argument 7, is on the stack.
        assert_eq!(
            flags(TraceItem::Hggc, "hggcLaunchKernel"),
            Cookie::ARGS | Cookie::STACK_ARGS
        );
        // Families whose statistics read raw arguments keep all of them.
        assert_eq!(
            flags(TraceItem::Hgtx, "hgtxRangePop"),
            Cookie::ARGS | Cookie::STACK_ARGS
        );
    }

    #[test]
    fn the_injection_library_is_known_by_name_and_hggc_processes_by_their_runtime() {
        assert!(crate::install_layout::is_injection_library(
            std::path::Path::new("/opt/asys/libasys_inject.so")
        ));
        assert!(!crate::install_layout::is_injection_library(
            std::path::Path::new("/usr/lib/libcuda.so.1")
        ));
        // This test process maps no hggc runtime; a pid that is gone maps
        // nothing.
        assert!(!is_hggc_only_process(std::process::id()));
        assert!(!is_hggc_only_process(u32::MAX));
    }
}
