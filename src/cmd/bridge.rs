//! `flowsteer bridge`: an L2 learning bridge between live ports, with a
//! per-port and a per-worker table every `--interval` and at the end.

use crate::cli::BridgeArgs;
use anyhow::{Context, Result};
use flowsteer_bridge::{Bridge, BridgeConfig, BridgeStats};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The control socket when `--ctl` is not given.
pub const DEFAULT_CTL: &str = "/run/flowsteer-bridge.sock";

pub fn run(args: &BridgeArgs) -> Result<i32> {
    let cfg = BridgeConfig {
        ports: args.ports.clone(),
        workers: args.workers,
        cpus: args.cpus.clone(),
        ageing_s: args.ageing,
        max_learned: args.max_learned,
        max_learned_per_port: args.max_learned,
        rx_copy_threshold: args.rx_copy_threshold,
        tx_queue: args.tx_queue.parse()?,
        vlan_filtering: args.vlan_filtering,
        port_vlans: args.port_vlans.iter().cloned().collect::<BTreeMap<_, _>>(),
        ..BridgeConfig::default()
    };
    cfg.validate().map_err(|e| crate::cmd::usage(e.to_string()))?;
    let stop = flowsteer_live::stop_on_signals()?;
    let bridge = Bridge::start(cfg).context("starting the bridge")?;
    crate::cmd::warn_all(bridge.warnings());
    let ctl_path = args.ctl.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_CTL));
    let _ctl = match flowsteer_bridge::ctl::serve(&ctl_path, bridge.control()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("warning: no control socket: {e}");
            None
        }
    };
    let _metrics = match args.metrics {
        Some(addr) => Some(flowsteer_bridge::metrics::serve(addr, bridge.control()).context("metrics endpoint")?),
        None => None,
    };
    if !args.json {
        let ports: Vec<String> = args.ports.iter().map(ToString::to_string).collect();
        println!(
            "bridge: {} ports ({}), {} worker(s), control socket {}",
            ports.len(),
            ports.join(" "),
            args.workers,
            ctl_path.display()
        );
    }
    let start = Instant::now();
    let end = args.duration.map(|d| start + Duration::from_secs_f64(d));
    let every = args.interval.map(Duration::from_secs_f64);
    let mut next = every.map(|e| start + e);
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| Instant::now() < e) {
        std::thread::sleep(Duration::from_millis(20));
        if let (Some(n), Some(e)) = (next, every) {
            if Instant::now() >= n {
                next = Some(n + e);
                if !args.json {
                    print_tables(&bridge.stats(), false);
                }
            }
        }
    }
    let fin = bridge.stop();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&fin)?);
    } else {
        print_tables(&fin, true);
    }
    Ok(0)
}

fn reasons(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

fn print_tables(s: &BridgeStats, last: bool) {
    println!("{} at {:.1} s", if last { "final" } else { "interval" }, s.uptime_s);
    println!(
        "{:<16} {:<8} {:>3} {:>12} {:>12} {:>12} {:>10} {:>12} {:>10}",
        "port", "kind", "up", "received", "forwarded", "flooded", "dropped", "transmitted", "tx_dropped"
    );
    for p in &s.ports {
        let name = if p.member { p.name.clone() } else { format!("-{}", p.name) };
        println!(
            "{:<16} {:<8} {:>3} {:>12} {:>12} {:>12} {:>10} {:>12} {:>10}",
            name,
            p.kind,
            if p.up { "yes" } else { "no" },
            p.received,
            p.forwarded,
            p.flooded,
            p.dropped.values().sum::<u64>(),
            p.transmitted,
            p.tx_dropped.values().sum::<u64>()
        );
    }
    println!("{}", crate::legend::footer(crate::legend::BRIDGE_PORTS));
    println!(
        "{:<6} {:>4} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "worker", "cpu", "received", "forwarded", "flooded", "dropped", "rx_copied"
    );
    for w in &s.workers {
        let cpu = w.cpu.map_or("-".to_string(), |c| c.to_string());
        println!(
            "{:<6} {:>4} {:>12} {:>12} {:>12} {:>10} {:>10}",
            w.worker,
            cpu,
            w.received,
            w.forwarded,
            w.flooded,
            w.dropped.values().sum::<u64>(),
            w.rx_copied
        );
    }
    println!("{}", crate::legend::footer(crate::legend::BRIDGE_WORKERS));
    for p in &s.ports {
        if !p.dropped.is_empty() || !p.tx_dropped.is_empty() {
            println!("  {}: dropped {}; tx_dropped {}", p.name, reasons(&p.dropped), reasons(&p.tx_dropped));
        }
    }
    let f = &s.fdb;
    println!(
        "fdb: {} entries ({} learned, {} static, max {}); learned {}, moved {}, aged {}, flushed {}, not learned (full) {}, events dropped {}",
        f.entries, f.learned_entries, f.static_entries, f.max_learned, f.learned, f.moved, f.aged, f.flushed, f.not_learned_full, f.events_dropped
    );
    println!("conservation {}: {}", if s.conservation_ok { "ok" } else { "BROKEN" }, s.conservation);
}
