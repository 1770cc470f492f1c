//! The `asys` command line from start to exit code: arguments parsed (a
//! bad one is one escaped line and exit code 2), the subcommand run, and
//! an error printed as one escaped line.
use asys_report::text_safety;
use std::process::ExitCode;

use clap::{Parser, error::ErrorKind};

pub fn main() -> ExitCode {
    // Behave like other Unix tools in a pipeline (`asys stats r | head`).
    // SAFETY: restoring a signal's default disposition, before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let argv = super::normalize(std::env::args().collect());
    let parsed = match super::Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            return match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                _ => {
                    // One line: clap's first line names the problem.
                    let text = e.to_string();
                    let first = text.lines().next().unwrap_or("invalid arguments");
                    // Arguments are echoed in clap's message: escaped, as
                    // every error line is.
                    eprintln!(
                        "asys: error: {}",
                        text_safety::visible(first.trim_start_matches("error: ").trim())
                    );
                    ExitCode::from(2)
                }
            };
        }
    };
    match super::run(parsed, &argv) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // Errors quote paths, names and arguments that may hold control
            // or bidirectional characters: shown escaped, never acted on.
            eprintln!("asys: error: {}", text_safety::visible(&one_line(&e)));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each cause once: library errors
/// often print their source in their own message too, and a chain would
/// repeat the OS error two or three times.
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_chain_names_each_cause_once() {
        let os = std::io::Error::from_raw_os_error(libc::ENOENT);
        let text = os.to_string();
        let e = anyhow::Error::new(os)
            .context(format!("/x/r.asysrep: {text}"))
            .context("recording failed");
        let line = super::one_line(&e);
        assert_eq!(line.matches(&text).count(), 1, "{line}");
        assert!(
            line.starts_with("recording failed: /x/r.asysrep: "),
            "{line}"
        );
    }
}
