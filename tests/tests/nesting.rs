//! Each return is matched to its own entry: nested calls past the kernel's
//! depth limit and recording turning on and off inside a nested call leave
//! every emitted call with its own result and times; and a vendor library's
//! calls of its own API are the library's, not the application's.
use std::collections::BTreeMap;

use asys_tests::*;

/// The kernel stores this many calls in flight per thread (MAX_CALL_DEPTH).
const STORED_DEPTH: u32 = 4;

/// One runtime call as `nested_calls` printed it.
#[derive(Debug, Clone)]
struct Made {
    name: String,
    depth: u32,
    start: i64,
    end: i64,
    result: i64,
}

fn calls_made(out: &str) -> Vec<Made> {
    out.lines()
        .filter_map(|l| l.strip_prefix("call "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Made {
                name: f[0].to_string(),
                depth: f[1].parse().unwrap(),
                start: f[2].parse().unwrap(),
                end: f[3].parse().unwrap(),
                result: f[4].parse().unwrap(),
            }
        })
        .collect()
}

/// Checks the report's calls against what the workload made: the calls
/// entered while recording and within the stored depth are there, each
/// inside the workload's own bracket of that very call (the innermost of
/// its name that holds it) with that call's result; every call entered
/// while recording deeper than that is counted lost to depth.
fn assert_each_call_is_its_own(
    report: &std::path::Path,
    made: &[Made],
    recording: impl Fn(&Made) -> bool,
) {
    let (rows, _) = traced_calls(report);
    let wanted: Vec<&Made> = made
        .iter()
        .filter(|m| recording(m) && m.depth <= STORED_DEPTH)
        .collect();
    let deeper = made
        .iter()
        .filter(|m| recording(m) && m.depth > STORED_DEPTH)
        .count() as u64;
    assert!(deeper > 0, "the workload nests past the depth limit");
    let mut matched = vec![false; made.len()];
    for row in &rows {
        let (i, call) = made
            .iter()
            .enumerate()
            .filter(|(_, m)| m.name == row.name && m.start <= row.start && row.end <= m.end)
            .min_by_key(|(_, m)| m.end - m.start)
            .unwrap_or_else(|| panic!("{row:?} lies in no call of its name the workload made"));
        assert!(!matched[i], "two rows for one call: {call:?}");
        matched[i] = true;
        assert_eq!(
            row.result, call.result,
            "{row:?} carries another call's result: {call:?}"
        );
        assert!(
            recording(call) && call.depth <= STORED_DEPTH,
            "{row:?} is {call:?}, which was not to be recorded"
        );
    }
    assert_eq!(rows.len(), wanted.len(), "rows {rows:?}\nwanted {wanted:?}");
    let meta = metadata(report);
    assert_eq!(meta["drops"]["api_call_depth"], deeper, "{}", meta["drops"]);
}

#[test]
fn nested_callbacks_past_the_depth_limit_each_carry_their_own_result() {
    let s = Scratch::new("nest-plain");
    let p = profile_workload(
        &s,
        &["-t", "hggc", "-s", "none"],
        "nested_calls",
        &["plain", "7"],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let made = calls_made(&stdout(&p.out));
    assert_eq!(made.len(), 7 + 8, "seven callbacks, eight hggcGetDevice");
    assert_each_call_is_its_own(&p.report, &made, |_| true);
}

#[test]
fn recording_turned_on_and_off_inside_nested_calls_keeps_each_call_its_own() {
    let s = Scratch::new("nest-range");
    // Start in the callback at level 2 (a call at depth 3), stop in the one
    // at level 5 (depth 6, past the stored depth: its return still closes
    // the range); the outer callbacks were entered before the range opened.
    let p = profile_workload(
        &s,
        &[
            "-t",
            "hggc",
            "-s",
            "none",
            "-c",
            "hggcProfilerApi",
            "--capture-range-end",
            "merge",
        ],
        "nested_calls",
        &["range", "7", "2", "5"],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let made = calls_made(&stdout(&p.out));
    let at = |name: &str| made.iter().find(|m| m.name == name).unwrap().start;
    let (opened, closed) = (at("hggcProfilerStart"), at("hggcProfilerStop"));
    // Recorded: the calls entered from the start's entry to the stop's.
    assert_each_call_is_its_own(&p.report, &made, |m| m.start >= opened && m.start <= closed);
    let (rows, _) = traced_calls(&p.report);
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert!(names.contains(&"hggcRunHostCallback"), "{names:?}");
}

/// Calls per function in a report's hggc_api_trace.
fn counted(report: &std::path::Path) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for r in traced_calls(report).0 {
        *m.entry(r.name).or_default() += 1;
    }
    m
}

#[test]
fn a_runtimes_calls_of_its_own_api_are_left_out_unless_asked_for() {
    let s = Scratch::new("nest-internal");
    let args = ["internal", "5", "3"];
    let p = profile_workload(
        &s,
        &["-t", "hggc", "-s", "none"],
        "nested_calls",
        &args,
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let out = stdout(&p.out);
    let app = workload_calls(&out);
    // What the application called, and nothing the runtime called itself.
    assert_eq!(counted(&p.report), app);
    assert_eq!(app["hggcGetDevice"], 2);
    assert_eq!(metadata(&p.report)["trace_vendor_internal"], false);

    let name = "nested_calls";
    let s2 = Scratch::new("nest-internal-kept");
    let kept = profile_workload(
        &s2,
        &[
            "-t",
            "hggc",
            "-s",
            "none",
            "--trace-vendor-internal",
            "true",
        ],
        name,
        &args,
        &[],
    );
    assert!(kept.out.status.success(), "{}", stderr(&kept.out));
    let out = stdout(&kept.out);
    let internal: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("internal-calls "))
        .unwrap()
        .parse()
        .unwrap();
    let mut want = workload_calls(&out);
    *want.get_mut("hggcGetDevice").unwrap() += internal;
    assert_eq!(counted(&kept.report), want);
    assert_eq!(metadata(&kept.report)["trace_vendor_internal"], true);
}

#[test]
fn trace_vendor_internal_takes_only_true_or_false() {
    let o = run(&[
        "profile",
        "--trace-vendor-internal",
        "sometimes",
        "/bin/true",
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
