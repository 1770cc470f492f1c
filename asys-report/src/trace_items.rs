//! The traced API families as reports know them: the trace items (`-t`),
//! their tables, and the collective libraries' argument layout, which the
//! Kineto export reads from recorded registers. Which functions each item
//! probes, and how the collect stage decodes each call's registers, are the
//! recording side's (asys-userspace's `apis` module).

/// A trace item of `-t`: one API family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceItem {
    Hggc,
    Hgtx,
    Acblas,
    Acdnn,
    Pccl,
    Osrt,
    Cuda,
    Nvtx,
    Cublas,
    Cudnn,
    Nccl,
}

impl TraceItem {
    /// Items this version can trace, by their `-t` names.
    pub const SUPPORTED: &'static [(&'static str, TraceItem)] = &[
        ("hggc", TraceItem::Hggc),
        ("hgtx", TraceItem::Hgtx),
        ("acblas", TraceItem::Acblas),
        ("acdnn", TraceItem::Acdnn),
        ("pccl", TraceItem::Pccl),
        ("osrt", TraceItem::Osrt),
        ("cuda", TraceItem::Cuda),
        ("nvtx", TraceItem::Nvtx),
        ("cublas", TraceItem::Cublas),
        ("cudnn", TraceItem::Cudnn),
        ("nccl", TraceItem::Nccl),
    ];
    /// Items of the guide that later versions add; named in errors.
    pub const PLANNED: &'static [&'static str] = &["cupti", "nvml"];

    pub fn name(self) -> &'static str {
        Self::SUPPORTED
            .iter()
            .find(|(_, i)| *i == self)
            .map(|(n, _)| *n)
            .expect("every item is listed")
    }

    /// The family id the kernel knows this item by (cookie bits 48..56).
    pub fn family_id(self) -> u32 {
        Self::SUPPORTED
            .iter()
            .position(|(_, i)| *i == self)
            .expect("listed") as u32
    }

    /// The API name a probed function stands for (asys's own NVTX tool
    /// functions are `asys_nvtx*`).
    pub fn api_name(self, function: &str) -> String {
        match self {
            TraceItem::Nvtx => function.trim_start_matches("asys_").to_string(),
            _ => function.to_string(),
        }
    }

    /// The report table of this item's API calls.
    pub fn table(self) -> String {
        format!("{}_api", self.name())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TraceItemError {
    #[error("trace item '{0}' is not available in this version of asys (available: {1})")]
    NotYet(String, String),
    #[error("unknown trace item '{0}' (available: {1})")]
    Unknown(String, String),
    #[error("no trace item given")]
    Empty,
}

/// Parses `-t hggc,...`; `none` alone means no API tracing.
pub fn parse_trace_items(spec: &str) -> Result<Vec<TraceItem>, TraceItemError> {
    let available = || {
        TraceItem::SUPPORTED
            .iter()
            .map(|(n, _)| *n)
            .chain(["none"])
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut items = Vec::new();
    for word in spec.split(',').map(str::trim) {
        if word.is_empty() {
            continue;
        }
        if word == "none" {
            continue;
        }
        if let Some((_, item)) = TraceItem::SUPPORTED.iter().find(|(n, _)| *n == word) {
            if !items.contains(item) {
                items.push(*item);
            }
        } else if TraceItem::PLANNED.contains(&word) {
            return Err(TraceItemError::NotYet(word.into(), available()));
        } else {
            return Err(TraceItemError::Unknown(word.into(), available()));
        }
    }
    if items.is_empty() && !spec.split(',').any(|w| w.trim() == "none") {
        return Err(TraceItemError::Empty);
    }
    Ok(items)
}

/// The datatype enumerations of the collective libraries: the same numbers
/// up to bfloat16, and NCCL's fp8 types after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Datatypes {
    /// `pcclDataType_t` (sim/include/pccl.h): int8 .. bfloat16 (0..=9).
    #[default]
    Pccl,
    /// `ncclDataType_t` (nccl.h of nvidia-nccl-cu12 2.32): pccl's, then
    /// ncclFloat8e4m3 (10) and ncclFloat8e5m2 (11).
    Nccl,
}

impl Datatypes {
    /// The enumeration a collective library's calls use (pccl's for every
    /// item but NCCL).
    pub fn of(item: TraceItem) -> Self {
        match item {
            TraceItem::Nccl => Datatypes::Nccl,
            _ => Datatypes::Pccl,
        }
    }

    /// Size in bytes of one element of `dtype`; None for a number the
    /// library does not define (the call fails, and carries no bytes).
    pub fn size(self, dtype: u64) -> Option<u64> {
        Some(match (self, dtype) {
            // int8/char, uint8
            (_, 0 | 1) => 1,
            // int32, uint32, float32
            (_, 2 | 3 | 7) => 4,
            // int64, uint64, float64
            (_, 4 | 5 | 8) => 8,
            // float16, bfloat16
            (_, 6 | 9) => 2,
            // float8 e4m3, e5m2
            (Datatypes::Nccl, 10 | 11) => 1,
            _ => return None,
        })
    }
}

/// A collective or point-to-point operation of NCCL (nccl.h) or pccl
/// (pccl.h), by its name without the prefix: (count argument, datatype
/// argument, stream argument). The count is the one the header names per
/// rank: ReduceScatter's `recvcount`, AllGather's `sendcount`, AlltoAll's
/// count per peer. The `*Config` forms take the same arguments, and a config
/// pointer last.
pub fn collective(op: &str) -> Option<(usize, usize, Option<usize>)> {
    Some(match op {
        // (sendbuff, recvbuff, count, datatype, op, comm, stream)
        "AllReduce" | "AllReduceConfig" | "ReduceScatter" | "ReduceScatterConfig" => {
            (2, 3, Some(6))
        }
        // (sendbuff, recvbuff, count, datatype, root, comm, stream)
        "Broadcast" | "BroadcastConfig" | "Gather" | "GatherConfig" | "Scatter"
        | "ScatterConfig" => (2, 3, Some(6)),
        // (sendbuff, recvbuff, count, datatype, op, root, comm, stream)
        "Reduce" | "ReduceConfig" => (2, 3, Some(7)),
        // (sendbuff, recvbuff, count, datatype, comm, stream)
        "AllGather" | "AllGatherConfig" | "AlltoAll" | "AlltoAllConfig" => (2, 3, Some(5)),
        // (buff, count, datatype, root, comm, stream)
        "Bcast" => (1, 2, Some(5)),
        // (buff, count, datatype, peer, comm, stream)
        "Send" | "Recv" => (1, 2, Some(5)),
        // (localbuff, count, datatype, peer, window, offset, sigIdx, ctx,
        // flags, comm, stream): the stream is past the eight arguments the
        // probe reads.
        "PutSignal" => (1, 2, None),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_items_parse_and_reject() {
        assert_eq!(parse_trace_items("hggc").unwrap(), vec![TraceItem::Hggc]);
        assert_eq!(
            parse_trace_items("hggc,hggc").unwrap(),
            vec![TraceItem::Hggc]
        );
        assert!(parse_trace_items("none").unwrap().is_empty());
        assert!(matches!(
            parse_trace_items("bogus"),
            Err(TraceItemError::Unknown(..))
        ));
        assert!(matches!(
            parse_trace_items("cupti"),
            Err(TraceItemError::NotYet(..))
        ));
        assert_eq!(
            parse_trace_items("hggc,osrt").unwrap(),
            vec![TraceItem::Hggc, TraceItem::Osrt]
        );
        for (id, (name, item)) in TraceItem::SUPPORTED.iter().enumerate() {
            assert_eq!(item.family_id(), id as u32);
            assert_eq!(item.name(), *name);
        }
        assert!(matches!(parse_trace_items(""), Err(TraceItemError::Empty)));
    }
}
