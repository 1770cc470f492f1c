//! NVTX v3 in a process that did not start with `NVTX_INJECTION64_PATH`.
//! NVTX v3 is header-only: each module built with its headers keeps its own
//! function table (`nvtxGlobals_v3`) and exports nothing asys could probe;
//! its first NVTX call looked for a tool in the environment, found none and
//! left the table empty, and NVTX never looks again. So asys does in the
//! process what NVTX's loader does at that first call: it calls the
//! injection library's `InitializeInjectionNvtx2` with the module's
//! `nvtxGetExportTable_v3`, and the library fills the module's table with
//! its `asys_nvtx*` functions, which asys probes (trace item nvtx).
//!
//! The two functions are local symbols: they are found in modules that keep
//! their symbol table (the `nvtx` package's extensions do), among the
//! mappings whose path names NVTX. A module whose first NVTX call is still
//! to come is initialized first (`nvtxInitOnce_v3`), so that its own
//! initialization cannot empty the table afterwards.
//!
//! What the application decided while no tool was there stays decided: the
//! `nvtx` package makes a domain first used without a tool a `DummyDomain`
//! for the process's life, so only domains first used after the attach are
//! recorded (docs/attach.md).
use std::path::Path;

use super::{
    CALL_TIMEOUT,
    ptrace::{Arg, StoppedThread},
    remote_symbols::Symbols,
};

/// The payload extension's state (slot 0) and function slots, as
/// nvtxDetail/nvtxExtImpl.h numbers them, and `nvtxDomainIsEnabled`'s
/// callback id (nvToolsExtPayload.h).
const EXTENSION_FRESH: u64 = 0;
const EXTENSION_DISABLED: u64 = 1;
const CBID_DOMAIN_IS_ENABLED: u64 = 7;

/// `nvtxDomainIsEnabled` (the payload extension's) returns 1 when a tool is
/// attached that does not handle it, 0 when none is: the `nvtx` package
/// makes a domain it finds disabled a dummy. A module that looked before
/// the attach has the slot disabled; it gets the answer NVTX gives with a
/// tool attached: the module's own `nvtxReturnOne`.
fn enable_domains(
    thread: &mut StoppedThread,
    symbols: &Symbols,
    m: &crate::process::procfs::MapsEntry,
) {
    use crate::process::remote_memory::RemoteMemory as _;
    let mem = crate::process::remote_memory::Process(symbols.pid());
    for (name, slots) in symbols.prefixed_in(m, "nvtxExtPayloadSlots") {
        let suffix = &name["nvtxExtPayloadSlots".len()..];
        let find = |base: &str| symbols.address_in(m, &format!("{base}{suffix}"));
        let (Some(one), Some(init_once)) = (find("nvtxReturnOne"), find("nvtxExtPayloadInitOnce"))
        else {
            continue;
        };
        // Not initialized yet: initialized now (no tool in its environment,
        // so every slot disabled), then answered as below.
        if mem.read_u64(slots) == Some(EXTENSION_FRESH)
            && thread.call(init_once, &[], CALL_TIMEOUT).is_err()
        {
            continue;
        }
        let slot = slots + 8 * (CBID_DOMAIN_IS_ENABLED + 1);
        if mem.read_u64(slot) == Some(EXTENSION_DISABLED) {
            let _ = thread.write(slot, &one.to_le_bytes());
        }
    }
}

/// A file worth a look for NVTX's globals: its path names NVTX.
pub fn is_candidate(path: &Path) -> bool {
    let p = path.to_string_lossy().to_ascii_lowercase();
    p.contains("nvtx") || p.contains("nvtoolsext")
}

/// Has each NVTX module of the process adopt the injection library as its
/// tool; returns how many did.
pub fn adopt(pid: u32, thread: &mut StoppedThread, symbols: &Symbols) -> usize {
    let Some(init) = symbols.in_injection_library("InitializeInjectionNvtx2") else {
        return 0;
    };
    let mut seen = std::collections::HashSet::new();
    let mut adopted = 0;
    for m in symbols.maps() {
        if !m.executable || !is_candidate(&m.path) || !seen.insert(m.path.clone()) {
            continue;
        }
        let Some(table) = symbols.address_in(m, "nvtxGetExportTable_v3") else {
            continue;
        };
        if let Some(init_once) = symbols.address_in(m, "nvtxInitOnce_v3")
            && thread.call(init_once, &[], CALL_TIMEOUT).is_err()
        {
            continue;
        }
        match thread.call(init, &[Arg::Value(table)], CALL_TIMEOUT) {
            Ok(r) if r.value as u32 == 1 => {
                adopted += 1;
                enable_domains(thread, symbols, m);
            }
            _ => eprintln!(
                "asys: warning: process {pid}: {} did not take asys as its NVTX tool",
                asys_report::text_safety::escaped_name(&m.path.to_string_lossy())
            ),
        }
    }
    adopted
}
