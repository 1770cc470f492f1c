//! The name of every table a packed report can hold, in one list. The
//! `table` fuzz target picks a table by its position here (its input's
//! first byte), and xtask numbers that target's seeds the same way.
//! report/schema.rs's tests check it against the declarations.

/// Every table a packed report can hold (not the recording folder's raw
/// stacks, which packing leaves out). The first fifteen are in the order
/// the `table` fuzz target has always had, so that a corpus keeps picking
/// the same tables: a new table goes at the end.
pub const ALL_TABLES: &[&str] = &[
    "strings",
    "hggc_api",
    "hggc_activity",
    "hgtx_api",
    "nvtx_api",
    "osrt_api",
    "pccl_api",
    "symbols",
    "sched",
    "cpu_samples",
    "cpu_sample_stacks",
    "api_stacks",
    "cuda_api",
    "libraries",
    "processes",
    "acblas_api",
    "acdnn_api",
    "cublas_api",
    "cudnn_api",
    "nccl_api",
    "process_events",
    "modules",
    "jit_symbols",
    "sched_wakeups",
    "kernel_stacks",
    "python_frames",
    "python_thread_names",
    "host_memory",
    "nic_metrics",
    "ppu_metrics",
    "rdma_hw_counters",
    "cuda_sync",
    "cuda_graphs",
    "probes",
    "python_switch_frames",
];
