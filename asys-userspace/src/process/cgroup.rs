//! Control groups: which cgroup a process is in (`/proc/PID/cgroup`, v2 and
//! v1), the container it belongs to (recognized from the cgroup path, as the
//! container runtimes name their cgroups), and `--cgroup` / `--container`
//! filters, resolved to the cgroup v2 directory whose inode is what the
//! kernel's `bpf_get_current_ancestor_cgroup_id` compares.
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("--cgroup and --container need cgroup v2, and no cgroup2 file system is mounted")]
    NoCgroup2,
    #[error(
        "--cgroup '{0}': not a cgroup path (a path in the cgroup v2 hierarchy, or under its mount point, without '.' or '..')"
    )]
    BadPath(String),
    #[error("--cgroup {path}: no such cgroup v2 directory under {root} ({source})")]
    NotFound {
        path: String,
        root: PathBuf,
        source: std::io::Error,
    },
    #[error("--cgroup {0}: not a cgroup v2 directory")]
    NotCgroup(String),
    #[error("--container {0}: a container id is hexadecimal (at least 1 digit, at most 64)")]
    BadId(String),
    #[error(
        "--container {0}: no container on this machine has such an id (looked for the cgroups docker, containerd, CRI-O, podman and kubernetes make, in the cgroup v2 tree at {1})"
    )]
    NoContainer(String, PathBuf),
    #[error("--container {prefix}: the prefix is ambiguous ({count} containers: {examples})")]
    Ambiguous {
        prefix: String,
        count: usize,
        examples: String,
    },
}

/// A process's control group, as `/proc/PID/cgroup` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessCgroup {
    /// The cgroup v2 path ("0::/..."), else the v1 path of the `name=systemd`
    /// hierarchy, else of the first controller listed.
    pub path: String,
    /// Whether `path` is the unified (v2) hierarchy's.
    pub v2: bool,
    pub container: Option<CgroupContainer>,
}

/// A container recognized in a cgroup path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupContainer {
    pub id: String,
    pub runtime: Runtime,
    /// The container's own cgroup: the path up to the component that names
    /// it (its processes may sit in cgroups below it).
    pub cgroup: String,
}

/// Which runtime's naming a container id was recognized by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `docker-<id>.scope` (systemd driver) or `/docker/<id>` (cgroupfs).
    Docker,
    /// `cri-containerd-<id>.scope`.
    Containerd,
    /// `crio-<id>.scope` or `crio-<id>`.
    CriO,
    /// `libpod-<id>.scope` or `libpod-<id>`.
    Podman,
    /// A bare id under a `kubepods` cgroup (the kubelet's cgroupfs driver).
    Kubernetes,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
            Runtime::Podman => "podman",
            Runtime::Kubernetes => "kubernetes",
        }
    }
}

/// The cgroup of `pid`; None once it is gone (or /proc hides it).
pub fn of_process(pid: u32) -> Option<ProcessCgroup> {
    parse_proc_cgroup(&std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?)
}

/// Parses the text of `/proc/PID/cgroup`: `ID:CONTROLLERS:PATH` lines, the
/// unified hierarchy's being `0::PATH`.
pub fn parse_proc_cgroup(text: &str) -> Option<ProcessCgroup> {
    let mut v2 = None;
    let mut systemd = None;
    let mut first_v1 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        } else if controllers == "name=systemd" {
            systemd = Some(path);
        } else if first_v1.is_none() && !controllers.is_empty() {
            first_v1 = Some(path);
        }
    }
    // On a hybrid host the unified hierarchy may hold no controllers and
    // every process at its root, while the v1 hierarchies say where
    // containers are: the v2 path wins unless it is the bare root.
    let (path, is_v2) = match (v2, systemd.or(first_v1)) {
        (Some(p), Some(v1)) if p == "/" && v1 != "/" => (v1, false),
        (Some(p), _) => (p, true),
        (None, Some(v1)) => (v1, false),
        (None, None) => return None,
    };
    // A container is recognized in any hierarchy's path (a v1 controller may
    // name it while the others do not).
    let container = container_in(path).or_else(|| {
        text.lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .find_map(container_in)
    });
    Some(ProcessCgroup {
        path: path.to_string(),
        v2: is_v2,
        container,
    })
}

fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// The container a cgroup path names, by the runtimes' conventions; the
/// innermost one if containers nest.
pub fn container_in(path: &str) -> Option<CgroupContainer> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let under_kubepods = |i: usize| parts[..i].iter().any(|p| p.starts_with("kubepods"));
    for (i, part) in parts.iter().enumerate().rev() {
        let stem = part.strip_suffix(".scope").unwrap_or(part);
        let named = [
            ("docker-", Runtime::Docker),
            ("cri-containerd-", Runtime::Containerd),
            ("crio-", Runtime::CriO),
            ("libpod-", Runtime::Podman),
        ]
        .into_iter()
        .find_map(|(prefix, runtime)| {
            stem.strip_prefix(prefix)
                .filter(|id| is_container_id(id))
                .map(|id| (id, runtime))
        });
        let found = named.or_else(|| {
            if !is_container_id(part) || i == 0 {
                return None;
            }
            match parts[i - 1] {
                "docker" => Some((*part, Runtime::Docker)),
                _ if under_kubepods(i) => Some((*part, Runtime::Kubernetes)),
                _ => None,
            }
        });
        if let Some((id, runtime)) = found {
            return Some(CgroupContainer {
                id: id.to_string(),
                runtime,
                cgroup: format!("/{}", parts[..=i].join("/")),
            });
        }
    }
    None
}

/// The mount point of the cgroup v2 hierarchy (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid host), from `/proc/self/mountinfo`.
pub fn v2_root() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let (before, after) = line.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let root = before.split_whitespace().nth(3)?;
        let mount = before.split_whitespace().nth(4)?;
        // Only a mount of the hierarchy's own root shows every cgroup.
        (root == "/").then(|| PathBuf::from(unescape_mountinfo(mount)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("x"), 8)
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

// The filter itself is plain data in the settings; how one is found lives here.
pub use crate::settings::CgroupFilter;

impl CgroupFilter {
    /// `--cgroup PATH`: a path in the hierarchy ("/a/b") or under its mount
    /// point ("/sys/fs/cgroup/a/b").
    pub fn for_path(path: &str) -> Result<Self, CgroupError> {
        let root = v2_root().ok_or(CgroupError::NoCgroup2)?;
        Self::resolve(&root, path)
    }

    /// `--container ID`: the cgroup of the one container whose id starts
    /// with `prefix`, found in the cgroup v2 tree.
    pub fn for_container(prefix: &str) -> Result<Self, CgroupError> {
        if prefix.is_empty() || prefix.len() > 64 || !prefix.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(CgroupError::BadId(prefix.into()));
        }
        let prefix_lc = prefix.to_ascii_lowercase();
        let root = v2_root().ok_or(CgroupError::NoCgroup2)?;
        let mut found: std::collections::BTreeMap<String, String> = Default::default();
        walk(&root, &root, 0, &mut |rel| {
            if let Some(c) = container_in(rel)
                && c.id.starts_with(&prefix_lc)
            {
                found.entry(c.id).or_insert(c.cgroup);
            }
        });
        match found.len() {
            0 => Err(CgroupError::NoContainer(prefix.into(), root)),
            1 => {
                let (id, cgroup) = found.into_iter().next().expect("one");
                let mut f = Self::resolve(&root, &cgroup)?;
                f.container = Some(id);
                Ok(f)
            }
            count => Err(CgroupError::Ambiguous {
                prefix: prefix.into(),
                count,
                examples: found
                    .keys()
                    .take(3)
                    .map(|id| &id[..12])
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    fn resolve(root: &Path, path: &str) -> Result<Self, CgroupError> {
        use std::os::unix::fs::MetadataExt;
        if path.is_empty() {
            return Err(CgroupError::BadPath(path.into()));
        }
        let rel = Path::new(path)
            .strip_prefix(root)
            .unwrap_or(Path::new(path));
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                std::path::Component::RootDir => {}
                std::path::Component::Normal(n) => parts.push(
                    n.to_str()
                        .ok_or_else(|| CgroupError::BadPath(path.into()))?,
                ),
                _ => return Err(CgroupError::BadPath(path.into())),
            }
        }
        let joined = format!("/{}", parts.join("/"));
        let dir =
            crate::process::mapped_file::open_beneath(root, &joined, true).map_err(|source| {
                CgroupError::NotFound {
                    path: path.into(),
                    root: root.to_path_buf(),
                    source,
                }
            })?;
        let md = dir.metadata().map_err(|source| CgroupError::NotFound {
            path: path.into(),
            root: root.to_path_buf(),
            source,
        })?;
        if !md.is_dir() || !is_cgroup2(&dir) {
            return Err(CgroupError::NotCgroup(path.into()));
        }
        Ok(Self {
            path: joined,
            id: md.ino(),
            level: parts.len() as u32,
            container: None,
        })
    }

    /// Whether a process in cgroup `path` (v2) is selected.
    pub fn contains(&self, path: &str) -> bool {
        self.path == "/"
            || path == self.path
            || path
                .strip_prefix(self.path.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Whether process `pid` is selected (by its cgroup v2 path).
    pub fn contains_pid(&self, pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("0::").map(|p| self.contains(p)))
            })
            .unwrap_or(false)
    }
}

/// Whether `dir` lies on a cgroup2 file system.
fn is_cgroup2(dir: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    // SAFETY: fstatfs writes the struct it is given; all-zero is a valid one.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid open descriptor and a valid struct pointer.
    (unsafe { libc::fstatfs(dir.as_raw_fd(), &mut st) } == 0)
        && st.f_type as i64 == CGROUP2_SUPER_MAGIC
}

/// Calls `each` with the hierarchy path of every cgroup below `dir`, at most
/// 16 levels down; links are not followed (cgroupfs has none).
fn walk(root: &Path, dir: &Path, depth: u32, each: &mut dyn FnMut(&str)) {
    if depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = e.path();
        if let Ok(rel) = p.strip_prefix(root) {
            each(&format!("/{}", rel.display()));
        }
        walk(root, &p, depth + 1, each);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f3b9c0e5d2a1b7c8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d";

    #[test]
    fn container_ids_of_each_runtime() {
        let c = |p: &str| container_in(p).map(|c| (c.id, c.runtime, c.cgroup));
        assert_eq!(
            c(&format!("/system.slice/docker-{ID}.scope")),
            Some((
                ID.into(),
                Runtime::Docker,
                format!("/system.slice/docker-{ID}.scope")
            ))
        );
        assert_eq!(
            c(&format!("/docker/{ID}")),
            Some((ID.into(), Runtime::Docker, format!("/docker/{ID}")))
        );
        let k8s = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(c(&k8s).unwrap().1, Runtime::Containerd);
        assert_eq!(
            c(&format!("/machine.slice/crio-{ID}.scope")).unwrap().1,
            Runtime::CriO
        );
        assert_eq!(c(&format!("/crio-{ID}")).unwrap().1, Runtime::CriO);
        assert_eq!(
            c(&format!("/machine.slice/libpod-{ID}.scope/container")),
            Some((
                ID.into(),
                Runtime::Podman,
                format!("/machine.slice/libpod-{ID}.scope")
            ))
        );
        assert_eq!(
            c(&format!("/kubepods/burstable/pod5678/{ID}")).unwrap().1,
            Runtime::Kubernetes
        );
        // Not containers: a bare id elsewhere, a short or upper-case id,
        // conmon's scope (its id is not 64 hex digits after the prefix).
        assert_eq!(c(&format!("/user.slice/{ID}")), None);
        assert_eq!(c("/system.slice/docker-abc123.scope"), None);
        assert_eq!(c(&format!("/docker-{}.scope", ID.to_uppercase())), None);
        assert_eq!(c(&format!("/machine.slice/libpod-conmon-{ID}.scope")), None);
        assert_eq!(c("/"), None);
    }

    #[test]
    fn proc_cgroup_v2_v1_and_hybrid() {
        let v2 = parse_proc_cgroup(&format!("0::/system.slice/docker-{ID}.scope\n")).unwrap();
        assert!(v2.v2);
        assert_eq!(v2.path, format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(v2.container.unwrap().id, ID);
        // Hybrid, everyone at the unified root: the v1 systemd path says more.
        let hybrid = parse_proc_cgroup(&format!(
            "9:name=systemd:/docker/{ID}\n4:memory:/docker/{ID}\n0::/\n"
        ))
        .unwrap();
        assert!(!hybrid.v2);
        assert_eq!(hybrid.path, format!("/docker/{ID}"));
        assert_eq!(hybrid.container.unwrap().runtime, Runtime::Docker);
        // Hybrid with the process in a unified cgroup: that one.
        let moved = parse_proc_cgroup("9:name=systemd:/\n4:memory:/x\n0::/asys-test-1\n").unwrap();
        assert_eq!((moved.path.as_str(), moved.v2), ("/asys-test-1", true));
        assert_eq!(moved.container, None);
        // v1 only: the first controller when there is no systemd line; a
        // container named by one controller only is still found.
        let v1 = parse_proc_cgroup(&format!("4:memory:/a\n3:cpu:/docker/{ID}\n")).unwrap();
        assert_eq!((v1.path.as_str(), v1.v2), ("/a", false));
        assert_eq!(v1.container.unwrap().id, ID);
        assert_eq!(parse_proc_cgroup(""), None);
        assert_eq!(parse_proc_cgroup("garbage\n"), None);
    }

    #[test]
    fn a_filter_holds_its_cgroup_and_what_is_below() {
        let f = CgroupFilter {
            path: "/a/b".into(),
            id: 1,
            level: 2,
            container: None,
        };
        assert!(f.contains("/a/b"));
        assert!(f.contains("/a/b/c"));
        assert!(!f.contains("/a/bc"));
        assert!(!f.contains("/a"));
    }

    #[test]
    fn bad_filters_are_refused() {
        assert!(matches!(
            CgroupFilter::for_container("xyz"),
            Err(CgroupError::BadId(_))
        ));
        assert!(matches!(
            CgroupFilter::for_container(""),
            Err(CgroupError::BadId(_))
        ));
        if let Some(root) = v2_root() {
            for bad in ["/a/../b", "", "./a"] {
                assert!(matches!(
                    CgroupFilter::resolve(&root, bad),
                    Err(CgroupError::BadPath(_))
                ));
            }
            assert!(matches!(
                CgroupFilter::resolve(&root, "/asys-no-such-cgroup-here"),
                Err(CgroupError::NotFound { .. })
            ));
            let top = CgroupFilter::resolve(&root, "/").unwrap();
            assert_eq!((top.level, top.path.as_str()), (0, "/"));
        }
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo(r"/a\040b"), "/a b");
        assert_eq!(unescape_mountinfo("/sys/fs/cgroup"), "/sys/fs/cgroup");
    }
}
