//! Forwarding rate of 64-byte frames between two namespaces through the
//! bridge (afxdp, afpacket ports) and through the Linux bridge, on a star
//! lab of two hosts. Root only.
//!
//! `cargo run --release -p flowsteer-bridge --example fwd_rate [SECONDS]`

use flowsteer_afpacket::{TxConfig, TxSocket};
use flowsteer_bridge::{Bridge, BridgeConfig, PortKind, PortSpec};
use flowsteer_netns::{ip, Star};
use std::time::{Duration, Instant};

fn blast(star: &Star, secs: f64) -> (u64, u64, f64) {
    let (src, dst) = (star.mac(1), star.mac(2));
    let dev = star.host_dev(1);
    let before = star.rx_packets(2).unwrap();
    let (sent, elapsed) = star
        .run_in(1, move || {
            let mut tx = TxSocket::open(&dev, &TxConfig::default()).unwrap();
            // 60 bytes + 4 FCS on the wire = 64.
            let mut f = vec![0u8; 60];
            f[..6].copy_from_slice(&dst);
            f[6..12].copy_from_slice(&src);
            f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
            let batch: Vec<&[u8]> = vec![&f; 64];
            let start = Instant::now();
            let mut sent = 0u64;
            while start.elapsed() < Duration::from_secs_f64(secs) {
                sent += tx.send_batch(&batch) as u64;
            }
            (sent, start.elapsed().as_secs_f64())
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let got = star.rx_packets(2).unwrap() - before;
    (sent, got, elapsed)
}

fn main() {
    if let Some(why) = flowsteer_netns::skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    for kind in [Some(PortKind::Afxdp), Some(PortKind::Afpacket), None] {
        let star = Star::new("rate", 2).unwrap();
        let name = match kind {
            Some(PortKind::Afxdp) => "flowsteer bridge, afxdp ports",
            Some(PortKind::Afpacket) => "flowsteer bridge, afpacket ports",
            None => "Linux bridge",
        };
        let bridge = kind.map(|k| {
            let cfg = BridgeConfig {
                ports: (1..=2).map(|i| PortSpec { kind: k, iface: star.hub_dev(i).to_string() }).collect(),
                ..BridgeConfig::default()
            };
            star.run_in(0, move || Bridge::start(cfg)).unwrap().unwrap()
        });
        if kind.is_none() {
            let hub = star.hub_ns().to_string();
            ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]).unwrap();
            ip(&["-n", &hub, "link", "set", "br0", "up"]).unwrap();
            for i in 1..=2 {
                ip(&["-n", &hub, "link", "set", star.hub_dev(i), "master", "br0"]).unwrap();
            }
        }
        let (sent, got, t) = blast(&star, secs);
        println!(
            "{name}: sent {sent} ({:.3} Mfps), received {got} ({:.3} Mfps, {:.1} %)",
            sent as f64 / t / 1e6,
            got as f64 / t / 1e6,
            100.0 * got as f64 / sent.max(1) as f64
        );
        if let Some(b) = bridge {
            let s = b.stop();
            println!("  conservation {}: {}", s.conservation_ok, s.conservation);
        }
    }
}
