//! Names the symbolize stage resolved (`symbols`): the kernels' names by
//! process and address.
use std::collections::HashMap;

use crate::report::{
    ReportError, container::Container, schema::symbols as sy, strings::StringTable,
};

/// (pid, kernel address) → name id, from the symbols table.
pub fn kernel_name_ids(report: &Container) -> Result<HashMap<(u32, u64), u32>, ReportError> {
    let mut out = HashMap::new();
    for b in sy::scan(report, &[sy::PID, sy::ADDR, sy::NAME_ID])? {
        let b = b?;
        let v = sy::View(&b);
        let (pid, addr, name) = (v.pid()?, v.addr()?, v.name_id()?);
        for i in 0..b.num_rows() {
            out.insert((pid[i], addr[i]), name[i]);
        }
    }
    Ok(out)
}

/// Kernel names by (pid, address), as text.
pub fn kernel_names(
    report: &Container,
    strings: &StringTable,
) -> Result<HashMap<(u32, u64), String>, ReportError> {
    Ok(kernel_name_ids(report)?
        .into_iter()
        .filter_map(|(k, id)| strings.get(id).map(|n| (k, n.to_string())))
        .collect())
}
