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
    report::{ReportError, recorder::SymbolRow, schema, strings::StringTable},
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

/// Resolves every distinct (pid, kernelAddr) of the API and activity tables.
pub fn run(dir: &Path, strings: &mut StringTable) -> Result<Vec<SymbolRow>, ReportError> {
    let mut wanted = BTreeSet::new();
    for b in read_table(dir, schema::HGGC_API)? {
        let b = b?;
        let pid = b
            .column_by_name("pid")
            .unwrap()
            .as_primitive::<UInt32Type>();
        let addr = b
            .column_by_name("kernelAddr")
            .unwrap()
            .as_primitive::<UInt64Type>();
        for i in 0..b.num_rows() {
            if !addr.is_null(i) {
                wanted.insert((pid.value(i), addr.value(i)));
            }
        }
    }
    for b in read_table(dir, schema::HGGC_ACTIVITY)? {
        let b = b?;
        let pid = b
            .column_by_name("pid")
            .unwrap()
            .as_primitive::<UInt32Type>();
        let addr = b
            .column_by_name("kernelAddr")
            .unwrap()
            .as_primitive::<UInt64Type>();
        for i in 0..b.num_rows() {
            if !addr.is_null(i) {
                wanted.insert((pid.value(i), addr.value(i)));
            }
        }
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
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
    // A forked child that was never scanned has its parent's mappings.
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
