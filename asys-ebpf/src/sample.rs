//! CPU sampling (`-s`): a perf event on each CPU's clock fires every
//! `--sample-period` ns of CPU time; the thread it interrupts is sampled if it
//! is in scope (the traced tree, or any with `-s system-wide`), with its user
//! registers and, with `-b fp|dwarf`, a copy of its user stack that userspace
//! unwinds in the symbolize stage.
use asys_common::{
    CpuSampleEvent, CpuSampleStackEvent, DropSource, EventKind, SCHED_NONE, SCHED_SYSTEM_WIDE,
};
use aya_ebpf::{
    EbpfContext,
    bindings::pt_regs,
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_kernel,
        generated::{bpf_get_current_task_btf, bpf_task_pt_regs},
    },
    macros::perf_event,
    programs::PerfEventContext,
};

use crate::maps::{
    EVENTS, batched_wakeup, copy_user_stack, count_drop, in_cgroup, is_traced, settings, state,
};

#[perf_event]
pub fn cpu_sample(ctx: PerfEventContext) -> u32 {
    if let Err(source) = try_cpu_sample(&ctx, false) {
        count_drop(source);
    }
    0
}

/// `cpu_sample` with the Python stacks of the samples
/// (`--python-sampling`), loaded in its place when they are asked for. A
/// program of its own: where a kernel's verifier refuses it (Linux 6.1's
/// passes its million instructions on it), userspace loads the plain one
/// and says so.
#[perf_event]
pub fn cpu_sample_python(ctx: PerfEventContext) -> u32 {
    if let Err(source) = try_cpu_sample(&ctx, true) {
        count_drop(source);
    }
    0
}

#[inline(always)]
fn try_cpu_sample(ctx: &PerfEventContext, python: bool) -> Result<(), DropSource> {
    let settings = settings().ok_or(DropSource::ConfigUnreadable)?;
    let state = state().ok_or(DropSource::ConfigUnreadable)?;
    let mode = settings.sample;
    if mode == SCHED_NONE || state.recording == 0 {
        return Ok(());
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // The idle task, asys itself, and threads outside the scope.
    if tgid == 0
        || u64::from(tgid) == settings.self_pid
        || (mode != SCHED_SYSTEM_WIDE && !is_traced(settings, tgid))
        // System-wide restricted to a cgroup: only its threads.
        || (mode == SCHED_SYSTEM_WIDE && !in_cgroup(settings))
    {
        return Ok(());
    }
    // The interrupted registers are the user's when the CPU was in user mode;
    // in the kernel, the user's are those saved where the thread entered it.
    // SAFETY: a perf event program's context is the event's sample data,
    // which holds the interrupted registers.
    let interrupted = unsafe { &(*ctx.ctx).regs };
    let kernel = interrupted.cs & 3 != 3;
    let (ip, sp, bp) = if kernel {
        // SAFETY: the current task is valid while its program runs; the
        // helper returns the address of its saved user registers.
        let regs = unsafe { bpf_task_pt_regs(bpf_get_current_task_btf()) } as *const pt_regs;
        // SAFETY: fails instead of faulting.
        let user =
            unsafe { bpf_probe_read_kernel(regs) }.map_err(|_| DropSource::SampleRegsUnreadable)?;
        (user.rip, user.rsp, user.rbp)
    } else {
        (interrupted.rip, interrupted.rsp, interrupted.rbp)
    };
    let header = crate::maps::header(EventKind::CpuSample, pid_tgid);
    // With stacks (`-b fp|dwarf`), samples in the kernel get its stack too,
    // sent first (the sample's own event comes after, whichever kind it is).
    if kernel && settings.sample_stack != 0 {
        crate::kernel_stack::send(
            ctx.as_ptr(),
            settings,
            pid_tgid,
            header.ts,
            asys_common::KSTACK_SAMPLE,
            DropSource::SampleRingFull,
        )?;
    }
    let sample = CpuSampleEvent {
        header,
        kernel: kernel as u32,
        _pad: 0,
        ip,
        sp,
        bp,
    };
    if settings.sample_stack == 0 {
        let mut slot = EVENTS
            .reserve::<CpuSampleEvent>(0)
            .ok_or(DropSource::SampleRingFull)?;
        slot.write(sample);
        slot.submit(batched_wakeup(settings));
        return python_stack(python, settings, pid_tgid, header.ts);
    }
    let mut slot = EVENTS
        .reserve::<CpuSampleStackEvent>(0)
        .ok_or(DropSource::SampleRingFull)?;
    // SAFETY: the reserved record is ours until submitted; filled in place
    // (the event is far larger than the BPF stack).
    let ev = unsafe { &mut *slot.as_mut_ptr() };
    ev.sample = sample;
    ev.sample.header.kind = EventKind::CpuSampleStack as u32;
    ev.len = copy_user_stack(sp, &mut ev.stack);
    slot.submit(batched_wakeup(settings));
    // The Python frames come after their sample (`--python-sampling`).
    python_stack(python, settings, pid_tgid, header.ts)
}

/// The sample's Python stack, where the loader put the walk in.
#[inline(always)]
fn python_stack(
    python: bool,
    settings: &asys_common::Settings,
    pid_tgid: u64,
    ts: u64,
) -> Result<(), DropSource> {
    if !python || crate::layout::python_walks() & asys_common::PYTHON_WALK_SAMPLES == 0 {
        return Ok(());
    }
    crate::python::send(settings, pid_tgid, ts, EventKind::PythonStack)
}
