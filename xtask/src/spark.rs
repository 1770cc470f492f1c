//! PySpark in local mode for the Spark test and `cargo xtask bench-spark`:
//! Debian's headless OpenJDK (apt-get, when no `java` runs) and a venv with
//! the `pyspark` PyPI package (target/spark-venv). pyspark 4.0 runs on Java
//! 17 or 21; bookworm's JRE is 17.
use std::path::PathBuf;

/// Pinned together: pyspark 4.0.1 requires exactly py4j 0.10.9.9, its
/// only requirement (pandas and pyarrow are optional extras).
const PACKAGES: &[&str] = &["pyspark==4.0.1", "py4j==0.10.9.9"];

/// Debian's package of the JRE Spark runs on.
const JRE: &str = "openjdk-17-jre-headless";

pub fn root() -> PathBuf {
    crate::target_dir().join("spark-venv")
}

/// Installs the JRE and the venv if they are missing; returns its python.
pub fn ensure() -> anyhow::Result<PathBuf> {
    // `java --version` (Java 9 and later) exits 0.
    crate::ensure_command("java", JRE, "PySpark's JVM")?;
    crate::venv::ensure(&root(), PACKAGES, crate::venv::Deps::PinsOnly)
}
