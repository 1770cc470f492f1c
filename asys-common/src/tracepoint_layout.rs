//! Where the tracepoint fields the process and scheduler programs read lie
//! on the running kernel, which userspace learns from tracefs.
/// Where the fields the process and scheduler programs read lie in their
/// tracepoints' records on the running kernel. Userspace reads the format
/// files in tracefs at load time and writes this into the programs'
/// read-only `TP_LAYOUT` global before they are verified (the layouts moved
/// between kernels: `child_pid` of `sched_process_fork` is at 44 on 6.1 and
/// at 20 on 6.18, where the comms became `__data_loc` strings).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracepointLayout {
    /// `sched_process_fork.child_pid` (pid_t).
    pub fork_child_pid: u32,
    /// `sched_process_exit.group_dead` (bool), or [`LAYOUT_ABSENT`] on
    /// kernels whose tracepoint lacks it: a process then ends with its main
    /// thread.
    pub exit_group_dead: u32,
    /// `sched_switch.prev_state` (long).
    pub switch_prev_state: u32,
    /// `sched_switch.next_comm`: `char[16]` inline, or a `__data_loc` word
    /// (offset in the low 16 bits, length in the high 16) when
    /// `switch_next_comm_data_loc` is 1.
    pub switch_next_comm: u32,
    pub switch_next_comm_data_loc: u32,
    /// `sched_switch.next_pid` (pid_t).
    pub switch_next_pid: u32,
    /// Where `exit_group_dead` is absent and the kernel has BTF: the byte
    /// offsets of `task_struct.signal` and `signal_struct.live` (the count
    /// of live threads, 0 once the last one is exiting, which is what
    /// `group_dead` says); [`LAYOUT_ABSENT`] otherwise.
    pub task_signal: u32,
    pub signal_live: u32,
    /// `sched_waking.pid` (pid_t): the thread woken.
    pub waking_pid: u32,
    /// `sched_waking.target_cpu` (int).
    pub waking_target_cpu: u32,
}

// Userspace writes it whole into the programs' `TP_LAYOUT` global
// (kernel/mod.rs), which must be as large on both sides.
const _: () = assert!(size_of::<TracepointLayout>() == 40);

/// A field the running kernel's tracepoint does not have.
pub const LAYOUT_ABSENT: u32 = u32::MAX;

impl TracepointLayout {
    /// Linux 6.18's layout: what the programs hold until userspace writes
    /// the running kernel's.
    pub const LINUX_6_18: Self = Self {
        fork_child_pid: 20,
        exit_group_dead: 32,
        switch_prev_state: 32,
        switch_next_comm: 40,
        switch_next_comm_data_loc: 0,
        switch_next_pid: 56,
        task_signal: LAYOUT_ABSENT,
        signal_live: LAYOUT_ABSENT,
        waking_pid: 24,
        waking_target_cpu: 32,
    };
}
