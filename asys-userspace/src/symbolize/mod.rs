//! The symbolize stage: after recording, resolves the kernel function
//! addresses of launch calls to names, using the mappings recorded for each
//! process and the ELF symbol tables of the mapped files. Reads and writes
//! plain tables; nothing here touches the kernel side.
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::Path,
};

use arrow::array::Array;

pub mod debug_info;
pub mod debuginfod;
pub mod jit_files;
pub mod lines;
pub mod naming;
pub mod resymbolize;
pub mod unwind;

use crate::elf::ElfFile;
use asys_report::report::{
    ReportError,
    rows::{StackFrameRow, SymbolRow},
    schema::{self, ProcessKind},
    strings::StringTable,
};

struct Module {
    ts: i64,
    start: u64,
    end: u64,
    offset: u64,
    path_id: u32,
    build_id: Option<String>,
}

/// Every process's recorded mappings, and each forked child's parent (a
/// child that was never scanned has its parent's mappings).
pub struct ProcessMaps(HashMap<u32, Vec<Module>>, HashMap<u32, u32>);

/// The columns [`process_maps`] reads of `modules` and `process_events`.
pub const MODULE_COLUMNS: [&str; 7] = {
    use schema::modules as m;
    [
        m::TS,
        m::PID,
        m::START,
        m::END,
        m::FILE_OFFSET,
        m::PATH_ID,
        m::BUILD_ID,
    ]
};
pub const PROCESS_EVENT_COLUMNS: [&str; 3] = {
    use schema::process_events as pe;
    [pe::KIND, pe::PID, pe::CHILD_PID]
};

fn process_maps(dir: &Path) -> Result<ProcessMaps, ReportError> {
    use schema::{modules as m, process_events as pe};
    process_maps_of(
        m::scan_file(dir, &MODULE_COLUMNS)?,
        pe::scan_file(dir, &PROCESS_EVENT_COLUMNS)?,
    )
}

/// The mappings and forks of the batches of `modules` and
/// `process_events` (of a recording folder or a report), read with
/// [`MODULE_COLUMNS`] and [`PROCESS_EVENT_COLUMNS`].
pub fn process_maps_of(
    modules_batches: asys_report::report::reader::Batches,
    events: asys_report::report::reader::Batches,
) -> Result<ProcessMaps, ReportError> {
    use schema::{modules as m, process_events as pe};
    let mut modules: HashMap<u32, Vec<Module>> = HashMap::new();
    for b in modules_batches {
        let b = b?;
        let v = m::View(&b);
        let (ts, pid) = (v.ts()?, v.pid()?);
        let (start, end, off) = (v.start()?, v.end()?, v.file_offset()?);
        let (path, build_id) = (v.path_id()?, v.build_id()?);
        for i in 0..b.num_rows() {
            modules.entry(pid[i]).or_default().push(Module {
                ts: ts[i],
                start: start[i],
                end: end[i],
                offset: off[i],
                path_id: path[i],
                build_id: build_id
                    .is_valid(i)
                    .then(|| build_id.value(i).to_string())
                    .filter(|id| !id.is_empty()),
            });
        }
    }
    let mut parent: HashMap<u32, u32> = HashMap::new();
    for b in events {
        let b = b?;
        let v = pe::View(&b);
        let kind = v.kinds()?;
        let (pid, child) = (v.pid()?, v.child_pid()?);
        for i in 0..b.num_rows() {
            if kind[i] == Some(ProcessKind::Fork) {
                parent.insert(child[i], pid[i]);
            }
        }
    }
    Ok(ProcessMaps(modules, parent))
}

impl ProcessMaps {
    /// The mappings of `pid`'s newest scan, or of its nearest scanned
    /// ancestor's (a child that was never scanned runs its parent's);
    /// `file(pid scanned, recorded path)` is where each file is read.
    pub fn newest(
        &self,
        pid: u32,
        strings: &StringTable,
        file: impl Fn(u32, &str) -> String,
    ) -> Vec<unwind::ModuleMapping> {
        let ProcessMaps(modules, parent) = self;
        let mut p = pid;
        for _ in 0..64 {
            if let Some(mods) = modules.get(&p) {
                let newest = mods.iter().map(|m| m.ts).max().unwrap_or(0);
                return mods
                    .iter()
                    .filter(|m| m.ts == newest)
                    .map(|m| {
                        let path = strings.get(m.path_id).unwrap_or("");
                        unwind::ModuleMapping {
                            start: m.start,
                            end: m.end,
                            offset: m.offset,
                            path: path.to_string(),
                            file: file(p, path),
                            build_id: m.build_id.clone(),
                        }
                    })
                    .collect();
            }
            match parent.get(&p) {
                Some(&pp) => p = pp,
                None => break,
            }
        }
        Vec::new()
    }
}

pub use asys_report::recorded_settings::Unwind;

/// Each process's JIT functions, as recorded from its perf map and jitdump.
fn jit_symbols(
    dir: &Path,
) -> Result<HashMap<u32, crate::symbolize::jit_files::JitSymbols>, ReportError> {
    use schema::jit_symbols as j;
    let mut rows: HashMap<u32, Vec<(u64, u64, u32, u32)>> = HashMap::new();
    let columns = [j::PID, j::START, j::SIZE, j::NAME_ID, j::SOURCE_ID];
    for b in j::scan_file(dir, &columns)? {
        let b = b?;
        let v = j::View(&b);
        let (pid, start, size) = (v.pid()?, v.start()?, v.size()?);
        let (name, source) = (v.name_id()?, v.source_id()?);
        for i in 0..b.num_rows() {
            rows.entry(pid[i])
                .or_default()
                .push((start[i], size[i], name[i], source[i]));
        }
    }
    Ok(rows
        .into_iter()
        .map(|(pid, entries)| (pid, crate::symbolize::jit_files::JitSymbols::new(entries)))
        .collect())
}

/// Unwinds and names the raw stacks of `raw_table` (at most `depth` frames
/// each), with the mappings of the process's newest scan. `sampled`: each
/// stack's first address is a sampled instruction, not a return address.
/// Every frame gets its function, file and line, with the functions inlined
/// at its address as rows of their own (`naming.rs`); with `lines_for`,
/// only the processes descending from those pids get file and line (the
/// others their functions from the symbol table): system-wide samples come
/// from every binary on the machine, and loading the DWARF of each (a debug
/// build's is hundreds of MB) took seconds and GBs for stacks nobody asked
/// about. Also returns the binaries found rebuilt since recording (not
/// named from), and the build ids whose debug files debuginfod gave.
pub fn unwind_stacks(
    dir: &Path,
    raw_table: &str,
    (how, sampled): (Unwind, bool),
    strings: &mut StringTable,
    (depth, lines_for): (usize, Option<&[u32]>),
) -> Result<Unwound, ReportError> {
    use schema::stacks_raw as sr;
    let columns = [
        sr::PID,
        sr::TID,
        sr::CALL_START,
        sr::IP,
        sr::SP,
        sr::BP,
        sr::STACK,
    ];
    let mut raw = sr::scan_file(dir, raw_table, &columns)?.peekable();
    // No stacks: the mappings and JIT maps are not worth reading.
    if raw.peek().is_none() {
        return Ok(Unwound::default());
    }
    let mut u = Unwinding {
        maps: process_maps(dir)?,
        jits: jit_symbols(dir)?,
        unwinder: unwind::Unwinder::default(),
        maps_by_pid: HashMap::new(),
        how,
        sampled,
        depth,
    };
    // First every stack is unwound; the distinct frames are then named
    // together, binary by binary (each binary's debug information is
    // loaded once, however many stacks pass through it).
    let mut stacks = Vec::new();
    let mut wanted = BTreeSet::new();
    for b in raw {
        u.unwind_batch(&b?, strings, &mut stacks, &mut wanted)?;
    }
    let wanted = with_mappings(wanted, &u.maps_by_pid, &u.maps.1, lines_for);
    let roots = debug_info::Roots::from_env();
    let named = naming::name_frames(&mut u.unwinder, wanted, &roots);
    let rows = u.frame_rows(stacks, &named, strings);
    Ok(Unwound {
        rows,
        rebuilt: named.rebuilt,
        debuginfod: named.debuginfod,
    })
}

/// What [`unwind_stacks`] gives.
#[derive(Default)]
pub struct Unwound {
    pub rows: Vec<StackFrameRow>,
    /// The binaries found rebuilt since recording.
    pub rebuilt: Vec<naming::Rebuilt>,
    /// The build ids (hex) whose debug files debuginfod gave.
    pub debuginfod: BTreeSet<String>,
}

/// One stack as unwound: pid, tid, callStart and its pcs, innermost first.
type Stack = (u32, u32, i64, Vec<u64>);

/// What unwinding a table's raw stacks works with, read or built once.
struct Unwinding {
    /// Every process's recorded mappings and each forked child's parent.
    maps: ProcessMaps,
    jits: HashMap<u32, jit_files::JitSymbols>,
    unwinder: unwind::Unwinder,
    /// Mappings by pid, worked out once (a report may hold many samples).
    maps_by_pid: HashMap<u32, Vec<unwind::ModuleMapping>>,
    how: Unwind,
    /// Each stack's first address is a sampled instruction.
    sampled: bool,
    depth: usize,
}

impl Unwinding {
    /// The mappings of `pid`'s newest scan, or of its nearest scanned
    /// ancestor's (a child that was never scanned runs its parent's).
    fn maps_of(&self, pid: u32, strings: &StringTable) -> Vec<unwind::ModuleMapping> {
        // A file of another mount namespace is read through the descriptor
        // kept for it.
        self.maps.newest(pid, strings, |p, path| {
            crate::process::mapped_file::readable_path(p, path)
                .to_string_lossy()
                .into_owned()
        })
    }

    /// Unwinds each raw stack of a batch into `stacks`, and adds the frames
    /// to name to `wanted`.
    fn unwind_batch(
        &mut self,
        b: &asys_report::report::reader::Batch,
        strings: &StringTable,
        stacks: &mut Vec<Stack>,
        wanted: &mut BTreeSet<naming::Key>,
    ) -> Result<(), ReportError> {
        let v = schema::stacks_raw::View(b);
        let (pid, tid, start) = (v.pid()?, v.tid()?, v.call_start()?);
        let (ip, sp, bp, stack) = (v.ip()?, v.sp()?, v.bp()?, v.stack()?);
        for i in 0..b.num_rows() {
            if !self.maps_by_pid.contains_key(&pid[i]) {
                let maps = self.maps_of(pid[i], strings);
                self.maps_by_pid.insert(pid[i], maps);
            }
            let regs = unwind::Registers {
                ip: ip[i],
                sp: sp[i],
                bp: bp[i],
            };
            let pcs = self.unwind_one(pid[i], regs, stack.value(i), strings);
            for (n, &pc) in pcs.iter().enumerate() {
                wanted.insert((pid[i], pc, self.sampled && n == 0));
            }
            stacks.push((pid[i], tid[i], start[i], pcs));
        }
        Ok(())
    }

    /// The pcs of one stack of `pid`, innermost first.
    fn unwind_one(
        &mut self,
        pid: u32,
        regs: unwind::Registers,
        stack: &[u8],
        strings: &StringTable,
    ) -> Vec<u64> {
        match self.how {
            Unwind::Dwarf => {
                let jit = self.jits.get(&pid);
                let in_jit = |pc: u64| {
                    let (name, _) = jit?.find(pc)?;
                    // CPython's `-X perf` trampolines are named
                    // `py::function:file`.
                    Some(match strings.get(name) {
                        Some(n) if n.starts_with("py::") => unwind::JitCode::CpythonTrampoline,
                        _ => unwind::JitCode::FramePointer,
                    })
                };
                let maps = &self.maps_by_pid[&pid];
                self.unwinder
                    .unwind(maps, regs, stack, self.depth, self.sampled, &in_jit)
            }
            Unwind::FramePointers => unwind::Unwinder::unwind_fp(regs, stack, self.depth),
        }
    }

    /// The frame rows of the unwound stacks, with the names found: a pc
    /// outside every file mapping is named by its process's JIT map when
    /// that has it; a pc nothing named is left out (depths stay dense).
    fn frame_rows(
        &self,
        stacks: Vec<Stack>,
        named: &naming::Named,
        strings: &mut StringTable,
    ) -> Vec<StackFrameRow> {
        let mut out = Vec::new();
        for (pid, tid, call_start, pcs) in stacks {
            let mut level = 0u32;
            for (n, pc) in pcs.into_iter().enumerate() {
                let jit_frame = self.jit_frame(pid, pc, strings);
                let frames = match &jit_frame {
                    Some(f) => f,
                    None => match named.frames.get(&(pid, pc, self.sampled && n == 0)) {
                        Some(f) => f,
                        None => continue,
                    },
                };
                for f in frames {
                    out.push(StackFrameRow {
                        pid,
                        tid,
                        call_start,
                        depth: level,
                        pc,
                        function_id: strings.intern(&f.function),
                        file_id: f.file.as_deref().map(|f| strings.intern(f)),
                        line: f.line,
                        module_id: strings.intern(&f.module),
                        inlined: f.inlined,
                    });
                    level += 1;
                }
            }
        }
        out
    }

    /// The frame a JIT's perf map gives `pc` of `pid`, when `pc` is outside
    /// every file mapping (a file's own symbols win over a stale map).
    fn jit_frame(&self, pid: u32, pc: u64, strings: &StringTable) -> Option<Vec<unwind::Frame>> {
        let mapped = self
            .maps_by_pid
            .get(&pid)
            .is_some_and(|maps| maps.iter().any(|m| pc >= m.start && pc < m.end));
        if mapped {
            return None;
        }
        let (name, source) = self.jits.get(&pid)?.find(pc)?;
        Some(vec![unwind::Frame {
            function: strings.get(name).unwrap_or("").into(),
            file: None,
            line: None,
            module: strings.get(source).unwrap_or("").into(),
            inlined: false,
        }])
    }
}

/// Each frame to name with its mapping (None: outside every file mapping)
/// and whether it gets file and line: only in the processes descending
/// from `lines_for` (all when None). A free function, not a method of
/// [`Unwinding`]: the mappings it lends stay borrowed while the unwinder
/// names the frames.
fn with_mappings<'m>(
    wanted: BTreeSet<naming::Key>,
    maps_by_pid: &'m HashMap<u32, Vec<unwind::ModuleMapping>>,
    parent: &HashMap<u32, u32>,
    lines_for: Option<&[u32]>,
) -> Vec<(naming::Key, Option<&'m unwind::ModuleMapping>, bool)> {
    let lines = |pid: u32| -> bool {
        let Some(roots) = lines_for else {
            return true;
        };
        let mut p = pid;
        for _ in 0..64 {
            if roots.contains(&p) {
                return true;
            }
            match parent.get(&p) {
                Some(&pp) => p = pp,
                None => return false,
            }
        }
        false
    };
    wanted
        .into_iter()
        .map(|k| {
            let m = maps_by_pid
                .get(&k.0)
                .and_then(|maps| maps.iter().find(|m| k.1 >= m.start && k.1 < m.end));
            (k, m, lines(k.0))
        })
        .collect()
}

/// Resolves the kernel addresses the recorder saw in launches and device
/// activity (`wanted`: distinct (pid, kernelAddr), gathered as rows were
/// recorded, so the tables are not read back here).
pub fn run(
    dir: &Path,
    wanted: &BTreeSet<(u32, u64)>,
    named: &BTreeMap<(u32, u64), u32>,
    strings: &mut StringTable,
) -> Result<Vec<SymbolRow>, ReportError> {
    let mut out = Vec::new();
    // Kernels the runtime named (CUPTI) need no lookup.
    let wanted: Vec<(u32, u64)> = wanted
        .iter()
        .filter(|k| match named.get(k) {
            Some(&name_id) => {
                out.push(SymbolRow {
                    pid: k.0,
                    addr: k.1,
                    name_id,
                });
                false
            }
            None => true,
        })
        .copied()
        .collect();
    if wanted.is_empty() {
        return Ok(out);
    }
    let ProcessMaps(modules, parent) = process_maps(dir)?;
    // By the path read: one recorded path may be two files (a container's
    // and the host's).
    let mut elves: HashMap<std::path::PathBuf, Option<ElfFile>> = HashMap::new();
    for (pid, addr) in wanted {
        let mut p = pid;
        let mut name = None;
        for _ in 0..64 {
            if let Some(mods) = modules.get(&p) {
                // The newest scan that maps the address wins (exec replaces maps).
                let hit = mods
                    .iter()
                    .filter(|m| addr >= m.start && addr < m.end)
                    .max_by_key(|m| m.ts);
                if let Some(m) = hit {
                    let readable = crate::process::mapped_file::readable_path(
                        p,
                        strings.get(m.path_id).unwrap_or(""),
                    );
                    let elf = elves
                        .entry(readable)
                        .or_insert_with_key(|path| ElfFile::read(path).ok());
                    name = elf
                        .as_ref()
                        .and_then(|e| e.symbolize_file_offset(addr - m.start + m.offset));
                    break;
                }
            }
            match parent.get(&p) {
                Some(&pp) => p = pp,
                None => break,
            }
        }
        let name = name.unwrap_or_else(|| format!("{addr:#x}"));
        out.push(SymbolRow {
            pid,
            addr,
            name_id: strings.intern(&name),
        });
    }
    Ok(out)
}
