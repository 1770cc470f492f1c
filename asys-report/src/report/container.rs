//! Packing tables into one file and finding them again.
//!
//! The container is a plain (uncompressed) tar: `tar xf r.asysrep` gives the
//! Parquet files to DuckDB or pyarrow, and a reader can read a member in place
//! from its offset without unpacking.
use std::{
    collections::BTreeMap,
    fs::File,
    io::{Read, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

use super::{
    ReportError, decode_guard,
    metadata::{MemberInfo, Metadata},
};

pub const METADATA_MEMBER: &str = "metadata.json";

/// The CRC-32 of `metadata.json` (8 hex digits and a newline), right after
/// it: the metadata cannot hold its own checksum, and a changed byte in it
/// (a row count, a member's size) must be seen as damage like any other.
pub const METADATA_CRC_MEMBER: &str = "metadata.json.crc32";

/// Writes the metadata and `members` (files in `dir`) into `dest` atomically:
/// the tar is written to `dest.tmp`, synced, and renamed over `dest`
/// ([`super::files::Replacement`]).
///
/// Each member is copied in the kernel (`copy_file_range`) and deleted as
/// soon as it is in the archive, so packing needs at most one member's worth
/// of extra disk, not a second copy of the whole report. The metadata, which
/// comes first, records every member's size and checksum: each member is
/// read once before it is copied (see [`checksum`] for the cost).
pub fn pack(
    dir: &Path,
    members: &[String],
    meta: &Metadata,
    dest: &Path,
) -> Result<(), ReportError> {
    let replacement = super::files::Replacement::of(dest)
        .named(dest.with_extension("asysrep.tmp"))
        .mode(0o644)
        .synced();
    let tmp = replacement.tmp();
    replacement
        .write(|out| {
            let mut meta = meta.clone();
            meta.members = BTreeMap::new();
            for m in members {
                let path = dir.join(m);
                let f = File::open(&path).map_err(|e| ReportError::io(&path, e))?;
                let len = f.metadata().map_err(|e| ReportError::io(&path, e))?.len();
                let crc32 = checksum(&f, 0, len).map_err(|e| ReportError::io(&path, e))?;
                meta.members
                    .insert(m.clone(), MemberInfo { bytes: len, crc32 });
            }
            let json = serde_json::to_vec_pretty(&meta)?;
            let crc = format!("{:08x}\n", crc32fast::hash(&json));
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            for (name, bytes) in [
                (METADATA_MEMBER, &json[..]),
                (METADATA_CRC_MEMBER, crc.as_bytes()),
            ] {
                append(out, name, bytes.len() as u64, now, bytes)
                    .map_err(|e| ReportError::io(tmp, e))?;
            }
            for m in members {
                let path = dir.join(m);
                let mut f = File::open(&path).map_err(|e| ReportError::io(&path, e))?;
                let len = meta.members.get(m).map_or(0, |i| i.bytes);
                append(out, m, len, now, &mut f).map_err(|e| ReportError::io(tmp, e))?;
                drop(f);
                std::fs::remove_file(&path).map_err(|e| ReportError::io(&path, e))?;
            }
            // The end of a tar archive: two zero blocks.
            out.write_all(&[0; 1024])
                .map_err(|e| ReportError::io(tmp, e))
        })
        .map_err(|e| e.or_io(|path, source| ReportError::io(&path, source)))
}

/// CRC-32 of `len` bytes of `file` from `offset`, read with positioned reads
/// in 1 MiB pieces (crc32fast runs at several GB/s with SSE 4.2 and
/// PCLMULQDQ: the read costs more than the sum).
pub fn checksum(file: &File, offset: u64, len: u64) -> std::io::Result<u32> {
    let mut hasher = crc32fast::Hasher::new();
    each_piece(file, offset, len, |piece| {
        hasher.update(piece);
        true
    })?;
    Ok(hasher.finalize())
}

/// Whether `len` bytes of `file` from `offset` are all zero (tar padding).
fn all_zero(file: &File, offset: u64, len: u64) -> std::io::Result<bool> {
    each_piece(file, offset, len, |piece| piece.iter().all(|&b| b == 0))
}

/// Feeds `len` bytes from `offset` to `f` piece by piece, stopping early
/// when it says false; gives what it last said. A file shorter than that is
/// an UnexpectedEof error.
fn each_piece(
    file: &File,
    mut offset: u64,
    len: u64,
    mut f: impl FnMut(&[u8]) -> bool,
) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    const PIECE: u64 = 1 << 20;
    let mut buf = vec![0; PIECE.min(len) as usize];
    let end = offset.saturating_add(len);
    while offset < end {
        let n = (end - offset).min(PIECE) as usize;
        file.read_exact_at(&mut buf[..n], offset)?;
        if !f(&buf[..n]) {
            return Ok(false);
        }
        offset += n as u64;
    }
    Ok(true)
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
    /// What readers of the report see of its timed tables (all when None);
    /// see [`super::window`].
    pub window: Option<Arc<super::window::Window>>,
    /// Tables this report cannot know of (one read back from another
    /// format): reading one is an error, where an absent table of a report
    /// reads as empty.
    pub unavailable: &'static [&'static str],
    file: Arc<File>,
    members: BTreeMap<String, Member>,
}

/// Where a member's bytes lie in the file.
#[derive(Debug, Clone, Copy)]
struct Member {
    offset: u64,
    size: u64,
}

/// The metadata is a few KiB: a larger one is damage (and must not become a
/// large allocation).
const METADATA_MAX: u64 = 64 << 20;

impl Container {
    /// Opens a report and checks it whole before anything is read from it:
    /// a regular file (a FIFO or a device is never read, so never blocks),
    /// a tar whose members are those the metadata lists, each of the size
    /// and checksum it says, and every table holding the rows it says.
    pub fn open(path: &Path) -> Result<Self, ReportError> {
        let file = open_regular(path)?;
        let len = file.metadata().map_err(|e| ReportError::io(path, e))?.len();
        if len == 0 {
            return Err(ReportError::NotAReport(path.to_path_buf()));
        }
        let (members, end) = list_members(&file, path, len)?;
        let report = Self::with_metadata(file, path, members)?;
        report.check_members(len, end)?;
        report.check_rows()?;
        Ok(report)
    }

    /// Reads `metadata.json` (the first member) and checks it is ours.
    fn with_metadata(
        file: File,
        path: &Path,
        members: Vec<(String, Member)>,
    ) -> Result<Self, ReportError> {
        let not_report = || ReportError::NotAReport(path.to_path_buf());
        let damaged = |p: String| ReportError::damaged(path, p);
        let Some((first, meta)) = members.first() else {
            return Err(not_report());
        };
        if first != METADATA_MEMBER {
            return Err(if members.iter().any(|(n, _)| n == METADATA_MEMBER) {
                damaged(format!("{METADATA_MEMBER} is not its first member"))
            } else {
                not_report()
            });
        }
        if meta.size > METADATA_MAX {
            return Err(damaged(format!(
                "{METADATA_MEMBER} is {} bytes, more than any report's",
                meta.size
            )));
        }
        let json = read_member(&file, path, *meta)?;
        let metadata: Metadata = serde_json::from_slice(&json)
            .map_err(|e| damaged(format!("{METADATA_MEMBER} cannot be read ({e})")))?;
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
        let mut by_name = BTreeMap::new();
        for (name, m) in members {
            if by_name.insert(name.clone(), m).is_some() {
                return Err(damaged(format!("it holds {name} twice")));
            }
        }
        let report = Self {
            path: path.to_path_buf(),
            metadata,
            window: None,
            unavailable: &[],
            file: Arc::new(file),
            members: by_name,
        };
        // Older reports list no members and have no metadata checksum. A
        // checksum member is checked whenever it is there: a damaged
        // `members` key must not turn the check off.
        if !report.metadata.members.is_empty() || report.members.contains_key(METADATA_CRC_MEMBER) {
            report.check_metadata_crc(&json)?;
        }
        Ok(report)
    }

    fn damaged(&self, problem: String) -> ReportError {
        ReportError::damaged(&self.path, problem)
    }

    fn check_metadata_crc(&self, json: &[u8]) -> Result<(), ReportError> {
        let Some(&m) = self.members.get(METADATA_CRC_MEMBER) else {
            return Err(self.damaged(format!("{METADATA_CRC_MEMBER} is missing")));
        };
        if m.size > 64 {
            return Err(self.damaged(format!("{METADATA_CRC_MEMBER} is {} bytes", m.size)));
        }
        let text = read_member(&self.file, &self.path, m)?;
        let written = std::str::from_utf8(&text)
            .ok()
            .and_then(|t| u32::from_str_radix(t.trim(), 16).ok());
        match written {
            Some(crc) if crc == crc32fast::hash(json) => Ok(()),
            Some(_) => Err(self.damaged(format!(
                "{METADATA_MEMBER} does not match its checksum (its bytes were changed)"
            ))),
            None => Err(self.damaged(format!("{METADATA_CRC_MEMBER} is not a checksum"))),
        }
    }

    /// The members are exactly those the metadata lists, whole, and the
    /// file ends with the tar end marker; every byte between members is the
    /// zero padding tar puts there.
    fn check_members(&self, len: u64, end: u64) -> Result<(), ReportError> {
        let listed = &self.metadata.members;
        for (name, m) in &self.members {
            let padded = m.size.div_ceil(512).saturating_mul(512);
            if m.offset.saturating_add(m.size) <= len && m.offset.saturating_add(padded) > len {
                return Err(self.damaged(format!(
                    "it ends inside the padding after {name} (truncated)"
                )));
            }
            if m.offset.saturating_add(padded) > len {
                return Err(self.damaged(format!(
                    "{name} is cut short: {} of its {} bytes are in the file (truncated)",
                    len.saturating_sub(m.offset).min(m.size),
                    m.size
                )));
            }
            let padding_ok = all_zero(&self.file, m.offset + m.size, padded - m.size)
                .map_err(|e| ReportError::io(&self.path, e))?;
            if !padding_ok {
                return Err(self.damaged(format!("the padding after {name} is not zero")));
            }
        }
        if listed.is_empty() {
            return self.check_end(len, end);
        }
        for (name, info) in listed {
            let Some(m) = self.members.get(name) else {
                return Err(self.damaged(format!(
                    "{name} is missing (the metadata lists it, {} bytes)",
                    info.bytes
                )));
            };
            if m.size != info.bytes {
                return Err(self.damaged(format!(
                    "{name} is {} bytes, the metadata says {}",
                    m.size, info.bytes
                )));
            }
        }
        if let Some(extra) = self.members.keys().find(|n| {
            !listed.contains_key(*n) && *n != METADATA_MEMBER && *n != METADATA_CRC_MEMBER
        }) {
            return Err(self.damaged(format!(
                "it holds {extra}, which its metadata does not list"
            )));
        }
        self.check_end(len, end)?;
        for (name, info) in listed {
            let m = self.members[name];
            let crc = checksum(&self.file, m.offset, m.size)
                .map_err(|e| ReportError::io(&self.path, e))?;
            if crc != info.crc32 {
                return Err(self.damaged(format!(
                    "{name} does not match its checksum (its bytes were changed)"
                )));
            }
        }
        Ok(())
    }

    /// The two zero blocks that end a tar, right after the last member.
    fn check_end(&self, len: u64, end: u64) -> Result<(), ReportError> {
        let whole = end.saturating_add(1024) <= len
            && all_zero(&self.file, end, 1024).map_err(|e| ReportError::io(&self.path, e))?;
        if whole {
            Ok(())
        } else {
            Err(self.damaged(
                "it does not end with the tar end marker (it was truncated or overwritten)".into(),
            ))
        }
    }

    /// Every table the metadata counts rows for has its member, and each
    /// member's footer holds that many rows.
    fn check_rows(&self) -> Result<(), ReportError> {
        for (table, &rows) in &self.metadata.tables {
            let member = format!("{table}.parquet");
            if !self.members.contains_key(&member) {
                if rows > 0 {
                    return Err(self.damaged(format!(
                        "{member} is missing, the metadata says {table} has {rows} rows"
                    )));
                }
                continue;
            }
            let Some(t) = super::reader::open(self, table)? else {
                continue;
            };
            let found = t.num_rows();
            if found != rows {
                return Err(self.damaged(format!(
                    "{table} holds {found} rows, the metadata says {rows}"
                )));
            }
        }
        Ok(())
    }

    /// The names of the tables the report holds, sorted.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.members
            .keys()
            .filter_map(|m| m.strip_suffix(".parquet"))
    }

    /// The Parquet file of `table`, read in place; None if the report has none.
    pub fn table(&self, table: &str) -> Option<MemberReader> {
        let m = *self.members.get(&format!("{table}.parquet"))?;
        Some(MemberReader {
            file: self.file.clone(),
            offset: m.offset,
            len: m.size,
        })
    }

    /// A report of one table (`file` is its Parquet bytes) with default
    /// metadata and none of `open`'s checks: the fuzz targets hand the table
    /// readers what the checks would have refused.
    #[cfg(fuzzing)]
    pub fn unchecked(file: File, path: &Path, table: &str, len: u64) -> Self {
        let metadata = Metadata {
            format: super::metadata::FORMAT.into(),
            schema_version: super::schema::SCHEMA_VERSION,
            ..Default::default()
        };
        Self {
            path: path.to_path_buf(),
            metadata,
            window: None,
            unavailable: &[],
            file: Arc::new(file),
            members: BTreeMap::from([(
                format!("{table}.parquet"),
                Member {
                    offset: 0,
                    size: len,
                },
            )]),
        }
    }

    /// The warning a reader prints first for a recovered partial report.
    pub fn recovered_warning(&self) -> Option<String> {
        self.metadata.recovered_warning(&self.path)
    }
}

/// Opens `path` for reading if it is a regular file. O_NONBLOCK makes the
/// open of a FIFO return at once (without a writer it would wait for one);
/// fstat then tells what it is.
fn open_regular(path: &Path) -> Result<File, ReportError> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| ReportError::io(path, e))?;
    let kind = file
        .metadata()
        .map_err(|e| ReportError::io(path, e))?
        .file_type();
    let what = if kind.is_file() {
        return Ok(file);
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(ReportError::NotAFile {
        path: path.to_path_buf(),
        what,
    })
}

/// The tar's members in file order, and where the last one's padding ends.
/// A file that is no tar from its first header is not a report; one that
/// breaks after its first member is damaged.
fn list_members(
    file: &File,
    path: &Path,
    len: u64,
) -> Result<(Vec<(String, Member)>, u64), ReportError> {
    let listed = decode_guard::decoding(|| {
        let mut members = Vec::new();
        let mut end = 0u64;
        let mut archive = tar::Archive::new(file);
        let entries = match archive.entries_with_seek() {
            Ok(e) => e,
            Err(e) => return (members, end, Some(e)),
        };
        for entry in entries {
            match entry {
                Ok(entry) => {
                    let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
                    let m = Member {
                        offset: entry.raw_file_position(),
                        size: entry.size(),
                    };
                    end = m
                        .offset
                        .saturating_add(m.size.div_ceil(512).saturating_mul(512));
                    members.push((name, m));
                    // Past the end of the file: the rest cannot be read.
                    if end > len {
                        break;
                    }
                }
                Err(e) => return (members, end, Some(e)),
            }
        }
        (members, end, None)
    });
    let Ok((members, end, error)) = listed else {
        return Err(ReportError::damaged(path, "its tar headers cannot be read"));
    };
    match (error, members.is_empty()) {
        (None, _) => Ok((members, end)),
        (Some(_), true) => Err(ReportError::NotAReport(path.to_path_buf())),
        (Some(e), false) => {
            let last = members.last().map_or("", |(n, _)| n.as_str());
            // A member that runs past the end is named by check_members.
            if end > len {
                return Ok((members, end));
            }
            Err(ReportError::damaged(
                path,
                format!("its tar headers after {last} cannot be read ({e})"),
            ))
        }
    }
}

fn read_member(file: &File, path: &Path, m: Member) -> Result<Vec<u8>, ReportError> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; m.size as usize];
    file.read_exact_at(&mut buf, m.offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ReportError::damaged(path, "it is cut short inside its metadata (truncated)")
        } else {
            ReportError::io(path, e)
        }
    })?;
    Ok(buf)
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
        // A damaged footer can ask for any range: one outside the member is
        // an error, before it becomes an allocation of that size.
        let end = start.checked_add(length as u64).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "{length} bytes at {start} are past the end of a {}-byte table",
                self.len
            )));
        }
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
