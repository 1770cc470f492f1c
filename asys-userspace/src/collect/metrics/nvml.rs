//! NVIDIA devices' metrics through NVML (`libnvidia-ml.so.1`, the driver's
//! management library, which nvidia-smi reads too), loaded at run time
//! when `--ppu-metrics-device` asks for devices: asys neither links it nor
//! needs it installed. Each read gives the same `ppu_metrics` row as a
//! simulated device's (pid 0: the whole device, not one process's).
//!
//! Written against NVML's documented C API (nvml.h); it has not run on a
//! machine with an NVIDIA GPU (none was available while it was written).
use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};

/// `nvmlReturn_t`: 0 is NVML_SUCCESS.
type Ret = c_int;
/// `nvmlDevice_t`: an opaque handle.
type Device = *mut c_void;

/// `nvmlUtilization_t`: percent of the last sample period (1/6 s to 1 s,
/// by device) during which a kernel ran, and memory was read or written.
#[repr(C)]
#[derive(Default)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

/// `nvmlMemory_t`, in bytes.
#[repr(C)]
#[derive(Default)]
struct Memory {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlClockType_t`.
const NVML_CLOCK_SM: c_uint = 1;
const NVML_CLOCK_MEM: c_uint = 2;

/// The NVML functions asys calls, as nvml.h declares them.
struct Api {
    init: unsafe extern "C" fn() -> Ret,
    error_string: unsafe extern "C" fn(Ret) -> *const c_char,
    count: unsafe extern "C" fn(*mut c_uint) -> Ret,
    handle: unsafe extern "C" fn(c_uint, *mut Device) -> Ret,
    utilization: unsafe extern "C" fn(Device, *mut Utilization) -> Ret,
    memory: unsafe extern "C" fn(Device, *mut Memory) -> Ret,
    clock: unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> Ret,
    power: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
}

/// Why NVML cannot be read: said once, in a warning.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NvmlError {
    #[error("NVIDIA devices are not read: {0} cannot be loaded (no NVIDIA driver)")]
    NoLibrary(&'static str),
    #[error("NVIDIA devices are not read: {LIBRARY} has no {0}")]
    NoSymbol(&'static str),
    #[error("NVIDIA devices are not read: {call} failed: {message} ({code})")]
    Call {
        call: &'static str,
        code: i32,
        message: String,
    },
}

const LIBRARY: &str = "libnvidia-ml.so.1";

/// What one read of a device gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub device: u32,
    /// Percent of NVML's last sample period with a kernel running.
    pub gpu_percent: u32,
    pub sm_clock_mhz: u32,
    pub mem_clock_mhz: u32,
    pub power_mw: u64,
    pub memory_used: u64,
    pub memory_total: u64,
}

/// An initialised NVML and its devices' handles.
pub struct Nvml {
    api: Api,
    devices: Vec<(u32, Device)>,
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvml")
            .field("devices", &self.devices())
            .finish()
    }
}

// SAFETY: NVML is thread-safe (nvml.h: "all NVML functions are
// thread-safe"); the handles are plain ids that NVML owns for the life of
// the process (nvmlShutdown is never called).
unsafe impl Send for Nvml {}

/// Looks up `name` in `lib` as a function of type `F`.
///
/// # Safety
/// `F` must be the function pointer type of the symbol's C declaration.
unsafe fn symbol<F: Copy>(lib: *mut c_void, name: &'static CStr) -> Result<F, NvmlError> {
    // SAFETY: `lib` is a handle dlopen returned and `name` NUL-terminated.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return Err(NvmlError::NoSymbol(name.to_str().unwrap_or("?")));
    }
    debug_assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: the caller names the type of the symbol's declaration; a
    // function pointer has a data pointer's size on Linux.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

impl Nvml {
    /// Loads NVML, initialises it and opens every device.
    pub fn open() -> Result<Self, NvmlError> {
        Self::open_library(c"libnvidia-ml.so.1")
    }

    fn open_library(path: &CStr) -> Result<Self, NvmlError> {
        // SAFETY: a NUL-terminated name; the library stays loaded for the
        // life of the process (never dlclosed), so its functions stay valid.
        let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(NvmlError::NoLibrary(LIBRARY));
        }
        // SAFETY: each type is the declaration's in nvml.h.
        let api = unsafe {
            Api {
                init: symbol(lib, c"nvmlInit_v2")?,
                error_string: symbol(lib, c"nvmlErrorString")?,
                count: symbol(lib, c"nvmlDeviceGetCount_v2")?,
                handle: symbol(lib, c"nvmlDeviceGetHandleByIndex_v2")?,
                utilization: symbol(lib, c"nvmlDeviceGetUtilizationRates")?,
                memory: symbol(lib, c"nvmlDeviceGetMemoryInfo")?,
                clock: symbol(lib, c"nvmlDeviceGetClockInfo")?,
                power: symbol(lib, c"nvmlDeviceGetPowerUsage")?,
            }
        };
        let mut n = Nvml {
            api,
            devices: Vec::new(),
        };
        // SAFETY: nvmlInit_v2 takes nothing.
        n.check("nvmlInit_v2", unsafe { (n.api.init)() })?;
        let mut count: c_uint = 0;
        // SAFETY: a pointer to a local the call fills.
        n.check("nvmlDeviceGetCount_v2", unsafe {
            (n.api.count)(&mut count)
        })?;
        for i in 0..count {
            let mut d: Device = std::ptr::null_mut();
            // SAFETY: a pointer to a local the call fills.
            let r = unsafe { (n.api.handle)(i, &mut d) };
            // A device NVML cannot open (lost, no permission) is left out.
            if r == 0 {
                n.devices.push((i, d));
            }
        }
        Ok(n)
    }

    fn check(&self, call: &'static str, code: Ret) -> Result<(), NvmlError> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: nvmlErrorString returns a static NUL-terminated string
        // (or null) for any code.
        let message = unsafe {
            let s = (self.api.error_string)(code);
            if s.is_null() {
                String::new()
            } else {
                CStr::from_ptr(s).to_string_lossy().into_owned()
            }
        };
        Err(NvmlError::Call {
            call,
            code,
            message,
        })
    }

    /// The devices NVML opened, by index.
    pub fn devices(&self) -> Vec<u32> {
        self.devices.iter().map(|d| d.0).collect()
    }

    /// Reads every device; one whose reads fail now is left out this time.
    pub fn read(&self) -> Vec<Reading> {
        self.devices
            .iter()
            .filter_map(|&(device, d)| {
                let (mut u, mut m) = (Utilization::default(), Memory::default());
                let (mut sm, mut mem, mut mw) = (0, 0, 0);
                // SAFETY: a handle NVML gave, and pointers to locals of the
                // types nvml.h declares.
                let ok = unsafe {
                    (self.api.utilization)(d, &mut u) == 0
                        && (self.api.memory)(d, &mut m) == 0
                        && (self.api.clock)(d, NVML_CLOCK_SM, &mut sm) == 0
                        && (self.api.clock)(d, NVML_CLOCK_MEM, &mut mem) == 0
                        && (self.api.power)(d, &mut mw) == 0
                };
                ok.then_some(Reading {
                    device,
                    gpu_percent: u.gpu.min(100),
                    sm_clock_mhz: sm,
                    mem_clock_mhz: mem,
                    power_mw: u64::from(mw),
                    memory_used: m.used,
                    memory_total: m.total,
                })
            })
            .collect()
    }
}

/// The busy time of an interval of `interval_ns` at `percent` utilisation,
/// as the simulated devices' rows count it (`busyNs / intervalNs`).
pub fn busy_ns(percent: u32, interval_ns: u64) -> u64 {
    (u128::from(interval_ns) * u128::from(percent.min(100)) / 100) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_named() {
        let e = Nvml::open_library(c"libasys-no-such-nvml.so.1")
            .err()
            .unwrap();
        assert_eq!(e, NvmlError::NoLibrary(LIBRARY));
        assert!(e.to_string().contains("libnvidia-ml.so.1"), "{e}");
    }

    #[test]
    fn a_library_without_nvml_is_named_by_its_missing_function() {
        // libc is loaded in every process and has no NVML functions.
        let e = Nvml::open_library(c"libc.so.6").err().unwrap();
        assert_eq!(e, NvmlError::NoSymbol("nvmlInit_v2"));
    }

    #[test]
    fn busy_time_is_the_share_of_the_interval() {
        assert_eq!(busy_ns(50, 100_000_000), 50_000_000);
        assert_eq!(busy_ns(100, 7), 7);
        assert_eq!(busy_ns(250, 10), 10);
    }
}
