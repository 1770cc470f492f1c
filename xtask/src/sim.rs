//! Builds the simulated libraries (sim/src: the HGGC runtime, HGTX, ACBLAS,
//! ACDNN, PCCL) and the sample workloads (sim/workloads) with the system C
//! compiler into target/sim.
use std::{path::PathBuf, process::Command};

pub struct Sim {
    pub root: PathBuf,
    pub lib: PathBuf,
    pub bin: PathBuf,
}

/// A simulated library: lib<name>.so built from sim/src/<src>, linked against
/// the simulated libraries in `sim_deps` (already built: order matters) and
/// the system libraries in `sys`.
struct Lib {
    name: &'static str,
    src: &'static str,
    sim_deps: &'static [&'static str],
    sys: &'static [&'static str],
}

const LIBS: &[Lib] = &[
    Lib {
        name: "hggcrt",
        src: "hggc_runtime.c",
        sim_deps: &[],
        sys: &["pthread", "dl"],
    },
    Lib {
        name: "hgtx",
        src: "hgtx.c",
        sim_deps: &[],
        sys: &["pthread"],
    },
    Lib {
        name: "acblas",
        src: "acblas.c",
        sim_deps: &["hggcrt"],
        sys: &["pthread"],
    },
    Lib {
        name: "acdnn",
        src: "acdnn.c",
        sim_deps: &["hggcrt"],
        sys: &["pthread"],
    },
    Lib {
        name: "pccl",
        src: "pccl.c",
        sim_deps: &["hggcrt"],
        sys: &["pthread", "rt"],
    },
];

/// What every simulated library and workload is compiled with.
const CFLAGS: [&str; 5] = ["-O2", "-g", "-Wall", "-Wextra", "-Werror"];

/// Public headers, copied to target/sim/include.
const HEADERS: &[&str] = &[
    "hggc_runtime.h",
    "hgml.h",
    "hgpti.h",
    "hgtx.h",
    "acblas.h",
    "acdnn.h",
    "pccl.h",
];

/// Workloads, the simulated libraries they link (dlopen_app loads the runtime
/// itself) and extra system libraries.
const WORKLOADS: &[(&str, &[&str], &[&str])] = &[
    ("train_step", &["hgtx", "hggcrt"], &[]),
    ("multi_stream", &["hggcrt"], &[]),
    ("attach_target", &["hggcrt"], &[]),
    ("fork_exec", &["hggcrt"], &[]),
    ("call_loop", &["hggcrt"], &[]),
    ("rate_loop", &["hggcrt"], &[]),
    ("steady_calls", &["hggcrt"], &[]),
    ("dlopen_app", &[], &[]),
    ("crash_exit", &["hggcrt"], &[]),
    ("hgtx_ranges", &["hgtx", "hggcrt"], &[]),
    ("gemm", &["acblas", "hgtx", "hggcrt"], &["m"]),
    ("conv", &["acdnn", "hgtx", "hggcrt"], &["m"]),
    ("pccl_ranks", &["pccl", "hggcrt"], &[]),
    ("nested_calls", &["hggcrt"], &[]),
    ("planted_problems", &["hggcrt"], &[]),
    ("busy_idle", &["hggcrt"], &[]),
    ("probe_target", &[], &[]),
    ("soak", &["hgtx", "hggcrt"], &[]),
];

/// Builds the simulated libraries into `lib` with the C compiler `cc`
/// makes, each finding the others it links at `rpath` at run time
/// (`$ORIGIN` in a release, where they move together).
pub fn build_libraries(
    cc: &dyn Fn() -> Command,
    lib: &std::path::Path,
    rpath: &str,
) -> anyhow::Result<()> {
    let src = crate::root().join("sim");
    for l in LIBS {
        let mut c = cc();
        c.args(CFLAGS)
            .args(["-fPIC", "-shared"])
            .arg(format!("-Wl,-soname,lib{}.so", l.name))
            .arg("-I")
            .arg(src.join("include"))
            .arg(src.join("src").join(l.src))
            .arg("-o")
            .arg(lib.join(format!("lib{}.so", l.name)));
        link_sim(&mut c, lib, l.sim_deps, rpath);
        c.args(l.sys.iter().map(|s| format!("-l{s}")));
        crate::run(&mut c)?;
    }
    Ok(())
}

/// Links the simulated libraries `names`, built in `lib` and found at
/// `rpath` at run time.
fn link_sim(c: &mut Command, lib: &std::path::Path, names: &[&str], rpath: &str) {
    if !names.is_empty() {
        c.arg("-L").arg(lib);
        for n in names {
            c.arg(format!("-l{n}"));
        }
        c.arg(format!("-Wl,-rpath,{rpath}"));
    }
}

/// The public headers of the simulated libraries, in sim/include.
pub fn headers() -> impl Iterator<Item = std::path::PathBuf> {
    let src = crate::root().join("sim/include");
    HEADERS.iter().map(move |h| src.join(h))
}

pub fn build() -> anyhow::Result<Sim> {
    let src = crate::root().join("sim");
    let root = crate::target_dir().join("sim");
    let (lib, bin, include) = (root.join("lib"), root.join("bin"), root.join("include"));
    for d in [&lib, &bin, &include] {
        std::fs::create_dir_all(d)?;
    }
    for h in HEADERS {
        std::fs::copy(src.join("include").join(h), include.join(h))?;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    // Links the simulated libraries `names`, found (and at run time) in lib/.
    let rpath = lib.display().to_string();
    build_libraries(&|| Command::new(&cc), &lib, &rpath)?;
    // The library the soak workload loads and unloads every second: a
    // workload's, not the runtime's, so it is not among LIBS (which a
    // release ships); in lib/, where the workload's runpath finds it.
    crate::run(
        Command::new(&cc)
            .args(CFLAGS)
            .args(["-fPIC", "-shared"])
            .arg(src.join("workloads/soak_plugin.c"))
            .arg("-o")
            .arg(lib.join("libsoak_plugin.so")),
    )?;
    for (name, links, sys) in WORKLOADS {
        let mut c = Command::new(&cc);
        // -rdynamic exports kernel functions so the runtime can name them
        // (dladdr) in its ground truth, as a real runtime names kernels.
        c.args(CFLAGS)
            .args(["-Wno-unused-function", "-rdynamic"])
            .arg("-I")
            .arg(src.join("include"))
            .arg(src.join("workloads").join(format!("{name}.c")))
            .arg("-o")
            .arg(bin.join(name));
        link_sim(&mut c, &lib, links, &rpath);
        c.args(["-lpthread", "-ldl"]);
        c.args(sys.iter().map(|s| format!("-l{s}")));
        crate::run(&mut c)?;
    }
    Ok(Sim { root, lib, bin })
}
