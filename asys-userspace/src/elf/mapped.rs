//! A file's bytes, mapped read-only instead of read whole: looking for a
//! runtime's exported functions, or unwinding a sample through a binary,
//! touches its headers, symbol tables and `.eh_frame` only, and system-wide a
//! machine's processes map binaries of hundreds of MB (a compiler's driver
//! library, debug builds). Reading each whole took seconds at the start of a
//! system-wide recording and again in the symbolize stage.
use std::{ops::Deref, path::Path};

use asys_report::untrusted::open::Policy;

/// The bytes of a file (mapped), or of a copy held in memory.
pub enum FileBytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl FileBytes {
    /// Maps the file at `path` read-only, opened under `policy` (the one
    /// way asys opens a file another user may have put there: without
    /// blocking, links only where the policy allows, regular files within
    /// its size). An empty file reads as no bytes: an empty mapping is
    /// refused by the kernel.
    pub fn map(path: &Path, policy: &Policy) -> std::io::Result<Self> {
        let opened = asys_report::untrusted::open::open(path, policy).map_err(|e| match e {
            asys_report::untrusted::open::OpenError::Io(_, io) => io,
            other => std::io::Error::other(other.to_string()),
        })?;
        Self::map_file(&opened.file, opened.len)
    }

    /// Maps an opened regular file of `len` bytes.
    pub fn map_file(file: &std::fs::File, len: u64) -> std::io::Result<Self> {
        if len == 0 {
            return Ok(Self::Owned(Vec::new()));
        }
        // SAFETY: a private read-only mapping of a regular file; its
        // contents change only if someone rewrites the file in place while
        // asys reads it. Binaries and libraries are replaced by renaming a
        // new file over the old one (which leaves this mapping on the old
        // inode), and the kernel itself keeps the pages of a mapped
        // executable; a file truncated under asys would fault it (SIGBUS),
        // as it would fault every process running that code.
        let map = unsafe { memmap2::Mmap::map(file) }?;
        Ok(Self::Mapped(map))
    }
}

impl Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped(m) => m,
            Self::Owned(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FileBytes;

    #[test]
    fn a_mapped_file_reads_as_its_bytes_and_an_empty_one_as_none() {
        let dir = std::env::temp_dir().join(format!("asys-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (full, empty) = (dir.join("full"), dir.join("empty"));
        std::fs::write(&full, b"\x7fELF and more").unwrap();
        std::fs::write(&empty, b"").unwrap();
        let p = &asys_report::untrusted::open::Policy::MAPPED;
        assert_eq!(&*FileBytes::map(&full, p).unwrap(), b"\x7fELF and more");
        assert!(FileBytes::map(&empty, p).unwrap().is_empty());
        assert!(FileBytes::map(&dir.join("missing"), p).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
