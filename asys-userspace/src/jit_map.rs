//! JIT symbol maps: the `/tmp/perf-PID.map` files that JIT compilers write
//! for perf (Python 3.12 `-X perf`, Node `--perf-basic-prof`, Java's
//! perf-map-agent), one `START SIZE name` line (hex) per compiled function.
//! They name code in anonymous executable mappings, which no file describes.
//!
//! The file belongs to the traced process, in a world-writable folder, and
//! asys reads it as root: it is opened without following a link, must be a
//! regular file with one name (a hard link could make any file look like a
//! map), owned by the process's user while the process is there to ask, and
//! is read only up to [`MAX_BYTES`].
use std::{
    ffi::CString,
    fs::File,
    io::Read,
    os::{fd::FromRawFd, unix::fs::MetadataExt},
    path::{Path, PathBuf},
};

/// Larger maps are read up to here (a long-running JIT writes one line per
/// compiled function, and never removes any).
pub const MAX_BYTES: u64 = 64 << 20;

/// One compiled function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitSymbol {
    pub start: u64,
    pub size: u64,
    pub name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum JitMapError {
    #[error("{0}: {1}")]
    Open(PathBuf, std::io::Error),
    #[error("{0}: not a regular file with a single name; not read")]
    NotPlainFile(PathBuf),
    #[error("{path}: owned by uid {owner}, not by the process's uid {process}; not read")]
    ForeignOwner {
        path: PathBuf,
        owner: u32,
        process: u32,
    },
}

/// Where process `pid` writes its perf map.
pub fn perf_map_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

/// The process's user, while /proc still has it (a process already reaped
/// cannot be asked: the caller keeps what a scan saw).
pub fn process_uid(pid: u32) -> Option<u32> {
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

/// The symbols of `pid`'s perf map; None when it has none. `owner`: the
/// process's user, whom the file must belong to (or root); None when not
/// known, and then the file is taken on the other checks.
pub fn read_perf_map(pid: u32, owner: Option<u32>) -> Result<Option<Vec<JitSymbol>>, JitMapError> {
    let Some(bytes) = read_owned(&perf_map_path(pid), owner)? else {
        return Ok(None);
    };
    Ok(Some(parse_perf_map(&String::from_utf8_lossy(&bytes))))
}

/// The code loads of the jitdump at `path`; None when there is none.
/// `owner` as for [`read_perf_map`].
pub fn read_jitdump(
    path: &Path,
    owner: Option<u32>,
) -> Result<Option<Vec<JitSymbol>>, JitMapError> {
    let Some(bytes) = read_owned(path, owner)? else {
        return Ok(None);
    };
    Ok(Some(parse_jitdump(&bytes)))
}

/// The jitdump file name a JIT gives process `pid` (perf's convention:
/// `jit-PID.dump`, in a folder of the JIT's choosing, mapped executable so
/// that perf finds it).
pub fn jitdump_name(pid: u32) -> String {
    format!("jit-{pid}.dump")
}

/// `JiTD` in the byte order of the writer (little-endian here).
const JITDUMP_MAGIC: u32 = 0x4A69_5444;
const JIT_CODE_LOAD: u32 = 0;
const JIT_CODE_MOVE: u32 = 1;

/// Parses a jitdump (perf's `jitdump-specification.txt`): a header
/// (magic, version, its own size, ...), then records, each `id`,
/// `total_size`, `timestamp`. JIT_CODE_LOAD (pid, tid, vma, code_addr,
/// code_size, code_index, the NUL-terminated name, the code) names
/// `code_size` bytes at `code_addr`; JIT_CODE_MOVE moves code loaded
/// before (by `code_index`). Other records are skipped; a record cut short
/// (the JIT was writing it) ends the file.
pub fn parse_jitdump(bytes: &[u8]) -> Vec<JitSymbol> {
    let u32_at = |o: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            bytes.get(o..o.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let u64_at = |o: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            bytes.get(o..o.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    let mut out = Vec::new();
    if u32_at(0) != Some(JITDUMP_MAGIC) {
        return out;
    }
    // Where each code index's newest code is, in `out` (for moves).
    let mut by_index: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let Some(mut at) = u32_at(8).map(|s| s as usize) else {
        return out;
    };
    // Record header: id, total_size (u32 each), timestamp (u64).
    while let (Some(id), Some(size)) = (u32_at(at), u32_at(at.saturating_add(4))) {
        let size = size as usize;
        let Some(end) = at
            .checked_add(size)
            .filter(|&e| size >= 16 && e <= bytes.len())
        else {
            break;
        };
        let body = at + 16;
        match id {
            JIT_CODE_LOAD => {
                // pid, tid (u32), vma, code_addr, code_size, code_index (u64).
                let (Some(addr), Some(len), Some(index)) =
                    (u64_at(body + 16), u64_at(body + 24), u64_at(body + 32))
                else {
                    break;
                };
                let name = bytes
                    .get(body + 40..end)
                    .and_then(|n| n.split(|&b| b == 0).next())
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .unwrap_or_default();
                if len > 0 && !name.is_empty() {
                    by_index.insert(index, out.len());
                    out.push(JitSymbol {
                        start: addr,
                        size: len,
                        name,
                    });
                }
            }
            JIT_CODE_MOVE => {
                // pid, tid (u32), vma, old_code_addr, new_code_addr,
                // code_size, code_index (u64).
                if let (Some(new), Some(index)) = (u64_at(body + 24), u64_at(body + 40))
                    && let Some(&i) = by_index.get(&index)
                {
                    let moved = JitSymbol {
                        start: new,
                        ..out[i].clone()
                    };
                    by_index.insert(index, out.len());
                    out.push(moved);
                }
            }
            _ => {}
        }
        at = end;
    }
    out
}

/// The bytes of `path` (at most [`MAX_BYTES`]), after the checks above;
/// None when there is no such file.
fn read_owned(path: &Path, owner: Option<u32>) -> Result<Option<Vec<u8>>, JitMapError> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| JitMapError::Open(path.into(), std::io::Error::other(e)))?;
    // O_NOFOLLOW: a link planted in /tmp is refused, not followed;
    // O_NONBLOCK: a FIFO planted there cannot stall the recording.
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::NotFound {
            return Ok(None);
        }
        return Err(JitMapError::Open(path.into(), e));
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    let meta = file
        .metadata()
        .map_err(|e| JitMapError::Open(path.into(), e))?;
    if !meta.file_type().is_file() || meta.nlink() != 1 {
        return Err(JitMapError::NotPlainFile(path.into()));
    }
    if let Some(process) = owner
        && meta.uid() != process
        && meta.uid() != 0
    {
        return Err(JitMapError::ForeignOwner {
            path: path.into(),
            owner: meta.uid(),
            process,
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| JitMapError::Open(path.into(), e))?;
    Ok(Some(bytes))
}

/// Parses perf-map text: `START SIZE name`, both numbers hex (with or
/// without `0x`), the name the rest of the line (it may hold spaces).
/// Lines that do not parse are skipped, as perf does; so is a last line
/// cut short while the JIT was writing it (no newline: its name may be
/// cut).
pub fn parse_perf_map(text: &str) -> Vec<JitSymbol> {
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    complete
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let (start, rest) = line.split_once(' ')?;
            let (size, name) = rest.trim_start().split_once(' ')?;
            let (start, size) = (hex(start)?, hex(size)?);
            let name = name.trim();
            (size > 0 && !name.is_empty()).then(|| JitSymbol {
                start,
                size,
                name: name.to_string(),
            })
        })
        .collect()
}

/// A process's JIT symbols, for naming addresses.
#[derive(Debug, Default, Clone)]
pub struct JitSymbols {
    /// (start, size, name id, source id) by start; later entries for the
    /// same range win (code replaced).
    by_start: Vec<(u64, u64, u32, u32)>,
}

impl JitSymbols {
    /// From (start, size, name id, source id) in the order the JIT wrote
    /// them.
    pub fn new(mut entries: Vec<(u64, u64, u32, u32)>) -> Self {
        // A stable sort keeps the file's order among equal starts, so the
        // newest of code placed at the same address is found last.
        entries.sort_by_key(|e| e.0);
        Self { by_start: entries }
    }

    /// The (name id, source id) of the function whose code holds `pc`: of
    /// those that start at or below it and reach past it, the newest
    /// written.
    pub fn find(&self, pc: u64) -> Option<(u32, u32)> {
        let upto = self.by_start.partition_point(|e| e.0 <= pc);
        // Functions are small and rarely overlap: look back a little for
        // one that covers pc (an older, larger one may start below a newer
        // one that ended before pc).
        self.by_start[..upto]
            .iter()
            .rev()
            .take(64)
            .find(|e| pc < e.0.saturating_add(e.1))
            .map(|e| (e.2, e.3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_as_perf_reads_them() {
        let text = "7f0000001000 20 py::f:/a b.py\n\
                    0x7f0000002000 0x10 LazyCompile:*hot /x.js:3\n\
                    garbage\n\
                    7f0000003000 zz bad size\n\
                    7f0000004000 0 empty\n\
                    7f0000005000 8 cut sho";
        let s = parse_perf_map(text);
        assert_eq!(
            s,
            vec![
                JitSymbol {
                    start: 0x7f0000001000,
                    size: 0x20,
                    name: "py::f:/a b.py".into()
                },
                JitSymbol {
                    start: 0x7f0000002000,
                    size: 0x10,
                    name: "LazyCompile:*hot /x.js:3".into()
                },
            ]
        );
    }

    /// A jitdump as perf's specification lays it out: header, a code load,
    /// an unknown record, a move of the load, and a load cut short.
    #[test]
    fn jitdump_loads_and_moves_name_code() {
        let mut d = Vec::new();
        for v in [JITDUMP_MAGIC, 1, 40, 62, 0, 77] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(&[0; 16]);
        let load = |d: &mut Vec<u8>, addr: u64, len: u64, index: u64, name: &str, cut: usize| {
            let size = 16 + 8 + 32 + name.len() + 1 + len as usize;
            d.extend_from_slice(&JIT_CODE_LOAD.to_le_bytes());
            d.extend_from_slice(&(size as u32).to_le_bytes());
            d.extend_from_slice(&[0; 8]);
            d.extend_from_slice(&[77, 0, 0, 0, 77, 0, 0, 0]);
            for v in [addr, addr, len, index] {
                d.extend_from_slice(&v.to_le_bytes());
            }
            d.extend_from_slice(name.as_bytes());
            d.push(0);
            d.extend(std::iter::repeat_n(0x90u8, len as usize - cut));
        };
        load(&mut d, 0x5000, 0x10, 1, "f", 0);
        // An unwinding-info record (id 4) of 24 bytes: skipped.
        d.extend_from_slice(&4u32.to_le_bytes());
        d.extend_from_slice(&24u32.to_le_bytes());
        d.extend_from_slice(&[0; 16]);
        d.extend_from_slice(&JIT_CODE_MOVE.to_le_bytes());
        d.extend_from_slice(&64u32.to_le_bytes());
        d.extend_from_slice(&[0; 8]);
        d.extend_from_slice(&[0; 8]);
        for v in [0u64, 0x5000, 0x9000, 0x10, 1] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        load(&mut d, 0x6000, 0x20, 2, "cut", 5);
        let s = parse_jitdump(&d);
        assert_eq!(
            s,
            vec![
                JitSymbol {
                    start: 0x5000,
                    size: 0x10,
                    name: "f".into()
                },
                JitSymbol {
                    start: 0x9000,
                    size: 0x10,
                    name: "f".into()
                },
            ]
        );
        assert!(parse_jitdump(b"not a jitdump at all, no").is_empty());
    }

    #[test]
    fn addresses_find_the_newest_function_covering_them() {
        let j = JitSymbols::new(vec![
            (0x1000, 0x100, 1, 9),
            (0x1080, 0x10, 2, 9),
            (0x1000, 0x20, 3, 8),
        ]);
        assert_eq!(j.find(0x1010), Some((3, 8)));
        assert_eq!(j.find(0x1085), Some((2, 9)));
        assert_eq!(j.find(0x1090), Some((1, 9)));
        assert_eq!(j.find(0x1100), None);
        assert_eq!(j.find(0xfff), None);
    }

    #[test]
    fn links_and_hard_links_are_not_read() {
        let dir = std::env::temp_dir().join(format!("asys-jitmap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let real = dir.join("real");
        std::fs::write(&real, "1000 10 f\n").unwrap();
        assert!(read_owned(&real, None).unwrap().is_some());
        let link = dir.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            read_owned(&link, None),
            Err(JitMapError::Open(..))
        ));
        let hard = dir.join("hard");
        std::fs::hard_link(&real, &hard).unwrap();
        assert!(matches!(
            read_owned(&hard, None),
            Err(JitMapError::NotPlainFile(..))
        ));
        assert!(read_owned(&dir.join("none"), None).unwrap().is_none());
        // Another user's file is not the process's map (run as root, which
        // may give it away; elsewhere chown fails and the check is skipped).
        let foreign = dir.join("foreign");
        std::fs::write(&foreign, "1000 10 f\n").unwrap();
        if std::os::unix::fs::chown(&foreign, Some(4242), None).is_ok() {
            assert!(matches!(
                read_owned(&foreign, Some(1000)),
                Err(JitMapError::ForeignOwner { owner: 4242, .. })
            ));
            assert!(read_owned(&foreign, Some(4242)).unwrap().is_some());
        }
        // Root's file is accepted for any process (root wrote it for it).
        let roots = dir.join("roots");
        std::fs::write(&roots, "1000 10 f\n").unwrap();
        if std::fs::metadata(&roots).unwrap().uid() == 0 {
            assert!(read_owned(&roots, Some(1000)).unwrap().is_some());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
