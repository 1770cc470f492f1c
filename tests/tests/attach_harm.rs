//! What an attach with injection must not do to its target: lose or repeat a
//! signal, make a system call fail with EINTR, change its exit code, or
//! leave it slower than before. The target (tests/workloads/harm_target.c)
//! counts each of these itself.
use std::{
    io::{BufRead, Write},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use asys_tests::*;

/// Sends SIGRTMIN carrying `value` to thread `tid` of `pid`, as sigqueue
/// would (SI_QUEUE).
fn queue_signal(pid: u32, tid: u32, value: i32) -> bool {
    // siginfo_t for SI_QUEUE: signo, errno, code, then (after padding) pid,
    // uid and the value.
    let mut info = [0u8; 128];
    info[0..4].copy_from_slice(&libc::SIGRTMIN().to_ne_bytes());
    info[8..12].copy_from_slice(&(-1i32).to_ne_bytes());
    info[16..20].copy_from_slice(&(std::process::id() as i32).to_ne_bytes());
    info[24..28].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: the kernel reads the 128-byte siginfo we pass.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            pid as i32,
            tid as i32,
            libc::SIGRTMIN(),
            info.as_ptr(),
        )
    };
    r == 0
}

fn steps(t: &mut AttachTarget, n: u32) -> i64 {
    writeln!(t.stdin, "steps {n}").unwrap();
    let mut line = String::new();
    t.stdout.read_line(&mut line).unwrap();
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts[..2], ["steps", &n.to_string()], "{line}");
    parts[2].parse().unwrap()
}

#[test]
fn an_attached_process_keeps_its_signals_system_calls_exit_code_and_pace() {
    require_root();
    let s = Scratch::new("attach-harm");
    let exe = sim_workload("harm_target.c", &["hggcrt"]);
    let mut t = AttachTarget::spawn(&mut std::process::Command::new(exe));
    let pid = t.pid;
    steps(&mut t, 300);
    let before = steps(&mut t, 1000);

    // Numbered signals to the thread asys stops, all along the attaches.
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sent = 0;
            while !stop.load(Ordering::Relaxed) {
                assert!(queue_signal(pid, pid, sent), "signal {sent} not queued");
                sent += 1;
                std::thread::sleep(Duration::from_micros(300));
            }
            sent
        })
    };
    // The first attach holds the thread stopped for 300 ms before the load,
    // so signals certainly arrive while asys has it; the second re-uses the
    // library.
    for (round, hold) in [(0, "300"), (1, "0")] {
        let report = s.path(&format!("h{round}"));
        let (mut g, mut err, said) = start_tracing_said(
            asys()
                .env("ASYS_INJECT_HOLD_MS", hold)
                .args(["attach", "-t", "hggc,osrt", "-o", report.to_str().unwrap()])
                .arg(pid.to_string()),
        );
        assert!(
            said.contains("device activity recorded from now on"),
            "{said}"
        );
        steps(&mut t, 200);
        signal(g.child().id() as i32, libc::SIGINT);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        assert!(g.wait().success(), "{rest}");
        assert!(
            rest.contains("device activity stopped and flushed"),
            "{rest}"
        );
        let kernels = stats_json(&report.with_extension("asysrep"), "hggc_ppu_kern_sum");
        assert_eq!(
            kernels[0]["Instances"].as_u64(),
            Some(4 * 200),
            "round {round}"
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    let after = steps(&mut t, 1000);

    let (status, rest) = t.quit();
    let line = rest
        .lines()
        .find(|l| l.starts_with("signals "))
        .unwrap_or_default();
    let f: Vec<i64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(f.len(), 4, "{rest}");
    let (received, distinct, twice, eintr) = (f[0], f[1], f[2], f[3]);
    assert_eq!(
        (received, distinct, twice),
        (sent as i64, sent as i64, 0),
        "{rest}"
    );
    assert_eq!(eintr, 0, "a system call failed with EINTR");
    assert_eq!(status.code(), Some(0), "{rest}");
    let ratio = after as f64 / before as f64;
    eprintln!(
        "step median before {before} ns, after two attaches {after} ns: x{ratio:.3}; {sent} signals, each once"
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "step time after the attaches x{ratio:.3} of before"
    );
}
