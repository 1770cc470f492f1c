//! The symbolize stage: after recording, resolves the kernel function
//! addresses of launch calls to names, using the mappings recorded for each
//! process and the ELF symbol tables of the mapped files. Reads and writes
//! plain tables; nothing here touches the kernel side.
use std::{
    collections::{BTreeSet, HashMap},
    fs::File,
    path::Path,
};

use arrow::{
    array::{Array, AsArray, RecordBatch},
    datatypes::{Int64Type, UInt32Type, UInt64Type},
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::{
    elf::ElfFile,
    report::{
        ReportError,
        recorder::{StackFrameRow, SymbolRow},
        schema,
        strings::StringTable,
    },
    unwind,
};

/// Streams the batches of one recorded table (never the whole table at once).
fn read_table(
    dir: &Path,
    table: &str,
) -> Result<Box<dyn Iterator<Item = Result<RecordBatch, ReportError>>>, ReportError> {
    let path = dir.join(format!("{table}.parquet"));
    // Tables of items that made no calls are never created.
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Box::new(std::iter::empty()) as Box<dyn Iterator<Item = _>>);
        }
        Err(e) => return Err(ReportError::io(&path, e)),
    };
    let perr = |source| ReportError::Parquet {
        path: path.clone(),
        table: table.into(),
        source,
    };
    let table = table.to_string();
    Ok(Box::new(
        ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(perr)?
            .build()
            .map_err(perr)?
            .map(move |b| {
                b.map_err(|source| ReportError::Arrow {
                    table: table.clone(),
                    source,
                })
            }),
    ))
}

struct Module {
    ts: i64,
    start: u64,
    end: u64,
    offset: u64,
    path_id: u32,
}

/// Every process's recorded mappings, and each forked child's parent (a
/// child that was never scanned has its parent's mappings).
type ProcessMaps = (HashMap<u32, Vec<Module>>, HashMap<u32, u32>);

fn process_maps(dir: &Path) -> Result<ProcessMaps, ReportError> {
    let mut modules: HashMap<u32, Vec<Module>> = HashMap::new();
    for b in read_table(dir, schema::MODULES)? {
        let b = b?;
        let ts = b.column(0).as_primitive::<Int64Type>();
        let pid = b.column(1).as_primitive::<UInt32Type>();
        let start = b.column(2).as_primitive::<UInt64Type>();
        let end = b.column(3).as_primitive::<UInt64Type>();
        let off = b.column(4).as_primitive::<UInt64Type>();
        let path = b.column(5).as_primitive::<UInt32Type>();
        for i in 0..b.num_rows() {
            modules.entry(pid.value(i)).or_default().push(Module {
                ts: ts.value(i),
                start: start.value(i),
                end: end.value(i),
                offset: off.value(i),
                path_id: path.value(i),
            });
        }
    }
    let mut parent: HashMap<u32, u32> = HashMap::new();
    for b in read_table(dir, schema::PROCESS_EVENTS)? {
        let b = b?;
        let kind = b.column(1).as_string::<i32>();
        let pid = b.column(2).as_primitive::<UInt32Type>();
        let child = b.column(4).as_primitive::<UInt32Type>();
        for i in 0..b.num_rows() {
            if kind.value(i) == "fork" {
                parent.insert(child.value(i), pid.value(i));
            }
        }
    }
    Ok((modules, parent))
}

pub use crate::settings::Unwind;

/// Unwinds and names the raw stacks of `raw_table` (at most `depth` frames
/// each), with the mappings of the process's newest scan. `sampled`: each
/// stack's first address is a sampled instruction, not a return address, and
/// frames are named by function only (samples come by the thousand, from any
/// process: the symbol table is looked up, not the line tables).
pub fn unwind_stacks(
    dir: &Path,
    raw_table: &str,
    (how, sampled): (Unwind, bool),
    strings: &mut StringTable,
    depth: usize,
) -> Result<Vec<StackFrameRow>, ReportError> {
    let mut raw = read_table(dir, raw_table)?.peekable();
    if raw.peek().is_none() {
        return Ok(Vec::new());
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
                        path: strings.get(m.path_id).unwrap_or("").to_string(),
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
    let mut unwinder = unwind::Unwinder::default();
    // Mappings by pid, worked out once (a report may hold many samples).
    let mut maps_by_pid: HashMap<u32, Vec<unwind::Mapping>> = HashMap::new();
    // Frames by (pid, pc, exact): samples hit the same addresses again and again.
    let mut frames: HashMap<(u32, u64, bool), Vec<unwind::Frame>> = HashMap::new();
    let mut out = Vec::new();
    for b in raw {
        let b = b?;
        let pid = b.column(0).as_primitive::<UInt32Type>();
        let tid = b.column(1).as_primitive::<UInt32Type>();
        let start = b.column(2).as_primitive::<Int64Type>();
        let ip = b.column(3).as_primitive::<UInt64Type>();
        let sp = b.column(4).as_primitive::<UInt64Type>();
        let bp = b.column(5).as_primitive::<UInt64Type>();
        let stack = b.column(6).as_binary::<i32>();
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
                Unwind::Dwarf => unwinder.unwind(maps, regs, stack, depth, sampled),
                Unwind::FramePointers => unwind::Unwinder::unwind_fp(regs, stack, depth),
            };
            let mut level = 0u32;
            for (n, pc) in pcs.into_iter().enumerate() {
                let exact = sampled && n == 0;
                let named = frames
                    .entry((pid.value(i), pc, exact))
                    .or_insert_with(|| unwinder.symbolize(maps, pc, exact, !sampled));
                for f in named.iter() {
                    out.push(StackFrameRow {
                        pid: pid.value(i),
                        tid: tid.value(i),
                        call_start: start.value(i),
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
    }
    Ok(out)
}

/// Resolves every distinct (pid, kernelAddr) of the API and activity tables.
pub fn run(dir: &Path, strings: &mut StringTable) -> Result<Vec<SymbolRow>, ReportError> {
    let mut wanted = BTreeSet::new();
    // Kernels named by launches and by device activity.
    for table in [schema::HGGC_API, schema::HGGC_ACTIVITY] {
        for b in read_table(dir, table)? {
            let b = b?;
            let column = |name: &str| b.column_by_name(name).expect("in the schema");
            let pid = column("pid").as_primitive::<UInt32Type>();
            let addr = column("kernelAddr").as_primitive::<UInt64Type>();
            for i in 0..b.num_rows() {
                if !addr.is_null(i) {
                    wanted.insert((pid.value(i), addr.value(i)));
                }
            }
        }
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let (modules, parent) = process_maps(dir)?;
    let mut elves: HashMap<u32, Option<ElfFile>> = HashMap::new();
    let mut out = Vec::new();
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
                    let elf = elves.entry(m.path_id).or_insert_with(|| {
                        strings
                            .get(m.path_id)
                            .and_then(|p| ElfFile::read(Path::new(p)).ok())
                    });
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
