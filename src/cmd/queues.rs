//! `flowsteer queues IFACE`: an interface's receive and transmit queues,
//! their RPS/XPS masks and interrupts, and the CPU the poller of each
//! receive queue would be pinned to by `flowsteer run --source
//! afpacket:|afxdp:` (FreeBSD's `intrctl list`).
//!
//! Everything comes from sysfs and procfs of the current network namespace
//! (`/sys/class/net/IFACE/...`, `/proc/interrupts`, `/proc/irq/N/`); missing
//! files print `-` (veth has no interrupts and no NUMA node).

use crate::cli::QueuesArgs;
use anyhow::{bail, Result};
use flowsteer_live::cpus::{available_cpus, list_text};
use flowsteer_live::queues::{read_interface, InterfaceQueues};
use serde::Serialize;

/// The JSON document: the interface's queues under a schema name.
#[derive(Debug, Serialize)]
struct Report {
    schema: &'static str,
    #[serde(flatten)]
    interface: InterfaceQueues,
}

pub fn run(args: &QueuesArgs) -> Result<i32> {
    if !flowsteer_live::queues::exists(&args.iface) {
        bail!(
            "interface {} does not exist in this network namespace (see `ip link`; use `ip netns exec NS flowsteer queues ...` for another namespace)",
            args.iface
        );
    }
    let available = available_cpus();
    let pollers: &[u32] = if args.queue_cpus.is_empty() { &available } else { &args.queue_cpus };
    crate::cmd::check_cpus("--queue-cpus", pollers)?;
    let report = Report { schema: "flowsteer.queues.v1", interface: read_interface(&args.iface, pollers)? };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(0);
    }
    println!(
        "{}: driver {}, mtu {}, {}, numa node {}, {}, {}",
        report.interface.iface,
        report.interface.driver.as_deref().unwrap_or("-"),
        report.interface.mtu.map_or("-".into(), |m| m.to_string()),
        report.interface.operstate.as_deref().unwrap_or("-"),
        report.interface.numa_node.map_or("-".into(), |n| n.to_string()),
        crate::report::count(report.interface.rx_queues as u64, "rx queue", "rx queues"),
        crate::report::count(report.interface.tx_queues as u64, "tx queue", "tx queues")
    );
    println!("{:<8} {:>12} {:>8} {:<28} {:>6}", "Queue", "RPS/XPS CPUs", "FlowCnt", "IRQ (CPUs)", "Poller");
    for q in &report.interface.queues {
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
    println!("{}", crate::legend::footer(crate::legend::QUEUES));
    Ok(0)
}
