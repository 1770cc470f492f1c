//! nsys's `SAMPLING_CALLCHAINS`: the stack of each CPU sample of
//! `COMPOSITE_EVENTS` (`id`), one row per frame, `stackDepth` 0 innermost.
//! A sample taken in the kernel starts with its kernel frames
//! (`kernel_stacks`, `kernelMode` 1, module `[kernel.kallsyms]`), then the
//! user frames of `cpu_sample_stacks` from where it entered the kernel.
use std::collections::HashMap;

use arrow::datatypes::{Int64Type, UInt32Type, UInt64Type};
use rusqlite::params;

use super::{ExportError, Writer};
use crate::report::{
    reader,
    schema::{self, cpu_sample_stacks as cs, kernel_stacks as ks},
};

/// What perf calls the kernel's module.
const KERNEL_MODULE: &str = "[kernel.kallsyms]";

/// `samples` maps each sample's (tid, ts) to its `COMPOSITE_EVENTS.id`.
pub fn callchains(w: &mut Writer, samples: &HashMap<(u32, i64), i64>) -> Result<(), ExportError> {
    w.exec(
        "CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, \
         module INTEGER NOT NULL, kernelMode INTEGER, thumbCode INTEGER, unresolved INTEGER, \
         specialEntry INTEGER, originalIP INTEGER, unwindMethod INTEGER, \
         stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));",
    )?;
    let kernel = w.strings.intern(KERNEL_MODULE);
    // Kernel frames per sample, so that its user frames follow them.
    let mut kernel_depth: HashMap<i64, u32> = HashMap::new();
    let sql = "INSERT OR IGNORE INTO SAMPLING_CALLCHAINS VALUES \
               (?1, ?2, ?3, ?4, 0, NULL, 0, ?5, NULL, ?6)";
    {
        let mut ins = w.db.prepare(sql).map_err(|e| w.sql(e))?;
        let cols = [
            ks::TS,
            ks::TID,
            ks::SOURCE,
            ks::DEPTH,
            ks::ADDR,
            ks::NAME_ID,
        ];
        for b in reader::scan(w.report, schema::KERNEL_STACKS, &cols)? {
            let b = b?;
            let ts = b.values::<Int64Type>(ks::TS)?;
            let tid = b.values::<UInt32Type>(ks::TID)?;
            let source = b.strs(ks::SOURCE)?;
            let depth = b.values::<UInt32Type>(ks::DEPTH)?;
            let addr = b.values::<UInt64Type>(ks::ADDR)?;
            let name = b.values::<UInt32Type>(ks::NAME_ID)?;
            for i in 0..b.num_rows() {
                if source.value(i) != "sample" {
                    continue;
                }
                let Some(&id) = samples.get(&(tid[i], ts[i])) else {
                    continue;
                };
                let d = kernel_depth.entry(id).or_default();
                *d = (*d).max(depth[i] + 1);
                ins.execute(params![id, name[i], kernel, 1, addr[i] as i64, depth[i]])
                    .map_err(|e| w.sql(e))?;
            }
        }
    }
    let mut ins = w.db.prepare(sql).map_err(|e| w.sql(e))?;
    let cols = [
        cs::TID,
        cs::TS,
        cs::DEPTH,
        cs::PC,
        cs::FUNCTION_ID,
        cs::MODULE_ID,
    ];
    for b in reader::scan(w.report, schema::CPU_SAMPLE_STACKS, &cols)? {
        let b = b?;
        let tid = b.values::<UInt32Type>(cs::TID)?;
        let ts = b.values::<Int64Type>(cs::TS)?;
        let depth = b.values::<UInt32Type>(cs::DEPTH)?;
        let pc = b.values::<UInt64Type>(cs::PC)?;
        let function = b.values::<UInt32Type>(cs::FUNCTION_ID)?;
        let module = b.values::<UInt32Type>(cs::MODULE_ID)?;
        for i in 0..b.num_rows() {
            let Some(&id) = samples.get(&(tid[i], ts[i])) else {
                continue;
            };
            let below = kernel_depth.get(&id).copied().unwrap_or(0);
            ins.execute(params![
                id,
                function[i],
                module[i],
                0,
                pc[i] as i64,
                below + depth[i]
            ])
            .map_err(|e| w.sql(e))?;
        }
    }
    Ok(())
}
