//! Packing tables into one file and finding them again.
//!
//! The container is a plain (uncompressed) tar: `tar xf r.asysrep` gives the
//! Parquet files to DuckDB or pyarrow, and a reader can read a member in place
//! from its offset without unpacking.
use std::{
    collections::BTreeMap,
    fs::File,
    io::{BufWriter, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

use super::{ReportError, metadata::Metadata};

pub const METADATA_MEMBER: &str = "metadata.json";

/// Writes `members` (files in `dir`) and the metadata into `dest` atomically:
/// the tar is written to `dest.tmp`, synced, and renamed over `dest`.
pub fn pack(
    dir: &Path,
    members: &[String],
    meta: &Metadata,
    dest: &Path,
) -> Result<(), ReportError> {
    let tmp = dest.with_extension("asysrep.tmp");
    let result = (|| {
        let file = File::create(&tmp).map_err(|e| ReportError::io(&tmp, e))?;
        let mut tar = tar::Builder::new(BufWriter::new(file));
        let json = serde_json::to_vec_pretty(meta)?;
        let mut header = tar::Header::new_gnu();
        header.set_size(json.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, METADATA_MEMBER, json.as_slice())
            .map_err(|e| ReportError::io(&tmp, e))?;
        for m in members {
            let path = dir.join(m);
            let mut f = File::open(&path).map_err(|e| ReportError::io(&path, e))?;
            tar.append_file(m, &mut f)
                .map_err(|e| ReportError::io(&path, e))?;
        }
        let mut out = tar.into_inner().map_err(|e| ReportError::io(&tmp, e))?;
        out.flush().map_err(|e| ReportError::io(&tmp, e))?;
        let file = out
            .into_inner()
            .map_err(|e| ReportError::io(&tmp, e.into_error()))?;
        file.sync_all().map_err(|e| ReportError::io(&tmp, e))?;
        std::fs::rename(&tmp, dest).map_err(|e| ReportError::io(dest, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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
    type T = std::io::Take<File>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let mut f = self.file.try_clone()?;
        f.seek(SeekFrom::Start(self.offset + start))?;
        Ok(f.take(self.len.saturating_sub(start)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; length];
        self.file.read_exact_at(&mut buf, self.offset + start)?;
        Ok(buf.into())
    }
}
