//! `--type kineto`: the report as a Chrome trace in the layout the PyTorch
//! profiler (Kineto) writes (`BASE.pt.trace.json`), which Meta's Holistic
//! Trace Analysis (HTA), AMD's TraceLens, Perfetto and chrome://tracing
//! read. One file per report: HTA takes each file as one rank, named by
//! `distributedInfo.rank`. See docs/export.md for the fields, and for what
//! HTA reads that asys does not record.
//!
//! Events are written as the tables are read, a batch at a time (the
//! hgtx/nvtx ranges, rebuilt from their calls, are the exception, as in
//! every reader of them); what is kept besides is a bit per correlation id
//! that has device work ([`Launched`]), and the collective libraries' calls
//! with the launches inside them ([`collectives`]). Times are microseconds of the report's clock
//! (CLOCK_MONOTONIC) with the nanoseconds as three decimals;
//! `baseTimeNanoseconds` carries them to wall time, as in Kineto's traces.
use std::{collections::BTreeSet, io::Write, path::Path};

mod collectives;

use arrow::array::Array;
use serde::{Serialize, Serializer, ser::SerializeMap};

use self::collectives::Collectives;
use super::{ExportError, perfetto::copy_name};
use crate::{
    report::{
        container::Container,
        read::{
            activity,
            api::CallColumns,
            processes::{Commands, process_ranks},
            ranges as hgtx,
            symbols::kernel_name_ids,
        },
        reader,
        schema::{self, ActivityKind, api},
        strings::StringTable,
    },
    stats::filter::RangeFilter,
};

/// What `--type kineto` takes besides the report.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--kineto-steps name[@domain]`: the hgtx/nvtx ranges that are the
    /// iterations, written as `ProfilerStep#N` (N from 0, in start order).
    pub steps: Option<RangeFilter>,
    /// `--tables`: the report tables to read (None: all). `hgtx_api` and
    /// `nvtx_api` give the ranges, the other `*_api` tables the calls,
    /// `hggc_activity` the device work.
    pub tables: Option<Vec<String>>,
    /// `--kineto-cuda-names true`: HGGC runtime calls named as CUDA's
    /// (`hggcLaunchKernel` as `cudaLaunchKernel`), the names by which HTA's
    /// launch statistics and queue lengths find the calls that launch
    /// device work. The call's own name is kept in arg `hggc name`.
    pub cuda_names: bool,
}

impl Options {
    fn want(&self, table: &str) -> bool {
        self.tables
            .as_ref()
            .is_none_or(|t| t.iter().any(|n| n == table))
    }
}

/// Kineto's categories, the ones HTA's filters name.
pub mod category {
    pub const KERNEL: &str = "kernel";
    pub const MEMCPY: &str = "gpu_memcpy";
    pub const MEMSET: &str = "gpu_memset";
    /// CUDA runtime calls; HGGC's runtime calls too (HTA knows no other
    /// runtime's category).
    pub const RUNTIME: &str = "cuda_runtime";
    /// CUDA driver calls (`cu` and an upper-case letter).
    pub const DRIVER: &str = "cuda_driver";
    /// Every other traced library's calls (pccl, nccl, osrt, acblas, ...).
    pub const CPU_OP: &str = "cpu_op";
    /// hgtx/nvtx ranges, and the iterations (`ProfilerStep#N`).
    pub const USER_ANNOTATION: &str = "user_annotation";
    /// The flow from a runtime call to its device work.
    pub const FLOW: &str = "ac2g";
}

/// The collective operations a communication kernel's name may hold, and
/// what the PyTorch profiler calls them in `Collective name`. Longer
/// names first: `Reduce` is in `AllReduce` and `ReduceScatter`.
const COLLECTIVES: &[(&str, &str)] = &[
    ("AllReduce", "allreduce"),
    ("ReduceScatter", "reduce_scatter"),
    ("AllGather", "all_gather"),
    ("AlltoAll", "all_to_all"),
    ("AllToAll", "all_to_all"),
    ("Broadcast", "broadcast"),
    ("Bcast", "broadcast"),
    ("SendRecv", "send_recv"),
    ("Reduce", "reduce"),
    ("Gather", "gather"),
    ("Scatter", "scatter"),
    ("Send", "send"),
    ("Recv", "recv"),
];

/// The PyTorch name of the collective a kernel runs: kernels of NCCL
/// (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`) and PCCL
/// (`pcclKernel_AllReduce`) name it.
pub fn collective_of(kernel: &str) -> Option<&'static str> {
    if !(kernel.starts_with("nccl") || kernel.starts_with("pccl")) {
        return None;
    }
    COLLECTIVES
        .iter()
        .find(|(op, _)| kernel.contains(op))
        .map(|&(_, name)| name)
}

/// The category of an API table's call.
fn call_category(table: &str, name: &str) -> &'static str {
    match table {
        "hggc_api" => category::RUNTIME,
        "cuda_api" => {
            let b = name.as_bytes();
            if name.starts_with("cuda") {
                category::RUNTIME
            } else if b.len() > 2 && b.starts_with(b"cu") && b[2].is_ascii_uppercase() {
                category::DRIVER
            } else {
                category::CPU_OP
            }
        }
        _ => category::CPU_OP,
    }
}

/// Nanoseconds as Kineto's microseconds: the nanoseconds are the three
/// decimals (a double holds them exactly up to 2^53 ns, 104 days).
fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

/// An event's argument value.
#[derive(Serialize)]
#[serde(untagged)]
enum Arg<'a> {
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(&'a str),
    Dims([u32; 3]),
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}
impl From<u64> for Arg<'_> {
    fn from(v: u64) -> Self {
        Arg::Uint(v)
    }
}
impl From<u32> for Arg<'_> {
    fn from(v: u32) -> Self {
        Arg::Uint(v.into())
    }
}
impl From<f64> for Arg<'_> {
    fn from(v: f64) -> Self {
        Arg::Float(v)
    }
}
impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Str(v)
    }
}
impl From<[u32; 3]> for Arg<'_> {
    fn from(v: [u32; 3]) -> Self {
        Arg::Dims(v)
    }
}

/// An event's `args`, in the order added (a JSON object; no allocation per
/// key, as the keys are the export's own).
#[derive(Default)]
struct Args<'a>(Vec<(&'static str, Arg<'a>)>);

impl Args<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Args<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One trace event, as Chrome's trace format and Kineto write it.
#[derive(Serialize)]
struct Event<'a> {
    ph: &'static str,
    cat: &'a str,
    name: &'a str,
    pid: u64,
    tid: u64,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    #[serde(skip_serializing_if = "Args::is_empty")]
    args: Args<'a>,
}

impl<'a> Event<'a> {
    /// A complete event ("X") from `start` to `end` (ns).
    fn span(cat: &'a str, name: &'a str, pid: u64, tid: u64, start: i64, end: i64) -> Self {
        Self {
            ph: "X",
            cat,
            name,
            pid,
            tid,
            ts: us(start),
            dur: Some(us(end.max(start) - start)),
            id: None,
            bp: None,
            args: Args::default(),
        }
    }

    fn arg(mut self, key: &'static str, value: impl Into<Arg<'a>>) -> Self {
        self.args.0.push((key, value.into()));
        self
    }
}

struct Trace<'a, W: Write> {
    out: W,
    path: &'a Path,
    first: bool,
}

impl<W: Write> Trace<'_, W> {
    fn io(&self, e: std::io::Error) -> ExportError {
        ExportError::io(self.path, e)
    }

    fn raw(&mut self, s: &str) -> Result<(), ExportError> {
        self.out.write_all(s.as_bytes()).map_err(|e| self.io(e))
    }

    /// One event of `traceEvents`, on a line of its own.
    fn event(&mut self, e: &Event) -> Result<(), ExportError> {
        let sep = if self.first { "\n  " } else { ",\n  " };
        self.first = false;
        self.raw(sep)?;
        serde_json::to_writer(&mut self.out, e).map_err(|e| self.io(std::io::Error::other(e)))
    }

    /// A metadata event ("M") naming a process or thread.
    fn label(&mut self, what: &str, pid: u64, tid: u64, name: &str) -> Result<(), ExportError> {
        let args = Args(vec![("name", Arg::Str(name))]);
        let e = Event {
            ph: "M",
            cat: "",
            name: what,
            pid,
            tid,
            ts: 0.0,
            dur: None,
            id: None,
            bp: None,
            args,
        };
        self.event(&e)
    }
}

/// The rank of a report: the one it recorded (its launched process's
/// `RANK`, `SLURM_PROCID`, ...), else the lowest of its processes' (a
/// report of an older asys, or of ranks that disagree).
pub fn report_rank(report: &Container) -> Result<Option<u32>, ExportError> {
    match report.metadata.rank {
        Some(r) => Ok(Some(r)),
        None => Ok(process_ranks(report)?.values().copied().min()),
    }
}

/// Writes `report` as a Kineto trace to `out` (`path` names it in errors).
pub fn export(
    report: &Container,
    options: &Options,
    out: impl Write,
    path: &Path,
) -> Result<(), ExportError> {
    let strings = reader::string_table(report)?;
    let commands = Commands::read(report)?;
    let rank = report_rank(report)?;
    let mut t = Trace {
        out,
        path,
        first: true,
    };
    let api_tables: Vec<String> = report
        .tables()
        .filter(|n| n.ends_with("_api") && *n != hgtx::HGTX.table && *n != hgtx::NVTX.table)
        .filter(|n| options.want(n))
        .map(str::to_owned)
        .collect();
    let devices_wanted = options.want(schema::HGGC_ACTIVITY);
    // The collectives' sizes go on their kernels: none without them.
    let mut collectives = if devices_wanted {
        Collectives::read(report, &strings, &api_tables)?
    } else {
        Collectives::default()
    };
    let m = &report.metadata;
    // The header, its fields on the first line: HTA finds a file's rank
    // with the pattern `"rank":\s+(\d+)` on the first line that has one.
    let mut header = String::from("{\"schemaVersion\": 1");
    if let Some(rank) = rank {
        header.push_str(&format!(
            ", \"distributedInfo\": {{\"backend\": \"asys\", \"rank\": {rank}"
        ));
        if let Some(n) = collectives.world_size() {
            header.push_str(&format!(", \"world_size\": {n}"));
        }
        header.push('}');
    }
    header.push_str(&format!(
        ", \"baseTimeNanoseconds\": {}, \"displayTimeUnit\": \"ms\", \"traceName\": {}",
        m.start_realtime_ns.saturating_sub(m.start_monotonic_ns),
        serde_json::to_string(&report.path.display().to_string())
            .map_err(|e| t.io(std::io::Error::other(e)))?,
    ));
    header.push_str(",\n\"traceEvents\": [");
    t.raw(&header)?;
    let mut pids = BTreeSet::new();
    ranges(&mut t, report, options, &mut pids)?;
    // Flows end at device work: none when it is left out.
    let launched = if devices_wanted {
        Launched::read(report)?
    } else {
        Launched::default()
    };
    for table in &api_tables {
        let mut call = Calls {
            table,
            launched: &launched,
            collectives: &mut collectives,
            pids: &mut pids,
        };
        calls(&mut t, report, &strings, options, &mut call)?;
    }
    let devices = if devices_wanted {
        activity(
            &mut t,
            report,
            &strings,
            rank,
            &collectives,
            options.cuda_names,
        )?
    } else {
        BTreeSet::new()
    };
    for pid in pids {
        let name = commands
            .process(pid)
            .and_then(|id| strings.get(id))
            .map(str::to_owned)
            .unwrap_or_else(|| format!("[{pid}]"));
        t.label("process_name", u64::from(pid), 0, &name)?;
    }
    for (device, stream) in devices {
        t.label(
            "process_name",
            u64::from(device),
            0,
            &format!("PPU {device}"),
        )?;
        t.label(
            "thread_name",
            u64::from(device),
            u64::from(stream),
            &format!("stream {stream}"),
        )?;
    }
    t.raw("\n]}\n")?;
    t.out.flush().map_err(|e| t.io(e))
}

/// hgtx and nvtx ranges as user annotations on their threads; those
/// `--kineto-steps` names as `ProfilerStep#N`.
fn ranges<W: Write>(
    t: &mut Trace<W>,
    report: &Container,
    options: &Options,
    pids: &mut BTreeSet<u32>,
) -> Result<(), ExportError> {
    let mut all = Vec::new();
    for family in [hgtx::HGTX, hgtx::NVTX] {
        if options.want(family.table) && report.tables().any(|n| n == family.table) {
            all.extend(hgtx::ranges(report, family)?);
        }
    }
    all.sort_by_key(|r| (r.start, r.pid, r.tid));
    let mut step = 0usize;
    let mut matched = 0usize;
    for r in &all {
        pids.insert(r.pid);
        let is_step = match &options.steps {
            Some(f) if f.matches(r) => {
                matched += 1;
                f.index.is_none_or(|i| i == matched - 1)
            }
            _ => false,
        };
        let name = if is_step {
            step += 1;
            format!("ProfilerStep#{}", step - 1)
        } else if r.domain.is_empty() {
            r.name.clone()
        } else {
            format!("{}@{}", r.name, r.domain)
        };
        let mut e = Event::span(
            category::USER_ANNOTATION,
            &name,
            u64::from(r.pid),
            u64::from(r.tid),
            r.start,
            r.end,
        );
        if is_step {
            e = e.arg("range", r.name.as_str());
        }
        if !r.domain.is_empty() {
            e = e.arg("domain", r.domain.as_str());
        }
        t.event(&e)?;
    }
    Ok(())
}

/// The correlation ids that have device work, per process, so that a
/// flow starts only at a call whose device work is in the trace (as Kineto
/// writes them). A bit per id: a runtime numbers its calls from 1, so 10 M
/// operations take about a megabyte; an id past [`Self::DENSE`] goes in a
/// set instead.
#[derive(Default)]
struct Launched {
    bits: std::collections::HashMap<u32, Vec<u64>>,
    sparse: std::collections::HashSet<(u32, u32)>,
}

impl Launched {
    const DENSE: u32 = 1 << 26;

    fn read(report: &Container) -> Result<Self, ExportError> {
        use crate::report::schema::activity as ac;
        let mut out = Self::default();
        for b in ac::scan(report, &[ac::PID, ac::CORRELATION_ID])? {
            let b = b?;
            let v = ac::View(&b);
            let (pid, corr) = (v.pid()?, v.correlation_id()?);
            for i in 0..b.num_rows() {
                out.insert(pid[i], corr[i]);
            }
        }
        Ok(out)
    }

    fn insert(&mut self, pid: u32, corr: u32) {
        if corr >= Self::DENSE {
            self.sparse.insert((pid, corr));
            return;
        }
        let bits = self.bits.entry(pid).or_default();
        let word = (corr / 64) as usize;
        if bits.len() <= word {
            bits.resize(word + 1, 0);
        }
        bits[word] |= 1 << (corr % 64);
    }

    fn contains(&self, pid: u32, corr: u32) -> bool {
        if corr >= Self::DENSE {
            return self.sparse.contains(&(pid, corr));
        }
        self.bits
            .get(&pid)
            .and_then(|b| b.get((corr / 64) as usize))
            .is_some_and(|w| w & (1 << (corr % 64)) != 0)
    }
}

/// What [`calls`] reads one API table with, and what it adds to.
struct Calls<'a> {
    table: &'a str,
    /// The correlation ids with device work.
    launched: &'a Launched,
    /// Told of each call with device work, to find the collectives'.
    collectives: &'a mut Collectives,
    /// The processes seen, to name.
    pids: &'a mut BTreeSet<u32>,
}

/// One API table's calls on their threads; a call with a correlation id
/// carries it, and one with device work (`launched`) starts the flow
/// (`ac2g`) to it.
fn calls<W: Write>(
    t: &mut Trace<W>,
    report: &Container,
    strings: &StringTable,
    options: &Options,
    cx: &mut Calls,
) -> Result<(), ExportError> {
    let Calls {
        table,
        launched,
        ref mut collectives,
        ref mut pids,
    } = *cx;
    let find_collectives = !collectives.is_empty();
    let rename = options.cuda_names && table == schema::HGGC_API;
    let cols = [CallColumns::NAMES, &[api::CORRELATION_ID, api::BYTES]].concat();
    for b in api::scan(report, table, &cols)? {
        let b = b?;
        let c = CallColumns::of(&b)?;
        let v = api::View(&b);
        let (corr, bytes) = (v.correlation_id()?, v.bytes()?);
        for i in 0..b.num_rows() {
            pids.insert(c.pid[i]);
            let own = strings.get(c.name[i]).unwrap_or("[unknown]");
            let cuda = own
                .strip_prefix("hggc")
                .filter(|_| rename)
                .map(|rest| format!("cuda{rest}"));
            let name = cuda.as_deref().unwrap_or(own);
            let c_pid = c.pid[i];
            let (pid, tid) = (u64::from(c_pid), u64::from(c.tid[i]));
            let mut e = Event::span(
                call_category(table, own),
                name,
                pid,
                tid,
                c.start[i],
                c.end[i],
            )
            .arg("returnValue", c.ret[i]);
            if cuda.is_some() {
                e = e.arg("hggc name", own);
            }
            let corr = (!corr.is_null(i)).then(|| corr.value(i));
            if let Some(corr) = corr {
                e = e.arg("correlation", corr);
            }
            if !bytes.is_null(i) {
                e = e.arg("bytes", bytes.value(i));
            }
            t.event(&e)?;
            if let Some(corr) = corr.filter(|&c| launched.contains(c_pid, c)) {
                if find_collectives {
                    collectives.call(c_pid, c.tid[i], c.start[i], corr);
                }
                t.event(&Event {
                    ph: "s",
                    cat: category::FLOW,
                    name: category::FLOW,
                    pid,
                    tid,
                    ts: us(c.start[i]),
                    dur: None,
                    id: Some(u64::from(corr)),
                    bp: None,
                    args: Args::default(),
                })?;
            }
        }
    }
    Ok(())
}

/// Kernels, copies and memsets on pid = device, tid = stream, as Kineto
/// puts them; each ends its runtime call's flow. Returns the (device,
/// stream)s seen.
fn activity<W: Write>(
    t: &mut Trace<W>,
    report: &Container,
    strings: &StringTable,
    rank: Option<u32>,
    collectives: &Collectives,
    cuda_names: bool,
) -> Result<BTreeSet<(u32, u32)>, ExportError> {
    let names = kernel_name_ids(report)?;
    let mut seen = BTreeSet::new();
    for b in activity::scan_trace(report)? {
        let b = b?;
        for (a, stored_kind) in activity::rows_with_stored_kind(&b)? {
            seen.insert((a.device, a.stream));
            let (addr_name, nccl_name);
            let mut pccl_name = None;
            let (cat, name) = match a.kind {
                Some(ActivityKind::Kernel) => {
                    let name = match a.kernel_addr.and_then(|addr| names.get(&(a.pid, addr))) {
                        Some(&id) => strings.get(id).unwrap_or("[unknown]"),
                        // Not symbolized: the address, as stats names it.
                        None => {
                            addr_name = a
                                .kernel_addr
                                .map(|addr| format!("{addr:#x}"))
                                .unwrap_or_default();
                            &addr_name
                        }
                    };
                    // PCCL's kernels as NCCL's: HTA finds communication
                    // kernels by `^nccl.*Kernel`.
                    match name.strip_prefix("pccl").filter(|_| cuda_names) {
                        Some(rest) => {
                            pccl_name = Some(name);
                            nccl_name = format!("nccl{rest}");
                            (category::KERNEL, nccl_name.as_str())
                        }
                        None => (category::KERNEL, name),
                    }
                }
                Some(ActivityKind::Memcpy) => (category::MEMCPY, copy_name(a.copy_kind)),
                Some(ActivityKind::Memset) => (category::MEMSET, "Memset"),
                None => (stored_kind, stored_kind),
            };
            let (pid, tid) = (u64::from(a.device), u64::from(a.stream));
            let mut e = Event::span(cat, name, pid, tid, a.start, a.end)
                .arg("device", a.device)
                .arg("stream", a.stream)
                .arg("correlation", a.correlation)
                .arg("pid", a.pid);
            if let Some(own) = pccl_name {
                e = e.arg("pccl name", own);
            }
            if let Some(bytes) = a.bytes {
                e = e.arg("bytes", bytes);
                let dur = a.end - a.start;
                if dur > 0 {
                    // Kineto's bandwidth: bytes per ns is GB/s.
                    e = e.arg("memory bandwidth (GB/s)", bytes as f64 / dur as f64);
                }
            }
            if let [Some(x), y, z] = a.grid {
                e = e.arg("grid", [x, y.unwrap_or(1), z.unwrap_or(1)]);
            }
            if let [Some(x), y, z] = a.block {
                e = e.arg("block", [x, y.unwrap_or(1), z.unwrap_or(1)]);
            }
            if let Some(s) = a.shared_mem {
                e = e.arg("shared memory", s);
            }
            // CUPTI's kernel record, under the names Kineto writes.
            let d = &a.details;
            if let Some(c) = d.context {
                e = e.arg("context", c);
            }
            if let Some(r) = d.registers_per_thread {
                e = e.arg("registers per thread", r);
            }
            if let Some(n) = d.graph_node_id.filter(|&n| n != 0) {
                e = e.arg("graph node id", n);
            }
            if cat == category::KERNEL
                && let Some(op) = collective_of(name)
            {
                e = e.arg("Collective name", op);
                if let Some(rank) = rank {
                    e = e.arg("Rank", rank);
                }
                if let Some(s) = collectives.sizes(a.pid, a.correlation) {
                    e = s.args(e);
                }
            }
            t.event(&e)?;
            t.event(&Event {
                ph: "f",
                cat: category::FLOW,
                name: category::FLOW,
                pid,
                tid,
                ts: us(a.start),
                dur: None,
                id: Some(u64::from(a.correlation)),
                bp: Some("e"),
                args: Args::default(),
            })?;
        }
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_are_named_as_pytorch_names_them() {
        assert_eq!(collective_of("pcclKernel_AllReduce"), Some("allreduce"));
        assert_eq!(
            collective_of("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"),
            Some("reduce_scatter")
        );
        assert_eq!(collective_of("ncclDevKernel_Reduce_Sum"), Some("reduce"));
        assert_eq!(collective_of("gemm_AllReduce"), None);
    }

    #[test]
    fn calls_take_kinetos_categories() {
        assert_eq!(
            call_category("hggc_api", "hggcLaunchKernel"),
            "cuda_runtime"
        );
        assert_eq!(call_category("cuda_api", "cudaMalloc"), "cuda_runtime");
        assert_eq!(call_category("cuda_api", "cuLaunchKernel"), "cuda_driver");
        assert_eq!(call_category("pccl_api", "pcclAllReduce"), "cpu_op");
    }

    #[test]
    fn launched_ids_are_kept_per_process_dense_or_not() {
        let mut l = Launched::default();
        l.insert(7, 1);
        l.insert(7, 130);
        l.insert(8, u32::MAX);
        assert!(l.contains(7, 1) && l.contains(7, 130) && l.contains(8, u32::MAX));
        assert!(!l.contains(7, 2) && !l.contains(8, 1) && !l.contains(9, 1));
        assert!(!l.contains(7, 1 << 20) && !l.contains(7, u32::MAX));
        assert!(l.bits[&7].len() == 3 && !l.bits.contains_key(&8));
    }

    #[test]
    fn times_keep_their_nanoseconds() {
        let e = Event::span(
            "kernel",
            "k\"\n",
            0,
            7,
            12_345_678_901_234,
            12_345_678_902_235,
        );
        let s = serde_json::to_string(&e).unwrap();
        assert!(s.contains("\"ts\":12345678901.234"), "{s}");
        assert!(s.contains("\"dur\":1.001"), "{s}");
        assert!(s.contains("\"name\":\"k\\\"\\n\""), "{s}");
    }
}
