//! Builds the simulated HGGC runtime (sim/src) and the sample workloads
//! (sim/workloads) with the system C compiler into target/sim.
use std::{path::PathBuf, process::Command};

pub struct Sim {
    pub root: PathBuf,
    pub lib: PathBuf,
    pub bin: PathBuf,
}

/// Workloads and whether they link the runtime (dlopen_app loads it itself).
const WORKLOADS: &[(&str, bool)] = &[
    ("train_step", true),
    ("multi_stream", true),
    ("attach_target", true),
    ("fork_exec", true),
    ("call_loop", true),
    ("dlopen_app", false),
];

pub fn build() -> anyhow::Result<Sim> {
    let src = crate::root().join("sim");
    let root = crate::target_dir().join("sim");
    let (lib, bin, include) = (root.join("lib"), root.join("bin"), root.join("include"));
    for d in [&lib, &bin, &include] {
        std::fs::create_dir_all(d)?;
    }
    for h in ["hggc_runtime.h", "hgpti.h"] {
        std::fs::copy(src.join("include").join(h), include.join(h))?;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let common = ["-O2", "-g", "-Wall", "-Wextra", "-Werror"];
    crate::run(
        Command::new(&cc)
            .args(common)
            .args(["-fPIC", "-shared", "-Wl,-soname,libhggcrt.so"])
            .arg("-I")
            .arg(src.join("include"))
            .arg(src.join("src/hggc_runtime.c"))
            .arg("-o")
            .arg(lib.join("libhggcrt.so"))
            .args(["-lpthread", "-ldl"]),
    )?;
    for (name, links) in WORKLOADS {
        let mut c = Command::new(&cc);
        // -rdynamic exports kernel functions so the runtime can name them
        // (dladdr) in its ground truth, as a real runtime names kernels.
        c.args(common)
            .args(["-Wno-unused-function", "-rdynamic"])
            .arg("-I")
            .arg(src.join("include"))
            .arg(src.join("workloads").join(format!("{name}.c")))
            .arg("-o")
            .arg(bin.join(name));
        if *links {
            c.arg("-L")
                .arg(&lib)
                .arg("-lhggcrt")
                .arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        c.args(["-lpthread", "-ldl"]);
        crate::run(&mut c)?;
    }
    Ok(Sim { root, lib, bin })
}
