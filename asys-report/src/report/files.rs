//! Creating a report's files: afresh, never through a link.
use std::{fs::File, path::Path};

/// Creates `path` afresh (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600): never opens
/// a file or follows a link that someone else put there.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_new_never_follows_a_link_or_reuses_a_file() {
        let dir = std::env::temp_dir().join(format!("asys-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_new(&link).is_err());
        assert!(create_new(&target).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(create_new(&dir.join("new")).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
