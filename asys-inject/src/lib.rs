//! asys's injection library. The simulated runtime loads it when
//! `HGGC_INJECTION64_PATH` names it, CUDA's driver when
//! `CUDA_INJECTION64_PATH` does, and each calls [`InitializeInjection`]. It
//! subscribes to the runtime's activity interface (HGPTI, or CUPTI for CUDA:
//! see `cupti.rs`) and API callbacks and
//! hands each device record and each callback to a *probe site*: an exported
//! function whose first instruction is a 5-byte NOP. asys's eBPF uprobes on
//! those sites do the recording (filtering, time, ring buffer); with nothing
//! attached a site is a NOP and a return. On kernels that optimize uprobes on
//! NOPs (6.18 here) a probe there costs a fraction of an int3 trap.
//!
//! Device timestamps are converted to CLOCK_MONOTONIC here, with an offset
//! measured against `hgptiGetTimestamp` at start and refreshed on every buffer.
#![allow(clippy::missing_safety_doc)]

pub mod attach;
pub mod config;
mod correlation;
mod cupti;
mod device_clock;
mod fatal;
mod flusher;
mod fork;
mod hgpti;
mod names;
pub mod nvtx;
pub mod nvtx_registry;
pub mod sites;

use std::{
    cell::Cell,
    sync::{
        OnceLock,
        atomic::{AtomicBool, AtomicU8, Ordering},
    },
};

use asys_common::ActivityRecord;

static API: OnceLock<hgpti::Api> = OnceLock::new();

/// Records per activity buffer handed to the runtime.
const BUFFER_RECORDS: usize = 1024;

/// Called by the runtime once, at its initialization (the simulated runtime
/// through `HGGC_INJECTION64_PATH`, CUDA's driver at `cuInit` through
/// `CUDA_INJECTION64_PATH`). Returns 1 on success. A CUDA process whose
/// CUPTI is missing or refuses gets a warning and runs on: its host calls
/// are still recorded, by uprobes.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> i32 {
    match start() {
        Ok(()) => attach::started_at_init(),
        Err(why) => cupti::warn(&why),
    }
    1
}

/// Subscribes to the runtime's activity and API callbacks from now on, as
/// the settings (see `config.rs`) ask: at the runtime's initialization, or
/// in a running process that asys loaded the library into (`attach.rs`),
/// where the runtime's context exists already and only work launched from
/// now on is recorded. Err: why no device activity comes.
pub(crate) fn start() -> Result<(), String> {
    let wanted = config::var("ASYS_HGGC_ACTIVITY").unwrap_or_else(|| "kernel,memory".into());
    read_api_probes();
    let Some(api) = hgpti::Api::resolve() else {
        return initialize_cuda(&wanted);
    };
    let api = API.get_or_init(|| api);
    device_clock::refresh(api.get_timestamp);
    // SAFETY: the runtime's HGPTI functions, called with callbacks of the
    // signatures it declares, which live as long as the process.
    unsafe {
        (api.register_callbacks)(buffer_requested, buffer_completed);
        for kind in activity_kinds(&wanted) {
            (api.enable)(kind);
        }
        (api.subscribe)(Some(api_callback), std::ptr::null_mut());
    }
    start_delivery();
    Ok(())
}

/// Stops what [`start`] began: activity disabled, the API callbacks
/// unsubscribed, and every record handed to the sites. The library stays
/// loaded (see `attach.rs`).
pub(crate) fn quiesce() {
    if CUDA.get().is_some() {
        cupti::quiesce();
    } else if let Some(api) = API.get() {
        // SAFETY: the runtime's HGPTI functions; a null callback
        // unsubscribes.
        unsafe {
            if let Some(disable) = api.disable {
                for kind in [hgpti::KIND_KERNEL, hgpti::KIND_MEMCPY, hgpti::KIND_MEMSET] {
                    disable(kind);
                }
            }
            (api.subscribe)(None, std::ptr::null_mut());
            (api.flush_all)();
        }
    }
}

/// CUDA: CUPTI in place of HGPTI.
fn initialize_cuda(wanted: &str) -> Result<(), String> {
    // Launched, the driver is what loads this library (at cuInit); attached,
    // the process may have CUDA's runtime without its driver (PyTorch on a
    // host with no GPU). CUPTI is then not started: CUPTI 13 (PyPI's, torch
    // 2.15) without a driver recurses in cuptiActivityRegisterCallbacks
    // until the thread's stack is spent.
    if attach::attaching() && !cupti::driver_loaded() {
        return Err(format!(
            "no device activity for this process: {}; the report has its host calls only",
            cupti::NO_DRIVER
        ));
    }
    match cupti::start(&cupti::kinds(&activity_kinds(wanted))) {
        Ok(_) => {
            CUDA.set(()).ok();
            start_delivery();
            Ok(())
        }
        Err(why) if api_at_sites() => Err(format!(
            "no CUDA API call or device activity is recorded for this process: {why} \
             (with --api-probes entry its host calls are)"
        )),
        Err(why) => Err(format!(
            "no device activity for this process: {why}; the report has its host calls only"
        )),
    }
}

/// Set when the records come from CUPTI.
static CUDA: OnceLock<()> = OnceLock::new();

/// Records reach asys when a buffer fills or is flushed: the flusher flushes
/// regularly, so that a long run's activity arrives while it runs, and on a
/// fatal signal, so that a crash's last records arrive; and at exit. Set up
/// once per process, however many times activity is started.
fn start_delivery() {
    static STARTED: AtomicBool = AtomicBool::new(false);
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    fork::install();
    // SAFETY: registers a handler that lives as long as the process.
    unsafe { libc::atexit(flush_at_exit) };
    flusher::start();
    fatal::install();
}

/// The HGPTI activity kinds for `ASYS_HGGC_ACTIVITY`'s words (from
/// `--hggc-trace-set`): `kernel`, `memory`.
fn activity_kinds(wanted: &str) -> Vec<u32> {
    let mut kinds = Vec::new();
    for w in wanted.split(',') {
        match w.trim() {
            "kernel" => kinds.push(hgpti::KIND_KERNEL),
            "memory" => kinds.extend([hgpti::KIND_MEMCPY, hgpti::KIND_MEMSET]),
            _ => {}
        }
    }
    kinds
}

/// Hands the completed records to the sites (through `buffer_completed`);
/// `last`: also those not complete yet, before the process ends.
fn flush(last: bool) {
    if CUDA.get().is_some() {
        cupti::flush(last);
    } else if let Some(api) = API.get() {
        // SAFETY: the runtime's flush, callable from any thread and at exit.
        unsafe { (api.flush_all)() };
    }
}

extern "C" fn flush_at_exit() {
    flush(true);
}

unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let bytes = BUFFER_RECORDS * size_of::<hgpti::Activity>();
    // SAFETY: malloc of a nonzero size; null is handled.
    let p = unsafe { libc::malloc(bytes) }.cast::<u8>();
    // SAFETY: the runtime hands three valid out-pointers.
    unsafe {
        *buffer = p;
        *size = if p.is_null() { 0 } else { bytes };
        *max = 0;
    }
}

unsafe extern "C" fn buffer_completed(buffer: *mut u8, _size: usize, valid: usize) {
    if buffer.is_null() {
        return;
    }
    let offset = API
        .get()
        .map(|a| device_clock::refresh(a.get_timestamp))
        .unwrap_or(0);
    let n = valid / size_of::<hgpti::Activity>();
    // SAFETY: the buffer is one we allocated (malloc: aligned for any
    // type) and the runtime filled `valid` bytes of it with records.
    let records = unsafe { std::slice::from_raw_parts(buffer.cast::<hgpti::Activity>(), n) };
    for r in records {
        let rec = ActivityRecord {
            kind: r.kind,
            correlation: r.correlation_id,
            start: (r.start as i64 - offset) as u64,
            end: (r.end as i64 - offset) as u64,
            device: r.device_id,
            stream: r.stream_id,
            bytes: r.bytes,
            copy_kind: r.copy_kind,
            shared_mem: r.shared_mem,
            grid: r.grid,
            block: r.block,
            func: r.func as u64,
            clock_offset: offset,
            src_kind: r.src_kind,
            dst_kind: r.dst_kind,
            // The rest of the record is CUPTI's alone.
            ..Default::default()
        };
        sites::asys_site_activity(&rec);
    }
    // SAFETY: allocated by buffer_requested, handed back once.
    unsafe { libc::free(buffer.cast()) };
}

/// Whether asys records the API at this library's sites (it sets
/// `ASYS_API_PROBES=site` for the application) or with uprobes on the
/// runtime: 0 not read yet, 1 uprobes, 2 sites. Read again at each start
/// (an attach may ask differently from the one before).
static API_AT_SITES: AtomicU8 = AtomicU8::new(0);

fn read_api_probes() {
    let at_sites = config::var("ASYS_API_PROBES").is_some_and(|v| v == "site");
    API_AT_SITES.store(if at_sites { 2 } else { 1 }, Ordering::Relaxed);
}

/// Start times of the calls in flight on one thread (site mode): a fixed
/// stack in a `const` thread-local, which costs no allocation, no borrow
/// flag and no destructor registration per call. Deeper nesting than this
/// is not expected of a runtime's API; a call past it reports start 0, as an
/// exit without an entry always did.
struct Starts {
    depth: Cell<usize>,
    times: [Cell<u64>; MAX_NESTING],
}

const MAX_NESTING: usize = 16;

thread_local! {
    static STARTS: Starts = const {
        Starts {
            depth: Cell::new(0),
            times: [const { Cell::new(0) }; MAX_NESTING],
        }
    };
}

/// Whether asys records the API at [`sites::asys_site_call`]
/// (`ASYS_API_PROBES=site`, from `--api-probes site`).
pub(crate) fn api_at_sites() -> bool {
    if API_AT_SITES.load(Ordering::Relaxed) == 0 {
        read_api_probes();
    }
    API_AT_SITES.load(Ordering::Relaxed) == 2
}

/// Site mode: a call entered on this thread; its start is kept.
pub(crate) fn call_entered() {
    STARTS.with(|s| {
        let depth = s.depth.get();
        if let Some(t) = s.times.get(depth) {
            t.set(device_clock::monotonic() as u64);
        }
        s.depth.set(depth + 1);
    })
}

/// Site mode: the innermost call in flight on this thread returned; its
/// start (0 when unknown).
pub(crate) fn call_returned() -> u64 {
    STARTS
        .with(|s| {
            let depth = s.depth.get().checked_sub(1)?;
            s.depth.set(depth);
            s.times.get(depth).map(Cell::get)
        })
        .unwrap_or(0)
}

unsafe extern "C" fn api_callback(
    _userdata: *mut libc::c_void,
    site: i32,
    name: *const libc::c_char,
    correlation: u32,
    args: *const u64,
    result: u64,
) {
    flusher::ensure_started();
    match (api_at_sites(), site) {
        // Uprobes on the runtime record the call: the exit probe reads its
        // correlation id from the thread's slot, once told where it is.
        (false, 0) => correlation::enter(correlation),
        (false, _) => correlation::exit(correlation),
        (true, 0) => call_entered(),
        (true, _) => {
            let start = call_returned();
            // The runtime hands HGPTI_MAX_ARGS (8) slots, or none.
            let args = if args.is_null() {
                [0; 8]
            } else {
                // SAFETY: the runtime's callback contract: `args` points to
                // its 8 argument slots, valid for the callback's duration.
                unsafe { args.cast::<[u64; 8]>().read_unaligned() }
            };
            sites::report_call(names::id(name), correlation, result, start, &args);
        }
    }
}
