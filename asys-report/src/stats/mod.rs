//! `asys stats`: summaries computed from a report's tables.
pub mod about;
pub mod api_sum;
pub(crate) mod api_trace;
pub mod compare;
pub mod desync;
pub mod device;
pub mod filter;
pub mod format;
pub(crate) mod hgtx;
pub(crate) mod host_memory;
pub(crate) mod kern_exec;
pub(crate) mod libraries;
pub(crate) mod memory;
pub(crate) mod nic;
pub(crate) mod ppu_metrics;
pub(crate) mod probes;
pub(crate) mod processes;
pub(crate) mod python_sum;
pub(crate) mod python_wall;
pub(crate) mod samples;
pub(crate) mod sched;
pub(crate) mod stacks;
pub mod sync;
pub(crate) mod waits;

use crate::report::{ReportError, container::Container};
use format::Table;

/// Computes one report from an opened report file.
pub type ReportFn = fn(&Container) -> Result<Table, ReportError>;

/// Report names `stats --report` accepts, with what computes each.
pub const REPORTS: &[(&str, ReportFn)] = &[
    ("hggc_api_sum", |r| {
        api_sum::api_sum(r, "hggc_api", "HGGC API Summary (hggc_api_sum)")
    }),
    ("hggc_api_trace", |r| {
        api_trace::api_trace(r, "hggc_api", "HGGC API Trace (hggc_api_trace)")
    }),
    ("osrt_sum", |r| {
        api_sum::api_sum(r, "osrt_api", "OS Runtime Summary (osrt_sum)")
    }),
    ("osrt_trace", |r| {
        api_trace::api_trace(r, "osrt_api", "OS Runtime Trace (osrt_trace)")
    }),
    ("cuda_api_sum", |r| {
        api_sum::api_sum(r, "cuda_api", "CUDA API Summary (cuda_api_sum)")
    }),
    ("cuda_api_trace", |r| {
        api_trace::api_trace(r, "cuda_api", "CUDA API Trace (cuda_api_trace)")
    }),
    ("acblas_api_sum", |r| {
        api_sum::api_sum(r, "acblas_api", "ACBLAS API Summary (acblas_api_sum)")
    }),
    ("acdnn_api_sum", |r| {
        api_sum::api_sum(r, "acdnn_api", "ACDNN API Summary (acdnn_api_sum)")
    }),
    ("pccl_api_sum", |r| {
        api_sum::api_sum(r, "pccl_api", "PCCL API Summary (pccl_api_sum)")
    }),
    ("hgtx_api_sum", |r| {
        api_sum::api_sum(r, "hgtx_api", "HGTX API Summary (hgtx_api_sum)")
    }),
    ("hgtx_api_trace", |r| {
        api_trace::api_trace(r, "hgtx_api", "HGTX API Trace (hgtx_api_trace)")
    }),
    ("hgtx_sum", hgtx::hgtx_sum),
    ("pccl_op_sum", api_sum::pccl_op_sum),
    ("cublas_api_sum", |r| {
        api_sum::api_sum(r, "cublas_api", "cuBLAS API Summary (cublas_api_sum)")
    }),
    ("cudnn_api_sum", |r| {
        api_sum::api_sum(r, "cudnn_api", "cuDNN API Summary (cudnn_api_sum)")
    }),
    ("nccl_api_sum", |r| {
        api_sum::api_sum(r, "nccl_api", "NCCL API Summary (nccl_api_sum)")
    }),
    ("cublas_api_trace", |r| {
        api_trace::api_trace(r, "cublas_api", "cuBLAS API Trace (cublas_api_trace)")
    }),
    ("cudnn_api_trace", |r| {
        api_trace::api_trace(r, "cudnn_api", "cuDNN API Trace (cudnn_api_trace)")
    }),
    ("nccl_api_trace", |r| {
        api_trace::api_trace(r, "nccl_api", "NCCL API Trace (nccl_api_trace)")
    }),
    ("nvtx_api_trace", |r| {
        api_trace::api_trace(r, "nvtx_api", "NVTX API Trace (nvtx_api_trace)")
    }),
    ("device_memory_usage_summary", memory::summary),
    ("hggc_api_backtrace", stacks::api_backtrace),
    ("device_memory_usage_detail", memory::detail),
    ("pccl_api_trace", |r| {
        api_trace::api_trace(r, "pccl_api", "PCCL API Trace (pccl_api_trace)")
    }),
    ("acblas_api_trace", |r| {
        api_trace::api_trace(r, "acblas_api", "ACBLAS API Trace (acblas_api_trace)")
    }),
    ("acdnn_api_trace", |r| {
        api_trace::api_trace(r, "acdnn_api", "ACDNN API Trace (acdnn_api_trace)")
    }),
    ("hgtx_pushpop_trace", hgtx::hgtx_pushpop_trace),
    ("hgtx_startend_trace", hgtx::hgtx_startend_trace),
    ("nvtx_sum", hgtx::nvtx_sum),
    ("nvtx_pushpop_trace", hgtx::nvtx_pushpop_trace),
    ("nvtx_startend_trace", hgtx::nvtx_startend_trace),
    ("nvtx_api_sum", |r| {
        api_sum::api_sum(r, "nvtx_api", "NVTX API Summary (nvtx_api_sum)")
    }),
    ("hggc_ppu_trace", |r| {
        device::ppu_trace(r, device::Runtime::Hggc)
    }),
    ("hggc_ppu_kern_sum", |r| {
        device::kern_sum(r, device::Runtime::Hggc)
    }),
    ("hggc_ppu_mem_time_sum", |r| {
        device::mem_time_sum(r, device::Runtime::Hggc)
    }),
    ("hggc_ppu_mem_size_sum", |r| {
        device::mem_size_sum(r, device::Runtime::Hggc)
    }),
    ("cuda_gpu_trace", |r| {
        device::ppu_trace(r, device::Runtime::Cuda)
    }),
    ("cuda_gpu_kern_sum", |r| {
        device::kern_sum(r, device::Runtime::Cuda)
    }),
    ("cuda_gpu_mem_time_sum", |r| {
        device::mem_time_sum(r, device::Runtime::Cuda)
    }),
    ("cuda_gpu_mem_size_sum", |r| {
        device::mem_size_sum(r, device::Runtime::Cuda)
    }),
    ("cuda_kern_exec_sum", kern_exec::cuda_kern_exec_sum),
    ("cuda_gpu_sync", sync::cuda_gpu_sync),
    ("cpu_ctxsw_sum", sched::ctxsw_sum),
    ("cpu_wait_sum", waits::cpu_wait_sum),
    ("cpu_sample_sum", samples::cpu_sample_sum),
    ("python_sample_sum", python_sum::python_sample_sum),
    ("python_wall_sum", python_wall::python_wall_sum),
    ("processes", processes::processes),
    ("libraries", libraries::libraries),
    ("host_memory_sum", host_memory::host_memory_sum),
    ("nic_metrics_sum", nic::nic_metrics_sum),
    ("ppu_metrics_sum", ppu_metrics::ppu_metrics_sum),
    ("ppu_metric_trace", ppu_metrics::ppu_metric_trace),
    ("probe_sum", probes::probe_sum),
    ("probe_trace", probes::probe_trace),
];

pub(crate) use crate::report::read::{duration, signed_duration};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary and trace reports of a trace item's API table: nsys's names
    /// for osrt (`osrt_sum`, `osrt_trace`), `<item>_api_sum` and
    /// `<item>_api_trace` for the others.
    fn api_reports(item: crate::trace_items::TraceItem) -> [String; 2] {
        match item {
            crate::trace_items::TraceItem::Osrt => ["osrt_sum".into(), "osrt_trace".into()],
            _ => [
                format!("{}_api_sum", item.name()),
                format!("{}_api_trace", item.name()),
            ],
        }
    }

    /// Every trace item has a summary and a trace of its API table, each
    /// name listed once.
    #[test]
    fn every_item_has_a_summary_and_a_trace() {
        for (_, item) in crate::trace_items::TraceItem::SUPPORTED {
            for name in api_reports(*item) {
                assert_eq!(
                    REPORTS.iter().filter(|(n, _)| *n == name).count(),
                    1,
                    "{name} of {item:?}"
                );
            }
        }
        let mut names: Vec<&str> = REPORTS.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a report listed twice");
    }
}
