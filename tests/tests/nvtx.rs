//! NVTX v3 from a real NVTX client (the `nvtx` package from PyPI, built on
//! NVIDIA's header-only NVTX v3), which loads asys's injection library as its
//! tool through NVTX_INJECTION64_PATH. No GPU involved.
use asys_tests::*;

/// Prints "pushpop NAME DOMAIN LEVEL" and "startend NAME DOMAIN" for what it
/// does: the ground truth of this test.
const SCRIPT: &str = r#"
import nvtx, threading
print("pushpop outer - 0")
with nvtx.annotate("outer", color="blue"):
    print("pushpop inner mydomain 0")
    with nvtx.annotate("inner", domain="mydomain"):
        nvtx.mark("tick")
        print("pushpop deepest mydomain 1")
        with nvtx.annotate("deepest", domain="mydomain"):
            pass
    print("pushpop pushed - 1")
    nvtx.push_range("pushed")
    nvtx.pop_range()
print("startend startend -")
r = nvtx.start_range("startend")
def worker():
    print("pushpop in-thread - 0")
    with nvtx.annotate("in-thread"):
        pass
t = threading.Thread(target=worker); t.start(); t.join()
nvtx.end_range(r)
"#;

#[test]
fn ranges_of_a_real_nvtx_client_are_traced() {
    require_root();
    let s = Scratch::new("nvtx");
    let script = s.path("ranges.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let report = s.path("r");
    let python = pyenv().join("bin/python");
    let o = run(&[
        "profile",
        "-t",
        "nvtx",
        "-o",
        report.to_str().unwrap(),
        python.to_str().unwrap(),
        script.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let expect = |kind: &str| -> Vec<String> {
        out.lines()
            .filter_map(|l| l.strip_prefix(kind))
            .map(|l| l.trim().replace(" - ", "  ").replace(" -", " "))
            .collect()
    };
    let report = report.with_extension("asysrep");
    let rows = stats_json(&report, "nvtx_pushpop_trace");
    let dom = |r: &serde_json::Value| r["Domain"].as_str().unwrap().to_string();
    assert_same_calls(
        expect("pushpop "),
        rows.iter()
            .map(|r| format!("{} {} {}", r["Name"].as_str().unwrap(), dom(r), r["Lvl"]))
            .collect(),
    );
    let se = stats_json(&report, "nvtx_startend_trace");
    assert_same_calls(
        expect("startend "),
        se.iter()
            .map(|r| format!("{} {}", r["Name"].as_str().unwrap(), dom(r)))
            .collect(),
    );
    // The thread's range is on another thread than the main ones.
    let main_tid = rows.iter().find(|r| r["Name"] == "outer").unwrap()["Tid"].clone();
    assert!(
        rows.iter()
            .any(|r| r["Name"] == "in-thread" && r["Tid"] != main_tid)
    );
}
