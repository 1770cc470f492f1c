//! The symbolize stage: after recording, resolves the kernel function
//! addresses of launch calls to names, using the mappings recorded for each
//! process and the ELF symbol tables of the mapped files. Reads and writes
//! plain tables; nothing here touches the kernel side.
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::Path,
};

use arrow::{
    array::Array,
    datatypes::{Int64Type, UInt32Type, UInt64Type},
};

pub mod debug_info;
pub mod demangle;
pub mod jit_files;
pub mod lines;
pub mod naming;
pub mod unwind;

use crate::elf::ElfFile;
use crate::report::{
    ReportError,
    reader::scan_file,
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
type ProcessMaps = (HashMap<u32, Vec<Module>>, HashMap<u32, u32>);

fn process_maps(dir: &Path) -> Result<ProcessMaps, ReportError> {
    use schema::{modules as m, process_events as pe};
    let mut modules: HashMap<u32, Vec<Module>> = HashMap::new();
    let columns = [
        m::TS,
        m::PID,
        m::START,
        m::END,
        m::FILE_OFFSET,
        m::PATH_ID,
        m::BUILD_ID,
    ];
    for b in m::scan_file(dir, &columns)? {
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
    for b in pe::scan_file(dir, &[pe::KIND, pe::PID, pe::CHILD_PID])? {
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
    Ok((modules, parent))
}

pub use crate::settings::Unwind;

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
/// named from).
pub fn unwind_stacks(
    dir: &Path,
    raw_table: &str,
    (how, sampled): (Unwind, bool),
    strings: &mut StringTable,
    (depth, lines_for): (usize, Option<&[u32]>),
) -> Result<(Vec<StackFrameRow>, Vec<naming::Rebuilt>), ReportError> {
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
    let mut raw = scan_file(dir, raw_table, &columns)?.peekable();
    if raw.peek().is_none() {
        return Ok((Vec::new(), Vec::new()));
    }
    let (modules, parent) = process_maps(dir)?;
    let maps_of = |pid: u32, strings: &StringTable| -> Vec<unwind::Mapping> {
        let mut p = pid;
        for _ in 0..64 {
            if let Some(mods) = modules.get(&p) {
                let newest = mods.iter().map(|m| m.ts).max().unwrap_or(0);
                return mods
                    .iter()
                    .filter(|m| m.ts == newest)
                    .map(|m| unwind::Mapping {
                        start: m.start,
                        end: m.end,
                        offset: m.offset,
                        // A file of another mount namespace is read
                        // through the descriptor kept for it.
                        path: strings.get(m.path_id).unwrap_or("").to_string(),
                        file: crate::process::mapped_file::readable_path(
                            p,
                            strings.get(m.path_id).unwrap_or(""),
                        )
                        .to_string_lossy()
                        .into_owned(),
                        build_id: m.build_id.clone(),
                    })
                    .collect();
            }
            match parent.get(&p) {
                Some(&pp) => p = pp,
                None => break,
            }
        }
        Vec::new()
    };
    let jits = jit_symbols(dir)?;
    let jit_of = |pid: u32| jits.get(&pid);
    let mut unwinder = unwind::Unwinder::default();
    // Mappings by pid, worked out once (a report may hold many samples).
    let mut maps_by_pid: HashMap<u32, Vec<unwind::Mapping>> = HashMap::new();
    // First every stack is unwound (pid, tid, callStart, pcs); the distinct
    // frames are then named together, binary by binary.
    let mut stacks: Vec<(u32, u32, i64, Vec<u64>)> = Vec::new();
    let mut wanted: BTreeSet<naming::Key> = BTreeSet::new();
    for b in raw {
        let b = b?;
        let pid = b.prim::<UInt32Type>(sr::PID)?;
        let tid = b.prim::<UInt32Type>(sr::TID)?;
        let start = b.prim::<Int64Type>(sr::CALL_START)?;
        let ip = b.prim::<UInt64Type>(sr::IP)?;
        let sp = b.prim::<UInt64Type>(sr::SP)?;
        let bp = b.prim::<UInt64Type>(sr::BP)?;
        let stack = b.bins(sr::STACK)?;
        for i in 0..b.num_rows() {
            let maps = &*maps_by_pid
                .entry(pid.value(i))
                .or_insert_with(|| maps_of(pid.value(i), strings));
            let regs = unwind::Registers {
                ip: ip.value(i),
                sp: sp.value(i),
                bp: bp.value(i),
            };
            let stack = stack.value(i);
            let pcs = match how {
                Unwind::Dwarf => {
                    let jit = jit_of(pid.value(i));
                    let in_jit = |pc: u64| {
                        let (name, _) = jit?.find(pc)?;
                        // CPython's `-X perf` trampolines are named
                        // `py::function:file`.
                        Some(match strings.get(name) {
                            Some(n) if n.starts_with("py::") => unwind::JitCode::CpythonTrampoline,
                            _ => unwind::JitCode::FramePointer,
                        })
                    };
                    unwinder.unwind(maps, regs, stack, depth, sampled, &in_jit)
                }
                Unwind::FramePointers => unwind::Unwinder::unwind_fp(regs, stack, depth),
            };
            for (n, &pc) in pcs.iter().enumerate() {
                wanted.insert((pid.value(i), pc, sampled && n == 0));
            }
            stacks.push((pid.value(i), tid.value(i), start.value(i), pcs));
        }
    }
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
    let wanted = wanted
        .into_iter()
        .map(|k| {
            let m = maps_by_pid
                .get(&k.0)
                .and_then(|maps| maps.iter().find(|m| k.1 >= m.start && k.1 < m.end));
            (k, m, lines(k.0))
        })
        .collect();
    let roots = debug_info::Roots::from_env();
    let named = naming::name_frames(&mut unwinder, wanted, &roots);
    let mut out = Vec::new();
    for (pid, tid, call_start, pcs) in stacks {
        let mut level = 0u32;
        for (n, pc) in pcs.into_iter().enumerate() {
            // Outside every file mapping: a JIT's perf map may name it.
            let mapped = maps_by_pid
                .get(&pid)
                .is_some_and(|maps| maps.iter().any(|m| pc >= m.start && pc < m.end));
            let jit_frame = match jit_of(pid) {
                Some(j) if !mapped => j.find(pc).map(|(name, source)| {
                    vec![unwind::Frame {
                        function: strings.get(name).unwrap_or("").into(),
                        file: None,
                        line: None,
                        module: strings.get(source).unwrap_or("").into(),
                        inlined: false,
                    }]
                }),
                _ => None,
            };
            let frames = match &jit_frame {
                Some(f) => f,
                None => match named.frames.get(&(pid, pc, sampled && n == 0)) {
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
    Ok((out, named.rebuilt))
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
    let (modules, parent) = process_maps(dir)?;
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
