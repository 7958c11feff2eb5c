//! An interface's receive and transmit queues, their RPS/XPS masks and
//! interrupts, and the CPU the poller of each receive queue would be pinned
//! to (FreeBSD's `intrctl list`).
//!
//! Everything comes from sysfs and procfs of the current network namespace
//! (`/sys/class/net/IFACE/...`, `/proc/interrupts`, `/proc/irq/N/`); a
//! missing file is `None` or empty (veth has no interrupts and no NUMA node).

use crate::cpus::{parse_list, parse_mask};
use crate::error::LiveError;
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Serialize, PartialEq)]
pub struct QueueRow {
    /// `rx` or `tx`.
    pub kind: &'static str,
    pub index: u32,
    /// RPS (rx) / XPS (tx) CPU list; empty: none set.
    pub steer_cpus: Vec<u32>,
    /// RPS flow table entries (rx only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rps_flow_cnt: Option<u64>,
    /// Interrupts whose name mentions this queue, with their CPU affinity.
    pub irqs: Vec<Irq>,
    /// CPU the poller thread of this receive queue would be pinned to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poller_cpu: Option<u32>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Irq {
    pub irq: u32,
    pub name: String,
    pub cpus: Vec<u32>,
}

/// What sysfs and procfs say about one interface.
#[derive(Debug, Serialize)]
pub struct InterfaceQueues {
    pub iface: String,
    pub driver: Option<String>,
    pub mtu: Option<u64>,
    pub operstate: Option<String>,
    pub numa_node: Option<i64>,
    pub rx_queues: usize,
    pub tx_queues: usize,
    pub queues: Vec<QueueRow>,
}

/// Reads an interface's queues; receive queue `i`'s poller is
/// `pollers[i % pollers.len()]` (none when `pollers` is empty).
pub fn read_interface(iface: &str, pollers: &[u32]) -> Result<InterfaceQueues, LiveError> {
    let base = Path::new("/sys/class/net").join(iface);
    if !base.exists() {
        return Err(LiveError::NoInterface(iface.to_string()));
    }
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let irqs = interrupt_lines(&interrupts, iface);
    let mut queues = Vec::new();
    for (kind, prefix, mask_file) in [("rx", "rx-", "rps_cpus"), ("tx", "tx-", "xps_cpus")] {
        for index in queue_indices(&base.join("queues"), prefix) {
            let dir = base.join("queues").join(format!("{prefix}{index}"));
            let steer_cpus = read(&dir.join(mask_file)).map(|m| parse_mask(&m)).unwrap_or_default();
            let rps_flow_cnt =
                (kind == "rx").then(|| read(&dir.join("rps_flow_cnt")).and_then(|s| s.parse().ok())).flatten();
            let qirqs = irqs
                .iter()
                .filter(|(_, name)| irq_matches_queue(name, kind, index))
                .map(|(irq, name)| Irq {
                    irq: *irq,
                    name: name.clone(),
                    cpus: read(Path::new(&format!("/proc/irq/{irq}/smp_affinity_list")))
                        .map(|s| parse_list(&s))
                        .unwrap_or_default(),
                })
                .collect();
            let poller_cpu = (kind == "rx" && !pollers.is_empty()).then(|| pollers[index as usize % pollers.len()]);
            queues.push(QueueRow { kind, index, steer_cpus, rps_flow_cnt, irqs: qirqs, poller_cpu });
        }
    }
    Ok(InterfaceQueues {
        iface: iface.to_string(),
        driver: std::fs::read_link(base.join("device/driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
        mtu: read(&base.join("mtu")).and_then(|s| s.parse().ok()),
        operstate: read(&base.join("operstate")),
        numa_node: read(&base.join("device/numa_node")).and_then(|s| s.parse().ok()),
        rx_queues: queues.iter().filter(|q| q.kind == "rx").count(),
        tx_queues: queues.iter().filter(|q| q.kind == "tx").count(),
        queues,
    })
}

/// True when the interface exists in this network namespace.
pub fn exists(iface: &str) -> bool {
    Path::new("/sys/class/net").join(iface).exists()
}

/// Receive queue indices of an interface (from sysfs), ascending; an
/// error naming the interface when it does not exist here.
pub fn rx_queues(iface: &str) -> Result<Vec<u32>, LiveError> {
    let base = Path::new("/sys/class/net").join(iface);
    if !base.exists() {
        return Err(LiveError::NoInterface(iface.to_string()));
    }
    Ok(queue_indices(&base.join("queues"), "rx-"))
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Indices of `queues/PREFIX<n>` directories, ascending.
fn queue_indices(dir: &Path, prefix: &str) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_prefix(prefix)?.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// `(irq, name)` of the /proc/interrupts lines that name the interface.
fn interrupt_lines(text: &str, iface: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|l| {
            let (num, rest) = l.trim_start().split_once(':')?;
            let irq = num.trim().parse().ok()?;
            let name = rest.split_whitespace().last()?.to_string();
            name.contains(iface).then_some((irq, name))
        })
        .collect()
}

/// Driver IRQ names end in the queue number ("eth0-TxRx-3", "mlx5_comp3",
/// "eth0-rx-3"); a combined TxRx vector serves both kinds.
fn irq_matches_queue(name: &str, kind: &str, index: u32) -> bool {
    let lower = name.to_ascii_lowercase();
    let digits: String = lower.chars().rev().take_while(|c| c.is_ascii_digit()).collect();
    let Ok(n) = digits.chars().rev().collect::<String>().parse::<u32>() else { return false };
    n == index && (lower.contains("txrx") || lower.contains(kind) || !(lower.contains("rx") || lower.contains("tx")))
}

/// The interface that holds `ip` as one of its addresses on this host (in
/// the calling thread's network namespace), or `None` (also when the
/// addresses cannot be read).
pub fn iface_with_addr(ip: std::net::IpAddr) -> Option<String> {
    if_addrs::get_if_addrs().ok()?.into_iter().find(|i| i.ip() == ip).map(|i| i.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_address_is_found_on_lo() {
        assert_eq!(iface_with_addr("127.0.0.1".parse().unwrap()).as_deref(), Some("lo"));
        assert_eq!(iface_with_addr("192.0.2.254".parse().unwrap()), None);
    }

    #[test]
    fn irq_names() {
        let procs = " 24:   10  0  PCI-MSI 1-edge  eth0-TxRx-0\n 25: 3 4 PCI-MSI eth0-TxRx-1\n 26: 1 1 x eth1-rx-0\n";
        let l = interrupt_lines(procs, "eth0");
        assert_eq!(l, vec![(24, "eth0-TxRx-0".into()), (25, "eth0-TxRx-1".into())]);
        assert!(irq_matches_queue("eth0-TxRx-1", "rx", 1));
        assert!(irq_matches_queue("eth0-TxRx-1", "tx", 1));
        assert!(!irq_matches_queue("eth0-TxRx-1", "rx", 0));
        assert!(irq_matches_queue("eth1-rx-0", "rx", 0));
        assert!(!irq_matches_queue("eth1-rx-0", "tx", 0));
    }
}
