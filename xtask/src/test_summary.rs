//! The closing summary of `cargo xtask test`: `cargo test`'s output is
//! copied to the terminal line by line as it comes and kept, then read for
//! the totals over every test binary (passed, failed, ignored), the failed
//! tests, and each ignored test with its reason, so that what did not run is
//! said at the end, not scrolled away among thousands of lines.
use std::{
    fmt,
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, ExitStatus},
    sync::{Arc, Mutex, mpsc},
    time::Duration,
};

use anyhow::Context as _;

/// How long the output is read after cargo exited: a process a test left
/// running holds the pipe open, and is not waited for.
const GRACE: Duration = Duration::from_secs(5);

/// Runs `cmd` with its stdout and stderr into one pipe (cargo's "Running"
/// lines are on stderr, the tests' results on stdout: one pipe keeps their
/// order), copying each line to this process's stdout as it arrives.
/// Returns the exit status and everything the command printed.
pub fn run_teed(cmd: Command) -> anyhow::Result<(ExitStatus, String)> {
    run_teed_within(cmd, GRACE)
}

/// [`run_teed`], reading for at most `grace` after the command exited.
fn run_teed_within(mut cmd: Command, grace: Duration) -> anyhow::Result<(ExitStatus, String)> {
    let (reader, writer) = std::io::pipe().context("a pipe for cargo test's output")?;
    cmd.stdout(writer.try_clone()?).stderr(writer);
    let mut child = cmd.spawn().with_context(|| format!("cannot run {cmd:?}"))?;
    // The command holds the pipe's write end too: dropped, the reader sees
    // the end of the output when the child (and what it started) exits.
    drop(cmd);
    let all = Arc::new(Mutex::new(String::new()));
    let (ended, reader_ended) = mpsc::channel();
    let kept = Arc::clone(&all);
    std::thread::spawn(move || {
        let mut reader = BufReader::new(reader);
        let mut line = Vec::new();
        let mut out = std::io::stdout();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let _ = out.write_all(&line);
            let _ = out.flush();
            let text = String::from_utf8_lossy(&line);
            kept.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_str(&text);
            line.clear();
        }
        let _ = ended.send(());
    });
    let status = child.wait()?;
    let _ = reader_ended.recv_timeout(grace);
    let text = all.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok((status, text))
}

/// A test libtest did not run.
#[derive(Debug, PartialEq, Eq)]
pub struct Ignored {
    /// The test binary (`probes`, `asys_userspace`, `asys_report (doc)`).
    pub binary: String,
    pub test: String,
    /// What `#[ignore = "..."]` said, if anything.
    pub reason: Option<String>,
}

/// What `cargo test` said about its test binaries.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
    /// Test binaries cargo started.
    pub binaries: u64,
    /// Those that printed their `test result:` line (the rest crashed or
    /// were killed before they finished).
    pub finished: u64,
    /// `binary: test`, for each failed test.
    pub failed_tests: Vec<String>,
    pub ignored_tests: Vec<Ignored>,
}

/// The binary a cargo header line starts: `Running unittests src/lib.rs
/// (target/debug/deps/asys_userspace-0a1b2c)` is `asys_userspace`, `Running
/// tests/probes.rs (target/debug/deps/probes-3d4e)` is `probes`, `Doc-tests
/// asys_report` is `asys_report (doc)`.
fn binary_of(line: &str) -> Option<String> {
    // Cargo right-aligns its status words: a test's own line that starts
    // with "Running" is not one of them.
    if !line.starts_with(' ') {
        return None;
    }
    let line = line.trim();
    if let Some(name) = line.strip_prefix("Doc-tests ") {
        return Some(format!("{} (doc)", name.trim()));
    }
    let rest = line.strip_prefix("Running ")?;
    let path = rest
        .rsplit_once(" (")
        .and_then(|(_, p)| p.strip_suffix(')'))
        .unwrap_or(rest);
    let file = path.rsplit('/').next().unwrap_or(path);
    // Cargo names the binary `NAME-HASH`.
    let name = match file.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name,
        _ => file,
    };
    Some(name.to_string())
}

/// The count before `word` in a `test result:` line (`3 passed; 1 failed;`).
fn count(result: &str, word: &str) -> u64 {
    result
        .split(';')
        .find_map(|part| {
            let (n, w) = part.trim().split_once(' ')?;
            (w == word).then(|| n.parse().ok())?
        })
        .unwrap_or(0)
}

/// Reads `cargo test`'s output (stdout and stderr together, in order).
pub fn parse(output: &str) -> Summary {
    let mut s = Summary::default();
    let mut binary = String::from("?");
    for line in output.lines() {
        if let Some(b) = binary_of(line) {
            binary = b;
            s.binaries += 1;
        } else if let Some(counts) = line
            .strip_prefix("test result: ok. ")
            .or_else(|| line.strip_prefix("test result: FAILED. "))
        {
            s.finished += 1;
            s.passed += count(counts, "passed");
            s.failed += count(counts, "failed");
            s.ignored += count(counts, "ignored");
        } else if let Some((test, outcome)) = line
            .strip_prefix("test ")
            .and_then(|l| l.split_once(" ... "))
        {
            if outcome == "FAILED" {
                s.failed_tests.push(format!("{binary}: {test}"));
            } else if let Some(rest) = outcome.strip_prefix("ignored") {
                s.ignored_tests.push(Ignored {
                    binary: binary.clone(),
                    test: test.to_string(),
                    reason: rest.strip_prefix(", ").map(str::to_string),
                });
            }
        }
    }
    s
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "== test summary, over {} test binaries ==",
            self.binaries
        )?;
        writeln!(
            f,
            "{} passed, {} failed, {} ignored",
            self.passed, self.failed, self.ignored
        )?;
        if self.finished < self.binaries {
            writeln!(
                f,
                "{} test binaries ended without their result line (crashed or killed: \
                 their tests are not counted above)",
                self.binaries - self.finished
            )?;
        }
        if !self.failed_tests.is_empty() {
            writeln!(f, "failed:")?;
            for t in &self.failed_tests {
                writeln!(f, "    {t}")?;
            }
        }
        if !self.ignored_tests.is_empty() {
            writeln!(f, "ignored:")?;
            for i in &self.ignored_tests {
                let reason = i.reason.as_deref().unwrap_or("no reason given");
                writeln!(f, "    {}: {} ({reason})", i.binary, i.test)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "\
   Compiling xtask v0.1.0 (/w/xtask)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 3.2s
     Running unittests src/lib.rs (target/debug/deps/asys_userspace-0123456789abcdef)

running 3 tests
test kernel::btf::tests::finds_members ... ok
test record::tests::bench ... ignored, a measurement
test record::tests::old ... ignored

test result: ok. 1 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/probes.rs (target/debug/deps/probes-fedcba9876543210)

running 3 tests
test a_kernel_function_probe_counts ... ignored, needs kernel function probes; this kernel has none
test bad_specs ... FAILED
test tracepoints ... ok

failures:

---- bad_specs stdout ----
thread 'bad_specs' panicked at tests/tests/probes.rs:9:5:
test result: this line is the test's own output, not libtest's

failures:
    bad_specs

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 2.50s

error: test failed, to rerun pass `-p asys-tests --test probes`
     Running tests/crashes.rs (target/debug/deps/crashes-00aa)

running 1 test
error: test failed, to rerun pass `-p asys-tests --test crashes`
   Doc-tests asys_report

running 1 test
test asys-report/src/lib.rs - example (line 3) ... ignored

test result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
";

    #[test]
    fn totals_failures_and_ignored_tests_with_their_reasons() {
        let s = parse(OUTPUT);
        assert_eq!((s.passed, s.failed, s.ignored), (2, 1, 4));
        assert_eq!((s.binaries, s.finished), (4, 3));
        assert_eq!(s.failed_tests, ["probes: bad_specs"]);
        let ignored: Vec<(&str, &str, Option<&str>)> = s
            .ignored_tests
            .iter()
            .map(|i| (i.binary.as_str(), i.test.as_str(), i.reason.as_deref()))
            .collect();
        assert_eq!(
            ignored,
            [
                (
                    "asys_userspace",
                    "record::tests::bench",
                    Some("a measurement")
                ),
                ("asys_userspace", "record::tests::old", None),
                (
                    "probes",
                    "a_kernel_function_probe_counts",
                    Some("needs kernel function probes; this kernel has none")
                ),
                (
                    "asys_report (doc)",
                    "asys-report/src/lib.rs - example (line 3)",
                    None
                ),
            ]
        );
    }

    #[test]
    fn the_summary_says_what_crashed_failed_and_was_ignored() {
        let text = parse(OUTPUT).to_string();
        assert!(text.contains("2 passed, 1 failed, 4 ignored"), "{text}");
        assert!(text.contains("1 test binaries ended without"), "{text}");
        assert!(text.contains("    probes: bad_specs\n"), "{text}");
        assert!(
            text.contains("    asys_userspace: record::tests::bench (a measurement)\n"),
            "{text}"
        );
        assert!(
            text.contains("    asys_userspace: record::tests::old (no reason given)\n"),
            "{text}"
        );
    }

    #[test]
    fn nothing_run_is_zeros_not_an_error() {
        let s = parse("error: could not compile `asys-tests`\n");
        assert_eq!(s, Summary::default());
        assert!(s.to_string().contains("0 passed, 0 failed, 0 ignored"));
    }

    #[test]
    fn a_line_goes_through_the_pipe_as_it_comes_and_is_kept() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let (status, text) = run_teed(cmd).unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(text, "out\nerr\n");
    }

    #[test]
    fn a_process_left_running_with_the_pipe_is_not_waited_for() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo before; sleep 3 & exit 0"]);
        let t0 = std::time::Instant::now();
        let (status, text) = run_teed_within(cmd, Duration::from_millis(200)).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert!(status.success());
        assert_eq!(text, "before\n");
    }
}
