//! Naming Python frames from outside the interpreter: reads a CPython code
//! object of another process (function, qualified name, file, first line)
//! with `process_vm_readv`, and turns an instruction offset into its line
//! with the code object's location table (`co_linetable`, 3.11+).
//!
//! This is the userspace half of Python stacks (`--python-sampling`): the
//! sample program sends code object addresses and instructions per frame
//! (`collect::python_stacks` names them with this). `version_of` is used by
//! the tests only.
#![cfg_attr(not(test), allow(dead_code))]

use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol};

use crate::remote_memory::{Process, RemoteMemory};

/// An interpreter's version, as `PY_VERSION_HEX` spells it (3.11.2 final is
/// 0x030b02f0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyVersion(pub u32);

impl PyVersion {
    pub fn major_minor(self) -> (u8, u8) {
        ((self.0 >> 24) as u8, (self.0 >> 16) as u8)
    }
}

/// Where a version keeps what naming a frame needs (x86-64), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeLayout {
    pub co_firstlineno: u64,
    pub co_filename: u64,
    pub co_name: u64,
    pub co_qualname: u64,
    pub co_linetable: u64,
    /// Where the instructions start (`co_code_adaptive`): an instruction
    /// pointer minus the code object's address minus this, over 2, is the
    /// instruction offset in code units.
    pub co_code_adaptive: u64,
    /// Characters of a compact ASCII string (`sizeof(PyASCIIObject)`).
    pub ascii_data: u64,
    /// `ob_sval` of a bytes object.
    pub bytes_data: u64,
}

/// The layouts this reader knows: 3.11's checked against the interpreters
/// on the machine by the tests below (3.11.2 and 3.11.7); 3.12's and
/// 3.13's printed by `xtask/cpython_offsets.c` from the internal headers of
/// Ubuntu's 3.12.3 and Debian's 3.13.5 (`libpython3.X-dev`) and checked
/// against those interpreters (`cargo xtask cpython`) by the same tests.
/// Other versions are refused, not guessed.
pub fn layout(v: PyVersion) -> Result<CodeLayout, PythonError> {
    match v.major_minor() {
        (3, 11) => Ok(CodeLayout {
            co_firstlineno: 72,
            co_filename: 112,
            co_name: 120,
            co_qualname: 128,
            co_linetable: 136,
            co_code_adaptive: 184,
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
            ascii_data: 40,
            bytes_data: 32,
        }),
        _ => Err(PythonError::Unsupported(v)),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("{0}: {1}")]
    Read(String, std::io::Error),
    #[error("{0}: not an ELF file: {1}")]
    Elf(String, object::Error),
    #[error("{0}: no Py_Version (not a CPython 3.11+ interpreter or libpython)")]
    NoVersion(String),
    #[error("CPython {}.{} is not supported (3.11 to 3.13 are)", .0.major_minor().0, .0.major_minor().1)]
    Unsupported(PyVersion),
    #[error("process {pid}: cannot read {what} at {addr:#x}")]
    Memory {
        pid: u32,
        what: &'static str,
        addr: u64,
    },
}

/// The version of the interpreter in `path` (the executable or libpython):
/// its `Py_Version` constant (3.11+), read from the file.
pub fn version_of(path: &Path) -> Result<PyVersion, PythonError> {
    let name = path.display().to_string();
    // A file the process maps (a path from its maps, or asys's descriptor
    // of it): mapped, not read whole, through the one opener of such files.
    let data =
        crate::symbolize::mapped::FileBytes::map(path, &crate::untrusted::open::Policy::MAPPED)
            .map_err(|e| PythonError::Read(name.clone(), e))?;
    let file = object::File::parse(&*data).map_err(|e| PythonError::Elf(name.clone(), e))?;
    let sym = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.name() == Ok("Py_Version"))
        .ok_or_else(|| PythonError::NoVersion(name.clone()))?;
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

/// The version of the interpreter process `pid` runs: `Py_Version` of its
/// executable, else of the libpython it maps.
pub fn version_of_process(pid: u32) -> Result<PyVersion, PythonError> {
    let (maps, _) = crate::procfs::mappings_and_vdso(pid)
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
        match version_of(&crate::mapped_file::readable_path(
            pid,
            &p.display().to_string(),
        )) {
            Ok(v) => return Ok(v),
            Err(e) => last = e,
        }
    }
    Err(last)
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
    pub qualname: String,
    pub filename: String,
    pub first_line: u32,
    pub linetable: Vec<u8>,
}

impl CodeInfo {
    /// The line of the instruction at `offset` code units.
    pub fn line_at(&self, offset: u32) -> Option<u32> {
        line_at(&self.linetable, self.first_line, offset)
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
    })
}

/// A str object's text: compact ASCII strings (names and paths nearly
/// always are); others come out as None.
fn read_str(mem: &impl RemoteMemory, obj: u64, l: &CodeLayout) -> Option<String> {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The CPython interpreters to check, by path: the 3.11s here (Debian's
    /// and pyenv's), then the fixtures' 3.12 and 3.13.
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
        out
    }

    /// The fixture interpreters `cargo xtask cpython` installs.
    pub(crate) const FIXTURE_VERSIONS: &[&str] = &["3.12", "3.13"];

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
    print(id(c), c.co_name, c.co_qualname, c.co_filename, c.co_firstlineno, lines, flush=True)
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
        for v in [0x030a00f0, 0x030e00f0] {
            assert!(matches!(
                layout(PyVersion(v)),
                Err(PythonError::Unsupported(_))
            ));
        }
        assert_eq!(PyVersion(0x030b02f0).major_minor(), (3, 11));
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
