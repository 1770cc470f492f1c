//! PPU metrics (`--ppu-metrics-device`): utilisation, memory, clock and
//! power of the simulated devices, from the files their runtime keeps in
//! /dev/shm (`sim/include/hgml.h`, the role NVML plays on NVIDIA).
//!
//! asys runs as root and these files are written by the traced (any)
//! user, so each is trusted only so far: opened without following links
//! and without blocking, a regular file of exactly the struct's size, named
//! for a running process and owned by that process's user, its header
//! matching its name. Its counters are the process's word for what its
//! device did; nothing else is read from it.
use std::{
    collections::BTreeMap,
    fs::File,
    os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt},
};

/// Where the simulated runtime puts its metrics files.
const SHM: &str = "/dev/shm";
const PREFIX: &str = "hgml-";
const MAGIC: u32 = 0x4c4d_4748;
const VERSION: u32 = 1;
/// `sizeof(struct hgml_shared)`.
const SIZE: usize = 80;

/// A device's counters as its runtime last published them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub pid: u32,
    pub device: u32,
    /// Busy time up to the read (ns).
    pub busy_ns: u64,
    pub sm_clock_mhz: u32,
    pub power_mw: u64,
    pub memory_used: u64,
    pub memory_total: u64,
    /// When it was read (CLOCK_MONOTONIC ns).
    pub at: u64,
}

/// The metrics files in /dev/shm that pass the checks, as (pid, device).
pub fn devices() -> Vec<(u32, u32)> {
    let mut v = files();
    v.retain(|&(pid, device)| read(pid, device).is_some());
    v
}

/// The files in /dev/shm named as metrics files, as (pid, device); not
/// checked yet ([`read`] does).
pub fn files() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir(SHM) else {
        return Vec::new();
    };
    let mut v: Vec<(u32, u32)> = entries
        .filter_map(|e| parse_name(&e.ok()?.file_name().into_string().ok()?))
        .collect();
    v.sort_unstable();
    v
}

/// `hgml-PID-DEVICE` → (pid, device).
fn parse_name(name: &str) -> Option<(u32, u32)> {
    let (pid, device) = name.strip_prefix(PREFIX)?.split_once('-')?;
    let all_digits =
        |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(pid) || !all_digits(device) {
        return None;
    }
    Some((pid.parse().ok()?, device.parse().ok()?))
}

/// The counters of `pid`'s `device`, if its file passes the checks (see
/// the module) and a consistent copy could be read.
pub fn read(pid: u32, device: u32) -> Option<Counters> {
    // The process's user: the owner of its /proc directory. Looked at first:
    // files of processes that were killed stay behind in /dev/shm (133 on the
    // development machine), and each tick of the sampler passes them all, so
    // a dead one costs one stat, not an open as well.
    let owner = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    let path = format!("{SHM}/{PREFIX}{pid}-{device}");
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() || meta.len() != SIZE as u64 || meta.uid() != owner {
        return None;
    }
    if !crate::process::procfs::is_alive(pid) {
        return None;
    }
    // The writer's sequence lock: a copy taken mid-update is read again.
    for _ in 0..4 {
        let mut b = [0u8; SIZE];
        file.read_exact_at(&mut b, 0).ok()?;
        let now = crate::clock::monotonic_ns() as u64;
        if let Some(c) = decode(&b, pid, device, now) {
            return Some(c);
        }
    }
    None
}

/// A copy of `struct hgml_shared` (native byte order), read at `now`;
/// None if torn, or not the file of `pid`'s `device`.
fn decode(b: &[u8; SIZE], pid: u32, device: u32, now: u64) -> Option<Counters> {
    let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
    let (seq_begin, seq_end) = (u64_at(8), u64_at(72));
    if u32_at(0) != MAGIC || u32_at(4) != VERSION || seq_begin != seq_end || seq_begin % 2 != 0 {
        return None;
    }
    if u32_at(16) != device || u32_at(20) != pid {
        return None;
    }
    let (busy_ns, busy_since, busy) = (u64_at(24), u64_at(32), u32_at(40));
    // Busy now: the running operation's time so far counts.
    let busy_ns = if busy > 0 {
        busy_ns.saturating_add(now.saturating_sub(busy_since))
    } else {
        busy_ns
    };
    Some(Counters {
        pid,
        device,
        busy_ns,
        sm_clock_mhz: u32_at(44),
        power_mw: u64_at(48),
        memory_used: u64_at(56),
        memory_total: u64_at(64),
        at: now,
    })
}

/// Which devices `--ppu-metrics-device` asks for.
pub fn wanted(devices: &crate::settings::PpuDevices, device: u32) -> bool {
    match devices {
        crate::settings::PpuDevices::All => true,
        crate::settings::PpuDevices::Ids(ids) => ids.contains(&device),
        crate::settings::PpuDevices::None => false,
    }
}

/// Each (pid, device)'s last read, to turn busy time into utilisation over
/// the interval since.
#[derive(Debug, Default)]
pub struct Previous(BTreeMap<(u32, u32), (u64, u64)>);

impl Previous {
    /// Notes `c` read at `now`; returns the interval since the last read of
    /// the same device and the busy time in it (None on the first read).
    pub fn interval(&mut self, c: &Counters, now: u64) -> Option<(u64, u64)> {
        let before = self.0.insert((c.pid, c.device), (now, c.busy_ns));
        let (t0, busy0) = before?;
        let interval = now.checked_sub(t0).filter(|&d| d > 0)?;
        // Busy time cannot pass the interval (two reads' clocks differ by
        // the read itself).
        Some((interval, c.busy_ns.saturating_sub(busy0).min(interval)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(seq: (u64, u64), pid: u32, device: u32) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        let mut put = |o: usize, v: &[u8]| b[o..o + v.len()].copy_from_slice(v);
        put(0, &MAGIC.to_ne_bytes());
        put(4, &VERSION.to_ne_bytes());
        put(8, &seq.0.to_ne_bytes());
        put(16, &device.to_ne_bytes());
        put(20, &pid.to_ne_bytes());
        put(24, &1_000u64.to_ne_bytes());
        put(32, &5_000u64.to_ne_bytes());
        put(40, &1u32.to_ne_bytes());
        put(44, &1500u32.to_ne_bytes());
        put(48, &300_000u64.to_ne_bytes());
        put(56, &(96u64 << 20).to_ne_bytes());
        put(64, &(16u64 << 30).to_ne_bytes());
        put(72, &seq.1.to_ne_bytes());
        b
    }

    #[test]
    fn a_consistent_copy_of_the_named_device_is_read_with_its_running_time() {
        let c = decode(&image((4, 4), 42, 1), 42, 1, 7_000).unwrap();
        // 1000 ns before, and busy since 5000: 2000 more at 7000.
        assert_eq!(c.busy_ns, 3_000);
        assert_eq!((c.sm_clock_mhz, c.memory_used), (1500, 96 << 20));
        // Torn (counters differ, or odd), or another process's or device's.
        assert!(decode(&image((5, 4), 42, 1), 42, 1, 7_000).is_none());
        assert!(decode(&image((5, 5), 42, 1), 42, 1, 7_000).is_none());
        assert!(decode(&image((4, 4), 43, 1), 42, 1, 7_000).is_none());
        assert!(decode(&image((4, 4), 42, 0), 42, 1, 7_000).is_none());
    }

    #[test]
    fn names_are_strict() {
        assert_eq!(parse_name("hgml-123-0"), Some((123, 0)));
        for bad in [
            "hgml-123",
            "hgml--0",
            "hgml-1x-0",
            "hgml-1-0-0",
            "x-1-0",
            "hgml-99999999999-0",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn utilisation_is_busy_time_over_the_interval_since_the_last_read() {
        let mut p = Previous::default();
        let mut c = decode(&image((2, 2), 1, 0), 1, 0, 5_000).unwrap();
        assert_eq!(p.interval(&c, 100), None);
        c.busy_ns += 40;
        assert_eq!(p.interval(&c, 200), Some((100, 40)));
        c.busy_ns += 500;
        assert_eq!(p.interval(&c, 300), Some((100, 100)));
    }
}
