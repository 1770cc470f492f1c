//! `asys symbolize REPORT`: names the frames a report left as addresses or
//! without source lines (a stripped binary whose debug file was not found
//! when it was recorded), on any machine: each frame is looked up by the
//! build id and file offset the report kept for its mapping, in the debug
//! folders (`--debug-dir`, `/usr/lib/debug/.build-id/..`), debuginfod's
//! caches, and the `DEBUGINFOD_URLS` servers. The report is rewritten in
//! place as a recording writes one: a new file renamed over it once whole.
use std::path::PathBuf;

use anyhow::Context;
use arrow::array::Array;
use clap::Args;

use asys_report::report::{
    container::{self, Container},
    reader,
    rows::StackFrameRow,
    schema,
};

use crate::{
    sink::recorder::Recorded,
    symbolize::{self, debug_info::Roots, resymbolize},
};

#[derive(Args, Debug)]
#[command(override_usage = "asys symbolize [<args>] REPORT")]
pub struct SymbolizeArgs {
    /// The report (rewritten in place).
    pub report: PathBuf,
    /// A folder of debug files by build id (DIR/.build-id/xx/rest.debug),
    /// searched before /usr/lib/debug; may be given more than once.
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,
}

/// The stack tables, and whether each stack's first frame is a sampled
/// instruction.
const TABLES: [(&str, bool); 2] = [
    (schema::API_STACKS, false),
    (schema::CPU_SAMPLE_STACKS, true),
];

pub fn run(args: SymbolizeArgs) -> anyhow::Result<u8> {
    let path = &args.report;
    let report = Container::open(path)?;
    if let Some(w) = report.recovered_warning() {
        eprintln!("{w}");
    }
    let mut strings = reader::string_table(&report)?;
    let maps = symbolize::process_maps_of(
        schema::modules::scan(&report, &symbolize::MODULE_COLUMNS)?,
        schema::process_events::scan(&report, &symbolize::PROCESS_EVENT_COLUMNS)?,
    )?;
    let mut roots = Roots::from_env();
    for d in args.debug_dirs.iter().rev() {
        roots.debug_dirs.insert(0, d.clone());
    }
    let mut frames = 0;
    let mut debuginfod = std::collections::BTreeSet::new();
    let mut rewritten: Vec<(&str, Vec<StackFrameRow>)> = Vec::new();
    for (table, sampled) in TABLES {
        if !report.tables().any(|t| t == table) {
            continue;
        }
        let rows = stack_rows(&report, table)?;
        let (rows, renamed) = resymbolize::name_again(rows, sampled, &maps, &mut strings, &roots);
        frames += renamed.frames;
        debuginfod.extend(renamed.debuginfod);
        rewritten.push((table, rows));
    }
    if frames == 0 {
        eprintln!(
            "asys: no frame of {} could be named further; the report is unchanged",
            path.display()
        );
        return Ok(0);
    }
    let mut meta = report.metadata.clone();
    let mut known: std::collections::BTreeSet<String> =
        meta.debuginfod_build_ids.iter().cloned().collect();
    known.extend(debuginfod.iter().cloned());
    meta.debuginfod_build_ids = known.into_iter().collect();
    // Every other table as it is, beside the new ones, in a private folder
    // beside the report (its file system: a report may be GBs); then packed
    // into a new file renamed over the report.
    let dir = Beside::new(path)?;
    let replaced: Vec<&str> = rewritten
        .iter()
        .map(|(t, _)| *t)
        .chain([schema::STRINGS])
        .collect();
    let mut recorded = Recorded {
        dir: dir.path().to_path_buf(),
        members: Vec::new(),
        tables: meta.tables.clone(),
        strings,
        kernels: Default::default(),
        named_kernels: Default::default(),
    };
    for table in report.tables().filter(|t| !replaced.contains(t)) {
        let member = format!("{table}.parquet");
        let target = dir.path().join(&member);
        let Some(m) = report.table(table) else {
            continue;
        };
        let mut from = parquet::file::reader::ChunkReader::get_read(&m, 0)
            .with_context(|| format!("{}: {member}", path.display()))?;
        let mut to = asys_report::report::files::create_new(&target)
            .with_context(|| target.display().to_string())?;
        std::io::copy(&mut from, &mut to).with_context(|| target.display().to_string())?;
        recorded.members.push(member);
    }
    for (table, rows) in rewritten {
        recorded.tables.remove(table);
        if table == schema::API_STACKS {
            recorded.add_api_stacks(rows)?;
        } else {
            recorded.add_sample_stacks(rows)?;
        }
    }
    recorded.tables.remove(schema::STRINGS);
    recorded.write_strings()?;
    meta.tables = recorded.tables.clone();
    crate::sink::disk::ensure_space_to_pack(&recorded.dir, &recorded.members)?;
    container::pack(&recorded.dir, &recorded.members, &meta, path)?;
    let through = match debuginfod.len() {
        0 => String::new(),
        1 => " (1 binary through debuginfod)".to_string(),
        n => format!(" ({n} binaries through debuginfod)"),
    };
    eprintln!("asys: named {frames} frame(s){through}");
    eprintln!(
        "Generated:\n    {}",
        crate::sink::report_path::absolute(path).display()
    );
    Ok(0)
}

/// Every row of the stack table `table` (`api_stacks` or
/// `cpu_sample_stacks`: the same columns, `ts` for `callStart` in the
/// latter).
fn stack_rows(report: &Container, table: &str) -> anyhow::Result<Vec<StackFrameRow>> {
    use schema::api_stacks as a;
    let start = if table == schema::CPU_SAMPLE_STACKS {
        schema::cpu_sample_stacks::TS
    } else {
        a::CALL_START
    };
    let columns = [
        a::PID,
        a::TID,
        start,
        a::DEPTH,
        a::PC,
        a::FUNCTION_ID,
        a::FILE_ID,
        a::LINE,
        a::MODULE_ID,
        a::INLINED,
    ];
    let mut out = Vec::new();
    for b in reader::scan(report, table, &columns)? {
        let b = b?;
        let (pid, tid) = (b.values::<U32>(a::PID)?, b.values::<U32>(a::TID)?);
        let call_start = b.values::<arrow::datatypes::Int64Type>(start)?;
        let (depth, pc) = (b.values::<U32>(a::DEPTH)?, b.values::<U64>(a::PC)?);
        let function = b.values::<U32>(a::FUNCTION_ID)?;
        let (file, line) = (b.prim::<U32>(a::FILE_ID)?, b.prim::<U32>(a::LINE)?);
        let module = b.values::<U32>(a::MODULE_ID)?;
        let inlined = b.bools(a::INLINED)?;
        for i in 0..b.num_rows() {
            out.push(StackFrameRow {
                pid: pid[i],
                tid: tid[i],
                call_start: call_start[i],
                depth: depth[i],
                pc: pc[i],
                function_id: function[i],
                file_id: file.is_valid(i).then(|| file.value(i)),
                line: line.is_valid(i).then(|| line.value(i)),
                module_id: module[i],
                inlined: inlined.is_valid(i) && inlined.value(i),
            });
        }
    }
    Ok(out)
}

/// A private folder beside the report (`.NAME.symbolize-PID`, mode 0700),
/// removed with what is in it when dropped.
struct Beside(PathBuf);

impl Beside {
    fn new(report: &std::path::Path) -> anyhow::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let name = report
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = report.with_file_name(format!(".{name}.symbolize-{}", std::process::id()));
        // create, not create_all: a folder (or link) someone else put at
        // this name is never used.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| dir.display().to_string())?;
        Ok(Self(dir))
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        // remove_dir_all removes links, never what they point to.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

type U32 = arrow::datatypes::UInt32Type;
type U64 = arrow::datatypes::UInt64Type;
