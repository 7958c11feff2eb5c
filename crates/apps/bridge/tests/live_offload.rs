//! Real traffic across the bridge from hosts with the kernel's default
//! offloads (transmit checksum offload, TSO/GSO on their veths, as a
//! container runtime leaves them): a host's TCP and UDP frames carry
//! partial checksums, and a TCP sender hands its veth 64 KB GSO frames.
//! For every port kind, and for a bridge mixing both: ping over IPv4 and
//! IPv6, 10,000 sequenced UDP datagrams between every pair complete and in
//! order, 100 MB of TCP each way byte-exact (digests compared), over IPv4
//! and IPv6; the counters add up and nothing is dropped for offload state
//! the bridge could not carry. Root only; prints "skipped: <reason>"
//! otherwise.

mod common;

use common::{assert_conserved, ping, stats, tcp_transfer, udp_flow_to};
use flowsteer_bridge::api::BridgeStats;
use flowsteer_bridge::{Bridge, BridgeConfig, PortKind, PortSpec};
use flowsteer_netns::Star;
use std::net::IpAddr;
use std::time::Duration;

const HOSTS: usize = 3;
const DATAGRAMS: u32 = 10_000;
const TCP_BYTES: u64 = 100_000_000;

/// Every ordered pair of hosts.
fn pairs() -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    for a in 1..=HOSTS {
        for b in 1..=HOSTS {
            if a != b {
                v.push((a, b));
            }
        }
    }
    v
}

fn start(star: &Star, kinds: &[PortKind]) -> Bridge {
    let ports = kinds.iter().enumerate().map(|(i, &kind)| PortSpec { kind, iface: star.hub_dev(i + 1).into() });
    let cfg = BridgeConfig { ports: ports.collect(), ..BridgeConfig::default() };
    star.run_in(0, move || Bridge::start(cfg)).expect("enter hub").expect("bridge starts")
}

/// An XDP program on the hub side of a veth turns TSO off on its peer;
/// checksum offload stays on whatever the port kind.
fn check_host_offloads(star: &Star, kinds: &[PortKind]) {
    for (i, kind) in kinds.iter().enumerate() {
        let tso = host_feature(star, i + 1, "tcp-segmentation-offload");
        assert_eq!(tso, *kind == PortKind::Afpacket, "host {}: TSO {tso} with {kind:?}", i + 1);
        assert!(host_feature(star, i + 1, "tx-checksumming"), "host {}: checksum offload stays on", i + 1);
    }
}

/// Whether offload `feature` is on for host i's veth (`ethtool -k`).
fn host_feature(star: &Star, i: usize, feature: &str) -> bool {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", star.host_ns(i), "ethtool", "-k", &star.host_dev(i)])
        .output()
        .expect("ethtool runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with(&format!("{feature}:"))).unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().nth(1) == Some("on")
}

/// Nothing dropped for a reason that real traffic must never meet.
fn assert_no_offload_drops(s: &BridgeStats) {
    for p in &s.ports {
        for r in ["offload", "truncated", "too_big", "malformed"] {
            assert_eq!(p.dropped.get(r), None, "{}: {r}: {p:?}", p.name);
            assert_eq!(p.tx_dropped.get(r), None, "{} tx: {r}: {p:?}", p.name);
        }
    }
}

fn real_traffic(kinds: [PortKind; HOSTS], tag: &str) -> BridgeStats {
    let _one = common::one_at_a_time();
    if common::skip() {
        return BridgeStats::default();
    }
    let star = Star::with_ipv6(tag, HOSTS).unwrap();
    let bridge = start(&star, &kinds);
    let ctl = bridge.control();
    // What the README says of the hosts' side: an XDP program on the hub
    // side of a veth turns TSO off on its peer (the host segments before
    // its veth); an AF_PACKET port leaves the host's offloads as they are.
    match common::no_ethtool() {
        Some(why) => println!("host offload states not checked: {why}"),
        None => check_host_offloads(&star, &kinds),
    }
    for (a, b) in pairs() {
        assert!(ping(&star, a, b), "ping {a} -> {b}");
        let v6 = IpAddr::V6(star.v6(b));
        let ok = star.run_in(a, move || flowsteer_netns::ping(v6, Duration::from_secs(5))).unwrap().unwrap();
        assert!(ok, "ping6 {a} -> {b}");
    }

    // UDP: every pair, IPv4 then IPv6, 10,000 datagrams of 1,000 bytes
    // (each with a partial checksum as its host sent it).
    for v6 in [false, true] {
        for (i, (a, b)) in pairs().into_iter().enumerate() {
            let addr = if v6 { IpAddr::V6(star.v6(b)) } else { IpAddr::V4(star.v4(b)) };
            let got = udp_flow_to(&star, a, b, addr, 41_000 + i as u16, DATAGRAMS, 25_000, 1_000).wait();
            got.assert_complete_with(DATAGRAMS, &format!("udp {a} -> {b} to {addr}"), ctl.as_ref());
        }
    }

    // TCP: 100 MB each way between hosts 1 and 2, at once, over IPv4 and
    // then IPv6; what arrived is what was sent.
    for v6 in [false, true] {
        let addr = |h: usize| if v6 { IpAddr::V6(star.v6(h)) } else { IpAddr::V4(star.v4(h)) };
        let limit = Duration::from_secs(60);
        let there = tcp_transfer(&star, 1, 2, addr(2), 42_001, TCP_BYTES, limit);
        let back = tcp_transfer(&star, 2, 1, addr(1), 42_002, TCP_BYTES, limit);
        for (what, t) in [("1 -> 2", there), ("2 -> 1", back)] {
            let t = t.join().unwrap();
            assert_eq!(t.sent.0, TCP_BYTES, "tcp {what} v6={v6}");
            assert_eq!(t.received, t.sent, "tcp {what} v6={v6}: bytes and digest");
        }
    }

    let live = stats(ctl.as_ref());
    assert_conserved(&live);
    assert_no_offload_drops(&live);
    let end = bridge.stop();
    assert_conserved(&end);
    assert_no_offload_drops(&end);
    println!("{:?}", end.workers);
    end
}

/// AF_XDP hands over no offload state: every partial checksum is told by
/// its field and completed in the worker.
#[test]
fn afxdp_ports_carry_tcp_and_udp_with_default_offloads() {
    let s = real_traffic([PortKind::Afxdp; HOSTS], "oxd");
    if s.workers.is_empty() {
        return;
    }
    let completed: u64 = s.workers.iter().map(|w| w.csum_completed).sum();
    assert!(completed >= u64::from(DATAGRAMS) * 12, "{:?}", s.workers);
}

/// AF_PACKET hands the offload state over and takes it back: partial
/// checksums and GSO frames go through untouched.
#[test]
fn afpacket_ports_carry_tcp_and_udp_with_default_offloads() {
    let s = real_traffic([PortKind::Afpacket; HOSTS], "opk");
    if s.workers.is_empty() {
        return;
    }
    let (completed, segmented): (u64, u64) =
        s.workers.iter().fold((0, 0), |(c, g), w| (c + w.csum_completed, g + w.gso_segmented));
    assert_eq!((completed, segmented), (0, 0), "{:?}", s.workers);
}

/// Hosts 1 and 3 on AF_PACKET ports, host 2 on AF_XDP: GSO frames from an
/// AF_PACKET host to the AF_XDP one are cut into segments in the worker,
/// partial checksums completed.
#[test]
fn mixed_ports_segment_gso_frames_for_afxdp() {
    let s = real_traffic([PortKind::Afpacket, PortKind::Afxdp, PortKind::Afpacket], "omx");
    if s.workers.is_empty() {
        return;
    }
    let segmented: u64 = s.workers.iter().map(|w| w.gso_segmented).sum();
    let completed: u64 = s.workers.iter().map(|w| w.csum_completed).sum();
    assert!(segmented > 0 && completed > 0, "{:?}", s.workers);
}
