//! `flowsteer bridge`: an L2 learning bridge between live ports, with a
//! per-port and a per-worker table every `--interval`, on SIGUSR1 and at
//! the end. SIGHUP and SIGUSR2 are ignored; SIGINT/SIGTERM stop it.

use crate::cli::BridgeArgs;
use anyhow::{Context, Result};
use flowsteer_bridge::api::PortStats;
use flowsteer_bridge::{Bridge, BridgeConfig, BridgeStats};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub fn run(args: &BridgeArgs) -> Result<i32> {
    crate::cmd::check_cpus("--cpus", &args.cpus)?;
    let cfg = BridgeConfig {
        ports: args.ports.clone(),
        workers: args.workers,
        cpus: args.cpus.clone(),
        ageing_s: args.ageing,
        max_learned: args.max_learned,
        max_learned_per_port: args.port_max_learned,
        rx_copy_threshold: args.rx_copy_threshold,
        tx_queue: args.tx_queue.parse()?,
        vlan_filtering: args.vlan_filtering,
        vlan_protocol: args.vlan_protocol.parse()?,
        default_pvid: (args.default_pvid != 0).then_some(args.default_pvid),
        port_flags: args.port_flags.iter().cloned().collect::<BTreeMap<_, _>>(),
        worker_nice: Some(args.worker_nice),
        fast_path: args.fast_path.parse()?,
        port_vlans: args.port_vlans.iter().cloned().collect::<BTreeMap<_, _>>(),
        ..BridgeConfig::default()
    };
    cfg.validate().map_err(|e| crate::cmd::usage(e.to_string()))?;
    let stop = flowsteer_live::stop_on_signals()?;
    let report = flowsteer_live::report_on_sigusr1()?;
    let ctl_path = args.ctl.clone().unwrap_or_else(|| PathBuf::from(flowsteer_bridge::ctl::DEFAULT_CTL_PATH));
    // The path is taken before any port is opened: a second bridge on it
    // is refused without touching the ports of the first.
    let ctl_socket = flowsteer_bridge::ctl::bind(&ctl_path)?;
    let bridge = Bridge::start(cfg).context("starting the bridge")?;
    crate::cmd::warn_all(bridge.warnings());
    let _ctl = ctl_socket.serve(bridge.control())?;
    let _metrics = match args.metrics {
        Some(addr) => Some(flowsteer_bridge::metrics::serve(addr, bridge.control())?),
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
        for p in bridge.stats().ports {
            println!("  {}", port_line(&p));
        }
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
                    print_tables(&bridge.stats(), "interval");
                }
            }
        }
        if report.swap(false, Ordering::Relaxed) {
            match args.json {
                true => out(&format!("{}\n", serde_json::to_string_pretty(&bridge.stats())?)),
                false => print_tables(&bridge.stats(), "SIGUSR1"),
            }
        }
    }
    let fin = bridge.stop();
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&fin)?));
    } else {
        print_tables(&fin, "final");
    }
    Ok(0)
}

/// A port's line under the start-up header: its XDP mode (an `afxdp:`
/// port; with why native mode was refused when it fell back to generic)
/// and its fast path.
fn port_line(p: &PortStats) -> String {
    let xdp = match (&p.xdp_mode, &p.xdp_fallback) {
        (Some(mode), Some(why)) => format!("xdp {mode} (native refused: {why}), "),
        (Some(mode), None) => format!("xdp {mode}, "),
        (None, _) => String::new(),
    };
    format!("{}: {xdp}fast path {}", p.name, p.fast_path)
}

/// The tables, and the legend under the final ones (an interval's would
/// repeat it every few seconds; `--help` has it too).
fn print_tables(s: &BridgeStats, what: &str) {
    let table = flowsteer_bridge::ctl::stats_table(s);
    let legend = match what {
        "final" => format!("{}\n", crate::legend::footer(crate::legend::BRIDGE_STATS)),
        _ => String::new(),
    };
    out(&format!("{what} at {:.1} s\n{table}{legend}", s.uptime_s));
}

/// To stdout; a stdout gone (its terminal closed: SIGHUP) loses the text
/// but does not end the bridge.
fn out(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_line_says_its_xdp_mode_and_why_native_was_refused() {
        let mut p = PortStats {
            name: "veth1".into(),
            fast_path: "xdp".into(),
            xdp_mode: Some("native".into()),
            ..PortStats::default()
        };
        assert_eq!(port_line(&p), "veth1: xdp native, fast path xdp");
        p.xdp_mode = Some("generic".into());
        p.xdp_fallback = Some("its MTU is too large".into());
        assert_eq!(port_line(&p), "veth1: xdp generic (native refused: its MTU is too large), fast path xdp");
        let afpacket = PortStats {
            name: "veth2".into(),
            fast_path: "off (afpacket port: the workers forward)".into(),
            ..PortStats::default()
        };
        assert_eq!(port_line(&afpacket), "veth2: fast path off (afpacket port: the workers forward)");
    }
}
