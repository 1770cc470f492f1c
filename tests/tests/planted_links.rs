//! Root's asys against links planted by another user (`nobody`) in a shared,
//! world-writable folder: no link is followed, no foreign file becomes the
//! report, and the victim files stay as they were.
use std::{os::unix::fs::MetadataExt, path::Path, process::Command};

use asys_tests::*;

const NOBODY: u32 = 65534;

/// A world-writable sticky folder, like /tmp, that `nobody` can plant in.
fn shared(tag: &str) -> Scratch {
    let s = Scratch::new(tag);
    let c = std::ffi::CString::new(s.0.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; chmod has no memory effects.
    assert_eq!(unsafe { libc::chmod(c.as_ptr(), 0o1777) }, 0);
    s
}

/// `ln -s target link`, run as nobody.
fn plant(target: &Path, link: &Path) {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "ln",
            "-s",
        ])
        .arg(target)
        .arg(link)
        .output()
        .expect("setpriv runs");
    assert!(o.status.success(), "planting failed: {o:?}");
    assert_eq!(std::fs::symlink_metadata(link).unwrap().uid(), NOBODY);
}

fn profile_true(out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["profile", "-t", "hggc", "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("/bin/true");
    run(&args)
}

fn assert_victim_intact(victim: &Path) {
    assert_eq!(
        std::fs::read(victim).unwrap(),
        b"precious\n",
        "victim overwritten"
    );
}

#[test]
fn links_planted_at_the_report_paths_are_never_followed() {
    require_root();
    let shared = shared("links");
    let safe = Scratch::new("links-victim");
    let victim = safe.path("victim");
    std::fs::write(&victim, b"precious\n").unwrap();

    // The temporary name the report is packed under, and the recording
    // folder beside the report (named after asys's pid: planted for the
    // next pids the machine will hand out).
    plant(&victim, &shared.path("a.asysrep.tmp"));
    let victim_dir = Scratch::new("links-victim-dir");
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // One process plants them all, so the pids stay free for asys.
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
        ])
        .arg(format!(
            "import os\nfor p in range({}, {}): os.symlink({:?}, {:?} % p)",
            last + 1,
            last + 300,
            victim_dir.0.to_str().unwrap(),
            shared.path("a.asysrep.unfinished-%d").to_str().unwrap(),
        ))
        .output()
        .expect("setpriv runs");
    assert!(o.status.success(), "planting failed: {o:?}");
    let o = profile_true(&shared.path("a"), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // asys's pid was among the planted ones.
    let taken = shared
        .files()
        .iter()
        .filter(|f| f.starts_with("a.asysrep.unfinished-"))
        .count();
    assert_eq!(taken, 299, "{:?}", shared.files());
    assert_victim_intact(&victim);
    let report = shared.path("a.asysrep");
    let meta = std::fs::symlink_metadata(&report).unwrap();
    assert!(meta.file_type().is_file() && meta.uid() == 0, "{meta:?}");
    assert!(victim_dir.files().is_empty(), "{:?}", victim_dir.files());

    // The report's own name: refused without -f, replaced (not followed) with it.
    plant(&victim, &shared.path("b.asysrep"));
    let o = profile_true(&shared.path("b"), &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    let o = profile_true(&shared.path("b"), &["-f", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_victim_intact(&victim);
    let meta = std::fs::symlink_metadata(shared.path("b.asysrep")).unwrap();
    assert!(meta.file_type().is_file() && meta.uid() == 0, "{meta:?}");

    // A dangling link at a %i candidate is a name taken, not a free one.
    plant(&safe.path("nowhere"), &shared.path("c1.asysrep"));
    let o = profile_true(&shared.path("c%i"), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!safe.path("nowhere").exists(), "dangling link followed");
    assert!(shared.path("c2.asysrep").is_file());

    // A folder on the way that is nobody's link: refused, nothing written there.
    let elsewhere = Scratch::new("links-elsewhere");
    plant(&elsewhere.0, &shared.path("sub"));
    let o = profile_true(&shared.path("sub/d"), &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("refusing to follow") && err.contains("uid 65534"),
        "{err}"
    );
    assert!(elsewhere.files().is_empty(), "{:?}", elsewhere.files());
    assert_victim_intact(&victim);
}

/// A recording folder another user made decides nothing: its description
/// could name any place for root's report, so recover refuses it.
#[test]
fn recover_refuses_a_folder_another_user_made() {
    require_root();
    let shared = shared("links-recover");
    let fake = shared.path("r.asysrep.unfinished-1");
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "mkdir"])
        .arg(&fake)
        .output()
        .expect("setpriv runs");
    assert!(o.status.success(), "{o:?}");
    // Root writes in it (root may): the folder still belongs to nobody.
    std::fs::write(fake.join("recording.json"), b"{}").unwrap();
    let o = run(&["recover", fake.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("refusing to recover") && err.contains("uid 65534"),
        "{err}"
    );
}
