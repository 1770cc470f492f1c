//! Naming Python frames from outside the interpreter: reads a CPython code
//! object of another process (function, qualified name, file, first line)
//! with `process_vm_readv`, and turns an instruction offset into its line
//! with the code object's line table (`co_linetable`: 3.11+'s location
//! table, or 3.10's pairs of address and line deltas).
//!
//! This is the userspace half of Python stacks (`--python-sampling`): the
//! sample program sends code object addresses and instructions per frame
//! (`collect::python_stacks` names them with this). `version_of` is used by
//! the tests only.
#![cfg_attr(not(test), allow(dead_code))]

use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol};

use crate::process::remote_memory::{Process, RemoteMemory};

/// An interpreter's version, as `PY_VERSION_HEX` spells it (3.11.2 final is
/// 0x030b02f0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyVersion(pub u32);

impl PyVersion {
    pub fn major_minor(self) -> (u8, u8) {
        ((self.0 >> 24) as u8, (self.0 >> 16) as u8)
    }
}

/// How a version gives a frame's instruction, and what its `co_linetable`
/// holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFormat {
    /// 3.11+: the instruction is a pointer into the code object's
    /// `co_code_adaptive`; the table is the location table
    /// (`Objects/locations.md`).
    Locations,
    /// 3.10: the instruction is the frame's `f_lasti` (an int of code
    /// units, -1 before the first); the table is pairs of (address delta
    /// in bytes, signed line delta) (`Objects/lnotab_notes.txt`).
    Pairs,
}

/// Where a version keeps what naming a frame needs (x86-64), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeLayout {
    pub co_firstlineno: u64,
    pub co_filename: u64,
    pub co_name: u64,
    /// `co_qualname`; 3.10 has none, and names a code object by `co_name`
    /// (this is its offset then).
    pub co_qualname: u64,
    pub co_linetable: u64,
    /// Where the instructions start (`co_code_adaptive`): an instruction
    /// pointer minus the code object's address minus this, over 2, is the
    /// instruction offset in code units (3.11+; 0 in 3.10).
    pub co_code_adaptive: u64,
    pub lines: LineFormat,
    /// Characters of a compact ASCII string (`sizeof(PyASCIIObject)`).
    pub ascii_data: u64,
    /// `ob_sval` of a bytes object.
    pub bytes_data: u64,
}

/// The layouts this reader knows: 3.11's checked against the interpreters
/// on the machine by the tests below (3.11.2 and 3.11.7); 3.10's, 3.12's
/// and 3.13's printed by `xtask/cpython_offsets.c` from the headers of
/// Ubuntu jammy's 3.10.12, Ubuntu noble's 3.12.3 and Debian's 3.13.5
/// (`libpython3.X-dev`) and checked against those interpreters (`cargo
/// xtask cpython`) by the same tests. Other versions are refused, not
/// guessed.
pub fn layout(v: PyVersion) -> Result<CodeLayout, PythonError> {
    match v.major_minor() {
        // No co_qualname (co_name stands for it) and no co_code_adaptive:
        // frames give f_lasti.
        (3, 10) => Ok(CodeLayout {
            co_firstlineno: 40,
            co_filename: 104,
            co_name: 112,
            co_qualname: 112,
            co_linetable: 120,
            co_code_adaptive: 0,
            lines: LineFormat::Pairs,
            ascii_data: 48,
            bytes_data: 32,
        }),
        (3, 11) => Ok(CodeLayout {
            co_firstlineno: 72,
            co_filename: 112,
            co_name: 120,
            co_qualname: 128,
            co_linetable: 136,
            co_code_adaptive: 184,
            lines: LineFormat::Locations,
            ascii_data: 48,
            bytes_data: 32,
        }),
        // 3.12 dropped PyASCIIObject's wstr (48 -> 40) and moved
        // co_firstlineno; 3.13 added code-object fields before
        // co_code_adaptive.
        (3, 12) | (3, 13) => Ok(CodeLayout {
            co_firstlineno: 68,
            co_filename: 112,
            co_name: 120,
            co_qualname: 128,
            co_linetable: 136,
            co_code_adaptive: if v.major_minor().1 == 12 { 192 } else { 200 },
            lines: LineFormat::Locations,
            ascii_data: 40,
            bytes_data: 32,
        }),
        _ => Err(PythonError::Unsupported(v)),
    }
}

impl CodeLayout {
    /// The line of a frame of code object `info` (at `code`) whose
    /// instruction the sample read as `instr` (a pointer, or 3.10's
    /// `f_lasti`): the line the interpreter's own `f_lineno` gives.
    pub fn line(&self, info: &CodeInfo, code: u64, instr: u64) -> Option<u32> {
        match self.lines {
            LineFormat::Locations => {
                let start = code.wrapping_add(self.co_code_adaptive);
                let offset = u32::try_from(instr.checked_sub(start)? / 2).ok()?;
                info.line_at(offset)
            }
            // f_lasti, an int; -1 before the first instruction, where
            // the interpreter gives the first line (PyCode_Addr2Line).
            LineFormat::Pairs => match i32::from_ne_bytes((instr as u32).to_ne_bytes()) {
                lasti if lasti < 0 => (info.first_line > 0).then_some(info.first_line),
                lasti => info.line_at(lasti.unsigned_abs()),
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("{0}: {1}")]
    Read(String, std::io::Error),
    #[error("{0}: not an ELF file: {1}")]
    Elf(String, object::Error),
    #[error("{0}: no Py_Version or version string (not a CPython interpreter or libpython)")]
    NoVersion(String),
    #[error("CPython {}.{} is not supported (3.10 to 3.13 are)", .0.major_minor().0, .0.major_minor().1)]
    Unsupported(PyVersion),
    #[error(
        "process {pid}: thread state {tstate:#x} names thread {tid}, not one of its threads (a libc other than glibc?)"
    )]
    ThreadId { pid: u32, tstate: u64, tid: u64 },
    #[error("process {pid}: cannot read {what} at {addr:#x}")]
    Memory {
        pid: u32,
        what: &'static str,
        addr: u64,
    },
}

/// The version of the interpreter in `path` (the executable or libpython):
/// its `Py_Version` constant (3.11+), read from the file; without one (3.10
/// and older), in a file that has `_PyRuntime` (every CPython 3.7+), the
/// version string `PY_VERSION` in its read-only data ([`version_string`]).
pub fn version_of(path: &Path) -> Result<PyVersion, PythonError> {
    let name = path.display().to_string();
    // A file the process maps (a path from its maps, or asys's descriptor
    // of it): mapped, not read whole, through the one opener of such files.
    let data =
        crate::elf::mapped::FileBytes::map(path, &asys_report::untrusted::open::Policy::MAPPED)
            .map_err(|e| PythonError::Read(name.clone(), e))?;
    let file = object::File::parse(&*data).map_err(|e| PythonError::Elf(name.clone(), e))?;
    let mut runtime = false;
    let mut version = None;
    for s in file.dynamic_symbols().chain(file.symbols()) {
        match s.name() {
            Ok("Py_Version") => {
                version = Some(s);
                break;
            }
            Ok("_PyRuntime") => runtime = true,
            _ => {}
        }
    }
    let Some(sym) = version else {
        if !runtime {
            return Err(PythonError::NoVersion(name));
        }
        return file
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".rodata")))
            .filter_map(|s| s.data().ok())
            .try_fold(None, |found: Option<PyVersion>, d| {
                match (found, version_string(d)) {
                    (Some(a), Some(b)) if a != b => Err(()),
                    (a, b) => Ok(a.or(b)),
                }
            })
            .ok()
            .flatten()
            .ok_or(PythonError::NoVersion(name));
    };
    let section = sym
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .ok_or_else(|| PythonError::NoVersion(name.clone()))?;
    let bytes = section
        .data_range(sym.address(), 4)
        .ok()
        .flatten()
        .ok_or_else(|| PythonError::NoVersion(name.clone()))?;
    Ok(PyVersion(u32::from_le_bytes(
        bytes.try_into().expect("4 bytes"),
    )))
}

/// The version of the interpreter process `pid` runs: that of its
/// executable, else of the libpython it maps ([`version_of`]).
pub fn version_of_process(pid: u32) -> Result<PyVersion, PythonError> {
    let (maps, _) = crate::process::procfs::mappings_and_vdso(pid)
        .map_err(|e| PythonError::Read(format!("/proc/{pid}/maps"), e))?;
    let mut paths: Vec<std::path::PathBuf> = Vec::new();
    for m in maps {
        let name = m.path.file_name().map(|n| n.to_string_lossy().into_owned());
        let libpython = name.as_deref().is_some_and(|n| n.starts_with("libpython3"));
        if (paths.is_empty() || libpython) && !paths.contains(&m.path) {
            paths.push(m.path.clone());
        }
    }
    let mut last = PythonError::NoVersion(format!("process {pid}"));
    for p in paths {
        match version_of(&crate::process::mapped_file::readable_path(
            pid,
            &p.display().to_string(),
        )) {
            Ok(v) => return Ok(v),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The version `PY_VERSION` spells ("3.10.12", "3.10.0rc2", "3.10.4+") in
/// `rodata`, a CPython 3.10 or older's read-only data, where
/// `Py_GetVersion` takes it from: a NUL-terminated string, or the end of
/// one (the linker shares a string's tail: pyenv's libpython has it only as
/// the end of "/root/.pyenv/versions/3.10.13"). Only 3.4 to 3.10 are
/// taken (3.11+ has `Py_Version`; the Unicode database's "3.2.0" is in
/// every one); another version than the first found is no answer.
pub fn version_string(rodata: &[u8]) -> Option<PyVersion> {
    let mut found = None;
    let mut i = 0;
    while let Some(at) = rodata[i..].windows(2).position(|w| w == b"3.") {
        let start = i + at;
        i = start + 1;
        if start > 0 && (rodata[start - 1].is_ascii_digit() || rodata[start - 1] == b'.') {
            continue;
        }
        let Some(v) = parse_py_version(&rodata[start..]) else {
            continue;
        };
        let (_, minor) = v.major_minor();
        if !(4..=10).contains(&minor) {
            continue;
        }
        match found {
            None => found = Some(v),
            Some(f) if f == v => {}
            Some(_) => return None,
        }
    }
    found
}

/// `3.MINOR.MICRO`, then `a`, `b` or `rc` and a serial, then `+`, then a
/// NUL, at the start of `s`, as `PY_VERSION_HEX` spells it.
fn parse_py_version(s: &[u8]) -> Option<PyVersion> {
    let number = |s: &[u8]| -> Option<(u32, usize)> {
        let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 || n > 2 {
            return None;
        }
        let v = std::str::from_utf8(&s[..n]).ok()?.parse().ok()?;
        Some((v, n))
    };
    let s = s.strip_prefix(b"3.")?;
    let (minor, n) = number(s)?;
    let s = s[n..].strip_prefix(b".")?;
    let (micro, n) = number(s)?;
    let mut s = &s[n..];
    let (level, serial) = match s.first() {
        Some(b'a' | b'b' | b'r') => {
            let (level, skip) = match s[0] {
                b'a' => (0xa, 1),
                b'b' => (0xb, 1),
                _ => (0xc, 2),
            };
            if s[0] == b'r' && s.get(1) != Some(&b'c') {
                return None;
            }
            let (serial, n) = number(&s[skip..])?;
            s = &s[skip + n..];
            (level, serial)
        }
        _ => (0xf, 0),
    };
    let s = s.strip_prefix(b"+").unwrap_or(s);
    (s.first() == Some(&0) && serial < 16).then_some(PyVersion(
        3 << 24 | minor << 16 | micro << 8 | level << 4 | serial,
    ))
}

/// Reads `len` bytes at `addr` of process `pid`.
pub(crate) fn read_remote(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    Process(pid).read(addr, len)
}

pub(crate) fn read_u64(pid: u32, addr: u64) -> Option<u64> {
    Process(pid).read_u64(addr)
}

/// Longest string or line table read (a bound against a bad pointer).
const MAX_OBJECT_BYTES: u64 = 1 << 20;

/// A code object, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeInfo {
    pub name: String,
    /// The qualified name (3.10: the name; its code objects have none).
    pub qualname: String,
    pub filename: String,
    pub first_line: u32,
    pub linetable: Vec<u8>,
    /// The format of `linetable`.
    pub lines: LineFormat,
}

impl CodeInfo {
    /// The line of the instruction at `offset` code units.
    pub fn line_at(&self, offset: u32) -> Option<u32> {
        match self.lines {
            LineFormat::Locations => line_at(&self.linetable, self.first_line, offset),
            LineFormat::Pairs => line_at_310(&self.linetable, self.first_line, offset),
        }
    }
}

/// Reads the code object at `addr` of process `pid`.
pub fn read_code(pid: u32, addr: u64, l: &CodeLayout) -> Result<CodeInfo, PythonError> {
    read_code_in(&Process(pid), addr, l)
}

/// Reads the code object at `addr` of `mem` (a process, or the fuzz
/// targets' made-up memory): everything in it is the process's to write.
pub fn read_code_in(
    mem: &impl RemoteMemory,
    addr: u64,
    l: &CodeLayout,
) -> Result<CodeInfo, PythonError> {
    let pid = mem.pid();
    let err = |what, addr| PythonError::Memory { pid, what, addr };
    let ptr = |off: u64, what| {
        mem.read_u64(addr.wrapping_add(off))
            .ok_or(err(what, addr.wrapping_add(off)))
    };
    let string = |obj: u64, what| read_str(mem, obj, l).ok_or(err(what, obj));
    let first = mem
        .read(addr.wrapping_add(l.co_firstlineno), 4)
        .ok_or(err("co_firstlineno", addr.wrapping_add(l.co_firstlineno)))?;
    let table = ptr(l.co_linetable, "co_linetable")?;
    let size = mem
        .read_u64(table.wrapping_add(16))
        .ok_or(err("co_linetable size", table))?;
    if size > MAX_OBJECT_BYTES {
        return Err(err("co_linetable size", table));
    }
    Ok(CodeInfo {
        name: string(ptr(l.co_name, "co_name")?, "co_name")?,
        qualname: string(ptr(l.co_qualname, "co_qualname")?, "co_qualname")?,
        filename: string(ptr(l.co_filename, "co_filename")?, "co_filename")?,
        first_line: u32::from_le_bytes(first.try_into().expect("4 bytes")),
        linetable: mem
            .read(table.wrapping_add(l.bytes_data), size as usize)
            .ok_or(err("co_linetable", table))?,
        lines: l.lines,
    })
}

/// A str object's text: compact ASCII strings (names and paths nearly
/// always are); others come out as None.
pub(crate) fn read_str(mem: &impl RemoteMemory, obj: u64, l: &CodeLayout) -> Option<String> {
    let len = mem.read_u64(obj.wrapping_add(16))?;
    let state = mem.read(obj.wrapping_add(32), 1)?[0];
    // state: interned (2 bits), kind (3), compact (1), ascii (1).
    let (compact, ascii) = (state & 0x20 != 0, state & 0x40 != 0);
    if !compact || !ascii {
        return None;
    }
    // A name or path is cut at MAX_NAME_BYTES: the process chooses its
    // strings' lengths, and a megabyte name (one shared string object can
    // name thousands of code objects) would cost asys that much per code
    // object read.
    let keep = len.min(MAX_NAME_BYTES);
    let mut text =
        String::from_utf8(mem.read(obj.wrapping_add(l.ascii_data), keep as usize)?).ok()?;
    if keep < len {
        text.push_str(CUT_MARK);
    }
    Some(text)
}

/// Longest name or path read from a code object; longer ones end in
/// [`CUT_MARK`].
pub const MAX_NAME_BYTES: u64 = 4096;

/// What ends a name cut at [`MAX_NAME_BYTES`].
pub const CUT_MARK: &str = "...[cut]";

/// The line of the instruction `offset` (code units) from CPython 3.11+'s
/// location table (`Objects/locations.md`): entries of a first byte
/// `1 code:4 length-1:3`, then by code: 0-9 short form (a byte of columns,
/// same line), 10-12 one-line form (line + code-10, two bytes of columns),
/// 13 no columns (signed varint line delta), 14 long form (signed varint
/// line delta, then end line, column, end column varints), 15 no location.
pub fn line_at(table: &[u8], first_line: u32, offset: u32) -> Option<u32> {
    let mut at = 0usize;
    let mut line = first_line as i64;
    let mut addr = 0u32;
    let next = |at: &mut usize| -> Option<u8> {
        let b = *table.get(*at)?;
        *at += 1;
        Some(b)
    };
    let varint = |at: &mut usize| -> Option<u64> {
        let mut b = next(at)?;
        let mut v = (b & 63) as u64;
        let mut shift = 0;
        while b & 64 != 0 {
            b = next(at)?;
            shift += 6;
            if shift > 60 {
                return None;
            }
            v |= ((b & 63) as u64) << shift;
        }
        Some(v)
    };
    let svarint = |at: &mut usize| -> Option<i64> {
        let v = varint(at)?;
        Some(if v & 1 != 0 {
            -((v >> 1) as i64)
        } else {
            (v >> 1) as i64
        })
    };
    while at < table.len() {
        let first = next(&mut at)?;
        if first & 0x80 == 0 {
            return None;
        }
        let code = (first >> 3) & 15;
        let length = (first & 7) as u32 + 1;
        let known = match code {
            15 => false,
            // The deltas are the process's bytes: a sum past i64 is no
            // line (found by fuzz/fuzz_targets/python.rs).
            14 => {
                line = line.checked_add(svarint(&mut at)?)?;
                for _ in 0..3 {
                    varint(&mut at)?;
                }
                true
            }
            13 => {
                line = line.checked_add(svarint(&mut at)?)?;
                true
            }
            10..=12 => {
                line = line.checked_add(code as i64 - 10)?;
                at += 2;
                true
            }
            _ => {
                at += 1;
                true
            }
        };
        if offset < addr + length {
            return (known && line > 0).then_some(line as u32);
        }
        addr += length;
    }
    None
}

/// The line of the instruction `offset` (code units) from CPython 3.10's
/// line table (`Objects/lnotab_notes.txt`, `PyLineTable_NextAddressRange`):
/// pairs of an address delta (unsigned byte, in bytes) and a line delta
/// (signed byte; -128: the range has no line, and the line stays), each
/// pair a range from the previous end; empty ranges only move the line.
pub fn line_at_310(table: &[u8], first_line: u32, offset: u32) -> Option<u32> {
    let byte = u64::from(offset) * 2;
    let mut line = i64::from(first_line);
    let mut end = 0u64;
    for pair in table.chunks_exact(2) {
        let start = end;
        end += u64::from(pair[0]);
        let delta = i8::from_ne_bytes([pair[1]]);
        let known = delta != -128;
        if known {
            line += i64::from(delta);
        }
        if start < end && byte < end {
            return (known && line > 0)
                .then(|| u32::try_from(line).ok())
                .flatten();
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The CPython interpreters to check, by path: the 3.11s here (Debian's
    /// and pyenv's), then the fixtures' 3.10, 3.12 and 3.13.
    pub(crate) fn interpreters() -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for cand in ["/usr/bin/python3.11", "/usr/local/bin/python3.11"] {
            if Path::new(cand).exists() {
                out.push(cand.into());
            }
        }
        if let Ok(o) = std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
        {
            let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if !p.is_empty() {
                let p = std::fs::canonicalize(&p).unwrap_or(p.into());
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        assert!(!out.is_empty(), "no CPython interpreter on this machine");
        out.extend(FIXTURE_VERSIONS.iter().map(|v| fixture(v)));
        // A pyenv 3.10 where there is one: a shared build (libpython3.10.so),
        // whose PY_VERSION is only the tail of a longer string.
        if let Some(home) = std::env::var_os("HOME") {
            let versions = Path::new(&home).join(".pyenv/versions");
            let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(versions)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("3.10."))
                .map(|e| e.path().join("bin/python3.10"))
                .filter(|p| p.exists())
                .collect();
            found.sort();
            out.extend(found.pop());
        }
        out
    }

    /// The fixture interpreters `cargo xtask cpython` installs.
    pub(crate) const FIXTURE_VERSIONS: &[&str] = &["3.10", "3.12", "3.13"];

    /// Fixture CPython `version` (`cargo xtask cpython`, run by `cargo
    /// xtask test`); the tests need it.
    pub(crate) fn fixture(version: &str) -> std::path::PathBuf {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let p = target.join(format!("cpython/{version}/usr/bin/python{version}"));
        assert!(
            p.exists(),
            "{} missing: run `cargo xtask cpython`",
            p.display()
        );
        p
    }

    /// A script that defines functions over several lines, prints each code
    /// object's address, names, file, first line and `co_lines()` (the
    /// interpreter's own instruction offset to line map), then waits for a
    /// line on stdin while the test reads its memory.
    const SCRIPT: &str = r#"
import sys
def hot(n):
    x = 0
    for i in range(n):
        x += i * 3
        if x > 1000:
            x -= 999
    return x

class Outer:
    def method(self, a,
               b):
        # A generator expression: its own code object in every version
        # (3.12 inlines list comprehensions).
        y = list(a for _ in range(b))
        return (y,
                len(y))

m = Outer.method.__code__
codes = [hot.__code__, m, next(c for c in m.co_consts if isinstance(c, type(m)))]
for c in codes:
    lines = ";".join(f"{s}:{e}:{l if l is not None else -1}" for s, e, l in c.co_lines())
    # 3.10's code objects have no qualified name: asys names them by co_name.
    qualname = getattr(c, "co_qualname", c.co_name)
    print(id(c), c.co_name, qualname, c.co_filename, c.co_firstlineno, lines, flush=True)
print("ready", sys.hexversion, flush=True)
sys.stdin.readline()
"#;

    #[test]
    fn code_objects_of_a_running_interpreter_read_as_it_sees_them() {
        use std::io::{BufRead, Write};
        let dir = std::env::temp_dir().join(format!("asys-pycode-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let script = dir.join("script.py");
        std::fs::write(&script, SCRIPT).unwrap();
        for python in interpreters() {
            let mut child = std::process::Command::new(&python)
                .arg(&script)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let pid = child.id();
            let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
            // The first line comes once the interpreter (and any libpython)
            // is mapped.
            let mut pending = String::new();
            out.read_line(&mut pending).unwrap();
            let version = version_of_process(pid).unwrap();
            let l = layout(version).unwrap_or_else(|e| panic!("{python:?}: {e}"));
            eprintln!("{python:?}: version {:#x}", version.0);
            let mut checked = 0;
            loop {
                let mut line = std::mem::take(&mut pending);
                if line.is_empty() {
                    out.read_line(&mut line).unwrap();
                }
                let f: Vec<&str> = line.split_whitespace().collect();
                if f[0] == "ready" {
                    // Py_Version in the file is the running sys.hexversion.
                    assert_eq!(f[1].parse::<u32>().unwrap(), version.0, "{python:?}");
                    break;
                }
                let addr: u64 = f[0].parse().unwrap();
                let info = read_code(pid, addr, &l).unwrap();
                assert_eq!(info.name, f[1], "{python:?}");
                assert_eq!(info.qualname, f[2]);
                assert_eq!(info.filename, f[3]);
                assert_eq!(info.first_line, f[4].parse::<u32>().unwrap());
                // Every range co_lines() gives, in bytes: each code unit in
                // it has that line.
                for range in f[5].split(';') {
                    let v: Vec<i64> = range.split(':').map(|x| x.parse().unwrap()).collect();
                    for byte in (v[0]..v[1]).step_by(2) {
                        let want = (v[2] >= 0).then_some(v[2] as u32);
                        assert_eq!(
                            info.line_at((byte / 2) as u32),
                            want,
                            "{python:?} {}: offset {byte}",
                            info.qualname
                        );
                        checked += 1;
                    }
                }
            }
            assert!(checked > 50, "only {checked} offsets checked");
            child.stdin.take().unwrap().write_all(b"\n").unwrap();
            child.wait().unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A frame read while it was being built can name any address: an
    /// error, not an overflow.
    #[test]
    fn a_code_address_at_the_top_of_memory_is_an_error() {
        let l = layout(PyVersion(0x030d05f0)).unwrap();
        let me = std::process::id();
        for addr in [u64::MAX, u64::MAX - 100, 0] {
            assert!(read_code(me, addr, &l).is_err(), "{addr:#x}");
        }
    }

    #[test]
    fn other_versions_are_refused_not_guessed() {
        for v in [0x030900f0, 0x030e00f0] {
            assert!(matches!(
                layout(PyVersion(v)),
                Err(PythonError::Unsupported(_))
            ));
        }
        assert_eq!(PyVersion(0x030b02f0).major_minor(), (3, 11));
    }

    /// 3.10 has no `Py_Version`: its `PY_VERSION` string is found in the
    /// read-only data, alone or as the tail of another string.
    #[test]
    fn a_310_version_string_is_found_in_read_only_data() {
        let v = |s: &[u8]| version_string(s).map(|v| v.0);
        assert_eq!(v(b"\x003.2.0\x00x\x003.10.12\x00"), Some(0x030a0cf0));
        assert_eq!(
            v(b"\x00/root/.pyenv/versions/3.10.13\x00python3.10\x00"),
            Some(0x030a0df0)
        );
        assert_eq!(v(b"\x003.10.0rc2\x00"), Some(0x030a00c2));
        assert_eq!(v(b"\x003.10.4+\x00"), Some(0x030a04f0));
        assert_eq!(v(b"\x003.9.18\x00"), Some(0x030912f0));
        // Not versions: no NUL after, a digit before, only "3.2.0", or two
        // versions.
        for s in [
            &b"\x003.10.12 (main)\x00"[..],
            b"\x0013.10.12\x00",
            b"\x003.2.0\x00",
            b"\x003.10.12\x003.10.13\x00",
        ] {
            assert_eq!(v(s), None, "{s:?}");
        }
    }

    /// 3.10's table: (address delta in bytes, line delta) pairs.
    #[test]
    fn a_310_line_table_gives_each_offset_its_line() {
        // Bytes 0-5: line 10 (+0); 6-9: 12; an empty range moving the line
        // by +1, then 10-13 at 14 (+1); 14-15: no line (-128).
        let table = [6, 0, 4, 2, 0, 1, 4, 1, 2, 0x80];
        let line = |o| line_at_310(&table, 10, o);
        assert_eq!(
            (0..9).map(line).collect::<Vec<_>>(),
            [
                Some(10),
                Some(10),
                Some(10),
                Some(12),
                Some(12),
                Some(14),
                Some(14),
                None,
                None
            ]
        );
        assert_eq!(line_at_310(&[1], 10, 0), None);
        // f_lasti -1 (not started): the first line, as PyCode_Addr2Line.
        let l = layout(PyVersion(0x030a0cf0)).unwrap();
        let info = CodeInfo {
            name: "f".into(),
            qualname: "f".into(),
            filename: "x.py".into(),
            first_line: 10,
            linetable: table.to_vec(),
            lines: l.lines,
        };
        assert_eq!(l.line(&info, 0x1000, u64::from(u32::MAX)), Some(10));
        assert_eq!(l.line(&info, 0x1000, 3), Some(12));
    }

    #[test]
    fn tables_cut_short_or_malformed_give_no_line() {
        // A long-form entry (code 14) whose varint never ends.
        assert_eq!(line_at(&[0x80 | (14 << 3), 0x40], 10, 0), None);
        // Not an entry start.
        assert_eq!(line_at(&[0x01], 10, 0), None);
        // Line deltas whose sum is past i64 (signed varints of 2^59 - 1,
        // 40 times): no line, not an overflow.
        let mut huge = Vec::new();
        for _ in 0..40 {
            huge.push(0x80 | (13 << 3));
            huge.extend_from_slice(&[
                0x40 | 0x3e,
                0x7f,
                0x7f,
                0x7f,
                0x7f,
                0x7f,
                0x7f,
                0x7f,
                0x7f,
                0x3f,
            ]);
        }
        assert_eq!(line_at(&huge, 10, 39), None);
        // A one-line form (code 11: next line), 2 code units.
        assert_eq!(line_at(&[0x80 | (11 << 3) | 1, 0, 0], 10, 1), Some(11));
        assert_eq!(line_at(&[0x80 | (11 << 3) | 1, 0, 0], 10, 2), None);
    }
}
