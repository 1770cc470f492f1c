//! The Python names of a CPython process's threads (`threading.Thread.name`),
//! read from outside with `process_vm_readv`, as py-spy reads them.
//!
//! No thread state of 3.10-3.13 holds a thread's Python name: it is the
//! `_name` attribute of the thread's `threading.Thread` object, which the
//! `threading` module keeps in its `_active` dict while the thread runs.
//! So the walk is: `_PyRuntime` → `interpreters.head` → `modules`
//! (`sys.modules`; 3.12+: `imports.modules`) → its `"threading"` entry →
//! the module's `md_dict` → `"_active"` → each `Thread` → its instance
//! attributes `_name` (a str) and `_native_id` (an int: the thread's
//! `gettid()`, set when it starts, which is what a sample names it by).
//!
//! Every pointer, length and size is the process's to write: dicts are read
//! only up to [`MAX_DICT_ENTRIES`] entries, a name up to
//! `python_code::MAX_NAME_BYTES` (through `python_code::read_str`), and
//! anything out of bounds is an error, never a panic.
//!
//! The offsets are printed by `xtask/cpython_offsets.c` from each version's
//! headers (3.10's dict keys from its `Objects/dict-common.h`, which is not
//! installed) and checked against running interpreters by the test below.
#![cfg_attr(not(test), allow(dead_code))]

use crate::{
    collect::python_code::{CodeLayout, PyVersion, PythonError},
    process::remote_memory::RemoteMemory,
};

/// Most entries of a dict read (`sys.modules` of a large program holds a
/// few thousand; a bound against a made-up size).
pub const MAX_DICT_ENTRIES: u64 = 1 << 16;

/// Most threads named per read of a process.
pub const MAX_THREADS: usize = 4096;

/// `Py_TPFLAGS_MANAGED_DICT` (3.11+): the instance dict (or values) is
/// before the object.
const TPFLAGS_MANAGED_DICT: u64 = 1 << 4;
/// `Py_TPFLAGS_INLINE_VALUES` (3.13): the values are after the object.
const TPFLAGS_INLINE_VALUES: u64 = 1 << 2;

/// Where a version keeps what naming threads needs (x86-64), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamesLayout {
    /// `PyInterpreterState.modules` (3.12+: `imports.modules`):
    /// `sys.modules`.
    pub interp_modules: u64,
    /// `PyModuleObject.md_dict`.
    pub module_dict: u64,
    /// `PyTypeObject.tp_flags`.
    pub type_flags: u64,
    /// `PyTypeObject.tp_dictoffset`.
    pub type_dictoffset: u64,
    /// `PyHeapTypeObject.ht_cached_keys`: the keys an instance's values
    /// (3.11+) are the values of.
    pub heap_cached_keys: u64,
    /// `PyDictObject.ma_keys`, `ma_values`.
    pub dict_keys: u64,
    pub dict_values: u64,
    pub keys: KeysLayout,
    pub attributes: Attributes,
    pub long: LongSize,
    /// `PyLongObject.ob_digit` (30-bit digits).
    pub long_digits: u64,
}

/// `PyDictKeysObject`, whose entries follow its index table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysLayout {
    /// 3.10 (`Objects/dict-common.h`): `dk_size` slots of indices, each
    /// 1, 2, 4 or 8 bytes by `dk_size`, at `dk_indices`; entries
    /// `{me_hash, me_key, me_value}`.
    Sized {
        dk_size: u64,
        dk_nentries: u64,
        dk_indices: u64,
    },
    /// 3.11+ (`Include/internal/pycore_dict.h`): `1 << dk_log2_index_bytes`
    /// bytes of indices; entries `{me_hash, me_key, me_value}` where
    /// `dk_kind` is `DICT_KEYS_GENERAL` (0), else `{me_key, me_value}`.
    Log2 {
        dk_log2_index_bytes: u64,
        dk_kind: u64,
        dk_nentries: u64,
        dk_indices: u64,
    },
}

/// Where an instance's attributes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attributes {
    /// A dict pointer at the type's `tp_dictoffset` (3.10).
    DictOffset,
    /// 3.11: `_PyObject_ValuesPointer` (values, or NULL) and
    /// `_PyObject_ManagedDictPointer` (the dict), before the object.
    ValuesOrDict { values: i64, dict: i64 },
    /// 3.12: one word before the object (`_PyObject_DictOrValuesPointer`):
    /// values minus one where its low bit is set, else the dict.
    Tagged { at: i64 },
    /// 3.13: the values inline at `_PyObject_InlineValues` (where the type
    /// has `Py_TPFLAGS_INLINE_VALUES` and their `valid` byte is set: the
    /// pointers at `array`), else the dict at `_PyObject_ManagedDictPointer`.
    Inline {
        values: i64,
        valid: u64,
        array: u64,
        dict: i64,
    },
}

/// How an int gives its number of digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongSize {
    /// `ob_size` at this offset, negative for a negative int (3.10, 3.11).
    ObSize { ob_size: u64 },
    /// `long_value.lv_tag` at this offset: digits `<< 3`, sign in the low
    /// two bits (0 positive, 1 zero, 2 negative) (3.12+).
    Tag { lv_tag: u64 },
}

/// The layouts of 3.10-3.13, as `xtask/cpython_offsets.c` prints them
/// (pyenv's 3.10.13, 3.11.7, 3.12.1, 3.13.0 and the fixtures' 3.10.12,
/// 3.12.3, 3.13.5 headers give the same numbers); other versions are
/// refused.
pub fn names_layout(v: PyVersion) -> Result<NamesLayout, PythonError> {
    let log2 = KeysLayout::Log2 {
        dk_log2_index_bytes: 9,
        dk_kind: 10,
        dk_nentries: 24,
        dk_indices: 32,
    };
    let base = |interp_modules, heap_cached_keys, keys, attributes, long| NamesLayout {
        interp_modules,
        module_dict: 16,
        type_flags: 168,
        type_dictoffset: 288,
        heap_cached_keys,
        dict_keys: 32,
        dict_values: 40,
        keys,
        attributes,
        long,
        long_digits: 24,
    };
    match v.major_minor() {
        (3, 10) => Ok(base(
            856,
            872,
            KeysLayout::Sized {
                dk_size: 8,
                dk_nentries: 32,
                dk_indices: 40,
            },
            Attributes::DictOffset,
            LongSize::ObSize { ob_size: 16 },
        )),
        (3, 11) => Ok(base(
            888,
            872,
            log2,
            Attributes::ValuesOrDict {
                values: -32,
                dict: -24,
            },
            LongSize::ObSize { ob_size: 16 },
        )),
        (3, 12) => Ok(base(
            944,
            880,
            log2,
            Attributes::Tagged { at: -24 },
            LongSize::Tag { lv_tag: 16 },
        )),
        (3, 13) => Ok(base(
            7656,
            880,
            log2,
            Attributes::Inline {
                values: 16,
                valid: 3,
                array: 8,
                dict: -24,
            },
            LongSize::Tag { lv_tag: 16 },
        )),
        _ => Err(PythonError::Unsupported(v)),
    }
}

/// The key objects found by name in an earlier read (interned strs, which
/// live as long as the dict keyed by them): a later read looks for the same
/// pointer first, and reads keys one by one only when it is not there.
#[derive(Debug, Default, Clone, Copy)]
pub struct KnownKeys {
    threading: Option<u64>,
    active: Option<u64>,
    name: Option<u64>,
    native_id: Option<u64>,
}

/// A thread of `threading._active`: its `gettid()` and its name (None:
/// unreadable, or not a str).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedThread {
    pub tid: u32,
    pub name: Option<String>,
}

/// Everything a read needs of one process.
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    /// `_PyRuntime`'s address.
    pub runtime: u64,
    /// `_PyRuntimeState.interpreters.head`.
    pub runtime_interpreters_head: u64,
    pub names: NamesLayout,
    /// For its str layout (`read_str`).
    pub code: CodeLayout,
    /// `PyUnicode_Type` and `PyLong_Type`: a key or name is read only from
    /// a str, a native id only from an int (an unstarted thread's is None).
    pub types: Types,
    pub known: KnownKeys,
}

/// Where a process's str and int types are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Types {
    pub str: u64,
    pub int: u64,
}

impl Reader {
    /// The reader of process `pid` (a CPython 3.10-3.13 asys reads).
    pub fn of_process(pid: u32) -> Result<Self, PythonError> {
        let version = crate::collect::python_code::version_of_process(pid)?;
        Ok(Self {
            runtime: crate::collect::python_threads::runtime_address(pid)?,
            runtime_interpreters_head: crate::collect::python_threads::stack_layout(version)?
                .runtime_interpreters_head,
            names: names_layout(version)?,
            code: crate::collect::python_code::layout(version)?,
            types: Types {
                str: crate::collect::python_threads::symbol_address(pid, "PyUnicode_Type")?,
                int: crate::collect::python_threads::symbol_address(pid, "PyLong_Type")?,
            },
            known: KnownKeys::default(),
        })
    }

    /// The `threading` module's globals (`md_dict`) in `mem`: None where
    /// it is not imported (yet).
    pub fn threading_globals(
        &mut self,
        mem: &impl RemoteMemory,
    ) -> Result<Option<u64>, PythonError> {
        let l = &self.names;
        let interp = read_word(
            mem,
            self.runtime.wrapping_add(self.runtime_interpreters_head),
            "interpreters.head",
        )?;
        let modules = read_word(mem, interp.wrapping_add(l.interp_modules), "sys.modules")?;
        if modules == 0 {
            return Ok(None);
        }
        let entries = dict_entries(mem, modules, l)?;
        let key = Key::new(
            "threading",
            &mut self.known.threading,
            &self.code,
            self.types,
        );
        match find(mem, &entries, key) {
            Some(module) => read_word(mem, module.wrapping_add(l.module_dict), "md_dict").map(Some),
            None => Ok(None),
        }
    }

    /// The threads of `threading._active` of the main interpreter of
    /// `mem`; empty where `threading` is not imported (yet). Threads not
    /// started yet (no native id) are left out.
    pub fn threads(&mut self, mem: &impl RemoteMemory) -> Result<Vec<NamedThread>, PythonError> {
        let pid = mem.pid();
        let err = |what, addr| PythonError::Memory { pid, what, addr };
        let Some(globals) = self.threading_globals(mem)? else {
            return Ok(Vec::new());
        };
        let l = self.names;
        let (code, types) = (self.code, self.types);
        let entries = dict_entries(mem, globals, &l)?;
        // `threading` mid-import (its globals filled as its code runs) has
        // no `_active` yet: no thread to name yet, as before the import.
        let Some(active) = find(
            mem,
            &entries,
            Key::new("_active", &mut self.known.active, &code, types),
        ) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (_, thread) in dict_entries(mem, active, &l)?.into_iter().take(MAX_THREADS) {
            let attrs = attributes(mem, thread, &l)?;
            let native = Key::new("_native_id", &mut self.known.native_id, &code, types);
            let native = find(mem, &attrs, native).ok_or(err("Thread._native_id", thread))?;
            // None until the thread runs (and without native ids).
            let Some(tid) = read_int(mem, native, &l, types.int) else {
                continue;
            };
            let name = find(
                mem,
                &attrs,
                Key::new("_name", &mut self.known.name, &code, types),
            )
            .filter(|&s| is_of_type(mem, s, types.str))
            .and_then(|s| crate::collect::python_code::read_str(mem, s, &code));
            out.push(NamedThread { tid, name });
        }
        Ok(out)
    }
}

fn read_word(mem: &impl RemoteMemory, addr: u64, what: &'static str) -> Result<u64, PythonError> {
    mem.read_u64(addr).ok_or(PythonError::Memory {
        pid: mem.pid(),
        what,
        addr,
    })
}

/// Whether the object at `obj` is exactly of the type at `ty`.
fn is_of_type(mem: &impl RemoteMemory, obj: u64, ty: u64) -> bool {
    mem.read_u64(obj.wrapping_add(8)) == Some(ty)
}

/// The (key, value) pairs of the dict at `dict`, in insertion order.
fn dict_entries(
    mem: &impl RemoteMemory,
    dict: u64,
    l: &NamesLayout,
) -> Result<Vec<(u64, u64)>, PythonError> {
    let pid = mem.pid();
    let err = |what, addr| PythonError::Memory { pid, what, addr };
    let keys = mem
        .read_u64(dict.wrapping_add(l.dict_keys))
        .ok_or(err("ma_keys", dict))?;
    let values = mem
        .read_u64(dict.wrapping_add(l.dict_values))
        .ok_or(err("ma_values", dict))?;
    keys_entries(mem, keys, (values != 0).then_some(values), l)
}

/// The (key, value) pairs of the keys object at `keys`, the values from
/// `values` (a split dict's, or an instance's) where given.
fn keys_entries(
    mem: &impl RemoteMemory,
    keys: u64,
    values: Option<u64>,
    l: &NamesLayout,
) -> Result<Vec<(u64, u64)>, PythonError> {
    let pid = mem.pid();
    let err = |what| PythonError::Memory {
        pid,
        what,
        addr: keys,
    };
    let head = mem.read(keys, 48).ok_or(err("PyDictKeysObject"))?;
    let word = |off: u64| {
        u64::from_le_bytes(
            head[off as usize..off as usize + 8]
                .try_into()
                .expect("8 bytes"),
        )
    };
    // (entries, their number, bytes per entry, key's offset in one).
    let (start, n, size, key) = match l.keys {
        KeysLayout::Sized {
            dk_size,
            dk_nentries,
            dk_indices,
        } => {
            let (slots, n) = (word(dk_size), word(dk_nentries));
            if !slots.is_power_of_two() || slots > 4 * MAX_DICT_ENTRIES || n > slots {
                return Err(err("dk_size"));
            }
            let index_bytes = match slots {
                0..=0xff => 1,
                0x100..=0xffff => 2,
                _ => 4,
            };
            (dk_indices + slots * index_bytes, n, 24, 8)
        }
        KeysLayout::Log2 {
            dk_log2_index_bytes,
            dk_kind,
            dk_nentries,
            dk_indices,
        } => {
            let log2 = u32::from(head[dk_log2_index_bytes as usize]);
            if log2 > 24 {
                return Err(err("dk_log2_index_bytes"));
            }
            let (size, key) = match head[dk_kind as usize] {
                0 => (24, 8),
                _ => (16, 0),
            };
            (dk_indices + (1u64 << log2), word(dk_nentries), size, key)
        }
    };
    if n > MAX_DICT_ENTRIES {
        return Err(err("dk_nentries"));
    }
    let table = mem
        .read(keys.wrapping_add(start), (n * size) as usize)
        .ok_or(err("dict entries"))?;
    let values = match values {
        Some(v) => Some(mem.read(v, (n * 8) as usize).ok_or(err("dict values"))?),
        None => None,
    };
    let at = |b: &[u8], off: usize| u64::from_le_bytes(b[off..off + 8].try_into().expect("8"));
    Ok((0..n as usize)
        .map(|i| {
            let e = i * size as usize;
            let value = match &values {
                Some(v) => at(v, i * 8),
                None => at(&table, e + key as usize + 8),
            };
            (at(&table, e + key as usize), value)
        })
        // Deleted entries, and a split dict's keys it has no value for.
        .filter(|&(k, v)| k != 0 && v != 0)
        .collect())
}

/// A str key looked for, and the key object found for it before.
struct Key<'a> {
    want: &'static str,
    known: &'a mut Option<u64>,
    code: &'a CodeLayout,
    types: Types,
}

impl<'a> Key<'a> {
    fn new(
        want: &'static str,
        known: &'a mut Option<u64>,
        code: &'a CodeLayout,
        types: Types,
    ) -> Self {
        Self {
            want,
            known,
            code,
            types,
        }
    }

    /// Whether the object at `obj` is a compact ASCII str of `want` (an
    /// ASCII identifier, which CPython keeps only so): a comparison in one
    /// read, not a str reader (names are read with `python_code::read_str`).
    fn is(&self, mem: &impl RemoteMemory, obj: u64) -> bool {
        let data = self.code.ascii_data as usize;
        let Some(b) = mem.read(obj, data + self.want.len()) else {
            return false;
        };
        let word = |off: usize| u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"));
        // state: interned (2 bits), kind (3), compact (1), ascii (1).
        let compact_ascii = b[32] & 0x60 == 0x60;
        word(8) == self.types.str
            && word(16) == self.want.len() as u64
            && compact_ascii
            && &b[data..] == self.want.as_bytes()
    }
}

/// The value of `key` among `entries`: the key object found before first
/// (one read), else each key read in turn.
fn find(mem: &impl RemoteMemory, entries: &[(u64, u64)], key: Key<'_>) -> Option<u64> {
    if let Some(k) = *key.known
        && let Some(&(_, v)) = entries.iter().find(|&&(e, _)| e == k)
        && key.is(mem, k)
    {
        return Some(v);
    }
    let &(k, v) = entries.iter().find(|&&(k, _)| key.is(mem, k))?;
    *key.known = Some(k);
    Some(v)
}

/// The instance attributes of the object at `obj`, as (key, value).
fn attributes(
    mem: &impl RemoteMemory,
    obj: u64,
    l: &NamesLayout,
) -> Result<Vec<(u64, u64)>, PythonError> {
    let pid = mem.pid();
    let err = |what, addr| PythonError::Memory { pid, what, addr };
    let word = |addr: u64, what| read_word(mem, addr, what);
    let at = |off: i64| obj.wrapping_add_signed(off);
    let ty = word(obj.wrapping_add(8), "ob_type")?;
    let flags = word(ty.wrapping_add(l.type_flags), "tp_flags")?;
    let cached_keys = || word(ty.wrapping_add(l.heap_cached_keys), "ht_cached_keys");
    let dict = |addr: u64| match word(addr, "instance dict")? {
        0 => Ok(Vec::new()),
        d => dict_entries(mem, d, l),
    };
    if l.attributes == Attributes::DictOffset || flags & TPFLAGS_MANAGED_DICT == 0 {
        // 3.10, and a type of 3.11+ without a managed dict.
        let offset = word(ty.wrapping_add(l.type_dictoffset), "tp_dictoffset")? as i64;
        if offset <= 0 {
            return Err(err("tp_dictoffset", ty));
        }
        return dict(at(offset));
    }
    match l.attributes {
        Attributes::DictOffset => Err(err("tp_flags", ty)),
        Attributes::ValuesOrDict { values, dict: d } => match word(at(values), "values")? {
            0 => dict(at(d)),
            v => keys_entries(mem, cached_keys()?, Some(v), l),
        },
        Attributes::Tagged { at: off } => match word(at(off), "dict or values")? {
            v if v & 1 == 1 => keys_entries(mem, cached_keys()?, Some(v.wrapping_add(1)), l),
            0 => Ok(Vec::new()),
            d => dict_entries(mem, d, l),
        },
        Attributes::Inline {
            values,
            valid,
            array,
            dict: d,
        } => {
            if flags & TPFLAGS_INLINE_VALUES != 0 {
                let v = at(values);
                let ok = mem.read(v.wrapping_add(valid), 1).ok_or(err("valid", v))?[0];
                if ok != 0 {
                    return keys_entries(mem, cached_keys()?, Some(v.wrapping_add(array)), l);
                }
            }
            dict(at(d))
        }
    }
}

/// The int at `obj` if it is one of 0 to `u32::MAX` (a thread id); None
/// for anything else (`None`, a negative or larger int).
fn read_int(mem: &impl RemoteMemory, obj: u64, l: &NamesLayout, int_type: u64) -> Option<u32> {
    if !is_of_type(mem, obj, int_type) {
        return None;
    }
    let (size_at, digits) = match l.long {
        LongSize::ObSize { ob_size } => (ob_size, l.long_digits),
        LongSize::Tag { lv_tag } => (lv_tag, l.long_digits),
    };
    let b = mem.read(obj, digits as usize + 8)?;
    let size = u64::from_le_bytes(
        b[size_at as usize..size_at as usize + 8]
            .try_into()
            .expect("8 bytes"),
    );
    let ndigits = match l.long {
        LongSize::ObSize { .. } => size as i64,
        // Sign 1 (zero) has no digits; 2 (negative) is no thread id.
        LongSize::Tag { .. } => match size & 3 {
            0 | 1 => (size >> 3) as i64,
            _ => return None,
        },
    };
    let digit = |i: usize| {
        u64::from(u32::from_le_bytes(
            b[digits as usize + 4 * i..digits as usize + 4 * i + 4]
                .try_into()
                .expect("4 bytes"),
        ))
    };
    // 30-bit digits: a u32 takes at most two.
    let value = match ndigits {
        0 => 0,
        1 => digit(0),
        2 => digit(0) | digit(1) << 30,
        _ => return None,
    };
    u32::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{collect::python_code::CUT_MARK, process::remote_memory::Process};

    /// Threads named at start, one renamed after, one with a name longer
    /// than asys reads, one of a subclass whose instance dict was made
    /// (`__dict__`), and one not started yet; the script prints what the
    /// walk passes through (`sys.modules`, `threading`'s globals), two ints
    /// and every running thread's native id and name, then waits.
    const SCRIPT: &str = r#"
import sys, threading
ev = threading.Event()
class Sub(threading.Thread):
    pass
threads = [threading.Thread(target=ev.wait, name=n) for n in ["alpha", "worker-2", "x" * 5000]]
threads.append(Sub(target=ev.wait, name="sub"))
for t in threads:
    t.start()
threads[1].name = "renamed-2"
threads[3].__dict__["extra"] = 1
unstarted = threading.Thread(target=ev.wait, name="unstarted")
big, neg = 2**32 - 7, -5
print(id(sys.modules), id(threading.__dict__), id(big), id(neg), flush=True)
for t in threading.enumerate():
    print("thread", t.native_id, t.name, flush=True)
print("ready", flush=True)
sys.stdin.readline()
ev.set()
"#;

    /// A process's memory, reads counted (what a read of names costs).
    struct Counted(Process, std::cell::Cell<u64>);

    impl RemoteMemory for Counted {
        fn pid(&self) -> u32 {
            self.0.pid()
        }

        fn read(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
            self.1.set(self.1.get() + 1);
            self.0.read(addr, len)
        }
    }

    #[test]
    fn thread_names_of_a_running_interpreter_read_as_it_sees_them() {
        use std::io::{BufRead, Write};
        let dir = std::env::temp_dir().join(format!("asys-pynames-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let script = dir.join("script.py");
        std::fs::write(&script, SCRIPT).unwrap();
        for python in crate::collect::python_code::tests::interpreters() {
            let mut child = std::process::Command::new(&python)
                .arg(&script)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let pid = child.id();
            let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            let ids: Vec<u64> = line
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let mut want = Vec::new();
            loop {
                let mut line = String::new();
                out.read_line(&mut line).unwrap();
                let line = line.trim_end_matches('\n');
                if line == "ready" {
                    break;
                }
                let mut f = line.splitn(3, ' ');
                assert_eq!(f.next(), Some("thread"), "{python:?}: {line:?}");
                let tid: u32 = f.next().unwrap().parse().unwrap();
                let mut name = f.next().unwrap().to_string();
                if name.len() > crate::collect::python_code::MAX_NAME_BYTES as usize {
                    name.truncate(crate::collect::python_code::MAX_NAME_BYTES as usize);
                    name.push_str(CUT_MARK);
                }
                want.push(NamedThread {
                    tid,
                    name: Some(name),
                });
            }
            // MainThread and the four started.
            assert_eq!(want.len(), 5, "{python:?}");
            let mem = Process(pid);
            let mut reader = Reader::of_process(pid).unwrap();
            // Each step of the walk lands where the interpreter says.
            let interp = mem
                .read_u64(reader.runtime + reader.runtime_interpreters_head)
                .unwrap();
            assert_eq!(
                mem.read_u64(interp + reader.names.interp_modules),
                Some(ids[0]),
                "{python:?}: sys.modules"
            );
            assert_eq!(
                reader.threading_globals(&mem).unwrap(),
                Some(ids[1]),
                "{python:?}: threading.__dict__"
            );
            let l = reader.names;
            let int = reader.types.int;
            assert_eq!(read_int(&mem, ids[2], &l, int), Some(u32::MAX - 6));
            assert_eq!(read_int(&mem, ids[3], &l, int), None, "negative");
            assert_eq!(read_int(&mem, ids[1], &l, int), None, "not an int");
            // Twice: the second read finds the keys by the pointers the
            // first one found.
            for read in ["first", "second"] {
                let counted = Counted(mem, Default::default());
                let t0 = std::time::Instant::now();
                let mut got = reader.threads(&counted).unwrap();
                eprintln!(
                    "{python:?}: {read} read: {} reads of memory, {:?}",
                    counted.1.get(),
                    t0.elapsed()
                );
                got.sort_by_key(|t| t.tid);
                want.sort_by_key(|t| t.tid);
                let short = |v: &[NamedThread]| {
                    v.iter()
                        .map(|t| format!("{}:{:.20}", t.tid, t.name.as_deref().unwrap_or("?")))
                        .collect::<Vec<_>>()
                };
                eprintln!("{python:?}: {:?}", short(&got));
                assert_eq!(got, want, "{python:?}");
            }
            child.stdin.take().unwrap().write_all(b"\n").unwrap();
            assert!(child.wait().unwrap().success());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A dict whose keys object claims more entries than asys reads, and
    /// one whose index size is out of range, are errors, not reads.
    #[test]
    fn dicts_of_made_up_sizes_are_errors() {
        let me = Process(std::process::id());
        for version in [0x030a_0cf0, 0x030b_07f0, 0x030d_05f0] {
            let l = names_layout(PyVersion(version)).unwrap();
            for bad in [u64::MAX, MAX_DICT_ENTRIES + 1] {
                let mut keys = [bad; 8];
                // 3.11+: a log2 of the index bytes of 255.
                keys[1] = bad;
                let mut dict = [0u64; 6];
                dict[4] = keys.as_ptr() as u64;
                let got = dict_entries(&me, dict.as_ptr() as u64, &l);
                assert!(got.is_err(), "{version:#x} {bad:#x}: {got:?}");
            }
        }
    }

    #[test]
    fn other_versions_are_refused_not_guessed() {
        for v in [0x030900f0, 0x030e00f0] {
            assert!(matches!(
                names_layout(PyVersion(v)),
                Err(PythonError::Unsupported(_))
            ));
        }
    }
}
