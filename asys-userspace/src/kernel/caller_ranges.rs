//! The caller filter's userspace half: for each traced process, the
//! executable ranges of the libraries asys probes, each with the API
//! families for which a call from it is the vendor's own (see the kernel's
//! caller_filter.rs). A call is recorded when it comes from outside its
//! item's libraries: libcudnn calling the same function in
//! libcudnn_graph, or libcublas calling cublasLt, is left out; a
//! cudaLaunchKernel made by libcublas (another item's library calling the
//! runtime) is kept, as nsys shows it.
use std::path::Path;

use asys_common::{CallerRange, CallerRanges, MAX_CALLER_RANGES};

use asys_report::trace_items::TraceItem;

/// Who makes a library; header-only APIs (NVTX, HGTX) are compiled into
/// every library of their vendor, so each of those counts as their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    Nvidia,
    /// The simulated accelerator's runtime and libraries (PPU).
    Sim,
}

impl Vendor {
    /// The vendor of an item's libraries; None for the C library (osrt).
    pub fn of_item(item: TraceItem) -> Option<Self> {
        match item {
            TraceItem::Cuda
            | TraceItem::Nvtx
            | TraceItem::Cublas
            | TraceItem::Cudnn
            | TraceItem::Nccl => Some(Self::Nvidia),
            TraceItem::Hggc
            | TraceItem::Hgtx
            | TraceItem::Acblas
            | TraceItem::Acdnn
            | TraceItem::Pccl => Some(Self::Sim),
            TraceItem::Osrt => None,
        }
    }

    /// A vendor library asys probes nothing in, known by its file name
    /// (libcusparse, libnvrtc, ... still carry NVTX).
    pub fn of_file(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?;
        // NVTX v2's libnvToolsExt only forwards the application's calls to
        // the tool: a call from it is the application's.
        if name.starts_with("libnvToolsExt") {
            return None;
        }
        const NVIDIA: &[&str] = &["libcu", "libnv", "libnccl"];
        const SIM: &[&str] = &["libhggc", "libhgtx", "libacblas", "libacdnn", "libpccl"];
        if NVIDIA.iter().any(|p| name.starts_with(p)) {
            Some(Self::Nvidia)
        } else if SIM.iter().any(|p| name.starts_with(p)) {
            Some(Self::Sim)
        } else {
            None
        }
    }

    /// The header-only item every library of this vendor carries.
    fn header_only_item(self) -> TraceItem {
        match self {
            Self::Nvidia => TraceItem::Nvtx,
            Self::Sim => TraceItem::Hgtx,
        }
    }
}

/// The families (bit `1 << family`) for which calls from a library are its
/// vendor's own: the items probed in it, and its vendor's header-only item.
pub fn own_families(path: &Path, probed_items: &[TraceItem]) -> u64 {
    let mut mask = 0u64;
    let mut vendor = Vendor::of_file(path);
    for &item in probed_items {
        mask |= 1 << item.family_id();
        vendor = vendor.or(Vendor::of_item(item));
    }
    if let Some(v) = vendor {
        mask |= 1 << v.header_only_item().family_id();
    }
    mask
}

/// The families the filter applies to: every traced item's.
pub fn filtered_families(items: &[TraceItem]) -> u64 {
    items.iter().fold(0, |m, i| m | 1 << i.family_id())
}

/// The kernel's value for a process: the ranges that count as some
/// family's own (others need no entry: a call from them is recorded).
/// Beyond [`MAX_CALLER_RANGES`] ranges the rest are left out (returned as
/// the count cut), so their calls are recorded as the application's.
pub fn kernel_value(ranges: impl IntoIterator<Item = CallerRange>) -> (CallerRanges, usize) {
    let mut value = CallerRanges {
        count: 0,
        ranges: [CallerRange::default(); MAX_CALLER_RANGES],
    };
    let mut cut = 0;
    for r in ranges.into_iter().filter(|r| r.families != 0) {
        match value.ranges.get_mut(value.count as usize) {
            Some(slot) => {
                *slot = r;
                value.count += 1;
            }
            None => cut += 1,
        }
    }
    (value, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bit(i: TraceItem) -> u64 {
        1 << i.family_id()
    }

    #[test]
    fn a_vendor_library_owns_its_items_and_its_vendors_header_only_api() {
        let cublas_lt = Path::new("/v/nvidia/cublas/lib/libcublasLt.so.12");
        assert_eq!(
            own_families(cublas_lt, &[TraceItem::Cublas]),
            bit(TraceItem::Cublas) | bit(TraceItem::Nvtx)
        );
        // Not probed at all, but NVIDIA's: NVTX is compiled into it.
        assert_eq!(
            own_families(Path::new("/x/libcusparse.so.12"), &[]),
            bit(TraceItem::Nvtx)
        );
        assert_eq!(
            own_families(Path::new("/sim/libacblas.so"), &[TraceItem::Acblas]),
            bit(TraceItem::Acblas) | bit(TraceItem::Hgtx)
        );
        // libcublas is not the runtime's: its cudaLaunchKernel is kept.
        assert_eq!(
            own_families(cublas_lt, &[TraceItem::Cublas]) & bit(TraceItem::Cuda),
            0
        );
        // The C library owns its osrt functions, and no header-only API.
        assert_eq!(
            own_families(
                Path::new("/lib/x86_64-linux-gnu/libc.so.6"),
                &[TraceItem::Osrt]
            ),
            bit(TraceItem::Osrt)
        );
        // NVTX v2's forwarding library passes on the application's calls.
        assert_eq!(own_families(Path::new("/x/libnvToolsExt.so.1"), &[]), 0);
        // The application's own binary owns nothing.
        assert_eq!(own_families(Path::new("/usr/bin/python3.12"), &[]), 0);
    }

    #[test]
    fn only_owned_ranges_go_to_the_kernel_and_the_excess_is_counted() {
        let r = |i: u64, families| CallerRange {
            start: i * 0x1000,
            end: i * 0x1000 + 0x800,
            families,
        };
        let (v, cut) = kernel_value((0..MAX_CALLER_RANGES as u64 + 3).map(|i| r(i, 1)));
        assert_eq!((v.count as usize, cut), (MAX_CALLER_RANGES, 3));
        let (v, cut) = kernel_value([r(1, 0), r(2, 4), r(3, 0)]);
        assert_eq!((v.count, cut), (1, 0));
        assert_eq!(v.ranges[0], r(2, 4));
    }
}
