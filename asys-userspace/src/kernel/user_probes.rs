//! User-defined probes (`--probe`, `probe_spec.rs`): each spec resolved
//! against its file or the kernel (a function's offset, an SDT note's
//! sites, argument locations and semaphore, a kernel function's BTF id, a
//! tracepoint's id and fields), its `UserProbe` written into the kernel's
//! `USER_PROBES`, and its links made. Every probe is attached at load,
//! before the application starts: a uprobe is placed on the file's inode,
//! so processes that map it later get it too, and filtering by the traced
//! set happens in the kernel.
//!
//! Uprobes and USDT markers are uprobe PMU perf events (the kernel's
//! reference counter offset sets an SDT marker's semaphore in every process
//! mapping the file while the probe exists, and clears it when it goes),
//! kernel functions are fentry/fexit programs (BTF-typed, no kprobe
//! events needed: this machine kind's kernel has no CONFIG_KPROBES, and
//! refuses tracing programs too, which is reported as a missing feature),
//! tracepoints are perf tracepoint events;
//! every link carries the probe id as its cookie.
use std::{
    ffi::CString,
    os::{
        fd::{AsRawFd, OwnedFd},
        unix::ffi::OsStrExt,
    },
    path::{Path, PathBuf},
};

use asys_common::{
    ARG_CONST, ARG_MEM, ARG_REG, ARG_STR, ARG_TP_DATA_LOC, ARG_TP_FIELD, ARG_TP_INLINE_STR,
    MAX_PROBE_ARGS, MAX_USER_PROBES, NO_REG, PROBE_AT_ENTRY, PROBE_CALL, PROBE_COOKIE_RETURN,
    PROBE_HAS_STR, PROBE_KERNEL, PROBE_USTACK, ProbeArg, UserProbe,
};
use aya_obj::generated::{
    bpf_attach_type::{self, BPF_TRACE_FENTRY, BPF_TRACE_FEXIT},
    bpf_attr, bpf_cmd,
    bpf_prog_type::{BPF_PROG_TYPE_KPROBE, BPF_PROG_TYPE_TRACEPOINT, BPF_PROG_TYPE_TRACING},
    perf_event_attr,
};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

use super::multi::{self, ProgKind};
use crate::probe_spec::{ArgType, ProbeArgs, ProbeKind, ProbeSpec, ProbeTarget};

/// Why a spec cannot be probed: one line, naming the part that is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("--probe {spec}: no such library or program {binary}")]
    NoBinary { spec: String, binary: String },
    #[error("--probe {spec}: cannot read {path} as ELF: {reason}")]
    BadElf {
        spec: String,
        path: String,
        reason: String,
    },
    #[error("--probe {spec}: no such function {function} in {path}")]
    NoFunction {
        spec: String,
        function: String,
        path: String,
    },
    #[error("--probe {spec}: no SDT note {provider}:{name} in {path}")]
    NoNote {
        spec: String,
        provider: String,
        name: String,
        path: String,
    },
    #[error("--probe {spec}: SDT argument {index} is {text:?}, which asys cannot read")]
    NoteArg {
        spec: String,
        index: usize,
        text: String,
    },
    #[error("--probe {spec}: no such kernel function {function} (not in the kernel's BTF)")]
    NoKernelFunction { spec: String, function: String },
    #[error("--probe {spec}: no such tracepoint {category}:{name}")]
    NoTracepoint {
        spec: String,
        category: String,
        name: String,
    },
    #[error("--probe {spec}: tracepoint {tracepoint} has no field {field}")]
    NoField {
        spec: String,
        tracepoint: String,
        field: String,
    },
    #[error("--probe {spec}: the kernel lacks {feature}")]
    Feature { spec: String, feature: String },
    #[error("--probe {spec}: {arg} arguments asked, the probe has {have}")]
    ArgCount {
        spec: String,
        arg: usize,
        have: usize,
    },
    #[error("--probe: more than {MAX_USER_PROBES} probe sites in all")]
    TooMany,
    #[error("--probe {spec}: attaching: {source}")]
    Attach {
        spec: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--probe {spec}: {source}")]
    Load {
        spec: String,
        #[source]
        source: multi::MultiError,
    },
}

/// What a probe id stands for, for the report.
#[derive(Debug, Clone)]
pub struct ProbeSite {
    /// The spec as given (the probe's name in the report).
    pub name: String,
    pub kind: ProbeKind,
    /// How each argument is shown (None: skipped, `_`).
    pub args: Vec<Option<ArgType>>,
}

/// How a site is attached.
#[derive(Debug, Clone)]
enum Attach {
    Uprobe {
        path: PathBuf,
        offset: u64,
        /// The SDT semaphore's file offset.
        ref_ctr: Option<u64>,
        entry: bool,
        ret: bool,
    },
    Kernel {
        btf_id: u32,
        entry: bool,
        ret: bool,
    },
    Tracepoint {
        id: u64,
    },
}

/// One resolved probe site.
struct Resolved {
    site: ProbeSite,
    kernel: UserProbe,
    attach: Attach,
}

/// Every user-defined probe of a tracer, with its links (closing them
/// removes the probes, and clears SDT semaphores).
#[derive(Default)]
pub struct UserProbes {
    sites: Vec<ProbeSite>,
    links: Vec<OwnedFd>,
    /// Some site's hits carry the user stack (`--probe-backtrace`).
    stacks: bool,
    /// Each program loaded and the verifier's work on it.
    verifier_work: Vec<(&'static str, u32)>,
}

impl UserProbes {
    /// Resolves every spec and attaches it. Call before any map is taken
    /// out of `ebpf` (the programs share its maps).
    pub fn load(
        ebpf: &mut aya::Ebpf,
        object: &[u8],
        specs: &[ProbeSpec],
        backtrace: bool,
    ) -> Result<Self, super::TracerError> {
        if specs.is_empty() {
            return Ok(Self::default());
        }
        let mut resolved = Vec::new();
        let mut btf = None;
        for spec in specs {
            resolved.extend(resolve(spec, &mut btf)?);
        }
        if resolved.len() > MAX_USER_PROBES as usize {
            return Err(ProbeError::TooMany.into());
        }
        let programs = Programs::load(ebpf, object, &specs[0].text, &resolved)?;
        let pmu = super::features::UprobePmu::read();
        let mut table: aya::maps::Array<&mut aya::maps::MapData, UserProbe> =
            aya::maps::Array::try_from(
                ebpf.map_mut("USER_PROBES")
                    .ok_or(super::TracerError::MissingMap("USER_PROBES"))?,
            )
            .map_err(|source| super::TracerError::Map {
                name: "USER_PROBES",
                source,
            })?;
        let mut out = Self::default();
        for (name, fd) in [
            ("user_probe", &programs.uprobe),
            ("user_probe_tp", &programs.tracepoint),
        ] {
            if let Some(n) = multi::verified_instructions(std::os::fd::AsFd::as_fd(fd)) {
                out.verifier_work.push((name, n));
            }
        }
        let mut kernel_progs = programs.kernel.into_iter();
        let _attaching = super::unlinker::attaching();
        for (id, mut r) in resolved.into_iter().enumerate() {
            if r.site.args.iter().flatten().any(|&a| a == ArgType::Str) {
                r.kernel.flags |= PROBE_HAS_STR;
            }
            // Stacks are user stacks: of user-space probes only.
            if backtrace && !r.site.kind.in_kernel() {
                r.kernel.flags |= PROBE_USTACK;
                out.stacks = true;
            }
            table
                .set(id as u32, r.kernel, 0)
                .map_err(|source| super::TracerError::Map {
                    name: "USER_PROBES",
                    source,
                })?;
            let links = match &r.attach {
                Attach::Uprobe { .. } => attach_uprobe(&r, id, pmu, &programs.uprobe)?,
                Attach::Kernel { .. } => attach_kernel_function(&r, id, &mut kernel_progs)?,
                Attach::Tracepoint { id: tp } => {
                    attach_tracepoint(&r, id, *tp, &programs.tracepoint)?
                }
            };
            out.links.extend(links);
            out.sites.push(r.site);
        }
        Ok(out)
    }

    /// Each program loaded for the probes and the verifier's work on it.
    pub fn verifier_work(&self) -> &[(&'static str, u32)] {
        &self.verifier_work
    }

    /// Whether some probe's hits carry the user stack.
    pub fn wants_stacks(&self) -> bool {
        self.stacks
    }

    /// The links, for the tracer's removal of every link (`unlinker.rs`).
    pub fn take_links(&mut self) -> Vec<OwnedFd> {
        std::mem::take(&mut self.links)
    }

    pub fn site(&self, id: u32) -> Option<&ProbeSite> {
        self.sites.get(id as usize)
    }
}

/// The programs the user probes run: one kprobe-type program for every
/// uprobe, one for every tracepoint, and an fentry/fexit program per
/// kernel function end (its function is fixed at load).
struct Programs {
    uprobe: OwnedFd,
    tracepoint: OwnedFd,
    /// In the order of `resolved`'s kernel function ends (entry, then
    /// return, of each).
    kernel: Vec<OwnedFd>,
}

impl Programs {
    fn load(
        ebpf: &mut aya::Ebpf,
        object: &[u8],
        first_spec: &str,
        resolved: &[Resolved],
    ) -> Result<Self, ProbeError> {
        let kind = |prog_type| ProgKind {
            prog_type,
            expected_attach_type: 0,
            attach_btf_id: 0,
        };
        let wanted: Vec<(&'static str, ProgKind)> = vec![
            ("user_probe", kind(BPF_PROG_TYPE_KPROBE as u32)),
            ("user_probe_tp", kind(BPF_PROG_TYPE_TRACEPOINT as u32)),
        ];
        let mut progs = multi::load_as(ebpf, object, &wanted)
            .map_err(|source| ProbeError::Load {
                spec: first_spec.to_string(),
                source,
            })?
            .into_iter();
        let uprobe = progs.next().expect("asked first");
        let tracepoint = progs.next().expect("asked second");
        let mut kernel = Vec::new();
        for r in resolved {
            if let Attach::Kernel { btf_id, entry, ret } = r.attach {
                for (on, name, at) in [
                    (entry, "user_probe_fentry", BPF_TRACE_FENTRY),
                    (ret, "user_probe_fexit", BPF_TRACE_FEXIT),
                ] {
                    if on {
                        kernel.push(load_kernel_function_program(
                            ebpf, object, r, name, at, btf_id,
                        )?);
                    }
                }
            }
        }
        Ok(Self {
            uprobe,
            tracepoint,
            kernel,
        })
    }
}

/// A tracing program (fentry or fexit, `at`) for the kernel function
/// `btf_id`; a kernel that refuses tracing programs lacks the feature,
/// which is said with the spec.
fn load_kernel_function_program(
    ebpf: &mut aya::Ebpf,
    object: &[u8],
    r: &Resolved,
    name: &'static str,
    at: bpf_attach_type,
    btf_id: u32,
) -> Result<OwnedFd, ProbeError> {
    let kind = ProgKind {
        prog_type: BPF_PROG_TYPE_TRACING as u32,
        expected_attach_type: at as u32,
        attach_btf_id: btf_id,
    };
    Ok(multi::load_as(ebpf, object, &[(name, kind)])
        .map_err(|e| ProbeError::Feature {
            spec: r.site.name.clone(),
            feature: format!(
                "kernel function probes: no kprobes (CONFIG_KPROBES) and \
                 fentry/fexit programs refused ({})",
                match e {
                    multi::MultiError::Load { source, .. } => source.to_string(),
                    other => other.to_string(),
                }
            ),
        })?
        .pop()
        .expect("one program asked"))
}

/// The cookie of user probe `id`'s entry or return end.
fn probe_cookie(id: usize, is_ret: bool) -> u64 {
    if is_ret {
        id as u64 | PROBE_COOKIE_RETURN
    } else {
        id as u64
    }
}

/// A user-space site's links: a perf-event uprobe at its entry, its
/// return, or both, each linked to the uprobe program.
fn attach_uprobe(
    r: &Resolved,
    id: usize,
    pmu: Option<super::features::UprobePmu>,
    prog: &OwnedFd,
) -> Result<Vec<OwnedFd>, ProbeError> {
    let Attach::Uprobe {
        path,
        offset,
        ref_ctr,
        entry,
        ret,
    } = &r.attach
    else {
        unreachable!("a uprobe site")
    };
    let err = |source| ProbeError::Attach {
        spec: r.site.name.clone(),
        source,
    };
    let pmu = pmu.ok_or_else(|| ProbeError::Feature {
        spec: r.site.name.clone(),
        feature: "the uprobe PMU (/sys/bus/event_source/devices/uprobe)".into(),
    })?;
    let mut links = Vec::new();
    for (on, is_ret) in [(*entry, false), (*ret, true)] {
        if on {
            let event = open_uprobe(pmu, path, *offset, *ref_ctr, is_ret).map_err(err)?;
            links.push(
                super::perf_uprobe::link(prog, &event, probe_cookie(id, is_ret)).map_err(err)?,
            );
        }
    }
    Ok(links)
}

/// A kernel function's links: its fentry and fexit programs, taken from
/// `programs` in the order they were loaded.
fn attach_kernel_function(
    r: &Resolved,
    id: usize,
    programs: &mut impl Iterator<Item = OwnedFd>,
) -> Result<Vec<OwnedFd>, ProbeError> {
    let Attach::Kernel { entry, ret, .. } = r.attach else {
        unreachable!("a kernel function site")
    };
    let mut links = Vec::new();
    for (on, at, is_ret) in [
        (entry, BPF_TRACE_FENTRY, false),
        (ret, BPF_TRACE_FEXIT, true),
    ] {
        if on {
            let prog = programs
                .next()
                .expect("one program per kernel function end");
            links.push(
                link_tracing(&prog, at as u32, probe_cookie(id, is_ret)).map_err(|source| {
                    ProbeError::Attach {
                        spec: r.site.name.clone(),
                        source,
                    }
                })?,
            );
        }
    }
    Ok(links)
}

/// A tracepoint's link: a perf event of the tracepoint linked to the
/// tracepoint program.
fn attach_tracepoint(
    r: &Resolved,
    id: usize,
    tracepoint: u64,
    prog: &OwnedFd,
) -> Result<Vec<OwnedFd>, ProbeError> {
    let err = |source| ProbeError::Attach {
        spec: r.site.name.clone(),
        source,
    };
    let event = open_perf(PERF_TYPE_TRACEPOINT, tracepoint, 0, 0).map_err(err)?;
    Ok(vec![
        super::perf_uprobe::link(prog, &event, probe_cookie(id, false)).map_err(err)?,
    ])
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `config`'s bits from here are an uprobe's reference counter offset.
const PERF_UPROBE_REF_CTR_OFFSET_SHIFT: u32 = 32;

/// The registers of the System V x86-64 calling convention's integer
/// arguments, as offsets in `struct pt_regs`: rdi, rsi, rdx, rcx, r8, r9.
const SYSV_ARG_REGS: [u8; 6] = [112, 104, 96, 88, 72, 64];

/// One spec on its way to being resolved: what every probe kind makes of
/// it the same way.
struct Request<'a> {
    spec: &'a ProbeSpec,
    /// The argument types asked for (none for a tracepoint's fields).
    typed: Vec<Option<ArgType>>,
    /// The kernel's entry before the arguments go in.
    kernel: UserProbe,
    /// Probed at the function's entry, its return, or both.
    entry: bool,
    ret: bool,
}

impl<'a> Request<'a> {
    fn new(spec: &'a ProbeSpec) -> Self {
        Self {
            spec,
            typed: match &spec.args {
                ProbeArgs::Typed(t) => t.clone(),
                ProbeArgs::Fields(_) => Vec::new(),
            },
            kernel: UserProbe {
                flags: if spec.kind.in_kernel() {
                    PROBE_KERNEL
                } else {
                    0
                } | if spec.kind.is_call() { PROBE_CALL } else { 0 },
                ..UserProbe::default()
            },
            entry: !matches!(spec.kind, ProbeKind::Uretprobe | ProbeKind::Kretprobe),
            ret: spec.kind.has_return(),
        }
    }

    fn text(&self) -> String {
        self.spec.text.clone()
    }

    fn site(&self, args: Vec<Option<ArgType>>) -> ProbeSite {
        ProbeSite {
            name: self.spec.text.clone(),
            kind: self.spec.kind,
            args,
        }
    }
}

/// The sites `spec` names, each with its kernel entry and how it attaches
/// (a USDT marker may have several sites).
fn resolve(
    spec: &ProbeSpec,
    btf: &mut Option<super::btf::Btf>,
) -> Result<Vec<Resolved>, ProbeError> {
    let request = Request::new(spec);
    match &spec.target {
        ProbeTarget::User {
            binary,
            function,
            offset,
        } => resolve_function(request, binary, function, *offset).map(|r| vec![r]),
        ProbeTarget::Usdt {
            binary,
            provider,
            name,
        } => resolve_usdt(request, binary, provider, name),
        ProbeTarget::Kernel { function } => {
            resolve_kernel_function(request, function, btf).map(|r| vec![r])
        }
        ProbeTarget::Tracepoint { category, name } => {
            resolve_tracepoint(request, category, name).map(|r| vec![r])
        }
    }
}

/// `ucall:`/`uprobe:`/`uretprobe:`: a function of a binary, by its symbol,
/// `offset` bytes in; arguments from the System V argument registers.
fn resolve_function(
    mut r: Request<'_>,
    binary: &str,
    function: &str,
    offset: u64,
) -> Result<Resolved, ProbeError> {
    let spec = r.spec;
    let path = binary_path(spec, binary)?;
    let data = read_elf(spec, &path)?;
    let obj = parse_elf(spec, &path, &data)?;
    let vaddr = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .find(|s| s.name() == Ok(function) && s.address() != 0)
        .map(|s| s.address())
        .ok_or_else(|| ProbeError::NoFunction {
            spec: r.text(),
            function: function.to_string(),
            path: path.display().to_string(),
        })?;
    let file_off = vaddr_to_offset(&obj, vaddr + offset).ok_or_else(|| ProbeError::BadElf {
        spec: r.text(),
        path: path.display().to_string(),
        reason: format!("{function} lies in no loaded segment"),
    })?;
    set_typed_args(&mut r.kernel, &r.typed, |i| ProbeArg {
        loc: ARG_REG,
        reg: SYSV_ARG_REGS[i],
        size: 8,
        ..ProbeArg::default()
    });
    if offset == 0 {
        r.kernel.flags |= PROBE_AT_ENTRY;
    }
    Ok(Resolved {
        site: r.site(r.typed.clone()),
        kernel: r.kernel,
        attach: Attach::Uprobe {
            path,
            offset: file_off,
            ref_ctr: None,
            entry: r.entry,
            ret: r.ret,
        },
    })
}

/// `usdt:`: every site of a statically defined marker (SDT note), each
/// with its arguments where the note says they are, and its semaphore.
fn resolve_usdt(
    r: Request<'_>,
    binary: &str,
    provider: &str,
    name: &str,
) -> Result<Vec<Resolved>, ProbeError> {
    let spec = r.spec;
    let path = binary_path(spec, binary)?;
    let data = read_elf(spec, &path)?;
    let obj = parse_elf(spec, &path, &data)?;
    let notes: Vec<SdtNote> = sdt_notes(&obj)
        .into_iter()
        .filter(|n| n.provider == provider && n.name == name)
        .collect();
    if notes.is_empty() {
        return Err(ProbeError::NoNote {
            spec: r.text(),
            provider: provider.to_string(),
            name: name.to_string(),
            path: path.display().to_string(),
        });
    }
    let bad_elf = |reason: String| ProbeError::BadElf {
        spec: r.text(),
        path: path.display().to_string(),
        reason,
    };
    let mut out = Vec::new();
    for note in notes {
        let locs = note.args.split_whitespace().collect::<Vec<_>>();
        if r.typed.len() > locs.len() {
            return Err(ProbeError::ArgCount {
                spec: r.text(),
                arg: r.typed.len(),
                have: locs.len(),
            });
        }
        let mut parsed = Vec::new();
        for (i, l) in locs.iter().enumerate().take(r.typed.len()) {
            parsed.push(parse_sdt_arg(l).ok_or_else(|| ProbeError::NoteArg {
                spec: r.text(),
                index: i,
                text: l.to_string(),
            })?);
        }
        let mut k = r.kernel;
        set_typed_args(&mut k, &r.typed, |i| parsed[i]);
        let offset = vaddr_to_offset(&obj, note.pc)
            .ok_or_else(|| bad_elf(format!("SDT site {:#x} lies in no segment", note.pc)))?;
        let ref_ctr = match note.semaphore {
            0 => None,
            s => Some(
                vaddr_to_offset(&obj, s)
                    .ok_or_else(|| bad_elf(format!("SDT semaphore {s:#x} lies in no segment")))?,
            ),
        };
        out.push(Resolved {
            site: r.site(r.typed.clone()),
            kernel: k,
            attach: Attach::Uprobe {
                path: path.clone(),
                offset,
                ref_ctr,
                entry: true,
                ret: false,
            },
        });
    }
    Ok(out)
}

/// `kcall:`/`kprobe:`/`kretprobe:`: a kernel function, by its BTF id (read
/// once per tracer into `btf`), probed by fentry/fexit programs.
fn resolve_kernel_function(
    mut r: Request<'_>,
    function: &str,
    btf: &mut Option<super::btf::Btf>,
) -> Result<Resolved, ProbeError> {
    if btf.is_none() {
        *btf =
            Some(
                super::btf::Btf::read(super::btf::VMLINUX).map_err(|_| ProbeError::Feature {
                    spec: r.text(),
                    feature: format!(
                        "BTF ({}), which kernel function probes (fentry/fexit) need",
                        super::btf::VMLINUX
                    ),
                })?,
            );
    }
    let btf_id = btf
        .as_ref()
        .and_then(|b| b.func_id(function))
        .ok_or_else(|| ProbeError::NoKernelFunction {
            spec: r.text(),
            function: function.to_string(),
        })?;
    set_typed_args(&mut r.kernel, &r.typed, |i| ProbeArg {
        loc: ARG_REG,
        reg: (i * 8) as u8,
        size: 8,
        ..ProbeArg::default()
    });
    Ok(Resolved {
        site: r.site(r.typed.clone()),
        kernel: r.kernel,
        attach: Attach::Kernel {
            btf_id,
            entry: r.entry,
            ret: r.ret,
        },
    })
}

/// `tracepoint:`: a tracepoint by its id, its named fields read at the
/// offsets its format gives.
fn resolve_tracepoint(
    mut r: Request<'_>,
    category: &str,
    name: &str,
) -> Result<Resolved, ProbeError> {
    let no_tp = || ProbeError::NoTracepoint {
        spec: r.spec.text.clone(),
        category: category.to_string(),
        name: name.to_string(),
    };
    let format =
        super::tracepoint_format::TracepointFormat::read(category, name).map_err(|_| no_tp())?;
    let id = tracepoint_id(category, name).ok_or_else(no_tp)?;
    let ProbeArgs::Fields(fields) = &r.spec.args else {
        unreachable!("tracepoint specs take fields")
    };
    let mut formats = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        let f = format
            .fields
            .iter()
            .find(|f| &f.name == field)
            .ok_or_else(|| ProbeError::NoField {
                spec: r.text(),
                tracepoint: format!("{category}:{name}"),
                field: field.clone(),
            })?;
        let (arg, ty) = tracepoint_arg(f);
        r.kernel.args[i] = arg;
        r.kernel.nargs = i as u32 + 1;
        formats.push(Some(ty));
    }
    Ok(Resolved {
        site: r.site(formats),
        kernel: r.kernel,
        attach: Attach::Tracepoint { id },
    })
}

/// Fills the kernel's arguments from the typed list: position `i` at
/// `loc(i)`, skipped positions left unread.
fn set_typed_args(k: &mut UserProbe, typed: &[Option<ArgType>], loc: impl Fn(usize) -> ProbeArg) {
    for (i, t) in typed.iter().enumerate().take(MAX_PROBE_ARGS) {
        if let Some(t) = t {
            let mut a = loc(i);
            a.kind = t.code();
            k.args[i] = a;
        }
        k.nargs = i as u32 + 1;
    }
}

/// A tracepoint field as an argument: where it is and how it is shown.
fn tracepoint_arg(f: &super::tracepoint_format::Field) -> (ProbeArg, ArgType) {
    let c = f.c_type.as_str();
    let is_char = c.contains("char");
    let base = ProbeArg {
        offset: i64::from(f.offset),
        size: f.size.min(8) as u8,
        signed: u8::from(f.signed),
        ..ProbeArg::default()
    };
    if f.data_loc() {
        return (
            ProbeArg {
                loc: ARG_TP_DATA_LOC,
                kind: ARG_STR,
                ..base
            },
            ArgType::Str,
        );
    }
    if is_char && c.ends_with(']') {
        return (
            ProbeArg {
                loc: ARG_TP_INLINE_STR,
                kind: ARG_STR,
                ..base
            },
            ArgType::Str,
        );
    }
    let ty = if c.contains('*') {
        if is_char { ArgType::Str } else { ArgType::Ptr }
    } else {
        match (f.size > 4, f.signed) {
            (false, true) => ArgType::I32,
            (false, false) => ArgType::U32,
            (true, true) => ArgType::I64,
            (true, false) => ArgType::U64,
        }
    };
    (
        ProbeArg {
            loc: ARG_TP_FIELD,
            kind: ty.code(),
            ..base
        },
        ty,
    )
}

fn tracepoint_id(category: &str, name: &str) -> Option<u64> {
    [
        super::tracepoint_format::TRACEFS,
        super::tracepoint_format::DEBUGFS_TRACING,
    ]
    .iter()
    .find_map(|root| {
        std::fs::read_to_string(
            Path::new(root)
                .join("events")
                .join(category)
                .join(name)
                .join("id"),
        )
        .ok()?
        .trim()
        .parse()
        .ok()
    })
}

fn binary_path(spec: &ProbeSpec, binary: &str) -> Result<PathBuf, ProbeError> {
    crate::probe_spec::find_binary(binary).ok_or_else(|| ProbeError::NoBinary {
        spec: spec.text.clone(),
        binary: binary.to_string(),
    })
}

fn read_elf(spec: &ProbeSpec, path: &Path) -> Result<Vec<u8>, ProbeError> {
    std::fs::read(path).map_err(|e| ProbeError::BadElf {
        spec: spec.text.clone(),
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn parse_elf<'a>(
    spec: &ProbeSpec,
    path: &Path,
    data: &'a [u8],
) -> Result<object::File<'a>, ProbeError> {
    object::File::parse(data).map_err(|e| ProbeError::BadElf {
        spec: spec.text.clone(),
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// The file offset of a virtual address, through the loaded segments.
fn vaddr_to_offset(obj: &object::File<'_>, vaddr: u64) -> Option<u64> {
    obj.segments().find_map(|s| {
        let (off, size) = s.file_range();
        (vaddr >= s.address() && vaddr < s.address() + size).then(|| vaddr - s.address() + off)
    })
}

/// One `stapsdt` note: a marker's site and its arguments' locations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdtNote {
    pub provider: String,
    pub name: String,
    /// The site's virtual address (corrected for prelinking).
    pub pc: u64,
    /// The semaphore's virtual address, 0 if none.
    pub semaphore: u64,
    /// `-4@%eax 8@-16(%rbp) ...`
    pub args: String,
}

/// Every SDT note of the file (`.note.stapsdt`, type 3).
pub fn sdt_notes(obj: &object::File<'_>) -> Vec<SdtNote> {
    let base_section = obj.section_by_name(".stapsdt.base").map(|s| s.address());
    let Some(data) = obj
        .section_by_name(".note.stapsdt")
        .and_then(|s| s.data().ok())
    else {
        return Vec::new();
    };
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
    };
    let u64_at = |d: &[u8], at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(d.get(at..at + 8)?.try_into().ok()?))
    };
    let align = |n: usize| n.div_ceil(4) * 4;
    let mut out = Vec::new();
    let mut at = 0;
    while let (Some(namesz), Some(descsz), Some(kind)) =
        (u32_at(at), u32_at(at + 4), u32_at(at + 8))
    {
        let name_at = at + 12;
        let desc_at = name_at + align(namesz as usize);
        let next = desc_at + align(descsz as usize);
        let owner = data.get(name_at..name_at + namesz as usize);
        let desc = data.get(desc_at..desc_at + descsz as usize);
        if let (3, Some(b"stapsdt\0"), Some(desc)) = (kind, owner, desc)
            && let (Some(pc), Some(base), Some(sema)) =
                (u64_at(desc, 0), u64_at(desc, 8), u64_at(desc, 16))
        {
            let mut strs = desc[24..].split(|&b| b == 0);
            let mut next_str = || String::from_utf8_lossy(strs.next().unwrap_or(b"")).into_owned();
            let (provider, name, args) = (next_str(), next_str(), next_str());
            // A prelinked file's sites moved with its base.
            let shift = base_section.map_or(0, |b| b.wrapping_sub(base));
            out.push(SdtNote {
                provider,
                name,
                pc: pc.wrapping_add(shift),
                semaphore: if sema == 0 {
                    0
                } else {
                    sema.wrapping_add(shift)
                },
                args,
            });
        }
        if next <= at {
            break;
        }
        at = next;
    }
    out
}

/// One SDT argument as the kernel reads it: `-4@%eax` (a register),
/// `8@-80(%rbx)` (memory at a register plus a displacement),
/// `-4@8(%rdx,%rsi,4)` and `-8@4096(,%rdi,8)` (memory at a base, if any,
/// plus an index register times 1, 2, 4 or 8, plus a displacement), `4@$5`
/// (a constant). None for the forms asys does not read: `%rip`-relative
/// and symbolic displacements (`8@counter(%rip)`, none in the binaries
/// the tests read), other registers (`%xmm0`), other sizes.
pub fn parse_sdt_arg(text: &str) -> Option<ProbeArg> {
    let (size, loc) = text.split_once('@')?;
    let size: i32 = size.parse().ok()?;
    let (bytes, signed) = (size.unsigned_abs() as u8, u8::from(size < 0));
    if ![1, 2, 4, 8].contains(&bytes) {
        return None;
    }
    let base = ProbeArg {
        size: bytes,
        signed,
        ..ProbeArg::default()
    };
    if let Some(c) = loc.strip_prefix('$') {
        return Some(ProbeArg {
            loc: ARG_CONST,
            offset: c.parse().ok()?,
            ..base
        });
    }
    if let Some(reg) = loc.strip_prefix('%') {
        return Some(ProbeArg {
            loc: ARG_REG,
            reg: register_offset(reg)?,
            ..base
        });
    }
    let (off, rest) = loc.split_once('(')?;
    let offset = if off.is_empty() { 0 } else { off.parse().ok()? };
    let mut parts = rest.strip_suffix(')')?.split(',');
    let reg = match parts.next()? {
        "" => NO_REG,
        r => register_offset(r.strip_prefix('%')?)?,
    };
    let (index, scale) = match (parts.next(), parts.next(), parts.next()) {
        (None, None, None) if reg != NO_REG => (0, 0),
        (Some(i), scale, None) => {
            // An index register without a scale is scaled by 1.
            let scale = scale.map_or(Some(1), |s| s.parse().ok())?;
            if ![1, 2, 4, 8].contains(&scale) {
                return None;
            }
            (register_offset(i.strip_prefix('%')?)?, scale)
        }
        _ => return None,
    };
    Some(ProbeArg {
        loc: ARG_MEM,
        reg,
        index,
        scale,
        offset,
        ..base
    })
}

/// The offset in x86-64's `struct pt_regs` of a register by any of its
/// names (`rax`, `eax`, `ax`, `al`, `r8d`, ...).
/// `%rip` is not among them: a `%rip`-relative operand's displacement is
/// a symbol of the file, which the note does not resolve.
fn register_offset(name: &str) -> Option<u8> {
    const REGS: [(&[&str], u8); 16] = [
        (&["r15", "r15d", "r15w", "r15b"], 0),
        (&["r14", "r14d", "r14w", "r14b"], 8),
        (&["r13", "r13d", "r13w", "r13b"], 16),
        (&["r12", "r12d", "r12w", "r12b"], 24),
        (&["rbp", "ebp", "bp", "bpl"], 32),
        (&["rbx", "ebx", "bx", "bl"], 40),
        (&["r11", "r11d", "r11w", "r11b"], 48),
        (&["r10", "r10d", "r10w", "r10b"], 56),
        (&["r9", "r9d", "r9w", "r9b"], 64),
        (&["r8", "r8d", "r8w", "r8b"], 72),
        (&["rax", "eax", "ax", "al"], 80),
        (&["rcx", "ecx", "cx", "cl"], 88),
        (&["rdx", "edx", "dx", "dl"], 96),
        (&["rsi", "esi", "si", "sil"], 104),
        (&["rdi", "edi", "di", "dil"], 112),
        (&["rsp", "esp", "sp", "spl"], 152),
    ];
    REGS.iter()
        .find(|(names, _)| names.contains(&name))
        .map(|&(_, off)| off)
}

fn open_uprobe(
    pmu: super::features::UprobePmu,
    path: &Path,
    offset: u64,
    ref_ctr: Option<u64>,
    ret: bool,
) -> std::io::Result<OwnedFd> {
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("path contains NUL"))?;
    let mut config = if ret { 1 << pmu.retprobe_bit } else { 0 };
    if let Some(r) = ref_ctr {
        config |= r << PERF_UPROBE_REF_CTR_OFFSET_SHIFT;
    }
    open_perf(pmu.perf_type, config, cpath.as_ptr() as u64, offset)
}

/// A perf event of `type_` for every process (pid -1 on CPU 0: the BPF
/// program runs wherever the probe fires, and filters in the kernel).
fn open_perf(type_: u32, config: u64, config1: u64, config2: u64) -> std::io::Result<OwnedFd> {
    // SAFETY: perf_event_attr is plain integers; all-zero is "unset".
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.size = size_of::<perf_event_attr>() as u32;
    attr.type_ = type_;
    attr.config = config;
    attr.__bindgen_anon_3.config1 = config1;
    attr.__bindgen_anon_4.config2 = config2;
    // Any path config1 points to outlives the call.
    super::perf_uprobe::perf_event_open(&attr, -1, 0)
}

fn link_tracing(prog: &OwnedFd, attach_type: u32, cookie: u64) -> std::io::Result<OwnedFd> {
    // SAFETY: all-zero is a valid bpf_attr (plain integers), "unset".
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the union's BPF_LINK_CREATE member, the one this command reads.
    let l = unsafe { &mut attr.link_create };
    l.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    l.attach_type = attach_type;
    // The function is the program's own (its attach_btf_id at load).
    l.__bindgen_anon_3.tracing.cookie = cookie;
    multi::bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr)
}

/// A hit's arguments as text: numbers in decimal (pointers in hex), strings
/// quoted and escaped; an argument that could not be read is `?`. The
/// kernel sent each value as its note (or tracepoint format) says, sign-
/// or zero-extended to 64 bits from its size ([`ProbeArg::extend`]); here
/// it becomes the type asked for: `i32` and `u32` its low 4 bytes.
pub fn format_args(site: &ProbeSite, ev: &asys_common::ProbeHitEvent) -> String {
    let mut out = Vec::new();
    for (i, ty) in site.args.iter().enumerate().take(MAX_PROBE_ARGS) {
        let Some(ty) = ty else {
            out.push("_".to_string());
            continue;
        };
        if ev.flags & (1 << (8 + i)) != 0 {
            out.push("?".to_string());
            continue;
        }
        out.push(format_value(*ty, ev.args[i], &ev.strs[i]));
    }
    out.join(", ")
}

/// One argument, `v` (the 64-bit value the kernel sent), as type `ty`;
/// `s` is a `str` argument's bytes.
fn format_value(ty: ArgType, v: u64, s: &[u8]) -> String {
    match ty {
        ArgType::I32 => (v as i32).to_string(),
        ArgType::U32 => (v as u32).to_string(),
        ArgType::I64 => (v as i64).to_string(),
        ArgType::U64 => v.to_string(),
        ArgType::Ptr => format!("{v:#x}"),
        ArgType::Str => {
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            format!("{:?}", String::from_utf8_lossy(&s[..end]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdt_arguments_become_register_and_memory_reads() {
        let a = parse_sdt_arg("-4@%eax").unwrap();
        assert_eq!((a.loc, a.reg, a.size, a.signed), (ARG_REG, 80, 4, 1));
        let a = parse_sdt_arg("8@-80(%rbx)").unwrap();
        assert_eq!((a.loc, a.reg, a.offset, a.size), (ARG_MEM, 40, -80, 8));
        assert_eq!(a.scale, 0);
        let a = parse_sdt_arg("1@(%rdi)").unwrap();
        assert_eq!((a.loc, a.reg, a.offset, a.scale), (ARG_MEM, 112, 0, 0));
        let a = parse_sdt_arg("4@$5").unwrap();
        assert_eq!((a.loc, a.offset), (ARG_CONST, 5));
        assert!(parse_sdt_arg("8@foo(%rip)").is_none());
        assert!(parse_sdt_arg("8@8(%rip)").is_none());
        assert!(parse_sdt_arg("8@%xmm0").is_none());
        assert!(parse_sdt_arg("16@%rax").is_none());
    }

    #[test]
    fn indexed_sdt_arguments_read_base_plus_index_times_scale() {
        // (text, base, index, scale, displacement, size, signed)
        for (text, reg, index, scale, offset, size, signed) in [
            ("-8@(%rdi,%rsi,8)", 112, 104, 8, 0, 8, 1),
            ("-4@8(%rdx,%rsi,4)", 96, 104, 4, 8, 4, 1),
            ("-8@48(%rsp,%rax,8)", 152, 80, 8, 48, 8, 1),
            ("2@-6(%rbp,%rcx,2)", 32, 88, 2, -6, 2, 0),
            ("1@(%r8,%r9)", 72, 64, 1, 0, 1, 0),
            ("-8@268435456(,%rdi,8)", NO_REG, 112, 8, 268_435_456, 8, 1),
            ("4@(,%r12,1)", NO_REG, 24, 1, 0, 4, 0),
        ] {
            let a = parse_sdt_arg(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(
                (a.loc, a.reg, a.index, a.scale, a.offset, a.size, a.signed),
                (ARG_MEM, reg, index, scale, offset, size, signed),
                "{text}"
            );
        }
        for bad in [
            "8@(%rdi,%rsi,3)",
            "8@(%rdi,%rsi,8,1)",
            "8@()",
            "8@16()",
            "8@(%rdi,%xmm0,8)",
            "8@arr(,%rax,8)",
            "8@(%rip,%rax,8)",
        ] {
            assert!(parse_sdt_arg(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn values_read_as_their_note_says_then_as_the_type_asked() {
        use ArgType::*;
        // A constant's value is the note's text; the kernel reads it as
        // `read_arg` does (`extend` of the constant), then it is shown.
        for (note, ty, want) in [
            ("4@$-202182160", I64, "4092785136"),
            ("4@$-202182160", U32, "4092785136"),
            ("4@$-202182160", I32, "-202182160"),
            ("4@$-202182160", Ptr, "0xf3f2f1f0"),
            ("-4@$-202182160", I64, "-202182160"),
            ("-4@$-202182160", Ptr, "0xfffffffff3f2f1f0"),
            ("-2@$-3600", I32, "-3600"),
            ("-2@$-3600", I64, "-3600"),
            ("-2@$-3600", U64, "18446744073709548016"),
            ("2@$-3600", I32, "61936"),
            ("1@$-16", I64, "240"),
            ("1@$-16", I32, "240"),
            ("-1@$-16", I32, "-16"),
            ("-1@$-16", U32, "4294967280"),
            ("8@$-1", U64, "18446744073709551615"),
            ("8@$-1", I32, "-1"),
            ("-8@$4294967296", I32, "0"),
            ("-8@$4294967296", I64, "4294967296"),
        ] {
            let a = parse_sdt_arg(note).unwrap();
            let v = a.extend(a.offset as u64);
            assert_eq!(format_value(ty, v, &[]), want, "{note} as {ty:?}");
        }
    }

    /// Every SDT note argument of `path`, with the note's provider:name.
    fn note_args(path: &str) -> Vec<(String, String)> {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let obj = object::File::parse(&*data).unwrap();
        let notes = sdt_notes(&obj);
        assert!(!notes.is_empty(), "{path} has no SDT notes");
        notes
            .iter()
            .flat_map(|n| {
                n.args
                    .split_whitespace()
                    .map(|a| (format!("{}:{}", n.provider, n.name), a.to_string()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// An argument's form: `-4@%R`, `8@D(%R)`, `-4@D(%R,%R,S)`, `4@$C`.
    fn operand_form(a: &ProbeArg) -> String {
        let size = if a.signed != 0 {
            -i32::from(a.size)
        } else {
            i32::from(a.size)
        };
        let loc = match a.loc {
            ARG_REG => "%R".to_string(),
            ARG_CONST => "$C".to_string(),
            _ => format!(
                "{}({}{})",
                if a.offset != 0 { "D" } else { "" },
                if a.reg == NO_REG { "" } else { "%R" },
                if a.scale != 0 { ",%R,S" } else { "" }
            ),
        };
        format!("{size}@{loc}")
    }

    #[test]
    fn every_sdt_argument_of_libstdcxx_cpython_and_libjvm_is_read() {
        // Debian's libstdc++ and CPython 3.11, and OpenJDK 17's libjvm
        // (`cargo xtask test` installs openjdk-17-jre-headless); any other
        // JVM installed is read too.
        let mut paths = vec![
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6".to_string(),
            "/usr/bin/python3.11".to_string(),
        ];
        let debian_jvm = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";
        assert!(
            Path::new(debian_jvm).is_file(),
            "{debian_jvm} is missing: install openjdk-17-jre-headless (cargo xtask test does)"
        );
        let mut jvms: Vec<String> = std::fs::read_dir("/usr/lib/jvm")
            .unwrap()
            .filter_map(|e| {
                let p = e.ok()?.path().join("lib/server/libjvm.so");
                // `java-1.17.0-openjdk-amd64` is a link to the same folder.
                let real = std::fs::canonicalize(&p).ok()?;
                Some(real.display().to_string())
            })
            .collect();
        jvms.sort();
        jvms.dedup();
        paths.extend(jvms);
        let mut unread = Vec::new();
        for path in &paths {
            let mut forms = std::collections::BTreeMap::<String, usize>::new();
            let args = note_args(path);
            for (note, text) in &args {
                match parse_sdt_arg(text) {
                    Some(a) => *forms.entry(operand_form(&a)).or_default() += 1,
                    None => unread.push(format!("{path} {note}: {text}")),
                }
            }
            eprintln!("{path}: {} arguments, forms {forms:?}", args.len());
        }
        assert!(
            unread.is_empty(),
            "unread SDT arguments:\n{}",
            unread.join("\n")
        );
    }

    #[test]
    fn libstdcxx_has_throw_and_catch_notes() {
        let path = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
        // Debian's libstdc++ (g++ and the C++ tests need it).
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let obj = object::File::parse(&*data).unwrap();
        let notes = sdt_notes(&obj);
        for n in ["throw", "catch", "rethrow"] {
            assert!(
                notes
                    .iter()
                    .any(|x| x.provider == "libstdcxx" && x.name == n),
                "{n}: {notes:?}"
            );
        }
    }
}
