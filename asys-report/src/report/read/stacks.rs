//! Kernel stacks (`kernel_stacks`): one row per frame of the stack of a
//! CPU sample taken in the kernel, a switch-out or a wake-up, gathered here
//! into one stack per (thread, time).
use std::collections::HashMap;

use crate::report::{
    ReportError,
    container::Container,
    schema::{KernelStackSource, kernel_stacks as k},
    strings::StringTable,
};

/// The kernel stacks of `wanted` (samples, switches or wake-ups), by (tid,
/// ts): frame names (string ids), innermost first.
pub fn kernel_stacks(
    report: &Container,
    wanted: KernelStackSource,
) -> Result<HashMap<(u32, i64), Vec<u32>>, ReportError> {
    let mut frames: HashMap<(u32, i64), Vec<(u32, u32)>> = HashMap::new();
    let columns = [k::TS, k::TID, k::SOURCE, k::DEPTH, k::NAME_ID];
    for b in k::scan(report, &columns)? {
        let b = b?;
        let v = k::View(&b);
        let (ts, tid, source) = (v.ts()?, v.tid()?, v.sources()?);
        let (depth, name) = (v.depth()?, v.name_id()?);
        for i in 0..b.num_rows() {
            if source[i] != Some(wanted) {
                continue;
            }
            frames
                .entry((tid[i], ts[i]))
                .or_default()
                .push((depth[i], name[i]));
        }
    }
    Ok(frames
        .into_iter()
        .map(|(k, mut f)| {
            f.sort_unstable();
            (k, f.into_iter().map(|(_, n)| n).collect())
        })
        .collect())
}

/// A kernel frame's function: its name without `+0xoff` and the module.
pub fn kernel_function(name: &str) -> &str {
    name.split(['+', ' ']).next().unwrap_or(name)
}

/// The kernel stacks of the samples taken in the kernel, by (tid, ts):
/// their functions ([`kernel_function`]), innermost first.
pub fn sample_kernel_stacks(
    report: &Container,
    strings: &StringTable,
) -> Result<HashMap<(u32, i64), Vec<String>>, ReportError> {
    Ok(kernel_stacks(report, KernelStackSource::Sample)?
        .into_iter()
        .map(|(key, ids)| {
            let functions = ids
                .into_iter()
                .map(|id| kernel_function(strings.get(id).unwrap_or("?")).to_string())
                .collect();
            (key, functions)
        })
        .collect())
}
