//! What a recording says on stderr: what is traced and where, what was
//! probed, and the reports a series wrote.
use std::path::PathBuf;

use asys_report::{recorded_settings::Scope, report::metadata::Metadata};

use crate::{kernel::Tracer, settings::RecordSettings, sink::folder};

use super::reach::Reached;

/// Names the recordings beside `output` that did not finish.
pub(super) fn warn_of_unfinished(output: &std::path::Path) {
    for dir in folder::left_behind(output) {
        eprintln!(
            "asys: {} holds a recording that did not finish: `asys recover {}` makes a report of it",
            dir.display(),
            dir.display()
        );
    }
}

/// The start-up line: what is traced, and where.
pub(super) fn announce_targets(settings: &RecordSettings, reached: &Reached) {
    if reached.root_pids.is_empty() {
        eprintln!(
            "asys: tracing {} system-wide{}",
            recorded_what(settings),
            match &settings.cgroup {
                Some(f) => match &f.container {
                    Some(id) => format!(" in container {id} (cgroup {})", f.path),
                    None => format!(" in cgroup {}", f.path),
                },
                None => String::new(),
            }
        );
    } else {
        eprintln!(
            "asys: tracing {} (pid {}{})",
            recorded_what(settings),
            reached
                .root_pids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            match reached.descendants.len() {
                0 => String::new(),
                1 => " and 1 descendant".to_string(),
                n => format!(" and {n} descendants"),
            }
        );
    }
}

/// What was probed in the processes reached so far, said on a start-up
/// line (a launched application has loaded nothing yet: its line comes at
/// the end).
pub(super) fn announce_probed(
    tracer: &Tracer,
    reached_late: bool,
) -> std::collections::BTreeMap<String, usize> {
    let probed = if reached_late {
        tracer.probes.probed_libraries()
    } else {
        Default::default()
    };
    if let Some(line) = probe_summary(&probed, false) {
        eprintln!("asys: {line}");
    }
    probed
}

/// The reports a series wrote before its last.
pub(super) fn announce_generated(written: &[(PathBuf, Metadata)]) {
    for (path, _) in written {
        eprintln!(
            "Generated:\n    {}",
            crate::sink::report_path::absolute(path).display()
        );
    }
}

/// What the start-up line says is recorded: the trace items, or with `-t
/// none` what else is ("nothing" when nothing is).
pub(super) fn recorded_what(settings: &RecordSettings) -> String {
    if !settings.items.is_empty() {
        return settings
            .items
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
            .join(",");
    }
    let metrics = &settings.metrics;
    let others: Vec<&str> = [
        (settings.sampling.scope != Scope::None, "CPU samples"),
        (
            settings.sampling.scope != Scope::None && settings.sampling.python_hz.is_some(),
            "Python stacks",
        ),
        (settings.sched != Scope::None, "context switches"),
        (metrics.host_memory_hz.is_some(), "host memory"),
        (metrics.nic, "NIC counters"),
        (
            !matches!(metrics.ppu, crate::settings::PpuDevices::None),
            "PPU metrics",
        ),
    ]
    .into_iter()
    .filter_map(|(on, what)| on.then_some(what))
    .collect();
    if others.is_empty() {
        "nothing".to_string()
    } else {
        format!("no API calls; recording {}", others.join(", "))
    }
}

/// "probed 1,717 functions: libcublas.so.13 1,405, libcudart.so.13 312":
/// the functions probed in all, then per library (by file name, most
/// first); None when there are none. `later`: these came after the start-up
/// line ("probed 5 more functions, in libraries loaded later: ...").
pub fn probe_summary(
    libraries: &std::collections::BTreeMap<String, usize>,
    later: bool,
) -> Option<String> {
    let mut by_name: std::collections::BTreeMap<String, usize> = Default::default();
    for (path, &n) in libraries.iter().filter(|(_, n)| **n > 0) {
        let name = std::path::Path::new(path)
            .file_name()
            .map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
        *by_name.entry(name).or_default() += n;
    }
    let total: usize = by_name.values().sum();
    if total == 0 {
        return None;
    }
    let mut each: Vec<(String, usize)> = by_name.into_iter().collect();
    each.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let each: Vec<String> = each
        .iter()
        .map(|(name, n)| {
            format!(
                "{} {}",
                asys_report::text_safety::visible(name),
                grouped_thousands(*n)
            )
        })
        .collect();
    Some(format!(
        "probed {}{} function{}{}: {}",
        grouped_thousands(total),
        if later { " more" } else { "" },
        if total == 1 { "" } else { "s" },
        if later {
            ", in libraries loaded later"
        } else {
            ""
        },
        each.join(", ")
    ))
}

/// The functions probed in `now` that were not yet in `before`, per library.
pub fn probed_since(
    before: &std::collections::BTreeMap<String, usize>,
    now: &std::collections::BTreeMap<String, usize>,
) -> std::collections::BTreeMap<String, usize> {
    now.iter()
        .filter_map(|(lib, &n)| {
            let had = before.get(lib).copied().unwrap_or(0);
            (n > had).then(|| (lib.clone(), n - had))
        })
        .collect()
}

/// `n` with a comma every three digits (1,717).
pub(super) fn grouped_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
