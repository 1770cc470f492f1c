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
//!
//! Whoever writes the file decides its size, so it is streamed, never read
//! whole, and what is kept of it is bounded by the bytes the caller gives
//! (its [`asys_report::untrusted::budget::Budget`]): a 60 MB map costs asys what
//! the budget allows, and the symbols past it are counted, not kept. A
//! jitdump's name is kept once however many MOVE records refer to it.
use std::{
    io::{BufRead, BufReader, Read, Seek},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use asys_report::untrusted::open::{Links, OpenError, Policy};

/// Larger maps are read up to here (a long-running JIT writes one line per
/// compiled function, and never removes any).
pub const MAX_BYTES: u64 = 64 << 20;

/// Longer perf-map lines and jitdump names are skipped (and counted): no
/// real symbol is near this long.
pub const MAX_NAME: usize = 64 << 10;

/// What one symbol costs asys beyond its name's bytes: the symbol, its row
/// and its share of the lookup tables.
pub const SYMBOL_COST: u64 = 64;

/// One compiled function. The name is shared: a jitdump MOVE record refers
/// to the name of the code it moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitSymbol {
    pub start: u64,
    pub size: u64,
    pub name: Arc<str>,
}

/// What reading one file gave: its symbols, as many as the bytes allowed,
/// and how many more it had (or that were too long to keep).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct JitRead {
    pub symbols: Vec<JitSymbol>,
    /// Bytes the kept symbols cost (names once, plus [`SYMBOL_COST`] each).
    pub cost: u64,
    /// Symbols not kept.
    pub left_out: u64,
}

impl JitRead {
    /// Keeps `sym` if its cost (`name_bytes` + [`SYMBOL_COST`]) fits in
    /// `room`; else counts it left out.
    fn keep(&mut self, sym: JitSymbol, name_bytes: u64, room: u64) -> bool {
        let cost = SYMBOL_COST + name_bytes;
        if self.cost + cost > room {
            self.left_out += 1;
            return false;
        }
        self.cost += cost;
        self.symbols.push(sym);
        true
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JitMapError {
    #[error(transparent)]
    Refused(#[from] OpenError),
    #[error("{0}: {1}")]
    Read(PathBuf, std::io::Error),
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

/// The symbols of `pid`'s perf map, within `room` bytes and (when given)
/// by `deadline` (then the rest is counted, not parsed); None when it has
/// none. `owner`: the process's user, whom the file must belong to (or
/// root); None when not known, and then the file is taken on the other
/// checks.
pub fn read_perf_map(
    pid: u32,
    owner: Option<u32>,
    room: u64,
    deadline: Option<std::time::Instant>,
) -> Result<Option<JitRead>, JitMapError> {
    // In /tmp, a folder of the system's: no link at the file itself.
    let path = perf_map_path(pid);
    let Some(file) = open_owned(&path, owner, Links::NotLast)? else {
        return Ok(None);
    };
    perf_map_within(BufReader::new(file.take(MAX_BYTES)), room, deadline)
        .map(Some)
        .map_err(|e| JitMapError::Read(path, e))
}

/// The code loads of the jitdump at `path` (a path the kernel gave: the
/// process's mapping or working folder, so no link is followed), within
/// `room` bytes; None when there is none. `owner` as for [`read_perf_map`].
pub fn read_jitdump(
    path: &Path,
    owner: Option<u32>,
    room: u64,
    deadline: Option<std::time::Instant>,
) -> Result<Option<JitRead>, JitMapError> {
    let Some(file) = open_owned(path, owner, Links::Never)? else {
        return Ok(None);
    };
    let len = file.metadata().map_or(0, |m| m.len()).min(MAX_BYTES);
    jitdump_within(BufReader::new(file), len, room, deadline)
        .map(Some)
        .map_err(|e| JitMapError::Read(path.into(), e))
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
// Whole inputs in memory: the fuzz targets and tests; asys streams files.
#[cfg_attr(not(test), allow(dead_code))]
pub fn parse_jitdump(bytes: &[u8]) -> Vec<JitSymbol> {
    jitdump_from(std::io::Cursor::new(bytes), bytes.len() as u64, u64::MAX)
        .map(|r| r.symbols)
        .unwrap_or_default()
}

/// [`parse_jitdump`] over a reader of `len` bytes, streamed (the code bytes
/// are skipped, not read), keeping what fits in `room` bytes.
pub fn jitdump_from<R: BufRead + Seek>(r: R, len: u64, room: u64) -> std::io::Result<JitRead> {
    jitdump_within(r, len, room, None)
}

/// How many records or lines a reader takes between looks at its deadline.
const DEADLINE_EVERY: u32 = 1024;

/// [`jitdump_from`] that, past `deadline`, only counts the code loads and
/// moves left (their headers are walked, their bodies skipped).
fn jitdump_within<R: BufRead + Seek>(
    mut r: R,
    len: u64,
    room: u64,
    deadline: Option<std::time::Instant>,
) -> std::io::Result<JitRead> {
    let mut out = JitRead::default();
    let mut records = 0u32;
    let mut counting = false;
    let mut head = [0u8; 12];
    if !read_full(&mut r, &mut head)? {
        return Ok(out);
    }
    let u32_of = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    let u64_of = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    if u32_of(&head, 0) != JITDUMP_MAGIC {
        return Ok(out);
    }
    let mut at = u64::from(u32_of(&head, 8));
    if at < 12 || at > len {
        return Ok(out);
    }
    r.seek_relative(at as i64 - 12)?;
    // Where each code index's newest code is, in `out` (for moves).
    let mut by_index: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut fixed = [0u8; 48];
    loop {
        // Record header: id, total_size (u32 each), timestamp (u64).
        let mut rh = [0u8; 16];
        if !read_full(&mut r, &mut rh)? {
            break;
        }
        let (id, size) = (u32_of(&rh, 0), u64::from(u32_of(&rh, 4)));
        if size < 16 || at + size > len {
            break;
        }
        let body = size - 16;
        // Bytes of the body read so far.
        let mut used = 0u64;
        records = records.wrapping_add(1);
        if !counting && records.is_multiple_of(DEADLINE_EVERY) && past(deadline) {
            counting = true;
        }
        match id {
            JIT_CODE_LOAD | JIT_CODE_MOVE if counting => out.left_out += 1,
            JIT_CODE_LOAD if body >= 40 => {
                // pid, tid (u32), vma, code_addr, code_size, code_index (u64).
                if !read_full(&mut r, &mut fixed[..40])? {
                    break;
                }
                used = 40;
                let (addr, code_len, index) =
                    (u64_of(&fixed, 16), u64_of(&fixed, 24), u64_of(&fixed, 32));
                let mut name = Vec::new();
                let limit = (body - 40).min(MAX_NAME as u64 + 1);
                used += (&mut r).take(limit).read_until(0, &mut name)? as u64;
                let complete = name.last() == Some(&0);
                if complete {
                    name.pop();
                }
                if !complete && name.len() > MAX_NAME {
                    out.left_out += 1;
                } else if code_len > 0 && !name.is_empty() {
                    let name_bytes = name.len() as u64;
                    let sym = JitSymbol {
                        start: addr,
                        size: code_len,
                        name: Arc::from(String::from_utf8_lossy(&name)),
                    };
                    let i = out.symbols.len();
                    if out.keep(sym, name_bytes, room) {
                        by_index.insert(index, i);
                    }
                }
            }
            JIT_CODE_MOVE if body >= 48 => {
                // pid, tid (u32), vma, old_code_addr, new_code_addr,
                // code_size, code_index (u64).
                if !read_full(&mut r, &mut fixed)? {
                    break;
                }
                used = 48;
                let (new, index) = (u64_of(&fixed, 24), u64_of(&fixed, 40));
                if let Some(&i) = by_index.get(&index) {
                    // The name is shared, not copied: a move costs a symbol.
                    let moved = JitSymbol {
                        start: new,
                        ..out.symbols[i].clone()
                    };
                    let j = out.symbols.len();
                    if out.keep(moved, 0, room) {
                        by_index.insert(index, j);
                    }
                }
            }
            _ => {}
        }
        r.seek_relative((body - used) as i64)?;
        at += size;
    }
    Ok(out)
}

/// Fills `buf`; false at the end of the input (or a part of `buf` only).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match r.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// The file at `path` opened under the rules above (through the one
/// opener of files other users name); None when there is no such file.
fn open_owned(
    path: &Path,
    owner: Option<u32>,
    links: Links,
) -> Result<Option<std::fs::File>, JitMapError> {
    let policy = Policy {
        links,
        // Larger files are read up to MAX_BYTES, streamed.
        max_bytes: u64::MAX,
        owner,
        single_name: true,
    };
    match asys_report::untrusted::open::open(path, &policy) {
        Ok(o) => Ok(Some(o.file)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Parses perf-map text: `START SIZE name`, both numbers hex (with or
/// without `0x`), the name the rest of the line (it may hold spaces).
/// Lines that do not parse are skipped, as perf does; so is a last line
/// cut short while the JIT was writing it (no newline: its name may be
/// cut).
#[cfg_attr(not(test), allow(dead_code))]
pub fn parse_perf_map(text: &str) -> Vec<JitSymbol> {
    perf_map_from(text.as_bytes(), u64::MAX)
        .map(|r| r.symbols)
        .unwrap_or_default()
}

/// [`parse_perf_map`] over a reader, a line at a time (a line longer than
/// [`MAX_NAME`] is skipped unread, and counted), keeping what fits in
/// `room` bytes.
pub fn perf_map_from(r: impl BufRead, room: u64) -> std::io::Result<JitRead> {
    perf_map_within(r, room, None)
}

/// [`perf_map_from`] that, past `deadline`, counts the lines left instead
/// of parsing them.
fn perf_map_within(
    mut r: impl BufRead,
    room: u64,
    deadline: Option<std::time::Instant>,
) -> std::io::Result<JitRead> {
    let mut out = JitRead::default();
    let mut line = Vec::new();
    let mut lines = 0u32;
    loop {
        lines = lines.wrapping_add(1);
        if lines.is_multiple_of(DEADLINE_EVERY) && past(deadline) {
            out.left_out += count_complete_lines(&mut r)?;
            break;
        }
        line.clear();
        let n = (&mut r)
            .take(MAX_NAME as u64 + 64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            if line.len() < MAX_NAME + 64 {
                // The last line, cut short.
                break;
            }
            out.left_out += 1;
            r.skip_until(b'\n')?;
            continue;
        }
        line.pop();
        if let Some((start, size, name)) = perf_map_line(&String::from_utf8_lossy(&line)) {
            let name_bytes = name.len() as u64;
            let sym = JitSymbol {
                start,
                size,
                name: Arc::from(name),
            };
            if !out.keep(sym, name_bytes, room) {
                // No room left: the rest is counted, a line a symbol,
                // without being parsed (a huge map costs a scan, not a
                // parse, once the budget is spent).
                out.left_out += count_complete_lines(&mut r)?;
                break;
            }
        }
    }
    Ok(out)
}

/// Whether `deadline` has passed.
fn past(deadline: Option<std::time::Instant>) -> bool {
    deadline.is_some_and(|d| std::time::Instant::now() >= d)
}

/// The newline-terminated lines left in `r`.
fn count_complete_lines(r: &mut impl BufRead) -> std::io::Result<u64> {
    let mut n = 0;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(n);
        }
        n += memchr::memchr_iter(b'\n', buf).count() as u64;
        let len = buf.len();
        r.consume(len);
    }
}

/// One perf-map line: (start, size, name).
fn perf_map_line(line: &str) -> Option<(u64, u64, &str)> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let line = line.trim_start();
    let (start, rest) = line.split_once(' ')?;
    let (size, name) = rest.trim_start().split_once(' ')?;
    let (start, size) = (hex(start)?, hex(size)?);
    let name = name.trim();
    (size > 0 && !name.is_empty()).then_some((start, size, name))
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
        let open = |p: &Path, owner| open_owned(p, owner, Links::NotLast);
        assert!(open(&real, None).unwrap().is_some());
        let link = dir.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            open(&link, None),
            Err(JitMapError::Refused(OpenError::Io(..)))
        ));
        let hard = dir.join("hard");
        std::fs::hard_link(&real, &hard).unwrap();
        assert!(matches!(
            open(&hard, None),
            Err(JitMapError::Refused(OpenError::SeveralNames(..)))
        ));
        assert!(open(&dir.join("none"), None).unwrap().is_none());
        // Another user's file is not the process's map (run as root, which
        // may give it away; elsewhere chown fails and the check is skipped).
        let foreign = dir.join("foreign");
        std::fs::write(&foreign, "1000 10 f\n").unwrap();
        if std::os::unix::fs::chown(&foreign, Some(4242), None).is_ok() {
            assert!(matches!(
                open(&foreign, Some(1000)),
                Err(JitMapError::Refused(OpenError::ForeignOwner {
                    owner: 4242,
                    ..
                }))
            ));
            assert!(open(&foreign, Some(4242)).unwrap().is_some());
        }
        // Root's file is accepted for any process (root wrote it for it).
        let roots = dir.join("roots");
        std::fs::write(&roots, "1000 10 f\n").unwrap();
        if std::fs::metadata(&roots).unwrap().uid() == 0 {
            assert!(open(&roots, Some(1000)).unwrap().is_some());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A jitdump of one LOAD with a long name and many MOVEs of it: the
    /// name is kept once, and what passes the room is counted.
    #[test]
    fn moves_share_the_name_and_the_room_bounds_what_is_kept() {
        let mut d = Vec::new();
        for v in [JITDUMP_MAGIC, 1, 40, 62, 0, 77] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(&[0; 16]);
        let name = "n".repeat(60_000);
        let size = 16 + 40 + name.len() + 1 + 4;
        d.extend_from_slice(&JIT_CODE_LOAD.to_le_bytes());
        d.extend_from_slice(&(size as u32).to_le_bytes());
        d.extend_from_slice(&[0; 16]);
        for v in [0x5000u64, 0x5000, 4, 7] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(name.as_bytes());
        d.push(0);
        d.extend_from_slice(&[0x90; 4]);
        for i in 0..1000u64 {
            d.extend_from_slice(&JIT_CODE_MOVE.to_le_bytes());
            d.extend_from_slice(&64u32.to_le_bytes());
            d.extend_from_slice(&[0; 16]);
            for v in [0u64, 0x5000 + i, 0x6000 + i, 4, 7] {
                d.extend_from_slice(&v.to_le_bytes());
            }
        }
        let all = parse_jitdump(&d);
        assert_eq!(all.len(), 1001);
        assert!(all.iter().all(|s| Arc::ptr_eq(&s.name, &all[0].name)));
        assert_eq!(all[1000].start, 0x6000 + 999);
        // Room for the name and 100 symbols.
        let room = 60_000 + 100 * SYMBOL_COST;
        let r = jitdump_from(std::io::Cursor::new(&d), d.len() as u64, room).unwrap();
        assert_eq!((r.symbols.len(), r.left_out), (100, 901));
        assert!(r.cost <= room);
    }

    #[test]
    fn perf_map_lines_past_the_room_or_too_long_are_counted() {
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("{:x} 10 sym{i:04}\n", 0x1000 + i * 16));
        }
        text.push_str(&format!("9000 10 {}\n", "x".repeat(MAX_NAME + 100)));
        text.push_str("a000 10 after\n");
        let all = perf_map_from(text.as_bytes(), u64::MAX).unwrap();
        assert_eq!((all.symbols.len(), all.left_out), (101, 1));
        assert_eq!(&*all.symbols[100].name, "after");
        let some = perf_map_from(text.as_bytes(), 10 * (SYMBOL_COST + 7)).unwrap();
        assert_eq!((some.symbols.len(), some.left_out), (10, 92));
    }
}
