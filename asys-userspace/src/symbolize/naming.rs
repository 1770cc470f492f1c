//! Naming unwound frames: function, file, line and the inlined frames at
//! each address, binary by binary. A binary's debug information (its own,
//! or a separate debug file: `debug_info.rs`) is loaded once, by one thread,
//! which then names every address wanted in it; the binaries are shared out
//! among as many threads as the machine has CPUs, so one large binary does
//! not hold up the rest. A binary whose build id is not the one recorded for
//! its mapping (rebuilt since) is not named from: its frames are left as
//! addresses unless a debug file of the recorded build is found. A binary
//! that is not on this machine (a report symbolized elsewhere: `asys
//! symbolize`) is named from the debug file of its recorded build id, on
//! this machine or from debuginfod.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use object::{Object, ObjectSegment};

use super::{
    debug_info::{self, Roots},
    lines::{SourceLines, has_dwarf},
    unwind::{Binary, Frame, ModuleMapping, Unwinder},
};

/// A frame wanted: (pid, pc, exact: `pc` is a sampled instruction's own
/// address, not a return address).
pub type Key = (u32, u64, bool);

/// A binary found rebuilt since it was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    pub path: String,
    pub recorded: String,
    /// Its build id now (None: it has none, or could not be read).
    pub now: Option<String>,
    /// The debug file of the recorded build that named its frames, if found.
    pub debug_file: Option<PathBuf>,
}

impl Rebuilt {
    /// The one-line warning printed for it.
    pub fn warning(&self) -> String {
        let now = self.now.as_deref().unwrap_or("none");
        match &self.debug_file {
            None => format!(
                "{}: rebuilt since recording (build id {} recorded, {now} now); its frames are left unnamed",
                self.path, self.recorded
            ),
            Some(d) => format!(
                "{}: rebuilt since recording (build id {} recorded, {now} now); its frames are named from {}",
                self.path,
                self.recorded,
                d.display()
            ),
        }
    }
}

/// The frames named, the binaries found rebuilt, and the build ids (hex)
/// whose debug files came from debuginfod.
pub struct Named {
    pub frames: HashMap<Key, Vec<Frame>>,
    pub rebuilt: Vec<Rebuilt>,
    pub debuginfod: std::collections::BTreeSet<String>,
}

/// The addresses wanted in one binary.
struct Group<'m> {
    mapping: &'m ModuleMapping,
    /// Source lines wanted (else the symbol table's functions only).
    lines: bool,
    /// (key, file offset of the address looked up).
    offsets: Vec<(Key, u64)>,
}

fn unknown(pc: u64, module: &str) -> Frame {
    Frame {
        function: format!("{pc:#x}").into(),
        file: None,
        line: None,
        module: module.into(),
        inlined: false,
    }
}

/// One copy of each name, file and module of a binary's frames.
#[derive(Default)]
struct Shared(std::collections::HashSet<Arc<str>>);

impl Shared {
    fn get(&mut self, s: String) -> Arc<str> {
        if let Some(known) = self.0.get(s.as_str()) {
            return known.clone();
        }
        let new: Arc<str> = s.into();
        self.0.insert(new.clone());
        new
    }
}

/// Names every frame in `wanted` (each with the mapping holding its pc, if
/// any, and whether to give it source lines: else the symbol table's
/// function only), with the binaries `unwinder` loaded or loads now.
pub fn name_frames(
    unwinder: &mut Unwinder,
    wanted: Vec<(Key, Option<&ModuleMapping>, bool)>,
    roots: &Roots,
) -> Named {
    let mut frames = HashMap::new();
    // By the file read (one recorded path may be two files: a container's
    // and the host's).
    let mut groups: HashMap<(&str, Option<&str>, bool), Group<'_>> = HashMap::new();
    for ((pid, pc, exact), m, lines) in wanted {
        let Some(m) = m else {
            frames.insert((pid, pc, exact), vec![unknown(pc, "")]);
            continue;
        };
        // A return address is looked up at the call before it.
        let at = pc - u64::from(!exact);
        groups
            .entry((m.file.as_str(), m.build_id.as_deref(), lines))
            .or_insert_with(|| Group {
                mapping: m,
                lines,
                offsets: Vec::new(),
            })
            .offsets
            .push(((pid, pc, exact), at - m.start + m.offset));
    }
    let mut groups: Vec<Group<'_>> = groups.into_values().collect();
    // The largest first, so that it does not start last and finish alone.
    groups.sort_by_key(|g| std::cmp::Reverse(g.offsets.len()));
    for g in &groups {
        unwinder.binary(&g.mapping.file);
    }
    let unwinder = &*unwinder;
    let next = AtomicUsize::new(0);
    let out = Mutex::new((frames, Vec::new(), std::collections::BTreeSet::new()));
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(groups.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(g) = groups.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let bin = unwinder.loaded(&g.mapping.file);
                    let (named, rebuilt, debuginfod) = name_group(bin, g, roots);
                    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
                    out.0.extend(named);
                    out.1.extend(rebuilt);
                    out.2.extend(debuginfod);
                }
            });
        }
    });
    let (frames, mut rebuilt, debuginfod) = out.into_inner().unwrap_or_else(|e| e.into_inner());
    rebuilt.sort_by(|a: &Rebuilt, b| a.path.cmp(&b.path));
    rebuilt.dedup();
    Named {
        frames,
        rebuilt,
        debuginfod,
    }
}

/// File offsets to addresses by a file's loadable segments.
fn segments(obj: &object::File<'_>) -> Vec<(u64, u64, u64)> {
    obj.segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (off, size, s.address())
        })
        .collect()
}

/// A debug file's program headers keep addresses but not file offsets
/// (objcopy --only-keep-debug zeroes them), so a recorded mapping's file
/// offsets are matched to its one executable segment: the mapping (only
/// executable mappings are recorded) starts at that segment's page.
/// Returns (file offset, size, vaddr) as `segments` does.
fn exec_segment_as_mapped(obj: &object::File<'_>, m: &ModuleMapping) -> Option<(u64, u64, u64)> {
    const PAGE: u64 = 4096;
    let mut exec = obj.segments().filter(|s| match s.flags() {
        object::SegmentFlags::Elf { p_flags, .. } => p_flags.0 & object::elf::PF_X.0 != 0,
        _ => false,
    });
    let seg = exec.next()?;
    if exec.next().is_some() {
        return None;
    }
    let page = seg.address() & !(PAGE - 1);
    Some((m.offset, seg.address() + seg.size() - page, page))
}

fn vaddr_in(segments: &[(u64, u64, u64)], file_offset: u64) -> Option<u64> {
    segments
        .iter()
        .find(|(off, size, _)| file_offset >= *off && file_offset < off + size)
        .map(|(off, _, vaddr)| file_offset - off + vaddr)
}

/// What names one binary's frames.
struct Namer<'b> {
    lines: Option<SourceLines>,
    /// Its symbol table, for addresses the DWARF does not cover (None for a
    /// rebuilt binary: its symbols are another build's).
    symbols: Option<&'b Binary>,
    /// The symbol table of its separate debug file, where its own has no
    /// function there (a binary stripped of its `.symtab`).
    debug_symbols: Option<Binary>,
    segments: Vec<(u64, u64, u64)>,
    /// The build id of the debug file used, when debuginfod gave it.
    debuginfod: Option<String>,
}

/// The namer of a binary that is not here, or was rebuilt since: its debug
/// file `d`, of the recorded build, alone. Its program headers have no file
/// offsets: the mapping is matched to its executable segment.
fn debug_file_namer(d: debug_info::DebugFile, g: &Group<'_>) -> Option<Namer<'static>> {
    let dobj = object::File::parse(&**d.data).ok()?;
    let file = d.path.to_string_lossy();
    Some(Namer {
        segments: vec![exec_segment_as_mapped(&dobj, g.mapping)?],
        lines: SourceLines::load(d.data.clone(), &file)
            .ok()
            .filter(|_| g.lines),
        symbols: None,
        debug_symbols: Binary::from_bytes(d.data, &file),
        debuginfod: d.debuginfod,
    })
}

/// The debug file of the build id recorded for `g`'s mapping, on this
/// machine or from debuginfod.
fn recorded_build_debug_file(g: &Group<'_>, roots: &Roots) -> Option<debug_info::DebugFile> {
    let id = parse_hex(g.mapping.build_id.as_deref()?)?;
    debug_info::by_build_id_anywhere(roots, &id)
}

/// One binary's frames named, whether it was found rebuilt, and the build id
/// of the debug file debuginfod gave for it.
type GroupNamed = (Vec<(Key, Vec<Frame>)>, Option<Rebuilt>, Option<String>);

fn name_group(bin: Option<&Binary>, g: &Group<'_>, roots: &Roots) -> GroupNamed {
    let module = g.mapping.path.as_str();
    let all_unknown = |g: &Group<'_>| {
        g.offsets
            .iter()
            .map(|&(k, _)| (k, vec![unknown(k.1, module)]))
            .collect()
    };
    let Some(bin) = bin else {
        // Not here (or not readable): named from its recorded build's debug
        // file, if one is found.
        let namer = recorded_build_debug_file(g, roots).and_then(|d| debug_file_namer(d, g));
        return match namer {
            Some(namer) => (name_all(&namer, g, module), None, namer.debuginfod),
            None => (all_unknown(g), None, None),
        };
    };
    let Ok(obj) = object::File::parse(&**bin.data) else {
        return (all_unknown(g), None, None);
    };
    let (namer, rebuilt) = match &g.mapping.build_id {
        Some(recorded) if bin.build_id.as_ref() != Some(recorded) => {
            let debug = recorded_build_debug_file(g, roots);
            let rebuilt = Rebuilt {
                path: module.to_string(),
                recorded: recorded.clone(),
                now: bin.build_id.clone(),
                debug_file: debug.as_ref().map(|d| d.path.clone()),
            };
            (debug.and_then(|d| debug_file_namer(d, g)), Some(rebuilt))
        }
        _ => {
            let (lines, debug_symbols, debuginfod) = if !g.lines {
                (None, None, None)
            } else if has_dwarf(&obj) {
                (
                    SourceLines::load(bin.data.clone(), &g.mapping.file).ok(),
                    None,
                    None,
                )
            } else {
                // The folder of a file read by its recorded path; one read
                // through a kept descriptor has no folder of its own here.
                let path = (g.mapping.file == g.mapping.path).then(|| Path::new(module));
                match debug_info::find(roots, path, &obj) {
                    Some(d) => {
                        let file = d.path.to_string_lossy();
                        (
                            SourceLines::load(d.data.clone(), &file).ok(),
                            Binary::from_bytes(d.data, &file),
                            d.debuginfod,
                        )
                    }
                    None => (None, None, None),
                }
            };
            let namer = Namer {
                lines,
                symbols: Some(bin),
                debug_symbols,
                segments: segments(&obj),
                debuginfod,
            };
            (Some(namer), None)
        }
    };
    let Some(namer) = namer else {
        return (all_unknown(g), rebuilt, None);
    };
    (name_all(&namer, g, module), rebuilt, namer.debuginfod)
}

/// Every address of `g` named by `namer`.
fn name_all(namer: &Namer<'_>, g: &Group<'_>, module: &str) -> Vec<(Key, Vec<Frame>)> {
    let mut shared = Shared::default();
    let module = shared.get(module.to_string());
    g.offsets
        .iter()
        .map(|&(k, off)| (k, namer.name(k.1, off, &module, &mut shared)))
        .collect()
}

impl Namer<'_> {
    /// The frames at file offset `off` (pc `pc`), innermost first.
    fn name(&self, pc: u64, off: u64, module: &Arc<str>, shared: &mut Shared) -> Vec<Frame> {
        let Some(vaddr) = vaddr_in(&self.segments, off) else {
            return vec![unknown(pc, module)];
        };
        let symbol = || {
            self.symbols
                .and_then(|b| b.function_at(vaddr))
                .or_else(|| self.debug_symbols.as_ref()?.function_at(vaddr))
        };
        let source = self
            .lines
            .as_ref()
            .map(|l| l.frames(vaddr))
            .unwrap_or_default();
        if source.is_empty() {
            return vec![Frame {
                function: shared.get(symbol().unwrap_or_else(|| format!("{pc:#x}"))),
                module: module.clone(),
                ..unknown(pc, "")
            }];
        }
        let last = source.len() - 1;
        source
            .into_iter()
            .enumerate()
            .map(|(i, f)| Frame {
                function: shared.get(
                    f.function
                        .or_else(|| (i == last).then(symbol).flatten())
                        .unwrap_or_else(|| format!("{pc:#x}")),
                ),
                file: f.file.map(|f| shared.get(f)),
                line: f.line,
                module: module.clone(),
                inlined: i != last,
            })
            .collect()
    }
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `asys __symbolize-addresses`' work: the frames at each file address of
/// the binary at `path` (its DWARF, or a separate debug file's), named as
/// `name_frames` names sampled instructions, for the comparison with
/// binutils' addr2line.
pub fn name_file_addresses(
    path: &Path,
    vaddrs: &[u64],
    roots: &Roots,
) -> Result<Vec<Vec<Frame>>, crate::elf::ElfError> {
    use crate::elf::ElfError;
    // A path asys's user gave (`asys __symbolize-addresses`).
    let data =
        crate::elf::mapped::FileBytes::map(path, &asys_report::untrusted::open::Policy::NAMED)
            .map_err(|source| ElfError::Io {
                path: path.into(),
                source,
            })?;
    let obj = object::File::parse(&*data).map_err(|source| ElfError::Parse {
        path: path.into(),
        source,
    })?;
    let segs = segments(&obj);
    let file = path.to_string_lossy().into_owned();
    // The whole file mapped from offset 0 at address 0: a "pc" is a file
    // offset, looked up exactly.
    let mapping = ModuleMapping {
        start: 0,
        end: u64::MAX,
        offset: 0,
        path: file.clone(),
        file,
        build_id: None,
    };
    let keys: Vec<Option<Key>> = vaddrs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            segs.iter()
                .find(|(_, size, va)| v >= *va && v < va + size)
                .map(|(o, _, va)| (i as u32, v - va + o, true))
        })
        .collect();
    let wanted = keys
        .iter()
        .flatten()
        .map(|&k| (k, Some(&mapping), true))
        .collect();
    let mut named = name_frames(&mut Unwinder::default(), wanted, roots);
    Ok(keys
        .iter()
        .map(|k| k.and_then(|k| named.frames.remove(&k)).unwrap_or_default())
        .collect())
}
