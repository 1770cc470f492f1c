//! What the recording side knows about the traced API families: which
//! exported functions a trace item probes, and how to read the arguments
//! that matter from the raw registers captured by the probes (x86-64 SysV:
//! rdi, rsi, rdx, rcx, r8, r9, then the stack). The items themselves, their
//! tables and the collective libraries' argument layout are asys-report's,
//! re-exported here so that `crate::apis` names both.
use asys_report::trace_items::{Datatypes, TraceItem, collective};

/// Which functions of a library belong to a trace item.
pub enum Functions {
    /// Every exported function whose name starts with one of these.
    Prefixed(&'static [&'static str]),
    /// Exactly these exported functions (osrt's locks, which name lock
    /// waits: see kernel/osrt.rs).
    Named(&'static [&'static str]),
}

/// The libc functions whose waits osrt reports: the locks, condition
/// variables and semaphores, which wait in a futex system call (and make
/// none when they need not wait). A futex wait made by their code is a row
/// named after the function (see kernel/osrt.rs); nothing is probed in
/// them. Where two of them share their slow path (`pthread_mutex_timedlock`
/// and `pthread_mutex_clocklock`), the one listed first names its waits.
/// Everything else osrt reports (I/O, sleeps, polls, waits) comes from the
/// system-call tracepoints: see kernel/syscalls.rs.
const OSRT_FUNCTIONS: &[&str] = &[
    "pthread_mutex_lock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_rwlock_timedrdlock",
    "pthread_rwlock_timedwrlock",
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "pthread_cond_clockwait",
    "pthread_barrier_wait",
    "pthread_join",
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
];

/// The functions each trace item probes (a trait, as [`TraceItem`] is
/// asys-report's).
pub trait ProbedFunctions: Copy {
    /// The exported functions this item covers in any library.
    fn functions(self) -> Functions;
    /// Prefixes of functions this item probes only in the library whose
    /// file name starts with the given name, besides [`Self::functions`]:
    /// the CUDA driver API (`cu` and an upper-case letter: cuInit,
    /// cuMemAlloc_v2, ...) in libcuda.so.1, which nsys's `cuda` trace
    /// (cuda_api_sum) counts with the runtime's calls. Anywhere else that
    /// prefix would also take cuBLAS's and cuDNN's functions.
    fn library_functions(self, file_name: &str) -> &'static [&'static str];
}

impl ProbedFunctions for TraceItem {
    fn functions(self) -> Functions {
        match self {
            TraceItem::Hggc => Functions::Prefixed(&["hggc"]),
            TraceItem::Hgtx => Functions::Prefixed(&["hgtx"]),
            TraceItem::Acblas => Functions::Prefixed(&["acblas"]),
            TraceItem::Acdnn => Functions::Prefixed(&["acdnn"]),
            TraceItem::Pccl => Functions::Prefixed(&["pccl"]),
            // The CUDA runtime (libcudart); the driver API (cu*) too, but only
            // in libcuda: see [`Self::library_functions`].
            TraceItem::Cuda => Functions::Prefixed(&["cuda"]),
            TraceItem::Osrt => Functions::Named(OSRT_FUNCTIONS),
            // NVTX v3 is header-only: asys's injection library is the NVTX tool
            // (NVTX_INJECTION64_PATH) and these are its functions.
            TraceItem::Nvtx => Functions::Prefixed(&["asys_nvtx"]),
            TraceItem::Cublas => Functions::Prefixed(&["cublas"]),
            TraceItem::Cudnn => Functions::Prefixed(&["cudnn"]),
            TraceItem::Nccl => Functions::Prefixed(&["nccl"]),
        }
    }

    fn library_functions(self, file_name: &str) -> &'static [&'static str] {
        match self {
            TraceItem::Cuda if is_cuda_driver(file_name) => &["cu"],
            _ => &[],
        }
    }
}

/// Whether a library's file name is CUDA's driver (libcuda.so.1).
pub fn is_cuda_driver(file_name: &str) -> bool {
    file_name.starts_with("libcuda.so")
}

/// `--hggc-trace-set`: which parts of hggc to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HggcTraceSet {
    pub kernel_activity: bool,
    pub memory_activity: bool,
    pub kernel_api: bool,
    pub memory_api: bool,
    /// The other API calls (streams, events, devices...): only in the default set.
    pub other_api: bool,
}

impl Default for HggcTraceSet {
    fn default() -> Self {
        Self {
            kernel_activity: true,
            memory_activity: true,
            kernel_api: true,
            memory_api: true,
            other_api: true,
        }
    }
}

impl HggcTraceSet {
    /// Parses `kernel-activity,memory-activity,kernel-api,memory-api` or
    /// `default-set`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut set = Self {
            kernel_activity: false,
            memory_activity: false,
            kernel_api: false,
            memory_api: false,
            other_api: false,
        };
        for w in spec.split(',').map(str::trim) {
            match w {
                "default-set" => return Ok(Self::default()),
                "kernel-activity" => set.kernel_activity = true,
                "memory-activity" => set.memory_activity = true,
                "kernel-api" => set.kernel_api = true,
                "memory-api" => set.memory_api = true,
                _ => {
                    return Err(format!(
                        "unknown hggc trace set '{w}' (kernel-activity, memory-activity, kernel-api, memory-api, default-set)"
                    ));
                }
            }
        }
        Ok(set)
    }

    /// Whether the hggc API function `name` is in the set.
    pub fn wants_api(&self, name: &str) -> bool {
        let memory = ["Malloc", "Free", "Memcpy", "Memset"]
            .iter()
            .any(|k| name.contains(k));
        let kernel = name.contains("Launch") || name.contains("Kernel");
        (memory && self.memory_api)
            || (kernel && self.kernel_api)
            || (!memory && !kernel && self.other_api)
    }

    /// Whether device activity of this kind is recorded.
    pub fn wants_activity(&self, work: DeviceWork) -> bool {
        match work {
            DeviceWork::Kernel => self.kernel_activity,
            DeviceWork::Memory => self.memory_activity,
        }
    }

    /// Whether the calls that put this kind of work on the device are
    /// recorded.
    pub fn wants_calls_of(&self, work: DeviceWork) -> bool {
        match work {
            DeviceWork::Kernel => self.kernel_api,
            DeviceWork::Memory => self.memory_api,
        }
    }

    /// The activity kinds for the injection library (ASYS_HGGC_ACTIVITY).
    pub fn activity_env(&self) -> String {
        let mut kinds = Vec::new();
        if self.kernel_activity {
            kinds.push("kernel");
        }
        if self.memory_activity {
            kinds.push("memory");
        }
        kinds.join(",")
    }
}

/// How to decode one function's arguments. Indexes are argument positions.
#[derive(Debug, Clone, Copy, Default)]
pub struct Signature {
    pub bytes: Option<usize>,
    pub kind: Option<usize>,
    pub stream: Option<usize>,
    pub device: Option<usize>,
    /// A pointer argument (freed or set), or argument 0's pointee at exit.
    pub ptr: Option<PtrArg>,
    /// hggcLaunchKernel: func, dim3 grid, dim3 block, args, sharedMem, stream
    /// (cudaLaunchKernel's too); `launch_layout` says where the dimensions are.
    pub launch: bool,
    pub launch_layout: LaunchLayout,
    /// The device work a successful call puts on the device: one activity
    /// record with the call's correlation id.
    pub device_work: Option<DeviceWork>,
    /// The result is 64 bits wide (a pointer, ssize_t), not a C int.
    pub wide_return: bool,
    /// An argument whose text the probe captures.
    pub text: Option<TextArg>,
    /// (count argument, datatype argument): bytes = count x size of the
    /// datatype (pccl and NCCL collectives and point-to-point).
    pub count_dtype: Option<(usize, usize)>,
    /// Whose datatype numbers `count_dtype`'s datatype argument holds.
    pub datatypes: Datatypes,
}

/// What a call puts on the device, as `--hggc-trace-set` groups activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceWork {
    /// A kernel launch.
    Kernel,
    /// A copy or a memset.
    Memory,
}

#[derive(Debug, Clone, Copy)]
pub enum PtrArg {
    /// The value of argument i.
    Arg(usize),
    /// What argument 0 points to after the call (e.g. hggcMalloc's result).
    Out0,
}

impl Signature {
    /// Whether the exit probe must read `*arg0` for this function.
    pub fn reads_out0(&self) -> bool {
        matches!(self.ptr, Some(PtrArg::Out0))
    }
}

pub fn signature(name: &str) -> Signature {
    let s = Signature::default;
    match name {
        "hggcMalloc" | "hggcMallocHost" => Signature {
            bytes: Some(1),
            ptr: Some(PtrArg::Out0),
            ..s()
        },
        "hggcFree" | "hggcFreeHost" => Signature {
            ptr: Some(PtrArg::Arg(0)),
            ..s()
        },
        "hggcMemcpy" => Signature {
            device_work: Some(DeviceWork::Memory),
            bytes: Some(2),
            kind: Some(3),
            ..s()
        },
        "hggcMemcpyAsync" => Signature {
            device_work: Some(DeviceWork::Memory),
            bytes: Some(2),
            kind: Some(3),
            stream: Some(4),
            ..s()
        },
        "hggcMemset" => Signature {
            device_work: Some(DeviceWork::Memory),
            bytes: Some(2),
            ptr: Some(PtrArg::Arg(0)),
            ..s()
        },
        "hggcMemsetAsync" => Signature {
            device_work: Some(DeviceWork::Memory),
            bytes: Some(2),
            stream: Some(3),
            ptr: Some(PtrArg::Arg(0)),
            ..s()
        },
        "hggcStreamCreate" | "hggcEventCreate" => Signature {
            ptr: Some(PtrArg::Out0),
            ..s()
        },
        "hggcStreamSynchronize" | "hggcStreamDestroy" => Signature {
            stream: Some(0),
            ..s()
        },
        "hggcEventRecord" => Signature {
            stream: Some(1),
            ..s()
        },
        "hggcSetDevice" => Signature {
            device: Some(0),
            ..s()
        },
        "hggcLaunchKernel" => Signature {
            launch: true,
            device_work: Some(DeviceWork::Kernel),
            stream: Some(7),
            ..s()
        },
        _ => Signature {
            wide_return: WIDE_RETURNS.contains(&name),
            ..s()
        },
    }
}

/// Where an API's text argument is and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextArg {
    pub index: usize,
    /// An NVTX-style event attributes struct holding the message.
    pub attributes: bool,
    /// A `wchar_t` string.
    pub wide: bool,
}

const fn text(index: usize, attributes: bool, wide: bool) -> Option<TextArg> {
    Some(TextArg {
        index,
        attributes,
        wide,
    })
}

/// `-c hgtx -p TEMPLATE`: the range that opens and closes collection.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HgtxRange {
    pub name: String,
    pub domain: HgtxDomain,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HgtxDomain {
    /// `range`: the default domain only.
    Default,
    /// `range@*`: any domain.
    Any,
    /// `range@domain`.
    Named(String),
}

impl HgtxRange {
    /// `range`, `range@domain` or `range@*`; `\@` is an `@` of the name.
    pub fn parse(template: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("invalid -p/--hgtx-capture template '{template}': {why}");
        let marker = "\u{0}";
        let escaped = template.replace("\\@", marker);
        let (name, domain) = match escaped.rsplit_once('@') {
            None => (escaped.as_str(), HgtxDomain::Default),
            Some((n, "*")) => (n, HgtxDomain::Any),
            Some((_, "")) => return Err(bad("the domain after '@' is empty")),
            Some((n, d)) => (n, HgtxDomain::Named(d.replace(marker, "@"))),
        };
        let name = name.replace(marker, "@");
        if name.is_empty() {
            return Err(bad("the range name is empty"));
        }
        let too_long = |s: &str| s.len() >= asys_common::TEXT_LEN;
        if too_long(&name) || matches!(&domain, HgtxDomain::Named(d) if too_long(d)) {
            return Err(bad(&format!(
                "names are at most {} bytes",
                asys_common::TEXT_LEN - 1
            )));
        }
        Ok(Self { name, domain })
    }

    /// The template again, as the user would write it.
    pub fn template(&self) -> String {
        let name = self.name.replace('@', "\\@");
        match &self.domain {
            HgtxDomain::Default => name,
            HgtxDomain::Any => format!("{name}@*"),
            HgtxDomain::Named(d) => format!("{name}@{d}"),
        }
    }
}

/// The cookie bits that tell the kernel what an hgtx (or NVTX) function
/// does to `-c hgtx` ranges.
pub fn hgtx_capture_flags(name: &str) -> u64 {
    use asys_common::*;
    let canonical = name.trim_start_matches("hgtx").trim_start_matches("nvtx");
    let in_domain = canonical.starts_with("Domain");
    let what = match canonical.trim_start_matches("Domain") {
        "RangePushA" | "RangePushW" | "RangePushEx" => COOKIE_HGTX_PUSH,
        "RangePop" => COOKIE_HGTX_POP,
        "RangeStartA" | "RangeStartW" | "RangeStartEx" => COOKIE_HGTX_START,
        "RangeEnd" => COOKIE_HGTX_END,
        "CreateA" if in_domain => return COOKIE_HGTX_DOMAIN_CREATE,
        _ => return 0,
    };
    what | if in_domain { COOKIE_HGTX_IN_DOMAIN } else { 0 }
}

/// hgtx and NVTX (v2 style): which argument holds the message or name.
fn hgtx_signature(name: &str) -> Signature {
    let canonical = format!(
        "hgtx{}",
        name.trim_start_matches("hgtx").trim_start_matches("nvtx")
    );
    let name = canonical.as_str();
    let text = match name {
        "hgtxMarkA" | "hgtxRangeStartA" | "hgtxRangePushA" | "hgtxDomainCreateA" => {
            text(0, false, false)
        }
        "hgtxMarkW" | "hgtxRangeStartW" | "hgtxRangePushW" => text(0, false, true),
        "hgtxMarkEx" | "hgtxRangeStartEx" | "hgtxRangePushEx" => text(0, true, false),
        "hgtxNameCategoryA" | "hgtxNameOsThreadA" | "hgtxDomainRegisterStringA" => {
            text(1, false, false)
        }
        "hgtxDomainNameCategoryA" => text(2, false, false),
        "hgtxDomainMarkEx" | "hgtxDomainRangeStartEx" | "hgtxDomainRangePushEx" => {
            text(1, true, false)
        }
        _ => None,
    };
    Signature {
        text,
        // Handles and range ids are 64-bit results; push/pop return ints.
        wide_return: !matches!(
            name,
            "hgtxRangePushA"
                | "hgtxRangePushW"
                | "hgtxRangePushEx"
                | "hgtxRangePop"
                | "hgtxDomainRangePushEx"
                | "hgtxDomainRangePop"
        ),
        ..Signature::default()
    }
}

/// pccl and NCCL: where the element count, datatype and stream are.
fn collective_signature(item: TraceItem, name: &str) -> Signature {
    let (prefix, datatypes) = (item.name(), Datatypes::of(item));
    let op = collective(name.strip_prefix(prefix).unwrap_or(name));
    Signature {
        count_dtype: op.map(|(count, dtype, _)| (count, dtype)),
        stream: op.and_then(|(_, _, stream)| stream),
        datatypes,
        wide_return: WIDE_RETURNS.contains(&name),
        ..Signature::default()
    }
}

/// The CUDA driver API's common calls (cuda.h): where their sizes, pointers,
/// streams and devices are. Every driver function returns a CUresult.
fn driver_signature(name: &str) -> Option<Signature> {
    let s = Signature::default;
    Some(match name {
        // (CUdeviceptr *dptr, size_t bytesize), (void **pp, size_t bytesize)
        "cuMemAlloc_v2" | "cuMemAllocHost_v2" | "cuMemAllocManaged" => Signature {
            bytes: Some(1),
            ptr: Some(PtrArg::Out0),
            ..s()
        },
        // (CUdeviceptr dptr), (void *p)
        "cuMemFree_v2" | "cuMemFreeHost" => Signature {
            ptr: Some(PtrArg::Arg(0)),
            ..s()
        },
        // (dst, src, size_t ByteCount)
        "cuMemcpy" | "cuMemcpyHtoD_v2" | "cuMemcpyDtoH_v2" | "cuMemcpyDtoD_v2" => Signature {
            bytes: Some(2),
            ..s()
        },
        // (dst, src, size_t ByteCount, CUstream hStream)
        "cuMemcpyAsync"
        | "cuMemcpyHtoDAsync_v2"
        | "cuMemcpyDtoHAsync_v2"
        | "cuMemcpyDtoDAsync_v2" => Signature {
            bytes: Some(2),
            stream: Some(3),
            ..s()
        },
        // (CUdeviceptr dstDevice, unsigned char uc, size_t N): N bytes
        "cuMemsetD8_v2" => Signature {
            bytes: Some(2),
            ptr: Some(PtrArg::Arg(0)),
            ..s()
        },
        // (CUstream *phStream, unsigned int Flags), (CUevent *, flags)
        "cuStreamCreate" | "cuEventCreate" => Signature {
            ptr: Some(PtrArg::Out0),
            ..s()
        },
        // (CUstream hStream)
        "cuStreamSynchronize" | "cuStreamDestroy_v2" | "cuStreamQuery" => Signature {
            stream: Some(0),
            ..s()
        },
        // (CUevent hEvent, CUstream hStream)
        "cuEventRecord" => Signature {
            stream: Some(1),
            ..s()
        },
        // (CUdevice *device, int ordinal)
        "cuDeviceGet" => Signature {
            device: Some(1),
            ..s()
        },
        // (CUcontext *pctx, unsigned int flags, CUdevice dev)
        "cuCtxCreate_v2" => Signature {
            ptr: Some(PtrArg::Out0),
            device: Some(2),
            ..s()
        },
        // (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
        // sharedMemBytes, hStream, ...): the stream is the ninth argument,
        // past the eight the probe reads; the grid, block and shared memory
        // are within them.
        "cuLaunchKernel"
        | "cuLaunchKernel_ptsz"
        | "cuLaunchCooperativeKernel"
        | "cuLaunchCooperativeKernel_ptsz" => Signature {
            launch: true,
            launch_layout: LaunchLayout::Scalars,
            device_work: Some(DeviceWork::Kernel),
            ..s()
        },
        // (func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
        // cudaStream_t stream): hggcLaunchKernel's layout, the stream the
        // eighth argument.
        "cudaLaunchKernel"
        | "cudaLaunchKernel_ptsz"
        | "cudaLaunchCooperativeKernel"
        | "cudaLaunchCooperativeKernel_ptsz" => Signature {
            launch: true,
            device_work: Some(DeviceWork::Kernel),
            stream: Some(7),
            ..s()
        },
        _ => return None,
    })
}

/// Functions of the traced families whose result is 64 bits wide (a
/// pointer or a `size_t`), as their headers declare them: sim/include
/// (hggc_runtime.h, pccl.h), and the wheels' cuda_runtime_api.h, cuda.h,
/// cublas_api.h, cublasLt.h, cudnn_graph.h and nccl.h (every declaration
/// there returning a pointer or a size_t). Every other function of these
/// families returns a C int or an enum (a status), sign-extended from 32
/// bits; the driver API (cuda.h) returns CUresult throughout.
pub const WIDE_RETURNS: &[&str] = &[
    "hggcGetErrorString",
    "pcclGetErrorString",
    "cudaGetErrorName",
    "cudaGetErrorString",
    "cublasGetCudartVersion",
    "cublasGetStatusName",
    "cublasGetStatusString",
    "cublasLtGetCudartVersion",
    "cublasLtGetStatusName",
    "cublasLtGetStatusString",
    "cublasLtGetVersion",
    "cudnnGetCudartVersion",
    "cudnnGetErrorString",
    "cudnnGetMaxDeviceVersion",
    "cudnnGetVersion",
    "ncclGetErrorString",
    "ncclGetLastError",
];

/// The signature of `name` in `item`'s family.
pub fn signature_in(item: TraceItem, name: &str) -> Signature {
    match item {
        // NCCL's entry points take their arguments where pccl's do.
        TraceItem::Pccl | TraceItem::Nccl => collective_signature(item, name),
        TraceItem::Cuda => driver_signature(name).unwrap_or_else(|| signature(name)),
        TraceItem::Hgtx | TraceItem::Nvtx => hgtx_signature(name),
        // libc results are ssize_t/int/pointers: keep all 64 bits.
        // Locks, condition variables, semaphores: the object waited on.
        TraceItem::Osrt if name.starts_with("pthread_") || name.starts_with("sem_") => Signature {
            ptr: Some(PtrArg::Arg(0)),
            wide_return: true,
            ..Signature::default()
        },
        TraceItem::Osrt => Signature {
            bytes: matches!(
                name,
                "read" | "write" | "pread64" | "pwrite64" | "send" | "recv" | "sendto" | "recvfrom"
            )
            .then_some(2),
            wide_return: true,
            ..Signature::default()
        },
        _ => signature(name),
    }
}

/// What a call's raw registers mean, by its signature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decoded {
    pub return_value: i64,
    pub bytes: Option<u64>,
    pub copy_kind: Option<i32>,
    pub stream: Option<u64>,
    pub device: Option<i32>,
    pub ptr: Option<u64>,
    pub launch: Option<Launch>,
}

/// Where a launch's dimensions are among its arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LaunchLayout {
    /// (func, dim3 grid, dim3 block, args, sharedMem, stream): each dim3 is
    /// 12 bytes by value in two registers (hggcLaunchKernel,
    /// cudaLaunchKernel).
    #[default]
    Dim3,
    /// (CUfunction f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
    /// blockDimZ, sharedMemBytes, hStream, kernelParams, extra): one
    /// unsigned int each (cuLaunchKernel). blockDimZ and sharedMemBytes are
    /// the two stack slots the probe reads; hStream, the ninth argument,
    /// is past them, so the call's stream is not recorded (its kernel's
    /// record has it).
    Scalars,
}

/// A kernel launch's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    pub kernel_addr: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u64,
}

/// Reads the arguments that matter from raw registers.
pub fn decode(sig: &Signature, args: &[u64; 8], out0: u64, ret: u64) -> Decoded {
    Decoded {
        return_value: if sig.wide_return {
            ret as i64
        } else {
            // Error codes are C ints: the upper half of rax is not part of them.
            ret as u32 as i32 as i64
        },
        bytes: sig.bytes.map(|i| args[i]).or_else(|| {
            let (count, dtype) = sig.count_dtype?;
            // A count no real buffer reaches saturates rather than wraps.
            Some(args[count].saturating_mul(sig.datatypes.size(args[dtype])?))
        }),
        copy_kind: sig.kind.map(|i| args[i] as u32 as i32),
        stream: sig.stream.map(|i| args[i]),
        device: sig.device.map(|i| args[i] as u32 as i32),
        ptr: sig.ptr.map(|p| match p {
            PtrArg::Arg(i) => args[i],
            PtrArg::Out0 => out0,
        }),
        launch: sig.launch.then(|| match sig.launch_layout {
            LaunchLayout::Dim3 => {
                // dim3 is 12 bytes, passed by value in two registers: {x,y} then {z}.
                let dim = |lo: u64, hi: u64| [lo as u32, (lo >> 32) as u32, hi as u32];
                Launch {
                    kernel_addr: args[0],
                    grid: dim(args[1], args[2]),
                    block: dim(args[3], args[4]),
                    shared_mem: args[6],
                }
            }
            LaunchLayout::Scalars => Launch {
                // A CUfunction is a handle, not an address to symbolize.
                kernel_addr: 0,
                grid: [args[1] as u32, args[2] as u32, args[3] as u32],
                block: [args[4] as u32, args[5] as u32, args[6] as u32],
                shared_mem: u64::from(args[7] as u32),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hgtx_templates() {
        let r = |t: &str| HgtxRange::parse(t);
        assert_eq!(r("Step").unwrap().domain, HgtxDomain::Default);
        assert_eq!(r("Step@*").unwrap().domain, HgtxDomain::Any);
        assert_eq!(
            r("Step@net").unwrap(),
            HgtxRange {
                name: "Step".into(),
                domain: HgtxDomain::Named("net".into())
            }
        );
        assert_eq!(r("a\\@b").unwrap().name, "a@b");
        assert!(r("").is_err());
        assert!(r("@d").is_err());
        assert!(r("x@").is_err());
        assert!(r(&"x".repeat(64)).is_err());
    }

    #[test]
    fn trace_sets_select_apis_and_activity() {
        let set = HggcTraceSet::parse("kernel-api,memory-activity").unwrap();
        assert!(set.wants_api("hggcLaunchKernel"));
        assert!(!set.wants_api("hggcMemcpyAsync"));
        assert!(!set.wants_api("hggcStreamSynchronize"));
        assert_eq!(set.activity_env(), "memory");
        let all = HggcTraceSet::parse("default-set").unwrap();
        assert!(all.wants_api("hggcStreamSynchronize") && all.wants_api("hggcMalloc"));
        assert_eq!(all.activity_env(), "kernel,memory");
        assert!(HggcTraceSet::parse("bogus").is_err());
    }

    #[test]
    fn launch_arguments_unpack_dim3_registers() {
        let args = [
            0x1000,
            2 | (3 << 32),
            4,
            128 | (1 << 32),
            1,
            0xdead,
            64,
            0x77,
        ];
        let d = decode(
            &signature("hggcLaunchKernel"),
            &args,
            0,
            0xffff_ffff_0000_0000,
        );
        assert_eq!(
            d.launch,
            Some(Launch {
                kernel_addr: 0x1000,
                grid: [2, 3, 4],
                block: [128, 1, 1],
                shared_mem: 64
            })
        );
        assert_eq!(d.stream, Some(0x77));
        assert_eq!(d.return_value, 0);
    }

    /// cudaLaunchKernel's dim3s are unpacked as hggcLaunchKernel's, its
    /// stream the eighth argument; cuLaunchKernel's six unsigned ints, block
    /// Z and shared memory from the stack slots, no stream (the ninth).
    #[test]
    fn cuda_launches_decode_grid_block_and_stream() {
        let runtime = [
            0x1000,
            2 | (3 << 32),
            4,
            128 | (1 << 32),
            1,
            0xdead,
            64,
            0x77,
        ];
        let d = decode(
            &signature_in(TraceItem::Cuda, "cudaLaunchKernel"),
            &runtime,
            0,
            0,
        );
        assert_eq!(
            d.launch,
            Some(Launch {
                kernel_addr: 0x1000,
                grid: [2, 3, 4],
                block: [128, 1, 1],
                shared_mem: 64
            })
        );
        assert_eq!(d.stream, Some(0x77));
        // Upper halves of the registers are not part of an unsigned int.
        let driver = [0x5555_0000, 8 | (0xff << 32), 2, 1, 256, 1, 1, 4096];
        let d = decode(
            &signature_in(TraceItem::Cuda, "cuLaunchKernel"),
            &driver,
            0,
            0,
        );
        assert_eq!(
            d.launch,
            Some(Launch {
                kernel_addr: 0,
                grid: [8, 2, 1],
                block: [256, 1, 1],
                shared_mem: 4096
            })
        );
        assert_eq!(d.stream, None);
    }

    /// Pointer and size_t results keep their 64 bits in every family; a
    /// status stays a sign-extended C int.
    #[test]
    fn vendor_results_are_as_wide_as_their_headers_declare() {
        let pointer = 0x0000_7f60_55c0_fa8f_u64;
        for (item, name) in [
            (TraceItem::Cuda, "cudaGetErrorString"),
            (TraceItem::Cuda, "cudaGetErrorName"),
            (TraceItem::Cublas, "cublasGetStatusString"),
            (TraceItem::Cublas, "cublasLtGetVersion"),
            (TraceItem::Cudnn, "cudnnGetErrorString"),
            (TraceItem::Cudnn, "cudnnGetVersion"),
            (TraceItem::Nccl, "ncclGetErrorString"),
            (TraceItem::Nccl, "ncclGetLastError"),
            (TraceItem::Pccl, "pcclGetErrorString"),
            (TraceItem::Hggc, "hggcGetErrorString"),
        ] {
            let d = decode(&signature_in(item, name), &[0; 8], 0, pointer);
            assert_eq!(d.return_value as u64, pointer, "{name}");
        }
        for (item, name) in [
            (TraceItem::Cuda, "cudaGetDeviceCount"),
            (TraceItem::Cuda, "cuInit"),
            (TraceItem::Cublas, "cublasCreate_v2"),
            (TraceItem::Cudnn, "cudnnCreate"),
            (TraceItem::Nccl, "ncclAllReduce"),
        ] {
            let d = decode(&signature_in(item, name), &[0; 8], 0, 0xdead_0000_ffff_fffe);
            assert_eq!(d.return_value, -2, "{name}");
        }
    }

    /// Bytes of every NCCL collective: its count argument (per rank) times
    /// the size of its datatype, fp8 included; the stream where the header
    /// puts it.
    #[test]
    fn nccl_collectives_carry_bytes_and_streams() {
        let call = |name: &str, count_at: usize, dtype: u64, stream_at: Option<usize>| {
            let mut args = [0u64; 8];
            args[count_at] = 1000;
            args[count_at + 1] = dtype;
            if let Some(s) = stream_at {
                args[s] = 0x5157;
            }
            let d = decode(&signature_in(TraceItem::Nccl, name), &args, 0, 0);
            (d.bytes, d.stream)
        };
        let s = Some(0x5157);
        assert_eq!(call("ncclAllReduce", 2, 7, Some(6)), (Some(4000), s));
        assert_eq!(call("ncclReduce", 2, 9, Some(7)), (Some(2000), s));
        assert_eq!(call("ncclBroadcast", 2, 8, Some(6)), (Some(8000), s));
        assert_eq!(call("ncclBcast", 1, 10, Some(5)), (Some(1000), s));
        assert_eq!(call("ncclReduceScatter", 2, 6, Some(6)), (Some(2000), s));
        assert_eq!(call("ncclAllGather", 2, 4, Some(5)), (Some(8000), s));
        assert_eq!(call("ncclAlltoAll", 2, 1, Some(5)), (Some(1000), s));
        assert_eq!(call("ncclGather", 2, 2, Some(6)), (Some(4000), s));
        assert_eq!(call("ncclScatter", 2, 11, Some(6)), (Some(1000), s));
        assert_eq!(call("ncclSend", 1, 3, Some(5)), (Some(4000), s));
        assert_eq!(call("ncclRecv", 1, 5, Some(5)), (Some(8000), s));
        assert_eq!(call("ncclReduceConfig", 2, 0, Some(7)), (Some(1000), s));
        assert_eq!(call("ncclPutSignal", 1, 9, None), (Some(2000), None));
        // A datatype NCCL does not define has no size, so no bytes.
        assert_eq!(call("ncclAllReduce", 2, 12, Some(6)).0, None);
        // pccl has no fp8: 10 is pcclNumTypes, not a type.
        let mut args = [0u64; 8];
        (args[2], args[3]) = (1000, 10);
        let d = decode(&signature_in(TraceItem::Pccl, "pcclAllReduce"), &args, 0, 0);
        assert_eq!(d.bytes, None);
        args[3] = 9;
        let d = decode(&signature_in(TraceItem::Pccl, "pcclAllReduce"), &args, 0, 0);
        assert_eq!(d.bytes, Some(2000));
    }

    /// The driver API is probed in libcuda only, and its common calls read
    /// their sizes and pointers.
    #[test]
    fn the_driver_api_is_cudas_in_libcuda_only() {
        assert_eq!(TraceItem::Cuda.library_functions("libcuda.so.1"), &["cu"]);
        assert_eq!(
            TraceItem::Cuda.library_functions("libcuda.so.550.54.14"),
            &["cu"]
        );
        assert!(
            TraceItem::Cuda
                .library_functions("libcublas.so.12")
                .is_empty()
        );
        assert!(
            TraceItem::Cublas
                .library_functions("libcuda.so.1")
                .is_empty()
        );
        let mut args = [0u64; 8];
        args[1] = 4096;
        let d = decode(
            &signature_in(TraceItem::Cuda, "cuMemAlloc_v2"),
            &args,
            0xd000,
            0,
        );
        assert_eq!((d.bytes, d.ptr), (Some(4096), Some(0xd000)));
        (args[2], args[3]) = (64, 0x77);
        let d = decode(
            &signature_in(TraceItem::Cuda, "cuMemcpyHtoDAsync_v2"),
            &args,
            0,
            0,
        );
        assert_eq!((d.bytes, d.stream), (Some(64), Some(0x77)));
    }

    #[test]
    fn error_codes_are_sign_extended_ints() {
        let rv = |ret| decode(&signature("hggcMemcpy"), &[0; 8], 0, ret).return_value;
        assert_eq!(rv(21), 21);
        assert_eq!(rv(0xffff_ffff), -1);
        // A pointer result keeps all 64 bits.
        let d = decode(
            &signature("hggcGetErrorString"),
            &[0; 8],
            0,
            0xffff_8000_0000_1000,
        );
        assert_eq!(d.return_value as u64, 0xffff_8000_0000_1000);
    }
}
