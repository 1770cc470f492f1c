//! The runtime's activity interface (sim/include/hgpti.h), found in the
//! already loaded runtime with dlopen(RTLD_NOLOAD) + dlsym.
use std::ffi::c_void;

pub const KIND_KERNEL: u32 = 1;
pub const KIND_MEMCPY: u32 = 2;
pub const KIND_MEMSET: u32 = 3;

/// `hgptiActivity` from hgpti.h.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Activity {
    pub kind: u32,
    pub correlation_id: u32,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub stream_id: u32,
    pub bytes: u64,
    pub copy_kind: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u32,
    pub func: *const c_void,
    /// Memory kinds of a copy's source and destination (CUPTI's numbers).
    pub src_kind: u32,
    pub dst_kind: u32,
}

pub type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type BufferCompleted = unsafe extern "C" fn(*mut u8, usize, usize);
pub type ApiCallback =
    unsafe extern "C" fn(*mut c_void, i32, *const libc::c_char, u32, *const u64, u64);

pub struct Api {
    pub enable: unsafe extern "C" fn(u32) -> i32,
    /// Absent from a runtime older than activity that can be stopped.
    pub disable: Option<unsafe extern "C" fn(u32) -> i32>,
    pub register_callbacks: unsafe extern "C" fn(BufferRequested, BufferCompleted) -> i32,
    pub flush_all: unsafe extern "C" fn() -> i32,
    /// A null callback unsubscribes.
    pub subscribe: unsafe extern "C" fn(Option<ApiCallback>, *mut c_void) -> i32,
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> i32,
}

impl Api {
    pub fn resolve() -> Option<Self> {
        let lib =
            // SAFETY: a NUL-terminated name; RTLD_NOLOAD only looks up a
            // library already loaded (the runtime that loaded us).
            unsafe { libc::dlopen(c"libhggcrt.so".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        let lib = if lib.is_null() {
            libc::RTLD_DEFAULT
        } else {
            lib
        };
        Some(Self {
            enable: symbol(lib, c"hgptiActivityEnable")?,
            disable: symbol(lib, c"hgptiActivityDisable"),
            register_callbacks: symbol(lib, c"hgptiActivityRegisterCallbacks")?,
            flush_all: symbol(lib, c"hgptiActivityFlushAll")?,
            subscribe: symbol(lib, c"hgptiSubscribe")?,
            get_timestamp: symbol(lib, c"hgptiGetTimestamp")?,
        })
    }
}

/// The function `name` of `lib` as the function pointer type `F`.
pub(crate) fn symbol<F: Copy>(lib: *mut c_void, name: &std::ffi::CStr) -> Option<F> {
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: a handle from dlopen and a NUL-terminated name.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    // SAFETY: F is one of the function pointer types above, matching hgpti.h.
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}
