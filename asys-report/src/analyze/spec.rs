//! Rule names and their arguments, as `--rule NAME[:arg=value...]` gives them.
use super::AnalyzeError;

/// The rules `asys analyze` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Device idle gaps between device work (asys ppu_gaps, nsys gpu_gaps).
    PpuGaps,
    /// Parts of the timeline where the device is mostly idle (ppu_time_util).
    PpuTimeUtil,
    /// Synchronous copies, hggcMemcpy (nsys cuda_memcpy_sync).
    MemcpySync,
    /// Copies from or to pageable host memory (nsys cuda_memcpy_async).
    MemcpyPageable,
    /// Synchronous memsets, hggcMemset (nsys cuda_memset_sync).
    MemsetSync,
    /// Calls that block the host on the device (nsys cuda_api_sync).
    ApiSync,
    /// Collectives where one rank arrived late (nccl desync).
    PcclLateRank,
}

/// Each rule's name, and the nsys names accepted for it.
const NAMES: &[(Rule, &str, &[&str])] = &[
    (Rule::PpuGaps, "ppu_gaps", &["gpu_gaps"]),
    (Rule::PpuTimeUtil, "ppu_time_util", &["gpu_time_util"]),
    (Rule::MemcpySync, "hggc_memcpy_sync", &["cuda_memcpy_sync"]),
    (
        Rule::MemcpyPageable,
        "hggc_memcpy_pageable",
        &["hggc_memcpy_async", "cuda_memcpy_async"],
    ),
    (Rule::MemsetSync, "hggc_memset_sync", &["cuda_memset_sync"]),
    (Rule::ApiSync, "hggc_api_sync", &["cuda_api_sync"]),
    (Rule::PcclLateRank, "pccl_late_rank", &["nccl_late_rank"]),
];

impl Rule {
    /// The rules an SQLite export has the data for (the others need an API
    /// call's bytes and stream, or which host memory was pageable).
    pub const FROM_SQLITE: [Rule; 3] = [Rule::PpuGaps, Rule::PpuTimeUtil, Rule::PcclLateRank];

    pub const ALL: [Rule; 7] = [
        Rule::PpuGaps,
        Rule::PpuTimeUtil,
        Rule::MemcpySync,
        Rule::MemcpyPageable,
        Rule::MemsetSync,
        Rule::ApiSync,
        Rule::PcclLateRank,
    ];

    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(r, ..)| *r == self).map_or("?", |n| n.1)
    }

    pub fn names() -> Vec<&'static str> {
        NAMES.iter().map(|n| n.1).collect()
    }

    pub fn from_name(name: &str) -> Option<Rule> {
        NAMES
            .iter()
            .find(|(_, n, aliases)| *n == name || aliases.contains(&name))
            .map(|n| n.0)
    }

    /// The arguments the rule takes (every rule takes `rows`).
    fn arguments(self) -> &'static [&'static str] {
        match self {
            Rule::PpuGaps => &["rows", "gap"],
            Rule::PpuTimeUtil => &["rows", "threshold", "chunks"],
            Rule::ApiSync | Rule::PcclLateRank => &["rows", "threshold"],
            Rule::MemcpySync | Rule::MemcpyPageable | Rule::MemsetSync => &["rows"],
        }
    }
}

/// A rule with its arguments, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    pub rule: Rule,
    /// At most this many rows (all when None).
    pub rows: Option<usize>,
    /// ppu_gaps: the shortest gap reported, ns (nsys's default, 500 ms).
    pub gap_ns: u64,
    /// ppu_time_util: chunks below this utilisation (%) are reported;
    /// hggc_api_sync: the shortest blocking call reported, ns.
    pub threshold: f64,
    /// ppu_time_util: how many chunks the device's busy span is cut into.
    pub chunks: u32,
}

impl RuleSpec {
    pub fn new(rule: Rule) -> Self {
        Self {
            rule,
            rows: None,
            gap_ns: 500_000_000,
            threshold: match rule {
                Rule::PpuTimeUtil => 50.0,
                // Ranks are processes: a few ms apart is scheduling, not a late rank.
                Rule::PcclLateRank => 10.0,
                // 1 ms: a short synchronize is the normal end of a step.
                _ => 1.0,
            },
            chunks: 30,
        }
    }

    /// Parses `name[:arg=value...]`.
    pub fn parse(text: &str) -> Result<Self, AnalyzeError> {
        let mut parts = text.split(':');
        let name = parts.next().unwrap_or("").trim();
        let rule = Rule::from_name(name).ok_or_else(|| AnalyzeError::UnknownRule(name.into()))?;
        let mut spec = RuleSpec::new(rule);
        let bad = |problem: String| AnalyzeError::BadArgument {
            rule: rule.name(),
            problem,
        };
        for part in parts {
            let Some((key, value)) = part.split_once('=') else {
                return Err(bad(format!("expected arg=value, got '{part}'")));
            };
            let (key, value) = (key.trim(), value.trim());
            if !rule.arguments().contains(&key) {
                return Err(bad(format!(
                    "unknown argument '{key}' (takes: {})",
                    rule.arguments().join(", ")
                )));
            }
            let number = |what: &str| -> Result<f64, AnalyzeError> {
                match value.parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                    _ => Err(bad(format!("{key}= expects {what}, got '{value}'"))),
                }
            };
            match key {
                "rows" => {
                    // A count, 1 or more; every row is the default (no
                    // rows=). A negative count (nsys's -1) is refused rather
                    // than read as "all": a typo must not pass unseen.
                    spec.rows = match value.parse::<u64>() {
                        Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                        _ => {
                            return Err(bad(format!(
                                "rows= expects a positive count (leave it out for every row), got '{value}'"
                            )));
                        }
                    }
                }
                "gap" => spec.gap_ns = (number("milliseconds")? * 1e6) as u64,
                "threshold" if rule == Rule::PpuTimeUtil => {
                    let v = number("a percentage")?;
                    if v > 100.0 {
                        return Err(bad(format!("threshold= is a percentage, got '{value}'")));
                    }
                    spec.threshold = v;
                }
                "threshold" => spec.threshold = number("milliseconds")?,
                "chunks" => match value.parse::<u32>() {
                    Ok(n) if (1..=10_000).contains(&n) => spec.chunks = n,
                    _ => return Err(bad(format!("chunks= expects 1 to 10000, got '{value}'"))),
                },
                _ => unreachable!("checked against the rule's arguments"),
            }
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_aliases_and_arguments() {
        let s = RuleSpec::parse("ppu_gaps:gap=5:rows=3").unwrap();
        assert_eq!(
            (s.rule, s.gap_ns, s.rows),
            (Rule::PpuGaps, 5_000_000, Some(3))
        );
        assert_eq!(RuleSpec::parse("gpu_gaps").unwrap().gap_ns, 500_000_000);
        let u = RuleSpec::parse("ppu_time_util:threshold=20:chunks=10").unwrap();
        assert_eq!((u.threshold, u.chunks), (20.0, 10));
        assert_eq!(
            RuleSpec::parse("cuda_api_sync").unwrap().rule,
            Rule::ApiSync
        );
        for name in Rule::names() {
            assert_eq!(Rule::from_name(name).unwrap().name(), name);
        }
    }

    #[test]
    fn refuses_bad_rules_and_arguments() {
        for bad in [
            "nope",
            "ppu_gaps:gap=x",
            "ppu_gaps:gap=-1",
            "ppu_gaps:chunks=3",
            "ppu_gaps:gap",
            "ppu_time_util:threshold=150",
            "ppu_time_util:chunks=0",
            "hggc_memcpy_sync:rows=0",
            "pccl_late_rank:rows=-1",
            "ppu_gaps:rows=-7",
            "ppu_gaps:rows=+-1",
            "ppu_gaps:rows=1.5",
            "pccl_late_rank:threshold=-1",
            "ppu_time_util:chunks=-1",
            "hggc_api_sync:threshold=-0.5",
            "ppu_gaps:gap=inf",
        ] {
            let e = RuleSpec::parse(bad).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{bad}: {e}");
            assert!(
                e.starts_with("unknown rule") || e.starts_with("rule "),
                "{bad}: {e}"
            );
        }
    }
}
