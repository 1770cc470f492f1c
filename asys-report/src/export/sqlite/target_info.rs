//! The tables nsys's readers join the activity tables with: the `ENUM_*`
//! tables that name the numbers of the other tables (copy kinds, memory
//! kinds, event classes and types), `TARGET_INFO_*` (the devices, their
//! streams, the machine) and `META_DATA_*` (the capture and the export).
//! Each enumeration holds the values asys writes, by nsys's numbers, names
//! and labels; asys's own event classes (trace items nsys has no class
//! for) are numbered from [`ASYS_CLASSES`] up. See docs/export.md.
use std::collections::{BTreeMap, BTreeSet};

use super::{
    ExportError, Writer, insert,
    tables::{CudaDevice, CudaStream, EnumValue, GpuInfo, MetaData, SqlTable, SystemEnv},
};
use crate::{
    report::schema::{activity as ac, ppu_metrics as pm},
    trace_items::TraceItem,
};

/// `ENUM_CUDA_MEMCPY_OPER`: CUPTI's CUpti_ActivityMemcpyKind.
const MEMCPY_OPER: &[(i64, &str, &str)] = &[
    (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
    (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
    (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
    (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
    (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"),
    (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
    (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"),
    (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
    (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
    (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
    (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
    (11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"),
    (12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"),
];

/// `ENUM_CUDA_MEM_KIND`: nsys's numbering (not CUPTI's): asys writes only
/// device memory (`MEM_KIND_DEVICE`), and NULL where host memory was
/// pageable or pinned, which it does not know.
const MEM_KIND: &[(i64, &str, &str)] = &[
    (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
    (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
    (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
    (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
];

/// `ENUM_NSYS_EVENT_TYPE`: the types of NVTX_EVENTS rows asys writes.
const EVENT_TYPE: &[(i64, &str, &str)] = &[
    (
        super::NVTX_PUSH_POP_RANGE,
        "NvtxPushPopRange",
        "NvtxPushPopRange",
    ),
    (
        super::NVTX_START_END_RANGE,
        "NvtxStartEndRange",
        "NvtxStartEndRange",
    ),
];

/// `ENUM_NSYS_EVENT_CLASS` values of nsys's own.
const CUDA_RUNTIME: i64 = 0;
const CUDA_DRIVER: i64 = 1;
const OS_RUNTIME: i64 = 27;
const CUDNN: i64 = 28;
const CUBLAS: i64 = 29;
const NSYS_CLASSES: &[(i64, &str, &str)] = &[
    (
        CUDA_RUNTIME,
        "TRACE_PROCESS_EVENT_CUDA_RUNTIME",
        "CUDA runtime",
    ),
    (
        CUDA_DRIVER,
        "TRACE_PROCESS_EVENT_CUDA_DRIVER",
        "CUDA driver",
    ),
    (OS_RUNTIME, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OS runtime"),
    (CUDNN, "TRACE_PROCESS_EVENT_CUDNN", "cuDNN"),
    (CUBLAS, "TRACE_PROCESS_EVENT_CUBLAS", "cuBLAS"),
];

/// The first event class of asys's own: a trace item nsys has no class
/// for (the PPU's collectives, NCCL) is `ASYS_CLASSES` + its family id.
pub const ASYS_CLASSES: i64 = 1000;

/// The `eventClass` of a call named `name` of `item`: the runtime's and
/// the driver's calls share CUPTI_ACTIVITY_KIND_RUNTIME, as in nsys (a CUDA
/// driver function is `cu…` but not `cuda…`); hggc is the PPU's runtime,
/// acblas and acdnn its cuBLAS and cuDNN.
pub fn event_class(item: Option<TraceItem>, name: &str) -> i64 {
    match item {
        Some(TraceItem::Cuda) if name.starts_with("cu") && !name.starts_with("cuda") => CUDA_DRIVER,
        Some(TraceItem::Cuda | TraceItem::Hggc) => CUDA_RUNTIME,
        Some(TraceItem::Osrt) => OS_RUNTIME,
        Some(TraceItem::Cublas | TraceItem::Acblas) => CUBLAS,
        Some(TraceItem::Cudnn | TraceItem::Acdnn) => CUDNN,
        Some(i) => ASYS_CLASSES + i64::from(i.family_id()),
        None => CUDA_RUNTIME,
    }
}

/// The trace item whose API table is `table` (`pccl_api`).
pub fn item_of_table(table: &str) -> Option<TraceItem> {
    TraceItem::SUPPORTED
        .iter()
        .map(|(_, i)| *i)
        .find(|i| i.table() == table)
}

/// The `ENUM_*` tables; `items` are the trace items whose calls the export
/// holds, for the classes of asys's own.
pub fn enums(w: &Writer, items: &BTreeSet<TraceItem>) -> Result<(), ExportError> {
    let own: Vec<(i64, String, String)> = items
        .iter()
        // hgtx's and NVTX's calls are NVTX_EVENTS' ranges, not API rows.
        .filter(|i| !matches!(i, TraceItem::Hgtx | TraceItem::Nvtx))
        .filter_map(|&i| {
            let class = event_class(Some(i), "");
            (class >= ASYS_CLASSES).then(|| {
                let name = format!("ASYS_TRACE_ITEM_{}", i.name().to_ascii_uppercase());
                (class, name, format!("{} (asys)", i.name()))
            })
        })
        .collect();
    let nsys = NSYS_CLASSES
        .iter()
        .map(|&(id, name, label)| (id, name.to_owned(), label.to_owned()));
    let classes: Vec<(i64, String, String)> = nsys.chain(own).collect();
    let owned = |v: &[(i64, &str, &str)]| -> Vec<(i64, String, String)> {
        v.iter()
            .map(|&(id, n, l)| (id, n.to_owned(), l.to_owned()))
            .collect()
    };
    for (table, values) in [
        (MEMCPY_OPER_TABLE, owned(MEMCPY_OPER)),
        (MEM_KIND_TABLE, owned(MEM_KIND)),
        (EVENT_TYPE_TABLE, owned(EVENT_TYPE)),
        (EVENT_CLASS_TABLE, classes),
    ] {
        enum_table(w, table, values)?;
    }
    Ok(())
}

/// Enumeration `table` (of [`EnumValue`]'s shape) with `values`: (id,
/// name, label).
pub fn enum_table(
    w: &Writer,
    table: &str,
    values: impl IntoIterator<Item = (i64, String, String)>,
) -> Result<(), ExportError> {
    let mut ins = w.table_named::<EnumValue>(table)?;
    for (id, name, label) in values {
        let row = EnumValue {
            id,
            name,
            label: Some(label),
        };
        insert(&mut ins, w.path, &row)?;
    }
    Ok(())
}

/// The names of the `ENUM_*` tables [`enums`] writes.
pub const MEMCPY_OPER_TABLE: &str = "ENUM_CUDA_MEMCPY_OPER";
pub const MEM_KIND_TABLE: &str = "ENUM_CUDA_MEM_KIND";
pub const EVENT_TYPE_TABLE: &str = "ENUM_NSYS_EVENT_TYPE";
pub const EVENT_CLASS_TABLE: &str = "ENUM_NSYS_EVENT_CLASS";
pub const ENUM_TABLES: &[&str] = &[
    MEMCPY_OPER_TABLE,
    MEM_KIND_TABLE,
    EVENT_TYPE_TABLE,
    EVENT_CLASS_TABLE,
];

/// `META_DATA_CAPTURE`, of [`MetaData`]'s shape (`META_DATA_EXPORT` is its
/// declared name).
pub const META_DATA_CAPTURE: &str = "META_DATA_CAPTURE";

/// What the device activity says about devices and streams: per device,
/// the (process, stream) pairs that used it.
#[derive(Default)]
pub struct DeviceUse(BTreeMap<u32, BTreeSet<(u32, u32)>>);

impl DeviceUse {
    /// Process `pid` used `stream` of `device`.
    pub fn add(&mut self, device: u32, pid: u32, stream: u32) {
        self.0.entry(device).or_default().insert((pid, stream));
    }

    /// By a pass of its own over the device activity, where the device
    /// tables' pass did not run.
    fn scan(w: &Writer) -> Result<Self, ExportError> {
        let mut used = Self::default();
        for b in ac::scan(w.report, &[ac::PID, ac::DEVICE, ac::STREAM])? {
            let b = b?;
            let v = ac::View(&b);
            let (pid, device, stream) = (v.pid()?, v.device()?, v.stream()?);
            for i in 0..b.num_rows() {
                used.add(device[i], pid[i], stream[i]);
            }
        }
        Ok(used)
    }
}

/// The devices: which processes and streams used each, and its memory.
struct Devices {
    used: BTreeMap<u32, BTreeSet<(u32, u32)>>,
    /// Per device, its memory in all, from the device metrics.
    total_memory: BTreeMap<u32, u64>,
}

fn devices(w: &Writer, used: Option<DeviceUse>) -> Result<Devices, ExportError> {
    let used = match used {
        Some(u) => u,
        None => DeviceUse::scan(w)?,
    };
    let mut d = Devices {
        used: used.0,
        total_memory: BTreeMap::new(),
    };
    for b in pm::scan(w.report, &[pm::DEVICE, pm::MEMORY_TOTAL])? {
        let b = b?;
        let v = pm::View(&b);
        let (device, total) = (v.device()?, v.memory_total()?);
        for i in 0..b.num_rows() {
            let t = d.total_memory.entry(device[i]).or_default();
            *t = (*t).max(total[i]);
        }
    }
    Ok(d)
}

/// `TARGET_INFO_GPU` (one row per device the activity or the metrics
/// name; `used`, the activity's devices where the device tables' pass
/// took them, else a pass of its own), `TARGET_INFO_CUDA_DEVICE` (one per process and device) and
/// `TARGET_INFO_CUDA_STREAM` (one per process, device and stream).
/// asys knows a device by its number; its name is `device N` (or the
/// runtime's, PPU N), and what the report does not hold is NULL.
pub fn devices_and_streams(w: &Writer, used: Option<DeviceUse>) -> Result<(), ExportError> {
    let d = devices(w, used)?;
    let ppu = w.report.metadata.trace.iter().any(|t| t == "hggc");
    let ids: BTreeSet<u32> = d
        .used
        .keys()
        .chain(d.total_memory.keys())
        .copied()
        .collect();
    let mut gpus = w.table::<GpuInfo>()?;
    for &id in &ids {
        let row = GpuInfo {
            id: i64::from(id),
            name: Some(if ppu {
                format!("PPU {id}")
            } else {
                format!("device {id}")
            }),
            totalMemory: d.total_memory.get(&id).map(|&t| t as i64),
            cuDevice: Some(i64::from(id)),
            ..Default::default()
        };
        insert(&mut gpus, w.path, &row)?;
    }
    drop(gpus);
    let mut cuda_devices = w.table::<CudaDevice>()?;
    let mut streams = w.table::<CudaStream>()?;
    for (&device, used) in &d.used {
        let pids: BTreeSet<u32> = used.iter().map(|&(p, _)| p).collect();
        for pid in pids {
            let row = CudaDevice {
                gpuId: i64::from(device),
                cudaId: i64::from(device),
                pid: i64::from(pid),
                ..Default::default()
            };
            insert(&mut cuda_devices, w.path, &row)?;
        }
        for &(pid, stream) in used {
            let row = CudaStream {
                streamId: i64::from(stream),
                processId: i64::from(pid),
                // One context per device and process, as in the activity
                // tables.
                contextId: 0,
                ..Default::default()
            };
            insert(&mut streams, w.path, &row)?;
        }
    }
    Ok(())
}

/// `TARGET_INFO_SYSTEM_ENV`: the machine, as the report recorded it.
pub fn system_env(w: &Writer) -> Result<(), ExportError> {
    let m = &w.report.metadata;
    let mut ins = w.table::<SystemEnv>()?;
    for (name, value) in [
        ("Hostname", m.host.clone()),
        ("OsKernelRelease", m.kernel.clone()),
        ("CpuCores", m.cpus.to_string()),
    ] {
        let row = SystemEnv {
            name: name.into(),
            value: Some(value),
            ..Default::default()
        };
        insert(&mut ins, w.path, &row)?;
    }
    Ok(())
}

/// `META_DATA_CAPTURE` (how the report was recorded) and
/// `META_DATA_EXPORT` (what wrote this file).
pub fn meta_data(w: &Writer) -> Result<(), ExportError> {
    let m = &w.report.metadata;
    let capture = [
        ("CAPTURE_PRODUCT_NAME", "asys".to_owned()),
        ("CAPTURE_PRODUCT_VERSION", m.asys_version.clone()),
        ("CAPTURE_COMMAND_LINE", m.command_line.join(" ")),
        ("CAPTURE_TRACE", m.trace.join(",")),
        ("CAPTURE_START_UTC_NS", m.start_realtime_ns.to_string()),
        (
            "CAPTURE_DURATION_NS",
            (m.end_monotonic_ns - m.start_monotonic_ns).to_string(),
        ),
    ];
    let export = [
        ("EXPORT_PRODUCT_NAME", "asys".to_owned()),
        (
            "EXPORT_PRODUCT_VERSION",
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
        ("EXPORT_SCHEMA_VERSION", format!("asys-{}", SCHEMA_VERSION)),
        ("EXPORT_TIME_UNIT", "ns".to_owned()),
    ];
    for (table, rows) in [
        (META_DATA_CAPTURE, &capture[..]),
        (MetaData::NAME, &export[..]),
    ] {
        let mut ins = w.table_named::<MetaData>(table)?;
        for (name, value) in rows {
            let row = MetaData {
                name: (*name).to_owned(),
                value: Some(value.clone()),
            };
            insert(&mut ins, w.path, &row)?;
        }
    }
    Ok(())
}

/// The version of this export's tables and columns: bumped when one
/// changes meaning. 2: the `ENUM_*`, `TARGET_INFO_*` and `META_DATA_*`
/// tables, nsys's event classes and memory kinds. 3: nsys 2026.4's full
/// column lists of the CUPTI activity tables (the memcpy and memset tables
/// lose the `graphId` nsys does not have), the CUDA graph tables, and the
/// synchronization table in every export.
pub const SCHEMA_VERSION: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_get_nsys_event_classes() {
        assert_eq!(
            event_class(Some(TraceItem::Cuda), "cudaLaunchKernel"),
            CUDA_RUNTIME
        );
        assert_eq!(
            event_class(Some(TraceItem::Cuda), "cuLaunchKernel"),
            CUDA_DRIVER
        );
        assert_eq!(event_class(Some(TraceItem::Hggc), "hggcMalloc"), 0);
        assert_eq!(event_class(Some(TraceItem::Osrt), "read"), 27);
        assert!(event_class(Some(TraceItem::Pccl), "pcclAllReduce") >= ASYS_CLASSES);
        assert_eq!(item_of_table("pccl_api"), Some(TraceItem::Pccl));
    }
}
