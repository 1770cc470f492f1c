//! `asys recover`: a report from what a recording that did not finish left
//! in its folder. Every chunk of every complete checkpoint (the journal says
//! which) is checked to open as Parquet, joined into its table, symbolized and
//! packed with `metadata.recovered` set; the folder is removed only once the
//! report is written.
use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    path::{Path, PathBuf},
};

use crate::sink::{
    folder, join,
    journal::{self, Checkpoint, Recording},
    recorder::Recorded,
};
use asys_report::report::{ReportError, metadata, schema, strings::StringTable};

/// The reason a recording that filled the disk gives.
pub const DISK_FULL: &str = "disk full";

#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error("{0} is not a recording folder of asys (it has no {file})", file = journal::RECORDING)]
    NotARecording(PathBuf),
    #[error("asys (pid {pid}) is still recording in {dir}")]
    StillRecording { pid: u32, dir: PathBuf },
    #[error("{0}: the recording stopped before its first checkpoint; there is nothing to recover")]
    NoCheckpoint(PathBuf),
    #[error(
        "{0} is a flight recorder's folder: it keeps only a ring of its last seconds, which is not journaled; there is nothing to recover"
    )]
    FlightRing(PathBuf),
    #[error("report {0} already exists; use -f to overwrite it")]
    Exists(PathBuf),
    #[error("{dir}: chunk {file} of checkpoint {checkpoint} is missing")]
    Missing {
        dir: PathBuf,
        file: String,
        checkpoint: u64,
    },
    #[error("refusing to recover {dir}: {why}")]
    Untrusted { dir: PathBuf, why: String },
    #[error(transparent)]
    Output(#[from] crate::sink::report_path::OutputError),
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// A recording folder is read (and its files removed) only if it is the
/// caller's own: what is in it decides where root writes a report, so one
/// another user made or can change is not trusted.
fn check_owner(dir: &Path) -> Result<(), RecoverError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let untrusted = |why: String| RecoverError::Untrusted {
        dir: dir.to_path_buf(),
        why,
    };
    let meta = std::fs::symlink_metadata(dir).map_err(|e| untrusted(e.to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(untrusted("it is a symbolic link".into()));
    }
    if !meta.is_dir() {
        return Err(untrusted("it is not a folder".into()));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(untrusted(format!(
            "it belongs to uid {}, not {me}",
            meta.uid()
        )));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(untrusted("other users may write in it".into()));
    }
    Ok(())
}

#[derive(Debug, Default)]
pub struct Options {
    /// Where the report goes; by default where the recording would have
    /// written it.
    pub output: Option<PathBuf>,
    /// Overwrite a report that exists there.
    pub force: bool,
    /// Why the recording did not finish, when the caller knows.
    pub reason: Option<String>,
}

/// What was recovered.
#[derive(Debug)]
pub struct Recovered {
    pub report: PathBuf,
    /// Rows per table.
    pub tables: BTreeMap<String, u64>,
    /// The last checkpoint recovered, in seconds after the start.
    pub seconds: f64,
    pub checkpoints: u64,
    /// Chunks written after the last complete checkpoint (or damaged), not used.
    pub ignored_chunks: usize,
    pub reason: String,
}

pub fn recover(dir: &Path, options: &Options) -> Result<Recovered, RecoverError> {
    let recording = recoverable(dir)?;
    let report = report_path(dir, &recording, options)?;
    let journal = journal::read(dir)?;
    let checkpoints = usable(dir, journal.checkpoints)?;
    let Some(last) = checkpoints.last().cloned() else {
        return Err(RecoverError::NoCheckpoint(dir.to_path_buf()));
    };
    let reason = options
        .reason
        .clone()
        .or(journal.stopped)
        .unwrap_or_else(|| "asys was killed or crashed".into());
    let (recorded, ignored_chunks) = join_checkpoints(dir, &checkpoints)?;
    let mut meta = recording.metadata;
    super::writing::complete(&mut meta, last.progress.clone(), last.monotonic_ns);
    meta.exit_code = None;
    meta.recovered = Some(metadata::Recovered {
        reason: reason.clone(),
        last_checkpoint_monotonic_ns: last.monotonic_ns,
    });
    super::writing::symbolize_and_pack(
        recorded,
        &mut meta,
        (recording.backtrace_depth, recording.sample_depth),
        &report,
    )?;
    // The report is whole: the folder goes (symbolize_and_pack removed it).
    let _ = std::fs::remove_dir_all(dir);
    Ok(Recovered {
        report,
        tables: meta.tables.clone(),
        seconds: (last.monotonic_ns - meta.start_monotonic_ns) as f64 / 1e9,
        checkpoints: last.checkpoint,
        ignored_chunks,
        reason,
    })
}

/// The description of the recording in `dir`, if it is one of the
/// caller's that can be recovered: not a flight recorder's ring, and not
/// one a running asys is still writing.
fn recoverable(dir: &Path) -> Result<Recording, RecoverError> {
    check_owner(dir)?;
    let recording = match Recording::read(dir) {
        Ok(r) => r,
        Err(ReportError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(RecoverError::NotARecording(dir.to_path_buf()));
        }
        Err(e) => return Err(e.into()),
    };
    if recording.flight {
        return Err(RecoverError::FlightRing(dir.to_path_buf()));
    }
    if let Some(pid) = folder::pid_of(dir)
        && pid != std::process::id()
        && folder::asys_runs(pid)
    {
        return Err(RecoverError::StillRecording {
            pid,
            dir: dir.to_path_buf(),
        });
    }
    Ok(recording)
}

/// Where the recovered report goes: `options.output`, or by default the
/// report's name beside the folder; it must not exist unless forced.
fn report_path(
    dir: &Path,
    recording: &Recording,
    options: &Options,
) -> Result<PathBuf, RecoverError> {
    // By default the report's name, beside the folder (where the recording
    // made it): only the name is taken from the folder's description.
    let report = match (&options.output, recording.output.file_name()) {
        (Some(o), _) => o.clone(),
        (None, Some(name)) => dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .join(name),
        (None, None) => return Err(RecoverError::NotARecording(dir.to_path_buf())),
    };
    if report.symlink_metadata().is_ok() && !options.force {
        return Err(RecoverError::Exists(report));
    }
    crate::sink::report_path::check_destination(&report, options.force)?;
    Ok(report)
}

/// Every table's chunks of the `checkpoints`, joined, as the recorder
/// would have left them for the symbolize stage; and how many chunks no
/// checkpoint names (removed).
fn join_checkpoints(
    dir: &Path,
    checkpoints: &[Checkpoint],
) -> Result<(Recorded, usize), RecoverError> {
    // Chunks per table, in order.
    let mut tables: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for c in checkpoints {
        for chunk in &c.chunks {
            tables
                .entry(chunk.table.clone())
                .or_default()
                .push((c.checkpoint, chunk.file.clone()));
        }
    }
    // Chunks no checkpoint names were being written when asys stopped:
    // removed first, so that what follows has their space.
    let named: HashSet<&str> = tables.values().flatten().map(|(_, f)| f.as_str()).collect();
    let mut ignored_chunks = 0;
    for e in std::fs::read_dir(dir).map_err(|e| ReportError::io(dir, e))? {
        let e = e.map_err(|e| ReportError::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".chunk.parquet") && !named.contains(name.as_str()) {
            ignored_chunks += 1;
            let _ = std::fs::remove_file(e.path());
        }
    }

    let strings = match tables.remove(journal::SAVED_STRINGS) {
        Some(chunks) => read_strings(dir, &chunks)?,
        None => StringTable::default(),
    };
    let mut rows = BTreeMap::new();
    for (table, chunks) in &tables {
        rows.insert(table.clone(), join_table(dir, table, chunks)?);
    }
    let mut kernels = BTreeSet::new();
    kernels_of(dir, &rows, &mut kernels)?;
    // The members are the tables a report holds (ALL_TABLES): not the raw
    // stacks, which are for the symbolize stage only.
    let members: BTreeMap<String, u64> = rows
        .iter()
        .filter(|(t, _)| asys_report::report::ALL_TABLES.contains(&t.as_str()))
        .map(|(t, n)| (t.clone(), *n))
        .collect();
    let recorded = Recorded {
        dir: dir.to_path_buf(),
        members: members.keys().map(|t| format!("{t}.parquet")).collect(),
        tables: members,
        strings,
        kernels,
        // CUPTI's kernel names are not journaled: such kernels are named by
        // their ids in a recovered report.
        named_kernels: Default::default(),
    };
    Ok((recorded, ignored_chunks))
}

/// The checkpoints up to the first one with a chunk that does not open as
/// Parquet or does not hold the rows the journal says (a damaged disk):
/// nothing after it is used. A chunk that is missing is fine only if its
/// table was already joined (asys stopped while finishing).
fn usable(dir: &Path, checkpoints: Vec<Checkpoint>) -> Result<Vec<Checkpoint>, RecoverError> {
    let mut out = Vec::with_capacity(checkpoints.len());
    'next: for c in checkpoints {
        for chunk in &c.chunks {
            let path = dir.join(&chunk.file);
            if !path.exists() {
                if dir.join(format!("{}.parquet", chunk.table)).exists() {
                    continue;
                }
                return Err(RecoverError::Missing {
                    dir: dir.to_path_buf(),
                    file: chunk.file.clone(),
                    checkpoint: c.checkpoint,
                });
            }
            match join::rows_of(&path, &chunk.table) {
                Ok(n) if n == chunk.rows => {}
                _ => break 'next,
            }
        }
        out.push(c);
    }
    Ok(out)
}

/// Joins a table's chunks into `TABLE.parquet`; if asys stopped while
/// finishing, the table may already be joined (its chunks gone).
fn join_table(dir: &Path, table: &str, chunks: &[(u64, String)]) -> Result<u64, RecoverError> {
    let files: Vec<String> = chunks.iter().map(|(_, f)| f.clone()).collect();
    if files.iter().all(|f| dir.join(f).exists()) {
        let joined = dir.join(format!("{table}.parquet"));
        // A join that was cut short is redone from the chunks.
        let _ = std::fs::remove_file(&joined);
        // Row groups are copied as they are (recover does not know every
        // table's encodings); a recovered report may hold small ones.
        return Ok(join::join(dir, &files, table, None)?);
    }
    Ok(join::rows_of(&dir.join(format!("{table}.parquet")), table)?)
}

/// The string table from its chunks (each holds the strings interned since
/// the previous one, with their ids); they stay until the report is written.
fn read_strings(dir: &Path, chunks: &[(u64, String)]) -> Result<StringTable, RecoverError> {
    use schema::strings as s;
    let mut values: Vec<(u32, String)> = Vec::new();
    for (_, file) in chunks {
        let path = dir.join(file);
        let t = s::open_path(&path)?
            .ok_or_else(|| ReportError::io(&path, std::io::ErrorKind::NotFound.into()))?;
        for b in t.scan(&[s::ID, s::VALUE], None)? {
            let b = b?;
            let v = s::View(&b);
            let (ids, vals) = (v.id()?, v.value()?);
            for (i, &id) in ids.iter().enumerate() {
                values.push((id, vals.value(i).to_owned()));
            }
        }
    }
    values.sort_by_key(|(id, _)| *id);
    // Ids are 0, 1, 2, ... with none missing: a row names a string by it.
    let mut out = Vec::with_capacity(values.len());
    for (id, v) in values {
        if id as usize == out.len() {
            out.push(v);
        }
    }
    Ok(StringTable::from_values(out))
}

/// The (pid, kernel address) pairs of the joined API calls (the launches)
/// and device activity (the kernels run), for the symbolize stage: each
/// table is read only where the recording has it.
fn kernels_of(
    dir: &Path,
    rows: &BTreeMap<String, u64>,
    out: &mut BTreeSet<(u32, u64)>,
) -> Result<(), ReportError> {
    use schema::{activity as ac, api};
    if rows.contains_key(schema::HGGC_API) {
        for b in api::scan_file(dir, schema::HGGC_API, &[api::PID, api::KERNEL_ADDR])? {
            let b = b?;
            let v = api::View(&b);
            insert_kernels(v.pid()?, v.kernel_addr()?, out);
        }
    }
    if rows.contains_key(ac::NAME) {
        for b in ac::scan_file(dir, &[ac::PID, ac::KERNEL_ADDR])? {
            let b = b?;
            let v = ac::View(&b);
            insert_kernels(v.pid()?, v.kernel_addr()?, out);
        }
    }
    Ok(())
}

/// The rows' (pid, kernel address) pairs, where a row has an address.
fn insert_kernels(pids: &[u32], addrs: &arrow::array::UInt64Array, out: &mut BTreeSet<(u32, u64)>) {
    use arrow::array::Array;
    for (i, &pid) in pids.iter().enumerate() {
        if addrs.is_valid(i) {
            out.insert((pid, addrs.value(i)));
        }
    }
}
