//! The state a thread left the CPU in (`sched_switch.prev_state`), made
//! independent of the kernel. Since 4.14 the tracepoint reports one bit per
//! state (1 S, 2 D, 4 T, ..., 0x80 I) and a "preempted" bit above them;
//! older kernels reported `task_struct.state` itself, whose bits differ
//! (and a kernel may add states). The running kernel says which bit is
//! which in the format file's print fmt (`__print_flags(..., { 0x00000001,
//! "S" }, { 0x00000002, "D" }, ...)`, and the `+` shown for the bit above
//! the mask): those letters are mapped onto the documented encoding.

use asys_report::report::task_state::{CANONICAL, PREEMPTED};

/// The running kernel's letters for its `prev_state` bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStates {
    /// (kernel's bit, letter), as the print fmt lists them.
    flags: Vec<(i64, char)>,
    /// The kernel's "preempted" bit (`+`), 0 if the print fmt has none.
    preempted: i64,
}

impl Default for TaskStates {
    /// The encoding of 4.14 and later, for a print fmt that cannot be read.
    fn default() -> Self {
        Self {
            flags: CANONICAL.to_vec(),
            preempted: PREEMPTED,
        }
    }
}

impl TaskStates {
    /// From sched_switch's print fmt; `None` if it lists no state flags.
    pub fn from_print_fmt(fmt: &str) -> Option<Self> {
        let at = fmt.find("__print_flags(")?;
        let mut rest = &fmt[at..];
        let mut flags = Vec::new();
        // Each `{ VALUE, "NAME" }` up to the `)` closing the call.
        while let Some(open) = rest.find('{') {
            let close = open + rest[open..].find('}')?;
            let (value, name) = rest[open + 1..close].split_once(',')?;
            let value = value.trim();
            let bits = match value.strip_prefix("0x") {
                Some(hex) => i64::from_str_radix(hex, 16).ok()?,
                None => value.parse().ok()?,
            };
            let mut letters = name.trim().trim_matches('"').chars();
            if let (Some(letter), None) = (letters.next(), letters.next()) {
                flags.push((bits, letter));
            }
            rest = &rest[close + 1..];
            if rest.trim_start().starts_with(')') {
                break;
            }
        }
        if flags.is_empty() {
            return None;
        }
        // The bit above the mask is shown as "+": the highest flag's bit,
        // shifted once more (TASK_REPORT_MAX; TASK_STATE_MAX before 4.14).
        let preempted = if fmt.contains("\"+\"") {
            flags.iter().map(|f| f.0).max().unwrap_or(0) << 1
        } else {
            0
        };
        Some(Self { flags, preempted })
    }

    /// `prev_state` as the kernel gave it, in the recorded encoding.
    pub fn normalize(&self, raw: i64) -> i64 {
        let mut out = 0;
        for &(bits, letter) in &self.flags {
            if raw & bits != 0
                && let Some(&(c, _)) = CANONICAL.iter().find(|(_, l)| *l == letter)
            {
                out |= c;
            }
        }
        if self.preempted != 0 && raw & self.preempted != 0 {
            out |= PREEMPTED;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux 4.14 to 6.18 (the text of 5.15, 6.1, 6.8 and 6.18 is this).
    const FMT_6: &str = r#""prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), "|", { 0x00000001, "S" }, { 0x00000002, "D" }, { 0x00000004, "T" }, { 0x00000008, "t" }, { 0x00000010, "X" }, { 0x00000020, "Z" }, { 0x00000040, "P" }, { 0x00000080, "I" }) : "R", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio"#;

    /// Linux 4.4 (`task_struct.state` bits: 64 is TASK_DEAD, 128 wakekill,
    /// 1024 TASK_STATE_MAX shown as "+"), from its include/trace/events/sched.h.
    const FMT_4_4: &str = r#""prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, REC->prev_state & (1024-1) ? __print_flags(REC->prev_state & (1024-1), "|", { 1, "S"} , { 2, "D" }, { 4, "T" }, { 8, "t" }, { 16, "Z" }, { 32, "X" }, { 64, "x" }, { 128, "K" }, { 256, "W" }, { 512, "P" }) : "R", REC->prev_state & 1024 ? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio"#;

    #[test]
    fn kernels_since_4_14_map_onto_themselves() {
        let s = TaskStates::from_print_fmt(FMT_6).unwrap();
        assert_eq!(s, TaskStates::default());
        for raw in [0, 1, 2, 0x80, 0x100, 0x1 | 0x100] {
            assert_eq!(s.normalize(raw), raw);
        }
    }

    #[test]
    fn the_files_of_each_kernel_parse() {
        for k in ["5.15", "6.1", "6.8", "6.18"] {
            let text = super::super::tracepoint_format::tests::text(k, "sched_switch");
            let f = super::super::tracepoint_format::TracepointFormat::parse(
                "sched",
                "sched_switch",
                text,
            )
            .unwrap();
            let s = TaskStates::from_print_fmt(f.print_fmt.as_deref().unwrap()).unwrap();
            assert_eq!(s.normalize(2), 2, "{k}");
            assert_eq!(s.normalize(0x100), PREEMPTED, "{k}");
        }
    }

    #[test]
    fn old_task_state_bits_are_renamed() {
        let s = TaskStates::from_print_fmt(FMT_4_4).unwrap();
        assert_eq!(s.preempted, 1024);
        // Z was 16 and X 32 before 4.14; the record says Z as 0x20.
        assert_eq!(s.normalize(16), 0x20);
        assert_eq!(s.normalize(32), 0x10);
        assert_eq!(s.normalize(1024), PREEMPTED);
        assert_eq!(s.normalize(2), 2);
        // Letters asys does not record (K, W, x) are dropped.
        assert_eq!(s.normalize(128 | 1), 1);
    }

    #[test]
    fn a_format_without_flags_is_none() {
        assert!(TaskStates::from_print_fmt("\"x=%d\", REC->x").is_none());
    }
}
