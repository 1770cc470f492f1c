//! NVIDIA's CUPTI, for CUDA processes (`CUDA_INJECTION64_PATH`): the
//! library is found and opened at run time, its activity records of kernels,
//! copies and memsets are turned into asys's [`ActivityRecord`]s, and its
//! runtime-API callbacks give each call its `correlationId` the way HGPTI's
//! do. Nothing of CUPTI is linked: a process without it, or with a CUPTI
//! that refuses, gets a warning that names the cause and runs on untraced
//! on the device side (asys still records its host calls).
//!
//! The records are read at fixed offsets, which the CUPTI headers of CUDA 12
//! (`CUpti_ActivityKernel9`, `CUpti_ActivityMemcpy5`, `CUpti_ActivityMemset4`)
//! and CUDA 13 (`CUpti_ActivityKernel13`, `CUpti_ActivityMemcpy7`,
//! `CUpti_ActivityMemset5`) share: later versions only append fields, and
//! `cuptiActivityGetNextRecord` steps over each record whatever its size.
//! Synchronization records are `CUpti_ActivitySynchronization2` (CUDA 12)
//! and graph executions `CUpti_ActivityGraphTrace2`; the offsets were taken
//! by compiling `offsetof` against the CUPTI 12 headers of the PyPI wheel
//! (`nvidia/cuda_cupti/include/cupti_activity.h`, CUPTI API version 28).
//! The kernel fields read (registers per thread at 6, context at 44, local
//! memory at 84 and 88, graph node id at 144, graph id at 156) are at the
//! same offsets in every kernel record from `CUpti_ActivityKernel5` to 9
//! (compiled against cupti_activity_deprecated.h too). The tests decode
//! records that `cupti_records/records.c` builds with those headers' struct
//! types (`CUpti_ActivityKernel5` to 9, `CUpti_ActivityMemcpy5` and 6,
//! `CUpti_ActivityMemset4`, `CUpti_ActivitySynchronization2`,
//! `CUpti_ActivityGraphTrace2`), so a wrong offset here fails them.
use std::{
    collections::HashMap,
    ffi::{CStr, CString, c_char, c_void},
    sync::{Mutex, OnceLock},
};

use asys_common::{
    ACTIVITY_FROM_CUPTI, ACTIVITY_GRAPH, ACTIVITY_KERNEL, ACTIVITY_MEMCPY, ACTIVITY_MEMSET,
    ACTIVITY_SYNC, ActivityRecord, KERNEL_NAME_BIT,
};

// CUpti_ActivityKind values (cupti_activity.h).
const KIND_MEMCPY: u32 = 1;
const KIND_MEMSET: u32 = 2;
const KIND_KERNEL: u32 = 3;
const KIND_CONCURRENT_KERNEL: u32 = 10;
const KIND_SYNCHRONIZATION: u32 = 38;
const KIND_GRAPH_TRACE: u32 = 51;
/// The driver calls that launch device work themselves
/// (cupti_driver_cbid.h): cuLaunch, cuLaunchGrid, cuLaunchGridAsync,
/// cuLaunchKernel(_ptsz), cuLaunchCooperativeKernel(_ptsz),
/// cuGraphLaunch(_ptsz), cuLaunchKernelEx(_ptsz). In entry mode their
/// callbacks put the driver's correlation id in the thread's slot when no
/// runtime call is in flight (see `api_callback`).
const DRIVER_LAUNCHES: [u32; 11] = [115, 116, 117, 307, 442, 477, 478, 514, 515, 652, 653];
/// CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API.
const DOMAIN_DRIVER_API: u32 = 1;
const DOMAIN_RUNTIME_API: u32 = 2;
/// CUPTI_API_ENTER (CUPTI_API_EXIT is 1).
const API_ENTER: u32 = 0;
/// CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: also the records of buffers not full.
const FLUSH_FORCED: u32 = 1;

/// Bytes per activity buffer handed to CUPTI (its samples use 8 MB; records
/// are 100 to 200 bytes). Aligned for any record (CUPTI asks for 8).
const BUFFER_BYTES: usize = 4 << 20;

type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type BufferCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type Callback = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);

/// The CUPTI functions asys uses (cupti_activity.h, cupti_callbacks.h).
pub struct Api {
    activity_enable: unsafe extern "C" fn(u32) -> i32,
    register_callbacks: unsafe extern "C" fn(BufferRequested, BufferCompleted) -> i32,
    flush_all: unsafe extern "C" fn(u32) -> i32,
    get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> i32,
    dropped_records: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> i32,
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> i32,
    subscribe: unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void) -> i32,
    enable_domain: unsafe extern "C" fn(u32, *mut c_void, u32) -> i32,
    result_string: unsafe extern "C" fn(i32, *mut *const c_char) -> i32,
    get_version: unsafe extern "C" fn(*mut u32) -> i32,
    /// cuptiEnableCallback(enable, subscriber, domain, cbid).
    enable_callback: unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> i32,
    /// For quiescing at an attach's end (see `quiesce`).
    activity_disable: Option<unsafe extern "C" fn(u32) -> i32>,
    unsubscribe: Option<unsafe extern "C" fn(*mut c_void) -> i32>,
}

/// The subscriber handle of the API callbacks, while subscribed.
static SUBSCRIBER: std::sync::atomic::AtomicPtr<c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
/// The activity kinds enabled, disabled again by `quiesce`.
static ENABLED: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

static API: OnceLock<Api> = OnceLock::new();

/// Why CUPTI gives no device activity: the warning's text.
#[derive(Debug)]
pub enum Unavailable {
    /// No libcupti in any place looked at.
    NotFound(Vec<String>),
    /// A libcupti that lacks a function asys needs (too old).
    Incomplete(String, &'static str),
    /// CUPTI refused (no device, a driver that refuses profiling, ...).
    Refused(&'static str, String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(looked) => write!(
                f,
                "no libcupti found (looked in {}); give one with --cupti-path",
                looked.join(", ")
            ),
            Self::Incomplete(path, name) => {
                write!(f, "{path} has no {name}: a CUPTI too old for asys")
            }
            Self::Refused(what, why) => write!(f, "CUPTI refused {what}: {why}"),
        }
    }
}

/// Why CUPTI is not started where CUDA's driver is not loaded.
pub const NO_DRIVER: &str = "the process has not loaded CUDA's driver (libcuda.so.1), so nothing runs on a GPU; \
     CUPTI is not started without it";

/// Whether the process has CUDA's driver loaded (nothing is loaded by
/// asking).
pub fn driver_loaded() -> bool {
    // SAFETY: a NUL-terminated name; RTLD_NOLOAD only looks up a library
    // already loaded, and the handle's reference is given back at once.
    unsafe {
        let lib = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if lib.is_null() {
            return false;
        }
        libc::dlclose(lib);
        true
    }
}

/// Finds and opens CUPTI, subscribes to the runtime API and enables the
/// activity kinds asked for. `Ok` holds the library's path.
pub fn start(kinds: &[u32]) -> Result<String, Unavailable> {
    let (path, lib) = open()?;
    let api = Api::resolve(lib).map_err(|name| Unavailable::Incomplete(path.clone(), name))?;
    let api = API.get_or_init(|| api);
    let mut version = 0;
    // SAFETY: CUPTI's functions, with out-pointers we own and callbacks of
    // the signatures cupti_activity.h and cupti_callbacks.h declare, which
    // live as long as the process.
    unsafe {
        (api.get_version)(&mut version);
        check(
            api,
            (api.register_callbacks)(buffer_requested, buffer_completed),
        )
        .map_err(|e| Unavailable::Refused("activity buffers", e))?;
        for &kind in kinds {
            check(api, (api.activity_enable)(kind))
                .map_err(|e| Unavailable::Refused(kind_name(kind), e))?;
            enabled(kind);
        }
        // Kinds whose refusal loses only themselves: the kernels and copies
        // still come.
        for kind in optional_kinds(kinds, graph_trace()) {
            match check(api, (api.activity_enable)(kind)) {
                Ok(()) => enabled(kind),
                Err(e) => warn(&format!("CUPTI refused {}: {e}", kind_name(kind))),
            }
        }
        // The callbacks give each runtime call its correlation id, which
        // joins it to its kernels. Without them (another tool holds CUPTI's
        // one subscription) the records still come, unjoined.
        let mut subscriber = std::ptr::null_mut();
        let subscribed = check(
            api,
            (api.subscribe)(&mut subscriber, api_callback, std::ptr::null_mut()),
        )
        .inspect(|()| SUBSCRIBER.store(subscriber, std::sync::atomic::Ordering::Release))
        .and_then(|()| check(api, (api.enable_domain)(1, subscriber, DOMAIN_RUNTIME_API)))
        .and_then(|()| {
            // Site mode records the driver calls from here too.
            if crate::api_at_sites() {
                check(api, (api.enable_domain)(1, subscriber, DOMAIN_DRIVER_API))
            } else {
                // Entry mode: the launches the application makes on the
                // driver directly carry the driver's correlation id only.
                for cbid in DRIVER_LAUNCHES {
                    let r = (api.enable_callback)(1, subscriber, DOMAIN_DRIVER_API, cbid);
                    if let Err(e) = check(api, r) {
                        warn(&format!(
                            "CUPTI's driver launch callbacks: {e}; kernels launched on the driver directly are not joined to their calls"
                        ));
                        break;
                    }
                }
                Ok(())
            }
        });
        if let Err(e) = subscribed {
            let lost = if crate::api_at_sites() {
                "no CUDA API call is recorded (--api-probes site)"
            } else {
                "calls and their kernels are not joined"
            };
            warn(&format!("CUPTI's runtime API callbacks: {e}; {lost}"));
        }
    }
    crate::device_clock::refresh(api.get_timestamp);
    Ok(format!("{path} (CUPTI API version {version})"))
}

fn enabled(kind: u32) {
    if let Ok(mut e) = ENABLED.lock()
        && !e.contains(&kind)
    {
        e.push(kind);
    }
}

/// At an attach's end: the kinds enabled are disabled, the API callbacks
/// unsubscribed (so that the next attach can subscribe again: CUPTI has one
/// subscriber), and every buffer flushed to the sites.
pub fn quiesce() {
    let Some(api) = API.get() else { return };
    // SAFETY: CUPTI's functions, with the handle cuptiSubscribe gave.
    unsafe {
        if let Some(disable) = api.activity_disable {
            for kind in ENABLED
                .lock()
                .map(|mut e| std::mem::take(&mut *e))
                .unwrap_or_default()
            {
                disable(kind);
            }
        }
        let subscriber = SUBSCRIBER.swap(std::ptr::null_mut(), std::sync::atomic::Ordering::AcqRel);
        if let (Some(unsubscribe), false) = (api.unsubscribe, subscriber.is_null()) {
            unsubscribe(subscriber);
        }
        (api.flush_all)(FLUSH_FORCED);
    }
}

/// The CUPTI activity kind for each HGPTI kind asked for (the same
/// `ASYS_HGGC_ACTIVITY` words select both: see `activity_kinds` in lib.rs).
pub fn kinds(hgpti_kinds: &[u32]) -> Vec<u32> {
    hgpti_kinds
        .iter()
        .filter_map(|&k| match k {
            crate::hgpti::KIND_KERNEL => Some(KIND_CONCURRENT_KERNEL),
            crate::hgpti::KIND_MEMCPY => Some(KIND_MEMCPY),
            crate::hgpti::KIND_MEMSET => Some(KIND_MEMSET),
            _ => None,
        })
        .collect()
}

/// `--cuda-graph-trace` (`ASYS_CUDA_GRAPH_TRACE`): how CUDA graphs are
/// traced, as nsys's option says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphTrace {
    /// One record per graph execution (CUPTI_ACTIVITY_KIND_GRAPH_TRACE):
    /// CUPTI then gives no records of the graph's nodes. nsys's default.
    Graph,
    /// Every node's execution its own record, with its graph and node ids.
    Node,
}

impl GraphTrace {
    /// The mode `ASYS_CUDA_GRAPH_TRACE` names; graph when unset or unknown.
    pub fn parse(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            Some("node") => Self::Node,
            _ => Self::Graph,
        }
    }
}

fn graph_trace() -> GraphTrace {
    GraphTrace::parse(crate::config::var("ASYS_CUDA_GRAPH_TRACE").as_deref())
}

/// The kinds enabled on top of `kinds` when CUPTI allows: synchronization
/// with kernel activity (the waits that kernels end), graph executions in
/// graph mode. Node mode needs nothing: kernel records carry their graph.
fn optional_kinds(kinds: &[u32], graphs: GraphTrace) -> Vec<u32> {
    let mut more = Vec::new();
    if kinds.contains(&KIND_CONCURRENT_KERNEL) {
        more.push(KIND_SYNCHRONIZATION);
        if graphs == GraphTrace::Graph {
            more.push(KIND_GRAPH_TRACE);
        }
    }
    more
}

fn kind_name(kind: u32) -> &'static str {
    match kind {
        KIND_MEMCPY => "memcpy activity",
        KIND_MEMSET => "memset activity",
        KIND_SYNCHRONIZATION => "synchronization activity",
        KIND_GRAPH_TRACE => "graph trace activity",
        KIND_KERNEL | KIND_CONCURRENT_KERNEL => "kernel activity",
        _ => "an activity kind",
    }
}

/// A warning: on the process's stderr, or, while asys attaches, handed to
/// asys (see `attach.rs`), which prints it: the application's own output
/// is not asys's to write into.
pub fn warn(what: &str) {
    if !crate::attach::keep_warning(what) {
        eprintln!("asys-inject: warning: {what}");
    }
}

/// CUPTI's result as text: its own string for the code.
fn check(api: &Api, result: i32) -> Result<(), String> {
    if result == 0 {
        return Ok(());
    }
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: cuptiGetResultString writes a pointer to a static string.
    let named = unsafe { (api.result_string)(result, &mut text) } == 0 && !text.is_null();
    Err(if named {
        // SAFETY: a NUL-terminated static string of CUPTI's.
        let s = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{s} (error {result})")
    } else {
        format!("error {result}")
    })
}

/// Hands the buffers whose records are all complete to the sites; `forced`
/// (at exit, on a fatal signal): every buffer, records of work still
/// running too (those CUPTI hands over without times: counted as lost).
pub fn flush(forced: bool) {
    if let Some(api) = API.get() {
        // SAFETY: CUPTI's flush, callable from any thread and at exit.
        unsafe { (api.flush_all)(if forced { FLUSH_FORCED } else { 0 }) };
    }
}

/// Opens libcupti: the one `ASYS_CUPTI_PATH` names (`--cupti-path`), one
/// already loaded, one beside the CUDA runtime the process uses (CUDA
/// toolkit and PyPI wheel layouts), or the loader's own search.
fn open() -> Result<(String, *mut c_void), Unavailable> {
    let mut looked = Vec::new();
    if let Some(given) = crate::config::var("ASYS_CUPTI_PATH") {
        let given = std::path::PathBuf::from(given);
        let candidates = if given.is_dir() {
            libraries_in(&given)
        } else {
            vec![given.clone()]
        };
        for c in &candidates {
            if let Some(lib) = dlopen(c.to_str().unwrap_or_default(), 0) {
                return Ok((c.display().to_string(), lib));
            }
        }
        // What the user named is all that is tried: a CUPTI of our own
        // choosing instead would not be what they asked for.
        return Err(Unavailable::NotFound(vec![given.display().to_string()]));
    }
    for soname in ["libcupti.so.13", "libcupti.so.12", "libcupti.so"] {
        if let Some(lib) = dlopen(soname, libc::RTLD_NOLOAD) {
            return Ok((format!("{soname} (already loaded)"), lib));
        }
    }
    for dir in beside_runtime() {
        looked.push(dir.display().to_string());
        for c in libraries_in(&dir) {
            if let Some(lib) = dlopen(c.to_str().unwrap_or_default(), 0) {
                return Ok((c.display().to_string(), lib));
            }
        }
    }
    for soname in ["libcupti.so.13", "libcupti.so.12", "libcupti.so"] {
        if let Some(lib) = dlopen(soname, 0) {
            return Ok((format!("{soname} (the loader's search)"), lib));
        }
    }
    looked.push("the loader's search path".into());
    Err(Unavailable::NotFound(looked))
}

/// Folders where a libcupti that goes with the process's CUDA would be:
/// beside each CUDA library mapped in the process (`nvidia/cu13/lib` of the
/// CUDA 13 wheels holds both), `nvidia/cuda_cupti/lib` beside the CUDA 12
/// wheels' `nvidia/cuda_runtime/lib`, and the toolkit's `extras/CUPTI/lib64`.
fn beside_runtime() -> Vec<std::path::PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    let mut add = |d: std::path::PathBuf| {
        if d.is_dir() && !dirs.contains(&d) {
            dirs.push(d);
        }
    };
    for path in maps.lines().filter_map(|l| l.split_whitespace().nth(5)) {
        let p = std::path::Path::new(path);
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if !(name.starts_with("libcudart.so") || name.starts_with("libcuda.so")) {
            continue;
        }
        let Some(dir) = p.parent() else { continue };
        add(dir.to_path_buf());
        if let Some(nvidia) = dir.parent().and_then(|d| d.parent()) {
            add(nvidia.join("cuda_cupti/lib"));
        }
        if let Some(root) = dir.parent() {
            add(root.join("extras/CUPTI/lib64"));
        }
    }
    add("/usr/local/cuda/extras/CUPTI/lib64".into());
    dirs
}

/// The libcupti files of a folder, newest major version first.
fn libraries_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libcupti.so"))
        })
        .collect();
    found.sort();
    found.reverse();
    found
}

fn dlopen(name: &str, extra: i32) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name; the handle is kept for the process's
    // life (CUPTI is never unloaded while its callbacks can run).
    let lib = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL | extra) };
    (!lib.is_null()).then_some(lib)
}

impl Api {
    fn resolve(lib: *mut c_void) -> Result<Self, &'static str> {
        Ok(Self {
            activity_enable: symbol(lib, c"cuptiActivityEnable")?,
            register_callbacks: symbol(lib, c"cuptiActivityRegisterCallbacks")?,
            flush_all: symbol(lib, c"cuptiActivityFlushAll")?,
            get_next_record: symbol(lib, c"cuptiActivityGetNextRecord")?,
            dropped_records: symbol(lib, c"cuptiActivityGetNumDroppedRecords")?,
            get_timestamp: symbol(lib, c"cuptiGetTimestamp")?,
            subscribe: symbol(lib, c"cuptiSubscribe")?,
            enable_domain: symbol(lib, c"cuptiEnableDomain")?,
            result_string: symbol(lib, c"cuptiGetResultString")?,
            get_version: symbol(lib, c"cuptiGetVersion")?,
            enable_callback: symbol(lib, c"cuptiEnableCallback")?,
            activity_disable: symbol(lib, c"cuptiActivityDisable").ok(),
            unsubscribe: symbol(lib, c"cuptiUnsubscribe").ok(),
        })
    }
}

fn symbol<F: Copy>(lib: *mut c_void, name: &'static CStr) -> Result<F, &'static str> {
    crate::hgpti::symbol(lib, name).ok_or_else(|| name.to_str().unwrap_or("a function"))
}

/// Runtime calls in flight on this thread: a driver call made while one is
/// in flight is the runtime's own, not the application's. Site mode leaves
/// it out, as uprobes' caller filter does; entry mode leaves the slot to
/// the runtime call's id (see `owns_slot`).
mod in_runtime {
    use std::cell::Cell;
    thread_local! {
        pub static DEPTH: Cell<u32> = const { Cell::new(0) };
    }
}

/// Entry mode: whether a callback's correlation id goes in the thread's
/// slot, which the exit probe of the uprobed call reads. A runtime call's
/// always does. A driver call's does only when no runtime call is in flight
/// on the thread (`depth` counts them, this call's own exit already
/// counted off): a launch the application made on the driver directly
/// (`cuLaunchKernel` from Triton or a JIT) has only the driver's id, which
/// its kernel carries; inside `cudaLaunchKernel` the kernel carries the
/// runtime's id, which the slot must keep.
fn owns_slot(runtime: bool, depth: u32) -> bool {
    runtime || depth == 0
}

/// The API callback: each runtime call's correlation id at its entry and
/// exit, as HGPTI's callbacks give it (see `correlation.rs`); in site mode
/// (`--api-probes site`) also the whole call, runtime and driver, at
/// `asys_site_call`, so that no uprobe traps in the CUDA libraries.
unsafe extern "C" fn api_callback(
    _userdata: *mut c_void,
    domain: u32,
    cbid: u32,
    data: *const c_void,
) {
    if data.is_null() || (domain != DOMAIN_RUNTIME_API && domain != DOMAIN_DRIVER_API) {
        return;
    }
    crate::flusher::ensure_started();
    // SAFETY: for the API domains `data` is a CUpti_CallbackData, valid
    // during the callback; its layout is the same in the CUDA 12 and 13
    // headers: callbackSite (u32) at 0, functionName at 8,
    // functionReturnValue at 24, correlationId (u32) at 64.
    let (site, name, result, correlation) = unsafe {
        let p = data.cast::<u8>();
        (
            field::<u32>(p, 0),
            field::<*const c_char>(p, 8),
            field::<*const c_void>(p, 24),
            field::<u32>(p, 64),
        )
    };
    let entering = site == API_ENTER;
    let runtime = domain == DOMAIN_RUNTIME_API;
    let depth = in_runtime::DEPTH.with(|d| {
        if runtime {
            d.set(if entering {
                d.get() + 1
            } else {
                d.get().saturating_sub(1)
            });
        }
        d.get()
    });
    if !crate::api_at_sites() {
        if owns_slot(runtime, depth) {
            if entering {
                crate::correlation::enter(correlation);
            } else {
                crate::correlation::exit(correlation);
            }
        }
        return;
    }
    if !runtime && depth > 0 {
        return;
    }
    if entering {
        crate::call_entered();
        return;
    }
    let start = crate::call_returned();
    // cudaError_t and CUresult are C ints, valid at the exit.
    let result = if result.is_null() {
        0
    } else {
        // SAFETY: CUPTI's pointer to the call's return value, at its exit.
        unsafe { result.cast::<i32>().read_unaligned() as u32 as u64 }
    };
    // Named per (domain, callback id): CUPTI's names are per callback id;
    // bit 63 keeps these keys apart from name pointers.
    let key = (1usize << 63) | ((domain as usize) << 32) | cbid as usize;
    // The arguments are CUPTI's per-function parameter structs, not register
    // slots: site mode records the call without them (see docs/cuda.md).
    crate::sites::report_call(
        crate::names::keyed(key, name),
        correlation,
        result,
        start,
        &[0; 8],
    );
}

unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    // SAFETY: malloc of a nonzero size; null is handled (CUPTI then drops
    // records and counts them).
    let p = unsafe { libc::malloc(BUFFER_BYTES) }.cast::<u8>();
    // SAFETY: CUPTI hands three valid out-pointers.
    unsafe {
        *buffer = p;
        *size = if p.is_null() { 0 } else { BUFFER_BYTES };
        *max = 0;
    }
}

unsafe extern "C" fn buffer_completed(
    context: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    let Some(api) = API.get() else { return };
    if !buffer.is_null() {
        let offset = crate::device_clock::refresh(api.get_timestamp);
        let mut record: *mut u8 = std::ptr::null_mut();
        let mut incomplete = 0u64;
        // SAFETY: the buffer is ours and CUPTI filled `valid` bytes of it;
        // get_next_record steps through them, each record valid until we
        // free the buffer.
        while unsafe { (api.get_next_record)(buffer, valid, &mut record) } == 0 {
            // SAFETY: a record CUPTI just handed us.
            match unsafe { convert(record, offset) } {
                Some(Converted::Complete(r)) => crate::sites::asys_site_activity(&r),
                Some(Converted::Incomplete) => incomplete += 1,
                None => {}
            }
        }
        if incomplete > 0 {
            crate::sites::asys_site_lost(incomplete);
        }
        // SAFETY: allocated by buffer_requested, handed back once.
        unsafe { libc::free(buffer.cast()) };
    }
    let mut dropped = 0usize;
    // SAFETY: CUPTI's count for the buffer's context and stream.
    if unsafe { (api.dropped_records)(context, stream, &mut dropped) } == 0 && dropped > 0 {
        crate::sites::asys_site_lost(dropped as u64);
    }
}

/// Reads a field of a record at `offset`.
///
/// # Safety
/// `record` points to at least `offset + size_of::<T>()` readable bytes.
unsafe fn field<T: Copy>(record: *const u8, offset: usize) -> T {
    // SAFETY: as the caller promises.
    unsafe { record.add(offset).cast::<T>().read_unaligned() }
}

enum Converted {
    Complete(ActivityRecord),
    /// Work still running at a forced flush: CUPTI gives it no times.
    Incomplete,
}

/// One CUPTI record as asys's record, or None for kinds asys does not take.
///
/// # Safety
/// `record` is a record from `cuptiActivityGetNextRecord`.
unsafe fn convert(record: *const u8, offset: i64) -> Option<Converted> {
    // SAFETY: every CUPTI record starts with its kind (u32); the offsets
    // below are those of the record types named in the module's comment,
    // all within the smallest of them.
    unsafe {
        let kind: u32 = field(record, 0);
        let time = |at: usize| (field::<u64>(record, at) as i64 - offset) as u64;
        let mut r = ActivityRecord {
            clock_offset: offset,
            ..Default::default()
        };
        match kind {
            KIND_KERNEL | KIND_CONCURRENT_KERNEL => {
                r.kind = ACTIVITY_KERNEL;
                r.start = time(16);
                r.end = time(24);
                r.device = field(record, 40);
                r.stream = field(record, 48);
                r.grid = [field(record, 52), field(record, 56), field(record, 60)];
                r.block = [field(record, 64), field(record, 68), field(record, 72)];
                r.static_shared = field(record, 76);
                r.dynamic_shared = field(record, 80);
                r.shared_mem = r.static_shared.wrapping_add(r.dynamic_shared);
                r.registers_per_thread = u32::from(field::<u16>(record, 6));
                r.context = field(record, 44);
                r.local_per_thread = field(record, 84);
                r.local_total = field(record, 88);
                r.correlation = field(record, 92);
                r.func = u64::from(kernel_name(field(record, 104)));
                r.graph_node_id = field(record, 144);
                r.graph_id = field(record, 156);
            }
            KIND_SYNCHRONIZATION => {
                // CUpti_ActivitySynchronization2: type 4, start 8, end 16,
                // correlationId 24, contextId 28, streamId 32 (u32::MAX for
                // a context synchronize), cudaEventId 36.
                r.kind = ACTIVITY_SYNC;
                r.sync_type = field(record, 4);
                r.start = time(8);
                r.end = time(16);
                r.correlation = field(record, 24);
                r.context = field(record, 28);
                r.stream = field(record, 32);
                r.event = field(record, 36);
            }
            KIND_GRAPH_TRACE => {
                // CUpti_ActivityGraphTrace2: correlationId 4, start 8, end
                // 16, deviceId 24, graphId 28, contextId 32, streamId 36.
                r.kind = ACTIVITY_GRAPH;
                r.correlation = field(record, 4);
                r.start = time(8);
                r.end = time(16);
                r.device = field(record, 24);
                r.graph_id = field(record, 28);
                r.context = field(record, 32);
                r.stream = field(record, 36);
            }
            KIND_MEMCPY => {
                r.kind = ACTIVITY_MEMCPY;
                r.copy_kind = copy_kind(field(record, 4));
                r.src_kind = u32::from(field::<u8>(record, 5));
                r.dst_kind = u32::from(field::<u8>(record, 6));
                r.bytes = field(record, 8);
                r.start = time(16);
                r.end = time(24);
                r.device = field(record, 32);
                r.context = field(record, 36);
                r.stream = field(record, 40);
                r.correlation = field(record, 44);
            }
            KIND_MEMSET => {
                r.kind = ACTIVITY_MEMSET;
                r.bytes = field(record, 8);
                r.start = time(16);
                r.end = time(24);
                r.device = field(record, 32);
                r.context = field(record, 36);
                r.stream = field(record, 40);
                r.correlation = field(record, 44);
                r.dst_kind = u32::from(field::<u16>(record, 50));
            }
            _ => return None,
        }
        r.kind |= ACTIVITY_FROM_CUPTI;
        // Start and end are at 16 and 24 in the kernel, copy and memset
        // records, at 8 and 16 in the sync and graph records.
        let at = if matches!(kind, KIND_SYNCHRONIZATION | KIND_GRAPH_TRACE) {
            8
        } else {
            16
        };
        if field::<u64>(record, at) == 0 || field::<u64>(record, at + 8) == 0 {
            return Some(Converted::Incomplete);
        }
        Some(Converted::Complete(r))
    }
}

/// CUPTI's copy kind as asys's (`hggcMemcpyKind`: 0 host to host, 1 host to
/// device, 2 device to host, 3 device to device; 4 peer to peer, 5 other).
fn copy_kind(cupti: u8) -> u32 {
    match cupti {
        9 => 0,
        1 => 1,
        2 => 2,
        8 => 3,
        10 => 4,
        _ => 5,
    }
}

/// Kernel names by CUPTI's name pointer (shared by every record of one
/// kernel), numbered with [`KERNEL_NAME_BIT`] and announced once each at
/// `asys_site_name` (API ids never reach that bit).
static KERNEL_NAMES: Mutex<Option<HashMap<usize, u32>>> = Mutex::new(None);

fn kernel_name(name: *const c_char) -> u32 {
    if name.is_null() {
        return 0;
    }
    let mut names = KERNEL_NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let names = names.get_or_insert_with(HashMap::new);
    let next = KERNEL_NAME_BIT | (names.len() as u32 + 1);
    *names.entry(name as usize).or_insert_with(|| {
        crate::sites::asys_site_name(next, crate::names::resident_copy(name));
        next
    })
}

#[cfg(test)]
mod header_records;

#[cfg(test)]
mod tests {
    use super::{header_records::Record, *};

    /// The clock offset the records are converted with.
    const OFFSET: i64 = 400;

    /// Decodes `bytes` (a record of the header's layout).
    fn decode(bytes: &[u8]) -> Option<Converted> {
        // CUPTI's buffers are 8-aligned; the decoder reads unaligned anyway.
        let mut aligned = vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: `aligned` has room for `bytes.len()` bytes and does not
        // overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), aligned.as_mut_ptr().cast(), bytes.len());
        }
        // SAFETY: a record as CUPTI's header lays it out, all its bytes
        // there.
        unsafe { convert(aligned.as_ptr().cast(), OFFSET) }
    }

    fn complete(c: Option<Converted>, rec: &Record) -> ActivityRecord {
        match c {
            Some(Converted::Complete(r)) => r,
            _ => panic!("{}: not a complete record", rec.type_name),
        }
    }

    /// Checks each header field against what the decoder made of it
    /// (`decoded`: field name, decoded value), and that every field
    /// records.c set but `kind` is among them.
    fn same_values(rec: &Record, decoded: &[(&str, u64)]) {
        for (name, got) in decoded {
            assert_eq!(
                *got,
                rec.value(name),
                "{}.{name} (at {} in the header)",
                rec.type_name,
                rec.offset(name)
            );
        }
        let mut checked: std::collections::BTreeSet<&str> =
            decoded.iter().map(|(n, _)| *n).collect();
        checked.insert("kind");
        assert_eq!(checked, rec.names(), "{}", rec.type_name);
    }

    /// A time field as it was before the clock offset was taken off.
    fn raw_time(t: u64) -> u64 {
        t.wrapping_add(OFFSET as u64)
    }

    /// A record whose start or end is 0 is work still running at a forced
    /// flush.
    fn zero_start_or_end_is_incomplete(rec: &Record, bytes: &[u8]) {
        for name in ["start", "end"] {
            let mut running = bytes.to_vec();
            let at = rec.offset(name);
            running[at..at + 8].fill(0);
            assert!(
                matches!(decode(&running), Some(Converted::Incomplete)),
                "{} without {name}",
                rec.type_name
            );
        }
    }

    #[test]
    fn the_kinds_are_the_headers() {
        let h = header_records::header();
        for (ours, name) in [
            (KIND_MEMCPY, "CUPTI_ACTIVITY_KIND_MEMCPY"),
            (KIND_MEMSET, "CUPTI_ACTIVITY_KIND_MEMSET"),
            (KIND_KERNEL, "CUPTI_ACTIVITY_KIND_KERNEL"),
            (
                KIND_CONCURRENT_KERNEL,
                "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
            ),
            (KIND_SYNCHRONIZATION, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
            (KIND_GRAPH_TRACE, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"),
        ] {
            assert_eq!(u64::from(ours), h.constant(name), "{name}");
        }
    }

    #[test]
    fn kernel_records_decode_to_the_headers_fields() {
        let h = header_records::header();
        // CUpti_ActivityKernel5 to 9, as kernels and concurrent kernels.
        let records = h.records("CUpti_ActivityKernel");
        assert_eq!(records.len(), 6);
        let name = c"_Z6kernelv";
        for rec in records {
            let mut bytes = rec.bytes.clone();
            let at = rec.name_pointer.expect("the kernel name's offset");
            bytes[at..at + 8].copy_from_slice(&(name.as_ptr() as usize).to_ne_bytes());
            let r = complete(decode(&bytes), rec);
            assert_eq!(
                r.kind,
                ACTIVITY_KERNEL | ACTIVITY_FROM_CUPTI,
                "{}",
                rec.type_name
            );
            same_values(
                rec,
                &[
                    ("start", raw_time(r.start)),
                    ("end", raw_time(r.end)),
                    ("deviceId", r.device.into()),
                    ("contextId", r.context.into()),
                    ("streamId", r.stream.into()),
                    ("gridX", r.grid[0].into()),
                    ("gridY", r.grid[1].into()),
                    ("gridZ", r.grid[2].into()),
                    ("blockX", r.block[0].into()),
                    ("blockY", r.block[1].into()),
                    ("blockZ", r.block[2].into()),
                    ("staticSharedMemory", r.static_shared.into()),
                    ("dynamicSharedMemory", r.dynamic_shared.into()),
                    ("registersPerThread", r.registers_per_thread.into()),
                    ("localMemoryPerThread", r.local_per_thread.into()),
                    ("localMemoryTotal", r.local_total.into()),
                    ("correlationId", r.correlation.into()),
                    ("graphNodeId", r.graph_node_id),
                    ("graphId", r.graph_id.into()),
                ],
            );
            assert_eq!(r.shared_mem, r.static_shared.wrapping_add(r.dynamic_shared));
            assert_eq!(r.clock_offset, OFFSET);
            // The name is announced and numbered; the same name pointer
            // gets the same number.
            assert_ne!(r.func as u32 & KERNEL_NAME_BIT, 0, "{}", rec.type_name);
            assert_eq!(complete(decode(&bytes), rec).func, r.func);
            zero_start_or_end_is_incomplete(rec, &bytes);
        }
    }

    #[test]
    fn memcpy_records_decode_to_the_headers_fields_and_copy_kinds() {
        let h = header_records::header();
        // CUPTI's copy kinds as asys numbers them (hggcMemcpyKind).
        let asys_kind = |cupti: u64| {
            [
                ("CUPTI_ACTIVITY_MEMCPY_KIND_HTOH", 0),
                ("CUPTI_ACTIVITY_MEMCPY_KIND_HTOD", 1),
                ("CUPTI_ACTIVITY_MEMCPY_KIND_DTOH", 2),
                ("CUPTI_ACTIVITY_MEMCPY_KIND_DTOD", 3),
                ("CUPTI_ACTIVITY_MEMCPY_KIND_PTOP", 4),
            ]
            .into_iter()
            .find(|(name, _)| h.constant(name) == cupti)
            .map_or(5, |(_, ours)| ours)
        };
        let records = h.records("CUpti_ActivityMemcpy");
        let mut kinds = std::collections::BTreeSet::new();
        for rec in records {
            let r = complete(decode(&rec.bytes), rec);
            assert_eq!(r.kind, ACTIVITY_MEMCPY | ACTIVITY_FROM_CUPTI);
            assert_eq!(
                r.copy_kind,
                asys_kind(rec.value("copyKind")),
                "{} copyKind {}",
                rec.type_name,
                rec.value("copyKind")
            );
            kinds.insert(r.copy_kind);
            same_values(
                rec,
                &[
                    // Checked above, as asys numbers it.
                    ("copyKind", rec.value("copyKind")),
                    ("srcKind", r.src_kind.into()),
                    ("dstKind", r.dst_kind.into()),
                    ("bytes", r.bytes),
                    ("start", raw_time(r.start)),
                    ("end", raw_time(r.end)),
                    ("deviceId", r.device.into()),
                    ("contextId", r.context.into()),
                    ("streamId", r.stream.into()),
                    ("correlationId", r.correlation.into()),
                ],
            );
            zero_start_or_end_is_incomplete(rec, &rec.bytes);
        }
        // Every asys copy kind came from one of CUPTI's.
        assert_eq!(kinds.into_iter().collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_memset_record_decodes_to_the_headers_fields() {
        let h = header_records::header();
        for rec in h.records("CUpti_ActivityMemset") {
            let r = complete(decode(&rec.bytes), rec);
            assert_eq!(r.kind, ACTIVITY_MEMSET | ACTIVITY_FROM_CUPTI);
            same_values(
                rec,
                &[
                    ("bytes", r.bytes),
                    ("start", raw_time(r.start)),
                    ("end", raw_time(r.end)),
                    ("deviceId", r.device.into()),
                    ("contextId", r.context.into()),
                    ("streamId", r.stream.into()),
                    ("correlationId", r.correlation.into()),
                    ("memoryKind", r.dst_kind.into()),
                ],
            );
            zero_start_or_end_is_incomplete(rec, &rec.bytes);
        }
    }

    #[test]
    fn a_synchronization_record_decodes_to_the_headers_fields() {
        let h = header_records::header();
        for rec in h.records("CUpti_ActivitySynchronization") {
            let r = complete(decode(&rec.bytes), rec);
            assert_eq!(r.kind, ACTIVITY_SYNC | ACTIVITY_FROM_CUPTI);
            same_values(
                rec,
                &[
                    ("type", r.sync_type.into()),
                    ("start", raw_time(r.start)),
                    ("end", raw_time(r.end)),
                    ("correlationId", r.correlation.into()),
                    ("contextId", r.context.into()),
                    ("streamId", r.stream.into()),
                    ("cudaEventId", r.event.into()),
                ],
            );
            zero_start_or_end_is_incomplete(rec, &rec.bytes);
        }
    }

    #[test]
    fn a_graph_trace_record_decodes_to_the_headers_fields() {
        let h = header_records::header();
        for rec in h.records("CUpti_ActivityGraphTrace") {
            let r = complete(decode(&rec.bytes), rec);
            assert_eq!(r.kind, ACTIVITY_GRAPH | ACTIVITY_FROM_CUPTI);
            same_values(
                rec,
                &[
                    ("correlationId", r.correlation.into()),
                    ("start", raw_time(r.start)),
                    ("end", raw_time(r.end)),
                    ("deviceId", r.device.into()),
                    ("graphId", r.graph_id.into()),
                    ("contextId", r.context.into()),
                    ("streamId", r.stream.into()),
                ],
            );
            zero_start_or_end_is_incomplete(rec, &rec.bytes);
        }
    }

    #[test]
    fn graph_mode_asks_for_graph_records_and_node_mode_for_none() {
        assert_eq!(GraphTrace::parse(None), GraphTrace::Graph);
        assert_eq!(GraphTrace::parse(Some("graph")), GraphTrace::Graph);
        assert_eq!(GraphTrace::parse(Some("node")), GraphTrace::Node);
        let kernels = [KIND_CONCURRENT_KERNEL, KIND_MEMCPY];
        assert_eq!(
            optional_kinds(&kernels, GraphTrace::Graph),
            [KIND_SYNCHRONIZATION, KIND_GRAPH_TRACE]
        );
        assert_eq!(
            optional_kinds(&kernels, GraphTrace::Node),
            [KIND_SYNCHRONIZATION]
        );
        // Without kernel activity neither is asked for.
        assert!(optional_kinds(&[KIND_MEMCPY], GraphTrace::Graph).is_empty());
    }

    #[test]
    fn a_direct_driver_launch_owns_the_slot_and_one_inside_the_runtime_does_not() {
        // Runtime calls always write their id.
        assert!(owns_slot(true, 1));
        assert!(owns_slot(true, 0));
        // cuLaunchKernel made by the application (Triton): its id.
        assert!(owns_slot(false, 0));
        // The driver call cudaLaunchKernel makes: the runtime's id stays.
        assert!(!owns_slot(false, 1));
    }
}
