//! Packing tables into one file and finding them again.
//!
//! The container is a plain (uncompressed) tar: `tar xf r.asysrep` gives the
//! Parquet files to DuckDB or pyarrow, and a reader can read a member in place
//! from its offset without unpacking.
use std::{
    collections::BTreeMap,
    fs::File,
    io::{Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

use super::{ReportError, metadata::Metadata};

pub const METADATA_MEMBER: &str = "metadata.json";

/// Writes the metadata and `members` (files in `dir`) into `dest` atomically:
/// the tar is written to `dest.tmp`, synced, and renamed over `dest`.
///
/// Each member is copied in the kernel (`copy_file_range`) and deleted as
/// soon as it is in the archive, so packing needs at most one member's worth
/// of extra disk, not a second copy of the whole report.
pub fn pack(
    dir: &Path,
    members: &[String],
    meta: &Metadata,
    dest: &Path,
) -> Result<(), ReportError> {
    let tmp = dest.with_extension("asysrep.tmp");
    let result = (|| {
        let mut out = create_exclusive(&tmp)?;
        let json = serde_json::to_vec_pretty(meta)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        append(
            &mut out,
            METADATA_MEMBER,
            json.len() as u64,
            now,
            json.as_slice(),
        )
        .map_err(|e| ReportError::io(&tmp, e))?;
        for m in members {
            let path = dir.join(m);
            let mut f = File::open(&path).map_err(|e| ReportError::io(&path, e))?;
            let len = f.metadata().map_err(|e| ReportError::io(&path, e))?.len();
            append(&mut out, m, len, now, &mut f).map_err(|e| ReportError::io(&tmp, e))?;
            drop(f);
            std::fs::remove_file(&path).map_err(|e| ReportError::io(&path, e))?;
        }
        // The end of a tar archive: two zero blocks.
        out.write_all(&[0; 1024])
            .map_err(|e| ReportError::io(&tmp, e))?;
        out.sync_all().map_err(|e| ReportError::io(&tmp, e))?;
        std::fs::rename(&tmp, dest).map_err(|e| ReportError::io(dest, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `path` afresh (O_CREAT|O_EXCL|O_NOFOLLOW): never opens a file or
/// follows a link someone else put there. A leftover of an earlier run is
/// unlinked first (unlink removes a link itself, never its target).
fn create_exclusive(path: &Path) -> Result<File, ReportError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ReportError::io(path, e)),
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o644)
        .open(path)
        .map_err(|e| ReportError::io(path, e))
}

/// Appends one member: its header, `len` bytes of `data`, and the padding to
/// the next 512-byte block.
fn append(
    out: &mut File,
    name: &str,
    len: u64,
    mtime: u64,
    data: impl Read,
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_path(name)?;
    header.set_size(len);
    header.set_mode(0o644);
    header.set_mtime(mtime);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    out.write_all(header.as_bytes())?;
    // File to file, std::io::copy uses copy_file_range: no copy through here.
    let copied = std::io::copy(&mut data.take(len), out)?;
    if copied != len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{name} changed while it was packed"),
        ));
    }
    let pad = (512 - len % 512) % 512;
    out.write_all(&[0; 512][..pad as usize])
}

/// An opened report: its metadata and where each member lies in the file.
pub struct Container {
    pub path: PathBuf,
    pub metadata: Metadata,
    file: Arc<File>,
    members: BTreeMap<String, (u64, u64)>,
}

impl Container {
    pub fn open(path: &Path) -> Result<Self, ReportError> {
        let not_report = || ReportError::NotAReport(path.to_path_buf());
        let file = File::open(path).map_err(|e| ReportError::io(path, e))?;
        let mut members = BTreeMap::new();
        let mut archive = tar::Archive::new(&file);
        let entries = archive.entries().map_err(|_| not_report())?;
        for entry in entries {
            let entry = entry.map_err(|_| not_report())?;
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            members.insert(name, (entry.raw_file_position(), entry.size()));
        }
        let &(offset, size) = members.get(METADATA_MEMBER).ok_or_else(not_report)?;
        // Our metadata is a few KiB: a huge size is not a report of ours
        // (and must not become a huge allocation).
        if size > 64 << 20 {
            return Err(not_report());
        }
        let mut json = vec![0; size as usize];
        let mut f = &file;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| ReportError::io(path, e))?;
        f.read_exact(&mut json)
            .map_err(|e| ReportError::io(path, e))?;
        let metadata: Metadata = serde_json::from_slice(&json).map_err(|_| not_report())?;
        if metadata.format != super::metadata::FORMAT {
            return Err(not_report());
        }
        if metadata.schema_version != super::schema::SCHEMA_VERSION {
            return Err(ReportError::SchemaVersion {
                path: path.to_path_buf(),
                found: metadata.schema_version,
                supported: super::schema::SCHEMA_VERSION,
            });
        }
        Ok(Self {
            path: path.to_path_buf(),
            metadata,
            file: Arc::new(file),
            members,
        })
    }

    /// The Parquet file of `table`, read in place; None if the report has none.
    pub fn table(&self, table: &str) -> Option<MemberReader> {
        let &(offset, len) = self.members.get(&format!("{table}.parquet"))?;
        Some(MemberReader {
            file: self.file.clone(),
            offset,
            len,
        })
    }
}

/// A window onto one tar member, for the Parquet reader.
#[derive(Clone)]
pub struct MemberReader {
    file: Arc<File>,
    offset: u64,
    len: u64,
}

impl Length for MemberReader {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for MemberReader {
    type T = Pread;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let start = self.offset + start.min(self.len);
        Ok(Pread::new(self.file.clone(), start, self.offset + self.len))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; length];
        self.file.read_exact_at(&mut buf, self.offset + start)?;
        Ok(buf.into())
    }
}

/// Reads a file from `pos` to `end` with positioned reads: readers on several
/// threads share one descriptor (a dup'd descriptor would share its offset).
pub struct Pread {
    file: Arc<File>,
    pos: u64,
    end: u64,
}

impl Pread {
    pub fn new(file: Arc<File>, pos: u64, end: u64) -> Self {
        Self { file, pos, end }
    }
}

impl Read for Pread {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let left = self.end.saturating_sub(self.pos);
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}
