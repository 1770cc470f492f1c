//! Commands of the guide that this version does not have yet. They are
//! listed in `asys -h` as the guide lists them and say so plainly when run.
use clap::Args;

#[derive(Args, Debug)]
pub struct Rest {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

pub fn run(name: &str) -> anyhow::Result<u8> {
    anyhow::bail!(
        "'asys {name}' is not available in this version of asys (available: profile, attach, stats, analyze, status)"
    )
}
