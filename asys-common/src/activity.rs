//! Device activity (kernels, copies, memsets, syncs, graphs): the record the
//! injection library hands its probe site, and the event that carries it.
use core::mem::offset_of;

use crate::EventHeader;

pub const ACTIVITY_KERNEL: u32 = 1;
pub const ACTIVITY_MEMCPY: u32 = 2;
pub const ACTIVITY_MEMSET: u32 = 3;
/// A synchronization (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION): a host wait on an
/// event, a stream or a context; `sync_type` says which, `event` names the
/// event waited on. Only CUPTI gives these.
pub const ACTIVITY_SYNC: u32 = 4;
/// A whole CUDA graph's execution (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, under
/// `--cuda-graph-trace graph`): `graph_id` is the graph's.
pub const ACTIVITY_GRAPH: u32 = 5;
/// Set in `kind` on records from CUPTI (CUDA): no hggc call waits for them.
pub const ACTIVITY_FROM_CUPTI: u32 = 1 << 8;
/// The kernel/memcpy/memset part of `kind`.
pub const ACTIVITY_KIND_MASK: u32 = 0xff;

/// One device activity record as the injection library hands it to its probe
/// site `asys_site_activity`: times already on the host's CLOCK_MONOTONIC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityRecord {
    pub kind: u32,
    pub correlation: u32,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub stream: u32,
    pub bytes: u64,
    pub copy_kind: u32,
    pub shared_mem: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Kernel function address in the process (HGPTI), or the kernel's name
    /// id, with [`KERNEL_NAME_BIT`](crate::KERNEL_NAME_BIT) (CUPTI).
    pub func: u64,
    /// Device clock minus CLOCK_MONOTONIC used for the conversion (ns).
    pub clock_offset: i64,
    /// Memory kinds of a copy's source and destination, a memset's
    /// destination (CUPTI_ACTIVITY_MEMORY_KIND_*: 1 pageable, 2 pinned,
    /// 3 device; 0 unknown).
    pub src_kind: u32,
    pub dst_kind: u32,
    /// The rest of CUPTI's kernel record (`CUpti_ActivityKernel9`), valid on
    /// a kernel with [`ACTIVITY_FROM_CUPTI`]; HGPTI gives none of them (0).
    pub registers_per_thread: u32,
    /// Static and dynamic shared memory per block (bytes); `shared_mem`
    /// keeps their sum, as HGPTI's single figure.
    pub static_shared: u32,
    pub dynamic_shared: u32,
    /// Local memory per thread and for the whole kernel (bytes).
    pub local_per_thread: u32,
    pub local_total: u32,
    /// CUDA context id (kernels, copies, memsets, syncs, graphs).
    pub context: u32,
    /// The graph a kernel ran in (0: launched on its own), or the graph of
    /// an [`ACTIVITY_GRAPH`] record.
    pub graph_id: u32,
    /// A sync's CUDA event id (CUPTI's `cudaEventId`).
    pub event: u32,
    /// The graph node a kernel was (0: launched on its own).
    pub graph_node_id: u64,
    /// The green context (0: none; CUPTI 12's kernel record has no field for
    /// it, so CUDA 12 leaves it 0).
    pub green_context: u32,
    /// A sync's CUpti_ActivitySynchronizationType (1 event synchronize,
    /// 2 stream wait event, 3 stream synchronize, 4 context synchronize).
    pub sync_type: u32,
}

// Written by the injection library (a host build of this type) and read
// whole from its memory by the eBPF side (activity.rs, a bpfel build): both
// builds must agree on all of it; no hidden padding (Pod, in
// `ActivityEvent`).
const _: () = assert!(size_of::<ActivityRecord>() == 144);
const _: () = assert!(offset_of!(ActivityRecord, func) == 72);
const _: () = assert!(offset_of!(ActivityRecord, graph_node_id) == 128);
const _: () = assert!(offset_of!(ActivityRecord, sync_type) == 140);

/// A device activity record on its way to userspace.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityEvent {
    pub header: EventHeader,
    pub record: ActivityRecord,
}

// collect/decode.rs reads it whole.
const _: () = assert!(size_of::<ActivityEvent>() == 168);
const _: () = assert!(offset_of!(ActivityEvent, header) == 0);
const _: () = assert!(offset_of!(ActivityEvent, record) == 24);
