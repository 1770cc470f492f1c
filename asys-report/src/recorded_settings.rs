//! The settings a report's metadata records (how it was recorded), as the
//! command line spells them: asys-userspace's settings stage (settings.rs
//! there) makes them from the arguments, and the report keeps them.

/// `--api-probes`: how hggc API calls are recorded.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ApiProbes {
    /// Uprobes on the runtime's functions (works everywhere).
    #[default]
    Entry,
    /// asys's injection library's callback sites (NOP5 probes; profile only).
    Site,
}

impl ApiProbes {
    pub fn name(self) -> &'static str {
        match self {
            ApiProbes::Entry => "entry",
            ApiProbes::Site => "site",
        }
    }
}

/// How CUDA graphs are traced (`--cuda-graph-trace`, nsys's option and
/// default): the injection library reads it as `ASYS_CUDA_GRAPH_TRACE`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum CudaGraphTrace {
    /// One record per graph execution (`cuda_graphs`); its nodes' kernels
    /// are not recorded one by one.
    #[default]
    Graph,
    /// Every node's execution its own row, with its graph and node ids.
    Node,
}

impl CudaGraphTrace {
    pub fn name(self) -> &'static str {
        match self {
            CudaGraphTrace::Graph => "graph",
            CudaGraphTrace::Node => "node",
        }
    }
}

/// The scope of `-s` (CPU sampling) and `--cpuctxsw` (context switches).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// The traced threads.
    ProcessTree,
    /// Every thread on the machine.
    SystemWide,
    #[default]
    None,
}

impl Scope {
    /// As the kernel side knows it (`asys_common::SCHED_*`).
    pub fn kernel(self) -> u64 {
        match self {
            Scope::ProcessTree => asys_common::SCHED_PROCESS_TREE,
            Scope::SystemWide => asys_common::SCHED_SYSTEM_WIDE,
            Scope::None => asys_common::SCHED_NONE,
        }
    }
}

/// How stacks are unwound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unwind {
    /// With the binaries' call frame information (.eh_frame).
    Dwarf,
    /// Along the frame-pointer chain.
    FramePointers,
}

/// `-b`: how sampled stacks are unwound, or not at all.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Backtrace {
    Dwarf,
    Fp,
    #[default]
    None,
}

impl Backtrace {
    pub fn unwind(self) -> Option<Unwind> {
        match self {
            Backtrace::Dwarf => Some(Unwind::Dwarf),
            Backtrace::Fp => Some(Unwind::FramePointers),
            Backtrace::None => None,
        }
    }
}

/// Which command records (the report metadata's `mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    #[default]
    Profile,
    Attach,
    /// `profile -s system-wide` with no application.
    SystemWide,
    /// A session's `start`/`stop`.
    Session,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum as _;

    fn json<T: serde::Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn option_spellings_are_the_guides() {
        let names = |v: &[clap::builder::PossibleValue]| {
            v.iter()
                .map(|p| p.get_name().to_string())
                .collect::<Vec<_>>()
        };
        let scopes: Vec<_> = Scope::value_variants()
            .iter()
            .filter_map(|s| s.to_possible_value())
            .collect();
        assert_eq!(names(&scopes), ["process-tree", "system-wide", "none"]);
        // The report's metadata spells them as the command line does.
        for s in Scope::value_variants() {
            let name = s.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(json(s), format!("\"{name}\""));
        }
        for p in ApiProbes::value_variants() {
            assert_eq!(p.to_possible_value().unwrap().get_name(), p.name());
            assert_eq!(json(p), format!("\"{}\"", p.name()));
        }
        for b in Backtrace::value_variants() {
            let name = b.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(json(b), format!("\"{name}\""));
        }
        assert_eq!(json(&Mode::SystemWide), "\"system-wide\"");
        assert_eq!(Scope::SystemWide.kernel(), asys_common::SCHED_SYSTEM_WIDE);
        assert_eq!(Backtrace::Fp.unwind(), Some(Unwind::FramePointers));
        assert_eq!(Backtrace::None.unwind(), None);
    }
}
