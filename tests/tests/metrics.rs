//! The periodic samplers: `--host-memory-sampling` against a workload that
//! holds known amounts of memory for known times, and `--nic-metrics`
//! against a veth pair whose far end, in a network namespace the test
//! makes, sends a known number of UDP datagrams. The samples are read from
//! the report's Parquet members by pyarrow, not by asys.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use asys_tests::*;
use serde_json::Value;

fn int(v: &Value, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("no integer {key} in {v}"))
}

/// One logged hold: what, MiB, start, end, pid.
struct Hold {
    what: String,
    mib: u64,
    start: i64,
    end: i64,
    pid: u32,
}

fn holds(log: &Path) -> Vec<Hold> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Hold {
                what: f[0].into(),
                mib: f[1].parse().unwrap(),
                start: f[2].parse().unwrap(),
                end: f[3].parse().unwrap(),
                pid: f[4].parse().unwrap(),
            }
        })
        .collect()
}

const MIB: f64 = (1u64 << 20) as f64;

#[test]
fn host_memory_follows_what_the_workload_holds_within_5_percent() {
    require_root();
    let s = Scratch::new("metrics-memory");
    // Holds 0, 64, 128 and 256 MiB (anonymous, every page written) in turn,
    // then forks a child that holds 32 MiB; each hold is logged as `what MiB
    // start_ns end_ns pid` (CLOCK_MONOTONIC) to the file argv[1].
    let bin = c_workload("memory_steps.c", &[]);
    let log = s.path("holds.log");
    let report = s.path("mem");
    let o = run(&[
        "profile",
        "-t",
        "none",
        "-s",
        "none",
        "--host-memory-sampling",
        "true",
        "--host-memory-sampling-frequency",
        "20",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let holds = holds(&log);
    assert_eq!(holds.len(), 6, "the workload logged every hold");
    let rows = report_rows(&s, &report, "host_memory");
    // The samples of `pid` within a hold (the pages were written before it
    // began and freed after it ended).
    let within = |h: &Hold| -> Vec<f64> {
        rows.iter()
            .filter(|r| int(r, "pid") == h.pid as i64)
            .filter(|r| (h.start..=h.end).contains(&int(r, "ts")))
            .map(|r| int(r, "rss") as f64)
            .collect()
    };
    let first = &holds[0];
    let base = within(first);
    assert!(base.len() >= 8, "{} samples in 0.7 s at 20 Hz", base.len());
    let baseline = base.iter().sum::<f64>() / base.len() as f64;
    for h in holds.iter().filter(|h| h.mib > 0) {
        let got = within(h);
        // 20 Hz over 0.7 s or more: at least 10 samples (some slack for a
        // loaded machine).
        assert!(
            got.len() >= 8,
            "{} {} MiB: {} samples",
            h.what,
            h.mib,
            got.len()
        );
        let want = h.mib as f64 * MIB;
        for rss in got {
            // A forked child's RSS starts at its parent's (shared pages
            // count in both).
            let held = rss - baseline;
            let err = (held - want).abs() / want;
            assert!(
                err <= 0.05,
                "{} {} MiB (pid {}): RSS {:.1} MiB over a baseline of {:.1} MiB holds {:.1} MiB ({:.1} % off)",
                h.what,
                h.mib,
                h.pid,
                rss / MIB,
                baseline / MIB,
                held / MIB,
                err * 100.0
            );
        }
    }
    // The child was forked after collection began: it is sampled too.
    let child = holds.iter().find(|h| h.what == "child").unwrap();
    assert_ne!(child.pid, first.pid);
    // The report agrees with the table: the parent's largest RSS is the
    // 256 MiB hold's, the child's the 32 MiB one's.
    let sum = stats_json(&report, "host_memory_sum");
    for (pid, mib) in [(first.pid, 256.0), (child.pid, 32.0)] {
        let row = sum
            .iter()
            .find(|r| r["Pid"].as_i64() == Some(pid as i64))
            .unwrap_or_else(|| panic!("pid {pid} not in host_memory_sum: {sum:?}"));
        let max = row["Max RSS (MiB)"].as_f64().unwrap();
        let held = max - baseline / MIB;
        assert!(
            (held - mib).abs() / mib <= 0.05,
            "pid {pid}: max RSS {max} MiB, {held:.1} MiB over the baseline, want {mib}"
        );
    }
}

/// A network namespace with a veth pair whose far end is in it: removed
/// (with the pair) on drop, whatever the test did.
struct VethPair {
    ns: String,
    host: String,
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).finish();
    assert!(o.status.success(), "ip {args:?}: {}", stderr(&o));
}

impl VethPair {
    /// `10.231.N.1` on the host side, `.2` in the namespace.
    fn new(net: u8) -> Self {
        let id = std::process::id() % 100_000;
        let pair = VethPair {
            ns: format!("asys-t12-{id}"),
            host: format!("a12h{id}"),
        };
        let peer = format!("a12n{id}");
        let (host_addr, ns_addr) = (format!("10.231.{net}.1/24"), format!("10.231.{net}.2/24"));
        ip(&["netns", "add", &pair.ns]);
        ip(&[
            "link", "add", &pair.host, "type", "veth", "peer", "name", &peer, "netns", &pair.ns,
        ]);
        // No IPv6 on either end: its router and neighbour solicitations
        // would add packets the test did not send.
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", pair.host),
            "1",
        );
        let _ = Command::new("ip")
            .args(["netns", "exec", &pair.ns, "sysctl", "-qw"])
            .arg(format!("net.ipv6.conf.{peer}.disable_ipv6=1"))
            .finish();
        ip(&["addr", "add", &host_addr, "dev", &pair.host]);
        ip(&["link", "set", &pair.host, "up"]);
        ip(&["-n", &pair.ns, "addr", "add", &ns_addr, "dev", &peer]);
        ip(&["-n", &pair.ns, "link", "set", &peer, "up"]);
        pair
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.host])
            .finish();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).finish();
    }
}

/// Ethernet (14), IPv4 (20) and UDP (8) headers: what a datagram of N
/// bytes takes on a veth, which counts frames without the FCS.
const FRAME_OVERHEAD: u64 = 42;

/// Packets the kernel may add on the pair besides the datagrams: an ARP
/// request before the first one (and, should the entry need confirming,
/// one more); each at most a 42-byte frame.
const EXTRA_PACKETS: u64 = 3;
const EXTRA_BYTES: u64 = EXTRA_PACKETS * 42;

#[test]
fn nic_counters_of_a_veth_follow_the_datagrams_sent_to_it() {
    require_root();
    let s = Scratch::new("metrics-nic");
    // Sends argv[3] datagrams of argv[4] bytes to argv[1]:argv[2], pauses
    // 0.7 s, sends argv[5] of argv[6] bytes, pauses 0.3 s; logs `burst N
    // BYTES start_ns end_ns` per burst to argv[7].
    let bin = c_workload("udp_sender.c", &[]);
    let pair = VethPair::new(77);
    let sock = std::net::UdpSocket::bind("10.231.77.1:0").unwrap();
    let port = sock.local_addr().unwrap().port().to_string();
    sock.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    // The receiver: every datagram that crossed the pair, counted.
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let (mut n, mut bytes, mut idle) = (0u64, 0u64, 0);
        while idle < 10 {
            match sock.recv_from(&mut buf) {
                Ok((len, _)) => {
                    n += 1;
                    bytes += len as u64;
                    idle = 0;
                }
                Err(_) => idle += 1,
            }
        }
        (n, bytes)
    });
    let (n1, size1, n2, size2) = (400u64, 1000u64, 600u64, 300u64);
    let log = s.path("bursts.log");
    let report = s.path("nic");
    let o = run(&[
        "profile",
        "-t",
        "none",
        "-s",
        "none",
        "--nic-metrics",
        "true",
        "--nic-metrics-frequency",
        "20",
        "--nic-device-include",
        &pair.host,
        "-o",
        report.to_str().unwrap(),
        "ip",
        "netns",
        "exec",
        &pair.ns,
        bin.to_str().unwrap(),
        "10.231.77.1",
        &port,
        &n1.to_string(),
        &size1.to_string(),
        &n2.to_string(),
        &size2.to_string(),
        log.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (received, received_bytes) = receiver.join().unwrap();
    assert_eq!(received, n1 + n2, "every datagram arrived");
    assert_eq!(received_bytes, n1 * size1 + n2 * size2);
    let report = report.with_extension("asysrep");
    let bursts: Vec<(i64, i64)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[3].parse().unwrap(), f[4].parse().unwrap())
        })
        .collect();
    assert_eq!(bursts.len(), 2);

    let mut rows = report_rows(&s, &report, "nic_metrics");
    rows.sort_by_key(|r| int(r, "ts"));
    // Only the interface asked for (--nic-device-include): one device id.
    let ids: std::collections::BTreeSet<i64> = rows.iter().map(|r| int(r, "deviceId")).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let first = &rows[0];
    assert!(
        int(first, "ts") < bursts[0].0,
        "a sample before the first burst"
    );
    let rise = |r: &Value, key: &str| (int(r, key) - int(first, key)) as u64;
    let check = |r: &Value, packets: u64, bytes: u64, when: &str| {
        let (p, b) = (rise(r, "rxPackets"), rise(r, "rxBytes"));
        assert!(
            (packets..=packets + EXTRA_PACKETS).contains(&p),
            "{when}: {p} packets received, {packets} datagrams sent"
        );
        assert!(
            (bytes..=bytes + EXTRA_BYTES).contains(&b),
            "{when}: {b} bytes received, {bytes} sent in frames"
        );
    };
    let bytes1 = n1 * (size1 + FRAME_OVERHEAD);
    let bytes2 = n2 * (size2 + FRAME_OVERHEAD);
    // Between the bursts the counters stand at the first burst's.
    let pause: Vec<&Value> = rows
        .iter()
        .filter(|r| (bursts[0].1 + 20_000_000..bursts[1].0).contains(&int(r, "ts")))
        .collect();
    assert!(
        pause.len() >= 5,
        "{} samples in the 0.7 s pause",
        pause.len()
    );
    for r in &pause {
        check(r, n1, bytes1, "between the bursts");
    }
    // After the second, at both.
    let last = rows.last().unwrap();
    assert!(int(last, "ts") > bursts[1].1);
    check(last, n1 + n2, bytes1 + bytes2, "at the end");

    // The report says the same of the interface.
    let sum = stats_json(&report, "nic_metrics_sum");
    assert_eq!(sum.len(), 1, "{sum:?}");
    assert_eq!(sum[0]["Device"].as_str(), Some(pair.host.as_str()));
    let p = sum[0]["RX Packets"].as_u64().unwrap();
    let b = sum[0]["RX Bytes"].as_u64().unwrap();
    assert_eq!((p, b), (rise(last, "rxPackets"), rise(last, "rxBytes")));
}

#[test]
fn a_metrics_frequency_out_of_range_is_a_one_line_error() {
    for (opt, v) in [
        ("--host-memory-sampling-frequency", "0"),
        ("--nic-metrics-frequency", "1000"),
        ("--host-memory-sampling", "maybe"),
        ("--ppu-metrics-device", "gpu0"),
        ("--ppu-metrics-frequency", "0"),
    ] {
        let o = run(&["profile", opt, v, "true"]);
        assert!(!o.status.success(), "{opt} {v} was taken");
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains(opt), "{opt} {v}: {err}");
    }
}

/// The periods busy_idle logged: (busy, start, end, device bytes held).
fn periods(log: &Path) -> Vec<(bool, i64, i64, u64)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0] == "busy",
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn ppu_metrics_follow_the_simulated_devices_busy_and_idle_periods() {
    let s = Scratch::new("metrics-ppu");
    let log = s.path("periods.log");
    let p = profile_workload(
        &s,
        &[
            "-s",
            "none",
            "--ppu-metrics-device",
            "all",
            "--ppu-metrics-frequency",
            "20",
        ],
        "busy_idle",
        &[log.to_str().unwrap()],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let periods = periods(&log);
    assert_eq!(periods.len(), 5);
    // `all` devices: those of every process running the simulated runtime,
    // as NVML's are the whole GPU's; other tests may run one meanwhile, so
    // only the workload's own are checked.
    let pid = metadata(&p.report)["root_pids"][0].as_i64().unwrap();
    let trace: Vec<Value> = stats_json(&p.report, "ppu_metric_trace")
        .into_iter()
        .filter(|r| int(r, "Pid") == pid)
        .collect();
    let f = |r: &Value, k: &str| r[k].as_f64().unwrap_or_else(|| panic!("no {k} in {r}"));
    for &(busy, start, end, held) in &periods {
        // Samples whose whole interval lies in the period.
        let inside: Vec<&Value> = trace
            .iter()
            .filter(|r| int(r, "Start (ns)") >= start && int(r, "End (ns)") <= end)
            .collect();
        assert!(
            inside.len() >= 5,
            "{} samples inside the {} period of {} ms",
            inside.len(),
            if busy { "busy" } else { "idle" },
            (end - start) / 1_000_000
        );
        for r in inside {
            let util = f(r, "Utilization (%)");
            if busy {
                assert!(util >= 95.0, "busy period: {util} % in {r}");
                assert_eq!(f(r, "SM Clock (MHz)"), 1500.0, "{r}");
            } else {
                assert_eq!(util, 0.0, "idle period: {r}");
                assert_eq!(f(r, "SM Clock (MHz)"), 300.0, "{r}");
            }
        }
        // Memory in use, read at each sample's end, is what was allocated.
        for r in trace
            .iter()
            .filter(|r| (start..=end).contains(&int(r, "End (ns)")))
        {
            assert_eq!(
                f(r, "Memory Used (MiB)"),
                held as f64 / MIB,
                "memory used in {r}"
            );
        }
    }
    let sum: Vec<Value> = stats_json(&p.report, "ppu_metrics_sum")
        .into_iter()
        .filter(|r| int(r, "Pid") == pid)
        .collect();
    assert_eq!(sum.len(), 1, "one device of the workload: {sum:?}");
    assert_eq!(f(&sum[0], "Max Memory Used (MiB)"), 128.0);
    assert_eq!(f(&sum[0], "Max Utilization (%)"), 100.0);
    assert_eq!(f(&sum[0], "Min Utilization (%)"), 0.0);
}

#[test]
fn ppu_metrics_device_help_lists_running_devices_and_not_planted_files() {
    require_root();
    let s = Scratch::new("metrics-ppu-help");
    let log = s.path("periods.log");
    let mut g = ChildGuard(Some(
        Command::new(workload("busy_idle"))
            .arg(&log)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let pid = g.child().id();
    let real = PathBuf::from(format!("/dev/shm/hgml-{pid}-0"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !real.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no {}",
            real.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Planted beside it: a copy of its bytes under another device's name,
    // owned by nobody; a link to it; a file of the wrong size.
    let copy = PathBuf::from(format!("/dev/shm/hgml-{pid}-1"));
    let link = PathBuf::from(format!("/dev/shm/hgml-{pid}-2"));
    let short = PathBuf::from(format!("/dev/shm/hgml-{pid}-3"));
    std::fs::copy(&real, &copy).unwrap();
    std::os::unix::fs::chown(&copy, Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    std::fs::write(&short, b"HGML").unwrap();
    let o = run(&["profile", "--ppu-metrics-device", "help"]);
    for p in [&copy, &link, &short] {
        let _ = std::fs::remove_file(p);
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("device 0 (process {pid})")), "{out}");
    for d in 1..=3 {
        assert!(
            !out.contains(&format!("device {d} (process {pid})")),
            "a planted file is listed: {out}"
        );
    }
    assert!(g.child().wait().unwrap().success());
    // The runtime removes its file when it exits.
    assert!(!real.exists());
}

/// A process that only sleeps, for attach and recovery: its memory stays.
fn sleeper(seconds: &str) -> ChildGuard {
    ChildGuard(Some(Command::new("sleep").arg(seconds).spawn().unwrap()))
}

#[test]
fn attach_samples_host_memory_only_inside_its_window() {
    require_root();
    let s = Scratch::new("metrics-attach");
    let mut g = sleeper("30");
    let pid = g.child().id();
    let report = s.path("att");
    let o = run(&[
        "attach",
        "-t",
        "none",
        "--host-memory-sampling",
        "true",
        "-d",
        "1",
        "-o",
        report.to_str().unwrap(),
        &pid.to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let meta = metadata(&report);
    let (start, end) = (
        meta["start_monotonic_ns"].as_i64().unwrap(),
        meta["end_monotonic_ns"].as_i64().unwrap(),
    );
    let rows = report_rows(&s, &report, "host_memory");
    // 10 Hz over 1 s: about 10, and the one at the end.
    assert!((8..=13).contains(&rows.len()), "{} samples", rows.len());
    for r in &rows {
        assert_eq!(int(r, "pid"), pid as i64);
        assert!(
            (start..=end).contains(&int(r, "ts")),
            "a sample outside the window [{start}, {end}]: {r}"
        );
        // What /proc says of the sleeping process now (it does not change).
        assert!(int(r, "rss") > 0);
    }
    let now: u64 = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap();
    // The last sample, within a few pages: uprobes are set on a file, so
    // while another test's asys has probes in libc, every process mapping
    // libc (this `sleep` too) gets a private copy of each probed text page
    // (RssAnon +4 kB in a `sleep` while an asys ran beside it), which may
    // go again when that asys ends. Seen: one page more in the samples
    // than at the end, whenever the RDMA tests' asys ran beside this one.
    let last = rows.iter().max_by_key(|r| int(r, "ts")).unwrap();
    let (sampled, now) = (int(last, "rss") as u64, now * 1024);
    assert!(
        sampled.abs_diff(now) <= 4 * 4096,
        "sampled {sampled} bytes, /proc says {now} now"
    );
    drop(g);
}

#[test]
fn a_killed_recording_keeps_its_samples_up_to_the_last_checkpoint() {
    require_root();
    let s = Scratch::new("metrics-recover");
    let out = s.path("r");
    let mut cmd = asys();
    cmd.args([
        "profile",
        "-t",
        "none",
        "-s",
        "none",
        "--host-memory-sampling",
        "true",
        "--nic-metrics",
        "true",
        "--nic-device-include",
        "lo",
        "-o",
    ])
    .arg(&out)
    .args(["sleep", "30"]);
    let (mut g, _err, line) = start_tracing(&mut cmd);
    let app: u32 = line
        .rsplit_once("(pid ")
        .and_then(|(_, p)| p.trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let killed_at = monotonic_ns();
    assert_eq!(signal(g.child().id() as i32, libc::SIGKILL), 0);
    g.wait();
    let dir = std::fs::read_dir(&s.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains(".asysrep.unfinished-"))
        .expect("an unfinished recording");
    let o = run(&["recover", dir.to_str().unwrap()]);
    assert!(o.status.success(), "recover failed: {}", stderr(&o));
    let report = s.path("r.asysrep");
    let last = metadata(&report)["recovered"]["last_checkpoint_monotonic_ns"]
        .as_i64()
        .unwrap();
    for table in ["host_memory", "nic_metrics"] {
        let rows = report_rows(&s, &report, table);
        // Checkpoints come every 0.5 s: at least 1.5 s of 10 Hz samples.
        assert!(rows.len() >= 15, "{table}: {} rows", rows.len());
        assert!(
            rows.iter()
                .all(|r| int(r, "ts") <= last && int(r, "ts") < killed_at),
            "{table}: a sample after the last checkpoint"
        );
    }
    // The sleeper asys launched runs on; end it (by the pid asys named).
    signal(app as i32, libc::SIGKILL);
}

/// The counter tracks of a Perfetto trace, read with Perfetto's own protos:
/// `{"pid/name": [[ts, value], ...]}`, pid that of the process the track
/// is under (0 for none); value the integer or the double one.
const PERFETTO_COUNTERS: &str = r#"
import json, sys
from collections import defaultdict
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
trace = pb.Trace()
trace.ParseFromString(open(sys.argv[1], "rb").read())
pids, counters, values = {}, {}, defaultdict(list)
for p in trace.packet:
    kind = p.WhichOneof("data")
    if kind == "track_descriptor":
        d = p.track_descriptor
        if d.HasField("process"):
            pids[d.uuid] = d.process.pid
        elif d.HasField("counter"):
            counters[d.uuid] = f"{pids.get(d.parent_uuid, 0)}/{d.name}"
    elif kind == "track_event" and p.track_event.type == pb.TrackEvent.TYPE_COUNTER:
        e = p.track_event
        v = e.double_counter_value if e.HasField("double_counter_value") else e.counter_value
        values[counters[e.track_uuid]].append([p.timestamp, v])
print(json.dumps(values))
"#;

#[test]
fn sampled_metrics_go_into_the_sqlite_and_perfetto_exports_with_the_reports_values() {
    let s = Scratch::new("metrics-export");
    let log = s.path("periods.log");
    let p = profile_workload(
        &s,
        &[
            "-s",
            "none",
            "--host-memory-sampling",
            "true",
            "--host-memory-sampling-frequency",
            "20",
            "--ppu-metrics-device",
            "all",
            "--ppu-metrics-frequency",
            "20",
            "--nic-metrics",
            "true",
            "--nic-device-include",
            "lo",
            "--nic-metrics-frequency",
            "20",
        ],
        "busy_idle",
        &[log.to_str().unwrap()],
        &[],
    );
    assert!(p.out.status.success(), "{}", stderr(&p.out));
    let meta = metadata(&p.report);
    let pid = meta["root_pids"][0].as_i64().unwrap();
    let origin = meta["start_monotonic_ns"].as_i64().unwrap();
    let o = run(&[
        "export",
        "--type",
        "sqlite,perfetto",
        p.report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = p.report.with_extension("sqlite");
    let num = |v: &str| {
        v.parse::<i64>()
            .unwrap_or_else(|_| panic!("not a number: {v}"))
    };

    // Host memory: every row of the report's table, times from the start.
    let mut host = report_rows(&s, &p.report, "host_memory");
    host.sort_by_key(|r| (int(r, "pid"), int(r, "ts")));
    assert!(host.len() >= 20, "{} host memory samples", host.len());
    let want: Vec<Vec<i64>> = host
        .iter()
        .map(|r| {
            vec![
                int(r, "ts") - origin,
                int(r, "pid"),
                int(r, "rss"),
                int(r, "anon"),
                int(r, "file"),
            ]
        })
        .collect();
    let got: Vec<Vec<i64>> = sqlite(
        &db,
        "SELECT ts, pid, rss, anon, file FROM HOST_MEMORY ORDER BY pid, ts",
    )
    .iter()
    .map(|r| r.iter().map(|v| num(v)).collect())
    .collect();
    assert_eq!(got, want, "HOST_MEMORY");

    // PPU metrics of the workload's device(s), by nsys's names.
    let mut ppu: Vec<Value> = report_rows(&s, &p.report, "ppu_metrics")
        .into_iter()
        .filter(|r| int(r, "pid") == pid)
        .collect();
    ppu.sort_by_key(|r| (int(r, "device"), int(r, "ts")));
    assert!(ppu.len() >= 20, "{} PPU samples", ppu.len());
    let metric = |name: &str| -> Vec<i64> {
        sqlite(
            &db,
            &format!(
                "SELECT g.value FROM GPU_METRICS g JOIN TARGET_INFO_GPU_METRICS t \
                 USING (typeId, metricId) WHERE g.typeId >> 8 = {pid} AND t.metricName = '{name}' \
                 ORDER BY g.typeId & 255, g.timestamp"
            ),
        )
        .iter()
        .map(|r| num(&r[0]))
        .collect()
    };
    for (name, column) in [
        ("PPU Busy [ns]", "busyNs"),
        ("Sample Interval [ns]", "intervalNs"),
        ("SM Clock [MHz]", "smClockMhz"),
        ("Power [mW]", "powerMw"),
        ("Memory Used [bytes]", "memoryUsed"),
        ("Memory Total [bytes]", "memoryTotal"),
    ] {
        let want: Vec<i64> = ppu.iter().map(|r| int(r, column)).collect();
        assert_eq!(metric(name), want, "GPU_METRICS {name}");
    }
    let times: Vec<i64> = sqlite(
        &db,
        &format!(
            "SELECT DISTINCT timestamp, typeId & 255 FROM GPU_METRICS WHERE typeId >> 8 = {pid} \
             ORDER BY typeId & 255, timestamp"
        ),
    )
    .iter()
    .map(|r| num(&r[0]))
    .collect();
    let want: Vec<i64> = ppu.iter().map(|r| int(r, "ts") - origin).collect();
    assert_eq!(times, want, "GPU_METRICS timestamps");
    // Utilisation in whole percent, against asys stats' own.
    let mut stats: Vec<f64> = stats_json(&p.report, "ppu_metric_trace")
        .into_iter()
        .filter(|r| int(r, "Pid") == pid)
        .map(|r| r["Utilization (%)"].as_f64().unwrap())
        .collect();
    let util = metric("PPU Utilization [%]");
    assert_eq!(util.len(), stats.len());
    stats.sort_by(f64::total_cmp);
    let mut sorted = util.clone();
    sorted.sort();
    for (u, st) in sorted.iter().zip(&stats) {
        assert!(
            (*u as f64 - st).abs() <= 0.51,
            "{u} % in SQLite, {st} % in stats"
        );
    }
    assert!(
        util.iter().any(|&u| u >= 95) && util.contains(&0),
        "{util:?}"
    );

    // NIC counters: the rises over the intervals add up to nic_metrics_sum's.
    let sum = stats_json(&p.report, "nic_metrics_sum");
    assert_eq!(sum.len(), 1, "{sum:?}");
    let rises = sqlite(
        &db,
        "SELECT i.name, n.name, sum(m.value) FROM NET_NIC_METRIC m \
         JOIN NIC_ID_MAP USING (globalId) JOIN TARGET_INFO_NIC_INFO i USING (nicId) \
         JOIN TARGET_INFO_NETWORK_METRICS n USING (metricsListId, metricsIdx) \
         GROUP BY i.name, n.name ORDER BY n.name",
    );
    let by_name = |metric: &str| {
        rises
            .iter()
            .find(|r| r[0] == "lo" && r[1] == metric)
            .map(|r| num(&r[2]))
            .unwrap_or_else(|| panic!("no {metric} of lo in {rises:?}"))
    };
    for (metric, column) in [
        ("Bytes received", "RX Bytes"),
        ("Packets received", "RX Packets"),
        ("Bytes sent", "TX Bytes"),
        ("Packets sent", "TX Packets"),
    ] {
        assert_eq!(
            by_name(metric),
            sum[0][column].as_i64().unwrap(),
            "NET_NIC_METRIC {metric}"
        );
    }
    let intervals = sqlite(
        &db,
        "SELECT count(*) FROM NET_NIC_METRIC WHERE metricsIdx = 0",
    );
    assert_eq!(
        num(&intervals[0][0]),
        sum[0]["Samples"].as_i64().unwrap() - 1,
        "one row per counter per interval"
    );

    // Perfetto: the counter tracks carry the same values at the same times.
    let o = Command::new(perfetto_python())
        .args(["-c", PERFETTO_COUNTERS])
        .arg(p.report.with_extension("pftrace"))
        .finish();
    assert!(o.status.success(), "reading the trace: {}", stderr(&o));
    let tracks: Value = serde_json::from_slice(&o.stdout).unwrap();
    let track = |name: &str| -> Vec<(i64, f64)> {
        tracks[name]
            .as_array()
            .unwrap_or_else(|| panic!("no counter track {name}"))
            .iter()
            .map(|v| (v[0].as_i64().unwrap(), v[1].as_f64().unwrap()))
            .collect()
    };
    for (part, column) in [("RSS", "rss"), ("anon", "anon"), ("file", "file")] {
        let want: Vec<(i64, f64)> = host
            .iter()
            .filter(|r| int(r, "pid") == pid)
            .map(|r| (int(r, "ts"), int(r, column) as f64))
            .collect();
        assert_eq!(track(&format!("{pid}/Host memory {part}")), want, "{part}");
    }
    let device = int(&ppu[0], "device");
    let of_device: Vec<&Value> = ppu.iter().filter(|r| int(r, "device") == device).collect();
    let util = track(&format!("{pid}/PPU {device} utilization"));
    assert_eq!(util.len(), of_device.len());
    for ((ts, u), r) in util.iter().zip(&of_device) {
        assert_eq!(*ts, int(r, "ts"));
        let want = int(r, "busyNs") as f64 * 100.0 / int(r, "intervalNs") as f64;
        assert!((u - want).abs() < 1e-9, "{u} %, {want} % in the report");
    }
    let want: Vec<(i64, f64)> = of_device
        .iter()
        .map(|r| (int(r, "ts"), int(r, "memoryUsed") as f64))
        .collect();
    assert_eq!(track(&format!("{pid}/PPU {device} memory used")), want);
    let rx = track("0/NIC lo rx bytes");
    assert_eq!(rx.len() as i64, sum[0]["Samples"].as_i64().unwrap());
    assert_eq!(rx[0].1, 0.0, "counted from the first sample");
    assert_eq!(
        rx.last().unwrap().1 as i64,
        sum[0]["RX Bytes"].as_i64().unwrap()
    );
}

/// `--ppu-metrics-device all` also asks NVML for NVIDIA devices. Where its
/// library is not installed (no NVIDIA driver, as on the test machines) the
/// run warns once, naming the library, and goes on.
#[test]
fn without_nvml_ppu_metrics_warn_once_and_the_run_goes_on() {
    require_root();
    let s = Scratch::new("metrics-nvml");
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "none",
        "-s",
        "none",
        "--ppu-metrics-device",
        "all",
        "--ppu-metrics-frequency",
        "50",
        "-o",
        report.to_str().unwrap(),
        "sleep",
        "0.3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(report.with_extension("asysrep").is_file());
    let ldconfig = Command::new("ldconfig").arg("-p").finish();
    let installed = stdout(&ldconfig).contains("libnvidia-ml.so.1");
    let err = stderr(&o);
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("libnvidia-ml.so.1"))
        .collect();
    if installed {
        eprintln!("NVML is installed here: no warning expected");
        assert!(warnings.is_empty(), "{err}");
    } else {
        assert_eq!(warnings.len(), 1, "{err}");
        assert!(warnings[0].starts_with("asys: warning: --ppu-metrics-device"));
    }
}

/// What the stand-in RDMA port's counters are set to, in turn, by the
/// traced script: (port_rcv_data in 4-byte words, port_rcv_packets,
/// port_xmit_packets, hw_counters/out_of_sequence).
const RDMA_STEPS: [(u64, u64, u64, u64); 3] = [
    (100, 100, 100, 5),
    (1100, 150, 100, 17),
    (2100, 150, 300, 20),
];

/// RDMA counters: no RDMA device (nor Soft-RoCE module) is available here,
/// so the test lays out a port as the kernel does in a tmpfs and, in a
/// mount namespace of its own, mounts it at /sys/class/infiniband (over a
/// tmpfs on /sys/class that keeps the real /sys/class/net). The traced
/// script sets the counters while asys samples them: nic_metrics_sum, the
/// SQLite export and the Perfetto export give what it wrote, the data
/// counters in bytes (4 per word).
#[test]
fn rdma_port_counters_follow_what_was_written_to_a_port_laid_out_as_sysfs() {
    require_root();
    let s = Scratch::new("metrics-rdma");
    let port = s.path("ib/mlx5_0/ports/1");
    std::fs::create_dir_all(port.join("counters")).unwrap();
    std::fs::create_dir_all(port.join("hw_counters")).unwrap();
    let set = |step: (u64, u64, u64, u64)| {
        format!(
            "echo {} > $D/counters/port_rcv_data; echo {} > $D/counters/port_rcv_packets; \
             echo {} > $D/counters/port_xmit_packets; echo {} > $D/hw_counters/out_of_sequence\n",
            step.0, step.1, step.2, step.3
        )
    };
    for c in ["port_xmit_data", "port_rcv_errors", "port_xmit_discards"] {
        std::fs::write(port.join("counters").join(c), "0\n").unwrap();
    }
    let first = set(RDMA_STEPS[0]).replace("$D", port.to_str().unwrap());
    assert!(
        Command::new("sh")
            .args(["-c", &first])
            .finish()
            .status
            .success()
    );
    let mut script = "#!/bin/sh\nD=/sys/class/infiniband/mlx5_0/ports/1\n".to_string();
    for &step in &RDMA_STEPS[1..] {
        script += "sleep 0.3\n";
        script += &set(step);
    }
    script += "sleep 0.3\n";
    let bump = s.path("bump.sh");
    std::fs::write(&bump, script).unwrap();
    let report = profile_with_infiniband(&s, &bump, 20);
    let (first, last) = (RDMA_STEPS[0], RDMA_STEPS[2]);

    let sum = stats_json(&report, "nic_metrics_sum");
    let row = sum
        .iter()
        .find(|r| r["Device"] == "mlx5_0/1")
        .unwrap_or_else(|| panic!("no RDMA port in {sum:?}"));
    assert_eq!(row["RX Bytes"].as_u64(), Some((last.0 - first.0) * 4));
    assert_eq!(row["RX Packets"].as_u64(), Some(last.1 - first.1));
    assert_eq!(row["TX Packets"].as_u64(), Some(last.2 - first.2));
    assert_eq!(row["TX Bytes"].as_u64(), Some(0));

    let o = run(&[
        "export",
        "--type",
        "sqlite,perfetto",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = sqlite(
        &report.with_extension("sqlite"),
        "SELECT m.portId, m.metricsListId, n.name, sum(m.value) FROM NET_NIC_METRIC m \
         JOIN NIC_ID_MAP USING (globalId) JOIN TARGET_INFO_NIC_INFO i USING (nicId) \
         JOIN TARGET_INFO_NETWORK_METRICS n USING (metricsListId, metricsIdx) \
         WHERE i.name = 'mlx5_0' AND n.name IN ('Bytes received', 'out_of_sequence') \
         GROUP BY 1, 2, 3 ORDER BY 2",
    );
    let want =
        |list: &str, name: &str, v: u64| vec!["1".into(), list.into(), name.into(), v.to_string()];
    assert_eq!(
        rows,
        vec![
            want("0", "Bytes received", (last.0 - first.0) * 4),
            want("1", "out_of_sequence", last.3 - first.3)
        ]
    );
    let o = Command::new(perfetto_python())
        .args(["-c", PERFETTO_COUNTERS])
        .arg(report.with_extension("pftrace"))
        .finish();
    assert!(o.status.success(), "reading the trace: {}", stderr(&o));
    let tracks: Value = serde_json::from_slice(&o.stdout).unwrap();
    let last_of = |name: &str| {
        tracks[name]
            .as_array()
            .unwrap_or_else(|| panic!("no {name}"))
            .last()
            .unwrap()[1]
            .as_u64()
    };
    assert_eq!(
        last_of("0/NIC mlx5_0/1 rx bytes"),
        Some((last.0 - first.0) * 4)
    );
    assert_eq!(
        last_of("0/RDMA mlx5_0/1 out_of_sequence"),
        Some(last.3 - first.3)
    );
}

/// Runs `asys profile --nic-metrics` on `sh bump` sampling `hz` times a
/// second, in a mount namespace whose /sys/class/infiniband is the test's
/// `ib` folder (the interfaces of /sys/class/net stay); returns the report.
fn profile_with_infiniband(s: &Scratch, bump: &Path, hz: u32) -> PathBuf {
    let report = s.path("r");
    let net = s.path("net");
    std::fs::create_dir_all(&net).unwrap();
    let inside = format!(
        "set -e; mount --make-rprivate /; mount --bind /sys/class/net {net}; \
         mount -t tmpfs none /sys/class; mkdir /sys/class/net /sys/class/infiniband; \
         mount --bind {net} /sys/class/net; mount --bind {ib} /sys/class/infiniband; \
         exec {asys} profile -t none -s none --nic-metrics true --nic-metrics-frequency {hz} \
         -o {report} sh {bump}",
        net = net.display(),
        ib = s.path("ib").display(),
        asys = asys_bin().display(),
        report = report.display(),
        bump = bump.display(),
    );
    let o = Command::new("unshare")
        .args(["-m", "sh", "-c", &inside])
        .finish();
    assert!(o.status.success(), "{}", stderr(&o));
    report.with_extension("asysrep")
}

/// A counter file read while it is rewritten (a shell's `echo N > file`
/// truncates, then writes) reads empty. That sample of the port is left
/// out; it used to be recorded as zeros, which read as the counter starting
/// again, and the rise over the run counted from them: 4.5 to 8.6 times
/// the bytes written in five runs of this test's workload, and packets and
/// drops that were never counted (one such torn read, in the test above,
/// failed a CI run).
#[test]
fn an_rdma_counter_read_while_it_is_rewritten_is_not_a_reset() {
    require_root();
    let s = Scratch::new("metrics-rdma-torn");
    let port = s.path("ib/mlx5_0/ports/1");
    std::fs::create_dir_all(port.join("counters")).unwrap();
    for c in [
        "port_rcv_data",
        "port_rcv_packets",
        "port_xmit_data",
        "port_xmit_packets",
        "port_rcv_errors",
        "port_xmit_discards",
    ] {
        std::fs::write(port.join("counters").join(c), "100\n").unwrap();
    }
    // A driver's hardware counter, as mlx5 has: the port is sampled even
    // when its port counters are not read.
    std::fs::create_dir_all(port.join("hw_counters")).unwrap();
    std::fs::write(port.join("hw_counters/out_of_sequence"), "1\n").unwrap();
    // 4000 rewrites, one word more each, as fast as the shell goes.
    let (from, to) = (100u64, 4100u64);
    let bump = s.path("bump.sh");
    std::fs::write(
        &bump,
        format!(
            "#!/bin/sh\nD=/sys/class/infiniband/mlx5_0/ports/1/counters\nsleep 0.3\ni={from}\n\
             while [ $i -lt {to} ]; do i=$((i+1)); echo $i > $D/port_rcv_data; done\nsleep 0.3\n"
        ),
    )
    .unwrap();
    let report = profile_with_infiniband(&s, &bump, 100);
    let sum = stats_json(&report, "nic_metrics_sum");
    let row = sum
        .iter()
        .find(|r| r["Device"] == "mlx5_0/1")
        .unwrap_or_else(|| panic!("no RDMA port in {sum:?}"));
    assert_eq!(row["RX Bytes"].as_u64(), Some((to - from) * 4), "{row}");
    for untouched in ["RX Packets", "TX Packets", "RX Dropped", "TX Dropped"] {
        assert_eq!(row[untouched].as_u64(), Some(0), "{untouched}: {row}");
    }
}
