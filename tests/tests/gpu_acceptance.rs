//! scripts/gpu/acceptance.sh's CPU side: the script parses, its
//! workload and checker compile, and every check of acceptance_check.py
//! passes on consistent inputs and misses on broken ones (`DRY_RUN=1`). The
//! GPU run itself needs an NVIDIA GPU and is not started here.
use std::process::Command;

#[test]
fn the_acceptance_scripts_checks_pass_and_miss_on_made_up_inputs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let out = Command::new("bash")
        .arg(root.join("scripts/gpu/acceptance.sh"))
        .env("DRY_RUN", "1")
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("selftest passed"), "{stdout}");
    // Each check was seen to miss once, on its broken input.
    for check in [
        "graph",
        "processes",
        "attach",
        "metrics",
        "python",
        "overhead",
        "joins",
    ] {
        assert!(
            stdout.contains(&format!("(expected) {check}:")),
            "{check}: {stdout}"
        );
    }
}
