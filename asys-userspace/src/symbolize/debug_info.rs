//! Where a binary's debug information is: the binary itself, or a separate
//! debug file found the ways gdb and elfutils look for one, on disk only:
//! by build id under each debug root (`/usr/lib/debug/.build-id/xx/rest.debug`)
//! and in debuginfod's client caches (`BUILDID/debuginfo`), then by the
//! binary's `.gnu_debuglink` name next to it, in its `.debug/` folder and
//! under each debug root. A file found by build id must carry that id; one
//! found by its debuglink name must match the link's CRC (and the binary's
//! build id where both have one), or it is skipped: a stale debug file would
//! name frames wrongly. Where none is found, a debuginfod server may have it
//! (`debuginfod.rs`, when `DEBUGINFOD_URLS` names one).
use std::path::{Path, PathBuf};

use object::Object;

use crate::elf::mapped::FileBytes;

/// Replaces `/usr/lib/debug` as the one debug root. For tests, which cannot
/// write the system's folder; documented in docs/report-format.md.
pub const DEBUG_ROOT_ENV: &str = "ASYS_DEBUG_ROOT";

/// The folders searched.
#[derive(Debug, Clone)]
pub struct Roots {
    pub debug_dirs: Vec<PathBuf>,
    pub debuginfod_caches: Vec<PathBuf>,
    /// The debuginfod client, asked last (None: no server named).
    pub debuginfod: Option<std::sync::Arc<super::debuginfod::Client>>,
}

impl Roots {
    /// `/usr/lib/debug` (or `$ASYS_DEBUG_ROOT`), and the debuginfod client's
    /// cache as it picks it: `$DEBUGINFOD_CACHE_PATH`, else
    /// `$XDG_CACHE_HOME/debuginfod_client`, else
    /// `~/.cache/debuginfod_client`; and the process's debuginfod client.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let debug_dirs = vec![
            var(DEBUG_ROOT_ENV)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/usr/lib/debug")),
        ];
        let cache = var("DEBUGINFOD_CACHE_PATH")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("debuginfod_client")))
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/debuginfod_client")));
        Self {
            debug_dirs,
            debuginfod_caches: cache.into_iter().collect(),
            debuginfod: super::debuginfod::global(),
        }
    }
}

/// A separate debug file, mapped.
pub struct DebugFile {
    pub path: PathBuf,
    pub data: std::sync::Arc<FileBytes>,
    /// Its build id (hex), when it came from debuginfod (a server, or the
    /// client's cache): counted in the recording's last line.
    pub debuginfod: Option<String>,
}

pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Maps `path` if every link on the way is one asys may follow (owned by
/// root or the caller: `trusted_path`) and it is a regular file (opening a
/// FIFO planted there would block).
fn open_trusted(path: &Path) -> Option<FileBytes> {
    asys_report::trusted_path::check(path).ok()?;
    FileBytes::map(path, &asys_report::untrusted::open::Policy::NAMED).ok()
}

fn build_id_of(data: &[u8]) -> Option<Vec<u8>> {
    let obj = object::File::parse(data).ok()?;
    obj.build_id().ok()?.map(<[u8]>::to_vec)
}

/// The debug file carrying build id `id`, by its build-id path under each
/// debug root, then in each debuginfod cache.
pub fn by_build_id(roots: &Roots, id: &[u8]) -> Option<DebugFile> {
    if id.len() < 2 {
        return None;
    }
    let h = hex(id);
    let (head, rest) = h.split_at(2);
    let candidates = roots
        .debug_dirs
        .iter()
        .map(|d| d.join(".build-id").join(head).join(format!("{rest}.debug")))
        .chain(
            roots
                .debuginfod_caches
                .iter()
                .map(|c| c.join(&h).join("debuginfo")),
        );
    for path in candidates {
        if let Some(data) = open_trusted(&path)
            && build_id_of(&data).as_deref() == Some(id)
            && is_elf_with_dwarf(&data)
        {
            return Some(DebugFile {
                path,
                data: std::sync::Arc::new(data),
                debuginfod: None,
            });
        }
    }
    None
}

fn is_elf_with_dwarf(data: &[u8]) -> bool {
    object::File::parse(data).is_ok_and(|o| super::lines::has_dwarf(&o))
}

/// The debug file named by the `.gnu_debuglink` of the binary `obj`, whose
/// path is `binary` (None: its folder is not known, as for a file read
/// through a descriptor; only the debug roots' build-id paths then apply).
pub fn by_debuglink(
    roots: &Roots,
    binary: Option<&Path>,
    obj: &object::File<'_>,
) -> Option<DebugFile> {
    let (name, crc) = obj.gnu_debuglink().ok()??;
    let name = std::str::from_utf8(name).ok()?;
    // A bare file name: the link is the binary's say, not a path to follow.
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    let dir = binary?.parent()?;
    if !dir.is_absolute() {
        return None;
    }
    let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
    for root in &roots.debug_dirs {
        candidates.push(root.join(dir.strip_prefix("/").ok()?).join(name));
    }
    let own_id = obj.build_id().ok().flatten();
    for path in candidates {
        // The binary itself when the link names it (never: a debug file
        // has another name), or a file of another build: skipped.
        if Some(path.as_path()) == binary {
            continue;
        }
        let Some(data) = open_trusted(&path) else {
            continue;
        };
        if crc32fast::hash(&data) != crc {
            continue;
        }
        if let (Some(own), Some(theirs)) = (own_id, build_id_of(&data))
            && own != theirs.as_slice()
        {
            continue;
        }
        if is_elf_with_dwarf(&data) {
            return Some(DebugFile {
                path,
                data: std::sync::Arc::new(data),
                debuginfod: None,
            });
        }
    }
    None
}

/// The separate debug file for a binary without DWARF of its own: on this
/// machine, else from debuginfod.
pub fn find(roots: &Roots, binary: Option<&Path>, obj: &object::File<'_>) -> Option<DebugFile> {
    let id = obj.build_id().ok().flatten();
    if let Some(id) = id
        && let Some(found) = by_build_id(roots, id)
    {
        return Some(found);
    }
    by_debuglink(roots, binary, obj).or_else(|| from_debuginfod(roots, id?))
}

/// The debug file of build id `id` from the debuginfod servers (or the
/// client's cache); checked there to be ELF of that build id.
pub fn from_debuginfod(roots: &Roots, id: &[u8]) -> Option<DebugFile> {
    roots.debuginfod.as_ref()?.debug_file(id)
}

/// The debug file of build id `id`: on this machine, else from debuginfod.
pub fn by_build_id_anywhere(roots: &Roots, id: &[u8]) -> Option<DebugFile> {
    by_build_id(roots, id).or_else(|| from_debuginfod(roots, id))
}

#[cfg(test)]
mod tests {
    #[test]
    fn build_ids_print_as_lowercase_hex() {
        assert_eq!(super::hex(&[0x0a, 0xbc, 0xff]), "0abcff");
    }
}
