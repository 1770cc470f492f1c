//! nsys's `SAMPLING_CALLCHAINS`: the stack of each CPU sample of
//! `COMPOSITE_EVENTS` (`id`), one row per frame, `stackDepth` 0 innermost.
//! A sample taken in the kernel starts with its kernel frames
//! (`kernel_stacks`, `kernelMode` 1, module `[kernel.kallsyms]`), then the
//! user frames of `cpu_sample_stacks` from where it entered the kernel.
use std::collections::HashMap;

use super::{
    ExportError, Writer, insert,
    tables::{self, SamplingCallchain, SqlTable},
};
use crate::report::schema::{KernelStackSource, cpu_sample_stacks as cs, kernel_stacks as ks};

/// What perf calls the kernel's module.
const KERNEL_MODULE: &str = "[kernel.kallsyms]";

/// `samples` maps each sample's (tid, ts) to its `COMPOSITE_EVENTS.id`.
pub fn callchains(w: &mut Writer, samples: &HashMap<(u32, i64), i64>) -> Result<(), ExportError> {
    w.exec(&tables::create_sql::<SamplingCallchain>(
        SamplingCallchain::NAME,
    ))?;
    let kernel = i64::from(w.strings.intern(KERNEL_MODULE));
    // A frame already given (the same sample and depth) is not repeated.
    let sql = tables::insert_sql::<SamplingCallchain>(SamplingCallchain::NAME).replacen(
        "INSERT",
        "INSERT OR IGNORE",
        1,
    );
    let mut ins = w.db.prepare(&sql).map_err(|e| w.sql(e))?;
    // Kernel frames per sample, so that its user frames follow them.
    let mut kernel_depth: HashMap<i64, i64> = HashMap::new();
    let cols = [
        ks::TS,
        ks::TID,
        ks::SOURCE,
        ks::DEPTH,
        ks::ADDR,
        ks::NAME_ID,
    ];
    for b in ks::scan(w.report, &cols)? {
        let b = b?;
        let v = ks::View(&b);
        let (ts, tid, source) = (v.ts()?, v.tid()?, v.sources()?);
        let (depth, addr, name) = (v.depth()?, v.addr()?, v.name_id()?);
        for i in 0..b.num_rows() {
            if source[i] != Some(KernelStackSource::Sample) {
                continue;
            }
            let Some(&id) = samples.get(&(tid[i], ts[i])) else {
                continue;
            };
            let d = kernel_depth.entry(id).or_default();
            *d = (*d).max(i64::from(depth[i]) + 1);
            let row = SamplingCallchain {
                id,
                symbol: i64::from(name[i]),
                module: kernel,
                kernelMode: Some(1),
                thumbCode: Some(0),
                specialEntry: Some(0),
                originalIP: Some(addr[i] as i64),
                stackDepth: i64::from(depth[i]),
                ..Default::default()
            };
            insert(&mut ins, w.path, &row)?;
        }
    }
    let cols = [
        cs::TID,
        cs::TS,
        cs::DEPTH,
        cs::PC,
        cs::FUNCTION_ID,
        cs::MODULE_ID,
    ];
    for b in cs::scan(w.report, &cols)? {
        let b = b?;
        let v = cs::View(&b);
        let (tid, ts, depth) = (v.tid()?, v.ts()?, v.depth()?);
        let (pc, function, module) = (v.pc()?, v.function_id()?, v.module_id()?);
        for i in 0..b.num_rows() {
            let Some(&id) = samples.get(&(tid[i], ts[i])) else {
                continue;
            };
            let below = kernel_depth.get(&id).copied().unwrap_or(0);
            let row = SamplingCallchain {
                id,
                symbol: i64::from(function[i]),
                module: i64::from(module[i]),
                kernelMode: Some(0),
                thumbCode: Some(0),
                specialEntry: Some(0),
                originalIP: Some(pc[i] as i64),
                stackDepth: below + i64::from(depth[i]),
                ..Default::default()
            };
            insert(&mut ins, w.path, &row)?;
        }
    }
    Ok(())
}
