//! asys: a system profiler for accelerator workloads, built on eBPF.
mod apis;
mod cli;
mod clock;
mod collect;
mod kernel;
mod launch;
mod output;
mod privileges;
mod procfs;
mod record;
mod report;
mod session;
mod settings;
mod stats;
mod symbolize;

use std::process::ExitCode;

use clap::{Parser, error::ErrorKind};

fn main() -> ExitCode {
    // Behave like other Unix tools in a pipeline (`asys stats r | head`).
    // SAFETY: restoring a signal's default disposition, before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let argv = cli::normalize(std::env::args().collect());
    let parsed = match cli::Cli::try_parse_from(&argv) {
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
                    eprintln!(
                        "asys: error: {}",
                        first.trim_start_matches("error: ").trim()
                    );
                    ExitCode::from(2)
                }
            };
        }
    };
    match cli::run(parsed, &argv) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("asys: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
