//! The interface's own drops on a bridge port: host 1 (its veth's MTU
//! raised to 9000) sends frames longer than the port's MTU, which the veth
//! refuses before the bridge's sockets, and small frames, which the bridge
//! floods. `stats` shows the refused frames on the port as the peer's
//! `tx_dropped` and, the same frames, in the interface's `rx_dropped`
//! (beside the sum: the bridge's `received` counts only what reached it);
//! the sums hold. Both port kinds. Root only; prints "skipped: <reason>"
//! otherwise.

mod common;

use common::{assert_conserved, port, start};
use flowsteer_bridge::PortKind;
use flowsteer_netns::Star;
use std::time::{Duration, Instant};

const LONG: u64 = 200;
const SMALL: u64 = 100;

/// Sends `LONG` frames of 2,000 bytes then `SMALL` frames of 60 bytes
/// (broadcast, ethertype 0x88b5) from host 1, one per call; returns (sent,
/// refused by the veth).
fn send(star: &Star) -> (u64, u64) {
    let dev = star.host_dev(1);
    let src = star.mac(1);
    star.run_in(1, move || {
        let mut tx = flowsteer_afpacket::TxSocket::open(&dev, &Default::default()).unwrap();
        let frame = |len: usize, k: u64| {
            let mut f = vec![0xff; 6];
            f.extend_from_slice(&src);
            f.extend_from_slice(&0x88b5u16.to_be_bytes());
            f.extend_from_slice(&k.to_be_bytes());
            f.resize(len, 0);
            f
        };
        for k in 0..LONG {
            tx.send_batch(&[frame(2000, k)]);
        }
        for k in 0..SMALL {
            tx.send_batch(&[frame(60, k)]);
            std::thread::sleep(Duration::from_micros(200));
        }
        let st = tx.stats();
        (st.sent, st.failed_total())
    })
    .unwrap()
}

fn interface_drops(kind: PortKind, tag: &str) {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let star = Star::new(tag, 2).unwrap();
    // Host 1 may send what the hub's port (MTU 1500) refuses. Before the
    // bridge starts: an XDP program on a veth limits its peer's MTU.
    common::sh(&["ip", "-n", star.host_ns(1), "link", "set", &star.host_dev(1), "mtu", "9000"]);
    let bridge = start(&star, kind, 2, |_| {});
    let ctl = bridge.control();
    std::thread::sleep(Duration::from_millis(300));
    let (sent, refused) = send(&star);
    assert_eq!((sent, refused), (SMALL, LONG), "the veth refuses exactly the long frames");
    let dev1 = star.hub_dev(1).to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    let s = loop {
        let s = common::stats(ctl.as_ref());
        if port(&s, &dev1).received >= SMALL || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let p = port(&s, &dev1);
    println!(
        "{kind:?}: port {dev1}: received {}, if_rx_packets {:?}, if_rx_dropped {:?}, peer_tx_dropped {:?}",
        p.received, p.if_rx_packets, p.if_rx_dropped, p.peer_tx_dropped
    );
    assert_conserved(&s);
    assert_eq!(p.peer_tx_dropped, Some(LONG), "{p:?}");
    // The same frames, counted by the port's interface: one rule, never added.
    assert_eq!(p.if_rx_dropped, Some(LONG), "{p:?}");
    assert!(p.received >= SMALL, "{p:?}");
    assert!(p.received < SMALL + LONG, "the refused frames never reach the bridge: {p:?}");
    let other = port(&s, star.hub_dev(2));
    assert_eq!(other.peer_tx_dropped, Some(0), "{other:?}");
    let table = flowsteer_bridge::ctl::stats_table(&s);
    assert!(table.contains("if_rx_dropped") && table.contains("peer_tx_dropped"), "{table}");
    let end = bridge.stop();
    assert_conserved(&end);
    assert_eq!(port(&end, &dev1).if_rx_dropped, Some(LONG));
}

#[test]
fn afpacket_port_shows_the_interface_drops_once() {
    interface_drops(PortKind::Afpacket, "bifp");
}

#[test]
fn afxdp_port_shows_the_interface_drops_once() {
    interface_drops(PortKind::Afxdp, "bifx");
}
