//! The encoding of `sched.prevState` (the state a thread left the CPU in),
//! the same whatever the recording kernel's own bits were (the collect
//! stage translates them: `kernel::task_state`).

/// One bit per state letter, as Linux 4.14 and later report them.
pub const CANONICAL: [(i64, char); 8] = [
    (0x1, 'S'),
    (0x2, 'D'),
    (0x4, 'T'),
    (0x8, 't'),
    (0x10, 'X'),
    (0x20, 'Z'),
    (0x40, 'P'),
    (0x80, 'I'),
];
/// Set with 0 (runnable) when the thread was preempted.
pub const PREEMPTED: i64 = 0x100;

/// The state's letters: `R` (runnable: preempted), `S` (sleeping), `D`
/// (uninterruptible), ...
pub fn letters(state: i64) -> String {
    let s: String = CANONICAL
        .iter()
        .filter(|(b, _)| state & b != 0)
        .map(|(_, l)| *l)
        .collect();
    if s.is_empty() { "R".into() } else { s }
}

/// What the report calls a wait in that state.
pub fn reason(letters: &str) -> &'static str {
    match letters {
        "R" => "preempted (runnable)",
        "S" => "sleeping",
        "D" => "uninterruptible (I/O, killable waits)",
        "I" => "idle (kernel thread)",
        "T" | "t" => "stopped",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_name_the_states() {
        assert_eq!(letters(0), "R");
        assert_eq!(letters(PREEMPTED), "R");
        assert_eq!(letters(1), "S");
        assert_eq!(letters(2), "D");
        assert_eq!(letters(0x80), "I");
        assert_eq!(reason(&letters(2)), "uninterruptible (I/O, killable waits)");
    }
}
