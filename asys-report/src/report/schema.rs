//! Table names and the declaration of every table of schema version
//! [`SCHEMA_VERSION`]: each `table!` below is the one place a table's columns
//! are listed (names, order, types, encodings, and how a row fills them).
//! Times are CLOCK_MONOTONIC nanoseconds; names are ids into `strings`.
#[allow(unused_imports)]
use super::columns::TableDef;
use super::columns::table;
use super::rows::{
    ActivityRow, ApiRow, HostMemoryRow, JitSymbolRow, KernelFrameRow, LibraryRow, ModuleRow,
    NicMetricRow, PpuMetricRow, ProcessInfoRow, ProcessRow, PythonFrameRow, RdmaCounterRow,
    SampleRow, SchedRow, StackFrameRow, StackRawRow, StringRow, SymbolRow, WakeupRow,
};

/// Bumped whenever a table or column changes meaning. 3: zstd-compressed
/// members; `args` is null except for the calls whose reports read it.
pub const SCHEMA_VERSION: u32 = 3;

pub const HGGC_API: &str = "hggc_api";
pub const HGGC_ACTIVITY: &str = "hggc_activity";
pub const PROCESS_EVENTS: &str = "process_events";
pub const MODULES: &str = "modules";
/// Functions JIT compilers named in their perf maps (`/tmp/perf-PID.map`).
pub const JIT_SYMBOLS: &str = "jit_symbols";
/// One row per traced process: its control group and container.
pub const PROCESSES: &str = "processes";
pub const SYMBOLS: &str = "symbols";
pub const STRINGS: &str = "strings";
/// The probed libraries that `libraryId` points into.
pub const LIBRARIES: &str = "libraries";
/// Raw stack copies, only in the recording folder (unwound by the symbolize
/// stage into API_STACKS, not packed into the report).
pub const STACKS_RAW: &str = "stacks_raw";
pub const API_STACKS: &str = "api_stacks";
pub const SCHED: &str = "sched";
/// Wake-ups (`sched_waking`), recorded with the context switches.
pub const SCHED_WAKEUPS: &str = "sched_wakeups";
/// Kernel stacks of CPU samples taken in the kernel and of switch-outs.
pub const KERNEL_STACKS: &str = "kernel_stacks";
/// Python frames of CPU samples (`--python-sampling`).
pub const PYTHON_FRAMES: &str = "python_frames";
/// CPU samples (`-s`), one row per sample.
pub const CPU_SAMPLES: &str = "cpu_samples";
/// Their raw stacks (recording folder only; `callStart` is the sample's time).
pub const SAMPLE_STACKS_RAW: &str = "sample_stacks_raw";
/// Their unwound stacks, one row per frame.
pub const CPU_SAMPLE_STACKS: &str = "cpu_sample_stacks";
/// Samples of the traced processes' memory (`--host-memory-sampling`).
pub const HOST_MEMORY: &str = "host_memory";
/// Samples of the network interfaces' counters (`--nic-metrics`).
pub const NIC_METRICS: &str = "nic_metrics";
/// Samples of the PPU devices' metrics (`--ppu-metrics-device`).
pub const PPU_METRICS: &str = "ppu_metrics";
/// Samples of the RDMA ports' hardware counters (`--nic-metrics`).
pub const RDMA_HW_COUNTERS: &str = "rdma_hw_counters";

/// Whether the API table of `item` keeps the raw argument registers (`args`):
/// only the range reports of hgtx and nvtx read them (domain handles, range
/// ids); every other call stores a null there.
pub fn keeps_args(item: crate::apis::TraceItem) -> bool {
    use crate::apis::TraceItem;
    matches!(item, TraceItem::Hgtx | TraceItem::Nvtx)
}

table! {
    /// One row per completed call of a traced API; every trace item has its
    /// own table of this shape (`hggc_api`, `osrt_api`, `pccl_api`, ...).
    pub mod api for ApiRow {
        START = "start": i64, Delta, |r| r.start;
        END = "end": i64, Delta, |r| r.end;
        PID = "pid": u32, Delta, |r| r.pid;
        TID = "tid": u32, Delta, |r| r.tid;
        CPU = "cpu": u32, Delta, |r| r.cpu;
        NAME_ID = "nameId": u32, Delta, |r| r.name_id;
        LIBRARY_ID = "libraryId": u32, Delta, |r| r.library_id;
        RETURN_VALUE = "returnValue": i64, Delta, |r| r.return_value;
        CORRELATION_ID = "correlationId": opt_u32, Delta, |r| r.correlation;
        BYTES = "bytes": opt_u64, Dict, |r| r.bytes;
        COPY_KIND = "copyKind": opt_i32, Dict, |r| r.copy_kind;
        STREAM = "stream": opt_u64, Dict, |r| r.stream;
        DEVICE = "device": opt_i32, Dict, |r| r.device;
        PTR = "ptr": opt_u64, Dict, |r| r.ptr;
        KERNEL_ADDR = "kernelAddr": opt_u64, Dict, |r| r.kernel_addr;
        GRID_X = "gridX": opt_u32, Dict, |r| r.grid.map(|g| g[0]);
        GRID_Y = "gridY": opt_u32, Dict, |r| r.grid.map(|g| g[1]);
        GRID_Z = "gridZ": opt_u32, Dict, |r| r.grid.map(|g| g[2]);
        BLOCK_X = "blockX": opt_u32, Dict, |r| r.block.map(|b| b[0]);
        BLOCK_Y = "blockY": opt_u32, Dict, |r| r.block.map(|b| b[1]);
        BLOCK_Z = "blockZ": opt_u32, Dict, |r| r.block.map(|b| b[2]);
        SHARED_MEM = "sharedMem": opt_u64, Dict, |r| r.shared_mem;
        /// Raw argument registers, for the items of [`keeps_args`](super::keeps_args).
        ARGS = "args": opt_u64x8, Dict, |r| r.args.as_ref();
        TEXT_ID = "textId": opt_u32, Dict, |r| r.text_id;
        TEXT_HANDLE = "textHandle": opt_u64, Dict, |r| r.text_handle;
    }
}

table! {
    /// Device activity: kernels, copies and memsets as the device ran them, on
    /// CLOCK_MONOTONIC; `kind` is kernel|memcpy|memset.
    pub mod activity for ActivityRow {
        START = "start": i64, Delta, |r| r.start;
        END = "end": i64, Delta, |r| r.end;
        KIND = "kind": str, Dict, |r| r.kind;
        PID = "pid": u32, Dict, |r| r.pid;
        DEVICE = "device": u32, Dict, |r| r.device;
        STREAM = "stream": u32, Dict, |r| r.stream;
        CORRELATION_ID = "correlationId": u32, Delta, |r| r.correlation;
        BYTES = "bytes": opt_u64, Dict, |r| r.bytes;
        COPY_KIND = "copyKind": opt_i32, Dict, |r| r.copy_kind;
        KERNEL_ADDR = "kernelAddr": opt_u64, Dict, |r| r.kernel_addr;
        GRID_X = "gridX": opt_u32, Dict, |r| r.grid.map(|g| g[0]);
        GRID_Y = "gridY": opt_u32, Dict, |r| r.grid.map(|g| g[1]);
        GRID_Z = "gridZ": opt_u32, Dict, |r| r.grid.map(|g| g[2]);
        BLOCK_X = "blockX": opt_u32, Dict, |r| r.block.map(|b| b[0]);
        BLOCK_Y = "blockY": opt_u32, Dict, |r| r.block.map(|b| b[1]);
        BLOCK_Z = "blockZ": opt_u32, Dict, |r| r.block.map(|b| b[2]);
        SHARED_MEM = "sharedMem": opt_u32, Dict, |r| r.shared_mem;
        CLOCK_OFFSET = "clockOffset": i64, Dict, |r| r.clock_offset;
        SRC_KIND = "srcKind": opt_i32, Dict, |r| r.src_kind;
        DST_KIND = "dstKind": opt_i32, Dict, |r| r.dst_kind;
    }
}

table! {
    /// Fork, exec and exit of traced processes; `kind` is fork|exec|exit.
    pub mod process_events for ProcessRow {
        TS = "ts": i64, Delta, |r| r.ts;
        KIND = "kind": str, Dict, |r| r.kind;
        PID = "pid": u32, Dict, |r| r.pid;
        TID = "tid": u32, Dict, |r| r.tid;
        CHILD_PID = "childPid": u32, Dict, |r| r.child_pid;
        COMM_ID = "commId": u32, Dict, |r| r.comm_id;
    }
}

table! {
    /// Context switches (`--cpuctxsw`): on `cpu` at `ts`, thread `prevTid` of
    /// process `prevPid` left in `prevState` (0 runnable, 1 S, 2 D, ...; the
    /// idle task is 0) and thread `nextTid` came in.
    pub mod sched for SchedRow {
        TS = "ts": i64, Delta, |r| r.ts;
        CPU = "cpu": u32, Dict, |r| r.cpu;
        PREV_PID = "prevPid": u32, Dict, |r| r.prev_pid;
        PREV_TID = "prevTid": u32, Dict, |r| r.prev_tid;
        PREV_STATE = "prevState": i64, Dict, |r| r.prev_state;
        PREV_COMM_ID = "prevCommId": u32, Dict, |r| r.prev_comm;
        NEXT_TID = "nextTid": u32, Dict, |r| r.next_tid;
        NEXT_COMM_ID = "nextCommId": u32, Dict, |r| r.next_comm;
    }
}

table! {
    /// Wake-ups (`sched_waking`, with `--cpuctxsw`): at `ts`, thread
    /// `wakerTid` of `wakerPid`, running on `cpu`, woke thread `wakeeTid`
    /// onto `targetCpu`.
    pub mod sched_wakeups for WakeupRow {
        TS = "ts": i64, Delta, |r| r.ts;
        CPU = "cpu": u32, Dict, |r| r.cpu;
        WAKER_PID = "wakerPid": u32, Dict, |r| r.waker_pid;
        WAKER_TID = "wakerTid": u32, Dict, |r| r.waker_tid;
        WAKER_COMM_ID = "wakerCommId": u32, Dict, |r| r.waker_comm;
        WAKEE_TID = "wakeeTid": u32, Dict, |r| r.wakee_tid;
        TARGET_CPU = "targetCpu": u32, Dict, |r| r.target_cpu;
    }
}

table! {
    /// Kernel stacks, one row per frame, innermost (depth 0) first: of the
    /// CPU sample (`source` sample), the switch-out (`source` switch) or the
    /// wake-up it issued (`source` waking) of thread `tid` at `ts`; `nameId` is `function+0xoff` from
    /// /proc/kallsyms (`[module]` appended), or the hex address.
    pub mod kernel_stacks for KernelFrameRow {
        TS = "ts": i64, Delta, |r| r.ts;
        TID = "tid": u32, Dict, |r| r.tid;
        SOURCE = "source": str, Dict, |r| r.source;
        DEPTH = "depth": u32, Dict, |r| r.depth;
        ADDR = "addr": u64, Dict, |r| r.addr;
        NAME_ID = "nameId": u32, Dict, |r| r.name_id;
    }
}

table! {
    /// Python frames (CPython's `_PyInterpreterFrame`s) of the CPU sample
    /// of thread `tid` of process `pid` at `ts`, one row per frame,
    /// innermost (depth 0) first (`--python-sampling`): the code object at
    /// `code` names `functionId` (its qualified name) in `fileId`, running
    /// `line` (null where the code object or its line could not be read, or
    /// the code object was freed and its memory reused before it was read);
    /// `isEntry` marks the first frame one C-level call of the evaluator
    /// ran (the frames up to it ran in the innermost `_PyEval_EvalFrameDefault`
    /// native frame not yet matched, and so on outwards).
    pub mod python_frames for PythonFrameRow {
        TS = "ts": i64, Delta, |r| r.ts;
        PID = "pid": u32, Dict, |r| r.pid;
        TID = "tid": u32, Dict, |r| r.tid;
        DEPTH = "depth": u32, Dict, |r| r.depth;
        CODE = "code": u64, Dict, |r| r.code;
        FUNCTION_ID = "functionId": opt_u32, Dict, |r| r.function_id;
        FILE_ID = "fileId": opt_u32, Dict, |r| r.file_id;
        LINE = "line": opt_u32, Dict, |r| r.line;
        IS_ENTRY = "isEntry": bool, Plain, |r| r.is_entry;
    }
}

table! {
    /// Executable file mappings of traced processes, as seen at `ts`.
    pub mod modules for ModuleRow {
        TS = "ts": i64, Dict, |r| r.ts;
        PID = "pid": u32, Dict, |r| r.pid;
        START = "start": u64, Plain, |r| r.start;
        END = "end": u64, Plain, |r| r.end;
        FILE_OFFSET = "fileOffset": u64, Dict, |r| r.file_offset;
        PATH_ID = "pathId": u32, Dict, |r| r.path_id;
        BUILD_ID = "buildId": opt_str, Dict, |r| r.build_id.as_deref();
    }
}

table! {
    /// The functions a process's JIT compiler listed in its perf map, read
    /// when the process exited or the recording ended: they name frames in
    /// anonymous executable memory. `sourceId` names the file read.
    pub mod jit_symbols for JitSymbolRow {
        PID = "pid": u32, Dict, |r| r.pid;
        START = "start": u64, Plain, |r| r.start;
        SIZE = "size": u64, Plain, |r| r.size;
        NAME_ID = "nameId": u32, Plain, |r| r.name_id;
        SOURCE_ID = "sourceId": u32, Dict, |r| r.source_id;
    }
}

table! {
    /// Each traced process's control group and container, as read from
    /// /proc/PID/cgroup at `ts` (its first scan in this report), and its
    /// rank, from /proc/PID/environ at the same time.
    pub mod processes for ProcessInfoRow {
        TS = "ts": i64, Dict, |r| r.ts;
        PID = "pid": u32, Dict, |r| r.pid;
        CGROUP_PATH_ID = "cgroupPathId": u32, Dict, |r| r.cgroup_path_id;
        CGROUP_V2 = "cgroupV2": bool, Dict, |r| r.cgroup_v2;
        CGROUP_ID = "cgroupId": opt_u64, Dict, |r| r.cgroup_id;
        CONTAINER_ID = "containerId": opt_str, Dict, |r| r.container_id.as_deref();
        CONTAINER_RUNTIME = "containerRuntime": opt_str, Dict, |r| r.container_runtime;
        /// Absent in reports written before ranks were recorded: readers
        /// check for it (`TableReader::has_column`) and read none.
        RANK = "rank": opt_u32, Dict, |r| r.rank;
        /// Where its standard output and error went (absent in older
        /// reports, like `rank`).
        STDOUT = "stdout": opt_str, Dict, |r| r.stdout.as_deref();
        STDERR = "stderr": opt_str, Dict, |r| r.stderr.as_deref();
    }
}

table! {
    /// The libraries asys probed, one row each: `id` is what the API
    /// tables' `libraryId` holds. Calls recorded through the injection
    /// library's sites (`--api-probes site`) come from no probed library
    /// and carry `libraryId` 4294967295, which no row has.
    pub mod libraries for LibraryRow {
        ID = "id": u32, Plain, |r| r.id;
        PATH = "path": str, Plain, |r| r.path.as_str();
        BUILD_ID = "buildId": opt_str, Plain, |r| r.build_id.as_deref();
        ITEMS = "items": str, Dict, |r| r.items.as_str();
        FUNCTIONS = "functions": u32, Plain, |r| r.functions;
    }
}

table! {
    /// Code addresses resolved to names by the symbolize stage.
    pub mod symbols for SymbolRow {
        PID = "pid": u32, Dict, |r| r.pid;
        ADDR = "addr": u64, Dict, |r| r.addr;
        NAME_ID = "nameId": u32, Dict, |r| r.name_id;
    }
}

table! {
    /// The string table, as nsys's StringIds.
    pub mod strings for StringRow {
        ID = "id": u32, Delta, |r| r.id;
        VALUE = "value": str, Plain, |r| r.value.as_str();
    }
}

table! {
    /// Raw stacks as the kernel copied them (recording folder only).
    pub mod stacks_raw for StackRawRow {
        PID = "pid": u32, Dict, |r| r.pid;
        TID = "tid": u32, Dict, |r| r.tid;
        CALL_START = "callStart": i64, Plain, |r| r.call_start;
        IP = "ip": u64, Plain, |r| r.ip;
        SP = "sp": u64, Plain, |r| r.sp;
        BP = "bp": u64, Plain, |r| r.bp;
        STACK = "stack": bin, Plain, |r| r.stack.as_slice();
    }
}

table! {
    /// CPU samples: the thread on a CPU when its sampling timer fired;
    /// `kernelMode`: it was in the kernel (its stack is where it entered it).
    pub mod cpu_samples for SampleRow {
        TS = "ts": i64, Delta, |r| r.ts;
        PID = "pid": u32, Dict, |r| r.pid;
        TID = "tid": u32, Dict, |r| r.tid;
        CPU = "cpu": u32, Dict, |r| r.cpu;
        KERNEL_MODE = "kernelMode": bool, Dict, |r| r.kernel_mode;
    }
}

table! {
    /// Call stacks of API calls, one row per frame, innermost (depth 0) first:
    /// the call is the one of that thread that started at `callStart`.
    pub mod api_stacks for StackFrameRow {
        PID = "pid": u32, Dict, |r| r.pid;
        TID = "tid": u32, Dict, |r| r.tid;
        CALL_START = "callStart": i64, Dict, |r| r.call_start;
        DEPTH = "depth": u32, Dict, |r| r.depth;
        PC = "pc": u64, Dict, |r| r.pc;
        FUNCTION_ID = "functionId": u32, Dict, |r| r.function_id;
        FILE_ID = "fileId": opt_u32, Dict, |r| r.file_id;
        LINE = "line": opt_u32, Dict, |r| r.line;
        MODULE_ID = "moduleId": u32, Dict, |r| r.module_id;
        INLINED = "inlined": bool, Dict, |r| r.inlined;
    }
}

table! {
    /// Call stacks of CPU samples, one row per frame, innermost (depth 0: the
    /// sampled instruction) first; the sample is that thread's at `ts`.
    /// The columns of `api_stacks`, with `ts` for `callStart`.
    pub mod cpu_sample_stacks for StackFrameRow {
        PID = "pid": u32, Dict, |r| r.pid;
        TID = "tid": u32, Dict, |r| r.tid;
        TS = "ts": i64, Dict, |r| r.call_start;
        DEPTH = "depth": u32, Dict, |r| r.depth;
        PC = "pc": u64, Dict, |r| r.pc;
        FUNCTION_ID = "functionId": u32, Dict, |r| r.function_id;
        FILE_ID = "fileId": opt_u32, Dict, |r| r.file_id;
        LINE = "line": opt_u32, Dict, |r| r.line;
        MODULE_ID = "moduleId": u32, Dict, |r| r.module_id;
        INLINED = "inlined": bool, Dict, |r| r.inlined;
    }
}

table! {
    /// The memory of a traced process at `ts` (`--host-memory-sampling`),
    /// in bytes, as /proc/PID/status gives it: `rss` (VmRSS) is `anon`
    /// (RssAnon) + `file` (RssFile) + `shmem` (RssShmem).
    pub mod host_memory for HostMemoryRow {
        TS = "ts": i64, Delta, |r| r.ts;
        PID = "pid": u32, Dict, |r| r.pid;
        RSS = "rss": u64, Delta, |r| r.rss;
        ANON = "anon": u64, Delta, |r| r.anon;
        FILE = "file": u64, Delta, |r| r.file;
        SHMEM = "shmem": u64, Delta, |r| r.shmem;
        VM_SIZE = "vmSize": u64, Delta, |r| r.vm_size;
    }
}

table! {
    /// The counters of a network interface at `ts` (`--nic-metrics`): the
    /// kernel's totals since the interface came up (a rate is the
    /// difference of two rows of the same device over their time apart).
    pub mod nic_metrics for NicMetricRow {
        TS = "ts": i64, Delta, |r| r.ts;
        DEVICE_ID = "deviceId": u32, Dict, |r| r.device_id;
        RX_BYTES = "rxBytes": u64, Delta, |r| r.rx_bytes;
        RX_PACKETS = "rxPackets": u64, Delta, |r| r.rx_packets;
        TX_BYTES = "txBytes": u64, Delta, |r| r.tx_bytes;
        TX_PACKETS = "txPackets": u64, Delta, |r| r.tx_packets;
        RX_DROPPED = "rxDropped": u64, Delta, |r| r.rx_dropped;
        TX_DROPPED = "txDropped": u64, Delta, |r| r.tx_dropped;
    }
}

table! {
    /// A PPU device's metrics over the `intervalNs` before `ts`
    /// (`--ppu-metrics-device`), as process `pid`'s runtime published them:
    /// `busyNs` of the interval had an operation running (utilisation is
    /// their ratio), and at `ts` the SM clock, the power draw, the
    /// device memory in use and in all, and the memory clock (null where
    /// the device reports none, as the simulated ones).
    pub mod ppu_metrics for PpuMetricRow {
        TS = "ts": i64, Delta, |r| r.ts;
        PID = "pid": u32, Dict, |r| r.pid;
        DEVICE = "device": u32, Dict, |r| r.device;
        INTERVAL_NS = "intervalNs": u64, Delta, |r| r.interval_ns;
        BUSY_NS = "busyNs": u64, Delta, |r| r.busy_ns;
        SM_CLOCK_MHZ = "smClockMhz": u32, Dict, |r| r.sm_clock_mhz;
        POWER_MW = "powerMw": u64, Dict, |r| r.power_mw;
        MEMORY_USED = "memoryUsed": u64, Delta, |r| r.memory_used;
        MEMORY_TOTAL = "memoryTotal": u64, Dict, |r| r.memory_total;
        /// Absent in reports written before NVML was read: readers check
        /// for it (`TableReader::has_column`).
        MEM_CLOCK_MHZ = "memClockMhz": opt_u32, Dict, |r| r.mem_clock_mhz;
    }
}

table! {
    /// The hardware counters of an RDMA port at `ts` (`--nic-metrics`):
    /// each file of /sys/class/infiniband/DEV/ports/PORT/hw_counters, the
    /// driver's total since it loaded; which counters there are depends on
    /// the driver. `deviceId` names the port `DEV/PORT`.
    pub mod rdma_hw_counters for RdmaCounterRow {
        TS = "ts": i64, Delta, |r| r.ts;
        DEVICE_ID = "deviceId": u32, Dict, |r| r.device_id;
        COUNTER_ID = "counterId": u32, Dict, |r| r.counter_id;
        VALUE = "value": u64, Delta, |r| r.value;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::{apis::TraceItem, report::ALL_TABLES};

    /// `ALL_TABLES` (report/tables.rs) names, once each, every table whose
    /// name is declared above (read from this file, so that a new one is
    /// not missed) and every trace item's API table; not the recording
    /// folder's raw stacks, which are never packed.
    #[test]
    fn all_tables_names_every_table_once() {
        let mut declared: BTreeSet<String> = include_str!("schema.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("pub const ")?.split_once(": &str = \""))
            .filter_map(|(_, v)| v.strip_suffix("\";"))
            .map(String::from)
            .collect();
        assert!(declared.contains(STRINGS) && declared.contains(RDMA_HW_COUNTERS));
        assert!(declared.remove(STACKS_RAW) && declared.remove(SAMPLE_STACKS_RAW));
        declared.extend(TraceItem::SUPPORTED.iter().map(|(_, i)| i.table()));
        let listed: BTreeSet<String> = ALL_TABLES.iter().map(|t| t.to_string()).collect();
        assert_eq!(listed.len(), ALL_TABLES.len(), "a table listed twice");
        assert_eq!(listed, declared);
    }
}
