//! `--probe SPEC`: user-defined probes, parsed into typed data before
//! recording starts (what each part means is decided here, once; the
//! kernel stage resolves the names against files and the kernel).
//!
//! ```text
//! uprobe:BIN:FUNC[+OFF][(TYPES)]     a user function's entry (or any instruction)
//! uretprobe:BIN:FUNC                 its return, with the return value
//! ucall:BIN:FUNC[(TYPES)]            entry and return as one row: duration, result
//! usdt:BIN:PROVIDER:NAME[(TYPES)]    an SDT marker (argument locations from its note)
//! kprobe:FUNC[(TYPES)]               a kernel function's entry (fentry)
//! kretprobe:FUNC                     its return (fexit), with the return value
//! kcall:FUNC[(TYPES)]                entry and return as one row
//! tracepoint:CATEGORY:NAME[(FIELD,...)]  a tracepoint, with fields by name
//! ```
//!
//! TYPES: up to six of `i32,u32,i64,u64,ptr,str` (`_` skips a position).
use std::path::PathBuf;

use asys_common::MAX_PROBE_ARGS;

/// What kind of probe a spec asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    Uprobe,
    Uretprobe,
    Ucall,
    Usdt,
    Kprobe,
    Kretprobe,
    Kcall,
    Tracepoint,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 8] = [
        Self::Uprobe,
        Self::Uretprobe,
        Self::Ucall,
        Self::Usdt,
        Self::Kprobe,
        Self::Kretprobe,
        Self::Kcall,
        Self::Tracepoint,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Uprobe => "uprobe",
            Self::Uretprobe => "uretprobe",
            Self::Ucall => "ucall",
            Self::Usdt => "usdt",
            Self::Kprobe => "kprobe",
            Self::Kretprobe => "kretprobe",
            Self::Kcall => "kcall",
            Self::Tracepoint => "tracepoint",
        }
    }

    /// Whether the probe is in the kernel (pointers are kernel addresses).
    pub fn in_kernel(self) -> bool {
        matches!(
            self,
            Self::Kprobe | Self::Kretprobe | Self::Kcall | Self::Tracepoint
        )
    }

    /// Whether its rows carry a return value.
    pub fn has_return(self) -> bool {
        matches!(
            self,
            Self::Uretprobe | Self::Ucall | Self::Kretprobe | Self::Kcall
        )
    }

    /// Whether entry and return make one row.
    pub fn is_call(self) -> bool {
        matches!(self, Self::Ucall | Self::Kcall)
    }
}

/// An argument's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    I32,
    U32,
    I64,
    U64,
    Ptr,
    Str,
}

impl ArgType {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "i32" => Self::I32,
            "u32" => Self::U32,
            "i64" => Self::I64,
            "u64" => Self::U64,
            "ptr" => Self::Ptr,
            "str" => Self::Str,
            _ => return None,
        })
    }

    /// The kernel's code for it (`asys_common::ARG_*`).
    pub fn code(self) -> u8 {
        use asys_common::*;
        match self {
            Self::I32 => ARG_I32,
            Self::U32 => ARG_U32,
            Self::I64 => ARG_I64,
            Self::U64 => ARG_U64,
            Self::Ptr => ARG_PTR,
            Self::Str => ARG_STR,
        }
    }
}

/// What a spec names, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeTarget {
    /// uprobe, uretprobe, ucall: a function (plus an offset) in a file.
    User {
        binary: String,
        function: String,
        offset: u64,
    },
    Usdt {
        binary: String,
        provider: String,
        name: String,
    },
    /// kprobe, kretprobe, kcall.
    Kernel {
        function: String,
    },
    Tracepoint {
        category: String,
        name: String,
    },
}

/// The arguments asked for: types by position, or tracepoint fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeArgs {
    /// Positions whose type is `None` (`_`) are not read.
    Typed(Vec<Option<ArgType>>),
    Fields(Vec<String>),
}

/// One `--probe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// The spec as given: the probe's name in the report.
    pub text: String,
    pub kind: ProbeKind,
    pub target: ProbeTarget,
    pub args: ProbeArgs,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "unknown probe kind {0:?} (one of uprobe, uretprobe, ucall, usdt, kprobe, kretprobe, kcall, tracepoint)"
    )]
    Kind(String),
    #[error("{kind} probe {spec:?}: expected {expected}")]
    Shape {
        kind: &'static str,
        spec: String,
        expected: &'static str,
    },
    #[error("argument type {0:?} unknown (one of i32, u32, i64, u64, ptr, str, _)")]
    ArgType(String),
    #[error("at most {MAX_PROBE_ARGS} arguments, got {0}")]
    TooManyArgs(usize),
    #[error("bad offset {0:?} (a decimal or 0x number)")]
    Offset(String),
    #[error("{0} probes have no arguments of their own (the return value is recorded)")]
    ReturnArgs(&'static str),
}

impl ProbeSpec {
    /// Parses one `--probe` (clap's value parser).
    pub fn parse(spec: &str) -> Result<Self, SpecError> {
        let (kind_s, rest) = spec
            .split_once(':')
            .ok_or_else(|| SpecError::Kind(spec.to_string()))?;
        let kind = ProbeKind::ALL
            .into_iter()
            .find(|k| k.name() == kind_s)
            .ok_or_else(|| SpecError::Kind(kind_s.to_string()))?;
        let (body, arg_text) = match rest.strip_suffix(')').and_then(|r| r.rsplit_once('(')) {
            Some((body, args)) => (body, Some(args)),
            None => (rest, None),
        };
        let shape = |expected| SpecError::Shape {
            kind: kind.name(),
            spec: spec.to_string(),
            expected,
        };
        let nonempty = |s: &str| !s.is_empty();
        let target = match kind {
            ProbeKind::Uprobe | ProbeKind::Uretprobe | ProbeKind::Ucall => {
                let (binary, func) = body
                    .rsplit_once(':')
                    .filter(|(b, f)| nonempty(b) && nonempty(f))
                    .ok_or_else(|| shape("BIN:FUNC"))?;
                let (function, offset) = match func.split_once('+') {
                    Some((f, off)) if kind == ProbeKind::Uprobe => (f, parse_offset(off)?),
                    Some(_) => return Err(shape("BIN:FUNC (no +OFF on a return)")),
                    None => (func, 0),
                };
                ProbeTarget::User {
                    binary: binary.to_string(),
                    function: function.to_string(),
                    offset,
                }
            }
            ProbeKind::Usdt => {
                let mut parts = body.rsplitn(3, ':');
                let (name, provider, binary) = (parts.next(), parts.next(), parts.next());
                match (binary, provider, name) {
                    (Some(b), Some(p), Some(n)) if nonempty(b) && nonempty(p) && nonempty(n) => {
                        ProbeTarget::Usdt {
                            binary: b.to_string(),
                            provider: p.to_string(),
                            name: n.to_string(),
                        }
                    }
                    _ => return Err(shape("BIN:PROVIDER:NAME")),
                }
            }
            ProbeKind::Kprobe | ProbeKind::Kretprobe | ProbeKind::Kcall => {
                if body.is_empty() || body.contains(':') || body.contains('+') {
                    return Err(shape("FUNC"));
                }
                ProbeTarget::Kernel {
                    function: body.to_string(),
                }
            }
            ProbeKind::Tracepoint => {
                let (category, name) = body
                    .split_once(':')
                    .filter(|(c, n)| nonempty(c) && nonempty(n) && !n.contains(':'))
                    .ok_or_else(|| shape("CATEGORY:NAME"))?;
                ProbeTarget::Tracepoint {
                    category: category.to_string(),
                    name: name.to_string(),
                }
            }
        };
        let list: Vec<&str> = match arg_text {
            Some(t) if !t.trim().is_empty() => t.split(',').map(str::trim).collect(),
            _ => Vec::new(),
        };
        if list.len() > MAX_PROBE_ARGS {
            return Err(SpecError::TooManyArgs(list.len()));
        }
        if !list.is_empty() && matches!(kind, ProbeKind::Uretprobe | ProbeKind::Kretprobe) {
            return Err(SpecError::ReturnArgs(kind.name()));
        }
        let args = if kind == ProbeKind::Tracepoint {
            ProbeArgs::Fields(list.iter().map(|s| s.to_string()).collect())
        } else {
            ProbeArgs::Typed(
                list.iter()
                    .map(|t| match *t {
                        "_" => Ok(None),
                        t => ArgType::parse(t)
                            .map(Some)
                            .ok_or_else(|| SpecError::ArgType(t.to_string())),
                    })
                    .collect::<Result<_, _>>()?,
            )
        };
        Ok(Self {
            text: spec.to_string(),
            kind,
            target,
            args,
        })
    }
}

fn parse_offset(s: &str) -> Result<u64, SpecError> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.map_err(|_| SpecError::Offset(s.to_string()))
}

/// Where a file named in a spec is: a path (with a `/`) as given, else a
/// library the dynamic linker's cache knows, else a program on `PATH`.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then(|| std::fs::canonicalize(&p).unwrap_or(p));
    }
    for dir in [
        "/usr/lib/x86_64-linux-gnu",
        "/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/lib64",
        "/usr/lib",
        "/lib",
        "/usr/local/lib",
    ] {
        let p = std::path::Path::new(dir).join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_into_their_parts() {
        let s = ProbeSpec::parse("ucall:./app:work(i32,i64,str)").unwrap();
        assert_eq!(s.kind, ProbeKind::Ucall);
        assert_eq!(
            s.target,
            ProbeTarget::User {
                binary: "./app".into(),
                function: "work".into(),
                offset: 0
            }
        );
        assert_eq!(
            s.args,
            ProbeArgs::Typed(vec![
                Some(ArgType::I32),
                Some(ArgType::I64),
                Some(ArgType::Str)
            ])
        );
        let s = ProbeSpec::parse("usdt:/usr/bin/python3.11:python:function__entry(str,str,i32)")
            .unwrap();
        assert_eq!(
            s.target,
            ProbeTarget::Usdt {
                binary: "/usr/bin/python3.11".into(),
                provider: "python".into(),
                name: "function__entry".into()
            }
        );
        let s = ProbeSpec::parse("uprobe:libc.so.6:malloc+0x4").unwrap();
        assert!(matches!(s.target, ProbeTarget::User { offset: 4, .. }));
        let s = ProbeSpec::parse("tracepoint:syscalls:sys_enter_openat(filename,flags)").unwrap();
        assert_eq!(
            s.args,
            ProbeArgs::Fields(vec!["filename".into(), "flags".into()])
        );
        assert_eq!(
            ProbeSpec::parse("kprobe:do_sys_openat2").unwrap().target,
            ProbeTarget::Kernel {
                function: "do_sys_openat2".into()
            }
        );
    }

    #[test]
    fn bad_specs_name_the_wrong_part() {
        let e = |s: &str| ProbeSpec::parse(s).unwrap_err().to_string();
        assert!(e("xprobe:a:b").contains("unknown probe kind \"xprobe\""));
        assert!(e("uprobe:nofunc").contains("expected BIN:FUNC"));
        assert!(e("usdt:a:b").contains("expected BIN:PROVIDER:NAME"));
        assert!(e("uprobe:a:f(i32,f64)").contains("argument type \"f64\""));
        assert!(e("uprobe:a:f(i32,i32,i32,i32,i32,i32,i32)").contains("at most 6"));
        assert!(e("tracepoint:sched").contains("CATEGORY:NAME"));
        assert!(e("uprobe:a:f+zz").contains("bad offset"));
    }
}
