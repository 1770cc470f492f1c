//! `asys analyze`: rules that look for known performance problems in a
//! report (asys's ppu_gaps and ppu_time_util, nsys's expert-system rules
//! adapted to hggc). Each rule gives a table of findings, printed with the
//! `stats` formats.
pub mod api_sync;
pub mod data;
pub mod memcpy_pageable;
pub mod memcpy_sync;
pub mod memset_sync;
pub mod ppu_gaps;
pub mod ppu_time_util;
pub mod spec;

use crate::{report::ReportError, stats::format::Table};
pub use spec::{Rule, RuleSpec};

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error("unknown rule '{0}' (available: {list})", list = Rule::names().join(", "))]
    UnknownRule(String),
    #[error("rule {rule}: {problem}")]
    BadArgument { rule: &'static str, problem: String },
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// Runs one rule over the report's data.
pub fn run(spec: &RuleSpec, data: &data::Data) -> Table {
    let mut table = match spec.rule {
        Rule::PpuGaps => ppu_gaps::run(data, spec),
        Rule::PpuTimeUtil => ppu_time_util::run(data, spec),
        Rule::MemcpySync => memcpy_sync::run(data, spec),
        Rule::MemcpyPageable => memcpy_pageable::run(data, spec),
        Rule::MemsetSync => memset_sync::run(data, spec),
        Rule::ApiSync => api_sync::run(data, spec),
    };
    if let Some(n) = spec.rows {
        table.rows.truncate(n);
    }
    table
}

/// The hint column shared by the rules: the same advice on every row.
pub fn hint(text: &str) -> crate::stats::format::Value {
    crate::stats::format::Value::Str(text.into())
}
