//! A venv with Meta's Holistic Trace Analysis (PyPI `HolisticTraceAnalysis`,
//! `import hta`): the Kineto export test runs its analyses on the exported
//! traces of four ranks (target/hta-venv).
use std::path::PathBuf;

/// HTA 0.5.0 with the pandas it was written for: under pandas 3 its parser
/// fails (`Invalid value ... for dtype 'int8'`, a downcast column that
/// pandas 2 widened on assignment).
const PACKAGES: &[&str] = &["HolisticTraceAnalysis==0.5.0", "pandas==2.2.3"];

pub fn ensure() -> anyhow::Result<PathBuf> {
    // HTA's requirements come with it (numpy, plotly, networkx, ... and
    // jupyterlab, which it lists too).
    crate::venv::ensure(
        &crate::target_dir().join("hta-venv"),
        PACKAGES,
        crate::venv::Deps::Resolved,
    )
}
