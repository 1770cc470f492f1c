//! The 64-bit cookie of an API probe: which probe fired and what the kernel
//! does for it, in one place for both sides.
/// The 64-bit BPF cookie each API probe carries (and a site-recorded call's
/// event carries in its place): which probe fired and what the kernel must do
/// for it. Both sides build and read it only through these methods, so its
/// layout is written down once, here:
///
/// | bits   | meaning |
/// | ------ | ------- |
/// | 0..32  | probe id (index of the tracer's probe), or the injection library's name id |
/// | 32     | [`Cookie::ARGS`]: the call's event carries its register arguments |
/// | 33     | [`Cookie::STACK_ARGS`]: arguments 7 and 8 (on the stack) are read too |
/// | 34     | [`Cookie::CORRELATED`]: the correlation id is in the thread's slot |
/// | 40..48 | capture-range and hgtx flags |
/// | 48..56 | the API family (trace item), for per-family settings |
/// | 56..60 | 1 + the index of an argument whose text is captured (0: none) |
/// | 60..64 | text flags, [`Cookie::SITE`], [`Cookie::READ_OUT0`] |
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cookie(pub u64);

impl Cookie {
    /// The event carries the call's six register arguments; without it the
    /// call is reported as an [`ApiCallShortEvent`](crate::ApiCallShortEvent)
    /// (its signature reads none).
    pub const ARGS: u64 = 1 << 32;
    /// Arguments 7 and 8 live on the stack and cost a user-memory read: only
    /// functions whose signature reads them ask for it.
    pub const STACK_ARGS: u64 = 1 << 33;
    /// The runtime reports this function to the injection library's API
    /// callback, which leaves the call's correlation id in the thread's
    /// slot ([`ThreadCalls::correlation_slot`](crate::ThreadCalls::correlation_slot))
    /// for the exit probe.
    pub const CORRELATED: u64 = 1 << 34;
    /// The probed function starts / stops the capture range (`-c
    /// hggcProfilerApi`: hggcProfilerStart/Stop, cudaProfilerStart/Stop).
    pub const CAPTURE_START: u64 = COOKIE_CAPTURE_START;
    pub const CAPTURE_STOP: u64 = COOKIE_CAPTURE_STOP;
    /// Argument 0 is an out-pointer whose pointee (8 bytes) is read when the
    /// call returns (e.g. `hggcMalloc`).
    pub const READ_OUT0: u64 = 1 << 63;
    /// A call recorded through the injection library's API callback site
    /// instead of uprobes on the runtime; the id is then the injection
    /// library's name id for the API (see [`ApiNameEvent`](crate::ApiNameEvent)).
    pub const SITE: u64 = 1 << 62;
    /// The text argument points to an NVTX-style event attributes struct.
    pub const TEXT_ATTRIBUTES: u64 = 1 << 60;
    /// The text is `wchar_t` (UTF-32): captured as raw bytes, decoded in userspace.
    pub const TEXT_WIDE: u64 = 1 << 61;

    const FAMILY_SHIFT: u32 = 48;
    const TEXT_SHIFT: u32 = 56;

    /// The cookie of probe `id` of API family `family`.
    pub const fn new(id: u32, family: u32) -> Self {
        Self(id as u64 | ((family as u64 & 0xff) << Self::FAMILY_SHIFT))
    }

    /// The cookie of a call the injection library reports for name `id`.
    pub const fn site(id: u32) -> Self {
        Self(id as u64 | Self::SITE)
    }

    /// This cookie with `flags` (the `Cookie::*` and `COOKIE_HGTX_*` bits) set.
    pub const fn with(self, flags: u64) -> Self {
        Self(self.0 | flags)
    }

    /// This cookie asking for the text of argument `index` (< 15).
    pub const fn with_text(self, index: usize, attributes: bool, wide: bool) -> Self {
        let mut v = self.0 | (((index as u64 + 1) & 0xf) << Self::TEXT_SHIFT);
        if attributes {
            v |= Self::TEXT_ATTRIBUTES;
        }
        if wide {
            v |= Self::TEXT_WIDE;
        }
        Self(v)
    }

    pub const fn id(self) -> u32 {
        self.0 as u32
    }

    pub const fn family(self) -> u32 {
        ((self.0 >> Self::FAMILY_SHIFT) & 0xff) as u32
    }

    /// Whether any of `flags` is set.
    pub const fn has(self, flags: u64) -> bool {
        self.0 & flags != 0
    }

    /// 1 + the index of the argument whose text is captured; 0 for none.
    pub const fn text_arg(self) -> usize {
        ((self.0 >> Self::TEXT_SHIFT) & 0xf) as usize
    }
}

/// Mask of the id inside a raw cookie ([`Cookie::id`] reads it).
pub const COOKIE_ID_MASK: u64 = 0xffff_ffff;
/// [`Cookie::SITE`] for code that holds the raw value.
pub const COOKIE_SITE: u64 = Cookie::SITE;

/// Flags of [`Cookie`] for capture ranges and hgtx (kept as plain bits:
/// userspace's API tables combine them).
pub const COOKIE_CAPTURE_START: u64 = 1 << 40;
pub const COOKIE_CAPTURE_STOP: u64 = 1 << 41;
/// hgtx functions that matter to `-c hgtx`: a push / a start whose message
/// may open the range, a pop / an end that may close it, a domain create
/// whose name may be the template's domain; `IN_DOMAIN`: a `hgtxDomain*`
/// function (the domain handle is argument 0).
pub const COOKIE_HGTX_PUSH: u64 = 1 << 42;
pub const COOKIE_HGTX_START: u64 = 1 << 43;
pub const COOKIE_HGTX_POP: u64 = 1 << 44;
pub const COOKIE_HGTX_END: u64 = 1 << 45;
pub const COOKIE_HGTX_DOMAIN_CREATE: u64 = 1 << 46;
pub const COOKIE_HGTX_IN_DOMAIN: u64 = 1 << 47;
pub const COOKIE_HGTX_ANY: u64 = COOKIE_HGTX_PUSH
    | COOKIE_HGTX_START
    | COOKIE_HGTX_POP
    | COOKIE_HGTX_END
    | COOKIE_HGTX_DOMAIN_CREATE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_fields_do_not_overlap() {
        let c = Cookie::new(0xdead_beef, 0xab)
            .with(Cookie::ARGS | Cookie::STACK_ARGS | Cookie::CORRELATED | Cookie::READ_OUT0)
            .with(COOKIE_HGTX_ANY | COOKIE_HGTX_IN_DOMAIN | Cookie::CAPTURE_START)
            .with_text(14, true, true);
        assert_eq!(c.id(), 0xdead_beef);
        assert_eq!(c.family(), 0xab);
        assert_eq!(c.text_arg(), 15);
        for flag in [
            Cookie::ARGS,
            Cookie::STACK_ARGS,
            Cookie::CORRELATED,
            Cookie::READ_OUT0,
            Cookie::TEXT_ATTRIBUTES,
            Cookie::TEXT_WIDE,
            Cookie::CAPTURE_START,
            COOKIE_HGTX_IN_DOMAIN,
        ] {
            assert!(c.has(flag));
        }
        assert!(!c.has(Cookie::SITE | Cookie::CAPTURE_STOP));
        let plain = Cookie::new(7, 3);
        assert_eq!((plain.id(), plain.family(), plain.text_arg()), (7, 3, 0));
        assert_eq!(Cookie::site(9).id(), 9);
        assert!(Cookie::site(9).has(Cookie::SITE));
    }
}
