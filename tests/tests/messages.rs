//! What a recording tells the user on stderr: the start-up line, how many
//! functions it probed, and warnings only about what the user asked for.
use asys_tests::*;

/// A Python program that uses no runtime: the default `-t hggc` finds
/// nothing to probe in it.
const SPIN: &str = "import time\nend = time.time() + 0.3\nwhile time.time() < end: pass\n";

#[test]
fn python_sampling_with_the_default_items_warns_about_nothing_it_was_not_asked() {
    require_root();
    let s = Scratch::new("msg-default");
    let python = pyenv().join("bin/python3");
    let report = s.path("r");
    let o = run(&[
        "profile",
        "--python-sampling",
        "true",
        "-o",
        report.to_str().unwrap(),
        python.to_str().unwrap(),
        "-c",
        SPIN,
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(err.starts_with("asys: tracing hggc (pid "), "{err}");
    // Nothing was probed: no probe line either.
    assert!(!err.contains("asys: probed"), "{err}");
    // The report still says the default item found nothing.
    let meta = metadata(&report.with_extension("asysrep"));
    assert_eq!(meta["items_not_found"], serde_json::json!(["hggc"]));

    // Named, it is warned about.
    let o = run(&[
        "profile",
        "-t",
        "hggc",
        "--python-sampling",
        "true",
        "-f",
        "true",
        "-o",
        report.to_str().unwrap(),
        python.to_str().unwrap(),
        "-c",
        SPIN,
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(
            "asys: warning: no traced process loaded a library with hggc functions; \
             nothing was recorded for -t hggc"
        ),
        "{err}"
    );
}

#[test]
fn trace_none_says_what_is_recorded_instead() {
    require_root();
    let s = Scratch::new("msg-none");
    let report = s.path("r");
    let first_line = |extra: &[&str]| {
        let mut args = vec!["profile", "-t", "none", "-f", "true", "-o"];
        args.push(report.to_str().unwrap());
        args.extend_from_slice(extra);
        args.push("/bin/true");
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let err = stderr(&o);
        let line = err.lines().next().unwrap().to_string();
        let pid = metadata(&report.with_extension("asysrep"))["root_pids"][0]
            .as_u64()
            .unwrap();
        (line, pid, err)
    };
    let (line, pid, err) = first_line(&["-s", "none", "--cpuctxsw", "none"]);
    assert_eq!(line, format!("asys: tracing nothing (pid {pid})"));
    assert!(!err.contains("warning"), "{err}");
    let (line, pid, _) = first_line(&["--cpuctxsw", "none"]);
    assert_eq!(
        line,
        format!("asys: tracing no API calls; recording CPU samples (pid {pid})")
    );
    let (line, pid, _) = first_line(&["--python-sampling", "true"]);
    assert_eq!(
        line,
        format!(
            "asys: tracing no API calls; recording CPU samples, Python stacks, \
             context switches (pid {pid})"
        )
    );
}

/// The "probed N functions: LIB n, ..." line against the report's own list
/// of probed libraries (its `libraries` metadata), by file name.
fn assert_probe_line(line: &str, libraries: &serde_json::Value) {
    let libs = libraries.as_object().unwrap();
    assert!(!libs.is_empty());
    let total: u64 = libs.values().map(|n| n.as_u64().unwrap()).sum();
    let mut each: Vec<(String, u64)> = libs
        .iter()
        .map(|(path, n)| {
            let name = std::path::Path::new(path).file_name().unwrap();
            (name.to_string_lossy().into_owned(), n.as_u64().unwrap())
        })
        .collect();
    each.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let each: Vec<String> = each.iter().map(|(l, n)| format!("{l} {n}")).collect();
    assert_eq!(
        line,
        format!("asys: probed {total} functions: {}", each.join(", "))
    );
}

#[test]
fn asys_says_how_many_functions_it_probed_in_each_library() {
    require_root();
    let s = Scratch::new("msg-probed");
    // A launch: its libraries load once it runs, so the line comes at the end.
    let report = s.path("p");
    let o = run(&[
        "profile",
        "-t",
        "hggc,hgtx",
        "-o",
        report.to_str().unwrap(),
        workload("hgtx_ranges").to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("asys: probed "))
        .unwrap_or_else(|| panic!("no probe line: {err}"));
    assert!(
        lines[at - 1].starts_with("asys: collected "),
        "the probe line follows the summary: {err}"
    );
    let meta = metadata(&report.with_extension("asysrep"));
    assert_probe_line(lines[at], &meta["libraries"]);
    assert!(lines[at].contains("libhggcrt.so") && lines[at].contains("libhgtx.so"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("asys: probed"))
            .count(),
        1
    );

    // An attach: its processes' libraries are probed before the window
    // opens, so the line comes right after the tracing line, and only once.
    let truth = s.path("truth.jsonl");
    let mut t = AttachTarget::start(&truth);
    let report = s.path("a");
    let (g, err, line) = start_tracing(
        asys()
            .args(["attach", "-t", "hggc", "-o", report.to_str().unwrap()])
            .arg(t.pid.to_string()),
    );
    assert_eq!(line, format!("asys: tracing hggc (pid {})", t.pid));
    assert_eq!(t.burst(2), expected_checksum(2));
    signal(g.0.as_ref().unwrap().id() as i32, libc::SIGINT);
    assert!(g.wait().success());
    let rest: Vec<String> = std::io::BufRead::lines(err).map(|l| l.unwrap()).collect();
    let meta = metadata(&report.with_extension("asysrep"));
    assert_probe_line(&rest[0], &meta["libraries"]);
    assert_eq!(
        rest.iter()
            .filter(|l| l.starts_with("asys: probed"))
            .count(),
        1,
        "{rest:?}"
    );
    let (status, _) = t.quit();
    assert!(status.success());
}

#[test]
fn a_larger_event_buffer_is_advised_when_the_buffer_was_full() {
    require_root();
    let s = Scratch::new("msg-full");
    let report = s.path("r");
    // A one-page event buffer against eight threads issuing calls at once.
    let o = run(&[
        "profile",
        "--event-buffer-size",
        "4",
        "-o",
        report.to_str().unwrap(),
        workload("multi_stream").to_str().unwrap(),
        "8",
        "400",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("asys: warning: events were lost ("))
        .unwrap_or_else(|| panic!("{err}"));
    // Which source found the ring full is the machine's timing (a CI run
    // lost context switches, not calls): the line names each loss the
    // report stores, and advises the buffer because some were of the ring.
    let meta = metadata(&report.with_extension("asysrep"));
    let lost: Vec<String> = meta["drops"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64() > Some(0))
        .map(|(source, n)| format!("{source}={n}"))
        .collect();
    assert!(lost.iter().any(|l| l.contains("_ring_full=")), "{lost:?}");
    assert_eq!(
        line,
        format!(
            "asys: warning: events were lost ({}); try a larger --event-buffer-size",
            lost.join(", ")
        )
    );
}
