//! `asys stats`: summaries computed from a report's tables.
pub mod api_sum;
pub mod device;
pub mod format;

use crate::report::{ReportError, container::Container};
use format::Table;

/// Computes one report from an opened report file.
pub type ReportFn = fn(&Container) -> Result<Table, ReportError>;

/// Report names `stats --report` accepts, with what computes each.
pub const REPORTS: &[(&str, ReportFn)] = &[
    ("hggc_api_sum", api_sum::api_sum),
    ("hggc_api_trace", api_sum::api_trace),
    ("hggc_ppu_trace", device::ppu_trace),
    ("hggc_ppu_kern_sum", device::kern_sum),
    ("hggc_ppu_mem_time_sum", device::mem_time_sum),
    ("hggc_ppu_mem_size_sum", device::mem_size_sum),
];

pub fn find(name: &str) -> Option<ReportFn> {
    REPORTS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// A one-line note on lost events, or None when nothing was lost.
pub fn drops_note(report: &Container) -> Option<String> {
    let m = &report.metadata;
    let total = m.total_drops();
    (total > 0).then(|| {
        format!(
            "{total} events were lost while recording {} ({})",
            report.path.display(),
            m.drops_by_source()
        )
    })
}
