//! Context switches the kernel did not deliver, found by their sequence.
//!
//! Each thread of the traced tree alternates: switched in, switched out,
//! in, out. The kernel can skip the tracepoint program for a switch without
//! counting it anywhere (seen on 6.18 on a loaded 2-CPU machine: a switch
//! out of another user's thread, and the traced thread it switched to, went
//! unrecorded while the program's run and miss counts did not move). Such a
//! switch shows as a traced thread leaving a CPU twice with no arrival
//! between, or arriving twice. A thread's events reach the ring in order: its
//! switch-in on any CPU is reserved after its switch-out has been (the
//! scheduler does not run a thread still on another CPU).
//!
//! A missed switch between two traced threads breaks both sequences, so the
//! count is of sequences broken, each at least one switch the kernel did not
//! deliver.
use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct SwitchSequence {
    /// Per traced thread: its process, and whether its last recorded switch
    /// took it onto a CPU (true) or off one (false).
    on_cpu: HashMap<u32, (u32, bool), foldhash::fast::RandomState>,
    broken: u64,
}

impl SwitchSequence {
    /// One recorded switch from `prev` (of process `pid`, traced where
    /// `prev_traced`) to `next`.
    pub fn switch(&mut self, prev: u32, pid: u32, prev_traced: bool, next: u32) {
        // The idle task (tid 0) is one per CPU, under one id.
        if prev != 0 && prev_traced && self.on_cpu.insert(prev, (pid, false)) == Some((pid, false))
        {
            self.broken += 1;
        }
        // A thread is followed from its first switch out of a traced
        // process: before that, its arrivals may not be recorded (a process
        // seen before it is known to be traced).
        if next != 0
            && let Some((_, on)) = self.on_cpu.get_mut(&next)
        {
            if *on {
                self.broken += 1;
            }
            *on = true;
        }
    }

    /// Process `pid` exited: the kernel stops recording its threads'
    /// departures at the group's exit (they leave the traced set), while a
    /// last thread may still arrive and leave, so its threads are no longer
    /// followed.
    pub fn forget_process(&mut self, pid: u32) {
        self.on_cpu.retain(|_, &mut (p, _)| p != pid);
    }

    /// Recording stopped or restarted (a capture range, `--delay`, a
    /// session's start): switches in between were not recorded, so the
    /// sequences start again.
    pub fn restart(&mut self) {
        self.on_cpu.clear();
    }

    /// Sequences broken since the last report, and a new start for the next.
    pub fn end_report(&mut self) -> u64 {
        self.restart();
        std::mem::take(&mut self.broken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternating_switches_break_nothing() {
        let mut s = SwitchSequence::default();
        s.switch(10, 1, true, 0);
        s.switch(0, 1, false, 10);
        s.switch(10, 1, true, 11);
        s.switch(11, 1, true, 10);
        s.switch(10, 1, true, 0);
        assert_eq!(s.end_report(), 0);
    }

    #[test]
    fn a_missing_arrival_or_departure_breaks_one_sequence_each() {
        let mut s = SwitchSequence::default();
        s.switch(10, 1, true, 0);
        // 10 comes back on a CPU unseen, then leaves again.
        s.switch(10, 1, true, 0);
        assert_eq!(s.end_report(), 1);
        s.switch(10, 1, true, 0);
        s.switch(0, 1, false, 10);
        // 10 leaves unseen, and arrives again.
        s.switch(0, 1, false, 10);
        assert_eq!(s.end_report(), 1);
    }

    #[test]
    fn untraced_and_idle_threads_and_restarts_are_not_counted() {
        let mut s = SwitchSequence::default();
        // An untraced thread's departures are recorded only towards traced
        // threads: its sequence is not followed.
        s.switch(20, 1, false, 0);
        s.switch(20, 1, false, 0);
        // The idle task arrives on every CPU.
        s.switch(10, 1, true, 0);
        s.switch(11, 1, true, 0);
        // A thread first seen arriving is not followed until it leaves.
        s.switch(0, 1, false, 12);
        s.switch(0, 1, false, 12);
        assert_eq!(s.end_report(), 0);
        s.switch(10, 1, true, 0);
        s.restart();
        s.switch(10, 1, true, 0);
        assert_eq!(s.end_report(), 0);
    }

    #[test]
    fn threads_of_an_exited_process_are_no_longer_followed() {
        let mut s = SwitchSequence::default();
        s.switch(0, 2, false, 10);
        s.switch(10, 2, true, 0);
        s.switch(0, 2, false, 10);
        // The process exits; its last thread leaves unrecorded (no longer
        // traced) and arrives again.
        s.forget_process(2);
        s.switch(10, 2, false, 0);
        s.switch(0, 2, false, 10);
        assert_eq!(s.end_report(), 0);
    }
}
