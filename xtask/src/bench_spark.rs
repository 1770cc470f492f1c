//! `cargo xtask bench-spark` (being written).
pub fn run(_args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("bench-spark is not written yet")
}
