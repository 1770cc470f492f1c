//! An NVTX v3 tool. NVTX v3 is header-only: an application's NVTX calls go
//! through function tables that the first call fills from the library named by
//! `NVTX_INJECTION64_PATH`, by calling its `InitializeInjectionNvtx2`. The
//! functions installed here are exported as `asys_nvtx<Name>` (never the NVTX
//! names, which must not interpose the application's own); asys probes them
//! like any API (trace item `nvtx`) and reads their arguments. Their bodies
//! give NVTX's results: nesting levels, range ids, domain and string handles.
use std::{
    cell::RefCell,
    collections::HashMap,
    ffi::{c_char, c_void},
    sync::atomic::{AtomicU64, Ordering},
};

type FnPtr = *const c_void;

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: unsafe extern "C" fn(i32, *mut *mut *mut FnPtr, *mut u32) -> i32,
}

const ETID_CALLBACKS: u32 = 1;
const MODULE_CORE: i32 = 1;
const MODULE_CORE2: i32 = 5;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Push/pop nesting per domain handle (0: the default domain).
    static DEPTH: RefCell<HashMap<usize, i32>> = RefCell::new(HashMap::new());
}

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn push(domain: usize) -> i32 {
    DEPTH.with(|d| {
        let mut d = d.borrow_mut();
        let level = d.entry(domain).or_insert(0);
        *level += 1;
        *level - 1
    })
}

fn pop(domain: usize) -> i32 {
    DEPTH.with(|d| {
        let mut d = d.borrow_mut();
        match d.get_mut(&domain) {
            Some(level) if *level > 0 => {
                *level -= 1;
                *level
            }
            _ => -1,
        }
    })
}

// The NVTX functions. Arguments the bodies do not use are still what asys's
// probes read (messages, attributes, domains).
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxMarkEx(_attributes: *const c_void) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxMarkA(_message: *const c_char) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxMarkW(_message: *const i32) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxRangeStartEx(_attributes: *const c_void) -> u64 {
    next_id()
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxRangeStartA(_message: *const c_char) -> u64 {
    next_id()
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxRangeStartW(_message: *const i32) -> u64 {
    next_id()
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxRangeEnd(_id: u64) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxRangePushEx(_attributes: *const c_void) -> i32 {
    push(0)
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxRangePushA(_message: *const c_char) -> i32 {
    push(0)
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxRangePushW(_message: *const i32) -> i32 {
    push(0)
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxRangePop() -> i32 {
    pop(0)
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxNameCategoryA(_category: u32, _name: *const c_char) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxNameOsThreadA(_thread: u32, _name: *const c_char) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxDomainMarkEx(_domain: usize, _attributes: *const c_void) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxDomainRangeStartEx(_domain: usize, _attributes: *const c_void) -> u64 {
    next_id()
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxDomainRangeEnd(_domain: usize, _id: u64) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxDomainRangePushEx(domain: usize, _attributes: *const c_void) -> i32 {
    push(domain)
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxDomainRangePop(domain: usize) -> i32 {
    pop(domain)
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxDomainNameCategoryA(
    _domain: usize,
    _category: u32,
    _name: *const c_char,
) {
}
#[unsafe(no_mangle)]
/// # Safety
/// `string` is null or a NUL-terminated string (NVTX passes the application's).
pub unsafe extern "C" fn asys_nvtxDomainRegisterStringA(
    _domain: usize,
    string: *const c_char,
) -> u64 {
    let id = next_id();
    // SAFETY: NVTX passes the application's string: null or NUL-terminated.
    unsafe { crate::nvtx_registry::note(asys_common::NVTX_REGISTERED_STRING, id, string) };
    id
}
#[unsafe(no_mangle)]
/// # Safety
/// `name` is null or a NUL-terminated string (NVTX passes the application's).
pub unsafe extern "C" fn asys_nvtxDomainCreateA(name: *const c_char) -> u64 {
    let id = next_id();
    // SAFETY: as above, the domain's name.
    unsafe { crate::nvtx_registry::note(asys_common::NVTX_REGISTERED_DOMAIN, id, name) };
    id
}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxDomainDestroy(_domain: usize) {}
#[unsafe(no_mangle)]
pub extern "C" fn asys_nvtxInitialize(_reserved: *const c_void) {}

/// Fills `module`'s table: `slots` are (callback id, function).
unsafe fn install(callbacks: &ExportTableCallbacks, module: i32, slots: &[(usize, FnPtr)]) {
    let mut table: *mut *mut FnPtr = std::ptr::null_mut();
    let mut size: u32 = 0;
    // SAFETY: the NVTX implementation's export-table function, writing two
    // out-values we own.
    if unsafe { (callbacks.get_module_function_table)(module, &mut table, &mut size) } == 0
        || table.is_null()
    {
        return;
    }
    for &(id, f) in slots {
        if id < size as usize {
            // SAFETY: `id` is below the table's size, as NVTX reported it.
            let slot = unsafe { *table.add(id) };
            if !slot.is_null() {
                // SAFETY: a non-null slot of the table NVTX hands to its
                // tool to fill, as the NVTX injection contract says.
                unsafe { *slot = f };
            }
        }
    }
}

/// Called by the NVTX implementation in the application at its first call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn InitializeInjectionNvtx2(
    get_export_table: unsafe extern "C" fn(u32) -> *const c_void,
) -> i32 {
    // SAFETY: the function NVTX passed us, called as its contract says.
    let callbacks = unsafe { get_export_table(ETID_CALLBACKS) } as *const ExportTableCallbacks;
    if callbacks.is_null() {
        return 0;
    }
    // SAFETY: non-null, and NVTX keeps its export table for the process.
    let callbacks = unsafe { &*callbacks };
    if callbacks.struct_size < size_of::<ExportTableCallbacks>() {
        return 0;
    }
    // SAFETY: the callbacks NVTX gave, and functions of the signatures
    // its table slots expect.
    unsafe {
        install(
            callbacks,
            MODULE_CORE,
            &[
                (1, asys_nvtxMarkEx as FnPtr),
                (2, asys_nvtxMarkA as FnPtr),
                (3, asys_nvtxMarkW as FnPtr),
                (4, asys_nvtxRangeStartEx as FnPtr),
                (5, asys_nvtxRangeStartA as FnPtr),
                (6, asys_nvtxRangeStartW as FnPtr),
                (7, asys_nvtxRangeEnd as FnPtr),
                (8, asys_nvtxRangePushEx as FnPtr),
                (9, asys_nvtxRangePushA as FnPtr),
                (10, asys_nvtxRangePushW as FnPtr),
                (11, asys_nvtxRangePop as FnPtr),
                (12, asys_nvtxNameCategoryA as FnPtr),
                (14, asys_nvtxNameOsThreadA as FnPtr),
            ],
        );
        install(
            callbacks,
            MODULE_CORE2,
            &[
                (1, asys_nvtxDomainMarkEx as FnPtr),
                (2, asys_nvtxDomainRangeStartEx as FnPtr),
                (3, asys_nvtxDomainRangeEnd as FnPtr),
                (4, asys_nvtxDomainRangePushEx as FnPtr),
                (5, asys_nvtxDomainRangePop as FnPtr),
                (8, asys_nvtxDomainNameCategoryA as FnPtr),
                (10, asys_nvtxDomainRegisterStringA as FnPtr),
                (12, asys_nvtxDomainCreateA as FnPtr),
                (14, asys_nvtxDomainDestroy as FnPtr),
                (15, asys_nvtxInitialize as FnPtr),
            ],
        );
    }
    1
}
