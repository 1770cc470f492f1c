//! Whether a path asys is about to write under leads only through links the
//! caller trusts.
//!
//! Root writing reports on a shared machine must not be steered by another
//! user's symbolic link: `-o /tmp/x/r` where `/tmp/x` is a link planted by
//! `nobody` would put root's file wherever that user likes. The kernel's
//! `fs.protected_symlinks` guards only sticky world-writable folders, and is
//! off on some machines, so asys checks every link on the way itself: a link
//! owned by the caller or by root is followed, any other is refused.
use std::{
    ffi::OsString,
    os::unix::fs::MetadataExt,
    path::{Component, Path, PathBuf},
};

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "refusing to follow {link}: a link owned by uid {owner}, not by {}",
        if *caller == 0 { "root".to_string() } else { format!("uid {caller} or root") }
    )]
    ForeignLink {
        link: PathBuf,
        owner: u32,
        caller: u32,
    },
    #[error("{0}: too many levels of symbolic links")]
    Loop(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// The kernel's own limit on links followed in one lookup.
const MAX_LINKS: usize = 40;

/// Walks `path` (made absolute) component by component as the kernel would,
/// checking the owner of every symbolic link it passes, the links inside a
/// link's target too. Components that do not exist yet end the walk: asys
/// creates them itself (exclusively), so there is nothing to follow there.
pub fn check(path: &Path) -> Result<(), TrustError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let caller = unsafe { libc::geteuid() };
    let abs = std::path::absolute(path).map_err(|e| TrustError::Io(path.into(), e))?;
    // Components still to walk, the next one last.
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, &abs);
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = todo.pop() {
        if c == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&c);
        let meta = match std::fs::symlink_metadata(&next) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(TrustError::Io(next, e)),
        };
        if !meta.file_type().is_symlink() {
            at = next;
            continue;
        }
        if meta.uid() != caller && meta.uid() != 0 {
            return Err(TrustError::ForeignLink {
                link: next,
                owner: meta.uid(),
                caller,
            });
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(TrustError::Loop(path.into()));
        }
        let target = std::fs::read_link(&next).map_err(|e| TrustError::Io(next.clone(), e))?;
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        push_components(&mut todo, &target);
    }
    Ok(())
}

/// Pushes `p`'s normal and `..` components so that the first pops first.
fn push_components(todo: &mut Vec<OsString>, p: &Path) {
    let parts: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    todo.extend(parts.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("asys-trust-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch");
        d
    }

    #[test]
    fn own_links_and_missing_parts_pass() {
        let d = scratch("own");
        std::fs::create_dir(d.join("real")).expect("dir");
        symlink(d.join("real"), d.join("mine")).expect("link");
        symlink("real/../real", d.join("rel")).expect("link");
        check(&d.join("mine/new/report.asysrep")).expect("own link");
        check(&d.join("rel/x")).expect("relative link");
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn a_foreign_link_is_refused_even_inside_a_target() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            panic!("this test needs root (it makes links owned by another user)");
        }
        let d = scratch("foreign");
        std::fs::create_dir(d.join("real")).expect("dir");
        symlink(d.join("real"), d.join("theirs")).expect("link");
        let path = std::ffi::CString::new(d.join("theirs").into_os_string().into_encoded_bytes())
            .expect("path");
        // SAFETY: a valid C string; lchown changes the link itself.
        assert_eq!(unsafe { libc::lchown(path.as_ptr(), 65534, 65534) }, 0);
        let err = check(&d.join("theirs/report.asysrep")).expect_err("foreign link followed");
        assert!(
            matches!(err, TrustError::ForeignLink { owner: 65534, .. }),
            "{err}"
        );
        // Reached through a trusted link, the foreign one is still found.
        symlink(d.join("theirs"), d.join("mine")).expect("link");
        let err = check(&d.join("mine/r")).expect_err("foreign link behind an own one");
        assert!(matches!(err, TrustError::ForeignLink { .. }), "{err}");
        std::fs::remove_dir_all(&d).expect("clean");
    }
}
