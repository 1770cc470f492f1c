//! `-c hgtx -p TEMPLATE`: the hgtx range named by the template opens and
//! closes collection, gated in the kernel; with every `--capture-range-end`.
//! Which calls fall inside each range comes from the runtime's ground truth.
use asys_tests::*;
use serde_json::Value;

fn build() -> std::path::PathBuf {
    sim_workload("hgtx_capture.c", &["hggcrt", "hgtx"])
}

struct Run {
    code: Option<i32>,
    err: String,
    truth: Vec<Value>,
    report: std::path::PathBuf,
}

/// `asys profile -t hggc,hgtx -c hgtx EXTRA app` (output not piped: the
/// application may outlive asys). Where asys should end the application,
/// it sleeps 20 s at its end, which asys cuts short.
fn profile(s: &Scratch, bin: &std::path::Path, tag: &str, extra: &[&str]) -> Run {
    let ends_app = !extra
        .iter()
        .any(|a| matches!(*a, "stop" | "merge" | "none"))
        && !extra.contains(&"Nope");
    require_root();
    let truth = s.path(&format!("truth-{tag}.jsonl"));
    let report = s.path(tag);
    let err = s.path(&format!("{tag}.err"));
    let status = asys()
        .args(["profile", "-t", "hggc,hgtx", "-c", "hgtx", "-o"])
        .arg(&report)
        .args(extra)
        .arg(bin)
        .env("HGGC_SIM_GROUND_TRUTH", &truth)
        .env("END_SLEEP_MS", if ends_app { "20000" } else { "0" })
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .status()
        .unwrap();
    Run {
        code: status.code(),
        err: std::fs::read_to_string(&err).unwrap(),
        truth: ground_truth(&truth),
        report: report.with_extension("asysrep"),
    }
}

/// The (open, close) truth rows of every range called `message` whose
/// domain is `domain` (None: any).
fn ranges(truth: &[Value], message: &str, domain: Option<&str>) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, t) in truth.iter().enumerate() {
        let api = t["api"].as_str().unwrap();
        let opens = api.contains("RangePush") || api.contains("RangeStart");
        if !opens || t["message"] != message || domain.is_some_and(|d| t["domain"] != d) {
            continue;
        }
        let close = truth[i + 1..]
            .iter()
            .position(|c| {
                let capi = c["api"].as_str().unwrap();
                if api.contains("RangePush") {
                    capi.contains("RangePop")
                        && c["tid"] == t["tid"]
                        && c["level"] == t["level"]
                        && c["domain"] == t["domain"]
                } else {
                    capi.contains("RangeEnd") && c["id"] == t["id"]
                }
            })
            .unwrap()
            + i
            + 1;
        out.push((i, close));
    }
    out
}

/// The hggc calls of the truth rows in these ranges.
fn hggc_in(truth: &[Value], ranges: &[(usize, usize)]) -> Vec<String> {
    ranges
        .iter()
        .flat_map(|&(a, b)| &truth[a..=b])
        .filter(|t| t["api"].as_str().unwrap().starts_with("hggc"))
        .map(truth_key)
        .collect()
}

fn hggc_traced(report: &std::path::Path) -> Vec<String> {
    stats_json(report, "hggc_api_trace")
        .iter()
        .map(trace_key)
        .collect()
}

#[test]
fn a_named_range_records_exactly_its_calls_and_ends_the_app() {
    let s = Scratch::new("hgtx-cap");
    let bin = build();
    let r = profile(&s, &bin, "step", &["-p", "Step"]);
    // stop-shutdown: the application was ended (SIGTERM) after the range.
    assert_eq!(r.code, Some(143), "{}", r.err);
    let steps = ranges(&r.truth, "Step", Some(""));
    let want = hggc_in(&r.truth, &steps[..1]);
    assert_eq!(want.len(), 6);
    assert_same_calls(want, hggc_traced(&r.report));
    // The range's own push and pop, and the one nested in it, are recorded;
    // the enclosing and earlier ranges are not.
    let names: Vec<String> = stats_json(&r.report, "hgtx_pushpop_trace")
        .iter()
        .map(|row| row["Name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"Step".to_string()) && names.contains(&"Inner".to_string()));
    assert_eq!(metadata(&r.report)["capture_range"], "hgtx:Step");
    assert_eq!(metadata(&r.report)["capture_ranges"], 1);
}

#[test]
fn repeat_and_merge_count_ranges() {
    let s = Scratch::new("hgtx-rep");
    let bin = build();
    // repeat-shutdown:2: two reports, one per range, then the app is ended.
    let r = profile(
        &s,
        &bin,
        "rep",
        &["-p", "Step", "--capture-range-end", "repeat-shutdown:2"],
    );
    assert_eq!(r.code, Some(143), "{}", r.err);
    let steps = ranges(&r.truth, "Step", Some(""));
    for k in 0..2 {
        let report = s.path(&format!("rep.{}.asysrep", k + 1));
        let want = hggc_in(&r.truth, &steps[k..=k]);
        assert_eq!(want.len(), 2 * (k + 2) + 2);
        assert_same_calls(want, hggc_traced(&report));
    }
    assert!(!s.path("rep.3.asysrep").exists());

    // merge with any domain: every Step (3 default, 1 in "net") in one
    // report; the application runs to its end.
    let r = profile(
        &s,
        &bin,
        "merge",
        &["-p", "Step@*", "--capture-range-end", "merge"],
    );
    assert_eq!(r.code, Some(0), "{}", r.err);
    let steps = ranges(&r.truth, "Step", None);
    assert_eq!(steps.len(), 4);
    assert_same_calls(hggc_in(&r.truth, &steps), hggc_traced(&r.report));
    assert_eq!(metadata(&r.report)["capture_ranges"], 4);

    // merge-shutdown:2: the first two ranges in one report, then the end.
    let r = profile(
        &s,
        &bin,
        "merge2",
        &["-p", "Step@*", "--capture-range-end", "merge-shutdown:2"],
    );
    assert_eq!(r.code, Some(143), "{}", r.err);
    let steps = ranges(&r.truth, "Step", None);
    assert_same_calls(hggc_in(&r.truth, &steps[..2]), hggc_traced(&r.report));
    assert!(!s.path("merge2.1.asysrep").exists());
}

#[test]
fn domains_and_start_end_ranges() {
    let s = Scratch::new("hgtx-dom");
    let bin = build();
    // Only the Step of domain "net"; stop leaves the application running.
    let r = profile(
        &s,
        &bin,
        "net",
        &["-p", "Step@net", "--capture-range-end", "stop"],
    );
    assert_eq!(r.code, Some(0), "{}", r.err);
    let want = hggc_in(&r.truth, &ranges(&r.truth, "Step", Some("net")));
    assert_eq!(want.len(), 10);
    assert!(!r.err.contains("warning"), "{}", r.err);
    assert_same_calls(want, hggc_traced(&r.report));

    // A start/end range.
    let r = profile(&s, &bin, "load", &["-p", "Load"]);
    let want = hggc_in(&r.truth, &ranges(&r.truth, "Load", Some("")));
    assert_eq!(want.len(), 6);
    assert_same_calls(want, hggc_traced(&r.report));
}

#[test]
fn a_range_that_never_comes_gives_an_empty_report_and_a_warning() {
    let s = Scratch::new("hgtx-none");
    let bin = build();
    let r = profile(&s, &bin, "none", &["-p", "Nope"]);
    // As nsys: the application ran to its end; its exit code is asys's.
    assert_eq!(r.code, Some(0), "{}", r.err);
    assert!(
        r.err
            .contains("the capture range never began (no hgtx range matched 'Nope')"),
        "{}",
        r.err
    );
    assert!(hggc_traced(&r.report).is_empty());
    assert_eq!(metadata(&r.report)["capture_ranges"], 0);
}

#[test]
fn hgtx_capture_bad_input() {
    let s = Scratch::new("hgtx-bad");
    let cases: [(&[&str], &str); 7] = [
        (&["-c", "hgtx"], "-c hgtx needs -p/--hgtx-capture"),
        (&["-p", "Step"], "-p/--hgtx-capture needs -c hgtx"),
        (&["-c", "hgtx", "-p", "@d"], "the range name is empty"),
        (&["-c", "hgtx", "-p", "x@"], "the domain after '@' is empty"),
        (
            &["-c", "hgtx", "-p", "x", "--capture-range-end", "repeat:0"],
            "must be at least 1",
        ),
        (
            &[
                "-c",
                "hgtx",
                "-p",
                "x",
                "--capture-range-end",
                "merge-shutdown",
            ],
            "needs the number of ranges",
        ),
        (&["-c", "bogus"], "unknown capture range 'bogus'"),
    ];
    for (args, want) in cases {
        let o = asys()
            .args(["profile", "-t", "hggc,hgtx", "-o"])
            .arg(s.path("bad"))
            .args(args)
            .arg("/bin/true")
            .finish();
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let o = run(&[
        "profile",
        "-t",
        "hggc",
        "-c",
        "hgtx",
        "-p",
        "x",
        "/bin/true",
    ]);
    assert!(
        stderr(&o).contains("-c hgtx needs -t hgtx"),
        "{}",
        stderr(&o)
    );
    assert!(!s.path("bad.asysrep").exists());
}
