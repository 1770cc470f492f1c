//! The message sizes of the collectives behind communication kernels, in
//! the args the PyTorch profiler writes on an NCCL kernel and HTA reads
//! (`In msg nelems`, `Out msg nelems`, `In msg size`, `Out msg size`,
//! `dtype`, `Group size`).
//!
//! A kernel's correlation id names the runtime call that launched it. The
//! collective library's call is the one around that launch on the same
//! thread: `pcclAllReduce` calls `hggcLaunchKernel`, `ncclAllReduce` calls
//! `cudaLaunchKernel`. Calls between `GroupStart` and `GroupEnd` launch
//! nothing themselves: the group's end launches one kernel for all of them,
//! so that kernel carries their sums.
//!
//! What is kept: each collective call of pccl and NCCL (a few per training
//! step), and one entry per launch found inside one.
use std::collections::HashMap;

use crate::{
    report::{container::Container, read::api::CallColumns, schema::api, strings::StringTable},
    trace_items::{self, Datatypes, TraceItem},
};

use super::ExportError;

/// The sizes of one collective (or of one group's collectives) as the
/// PyTorch profiler writes them. A side is None when it depends on the
/// communicator's size and that is not known, or when a group mixes
/// datatypes (its element counts do not add up; its bytes do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sizes {
    pub in_nelems: Option<u64>,
    pub out_nelems: Option<u64>,
    pub in_bytes: Option<u64>,
    pub out_bytes: Option<u64>,
    /// PyTorch's name of the element type (`Float`, `BFloat16`, ...).
    pub dtype: Option<&'static str>,
    /// The communicator's size.
    pub group_size: Option<u32>,
}

impl Sizes {
    /// `e` (a communication kernel) with the sizes under the names the
    /// PyTorch profiler gives them; what is not known is left out, and HTA
    /// reads its default (0, "").
    pub(super) fn args<'a>(&self, mut e: super::Event<'a>) -> super::Event<'a> {
        let ints = [
            ("In msg nelems", self.in_nelems),
            ("Out msg nelems", self.out_nelems),
            ("In msg size", self.in_bytes),
            ("Out msg size", self.out_bytes),
            ("Group size", self.group_size.map(u64::from)),
        ];
        for (key, v) in ints {
            if let Some(v) = v {
                e = e.arg(key, v);
            }
        }
        if let Some(d) = self.dtype {
            e = e.arg("dtype", d);
        }
        e
    }
}

/// How many elements go in and come out of an operation, as multiples of
/// its `count` argument: `(in, out)`, where `Ranks` is count x the
/// communicator's size (the headers' per-rank counts, nccl.h and pccl.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    None,
    Count,
    Ranks,
}

fn sides(op: &str) -> Option<(Side, Side)> {
    let op = op.strip_suffix("Config").unwrap_or(op);
    Some(match op {
        "AllReduce" | "Broadcast" | "Bcast" | "Reduce" => (Side::Count, Side::Count),
        // sendcount per rank; every rank's block comes back.
        "AllGather" | "Gather" => (Side::Count, Side::Ranks),
        // recvcount per rank; a block per rank goes in.
        "ReduceScatter" | "Scatter" => (Side::Ranks, Side::Count),
        // count per peer, both ways.
        "AlltoAll" => (Side::Ranks, Side::Ranks),
        "Send" | "PutSignal" => (Side::Count, Side::None),
        "Recv" => (Side::None, Side::Count),
        _ => return None,
    })
}

/// PyTorch's names of the collective libraries' datatypes (c10's
/// `ScalarType`, as `dtype` holds them in its traces); numbers as
/// [`Datatypes::size`] reads them.
fn pytorch_dtype(datatypes: Datatypes, dtype: u64) -> Option<&'static str> {
    Some(match (datatypes, dtype) {
        (_, 0) => "Char",
        (_, 1) => "Byte",
        (_, 2) => "Int",
        (_, 3) => "UInt32",
        (_, 4) => "Long",
        (_, 5) => "UInt64",
        (_, 6) => "Half",
        (_, 7) => "Float",
        (_, 8) => "Double",
        (_, 9) => "BFloat16",
        (Datatypes::Nccl, 10) => "Float8_e4m3fn",
        (Datatypes::Nccl, 11) => "Float8_e5m2",
        _ => return None,
    })
}

/// One operation's share of a kernel's message: elements and bytes each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Part {
    in_nelems: Option<u64>,
    out_nelems: Option<u64>,
    elem: u64,
    dtype: &'static str,
}

impl Part {
    /// The part of a successful call `name` (prefix stripped) of `item`
    /// with registers `args`, in a communicator of `nranks`.
    fn of(item: TraceItem, op: &str, args: &[u64; 8], nranks: Option<u32>) -> Option<Self> {
        let (count_at, dtype_at, _) = trace_items::collective(op)?;
        let datatypes = Datatypes::of(item);
        let (count, dtype) = (args[count_at], args[dtype_at]);
        let elem = datatypes.size(dtype)?;
        let name = pytorch_dtype(datatypes, dtype)?;
        let (i, o) = sides(op)?;
        let n = |side| match side {
            Side::None => Some(0),
            Side::Count => Some(count),
            Side::Ranks => nranks.and_then(|n| count.checked_mul(u64::from(n))),
        };
        Some(Self {
            in_nelems: n(i),
            out_nelems: n(o),
            elem,
            dtype: name,
        })
    }
}

/// The sizes of the parts one kernel runs.
fn sum(parts: &[Part], group_size: Option<u32>) -> Sizes {
    let same = parts.windows(2).all(|w| w[0].dtype == w[1].dtype);
    let total = |f: fn(&Part) -> Option<u64>, bytes: bool| {
        parts.iter().try_fold(0u64, |acc, p| {
            let n = f(p)?;
            acc.checked_add(if bytes { n.checked_mul(p.elem)? } else { n })
        })
    };
    Sizes {
        in_nelems: same.then(|| total(|p| p.in_nelems, false)).flatten(),
        out_nelems: same.then(|| total(|p| p.out_nelems, false)).flatten(),
        in_bytes: total(|p| p.in_nelems, true),
        out_bytes: total(|p| p.out_nelems, true),
        dtype: parts.first().filter(|_| same).map(|p| p.dtype),
        group_size,
    }
}

/// A call that launches a collective's kernel: a collective outside a
/// group, or a group's end.
struct Launcher {
    start: i64,
    end: i64,
    sizes: Sizes,
}

/// The collectives of a report, and the launches found inside them.
#[derive(Default)]
pub struct Collectives {
    /// Per (pid, tid): the calls that launch collectives' kernels, in
    /// start order.
    threads: HashMap<(u32, u32), Vec<Launcher>>,
    /// Per (pid, correlation id) of a launch inside one of them: its sizes.
    launches: HashMap<(u32, u32), Sizes>,
    /// The communicators' sizes seen (`CommInitRank`'s `nranks`).
    world: Option<WorldSize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum WorldSize {
    One(u32),
    /// Communicators of different sizes: which one a call used is not
    /// recorded.
    Several,
}

/// One call of a collective library, as read.
struct Call {
    pid: u32,
    tid: u32,
    start: i64,
    end: i64,
    op: String,
    ok: bool,
    args: Option<[u64; 8]>,
}

impl Collectives {
    /// Reads the collective libraries' tables among `tables`.
    pub fn read(
        report: &Container,
        strings: &StringTable,
        tables: &[String],
    ) -> Result<Self, ExportError> {
        let mut out = Self::default();
        for item in [TraceItem::Pccl, TraceItem::Nccl] {
            let table = item.table();
            if tables.contains(&table) {
                let calls = read_calls(report, strings, &table, item)?;
                out.add(item, calls);
            }
        }
        Ok(out)
    }

    /// The communicators' size, when every communicator the report saw had
    /// the same (`distributedInfo.world_size`).
    pub fn world_size(&self) -> Option<u32> {
        match self.world {
            Some(WorldSize::One(n)) => Some(n),
            _ => None,
        }
    }

    fn add(&mut self, item: TraceItem, mut calls: Vec<Call>) {
        for c in &calls {
            let nranks = match c.op.as_str() {
                // (comm*, nranks, commId, rank): nranks is the second
                // register in both libraries.
                "CommInitRank" | "CommInitRankConfig" | "CommInitRankScalable" if c.ok => {
                    c.args.map(|a| a[1] as u32)
                }
                _ => None,
            };
            if let Some(n) = nranks.filter(|&n| n > 0) {
                self.world = match self.world {
                    None => Some(WorldSize::One(n)),
                    Some(WorldSize::One(m)) if m == n => Some(WorldSize::One(n)),
                    _ => Some(WorldSize::Several),
                };
            }
        }
        let nranks = self.world_size();
        calls.sort_by_key(|c| (c.pid, c.tid, c.start));
        // Per thread: the group being gathered (nested groups are one) and
        // its depth.
        let mut depth = 0u32;
        let mut group: Vec<Part> = Vec::new();
        let mut thread = None;
        for c in calls {
            if thread != Some((c.pid, c.tid)) {
                (thread, depth) = (Some((c.pid, c.tid)), 0);
                group.clear();
            }
            match c.op.as_str() {
                "GroupStart" if c.ok => depth += 1,
                "GroupEnd" if c.ok && depth > 0 => {
                    depth -= 1;
                    if depth == 0 && !group.is_empty() {
                        self.launcher(&c, sum(&group, nranks));
                        group.clear();
                    }
                }
                _ if c.ok => {
                    let part = c.args.and_then(|args| Part::of(item, &c.op, &args, nranks));
                    match part {
                        Some(p) if depth > 0 => group.push(p),
                        Some(p) => self.launcher(&c, sum(&[p], nranks)),
                        None => {}
                    }
                }
                _ => {}
            }
        }
    }

    fn launcher(&mut self, c: &Call, sizes: Sizes) {
        self.threads
            .entry((c.pid, c.tid))
            .or_default()
            .push(Launcher {
                start: c.start,
                end: c.end,
                sizes,
            });
    }

    /// Whether there is no collective to find launches in.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// A runtime call with correlation id `corr`, from `start` on thread
    /// `(pid, tid)`: if a collective's call was running around it there,
    /// the kernel of `corr` is that collective's.
    pub fn call(&mut self, pid: u32, tid: u32, start: i64, corr: u32) {
        let Some(launchers) = self.threads.get(&(pid, tid)) else {
            return;
        };
        let at = launchers.partition_point(|l| l.start <= start);
        if let Some(l) = at.checked_sub(1).map(|i| &launchers[i])
            && start <= l.end
        {
            self.launches.insert((pid, corr), l.sizes);
        }
    }

    /// The sizes of the collective whose kernel has correlation id `corr`
    /// in process `pid`.
    pub fn sizes(&self, pid: u32, corr: u32) -> Option<&Sizes> {
        self.launches.get(&(pid, corr))
    }
}

fn read_calls(
    report: &Container,
    strings: &StringTable,
    table: &str,
    item: TraceItem,
) -> Result<Vec<Call>, ExportError> {
    let prefix = item.name();
    let mut out = Vec::new();
    let cols = [CallColumns::NAMES, &[api::ARGS]].concat();
    for b in api::scan(report, table, &cols)? {
        let b = b?;
        let c = CallColumns::of(&b)?;
        let registers = api::View(&b).registers()?;
        for i in 0..b.num_rows() {
            let name = strings.get(c.name[i]).unwrap_or("");
            out.push(Call {
                pid: c.pid[i],
                tid: c.tid[i],
                start: c.start[i],
                end: c.end[i],
                op: name.strip_prefix(prefix).unwrap_or(name).to_owned(),
                ok: c.ret[i] == 0,
                args: registers.get(i),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tid: u32, start: i64, end: i64, op: &str, args: [u64; 8]) -> Call {
        Call {
            pid: 1,
            tid,
            start,
            end,
            op: op.into(),
            ok: true,
            args: Some(args),
        }
    }

    /// (sendbuff, recvbuff, count, datatype, ...) and (buff, count,
    /// datatype, ...), as pccl.h declares them.
    fn coll(count: u64, dtype: u64) -> [u64; 8] {
        [0, 0, count, dtype, 0, 0, 0, 0]
    }
    fn p2p(count: u64, dtype: u64) -> [u64; 8] {
        [0, count, dtype, 0, 0, 0, 0, 0]
    }

    #[test]
    fn sizes_follow_each_collective_and_the_communicator() {
        let mut c = Collectives::default();
        c.add(
            TraceItem::Pccl,
            vec![
                call(1, 0, 10, "CommInitRank", [0, 4, 0, 0, 0, 0, 0, 0]),
                call(1, 20, 30, "AllReduce", coll(1000, 7)),
                call(1, 40, 50, "AllGather", coll(20, 2)),
                call(1, 60, 70, "ReduceScatter", coll(30, 9)),
                // A group: its end launches one kernel for both.
                call(1, 80, 81, "GroupStart", [0; 8]),
                call(1, 82, 83, "Send", p2p(5, 4)),
                call(1, 84, 85, "Recv", p2p(6, 4)),
                call(1, 86, 90, "GroupEnd", [0; 8]),
            ],
        );
        assert_eq!(c.world_size(), Some(4));
        for (corr, start) in [(1, 25), (2, 45), (3, 65), (4, 88), (5, 83), (6, 95)] {
            c.call(1, 1, start, corr);
        }
        // Another thread's launch at the same time is not the collective's.
        c.call(1, 2, 25, 7);
        let s = |corr| c.sizes(1, corr).copied();
        let want = |i, o, e, dtype| Sizes {
            in_nelems: Some(i),
            out_nelems: Some(o),
            in_bytes: Some(i * e),
            out_bytes: Some(o * e),
            dtype: Some(dtype),
            group_size: Some(4),
        };
        assert_eq!(s(1), Some(want(1000, 1000, 4, "Float")));
        assert_eq!(s(2), Some(want(20, 80, 4, "Int")));
        assert_eq!(s(3), Some(want(120, 30, 2, "BFloat16")));
        assert_eq!(s(4), Some(want(5, 6, 8, "Long")));
        // Inside a group's member, nothing is launched; after every call,
        // no collective is running.
        assert_eq!(s(5), None);
        assert_eq!(s(6), None);
        assert_eq!(s(7), None);
    }

    #[test]
    fn what_is_not_known_is_left_out() {
        let mut c = Collectives::default();
        c.add(
            TraceItem::Nccl,
            vec![
                // Two communicators of different sizes.
                call(1, 0, 1, "CommInitRank", [0, 4, 0, 0, 0, 0, 0, 0]),
                call(1, 2, 3, "CommInitRank", [0, 2, 0, 0, 0, 0, 0, 0]),
                call(1, 10, 20, "AllGather", coll(10, 10)),
                call(1, 30, 31, "GroupStart", [0; 8]),
                call(1, 32, 33, "AllReduce", coll(3, 7)),
                call(1, 34, 35, "AllReduce", coll(5, 6)),
                call(1, 36, 40, "GroupEnd", [0; 8]),
                // A failed call (an unknown datatype) launches nothing.
                Call {
                    ok: false,
                    ..call(1, 50, 60, "AllReduce", coll(1, 99))
                },
            ],
        );
        assert_eq!(c.world_size(), None);
        c.call(1, 1, 15, 1);
        c.call(1, 1, 38, 2);
        c.call(1, 1, 55, 3);
        let fp8 = c.sizes(1, 1).unwrap();
        assert_eq!(
            (fp8.in_nelems, fp8.out_nelems, fp8.dtype, fp8.group_size),
            (Some(10), None, Some("Float8_e4m3fn"), None)
        );
        // Mixed datatypes: bytes add up, element counts do not.
        let mixed = c.sizes(1, 2).unwrap();
        assert_eq!(
            (mixed.in_nelems, mixed.in_bytes, mixed.dtype),
            (None, Some(3 * 4 + 5 * 2), None)
        );
        assert_eq!(c.sizes(1, 3), None);
    }
}
