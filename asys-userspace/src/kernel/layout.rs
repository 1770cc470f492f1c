//! The running kernel's layout of the tracepoints the process and scheduler
//! programs read, from their format files, for the programs' `TP_LAYOUT`.
use std::path::Path;

use asys_common::{LAYOUT_ABSENT, TracepointLayout};

use super::tracepoint_format::{FormatError, TracepointFormat};

/// The layout from the events' formats (`sched_waking` where the kernel has
/// it). A field the programs need
/// and the kernel lacks is an error naming it, except `group_dead`, which
/// kernels before it was added lack (the programs then take the main
/// thread's exit as the process's).
pub fn from_formats(
    fork: &TracepointFormat,
    exit: &TracepointFormat,
    switch: &TracepointFormat,
    waking: Option<&TracepointFormat>,
) -> Result<TracepointLayout, FormatError> {
    let next_comm = switch.require("next_comm")?;
    if !next_comm.data_loc() && next_comm.size != 16 {
        return Err(FormatError::FieldSize {
            tracepoint: switch.tracepoint.clone(),
            field: "next_comm".into(),
            size: next_comm.size,
            expected: "16 inline or a __data_loc string".into(),
        });
    }
    if next_comm.location == super::tracepoint_format::Location::RelLoc {
        return Err(FormatError::FieldSize {
            tracepoint: switch.tracepoint.clone(),
            field: "next_comm (__rel_loc)".into(),
            size: next_comm.size,
            expected: "16 inline or a __data_loc string".into(),
        });
    }
    Ok(TracepointLayout {
        fork_child_pid: fork.require_sized("child_pid", 4)?.offset,
        exit_group_dead: match exit.field("group_dead") {
            Some(_) => exit.require_sized("group_dead", 1)?.offset,
            None => LAYOUT_ABSENT,
        },
        switch_prev_state: switch.require_sized("prev_state", 8)?.offset,
        switch_next_comm: next_comm.offset,
        switch_next_comm_data_loc: next_comm.data_loc() as u32,
        switch_next_pid: switch.require_sized("next_pid", 4)?.offset,
        task_signal: LAYOUT_ABSENT,
        signal_live: LAYOUT_ABSENT,
        waking_pid: match waking {
            Some(w) => w.require_sized("pid", 4)?.offset,
            None => LAYOUT_ABSENT,
        },
        waking_target_cpu: match waking {
            Some(w) => w.require_sized("target_cpu", 4)?.offset,
            None => LAYOUT_ABSENT,
        },
    })
}

/// Reads the layout under the tracefs at `root`.
pub fn read_under(root: &Path) -> Result<TracepointLayout, FormatError> {
    let read = |event| TracepointFormat::read_under(root, "sched", event);
    from_formats(
        &read("sched_process_fork")?,
        &read("sched_process_exit")?,
        &read("sched_switch")?,
        // Kernels before 4.3 lack it: wake-ups are then not recorded.
        read("sched_waking").ok().as_ref(),
    )
}

/// Where the exit program finds `current->signal->live` (for kernels without
/// `group_dead`), from the kernel's BTF.
pub fn with_signal_live(
    layout: TracepointLayout,
    btf: &super::btf::Btf,
) -> Result<TracepointLayout, super::btf::BtfError> {
    Ok(TracepointLayout {
        exit_group_dead: LAYOUT_ABSENT,
        task_signal: btf.member_offset("task_struct", "signal")?,
        signal_live: btf.member_offset("signal_struct", "live")?,
        ..layout
    })
}
