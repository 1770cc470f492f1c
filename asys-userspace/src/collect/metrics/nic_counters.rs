//! The network interfaces' counters (`--nic-metrics`), from
//! /sys/class/net/IFACE/statistics: the kernel's totals since the
//! interface came up, for the interfaces of asys's own network namespace;
//! and the RDMA ports' (InfiniBand, RoCE), from
//! /sys/class/infiniband/DEV/ports/PORT/counters and hw_counters.
use std::path::Path;

/// Where the kernel lists the interfaces of the reader's namespace.
const NET: &str = "/sys/class/net";
/// Where the kernel lists the RDMA devices.
const INFINIBAND: &str = "/sys/class/infiniband";

/// One interface's counters at one time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

/// The counters of every interface `include` names (all when it is empty),
/// in name order; an interface that went away meanwhile is left out.
pub fn read_all(include: &[String]) -> Vec<NicCounters> {
    read_in(Path::new(NET), include)
}

fn read_in(net: &Path, include: &[String]) -> Vec<NicCounters> {
    let Ok(entries) = std::fs::read_dir(net) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| include.is_empty() || include.contains(n))
        .collect();
    names.sort_unstable();
    names
        .into_iter()
        .filter_map(|name| read_one(&net.join(&name).join("statistics"), name))
        .collect()
}

fn read_one(stats: &Path, name: String) -> Option<NicCounters> {
    let get = |counter: &str| -> Option<u64> {
        std::fs::read_to_string(stats.join(counter))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some(NicCounters {
        rx_bytes: get("rx_bytes")?,
        rx_packets: get("rx_packets")?,
        tx_bytes: get("tx_bytes")?,
        tx_packets: get("tx_packets")?,
        rx_dropped: get("rx_dropped")?,
        tx_dropped: get("tx_dropped")?,
        name,
    })
}

/// One RDMA port's counters at one time: the InfiniBand port counters in
/// the interface's shape (`name` is `DEV/PORT`, which no interface name can
/// be, as `/` is not allowed in one), and the driver's hardware counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaPort {
    /// `DEV/PORT`.
    pub name: String,
    /// None for a port without the InfiniBand port counters (Soft-RoCE's
    /// rxe has hardware counters only), and for a sample in which one of
    /// them could not be read: a zero there would read as the counter
    /// starting again (seen when a counter file was read as it was being
    /// rewritten), and the rise over the run would count from it.
    pub counters: Option<NicCounters>,
    /// Each readable file of `hw_counters`, in name order.
    pub hw: Vec<(String, u64)>,
}

/// The ports of every RDMA device `include` names (all when it is empty;
/// a device is named by itself, `mlx5_0`, or by one port, `mlx5_0/1`), in
/// name order. None on a machine without RDMA devices.
pub fn read_rdma(include: &[String]) -> Vec<RdmaPort> {
    read_rdma_in(Path::new(INFINIBAND), include)
}

fn sorted_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort_unstable();
    names
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A counter some ports lack: Some(0) when its file is not there, None when
/// it is there and cannot be read as a number (this sample of it is lost).
fn read_u64_if_there(path: &Path) -> Option<u64> {
    match std::fs::read_to_string(path) {
        Ok(s) => s.trim().parse().ok(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(0),
        Err(_) => None,
    }
}

fn read_rdma_in(root: &Path, include: &[String]) -> Vec<RdmaPort> {
    let mut out = Vec::new();
    for dev in sorted_names(root) {
        let ports = root.join(&dev).join("ports");
        for port in sorted_names(&ports) {
            let name = format!("{dev}/{port}");
            if !include.is_empty() && !include.contains(&dev) && !include.contains(&name) {
                continue;
            }
            if let Some(p) = read_port(&ports.join(&port), name) {
                out.push(p);
            }
        }
    }
    out
}

/// A port's counters; None when it has neither the data counters nor any
/// hardware counter.
fn read_port(port: &Path, name: String) -> Option<RdmaPort> {
    let counters = port.join("counters");
    let get = |c: &str| read_u64(&counters.join(c));
    // port_xmit_data and port_rcv_data count 4-byte words (the InfiniBand
    // specification's PortCounters); the rest count packets.
    let if_there = |c: &str| read_u64_if_there(&counters.join(c));
    let standard = match (
        get("port_rcv_data"),
        get("port_rcv_packets"),
        get("port_xmit_data"),
        get("port_xmit_packets"),
        // Received packets with errors, which the port drops, and packets
        // it had to discard rather than send.
        if_there("port_rcv_errors"),
        if_there("port_xmit_discards"),
    ) {
        (
            Some(rx_words),
            Some(rx_packets),
            Some(tx_words),
            Some(tx_packets),
            Some(rx_dropped),
            Some(tx_dropped),
        ) => Some(NicCounters {
            name: name.clone(),
            rx_bytes: rx_words.saturating_mul(4),
            rx_packets,
            tx_bytes: tx_words.saturating_mul(4),
            tx_packets,
            rx_dropped,
            tx_dropped,
        }),
        _ => None,
    };
    let hw_dir = port.join("hw_counters");
    // A counter whose file cannot be read (some drivers refuse reads of
    // counters the hardware lacks) is left out.
    let hw: Vec<(String, u64)> = sorted_names(&hw_dir)
        .into_iter()
        .filter_map(|c| Some((c.clone(), read_u64(&hw_dir.join(&c))?)))
        .collect();
    if standard.is_none() && hw.is_empty() {
        return None;
    }
    Some(RdmaPort {
        name,
        counters: standard,
        hw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_counters_of_the_included_interfaces_in_name_order() {
        let dir = std::env::temp_dir().join(format!("asys-nic-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (name, base) in [("eth1", 100u64), ("eth0", 10), ("broken", 0)] {
            let stats = dir.join(name).join("statistics");
            std::fs::create_dir_all(&stats).unwrap();
            if name == "broken" {
                std::fs::write(stats.join("rx_bytes"), "x\n").unwrap();
                continue;
            }
            for (i, c) in [
                "rx_bytes",
                "rx_packets",
                "tx_bytes",
                "tx_packets",
                "rx_dropped",
                "tx_dropped",
            ]
            .iter()
            .enumerate()
            {
                std::fs::write(stats.join(c), format!("{}\n", base + i as u64)).unwrap();
            }
        }
        let all = read_in(&dir, &[]);
        assert_eq!(
            all.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["eth0", "eth1"]
        );
        assert_eq!((all[1].rx_bytes, all[1].tx_dropped), (100, 105));
        let one = read_in(&dir, &["eth1".to_string()]);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].tx_bytes, 102);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A directory laid out as /sys/class/infiniband is (no RDMA device was
    /// available to test on): mlx5_0 with two ports, rxe0 with hardware
    /// counters only, and a device with no ports.
    #[test]
    fn rdma_ports_are_read_in_bytes_with_their_hw_counters() {
        let dir = std::env::temp_dir().join(format!("asys-rdma-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let write = |path: &str, v: &str| {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        };
        for (port, base) in [("1", 1000u64), ("2", 5000)] {
            let c = format!("mlx5_0/ports/{port}/counters");
            write(&format!("{c}/port_rcv_data"), &format!("{base}\n"));
            write(&format!("{c}/port_rcv_packets"), &format!("{}\n", base + 1));
            write(&format!("{c}/port_xmit_data"), &format!("{}\n", base + 2));
            write(
                &format!("{c}/port_xmit_packets"),
                &format!("{}\n", base + 3),
            );
            write(&format!("{c}/port_rcv_errors"), "7\n");
            write(&format!("{c}/port_xmit_discards"), "9\n");
            write(&format!("{c}/symbol_error"), "0\n");
            let h = format!("mlx5_0/ports/{port}/hw_counters");
            write(&format!("{h}/out_of_sequence"), &format!("{}\n", base + 4));
            write(&format!("{h}/rx_write_requests"), "11\n");
            // Unreadable as a number: left out.
            write(&format!("{h}/lifespan"), "n/a\n");
        }
        write("rxe0/ports/1/hw_counters/sent_pkts", "42\n");
        write("rxe0/ports/1/hw_counters/rcvd_pkts", "40\n");
        std::fs::create_dir_all(dir.join("empty0/ports")).unwrap();

        let all = read_rdma_in(&dir, &[]);
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["mlx5_0/1", "mlx5_0/2", "rxe0/1"]);
        let p = all[1].counters.as_ref().unwrap();
        // 4-byte words to bytes.
        assert_eq!((p.rx_bytes, p.tx_bytes), (5000 * 4, 5002 * 4));
        assert_eq!((p.rx_packets, p.tx_packets), (5001, 5003));
        assert_eq!((p.rx_dropped, p.tx_dropped), (7, 9));
        assert_eq!(
            all[0].hw,
            [
                ("out_of_sequence".to_string(), 1004),
                ("rx_write_requests".to_string(), 11)
            ]
        );
        // Hardware counters only: no port counters, not zeros.
        assert_eq!(all[2].counters, None);
        assert_eq!(
            all[2].hw,
            [("rcvd_pkts".to_string(), 40), ("sent_pkts".to_string(), 42)]
        );
        // --nic-device-include names a device or one of its ports.
        let one: Vec<String> = read_rdma_in(&dir, &["mlx5_0/2".into(), "rxe0".into()])
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(one, ["mlx5_0/2", "rxe0/1"]);
        assert!(read_rdma_in(&dir.join("none"), &[]).is_empty());
        // A counter read as it is rewritten (empty): no port counters this
        // time, rather than zeros that would read as a reset; its hardware
        // counters are still there. A drop counter the port lacks reads 0.
        write("mlx5_0/ports/1/counters/port_rcv_data", "");
        std::fs::remove_file(dir.join("mlx5_0/ports/2/counters/port_rcv_errors")).unwrap();
        let again = read_rdma_in(&dir, &["mlx5_0".into()]);
        assert_eq!(again[0].counters, None);
        assert_eq!(again[0].hw.len(), 2);
        let p2 = again[1].counters.as_ref().unwrap();
        assert_eq!((p2.rx_dropped, p2.tx_dropped), (0, 9));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
