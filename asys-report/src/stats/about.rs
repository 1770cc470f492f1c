//! What each report of [`super::REPORTS`] shows, for `asys stats
//! --help-reports` (nsys prints the same kind of paragraph per report).
//! Kept beside the table rather than in it so that a report added there
//! without a description fails the test below instead of printing nothing.

/// The description of report `name`.
pub fn about(name: &str) -> Option<&'static str> {
    api_report(name)
        .or_else(|| range_report(name))
        .or_else(|| device_report(name))
        .or_else(|| cpu_report(name))
        .or_else(|| sampled_report(name))
        .or_else(|| set_report(name))
}

/// The summaries, traces and backtraces of the API tables.
fn api_report(name: &str) -> Option<&'static str> {
    Some(match name {
        "hggc_api_sum" => {
            "HGGC API Summary: for each HGGC runtime function called, the share of all HGGC API time, total time, number of calls, and the average, median, minimum, maximum and standard deviation of one call's duration. Sorted by total time."
        }
        "hggc_api_trace" => {
            "HGGC API Trace: every HGGC runtime call in start order, with its duration, return value, correlation id, process, thread and, for copies, launches and memsets, bytes, copy kind, stream, pointer, kernel, grid and block."
        }
        "osrt_sum" => {
            "OS Runtime Summary: for each traced OS runtime function (libc and pthread calls), the share of time, total time, number of calls and the statistics of one call's duration. Sorted by total time."
        }
        "osrt_trace" => {
            "OS Runtime Trace: every traced OS runtime call in start order, with its duration, return value, process and thread."
        }
        "cuda_api_sum" => {
            "CUDA API Summary: for each CUDA runtime function called, the share of time, total time, number of calls and the statistics of one call's duration (nsys's cuda_api_sum)."
        }
        "cuda_api_trace" => {
            "CUDA API Trace: every CUDA runtime call in start order, with its duration, return value, correlation id, process and thread (nsys's cuda_api_trace)."
        }
        "acblas_api_sum" => {
            "ACBLAS API Summary: for each ACBLAS library function called, the share of time, total time, number of calls and the statistics of one call's duration."
        }
        "acdnn_api_sum" => {
            "ACDNN API Summary: for each ACDNN library function called, the share of time, total time, number of calls and the statistics of one call's duration."
        }
        "pccl_api_sum" => {
            "PCCL API Summary: for each PCCL (collective communication) function called, the share of time, total time, number of calls and the statistics of one call's duration."
        }
        "hgtx_api_sum" => {
            "HGTX API Summary: for each HGTX annotation function called (push, pop, start, end, mark, naming), the share of time, total time, number of calls and the statistics of one call's duration."
        }
        "hgtx_api_trace" => {
            "HGTX API Trace: every HGTX annotation call in start order, with its duration, return value, process and thread."
        }
        "pccl_op_sum" => {
            "PCCL Operation Summary: for each PCCL operation (all-reduce, all-gather, broadcast, ...), time and bytes over all ranks."
        }
        "cublas_api_sum" => {
            "cuBLAS API Summary: for each cuBLAS function called, the share of time, total time, number of calls and the statistics of one call's duration."
        }
        "cudnn_api_sum" => {
            "cuDNN API Summary: for each cuDNN function called, the share of time, total time, number of calls and the statistics of one call's duration."
        }
        "nccl_api_sum" => {
            "NCCL API Summary: for each NCCL function called, the share of time, total time, number of calls and the statistics of one call's duration."
        }
        "cublas_api_trace" => {
            "cuBLAS API Trace: every cuBLAS call in start order, with its duration, return value, process and thread."
        }
        "cudnn_api_trace" => {
            "cuDNN API Trace: every cuDNN call in start order, with its duration, return value, process and thread."
        }
        "nccl_api_trace" => {
            "NCCL API Trace: every NCCL call in start order, with its duration, return value, process and thread."
        }
        "nvtx_api_trace" => {
            "NVTX API Trace: every NVTX call in start order, with its duration, return value, process and thread."
        }
        "hggc_api_backtrace" => {
            "HGGC API Backtrace: the call stack of each HGGC call recorded with a backtrace (--hggc-backtrace), frame by frame, innermost first."
        }
        "pccl_api_trace" => {
            "PCCL API Trace: every PCCL call in start order, with its duration, return value, process and thread."
        }
        "acblas_api_trace" => {
            "ACBLAS API Trace: every ACBLAS call in start order, with its duration, return value, process and thread."
        }
        "acdnn_api_trace" => {
            "ACDNN API Trace: every ACDNN call in start order, with its duration, return value, process and thread."
        }
        "nvtx_api_sum" => {
            "NVTX API Summary: for each NVTX function called, the share of time, total time, number of calls and the statistics of one call's duration."
        }
        _ => return None,
    })
}

/// The hgtx and nvtx range reports.
fn range_report(name: &str) -> Option<&'static str> {
    Some(match name {
        "hgtx_sum" => {
            "HGTX Range Summary: for each HGTX range name (push/pop and start/end ranges, with their domain), the share of time, total time, number of instances and the statistics of one range's duration."
        }
        "hgtx_pushpop_trace" => {
            "HGTX Push/Pop Range Trace: every push/pop range in start order, with its start, end, duration, nesting level, name, domain, process and thread."
        }
        "hgtx_startend_trace" => {
            "HGTX Start/End Range Trace: every start/end range in start order, with its start, end, duration, name, domain, process and the thread that started it."
        }
        "nvtx_sum" => {
            "NVTX Range Summary: for each NVTX range name, the share of time, total time, number of instances and the statistics of one range's duration (nsys's nvtx_sum)."
        }
        "nvtx_pushpop_trace" => {
            "NVTX Push/Pop Range Trace: every NVTX push/pop range in start order, with its start, end, duration, nesting level, name, domain, process and thread."
        }
        "nvtx_startend_trace" => {
            "NVTX Start/End Range Trace: every NVTX start/end range in start order, with its start, end, duration, name, domain, process and starting thread."
        }
        _ => return None,
    })
}

/// The device activity and device memory reports.
fn device_report(name: &str) -> Option<&'static str> {
    Some(match name {
        "device_memory_usage_summary" => {
            "Device Memory Usage Summary: per process, kind of memory and device, the allocations and frees made through the runtime, the memory in use at its peak and at the end, and the largest allocation."
        }
        "device_memory_usage_detail" => {
            "Device Memory Usage Detail: every allocation and free in time order, with its process, kind of memory, device, the change in bytes and the memory in use after it."
        }
        "hggc_ppu_trace" => {
            "PPU Trace: every kernel, copy and memset the device ran, in start order, with its duration, device, stream, correlation id, bytes and throughput for copies, grid and block for kernels."
        }
        "hggc_ppu_kern_sum" => {
            "PPU Kernel Summary: for each kernel name, the share of device kernel time, total time, number of instances and the statistics of one instance's duration."
        }
        "hggc_ppu_mem_time_sum" => {
            "PPU Memory Time Summary: for each kind of device memory operation (copies by direction, memsets), the share of time, total time, count and the statistics of one operation's duration."
        }
        "hggc_ppu_mem_size_sum" => {
            "PPU Memory Size Summary: for each kind of device memory operation, the total bytes, count and the statistics of one operation's size in MB."
        }
        "cuda_gpu_trace" => {
            "CUDA GPU Trace: every kernel, copy and memset the GPU ran (CUPTI activity, through asys's injection library), in start order, with its duration, device, context, stream, correlation id, bytes and throughput for copies; grid, block, registers per thread and static and dynamic shared memory for kernels, and the graph and node a kernel ran as (nsys's cuda_gpu_trace). It reads the device activity table, as hggc_ppu_trace does."
        }
        "cuda_gpu_sync" => {
            "CUDA GPU Synchronization Trace: every wait CUPTI recorded (event, stream and device synchronizes, and streams waiting on events), in start order, with its duration, correlation id, context, stream and event. It reads the cuda_sync table; reports without one (no CUDA, or written before it) show no rows."
        }
        "cuda_gpu_kern_sum" => {
            "CUDA GPU Kernel Summary: for each kernel name (demangled), the share of GPU kernel time, total time, number of instances and the statistics of one instance's duration (nsys's cuda_gpu_kern_sum)."
        }
        "cuda_gpu_mem_time_sum" => {
            "CUDA GPU MemOps Summary (by Time): for each kind of GPU memory operation ([CUDA memcpy Host-to-Device], [CUDA memset], ...), the share of time, total time, count and the statistics of one operation's duration (nsys's cuda_gpu_mem_time_sum)."
        }
        "cuda_gpu_mem_size_sum" => {
            "CUDA GPU MemOps Summary (by Size): for each kind of GPU memory operation, the total bytes, count and the statistics of one operation's size in MB (nsys's cuda_gpu_mem_size_sum)."
        }
        "cuda_kern_exec_sum" => {
            "CUDA Kernel Launch & Exec Time Summary: each kernel joined to the CUDA runtime call that launched it (correlation id), per process, thread, device, call and kernel: the count, how many were queued, and the statistics of the total time (call start to kernel end), the call's time (A), the queue time from the call's end to the kernel's start (Q) and the kernel's time (K) (nsys's cuda_kern_exec_sum)."
        }
        _ => return None,
    })
}

/// The reports on CPU time, waits, processes and libraries.
fn cpu_report(name: &str) -> Option<&'static str> {
    Some(match name {
        "cpu_ctxsw_sum" => {
            "CPU Context Switch Summary: per thread, its time on CPU from the recorded context switches (--cpuctxsw): the share of time, total time, number of slices and the statistics of one slice's duration, with how many switches out were voluntary and involuntary."
        }
        "cpu_sample_sum" => {
            "CPU Sample Summary: per function, the samples (from -s) taken in it (self) and under it (total), with their share of all samples."
        }
        "python_sample_sum" => {
            "Python Sample Summary: per Python function (qualified name and file) of each thread (with its Python name, threading.Thread.name, where asys read one) of each process, the samples whose innermost Python frame it was (self, wherever the native code below it ran) and those with it anywhere on the Python stack (total), as shares of the samples with Python frames (--python-sampling); the interpreter's own frames are not shown, as in py-spy."
        }
        "python_wall_sum" => {
            "Python Wall Time Summary: per Python thread and innermost Python frame (function, file and line), its wall time split into on-CPU time (its samples' share of the thread's sampled CPU time) and waiting time (the off-CPU intervals, sleeping or blocked, that began with that Python stack), and the same counted wherever the frame is on the stack (total), as py-spy --idle shows (--python-sampling with --cpuctxsw and -s; waits without a Python stack are one row, [no python stack])."
        }
        "cpu_wait_sum" => {
            "CPU Wait Summary: per thread and the state it left the CPU in (S sleeping, D blocked, R preempted, ...), how often and how long it was off the CPU (total, mean, median, minimum, maximum), the threads that woke it most, and the most common kernel stacks where it left and where its waker was, and the most common Python stack it left from (--cpuctxsw; docs/waits.md)."
        }
        "processes" => {
            "Processes: each traced process with its control group and container, as read when it was first seen."
        }
        "libraries" => {
            "Libraries: each library asys probed, with its trace items, how many of its functions were probed, the calls recorded from it, its build id and path."
        }
        _ => return None,
    })
}

/// The reports on sampled metrics and user probes.
fn sampled_report(name: &str) -> Option<&'static str> {
    Some(match name {
        "host_memory_sum" => {
            "Host Memory Summary: for each traced process, from the samples of --host-memory-sampling (/proc/PID/status), the number of samples and the time they span, the minimum, average and maximum resident set (RSS), the average and maximum of its anonymous and file-backed parts, and the largest shared-memory part, in MiB."
        }
        "ppu_metrics_sum" => {
            "PPU Metrics Summary: for each PPU device (and the process whose runtime reported it), from the samples of --ppu-metrics-device, the number of samples, the utilisation over all of them (time the device ran something over the time sampled) with the lowest and highest of one sample, the average and largest device memory in use, and the average SM clock and power."
        }
        "ppu_metric_trace" => {
            "PPU Metrics Trace: every sample of --ppu-metrics-device in time order: the interval it covers, the device and process, the utilisation over the interval, and at its end the device memory in use and in all, the SM clock and the power draw."
        }
        "probe_sum" => {
            "User Probe Summary: for each --probe (one row per spec, all its sites together), the share of time, total time, number of hits, and the average, median, minimum, maximum and standard deviation of one hit's duration; only call probes (ucall, kcall) have durations, the other kinds' hits count with 0 ns. Sorted by total time."
        }
        "probe_trace" => {
            "User Probe Trace: every hit of a --probe in start order, with its duration (call probes), process, thread, kind, the spec, the return value (return and call probes) and the arguments the spec asked for (strings quoted, ? where one could not be read)."
        }
        "nic_metrics_sum" => {
            "NIC Metrics Summary: for each network interface, from the samples of --nic-metrics (/sys/class/net/IFACE/statistics), the bytes, packets and drops received and sent between the first and last sample, the average rates over that span and the peak rates between two samples."
        }
        _ => return None,
    })
}

/// The reports over a set of ranks ([`super::desync::SET_REPORTS`]).
fn set_report(name: &str) -> Option<&'static str> {
    Some(match name {
        "pccl_desync_sum" | "pccl_desync_summary" => {
            "PCCL Desync Summary: per collective name, over the ranks of one report or of several (aligned by their clocks), how many operations there were and the mean, median and maximum spread between the first and the last rank's arrival, with the rank that arrived last most often."
        }
        "pccl_desync_trace" => {
            "PCCL Desync Trace: each collective operation (the n-th call of a collective in every rank), each rank's arrival on the common timeline, the spread and the late rank."
        }
        "nccl_desync_sum" | "nccl_desync_summary" => {
            "NCCL Desync Summary: as pccl_desync_sum, for NCCL's collectives: per collective name, the operations and the spread of the ranks' arrivals, with the rank that was last most often."
        }
        "nccl_desync_trace" => {
            "NCCL Desync Trace: as pccl_desync_trace, for NCCL: each operation, each rank's arrival, the spread and the late rank."
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_report_has_a_description() {
        let one = super::super::REPORTS.iter().map(|(n, _)| n);
        for name in one.chain(super::super::desync::SET_REPORTS.iter().map(|(n, _)| n)) {
            let d = super::about(name).unwrap_or_else(|| panic!("{name} has no description"));
            assert!(d.len() > 40, "{name}: {d}");
        }
    }
}
