//! Root's system-wide asys next to an unprivileged neighbour (`nobody`) who
//! tries to hang it or make it exhaust its memory:
//! - a FIFO, a link or a 2 GB sparse file put at the path of a file it
//!   maps (then deleted): asys opens the mapped file by descriptor, never
//!   the path, so it neither blocks nor follows the link, and `-d 4` ends on
//!   time;
//! - a jitdump of one LOAD and many MOVE records, a 60 MB perf map, and
//!   5,000 Python code objects with 1 MiB names: each raises root's peak RSS
//!   by at most 64 MiB over a run beside a harmless neighbour, what the
//!   budgets left out is counted in the report's drops, and the report is
//!   written;
//! - SIGTERM during each of them: a report within 2 s;
//! - an ELF file of 12 million symbols mapped and run: asys reads 4 million
//!   (its cap), in bounded time and memory, and counts the rest;
//! - a FUSE mount whose reads never answer, a page of which a CPython's
//!   code object names: asys's read of that memory is abandoned after its
//!   deadline, counted, and SIGTERM still gives a report within 2 s.
//!
//! The attackers are started by the test as `nobody`, not by asys: asys
//! reaches them system-wide or by attaching, as it would a stranger's
//! process (the memory attacks attach, so that root's peak RSS is asys's
//! own and the attack's, not that of every process on the machine).
use std::{
    io::BufRead,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use asys_tests::*;

/// One system-wide run at a time: each traces the processes of the others,
/// and the memory comparisons need the same machine for both runs.
static SERIAL: Mutex<()> = Mutex::new(());

const MIB: i64 = 1 << 20;

/// What a run of asys did.
struct Run {
    success: bool,
    /// From the start, or from SIGTERM when one was sent, to its exit.
    elapsed: Duration,
    /// Peak resident memory, bytes (getrusage's ru_maxrss).
    peak_rss: i64,
    stderr: String,
    report: PathBuf,
}

/// `asys profile -s system-wide ARGS -o DIR/NAME`, with its peak RSS;
/// SIGTERM `sigterm_after` after the start, if given.
fn system_wide(dir: &Path, name: &str, args: &[&str], sigterm_after: Option<Duration>) -> Run {
    let mut all = vec!["profile", "-s", "system-wide"];
    all.extend_from_slice(args);
    run_asys(dir, name, &all, &[], sigterm_after)
}

/// `asys attach -s process-tree ARGS -o DIR/NAME PID`: the neighbour's
/// process alone, so that root's memory is asys's and the attack's, not
/// every other process's on the machine.
fn attach(dir: &Path, name: &str, pid: u32, args: &[&str], sigterm_after: Option<Duration>) -> Run {
    let mut all = vec!["attach", "-s", "process-tree"];
    all.extend_from_slice(args);
    run_asys(dir, name, &all, &[&pid.to_string()], sigterm_after)
}

/// `asys ARGS -o DIR/NAME TAIL`, with its peak RSS; SIGTERM
/// `sigterm_after` after the start, if given.
fn run_asys(
    dir: &Path,
    name: &str,
    args: &[&str],
    tail: &[&str],
    sigterm_after: Option<Duration>,
) -> Run {
    let out = dir.join(name);
    let err_path = dir.join(format!("{name}.stderr"));
    let child = asys()
        .args(args)
        .args(["-o", out.to_str().unwrap()])
        .args(tail)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Reaped below with wait4, for its rusage; the Child is not waited on.
    std::mem::forget(child);
    let mut start = Instant::now();
    let mut signalled = sigterm_after.is_none();
    // SAFETY: all-zero is a valid rusage to be written over.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    loop {
        // SAFETY: a child of this process; status and usage are written.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert_eq!(r, 0, "wait4: {}", std::io::Error::last_os_error());
        if !signalled && start.elapsed() >= sigterm_after.unwrap() {
            assert_eq!(signal(pid, libc::SIGTERM), 0);
            start = Instant::now();
            signalled = true;
        }
        if start.elapsed() > Duration::from_secs(90) {
            signal(pid, libc::SIGKILL);
            panic!(
                "asys hung ({}): {}",
                name,
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Run {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        elapsed: start.elapsed(),
        peak_rss: usage.ru_maxrss * 1024,
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        report: out.with_extension("asysrep"),
    }
}

/// A folder `nobody` owns, inside a scratch folder.
fn nobodys(s: &Scratch, name: &str) -> PathBuf {
    let d = s.path(name);
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
    d
}

/// `python -c CODE ARGS`, CODE the text of tests/workloads/`script`, run
/// as nobody in `cwd`, once it printed "ready"; killed on drop.
fn attacker(python: &str, cwd: &Path, script: &str, args: &[&str]) -> (ChildGuard, u32) {
    let code = std::fs::read_to_string(workload_source(script)).unwrap();
    let mut g = ChildGuard(Some(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args([python, "-c", &code])
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    ));
    let pid = g.child().id();
    let mut line = String::new();
    std::io::BufReader::new(g.child().stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the attacker did not get ready");
    (g, pid)
}

/// Watches `paths` for being opened (inotify), so that a test can say
/// asys never opened them, not just that it did not hang.
struct OpenWatch(i32);

impl OpenWatch {
    fn new(paths: &[&Path]) -> Self {
        // SAFETY: no pointers; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0);
        for p in paths {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid descriptor and C string. IN_DONT_FOLLOW: the
            // link itself is not the watched file; its target is watched
            // separately.
            let w = unsafe {
                libc::inotify_add_watch(
                    fd,
                    c.as_ptr(),
                    libc::IN_OPEN | libc::IN_ACCESS | libc::IN_DONT_FOLLOW,
                )
            };
            assert!(w >= 0, "watch {}", p.display());
        }
        Self(fd)
    }

    /// Events seen so far.
    fn events(&self) -> usize {
        let mut buf = [0u8; 4096];
        let mut n = 0;
        loop {
            // SAFETY: reads into `buf`, at most its length.
            let r = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
            if r <= 0 {
                return n;
            }
            let mut at = 0;
            while at < r as usize {
                // inotify_event: wd, mask, cookie (i32, u32, u32), len (u32), name.
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap()) as usize;
                at += 16 + len;
                n += 1;
            }
        }
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(self.0) };
    }
}

#[test]
fn a_fifo_a_link_or_a_sparse_file_at_a_mapped_path_is_never_opened() {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let inject = asys_bin().with_file_name("libasys_inject.so");
    for kind in ["fifo", "link", "sparse"] {
        for sigterm in [None, Some(Duration::from_secs(3))] {
            let s = Scratch::new(&format!("hostile-{kind}"));
            let home = nobodys(&s, "home");
            // The library where nobody can read it.
            let src = home.join("src.so");
            std::fs::copy(&inject, &src).unwrap();
            std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o644)).unwrap();
            let path = home.join("libasys_inject.so");
            let other = home.join("elsewhere");
            let (_a, _pid) = attacker(
                "/usr/bin/python3",
                &home,
                "swap_mapped.py",
                &[
                    src.to_str().unwrap(),
                    path.to_str().unwrap(),
                    kind,
                    other.to_str().unwrap(),
                ],
            );
            let watched: Vec<&Path> = match kind {
                "link" => vec![&other],
                _ => vec![&path],
            };
            let watch = OpenWatch::new(&watched);
            let what = format!(
                "{kind}, {}",
                if sigterm.is_some() { "SIGTERM" } else { "-d 4" }
            );
            let duration = if sigterm.is_some() { "60" } else { "4" };
            let run = system_wide(&s.0, "r", &["-t", "nvtx", "-d", duration], sigterm);
            assert!(run.success, "{what}: {}", run.stderr);
            assert!(run.report.is_file(), "{what}: no report: {}", run.stderr);
            let limit = if sigterm.is_some() {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(6)
            };
            assert!(
                run.elapsed <= limit,
                "{what}: took {:?}, over {limit:?}",
                run.elapsed
            );
            assert_eq!(
                watch.events(),
                0,
                "{what}: asys opened the file put at the mapped path (or the link's target)"
            );
        }
    }
}

fn drops(report: &Path, source: &str) -> u64 {
    metadata(report)["drops"][source].as_u64().unwrap_or(0)
}

#[test]
fn jit_maps_jitdumps_and_code_objects_cost_root_at_most_64_mib_each() {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let python_args = ["--python-sampling", "true", "-d", "4"];
    let plain_args = ["-d", "4"];
    // The same runs beside a harmless neighbour: what the attacks may add
    // to.
    let baseline = |python: &str, script: &str, args: &[&str], asys_args: &[&str]| {
        let s = Scratch::new("hostile-base");
        let home = nobodys(&s, "home");
        let (_a, pid) = attacker(python, &home, script, args);
        let run = attach(&s.0, "r", pid, asys_args, None);
        assert!(run.success, "baseline: {}", run.stderr);
        run.peak_rss
    };
    let plain_base = baseline("/usr/bin/python3", "python_burner.py", &[], &plain_args);
    let python_base = baseline(
        "/usr/bin/python3.11",
        "code_objects.py",
        &["0"],
        &python_args,
    );

    struct Attack {
        what: &'static str,
        python: &'static str,
        script: &'static str,
        args: &'static [&'static str],
        asys_args: Vec<&'static str>,
        base: i64,
        drops_source: &'static str,
    }
    let attacks = [
        Attack {
            what: "jitdump of 200,000 MOVEs of a 60 KB name",
            python: "/usr/bin/python3",
            script: "jitdump_of_moves.py",
            args: &["200000", "60000"],
            asys_args: plain_args.to_vec(),
            base: plain_base,
            drops_source: "jit_symbols_over_budget",
        },
        Attack {
            what: "60 MB perf map",
            python: "/usr/bin/python3",
            script: "big_perf_map.py",
            args: &["1000000"],
            asys_args: plain_args.to_vec(),
            base: plain_base,
            drops_source: "jit_symbols_over_budget",
        },
        Attack {
            what: "5,000 code objects with 1 MiB names",
            python: "/usr/bin/python3.11",
            script: "code_objects.py",
            args: &["5000"],
            asys_args: python_args.to_vec(),
            base: python_base,
            drops_source: "python_names_cut",
        },
    ];
    for a in &attacks {
        for sigterm in [None, Some(Duration::from_secs(3))] {
            let s = Scratch::new("hostile-mem");
            let home = nobodys(&s, "home");
            let (_g, pid) = attacker(a.python, &home, a.script, a.args);
            let mut asys_args = a.asys_args.clone();
            if sigterm.is_some() {
                // Long enough that only the signal ends it.
                let d = asys_args.iter().position(|x| *x == "-d").unwrap();
                asys_args[d + 1] = "60";
            }
            let run = attach(&s.0, "r", pid, &asys_args, sigterm);
            let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
            let what = format!(
                "{}{}",
                a.what,
                if sigterm.is_some() { ", SIGTERM" } else { "" }
            );
            assert!(run.success, "{what}: {}", run.stderr);
            assert!(run.report.is_file(), "{what}: no report");
            let rise = run.peak_rss - a.base;
            eprintln!(
                "{what}: peak RSS {} MiB, {} MiB over the harmless run ({} MiB); ended in {:?}",
                run.peak_rss / MIB,
                rise / MIB,
                a.base / MIB,
                run.elapsed
            );
            assert!(
                rise <= 64 * MIB,
                "{what}: root's peak RSS rose by {} MiB (over 64)",
                rise / MIB
            );
            let dropped = drops(&run.report, a.drops_source);
            assert!(
                dropped > 0,
                "{what}: nothing counted as {} in {}",
                a.drops_source,
                metadata(&run.report)["drops"]
            );
            assert!(
                run.stderr.contains(&format!("process {pid}")),
                "{what}: no warning names the process: {}",
                run.stderr
            );
            if sigterm.is_some() {
                assert!(
                    run.elapsed <= Duration::from_secs(2),
                    "{what}: SIGTERM to exit took {:?}",
                    run.elapsed
                );
            }
        }
    }
}

/// Writes to `path` an x86-64 ELF shared object whose one loadable segment
/// (file offset 0, address 0, 0x2000 bytes) holds `.text` at 0x1000,
/// starting with `jmp .`, and whose `.symtab` has `n` functions in it,
/// each named by 8 hex digits (as asys-userspace's `elf::caps` tests build
/// theirs). Streamed: 12 million symbols are a 400 MB file.
fn elf_with_symbols(path: &Path, n: usize) {
    use std::io::Write;
    const TEXT: usize = 0x1000;
    const NAME: usize = 9;
    let symtab_len = 24 * (n + 1);
    let strtab_len = 1 + NAME * n;
    let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
    let sym_at = 2 * TEXT;
    let str_at = sym_at + symtab_len;
    let shstr_at = str_at + strtab_len;
    let sh_at = (shstr_at + shstrtab.len()).next_multiple_of(8);
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut head = vec![0u8; 2 * TEXT];
    head[..16].copy_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    let mut h = Vec::new();
    // ET_DYN, EM_X86_64; version, entry, phoff, shoff, flags; ehsize,
    // phentsize, phnum, shentsize, shnum, shstrndx.
    h.extend(3u16.to_le_bytes());
    h.extend(62u16.to_le_bytes());
    h.extend(1u32.to_le_bytes());
    h.extend(0u64.to_le_bytes());
    h.extend(64u64.to_le_bytes());
    h.extend((sh_at as u64).to_le_bytes());
    h.extend(0u32.to_le_bytes());
    for v in [64u16, 56, 1, 64, 5, 4] {
        h.extend(v.to_le_bytes());
    }
    // PT_LOAD, R+X, offset 0, vaddr, paddr, filesz, memsz, align.
    h.extend(1u32.to_le_bytes());
    h.extend(5u32.to_le_bytes());
    for v in [0, 0, 0, 2 * TEXT as u64, 2 * TEXT as u64, TEXT as u64] {
        h.extend(v.to_le_bytes());
    }
    head[16..16 + h.len()].copy_from_slice(&h);
    // jmp . (the neighbour spins there).
    head[TEXT..TEXT + 2].copy_from_slice(&[0xeb, 0xfe]);
    f.write_all(&head).unwrap();
    f.write_all(&[0u8; 24]).unwrap();
    let mut chunk = Vec::with_capacity(24 << 16);
    // STB_GLOBAL, STT_FUNC; st_other; st_shndx: .text; size 1.
    let mut entry = [0u8; 24];
    entry[4..8].copy_from_slice(&[0x12, 0, 1, 0]);
    entry[16..].copy_from_slice(&1u64.to_le_bytes());
    for i in 0..n {
        entry[..4].copy_from_slice(&((1 + NAME * i) as u32).to_le_bytes());
        entry[8..16].copy_from_slice(&((TEXT + i % TEXT) as u64).to_le_bytes());
        chunk.extend_from_slice(&entry);
        if chunk.len() >= 24 << 16 {
            f.write_all(&chunk).unwrap();
            chunk.clear();
        }
    }
    f.write_all(&chunk).unwrap();
    chunk.clear();
    chunk.push(0);
    for i in 0..n {
        let digits = (0..8)
            .rev()
            .map(|d| b"0123456789abcdef"[(i >> (4 * d)) & 15]);
        chunk.extend(digits);
        chunk.push(0);
        if chunk.len() >= 24 << 16 {
            f.write_all(&chunk).unwrap();
            chunk.clear();
        }
    }
    f.write_all(&chunk).unwrap();
    f.write_all(shstrtab).unwrap();
    f.write_all(&vec![0u8; sh_at - shstr_at - shstrtab.len()])
        .unwrap();
    let mut sh = vec![0u8; 64];
    // name, type, flags, addr, offset, size, link, info, align, entsize,
    // each as wide as `WIDTH` says.
    const WIDTH: [usize; 10] = [4, 4, 8, 8, 8, 8, 4, 4, 8, 8];
    let t = TEXT as u64;
    let sections = [
        [1, 1, 6, t, t, t, 0, 0, 16, 0],
        [7, 2, 0, 0, sym_at as u64, symtab_len as u64, 3, 1, 8, 24],
        [15, 3, 0, 0, str_at as u64, strtab_len as u64, 0, 0, 1, 0],
        [
            23,
            3,
            0,
            0,
            shstr_at as u64,
            shstrtab.len() as u64,
            0,
            0,
            1,
            0,
        ],
    ];
    for s in sections {
        for (v, w) in s.iter().zip(WIDTH) {
            sh.extend(&v.to_le_bytes()[..w]);
        }
    }
    f.write_all(&sh).unwrap();
    f.into_inner().unwrap().sync_all().unwrap();
    std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
}

#[test]
fn an_elf_of_twelve_million_symbols_costs_root_a_bounded_time_and_memory() {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new("hostile-elf");
    let home = nobodys(&s, "home");
    let (harmless, hostile) = (home.join("harmless.so"), home.join("hostile.so"));
    let t = Instant::now();
    elf_with_symbols(&harmless, 1000);
    // Three times asys's cap on symbols read from one file (4 million).
    elf_with_symbols(&hostile, 12_000_000);
    eprintln!(
        "hostile ELF: {} MB, written in {:?}",
        std::fs::metadata(&hostile).unwrap().len() >> 20,
        t.elapsed()
    );
    let args = ["-d", "4"];
    let run_beside = |elf: &Path, name: &str| {
        let (_g, pid) = attacker(
            "/usr/bin/python3",
            &home,
            "spin_in_mapped_elf.py",
            &[elf.to_str().unwrap()],
        );
        attach(&s.0, name, pid, &args, None)
    };
    let base = run_beside(&harmless, "harmless");
    assert!(base.success, "harmless: {}", base.stderr);
    let run = run_beside(&hostile, "hostile");
    assert!(run.success, "hostile: {}", run.stderr);
    assert!(run.report.is_file(), "hostile: no report");
    let rise = run.peak_rss - base.peak_rss;
    eprintln!(
        "hostile ELF: asys ran {:?} (harmless: {:?}), peak RSS {} MiB, {} MiB over the harmless run",
        run.elapsed,
        base.elapsed,
        run.peak_rss / MIB,
        rise / MIB
    );
    // What the cap lets one file cost: 4 million symbols kept at 40 bytes
    // (160 MB), and the pages of their 96 MB of table and 36 MB of names,
    // mapped from the file; read whole, the file's 12 million would cost
    // three times that (over 850 MB).
    assert!(
        rise <= 384 * MIB,
        "root's peak RSS rose by {} MiB (over 384)",
        rise / MIB
    );
    // The recording's 4 s, and the symbolize stage's read and sort of 4
    // million symbols (a debug build: about 10 s here).
    assert!(
        run.elapsed <= Duration::from_secs(40),
        "asys took {:?} (over 40 s)",
        run.elapsed
    );
    let dropped = drops(&run.report, "elf_symbols_over_cap");
    assert_eq!(
        dropped,
        12_000_000 - 4_000_000,
        "drops: {}",
        metadata(&run.report)["drops"]
    );
    assert!(
        run.stderr
            .contains(&format!("{}: past asys's cap", hostile.display())),
        "no warning names the file: {}",
        run.stderr
    );
}

/// A FUSE file system of `nobody`'s whose reads never answer
/// (tests/workloads/hung_fuse.c), mounted at `mnt`; on drop lazily
/// unmounted and its server killed, which fails every read still waiting
/// on it, so that no process is left stuck whatever the test did.
struct HungMount {
    mnt: PathBuf,
    server: ChildGuard,
}

impl HungMount {
    fn new(mnt: &Path) -> Self {
        let server = c_workload(
            "hung_fuse.c",
            &[
                "-D_FILE_OFFSET_BITS=64",
                "-I/usr/include/fuse3",
                "-lfuse3",
                "-lpthread",
            ],
        );
        // fusermount3 (setuid root) mounts it for nobody, as it would for
        // any user.
        let server = ChildGuard(Some(
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&server)
                .arg("-f")
                .arg(mnt)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        ));
        // Unmounted on drop from here on, should it fail half-way.
        let mut me = Self {
            mnt: mnt.to_path_buf(),
            server,
        };
        let start = Instant::now();
        loop {
            let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
            if mounts
                .lines()
                .any(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
            {
                break;
            }
            if let Ok(Some(status)) = me.server.child().try_wait() {
                panic!("the FUSE server exited ({status}) without mounting");
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the FUSE server did not mount {} in 10 s",
                mnt.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        me
    }
}

impl Drop for HungMount {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .args(["-u", "-z"])
            .arg(&self.mnt)
            .status();
        // Then the server is killed (the field's guard).
    }
}

#[test]
fn a_read_of_memory_on_a_hung_fuse_mount_costs_one_deadline_and_sigterm_still_reports() {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new("hostile-fuse");
    let home = nobodys(&s, "home");
    let mnt = nobodys(&s, "mnt");
    let mount = HungMount::new(&mnt);
    // A CPython whose running code object's qualname lies on the hung page:
    // naming its sampled frame reads there.
    let (_target, pid) = attacker(
        "/usr/bin/python3.11",
        &home,
        "code_name_on_hung_page.py",
        &[mnt.join("data").to_str().unwrap()],
    );
    let run = attach(
        &s.0,
        "r",
        pid,
        &["--python-sampling", "true", "-d", "60"],
        Some(Duration::from_secs(3)),
    );
    drop(mount);
    eprintln!("hung FUSE read: SIGTERM to exit {:?}", run.elapsed);
    assert!(run.success, "{}", run.stderr);
    assert!(run.report.is_file(), "no report: {}", run.stderr);
    assert!(
        run.elapsed <= Duration::from_secs(2),
        "SIGTERM to exit took {:?}",
        run.elapsed
    );
    assert_eq!(
        drops(&run.report, "remote_memory_read_timeouts"),
        1,
        "drops: {}",
        metadata(&run.report)["drops"]
    );
    assert!(
        run.stderr
            .contains(&format!("process {pid}: a read of its memory took over")),
        "no warning names the process: {}",
        run.stderr
    );
}
