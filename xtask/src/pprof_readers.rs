//! The readers the pprof export test reads its profiles with: Go's own
//! `go tool pprof` (Debian's golang-go) and `pprof-format` (npm, MIT), the
//! JavaScript decoder of profile.proto that Datadog's profilers use,
//! installed into target/pprof-js.
use std::process::Command;

/// Pinned: the test reads its API (`Profile.decode`).
const PPROF_FORMAT: &str = "pprof-format@2.3.2";

pub fn ensure() -> anyhow::Result<()> {
    crate::ensure_command("go", "golang-go", "the pprof export test's `go tool pprof`")?;
    crate::ensure_command("npm", "npm", "installing the pprof export test's decoder")?;
    let prefix = crate::target_dir().join("pprof-js");
    if prefix
        .join("node_modules/pprof-format/package.json")
        .is_file()
    {
        return Ok(());
    }
    std::fs::create_dir_all(&prefix)?;
    crate::run(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(PPROF_FORMAT),
    )
}
