//! Decoded events to report rows. API names are resolved to string ids once
//! per report (a probe's name when it is first seen in that report, a site
//! API's when announced), never per event.
use asys_common::{
    ACTIVITY_KERNEL, ACTIVITY_MEMCPY, ActivityEvent, ApiCallEvent, ApiTextEvent, Cookie,
};

use super::{CollectError, device_ledger, process_tree::SiteApiIndex};
use crate::{
    apis::{self, Signature},
    kernel::Tracer,
    sink::recorder::Recorder,
};
use asys_report::report::{
    rows::{ActivityRow, ApiRow, GraphRow, KernelDetails, SyncRow},
    schema::ActivityKind,
};
use asys_report::trace_items::TraceItem;

/// An API the injection library announced (site-recorded calls), resolved
/// once: whether `--hggc-trace-set` wants it and how its arguments read.
#[derive(Debug)]
pub struct SiteApi {
    pub name: String,
    /// hggc (HGPTI's callbacks) or cuda (CUPTI's, runtime and driver).
    pub item: TraceItem,
    pub wanted: bool,
    pub signature: Signature,
}

/// Every API name the injection libraries announced, each once.
#[derive(Debug, Default)]
pub struct SiteApis {
    apis: Vec<SiteApi>,
    by_name: std::collections::HashMap<String, SiteApiIndex>,
}

impl SiteApis {
    /// The index of `name`, resolving it the first time.
    pub fn index(&mut self, name: &str, set: &apis::HggcTraceSet) -> SiteApiIndex {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let i = self.apis.len() as SiteApiIndex;
        // CUDA's calls come without their arguments (CUPTI hands a struct
        // per function, not register slots): no signature to decode.
        let cuda = name.starts_with("cu");
        self.apis.push(SiteApi {
            name: if cuda {
                runtime_name(name).to_string()
            } else {
                name.to_string()
            },
            item: if cuda {
                TraceItem::Cuda
            } else {
                TraceItem::Hggc
            },
            wanted: cuda || set.wants_api(name),
            signature: if cuda {
                Signature::default()
            } else {
                apis::signature(name)
            },
        });
        self.by_name.insert(name.to_string(), i);
        i
    }

    pub fn get(&self, i: SiteApiIndex) -> &SiteApi {
        &self.apis[i as usize]
    }
}

/// A CUDA runtime function as the application called it: CUPTI names
/// runtime calls with their API version (`cudaLaunchKernel_v7000`), which
/// neither the exported symbol nor nsys's reports carry. Driver functions'
/// `_v2` suffixes are part of their symbols and stay.
pub fn runtime_name(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, v))
            if base.starts_with("cuda")
                && v.len() >= 4
                && v.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// String ids of API names in the current report, by probe id and by site
/// API index; forgotten when the recorder changes (each report has its own
/// string table).
#[derive(Debug, Default)]
pub struct NameIds {
    recorder: u64,
    probes: Vec<Option<u32>>,
    sites: Vec<Option<u32>>,
}

impl NameIds {
    #[inline]
    fn for_recorder(&mut self, rec: &Recorder) -> &mut Self {
        if self.recorder != rec.serial() {
            self.recorder = rec.serial();
            self.probes.clear();
            self.sites.clear();
        }
        self
    }

    #[inline]
    fn slot(ids: &mut Vec<Option<u32>>, i: usize) -> &mut Option<u32> {
        if ids.len() <= i {
            ids.resize(i + 1, None);
        }
        &mut ids[i]
    }
}

fn base_row(ev: &ApiCallEvent, name_id: u32, library_id: u32) -> ApiRow {
    ApiRow {
        start: ev.start as i64,
        end: ev.header.ts as i64,
        pid: ev.header.pid,
        tid: ev.header.tid,
        cpu: ev.header.cpu,
        name_id,
        library_id,
        correlation: (ev.correlation != 0).then_some(ev.correlation as u32),
        ..Default::default()
    }
}

/// A call recorded by the uprobes on a runtime: named by its probe.
/// Returns its correlation id if it must be followed by a device record
/// (see [`super::device_ledger::expects`]).
pub fn api_call(
    ev: &ApiCallEvent,
    text: Option<&ApiTextEvent>,
    tracer: &Tracer,
    names: &mut NameIds,
    rec: &mut Recorder,
) -> Result<Option<u32>, CollectError> {
    let probe_id = Cookie(ev.cookie).id() as usize;
    let Some(probe) = tracer.probes.probe(ev.cookie) else {
        return Ok(None);
    };
    let names = names.for_recorder(rec);
    let name_id = *NameIds::slot(&mut names.probes, probe_id)
        .get_or_insert_with(|| rec.strings.intern(&probe.name));
    let mut row = base_row(ev, name_id, probe.library);
    // Raw registers only where a report reads them (hgtx/nvtx handles, ids).
    row.args = asys_report::report::schema::keeps_args(probe.item).then_some(ev.args);
    fill(
        &mut row,
        apis::decode(&probe.signature, &ev.args, ev.out0, ev.ret),
    );
    if let Some(t) = text {
        if t.text_handle != 0 {
            row.text_handle = Some(t.text_handle);
        } else {
            row.text_id = Some(rec.strings.intern(&decode_text(&t.text, t.text_wide != 0)));
        }
    }
    let expected =
        device_ledger::expects(probe.item, &probe.signature, &row, tracer.probes.hggc_set());
    rec.api(probe.item, row)?;
    Ok(expected)
}

/// A call recorded through the injection library's sites: the hggc API,
/// named by the id the library announced. Returns what [`api_call`] does.
pub fn site_api_call(
    ev: &ApiCallEvent,
    (api, index): (Option<&SiteApi>, Option<SiteApiIndex>),
    set: &apis::HggcTraceSet,
    names: &mut NameIds,
    rec: &mut Recorder,
) -> Result<Option<u32>, CollectError> {
    let names = names.for_recorder(rec);
    let (name_id, signature, item) = match (api, index) {
        (Some(api), Some(index)) => {
            // The library reports every call; --hggc-trace-set applies here.
            if !api.wanted {
                return Ok(None);
            }
            let id = *NameIds::slot(&mut names.sites, index as usize)
                .get_or_insert_with(|| rec.strings.intern(&api.name));
            (id, api.signature, api.item)
        }
        // A call whose name never arrived (its announcement was lost).
        _ => {
            let name = format!("hggc-api-{}", Cookie(ev.cookie).id());
            if !set.wants_api(&name) {
                return Ok(None);
            }
            (
                rec.strings.intern(&name),
                Signature::default(),
                TraceItem::Hggc,
            )
        }
    };
    let mut row = base_row(ev, name_id, u32::MAX);
    // The kernel read *args[0] for every call; keep it where it means something.
    let out0 = if signature.reads_out0() { ev.out0 } else { 0 };
    fill(&mut row, apis::decode(&signature, &ev.args, out0, ev.ret));
    let expected = device_ledger::expects(item, &signature, &row, set);
    rec.api(item, row)?;
    Ok(expected)
}

/// The decoded arguments' columns of an API row.
fn fill(row: &mut ApiRow, d: apis::Decoded) {
    row.return_value = d.return_value;
    row.bytes = d.bytes;
    row.copy_kind = d.copy_kind;
    row.stream = d.stream;
    row.device = d.device;
    row.ptr = d.ptr;
    if let Some(l) = d.launch {
        // 0: a driver launch, whose CUfunction handle is no address.
        row.kernel_addr = (l.kernel_addr != 0).then_some(l.kernel_addr);
        row.grid = Some(l.grid);
        row.block = Some(l.block);
        row.shared_mem = Some(l.shared_mem);
    }
}

/// The item whose runtime a device record came from.
pub fn activity_item(ev: &ActivityEvent) -> TraceItem {
    if ev.record.kind & asys_common::ACTIVITY_FROM_CUPTI != 0 {
        TraceItem::Cuda
    } else {
        TraceItem::Hggc
    }
}

/// A synchronization record's row (`cuda_sync`).
pub fn sync_row(ev: &ActivityEvent) -> SyncRow {
    let r = &ev.record;
    SyncRow {
        start: r.start as i64,
        end: r.end as i64,
        pid: ev.header.pid,
        sync_type: r.sync_type,
        context: r.context,
        stream: r.stream,
        event: r.event,
        correlation: r.correlation,
    }
}

/// A graph execution record's row (`cuda_graphs`).
pub fn graph_row(ev: &ActivityEvent) -> GraphRow {
    let r = &ev.record;
    GraphRow {
        start: r.start as i64,
        end: r.end as i64,
        pid: ev.header.pid,
        device: r.device,
        context: r.context,
        stream: r.stream,
        graph_id: r.graph_id,
        correlation: r.correlation,
    }
}

pub fn activity_row(ev: &ActivityEvent) -> ActivityRow {
    let r = &ev.record;
    let mut row = ActivityRow {
        start: r.start as i64,
        end: r.end as i64,
        pid: ev.header.pid,
        device: r.device,
        stream: r.stream,
        correlation: r.correlation,
        clock_offset: r.clock_offset,
        ..Default::default()
    };
    let cupti = r.kind & asys_common::ACTIVITY_FROM_CUPTI != 0;
    if cupti {
        row.context = Some(r.context);
    }
    match r.kind & asys_common::ACTIVITY_KIND_MASK {
        ACTIVITY_KERNEL => {
            row.kind = ActivityKind::Kernel;
            row.kernel_addr = Some(r.func);
            row.grid = Some(r.grid);
            row.block = Some(r.block);
            row.shared_mem = Some(r.shared_mem);
            if cupti {
                row.kernel = Some(KernelDetails {
                    registers_per_thread: r.registers_per_thread,
                    static_shared: r.static_shared,
                    dynamic_shared: r.dynamic_shared,
                    local_per_thread: r.local_per_thread,
                    local_total: r.local_total,
                    // CUDA 12's record has no field for it: unknown, not 0.
                    green_context: (r.green_context != 0).then_some(r.green_context),
                    graph_id: r.graph_id,
                    graph_node_id: r.graph_node_id,
                });
            }
        }
        ACTIVITY_MEMCPY => {
            row.kind = ActivityKind::Memcpy;
            row.bytes = Some(r.bytes);
            row.copy_kind = Some(r.copy_kind as i32);
            row.src_kind = Some(r.src_kind as i32);
            row.dst_kind = Some(r.dst_kind as i32);
        }
        _ => {
            row.kind = ActivityKind::Memset;
            row.bytes = Some(r.bytes);
            row.dst_kind = Some(r.dst_kind as i32);
        }
    }
    row
}

/// A captured C string, or UTF-32 (`wchar_t`) text, up to its first NUL.
pub fn decode_text(bytes: &[u8], wide: bool) -> String {
    if wide {
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .take_while(|&c| c != 0)
            .map(|c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    } else {
        let len = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..len]).into_owned()
    }
}

/// A NUL-padded name (a task's command, an API name), as text.
pub fn c_text(bytes: &[u8]) -> String {
    decode_text(bytes, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_stop_at_nul_and_wide_texts_decode() {
        assert_eq!(decode_text(b"Step\0junk", false), "Step");
        assert_eq!(decode_text(b"full", false), "full");
        let mut wide = Vec::new();
        for c in "Ωx".chars() {
            wide.extend((c as u32).to_ne_bytes());
        }
        wide.extend([0; 4]);
        wide.extend(('y' as u32).to_ne_bytes());
        assert_eq!(decode_text(&wide, true), "Ωx");
    }

    #[test]
    fn cupti_runtime_names_lose_their_version_and_driver_names_keep_theirs() {
        assert_eq!(runtime_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(runtime_name("cudaMalloc_v3020"), "cudaMalloc");
        assert_eq!(runtime_name("cuMemAlloc_v2"), "cuMemAlloc_v2");
        assert_eq!(runtime_name("cudaGetDevice"), "cudaGetDevice");
        let mut apis = SiteApis::default();
        let set = apis::HggcTraceSet::default();
        let i = apis.index("cudaLaunchKernel_v7000", &set);
        let api = apis.get(i);
        assert_eq!(
            (api.name.as_str(), api.item),
            ("cudaLaunchKernel", TraceItem::Cuda)
        );
        let h = apis.index("hggcMalloc", &set);
        assert_eq!(apis.get(h).item, TraceItem::Hggc);
    }

    #[test]
    fn site_apis_are_resolved_once_and_filtered_by_the_trace_set() {
        let set = apis::HggcTraceSet::parse("kernel-api").unwrap();
        let mut t = SiteApis::default();
        let launch = t.index("hggcLaunchKernel", &set);
        let malloc = t.index("hggcMalloc", &set);
        assert_eq!(t.index("hggcLaunchKernel", &set), launch);
        assert!(t.get(launch).wanted && t.get(launch).signature.launch);
        assert!(!t.get(malloc).wanted);
        assert!(t.get(malloc).signature.reads_out0());
    }
}
