//! `asys __generate DIR`: writes the man pages (`DIR/man/man1/asys.1` and
//! `asys-COMMAND.1` for each subcommand) and the shell completions
//! (`DIR/completions/asys.bash`, `_asys`, `asys.fish`) from the command
//! line's own definition, so they cannot drift from it. `cargo xtask dist`
//! runs it to fill the release; not for use by hand.
use std::path::Path;

use anyhow::Context as _;
use clap::CommandFactory as _;
use clap_complete::Shell;

pub fn main(dir: &Path) -> anyhow::Result<u8> {
    let man = dir.join("man/man1");
    std::fs::create_dir_all(&man).with_context(|| man.display().to_string())?;
    let cmd = super::Cli::command();
    clap_mangen::generate_to(cmd.clone(), &man).with_context(|| man.display().to_string())?;
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions).with_context(|| completions.display().to_string())?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd.clone(), "asys", &completions)
            .with_context(|| format!("{shell} completions"))?;
    }
    Ok(0)
}
