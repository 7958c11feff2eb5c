//! `flowsteer queues IFACE`: an interface's receive and transmit queues,
//! their RPS/XPS masks and interrupts, and the CPU the poller of each
//! receive queue would be pinned to by `flowsteer run --source
//! afpacket:|afxdp:` (FreeBSD's `intrctl list`, M19).
//!
//! Everything comes from sysfs and procfs of the current network namespace
//! (`/sys/class/net/IFACE/...`, `/proc/interrupts`, `/proc/irq/N/`); missing
//! files print `-` (veth has no interrupts and no NUMA node).

use crate::cli::QueuesArgs;
use anyhow::{bail, Result};
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

#[derive(Debug, Serialize)]
struct Report {
    schema: &'static str,
    iface: String,
    driver: Option<String>,
    mtu: Option<u64>,
    operstate: Option<String>,
    numa_node: Option<i64>,
    rx_queues: usize,
    tx_queues: usize,
    queues: Vec<QueueRow>,
}

pub fn run(args: &QueuesArgs) -> Result<i32> {
    let base = Path::new("/sys/class/net").join(&args.iface);
    if !base.exists() {
        bail!(
            "interface {} does not exist in this network namespace (see `ip link`; use `ip netns exec NS flowsteer queues ...` for another namespace)",
            args.iface
        );
    }
    let available = crate::cmd::run::available_cpus();
    let pollers: &[u32] = if args.queue_cpus.is_empty() { &available } else { &args.queue_cpus };
    for c in pollers {
        if !available.contains(c) {
            bail!("--queue-cpus: CPU {c} is not available to this process (available: {available:?})");
        }
    }
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let irqs = interrupt_lines(&interrupts, &args.iface);
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
    let report = Report {
        schema: "flowsteer.queues.v1",
        iface: args.iface.clone(),
        driver: std::fs::read_link(base.join("device/driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
        mtu: read(&base.join("mtu")).and_then(|s| s.parse().ok()),
        operstate: read(&base.join("operstate")),
        numa_node: read(&base.join("device/numa_node")).and_then(|s| s.parse().ok()),
        rx_queues: queues.iter().filter(|q| q.kind == "rx").count(),
        tx_queues: queues.iter().filter(|q| q.kind == "tx").count(),
        queues,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(0);
    }
    println!(
        "{}: driver {}, mtu {}, {}, numa node {}, {} rx / {} tx queues",
        report.iface,
        report.driver.as_deref().unwrap_or("-"),
        report.mtu.map_or("-".into(), |m| m.to_string()),
        report.operstate.as_deref().unwrap_or("-"),
        report.numa_node.map_or("-".into(), |n| n.to_string()),
        report.rx_queues,
        report.tx_queues
    );
    println!("{:<8} {:>12} {:>8} {:<28} {:>6}", "Queue", "RPS/XPS CPUs", "FlowCnt", "IRQ (CPUs)", "Poller");
    for q in &report.queues {
        let irq = if q.irqs.is_empty() {
            "-".to_string()
        } else {
            q.irqs.iter().map(|i| format!("{} ({})", i.irq, list_text(&i.cpus))).collect::<Vec<_>>().join(", ")
        };
        println!(
            "{:<8} {:>12} {:>8} {:<28} {:>6}",
            format!("{}-{}", q.kind, q.index),
            list_text(&q.steer_cpus),
            q.rps_flow_cnt.map_or("-".into(), |n| n.to_string()),
            irq,
            q.poller_cpu.map_or("-".into(), |c| c.to_string())
        );
    }
    Ok(0)
}

/// Receive queue indices of an interface (from sysfs), ascending; an
/// error naming the interface when it does not exist here.
pub fn rx_queues(iface: &str) -> Result<Vec<u32>> {
    let base = Path::new("/sys/class/net").join(iface);
    if !base.exists() {
        bail!("interface {iface} does not exist (see `ip link`)");
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

/// A sysfs CPU mask ("00000000,00000003") as a CPU list; "0" / empty: none.
fn parse_mask(mask: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for (word_idx, word) in mask.trim().rsplit(',').enumerate() {
        let Ok(bits) = u32::from_str_radix(word.trim(), 16) else { return Vec::new() };
        for b in 0..32 {
            if bits & (1 << b) != 0 {
                cpus.push(word_idx as u32 * 32 + b);
            }
        }
    }
    cpus.sort_unstable();
    cpus
}

/// A CPU list ("0-3,8") as CPUs.
fn parse_list(s: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    v.extend(a..=b.min(a.saturating_add(4096)));
                }
            }
            None => v.extend(part.parse::<u32>().ok()),
        }
    }
    v
}

/// "0-3,8" from a sorted CPU list; "-" when empty.
fn list_text(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        return "-".into();
    }
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", cpus[i], cpus[j]) } else { cpus[i].to_string() });
        i = j + 1;
    }
    out.join(",")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_lists_and_irq_names() {
        assert_eq!(parse_mask("00000000,00000003"), vec![0, 1]);
        assert_eq!(parse_mask("1,00000000"), vec![32]);
        assert_eq!(parse_mask("0"), Vec::<u32>::new());
        assert_eq!(parse_mask("zz"), Vec::<u32>::new());
        assert_eq!(parse_list("0-3,8"), vec![0, 1, 2, 3, 8]);
        assert_eq!(list_text(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(list_text(&[]), "-");
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
