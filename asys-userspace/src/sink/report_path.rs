//! Report names: expanding `-o` templates and checking the destination before
//! anything is recorded.
use std::path::{Path, PathBuf};

use asys_report::report::EXTENSION;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("output folder {0} does not exist")]
    NoFolder(PathBuf),
    #[error("output folder {0} is not writable: {1}")]
    NotWritable(PathBuf, std::io::Error),
    #[error("report {0} already exists; use -f true to overwrite it")]
    Exists(PathBuf),
    #[error("invalid report name template '{0}': {1}")]
    Template(String, String),
    #[error(transparent)]
    Untrusted(#[from] asys_report::trusted_path::TrustError),
}

/// Stands for %p in a session's report name until its application launches.
pub const PID_LATER: char = '\u{E000}';

/// Expands %h (host), %p (pid), %q{VAR}, %t (local time hh_mm_ss), %%, then
/// %i (first free index) in `template` and adds the extension.
pub fn expand(template: &str, pid: Option<u32>) -> Result<PathBuf, OutputError> {
    expand_with(template, pid.map(|p| p.to_string()).unwrap_or_default())
}

/// [`expand`] for a pid not known yet: %p becomes [`PID_LATER`], which
/// [`fill_pid`] replaces.
pub fn expand_pid_later(template: &str) -> Result<PathBuf, OutputError> {
    expand_with(template, PID_LATER.to_string())
}

/// Puts the pid where [`expand_pid_later`] left a place for it.
pub fn fill_pid(path: &Path, pid: u32) -> PathBuf {
    PathBuf::from(path.to_string_lossy().replace(PID_LATER, &pid.to_string()))
}

/// The longest report file name: the temporary names beside it
/// (`.NAME.tables-PID`, `NAME.tmp`) must still fit the file system's 255 bytes.
const MAX_NAME: usize = 200;

fn expand_with(template: &str, pid: String) -> Result<PathBuf, OutputError> {
    let bad = |why: &str| OutputError::Template(template.into(), why.into());
    let path = expand_unchecked(template, pid)?;
    let name = path.file_name().map(|n| n.len()).unwrap_or(0);
    // `NAME.asysrep`: a name of nothing would be a hidden `.asysrep`.
    if name <= EXTENSION.len() + 1 {
        return Err(bad("the report needs a name"));
    }
    if name > MAX_NAME {
        return Err(bad(&format!(
            "the report's name is longer than {MAX_NAME} bytes"
        )));
    }
    Ok(path)
}

fn expand_unchecked(template: &str, pid: String) -> Result<PathBuf, OutputError> {
    let bad = |why: &str| OutputError::Template(template.into(), why.into());
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    let mut has_index = false;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('h') => out.push_str(&hostname()),
            Some('p') => out.push_str(&pid),
            Some('t') => out.push_str(&local_time()),
            Some('i') => {
                has_index = true;
                out.push('\u{0}');
            }
            Some('q') => {
                if chars.next() != Some('{') {
                    return Err(bad("%q needs {VAR}"));
                }
                let mut var = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => var.push(c),
                        None => return Err(bad("%q{VAR} is missing its closing }")),
                    }
                }
                let value = std::env::var(&var).unwrap_or_default();
                // An environment value names a part of a file, never a folder.
                out.push_str(&value.replace('/', "_"));
            }
            Some(other) => return Err(bad(&format!("unknown macro %{other}"))),
            None => return Err(bad("ends with %")),
        }
    }
    let with_ext = |s: &str| {
        let p = PathBuf::from(s);
        if p.extension().is_some_and(|e| e == EXTENSION) {
            p
        } else {
            PathBuf::from(format!("{s}.{EXTENSION}"))
        }
    };
    if !has_index {
        return Ok(with_ext(&out));
    }
    for i in 1.. {
        let candidate = with_ext(&out.replace('\u{0}', &i.to_string()));
        if candidate.symlink_metadata().is_err() {
            return Ok(candidate);
        }
    }
    unreachable!()
}

/// Fails unless the report can be created at `path`: its folder exists, is
/// writable, and is reached only through links the caller trusts (see
/// [`asys_report::trusted_path`]); an existing report is replaced only with `-f`.
pub fn check_destination(path: &Path, force: bool) -> Result<(), OutputError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // The report's own name is replaced, never followed: only the folder
    // is looked up through links.
    asys_report::trusted_path::check(&dir)?;
    if !dir.is_dir() {
        return Err(OutputError::NoFolder(dir));
    }
    writable(&dir).map_err(|e| OutputError::NotWritable(dir.clone(), e))?;
    // A link at the report's own name counts as a report there: it is
    // replaced (never followed) only with -f.
    if path.symlink_metadata().is_ok() && !force {
        return Err(OutputError::Exists(path.to_path_buf()));
    }
    Ok(())
}

/// Whether a file can be created in `dir`, found by creating one without a
/// name (O_TMPFILE). Where the file system lacks O_TMPFILE (sysfs, some
/// network file systems) a named probe is made with O_EXCL|O_NOFOLLOW, which
/// never opens a file or link someone planted under its name, and removed.
fn writable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .mode(0o600)
        .open(dir)
    {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let mut last = e;
            for attempt in 0..8 {
                let probe = dir.join(format!(
                    ".asys-write-test-{}-{nanos}-{attempt}",
                    std::process::id()
                ));
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .mode(0o600)
                    .open(&probe)
                {
                    Ok(_) => {
                        let _ = std::fs::remove_file(&probe);
                        return Ok(());
                    }
                    // Someone else's name: another one.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = e,
                    Err(e) => return Err(e),
                }
            }
            Err(last)
        }
        Err(e) => Err(e),
    }
}

/// The local time as hh_mm_ss (the guide's %t).
fn local_time() -> String {
    // SAFETY: time accepts a null out-pointer and then only returns the time.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    // SAFETY: tm is plain integers (and a pointer that may be null): zero is valid.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads `now` and writes only the tm it is given.
    unsafe { libc::localtime_r(&now, &mut tm) };
    format!("{:02}_{:02}_{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// `p` made absolute (for what asys prints), or as it is if that fails.
pub fn absolute(p: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_macros_and_adds_extension() {
        assert_eq!(
            expand("a_%p", Some(42)).unwrap(),
            PathBuf::from("a_42.asysrep")
        );
        assert_eq!(
            expand("b%%c.asysrep", None).unwrap(),
            PathBuf::from("b%c.asysrep")
        );
        // SAFETY: no other thread of this test reads the environment meanwhile
        // (the variable is this test's own).
        unsafe { std::env::set_var("ASYS_TEST_Q", "../x") };
        assert_eq!(
            expand("r_%q{ASYS_TEST_Q}", None).unwrap(),
            PathBuf::from("r_.._x.asysrep")
        );
        assert!(expand("bad%z", None).is_err());
        // Said, not dropped: a %q without its closing brace, no name at all,
        // a name the temporary files beside it could not have.
        let err = |t: &str| expand(t, None).unwrap_err().to_string();
        assert!(err("r_%q{ASYS_TEST_Q").contains("closing }"));
        assert!(err("").contains("needs a name"));
        assert!(err("dir/").contains("needs a name"));
        assert!(err(&"x".repeat(240)).contains("longer than"));
        assert!(expand(&"x".repeat(150), None).is_ok());
        let t = expand("r_%t", None).unwrap();
        let t = t.to_str().unwrap();
        assert_eq!(t.len(), "r_hh_mm_ss.asysrep".len(), "{t}");
        assert!(
            t[2..10].chars().all(|c| c.is_ascii_digit() || c == '_'),
            "{t}"
        );
    }

    #[test]
    fn index_picks_first_free_name() {
        let dir = std::env::temp_dir().join(format!("asys-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = format!("{}/report%i", dir.display());
        assert_eq!(expand(&t, None).unwrap(), dir.join("report1.asysrep"));
        std::fs::write(dir.join("report1.asysrep"), b"x").unwrap();
        assert_eq!(expand(&t, None).unwrap(), dir.join("report2.asysrep"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
