//! The parser on the format text of the kernels GPU hosts run.
//!
//! `linux-6.18/` holds this machine's own files (Linux 6.18.44,
//! `/sys/kernel/tracing/events/{sched,raw_syscalls}/*/format`, copied byte
//! for byte). The others follow mechanically from each kernel's
//! `TP_STRUCT__entry` in `include/trace/events/sched.h` and
//! `include/trace/events/syscalls.h`: the common fields of `struct
//! trace_entry` (`include/linux/trace_events.h`: type u16 at 0, flags u8 at 2,
//! preempt_count u8 at 3, pid int at 4, unchanged from 5.15 to 6.18), then
//! each field in order at its natural alignment, `__array(char, X,
//! TASK_COMM_LEN)` as `char X[16]`, `__string` as `__data_loc char[] X` of 4
//! bytes. Sources read: 6.1.55's sched.h (sched_switch, sched_process_fork
//! with `parent_comm`/`child_comm` as `__array`, sched_process_exit as a
//! `sched_process_template` event with comm, pid and prio only); the same
//! entries hold in 5.15 (sched_switch's TP_PROTO differs, its entry does not)
//! and 6.8 (the move of comms to `__string` came in 6.10). `group_dead` was
//! added to sched_process_exit later (the patch turning it from a
//! `DEFINE_EVENT(sched_process_template, ...)` into its own `TRACE_EVENT`),
//! so 5.15, 6.1 and 6.8 lack it. The IDs and the older `print fmt` lines
//! depend on the configuration and are examples; the parser reads neither
//! for layouts.
use super::*;
use asys_common::{LAYOUT_ABSENT, TracepointLayout};

const KERNELS: [&str; 4] = ["5.15", "6.1", "6.8", "6.18"];

pub(crate) fn text(kernel: &str, event: &str) -> &'static str {
    macro_rules! files {
        ($($k:literal),*) => {
            match (kernel, event) {
                $(
                    ($k, "sched_process_fork") => include_str!(concat!("linux-", $k, "/sched_process_fork.format")),
                    ($k, "sched_process_exit") => include_str!(concat!("linux-", $k, "/sched_process_exit.format")),
                    ($k, "sched_process_exec") => include_str!(concat!("linux-", $k, "/sched_process_exec.format")),
                    ($k, "sched_switch") => include_str!(concat!("linux-", $k, "/sched_switch.format")),
                    ($k, "sched_waking") => include_str!(concat!("linux-", $k, "/sched_waking.format")),
                    ($k, "sys_enter") => include_str!(concat!("linux-", $k, "/sys_enter.format")),
                    ($k, "sys_exit") => include_str!(concat!("linux-", $k, "/sys_exit.format")),
                )*
                _ => panic!("no text for {kernel} {event}"),
            }
        };
    }
    files!("5.15", "6.1", "6.8", "6.18")
}

fn format(kernel: &str, event: &str) -> TracepointFormat {
    let system = if event.starts_with("sys_") {
        "raw_syscalls"
    } else {
        "sched"
    };
    TracepointFormat::parse(system, event, text(kernel, event)).unwrap()
}

fn at(f: &TracepointFormat, name: &str) -> (u32, u32, bool) {
    let field = f.require(name).unwrap();
    (field.offset, field.size, field.data_loc())
}

#[test]
fn common_fields_are_the_same_on_every_kernel() {
    for k in KERNELS {
        let f = format(k, "sched_switch");
        assert_eq!(at(&f, "common_type"), (0, 2, false), "{k}");
        assert_eq!(at(&f, "common_flags"), (2, 1, false), "{k}");
        assert_eq!(at(&f, "common_preempt_count"), (3, 1, false), "{k}");
        assert_eq!(at(&f, "common_pid"), (4, 4, false), "{k}");
        assert!(f.field("common_pid").unwrap().signed);
    }
}

#[test]
fn fork_child_pid_moved_when_the_comms_became_strings() {
    for k in ["5.15", "6.1", "6.8"] {
        let f = format(k, "sched_process_fork");
        assert_eq!(at(&f, "parent_comm"), (8, 16, false), "{k}");
        assert_eq!(f.field("parent_comm").unwrap().c_type, "char[16]");
        assert_eq!(at(&f, "child_pid"), (44, 4, false), "{k}");
    }
    let f = format("6.18", "sched_process_fork");
    assert_eq!(at(&f, "parent_comm"), (8, 4, true));
    assert_eq!(f.field("parent_comm").unwrap().c_type, "char[]");
    assert_eq!(f.field("parent_comm").unwrap().location, Location::DataLoc);
    assert_eq!(at(&f, "child_comm"), (16, 4, true));
    assert_eq!(at(&f, "child_pid"), (20, 4, false));
    assert_eq!(f.field("child_pid").unwrap().c_type, "pid_t");
}

#[test]
fn exit_has_group_dead_only_on_recent_kernels() {
    for k in ["5.15", "6.1", "6.8"] {
        let f = format(k, "sched_process_exit");
        assert_eq!(at(&f, "pid"), (24, 4, false), "{k}");
        assert!(f.field("group_dead").is_none(), "{k}");
        let e = f.require("group_dead").unwrap_err().to_string();
        assert_eq!(
            e,
            "tracepoint sched/sched_process_exit has no field group_dead on this kernel"
        );
    }
    let f = format("6.18", "sched_process_exit");
    assert_eq!(at(&f, "group_dead"), (32, 1, false));
    assert_eq!(f.field("group_dead").unwrap().c_type, "bool");
}

#[test]
fn switch_fields_where_the_programs_read_them() {
    for k in KERNELS {
        let f = format(k, "sched_switch");
        assert_eq!(at(&f, "prev_state"), (32, 8, false), "{k}");
        assert_eq!(at(&f, "next_comm"), (40, 16, false), "{k}");
        assert_eq!(at(&f, "next_pid"), (56, 4, false), "{k}");
        assert_eq!(at(&f, "next_prio"), (60, 4, false), "{k}");
    }
}

#[test]
fn waking_fields_where_the_wakeup_program_reads_them() {
    for k in KERNELS {
        let f = format(k, "sched_waking");
        assert_eq!(at(&f, "pid"), (24, 4, false), "{k}");
        assert_eq!(at(&f, "target_cpu"), (32, 4, false), "{k}");
        assert_eq!(at(&f, "comm"), (8, 16, false), "{k}");
    }
    // Without the tracepoint (before 4.3) wake-ups are not recorded.
    let l = super::super::layout::from_formats(
        &format("6.18", "sched_process_fork"),
        &format("6.18", "sched_process_exit"),
        &format("6.18", "sched_switch"),
        None,
    )
    .unwrap();
    assert_eq!(l.waking_pid, LAYOUT_ABSENT);
}

#[test]
fn exec_filename_is_a_data_loc_string_everywhere() {
    for k in KERNELS {
        let f = format(k, "sched_process_exec");
        assert_eq!(at(&f, "filename"), (8, 4, true), "{k}");
        assert_eq!(at(&f, "old_pid"), (16, 4, false), "{k}");
    }
}

#[test]
fn raw_syscalls_for_the_osrt_programs() {
    for k in KERNELS {
        let f = format(k, "sys_enter");
        assert_eq!(at(&f, "id"), (8, 8, false), "{k}");
        assert!(f.field("id").unwrap().signed);
        assert_eq!(at(&f, "args"), (16, 48, false), "{k}");
        assert_eq!(f.field("args").unwrap().c_type, "unsigned long[6]");
        let f = format(k, "sys_exit");
        assert_eq!(at(&f, "id"), (8, 8, false), "{k}");
        assert_eq!(at(&f, "ret"), (16, 8, false), "{k}");
    }
}

/// The layout the checked-in formats of `kernel` give.
fn checked_in_layout(kernel: &str) -> TracepointLayout {
    super::super::layout::from_formats(
        &format(kernel, "sched_process_fork"),
        &format(kernel, "sched_process_exit"),
        &format(kernel, "sched_switch"),
        Some(&format(kernel, "sched_waking")),
    )
    .unwrap()
}

#[test]
fn the_layout_handed_to_the_programs() {
    let layout = checked_in_layout;
    for k in ["5.15", "6.1", "6.8"] {
        assert_eq!(
            layout(k),
            TracepointLayout {
                fork_child_pid: 44,
                exit_group_dead: LAYOUT_ABSENT,
                ..TracepointLayout::LINUX_6_18
            },
            "{k}"
        );
    }
    // What the programs are built with is 6.18's real layout.
    assert_eq!(layout("6.18"), TracepointLayout::LINUX_6_18);
}

#[test]
fn a_field_of_another_size_or_a_string_is_refused_by_name() {
    let f = format("6.18", "sched_process_fork");
    let e = f.require_sized("child_comm", 16).unwrap_err().to_string();
    assert_eq!(
        e,
        "tracepoint sched/sched_process_fork: field child_comm is 4 bytes on this kernel, asys reads 16 inline"
    );
    assert!(f.require_sized("child_pid", 4).is_ok());
}

#[test]
fn damaged_lines_are_errors_not_guesses() {
    for bad in [
        "\tfield:pid_t child_pid;\toffset:x;\tsize:4;\tsigned:1;",
        "\tfield:pid_t child_pid;\tsize:4;\tsigned:1;",
        "\tfield:;\toffset:4;\tsize:4;\tsigned:1;",
        "\tfield:pid_t;\toffset:4;\tsize:4;\tsigned:1;",
    ] {
        let e = TracepointFormat::parse("sched", "x", bad).unwrap_err();
        assert!(matches!(e, FormatError::Parse { .. }), "{bad}: {e}");
    }
    let none = TracepointFormat::parse("sched", "x", "name: x\nID: 1\nformat:\n").unwrap();
    assert!(none.fields.is_empty());
}

/// The events whose formats are checked in, by tracing system.
const EVENTS: [(&str, &str); 7] = [
    ("sched", "sched_process_fork"),
    ("sched", "sched_process_exit"),
    ("sched", "sched_process_exec"),
    ("sched", "sched_switch"),
    ("sched", "sched_waking"),
    ("raw_syscalls", "sys_enter"),
    ("raw_syscalls", "sys_exit"),
];

/// On every kernel: the running kernel's own format files parse, hold the
/// fields where the programs read them and give a layout. Where this
/// kernel's release is one checked in, its files have the fields of the
/// checked-in copy (6.18's, copied from a live kernel: byte for byte).
#[test]
fn this_kernels_formats_parse_to_the_fields_the_programs_read() {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .expect("/proc/sys/kernel/osrelease (procfs is mounted on every Linux)");
    let version: String = {
        let mut parts = release.trim().split(['.', '-']);
        let (major, minor) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        format!("{major}.{minor}")
    };
    let live: Vec<TracepointFormat> = EVENTS
        .iter()
        .map(|(system, event)| {
            TracepointFormat::read(system, event).unwrap_or_else(|e| {
                panic!("{e}: this test reads the kernel's tracefs, as root, as asys does")
            })
        })
        .collect();
    let live_of = |event: &str| &live[EVENTS.iter().position(|(_, e)| *e == event).unwrap()];
    for f in &live {
        let t = &f.tracepoint;
        assert_eq!(at(f, "common_type"), (0, 2, false), "{t}");
        assert_eq!(at(f, "common_pid"), (4, 4, false), "{t}");
    }
    // The osrt programs read these at fixed offsets.
    assert_eq!(at(live_of("sys_enter"), "id"), (8, 8, false));
    assert_eq!(at(live_of("sys_enter"), "args"), (16, 48, false));
    assert_eq!(at(live_of("sys_exit"), "ret"), (16, 8, false));
    let layout = super::super::layout::from_formats(
        live_of("sched_process_fork"),
        live_of("sched_process_exit"),
        live_of("sched_switch"),
        Some(live_of("sched_waking")),
    )
    .unwrap_or_else(|e| panic!("Linux {}: {e}", release.trim()));
    match KERNELS.into_iter().find(|k| *k == version) {
        Some(kernel) => {
            for ((system, event), f) in EVENTS.iter().zip(&live) {
                assert_eq!(f.fields, format(kernel, event).fields, "{system}/{event}");
            }
            assert_eq!(layout, checked_in_layout(kernel));
            if kernel == "6.18" {
                for (system, event) in EVENTS {
                    let path = format!("{TRACEFS}/events/{system}/{event}/format");
                    let here = std::fs::read_to_string(&path).unwrap();
                    assert_eq!(here, text(kernel, event), "{path}");
                }
            }
        }
        None => eprintln!(
            "Linux {}: its formats parse to a layout ({layout:?}); no checked-in copy of \
             {version} to compare them with",
            release.trim()
        ),
    }
}

#[test]
fn a_field_the_programs_need_and_the_kernel_lacks_stops_the_load_by_name() {
    let switch = format("6.1", "sched_switch");
    let mut renamed = switch.clone();
    renamed.fields.retain(|f| f.name != "next_pid");
    let e = super::super::layout::from_formats(
        &format("6.1", "sched_process_fork"),
        &format("6.1", "sched_process_exit"),
        &renamed,
        None,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tracepoint sched/sched_switch has no field next_pid on this kernel"
    );
    // A __data_loc next_comm (as a kernel may make it) is followed.
    let mut data_loc = switch;
    let comm = data_loc
        .fields
        .iter_mut()
        .find(|f| f.name == "next_comm")
        .unwrap();
    comm.location = Location::DataLoc;
    comm.size = 4;
    let layout = super::super::layout::from_formats(
        &format("6.1", "sched_process_fork"),
        &format("6.1", "sched_process_exit"),
        &data_loc,
        None,
    )
    .unwrap();
    assert_eq!(layout.switch_next_comm_data_loc, 1);
}
