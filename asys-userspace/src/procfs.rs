//! Reading /proc: a process's file-backed executable mappings.
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub executable: bool,
    /// (major:minor device, inode): identifies the file across paths.
    pub dev: String,
    pub inode: u64,
    pub path: PathBuf,
}

/// File-backed mappings of `pid`, in address order, and where its vDSO is
/// (one read of the maps file).
pub fn mappings_and_vdso(pid: u32) -> std::io::Result<(Vec<Mapping>, Option<AddressRange>)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok((
        text.lines().filter_map(parse_line).collect(),
        vdso_in(&text),
    ))
}

fn parse_line(line: &str) -> Option<Mapping> {
    let mut it = line.splitn(6, char::is_whitespace);
    let range = it.next()?;
    let perms = it.next()?;
    let offset = u64::from_str_radix(it.next()?, 16).ok()?;
    let dev = it.next()?.to_string();
    let inode: u64 = it.next()?.parse().ok()?;
    let path = it.next()?.trim_start();
    if inode == 0 || !path.starts_with('/') {
        return None;
    }
    let (s, e) = range.split_once('-')?;
    Some(Mapping {
        start: u64::from_str_radix(s, 16).ok()?,
        end: u64::from_str_radix(e, 16).ok()?,
        offset,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        dev,
        inode,
        path: PathBuf::from(path.strip_suffix(" (deleted)").unwrap_or(path)),
    })
}

/// Start and end (exclusive) of a mapping.
pub type AddressRange = (u64, u64);

/// The name the kernel gives the vDSO's mapping (and asys its module).
pub const VDSO: &str = "[vdso]";

/// Where `pid`'s vDSO is mapped: the kernel's code for fast system calls
/// (clock_gettime), with no file behind it.
pub fn vdso(pid: u32) -> Option<AddressRange> {
    vdso_in(&std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?)
}

/// The vDSO's range in the text of a maps file.
fn vdso_in(text: &str) -> Option<AddressRange> {
    let line = text.lines().find(|l| l.ends_with(VDSO))?;
    let (s, e) = line.split_whitespace().next()?.split_once('-')?;
    Some((
        u64::from_str_radix(s, 16).ok()?,
        u64::from_str_radix(e, 16).ok()?,
    ))
}

/// Every process id in /proc.
pub fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The ids of `pid`'s threads (none if it is gone).
pub fn task_ids(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `pid` is a running process (exists and is not a zombie).
pub fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The state follows the command, which is in parentheses.
            let after = s.rsplit_once(')')?.1;
            after
                .split_whitespace()
                .next()
                .map(|st| st != "Z" && st != "X")
        })
        .unwrap_or(false)
}

pub fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `id` is a process (thread group leader) rather than a thread.
pub fn is_process(id: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{id}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse::<u32>().ok())
        })
        == Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_backed_executable_mapping() {
        let m = parse_line(
            "7f1c2a000000-7f1c2a021000 r-xp 00002000 fe:01 1234   /usr/lib/libhggcrt.so",
        )
        .unwrap();
        assert_eq!(m.start, 0x7f1c2a000000);
        assert_eq!(m.end, 0x7f1c2a021000);
        assert_eq!(m.offset, 0x2000);
        assert!(m.executable);
        assert_eq!(m.inode, 1234);
        assert_eq!(m.path, PathBuf::from("/usr/lib/libhggcrt.so"));
    }

    #[test]
    fn skips_anonymous_and_special_mappings() {
        assert!(parse_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0   [stack]").is_none());
        assert!(parse_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0").is_none());
    }
}
