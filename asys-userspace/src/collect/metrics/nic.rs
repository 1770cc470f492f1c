//! The network interfaces' counters (`--nic-metrics`), from
//! /sys/class/net/IFACE/statistics: the kernel's totals since the
//! interface came up, for the interfaces of asys's own network namespace.
//! RDMA devices (/sys/class/infiniband/*/ports/*/counters) are not read.
use std::path::Path;

/// Where the kernel lists the interfaces of the reader's namespace.
const NET: &str = "/sys/class/net";

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
}
