//! Reading /proc: a process's file-backed executable mappings, its rank
//! and where its standard streams go.
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsEntry {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub executable: bool,
    /// (major:minor device, inode): identifies the file across paths.
    pub dev: String,
    pub inode: u64,
    pub path: PathBuf,
}

impl MapsEntry {
    /// (device, inode) as `stat` gives them (st_dev, st_ino), from the maps
    /// line's `major:minor` (hex) and inode; None if the device is garbled.
    pub fn key(&self) -> Option<(u64, u64)> {
        let (major, minor) = self.dev.split_once(':')?;
        let major = u32::from_str_radix(major, 16).ok()?;
        let minor = u32::from_str_radix(minor, 16).ok()?;
        Some((libc::makedev(major, minor), self.inode))
    }
}

/// File-backed mappings of `pid`, in address order, and where its vDSO is
/// (one read of the maps file).
pub fn mappings_and_vdso(pid: u32) -> std::io::Result<(Vec<MapsEntry>, Option<AddressRange>)> {
    Ok(parse_maps(&read_maps(pid)?))
}

/// Larger maps files are read up to here: 65,530 mappings (the default
/// `vm.max_map_count`) with 4 KiB paths would be 268 MB, all the process's
/// to choose.
const MAX_MAPS_BYTES: u64 = 32 << 20;

/// `/proc/PID/maps` as text, at most [`MAX_MAPS_BYTES`]: a path that is not
/// UTF-8 (the process names its files) reads with U+FFFD in it rather than
/// making the whole file unreadable (which hid the process from asys). Such a
/// path names no file on the host, so the mapped file is reached through
/// `map_files` and kept open for the symbolize stage (`process/mapped_file.rs`).
fn read_maps(pid: u32) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/maps"))?
        .take(MAX_MAPS_BYTES)
        .read_to_end(&mut bytes)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// The file-backed mappings and the vDSO's range in the text of a maps
/// file. The paths in it are the process's to choose (any bytes but a
/// newline), so a line that does not parse is skipped, never trusted.
pub fn parse_maps(text: &str) -> (Vec<MapsEntry>, Option<AddressRange>) {
    (text.lines().filter_map(parse_line).collect(), vdso_in(text))
}

fn parse_line(line: &str) -> Option<MapsEntry> {
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
    Some(MapsEntry {
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
    vdso_in(&read_maps(pid).ok()?)
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

/// The processes `pid` forked that run now (its child processes, not its
/// threads). Each thread's `/proc/PID/task/TID/children` says whom that
/// thread forked; where one cannot be read (a kernel without
/// CONFIG_PROC_CHILDREN, or a thread that exited meanwhile, whose children
/// went to another thread already read) every process's parent is read
/// from its `stat` instead.
pub fn children(pid: u32) -> Vec<u32> {
    let mut kids = Vec::new();
    let tids = task_ids(pid);
    for tid in &tids {
        match std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")) {
            Ok(text) => kids.extend(
                text.split_whitespace()
                    .filter_map(|w| w.parse::<u32>().ok()),
            ),
            Err(_) => return children_by_parent(pid),
        }
    }
    kids.sort_unstable();
    kids.dedup();
    kids
}

/// The processes whose parent is `pid`, from every process's `stat`.
fn children_by_parent(pid: u32) -> Vec<u32> {
    let mut kids: Vec<u32> = all_pids()
        .into_iter()
        .filter(|&p| parent_of(p) == Some(pid))
        .collect();
    kids.sort_unstable();
    kids
}

/// `pid`'s parent process (the `ppid` of its `stat`).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ppid(&stat)
}

/// The fourth field of a `stat` line; the command before it, in
/// parentheses, may hold anything (spaces, parentheses): it ends at the
/// last ')'.
fn parse_stat_ppid(stat: &str) -> Option<u32> {
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// When `pid` started, in clock ticks since boot (the 22nd field of its
/// `stat`): with the pid, it names one process for good, as a pid alone
/// may be reused.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_start_time(&stat)
}

/// The 22nd field of a `stat` line (the 20th after the command).
fn parse_stat_start_time(stat: &str) -> Option<u64> {
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Whether `pid` is a running process (exists and is not a zombie).
pub fn is_alive(pid: u32) -> bool {
    process_state(pid).is_some_and(|st| st != 'Z' && st != 'X')
}

/// The state letter of process `pid` (`R`, `S`, `T`, `Z`, ...).
pub fn process_state(pid: u32) -> Option<char> {
    state_in(&format!("/proc/{pid}/stat"))
}

/// The state letter of thread `tid` of process `pid`.
pub fn thread_state(pid: u32, tid: u32) -> Option<char> {
    state_in(&format!("/proc/{pid}/task/{tid}/stat"))
}

fn state_in(stat: &str) -> Option<char> {
    let s = std::fs::read_to_string(stat).ok()?;
    // The state follows the command, which is in parentheses (and may
    // hold anything, parentheses too).
    s.rsplit_once(')')?
        .1
        .split_whitespace()
        .next()?
        .chars()
        .next()
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

/// A process's memory as /proc/PID/status counts it, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStatus {
    /// VmRSS: resident pages, RssAnon + RssFile + RssShmem.
    pub rss: u64,
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    /// VmSize: the virtual address space.
    pub vm_size: u64,
}

/// The status file is a few kB; more is not a status file.
const STATUS_LIMIT: u64 = 64 << 10;

/// `pid`'s memory from /proc/PID/status: one small read of counters the
/// kernel keeps per process (statm has no anonymous/shared split, and
/// smaps_rollup walks every page table). None if the process is gone or
/// a zombie (which has no memory lines).
pub fn memory_status(pid: u32) -> Option<MemoryStatus> {
    use std::io::Read;
    let file = std::fs::File::open(format!("/proc/{pid}/status")).ok()?;
    let mut text = String::new();
    file.take(STATUS_LIMIT).read_to_string(&mut text).ok()?;
    parse_memory_status(&text)
}

/// The memory lines of a status file (`VmRSS:  1234 kB`); None without VmRSS.
fn parse_memory_status(text: &str) -> Option<MemoryStatus> {
    let mut m = MemoryStatus::default();
    let mut has_rss = false;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "VmRSS" => {
                has_rss = true;
                &mut m.rss
            }
            "RssAnon" => &mut m.anon,
            "RssFile" => &mut m.file,
            "RssShmem" => &mut m.shmem,
            "VmSize" => &mut m.vm_size,
            _ => continue,
        };
        let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        *slot = kib.checked_mul(1024)?;
    }
    has_rss.then_some(m)
}

/// Longest file-descriptor target kept: the link is the process's to
/// point anywhere, and a path longer than PATH_MAX names nothing.
const FD_TARGET_LIMIT: usize = 4096;

/// What `pid`'s descriptor `fd` refers to (a file's path, `pipe:[N]`,
/// `socket:[N]`, a terminal), as /proc/PID/fd names it; the link is read,
/// never followed. None if it is closed or the process is gone.
pub fn fd_target(pid: u32, fd: u32) -> Option<String> {
    let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let text = target.to_string_lossy();
    (text.len() <= FD_TARGET_LIMIT).then(|| text.into_owned())
}

/// The environment variables a job launcher sets to a process's rank, in
/// the order asys trusts them (Open MPI, Slurm, torchrun, MPICH/PMI), as
/// the asys options reference lists them.
pub const RANK_VARIABLES: [&str; 4] = ["OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK", "PMI_RANK"];

/// At most this much of a process's environment is read: it is the traced
/// process's to write, and a launcher puts its rank variables among the
/// first anyway.
const ENVIRON_LIMIT: u64 = 1 << 20;

/// `pid`'s rank in a parallel job, from the first of [`RANK_VARIABLES`] its
/// environment (as it was at exec) sets to a plain decimal number; None if
/// none does, or the process is gone or not readable.
pub fn rank_of(pid: u32) -> Option<u32> {
    use std::io::Read;
    let file = std::fs::File::open(format!("/proc/{pid}/environ")).ok()?;
    let mut bytes = Vec::new();
    file.take(ENVIRON_LIMIT).read_to_end(&mut bytes).ok()?;
    rank_in(&bytes)
}

/// The rank in an environment block (`NAME=value` entries, NUL-separated).
/// Values are the process's own: anything but 1 to 9 decimal digits is
/// ignored rather than trusted.
fn rank_in(environ: &[u8]) -> Option<u32> {
    let value_of = |name: &str| {
        environ.split(|&b| b == 0).find_map(|entry| {
            let rest = entry.strip_prefix(name.as_bytes())?;
            rest.strip_prefix(b"=")
        })
    };
    RANK_VARIABLES.iter().find_map(|name| {
        let v = value_of(name)?;
        if v.is_empty() || v.len() > 9 || !v.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(v).ok()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_parent_whatever_the_command_holds() {
        assert_eq!(parse_stat_ppid("42 (sh) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parse_stat_ppid("42 (a) b) (c) R 9 1 1"), Some(9));
        assert_eq!(parse_stat_ppid("42 (x"), None);
    }

    #[test]
    fn a_processes_start_time_is_read_past_a_command_with_parentheses() {
        // Field 22 of a real line of a process named "a) (b".
        let line = "7 (a) (b) S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50";
        assert_eq!(parse_stat_start_time(line), Some(987654));
        let own = start_time(std::process::id()).expect("this process has a start time");
        assert!(own > 0);
    }

    #[test]
    fn a_running_child_is_found_by_both_ways() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id();
        assert_eq!(parent_of(child.id()), Some(me));
        assert!(children(me).contains(&child.id()));
        assert!(children_by_parent(me).contains(&child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!children(me).contains(&child.id()));
    }

    #[test]
    fn a_mapped_file_named_in_bytes_that_are_not_utf8_leaves_the_maps_readable() {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::env::temp_dir().join(format!("asys-maps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(std::ffi::OsStr::from_bytes(b"lib\xff\xfe.so"));
        std::fs::write(&path, vec![1u8; 4096]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: a private read-only mapping of a file nothing else writes.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let (maps, _) = super::mappings_and_vdso(std::process::id()).expect("readable");
        assert!(
            maps.iter()
                .any(|m| m.path.to_string_lossy().contains("lib\u{fffd}\u{fffd}.so")),
            "the mapping is listed"
        );
        // And the rest of the file with it: this test binary's own mapping.
        let exe = std::env::current_exe().unwrap();
        assert!(maps.iter().any(|m| m.path == exe));
        drop(map);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rank_comes_from_the_first_variable_in_asys_order() {
        assert_eq!(rank_in(b"PATH=/bin\0RANK=3\0SLURM_PROCID=5\0"), Some(5));
        assert_eq!(rank_in(b"RANK=3\0PMI_RANK=1"), Some(3));
        assert_eq!(rank_in(b"XRANK=3\0RANKS=4\0"), None);
        // Garbage is skipped, not trusted: the next variable counts.
        assert_eq!(rank_in(b"SLURM_PROCID=-1\0RANK=2\0"), Some(2));
        assert_eq!(rank_in(b"RANK=99999999999\0"), None);
        assert_eq!(rank_in(b"RANK=\0"), None);
        assert_eq!(rank_in(b""), None);
    }

    #[test]
    fn memory_comes_from_the_status_lines_in_bytes() {
        let text = "Name:\tcat\nVmSize:\t    8000 kB\nVmRSS:\t    1000 kB\n\
                    RssAnon:\t     600 kB\nRssFile:\t     300 kB\nRssShmem:\t     100 kB\n";
        let m = parse_memory_status(text).unwrap();
        assert_eq!(m.rss, 1000 * 1024);
        assert_eq!(m.anon + m.file + m.shmem, m.rss);
        assert_eq!(m.vm_size, 8000 * 1024);
        // A zombie's status has no memory lines.
        assert!(parse_memory_status("Name:\tz\nState:\tZ (zombie)\n").is_none());
        // A malformed value is not read as something else.
        assert!(parse_memory_status("VmRSS:\t12 MB\n").is_none());
    }

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
        assert_eq!(m.key(), Some((libc::makedev(0xfe, 0x01), 1234)));
    }

    /// The whole text, as a process can shape it: a path with spaces and a
    /// `(deleted)` mark, a path with a newline cut into a line of its own
    /// (a name is any bytes but NUL), and the vDSO.
    #[test]
    fn a_maps_text_gives_its_file_mappings_and_the_vdso() {
        let text = "1000-2000 r-xp 00000000 fe:01 7 /tmp/a b.so (deleted)\n\
                    3000-4000 r-xp 00001000 fe:01 8 /tmp/x\n\
                    fake-line 0 0 0 /etc/shadow\n\
                    7ffd3000-7ffd5000 r-xp 00000000 00:00 0   [vdso]\n";
        let (maps, vdso) = parse_maps(text);
        let paths: Vec<_> = maps.iter().map(|m| m.path.clone()).collect();
        assert_eq!(
            paths,
            [PathBuf::from("/tmp/a b.so"), PathBuf::from("/tmp/x")]
        );
        assert_eq!(vdso, Some((0x7ffd3000, 0x7ffd5000)));
        assert_eq!(parse_maps(""), (vec![], None));
    }

    #[test]
    fn skips_anonymous_and_special_mappings() {
        assert!(parse_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0   [stack]").is_none());
        assert!(parse_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0").is_none());
    }
}
