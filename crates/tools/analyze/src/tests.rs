//! Analyzer tests: frames built with `flowsteer_wire::build`, expectations
//! from `RssConfig::place` directly.

use crate::{AnalyzeOptions, Analyzer, Report};
use flowsteer_rss::{HashTypes, QueueId, Reta, RssConfig, RssKey};
use flowsteer_wire::build::{self, VlanTag};
use flowsteer_wire::{proto, FlowTuple};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const ETHERNET: u32 = 1;

fn v4(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | i))
}

fn v6(i: u32) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(i)))
}

fn config(types: &str, key: RssKey) -> RssConfig {
    RssConfig::new(key, HashTypes::parse(types).unwrap(), Reta::round_robin(128, 4).unwrap())
}

fn analyze(config: &RssConfig, opts: AnalyzeOptions, frames: &[Vec<u8>]) -> Report {
    let mut a = Analyzer::new(config, opts);
    for f in frames {
        a.feed(ETHERNET, f, f.len() as u32);
    }
    a.finish()
}

fn queue_packets(r: &Report) -> Vec<u64> {
    r.queues.iter().map(|q| q.packets).collect()
}

fn nonzero(counts: impl IntoIterator<Item = u64>) -> usize {
    counts.into_iter().filter(|&n| n > 0).count()
}

fn udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16) -> FlowTuple {
    FlowTuple { src, dst, proto: proto::UDP, ports: Some((sport, dport)) }
}

#[test]
fn per_queue_counts_match_place() {
    let cfg = config("default", RssKey::microsoft());
    let mut frames = Vec::new();
    let mut expected = [0u64; 4];
    let mut expected_bytes = [0u64; 4];
    let mut expected_flows = [0u64; 4];
    for i in 0..200u32 {
        let (src, dst) = if i % 3 == 0 { (v6(i), v6(1000)) } else { (v4(i), v4(1000)) };
        let sport = 1024 + i as u16;
        let tcp = i % 2 == 0;
        let packets = 1 + i % 5;
        let t = FlowTuple { src, dst, proto: if tcp { proto::TCP } else { proto::UDP }, ports: Some((sport, 80)) };
        let q = usize::from(cfg.place(&t, false).queue.0);
        expected_flows[q] += 1;
        for _ in 0..packets {
            let f = if tcp {
                build::tcp_frame(src, dst, sport, 80, 1, 0x10, b"payload")
            } else {
                build::udp_frame(src, dst, sport, 80, b"payload")
            };
            expected[q] += 1;
            expected_bytes[q] += f.len() as u64;
            frames.push(f);
        }
    }
    let r = analyze(&cfg, AnalyzeOptions::default(), &frames);
    assert_eq!(queue_packets(&r), expected);
    assert_eq!(r.queues.iter().map(|q| q.bytes).collect::<Vec<_>>(), expected_bytes);
    assert_eq!(r.queues.iter().map(|q| q.flows).collect::<Vec<_>>(), expected_flows);
    assert_eq!(r.flows.tracked, 200);
    assert_eq!(r.packets_read, frames.len() as u64);
    assert_eq!(r.analysed_packets, frames.len() as u64);
    assert!(r.conservation_ok);
    assert_eq!(r.drops.total, 0);
    assert_eq!(r.unhashed.packets, 0);
    assert_eq!(r.split_flows.fragments.flows, 0);
    assert!(r.imbalance.max_mean >= 1.0 && r.imbalance.max_mean < 2.0, "{:?}", r.imbalance);
    assert!(r.inner.is_none());
    // CPUs follow the identity map.
    assert!(r.queues.iter().all(|q| u32::from(q.queue) == q.cpu));
}

/// A UDP flow whose whole packets (4-tuple under `all`) and fragments
/// (2-tuple) land on different queues.
fn splitting_flow(cfg: &RssConfig) -> FlowTuple {
    (1000..2000)
        .map(|sport| udp(v4(1), v4(2), sport, 53))
        .find(|t| cfg.place(t, false).queue != cfg.place(t, true).queue)
        .unwrap()
}

fn datagrams(t: &FlowTuple, whole: u16, fragmented: u16) -> Vec<Vec<u8>> {
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (t.src, t.dst) else { unreachable!() };
    let (sport, dport) = t.ports.unwrap();
    let mut frames = Vec::new();
    for id in 0..whole {
        frames.extend(build::ipv4_fragments(src, dst, sport, dport, id, &[7; 64], 1480));
    }
    for id in 100..100 + fragmented {
        let frags = build::ipv4_fragments(src, dst, sport, dport, id, &[7; 64], 24);
        assert_eq!(frags.len(), 3);
        frames.extend(frags);
    }
    frames
}

#[test]
fn fragments_split_a_flow_when_whole_packets_use_the_4tuple() {
    let cfg = config("all", RssKey::microsoft());
    let flow = splitting_flow(&cfg);
    let frames = datagrams(&flow, 5, 4);
    let r = analyze(&cfg, AnalyzeOptions::default(), &frames);
    assert_eq!(r.flows.tracked, 1, "later fragments join the first fragment's flow");
    assert_eq!(r.fragments.packets, 12);
    assert_eq!(r.fragments.first, 4);
    assert_eq!(r.fragments.unmatched, 0);
    assert_eq!(r.split_flows.fragments.flows, 1);
    assert_eq!(r.split_flows.fragments.packets, 17);
    assert_eq!(nonzero(queue_packets(&r)), 2);
    assert_eq!(r.queues[usize::from(cfg.place(&flow, true).queue.0)].packets, 12);
    assert!(r.top_flows[0].split);

    // Default hash types hash UDP on the 2-tuple: nothing splits.
    let r = analyze(&config("default", RssKey::microsoft()), AnalyzeOptions::default(), &frames);
    assert_eq!(r.split_flows.fragments.flows, 0);
    assert_eq!(nonzero(queue_packets(&r)), 1);
}

#[test]
fn later_fragment_before_its_first_is_unmatched() {
    let cfg = config("default", RssKey::microsoft());
    let mut frags = build::ipv4_fragments([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 5, 6, 9, &[1; 64], 24);
    frags.reverse();
    let r = analyze(&cfg, AnalyzeOptions::default(), &frags);
    assert_eq!(r.fragments.unmatched, 2);
    assert_eq!(r.flows.tracked, 2, "the port-less tuple is a flow of its own");
    assert!(r.conservation_ok);
}

#[test]
fn ipv6_fragments_join_their_flow() {
    let cfg = config("all", RssKey::microsoft());
    let (src, dst) = ("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap());
    let frags = build::ipv6_fragments(src, dst, 4000, 53, 77, &[3; 100], 48);
    assert!(frags.len() >= 3);
    let r = analyze(&cfg, AnalyzeOptions::default(), &frags);
    assert_eq!(r.flows.tracked, 1);
    assert_eq!(r.fragments.packets, frags.len() as u64);
    assert_eq!(r.fragments.unmatched, 0);
}

fn conversation(n: u32) -> Vec<Vec<u8>> {
    let server = v4(1);
    let mut frames = Vec::new();
    for i in 0..n {
        let client = v4(100 + i);
        let port = 40000 + i as u16;
        frames.push(build::tcp_frame(client, server, port, 443, 1, 0x02, b""));
        frames.push(build::tcp_frame(server, client, 443, port, 1, 0x12, b""));
        frames.push(build::tcp_frame(client, server, port, 443, 2, 0x10, b""));
    }
    frames
}

#[test]
fn directions_split_under_the_microsoft_key_not_the_symmetric_one() {
    let frames = conversation(100);
    let r = analyze(&config("default", RssKey::microsoft()), AnalyzeOptions::default(), &frames);
    let d = r.split_flows.directions;
    assert_eq!(d.connections, 100);
    assert!(d.split > 30, "{d:?}");
    assert_eq!(d.packets, d.split * 3);

    let r = analyze(&config("default", RssKey::symmetric(40).unwrap()), AnalyzeOptions::default(), &frames);
    assert_eq!(r.split_flows.directions.connections, 100);
    assert_eq!(r.split_flows.directions.split, 0);
    assert_eq!(r.split_flows.directions.packets, 0);
}

#[test]
fn vxlan_tunnel_on_one_queue_inner_headers_spread() {
    let cfg = config("default", RssKey::microsoft());
    let frames: Vec<Vec<u8>> = (0..64u32)
        .map(|i| {
            let inner = build::tcp_frame(v4(500 + i), v4(900), 1000 + i as u16, 80, 1, 0x10, b"x");
            build::vxlan_frame(v4(1), v4(2), 55555, 42, &inner)
        })
        .collect();
    let opts = AnalyzeOptions { inner: true, ..AnalyzeOptions::default() };
    let r = analyze(&cfg, opts, &frames);
    assert_eq!(nonzero(queue_packets(&r)), 1);
    let vxlan = r.encap["vxlan"];
    assert_eq!(vxlan.packets, 64);
    assert_eq!(vxlan.queues_hit, 1);
    assert!(vxlan.inner_queues_hit.unwrap() >= 3, "{vxlan:?}");
    let inner = r.inner.as_ref().unwrap();
    assert!(nonzero(inner.queues.iter().map(|q| q.packets)) >= 3);
    assert_eq!(inner.queues.iter().map(|q| q.packets).sum::<u64>(), 64);
    assert!(inner.imbalance.max_mean < r.imbalance.max_mean);
    assert_eq!(r.flows.tracked, 1, "the NIC sees one outer flow");

    // Without --inner the encapsulation is still counted.
    let r = analyze(&cfg, AnalyzeOptions::default(), &frames);
    assert_eq!(r.encap["vxlan"].packets, 64);
    assert_eq!(r.encap["vxlan"].inner_queues_hit, None);
    assert!(r.inner.is_none());
}

#[test]
fn gre_ipip_and_qinq_are_counted() {
    let cfg = config("default", RssKey::microsoft());
    let mut frames = Vec::new();
    for i in 0..16u32 {
        let inner = build::udp_packet(v4(10 + i), v4(20), 1, 2, b"gre");
        frames.push(build::gre_frame(v4(1), v4(2), Some(7), &inner));
        frames.push(build::ipip_frame(v4(3), v4(4), &inner));
        let plain = build::udp_frame(v4(30 + i), v4(40), 1, 2, b"qinq");
        frames.push(build::with_vlans(&plain, &[VlanTag::dot1ad(100), VlanTag::dot1q(200)]));
        frames.push(build::with_vlans(&plain, &[VlanTag::dot1q(300)]));
    }
    let r = analyze(&cfg, AnalyzeOptions { inner: true, ..AnalyzeOptions::default() }, &frames);
    assert_eq!(r.encap["gre"].packets, 16);
    assert_eq!(r.encap["gre"].queues_hit, 1);
    assert_eq!(r.encap["ipip"].packets, 16);
    assert_eq!(r.encap["ipip"].queues_hit, 1);
    assert_eq!(r.encap["qinq"].packets, 16);
    assert_eq!(r.encap["vlan"].packets, 16);
    assert_eq!(r.encap["pppoe"].packets, 0);
    // QinQ is hashed on its IP header like untagged traffic.
    assert!(r.encap["qinq"].queues_hit > 1);
    assert_eq!(r.unhashed.packets, 0);
    assert!(r.conservation_ok);
}

#[test]
fn pppoe_is_not_hashed_unless_inner() {
    let cfg = config("default", RssKey::microsoft());
    let frames: Vec<Vec<u8>> = (0..40u32)
        .map(|i| build::pppoe_frame(7, &build::tcp_packet(v4(100 + i), v4(1), 2000, 80, 1, 0x10, b"")))
        .collect();
    let r = analyze(&cfg, AnalyzeOptions::default(), &frames);
    let reta0 = cfg.reta.entries()[0];
    assert_eq!(r.unhashed.queue, reta0.0);
    assert_eq!(r.unhashed.pppoe, 40);
    assert_eq!(r.unhashed.packets, 40);
    assert_eq!(r.queues[usize::from(reta0.0)].packets, 40);
    assert_eq!(r.encap["pppoe"].queues_hit, 1);
    assert_eq!(r.flows.tracked, 40, "flows are named by the IP header inside PPPoE");

    let r = analyze(&cfg, AnalyzeOptions { inner: true, ..AnalyzeOptions::default() }, &frames);
    assert_eq!(r.queues[usize::from(reta0.0)].packets, 40);
    assert!(r.encap["pppoe"].inner_queues_hit.unwrap() >= 3);
}

#[test]
fn non_ip_and_unmatched_hash_types_land_on_reta0() {
    let cfg = config("tcp4", RssKey::microsoft());
    let mut arp = Vec::new();
    build::write_ethernet(&mut arp, [0xff; 6], build::SRC_MAC, &[], 0x0806);
    arp.extend_from_slice(&[0; 28]);
    let frames = vec![arp, build::udp_frame(v4(1), v4(2), 3, 4, b""), build::tcp_frame(v4(1), v4(2), 3, 4, 0, 0, b"")];
    let r = analyze(&cfg, AnalyzeOptions::default(), &frames);
    assert_eq!(r.unhashed.non_ip, 1);
    assert_eq!(r.unhashed.no_hash_type, 1);
    assert_eq!(r.unhashed.packets, 2);
    assert_eq!(r.analysed_packets, 3);
    assert_eq!(r.flows.tracked, 2);
}

#[test]
fn conservation_with_garbage_and_unknown_linktypes() {
    let cfg = config("default", RssKey::microsoft());
    let mut a = Analyzer::new(&cfg, AnalyzeOptions::default());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut good = 0;
    for i in 0..2000u32 {
        match i % 4 {
            0 => {
                let f = build::udp_frame(v4(i), v4(1), 1, 2, b"ok");
                a.feed(ETHERNET, &f, f.len() as u32);
                good += 1;
            }
            1 => {
                let len = (next() % 80) as usize;
                let junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                a.feed(ETHERNET, &junk, len as u32);
            }
            2 => {
                // IPv4 ethertype, bad version nibble.
                let mut f = build::udp_frame(v4(i), v4(1), 1, 2, b"bad");
                f[14] = 0x35;
                a.feed(ETHERNET, &f, f.len() as u32);
            }
            _ => a.feed(147, b"whatever", 8),
        }
    }
    let r = a.finish();
    assert_eq!(r.packets_read, 2000);
    assert!(r.conservation_ok);
    assert_eq!(r.analysed_packets + r.drops.total, 2000);
    assert!(r.analysed_packets >= good);
    assert_eq!(r.drops.unsupported_linktypes[&147], 500);
    assert!(r.drops.parse_errors["bad_version"] >= 500);
    assert!(r.drops.parse_errors.contains_key("truncated_ethernet"));
    assert_eq!(r.drops.parse_errors.values().sum::<u64>() + 500, r.drops.total);
}

#[test]
fn flow_cap_overflow_is_counted_and_queues_stay_complete() {
    let cfg = config("default", RssKey::microsoft());
    let mut frames = Vec::new();
    for _ in 0..3 {
        for i in 0..8u32 {
            frames.push(build::tcp_frame(v4(i), v4(100), 1000, 80, 0, 0x10, b""));
        }
    }
    let r = analyze(&cfg, AnalyzeOptions { max_flows: 5, ..AnalyzeOptions::default() }, &frames);
    assert_eq!(r.flows.tracked, 5);
    assert_eq!(r.flows.max_flows, 5);
    assert_eq!(r.flows.untracked_flows, 3);
    assert_eq!(r.flows.untracked_packets, 9);
    assert_eq!(r.analysed_packets, 24);
    assert_eq!(r.queues.iter().map(|q| q.flows).sum::<u64>(), 5);
    assert!(r.conservation_ok);
}

#[test]
fn top_flows_are_heaviest_first_and_bounded() {
    let cfg = config("default", RssKey::microsoft());
    let mut frames = Vec::new();
    for i in 0..20u32 {
        for _ in 0..=i {
            frames.push(build::udp_frame(v4(i), v4(100), 5, 6, b"t"));
        }
    }
    let r = analyze(&cfg, AnalyzeOptions { top: 3, ..AnalyzeOptions::default() }, &frames);
    let packets: Vec<u64> = r.top_flows.iter().map(|f| f.packets).collect();
    assert_eq!(packets, [20, 19, 18]);
    assert_eq!(r.top_flows[0].src, v4(19));
    let q = cfg.place(&udp(v4(19), v4(100), 5, 6), false).queue;
    assert_eq!(QueueId(r.top_flows[0].queue), q);
    let r = analyze(&cfg, AnalyzeOptions { top: 0, ..AnalyzeOptions::default() }, &frames);
    assert!(r.top_flows.is_empty());
}

#[test]
fn other_link_types_and_empty_input() {
    let cfg = config("default", RssKey::microsoft());
    let eth = build::udp_frame(v4(1), v4(2), 3, 4, b"x");
    let mut a = Analyzer::new(&cfg, AnalyzeOptions::default());
    for link in
        [flowsteer_wire::LinkType::RawIp, flowsteer_wire::LinkType::LinuxSll, flowsteer_wire::LinkType::LinuxSll2]
    {
        let f = build::convert_link(&eth, link);
        a.feed(link.to_pcap(), &f, f.len() as u32);
    }
    let r = a.finish();
    assert_eq!(r.analysed_packets, 3);
    assert_eq!(r.flows.tracked, 1);

    let r = Analyzer::new(&cfg, AnalyzeOptions::default()).finish();
    assert!(r.conservation_ok);
    assert_eq!(r.imbalance.max_mean, 0.0);
    assert_eq!(r.queues.len(), 4);
}

#[test]
fn geneve_vxlan_gpe_and_gtpu_tunnels_spread_inside_with_inner() {
    let cfg = config("default", RssKey::microsoft());
    for kind in ["geneve", "vxlan_gpe", "gtpu"] {
        let frames: Vec<Vec<u8>> = (0..64u32)
            .map(|i| {
                let ip = build::tcp_packet(v4(500 + i), v4(900), 1000 + i as u16, 80, 1, 0x10, b"x");
                match kind {
                    "geneve" => build::geneve_frame(v4(1), v4(2), 55555, 42, 0x6558, &[0; 8], &build::ip_frame(&ip)),
                    "vxlan_gpe" => build::vxlan_gpe_frame(v4(1), v4(2), 55555, 42, 1, &ip),
                    _ => build::gtpu_frame(v4(1), v4(2), 7, i % 2 == 0, &ip),
                }
            })
            .collect();
        let opts = AnalyzeOptions { inner: true, ..AnalyzeOptions::default() };
        let r = analyze(&cfg, opts, &frames);
        let e = r.encap[kind];
        assert_eq!((e.packets, e.queues_hit), (64, 1), "{kind}");
        assert!(e.inner_queues_hit.unwrap() >= 3, "{kind}: {e:?}");
        let inner = r.inner.as_ref().unwrap();
        assert_eq!((inner.hashed_on_inner, inner.hashed_on_outer.packets), (64, 0), "{kind}");
    }
}

#[test]
fn inner_says_how_many_packets_were_hashed_on_outer_headers_and_why() {
    let cfg = config("default", RssKey::microsoft());
    let ip = build::udp_packet(v4(7), v4(8), 1, 2, b"x");
    let mut gtp_echo = build::gtpu_frame(v4(1), v4(2), 0, false, &[]);
    gtp_echo[14 + 20 + 8 + 1] = 1;
    let whole = build::vxlan_frame(v4(1), v4(2), 3, 4, &build::ip_frame(&ip));
    let frames = vec![
        build::udp_frame(v4(1), v4(2), 5, 53, b"plain"),
        gtp_echo,
        build::geneve_frame(v4(1), v4(2), 1, 2, 0x894f, &[], &[0; 20]),
        whole[..whole.len() - 20].to_vec(),
        build::udp_frame(v4(1), v4(2), 1701, 1701, b"l2tp"),
        build::ip_frame(&build::ip_packet(v4(1), v4(2), 50, &[0; 32])),
        build::vxlan_frame(v4(1), v4(2), 3, 4, &build::ip_frame(&ip)),
    ];
    let opts = AnalyzeOptions { inner: true, ..AnalyzeOptions::default() };
    let r = analyze(&cfg, opts, &frames);
    let inner = r.inner.as_ref().unwrap();
    assert_eq!(inner.hashed_on_inner, 1);
    let o = &inner.hashed_on_outer;
    assert_eq!(o.packets, 6);
    let want = [
        ("not_tunnelled", 1),
        ("tunnel_not_ip", 2),
        ("tunnel_malformed", 1),
        ("unknown_tunnel", 2),
        ("outer_fragment", 0),
    ];
    for (reason, n) in want {
        assert_eq!(o.by_reason[reason], n, "{reason}: {o:?}");
    }
}

// ------------------------------------------------------------------ merging

mod merging {
    use super::*;
    use crate::state::{merge, MergeError, Merger, State};

    const UNKNOWN_LINKTYPE: u32 = 147;

    /// Deterministic xorshift.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A mixed capture, (linktype, frame) per record: TCP conversations seen
    /// both ways, UDP over IPv4 and IPv6, datagrams in three fragments (some
    /// later fragments before their first, some firsts never seen,
    /// identifications reused), ICMP, VXLAN, QinQ, ARP, garbage and an
    /// unknown link type.
    fn archive(records: usize, seed: u64) -> Vec<(u32, Vec<u8>)> {
        let mut rng = Rng(seed);
        let mut out = Vec::with_capacity(records + 4);
        while out.len() < records {
            match rng.below(20) {
                0..=6 => {
                    let i = rng.below(150) as u32;
                    let (c, s, port) = (v4(100 + i), v4(1), 40000 + i as u16);
                    out.push(if rng.below(2) == 0 {
                        build::tcp_frame(c, s, port, 443, 1, 0x10, b"x")
                    } else {
                        build::tcp_frame(s, c, 443, port, 1, 0x10, b"yy")
                    });
                }
                7..=9 => {
                    let i = rng.below(60) as u32;
                    out.push(build::udp_frame(v6(i), v6(9999), 5000 + i as u16, 53, b"q"));
                }
                10..=12 => {
                    let i = rng.below(30) as u32;
                    let IpAddr::V4(src) = v4(7000 + i) else { unreachable!() };
                    let IpAddr::V4(dst) = v4(2) else { unreachable!() };
                    if rng.below(3) == 0 {
                        // A whole datagram of the same flow (4-tuple under `all`).
                        out.push(build::udp_frame(src.into(), dst.into(), 2000 + i as u16, 53, b"whole"));
                        continue;
                    }
                    let id = rng.below(12) as u16;
                    let mut frags = build::ipv4_fragments(src, dst, 2000 + i as u16, 53, id, &[7; 64], 24);
                    match rng.below(8) {
                        0 => frags.reverse(),
                        1 => {
                            frags.remove(0);
                        }
                        _ => {}
                    }
                    for f in frags {
                        out.push(f);
                        if rng.below(4) == 0 {
                            out.push(build::udp_frame(v4(3), v4(4), 9, 9, b"between"));
                        }
                    }
                }
                13 => {
                    let i = rng.below(10) as u32;
                    out.push(build::ip_frame(&build::ip_packet(v4(500 + i), v4(501), proto::ICMP, &[8, 0, 0, 0])));
                }
                14..=15 => {
                    let i = rng.below(40) as u32;
                    let inner = build::udp_frame(v4(9000 + i), v4(9999), 6000 + i as u16, 80, b"in");
                    let vx = build::vxlan_frame(v4(50), v4(51), 49152 + (i % 4) as u16, 7, &inner);
                    out.push(vx);
                }
                16 => {
                    let f = build::udp_frame(v4(60), v4(61 + rng.below(5) as u32), 1, 2, b"tagged");
                    out.push(build::with_vlans(&f, &[VlanTag::dot1ad(10), VlanTag::dot1q(20)]));
                }
                17 => {
                    let mut arp = vec![0xff; 12];
                    arp.extend_from_slice(&[0x08, 0x06]);
                    arp.extend_from_slice(&[0; 28]);
                    out.push(arp);
                }
                18 => out.push(vec![1, 2, 3]),
                _ => {
                    out.push(Vec::new());
                    continue;
                }
            }
        }
        out.truncate(records);
        out.into_iter().map(|f| if f.is_empty() { (UNKNOWN_LINKTYPE, b"??".to_vec()) } else { (ETHERNET, f) }).collect()
    }

    fn state_of(cfg: &RssConfig, opts: AnalyzeOptions, records: &[(u32, Vec<u8>)]) -> State {
        let mut a = Analyzer::new(cfg, opts);
        for (lt, f) in records {
            a.feed(*lt, f, f.len() as u32);
        }
        a.into_state()
    }

    /// `n - 1` distinct cut points in `1..len`, sorted.
    fn cuts(len: usize, n: usize, rng: &mut Rng) -> Vec<usize> {
        let mut c = std::collections::BTreeSet::new();
        while c.len() < n - 1 {
            c.insert(1 + rng.below(len as u64 - 1) as usize);
        }
        c.into_iter().collect()
    }

    fn pieces<'a>(records: &'a [(u32, Vec<u8>)], cuts: &[usize]) -> Vec<&'a [(u32, Vec<u8>)]> {
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(records.len());
        bounds.windows(2).map(|w| &records[w[0]..w[1]]).collect()
    }

    /// Through JSON, as a report written by one run and read by another.
    fn round_trip(s: &State) -> State {
        serde_json::from_str(&serde_json::to_string(s).unwrap()).unwrap()
    }

    fn options(max_flows: usize, max_fragments: usize) -> AnalyzeOptions {
        AnalyzeOptions { inner: true, max_flows, max_fragments, top: 20, ..AnalyzeOptions::default() }
    }

    #[test]
    fn a_capture_cut_anywhere_merges_back_to_its_own_report() {
        let records = archive(3000, 0x5eed);
        let mut rng = Rng(0xc0ffee);
        // Large tables; a fragment window of 4 (crossed by cuts); a flow cap
        // the whole capture exceeds but no piece does.
        for (types, key, opts) in [
            ("all", RssKey::microsoft(), options(1_000_000, 65_536)),
            ("all", RssKey::microsoft(), options(1_000_000, 8)),
            ("default", RssKey::symmetric(40).unwrap(), options(400, 8)),
        ] {
            let cfg = config(types, key);
            let whole = state_of(&cfg, opts, &records);
            let report = whole.report(20);
            assert_eq!(whole.untracked_packets > 0, opts.max_flows == 400);
            assert!(report.fragments.unmatched > 0);
            assert_eq!(report.split_flows.fragments.flows > 0, types == "all");
            assert_eq!(round_trip(&whole), whole);
            for n in [2, 7, 64] {
                let cut = cuts(records.len(), n, &mut rng);
                let states: Vec<State> =
                    pieces(&records, &cut).iter().map(|p| round_trip(&state_of(&cfg, opts, p))).collect();
                // (The first piece may fill its table: that merges exactly too.)
                assert!(states[1..].iter().all(|s| s.untracked_packets == 0), "no later piece fills its table");
                let merged = merge(states.clone()).unwrap().unwrap();
                assert_eq!(merged, whole, "{types} n={n} cuts {cut:?}");
                assert_eq!(merged.report(20), report);
                assert!(merged.is_exact());
                // Merges of merges: groups of consecutive pieces.
                let groups: Vec<State> =
                    states.chunks(3).map(|g| round_trip(&merge(g.to_vec()).unwrap().unwrap())).collect();
                assert_eq!(merge(groups).unwrap().unwrap(), whole, "{types} n={n} in groups of 3");
            }
        }
    }

    #[test]
    fn empty_pieces_merge_to_nothing_added() {
        let cfg = config("default", RssKey::microsoft());
        let records = archive(500, 3);
        let whole = state_of(&cfg, options(1000, 64), &records);
        let empty = state_of(&cfg, options(1000, 64), &[]);
        let merged = merge([empty.clone(), whole.clone(), empty]).unwrap().unwrap();
        assert_eq!(merged, whole);
        assert!(merge(Vec::new()).unwrap().is_none());
    }

    #[test]
    fn the_first_input_may_fill_its_table_later_ones_are_bounded() {
        let cfg = config("default", RssKey::microsoft());
        let records = archive(2000, 11);
        let opts = options(40, 64);
        let whole = state_of(&cfg, opts, &records);
        assert!(whole.untracked_packets > 0);
        let (a, b) = records.split_at(1000);
        let (sa, sb) = (state_of(&cfg, opts, a), state_of(&cfg, opts, b));
        assert!(sa.untracked_packets > 0 && sb.untracked_packets > 0);
        // Only the first input full: still exact.
        let small = state_of(&cfg, opts, &records[1000..1003]);
        assert_eq!(merge([sa.clone(), small]).unwrap().unwrap(), state_of(&cfg, opts, &records[..1003]));
        // A later input full: counters exact, flows bounded by its untracked packets.
        let merged = merge([sa, sb.clone()]).unwrap().unwrap();
        assert!(!merged.is_exact());
        assert_eq!(merged.accuracy.flow_packets, sb.untracked_packets);
        let (m, w) = (merged.report(10), whole.report(10));
        assert_eq!(
            (m.queues.iter().map(|q| q.packets).collect::<Vec<_>>(), m.drops.clone(), m.encap.clone()),
            (w.queues.iter().map(|q| q.packets).collect::<Vec<_>>(), w.drops.clone(), w.encap.clone())
        );
        assert_eq!(m.flows.tracked, w.flows.tracked);
        assert!(m.accuracy.exact.contains(&"queues[].packets"));
        assert!(!m.accuracy.exact.contains(&"top_flows"));
        assert!(m
            .accuracy
            .bounded
            .iter()
            .any(|b| b.field == "top_flows" && b.bound.contains(&sb.untracked_packets.to_string())));
        assert!(w.accuracy.exact.contains(&"top_flows"));
    }

    #[test]
    fn different_configurations_refuse_to_merge_and_say_how() {
        let records = archive(200, 5);
        let base = config("default", RssKey::microsoft());
        let s = |cfg: &RssConfig, opts: AnalyzeOptions| state_of(cfg, opts, &records);
        let a = s(&base, AnalyzeOptions::default());
        let cases: Vec<(State, &str)> = vec![
            (
                s(&config("default", RssKey::symmetric(40).unwrap()), AnalyzeOptions::default()),
                "RSS key microsoft (40 bytes",
            ),
            (s(&config("all", RssKey::microsoft()), AnalyzeOptions::default()), "hash types"),
            (
                s(
                    &RssConfig::new(
                        RssKey::microsoft(),
                        HashTypes::parse("default").unwrap(),
                        Reta::round_robin(128, 8).unwrap(),
                    ),
                    AnalyzeOptions::default(),
                ),
                "RETA of 128 entries over 4 queues vs 128 entries over 8 queues",
            ),
            (s(&base, AnalyzeOptions { inner: true, ..AnalyzeOptions::default() }), "--inner off vs on"),
            (s(&base, AnalyzeOptions { max_flows: 5, ..AnalyzeOptions::default() }), "--max-flows 1000000 vs 5"),
        ];
        for (b, want) in cases {
            let err = merge([a.clone(), b]).unwrap_err();
            assert!(matches!(&err, MergeError::Mismatch(m) if m.contains(want)), "{err} lacks {want:?}");
        }
        let mut reta = base.clone();
        reta.reta.set(5, QueueId(0));
        let err = merge([a.clone(), s(&reta, AnalyzeOptions::default())]).unwrap_err();
        assert!(err.to_string().contains("RETA entry 5: queue 1 vs queue 0"), "{err}");
    }

    #[test]
    fn a_malformed_state_is_refused_not_trusted() {
        let cfg = config("default", RssKey::microsoft());
        let good = state_of(&cfg, AnalyzeOptions::default(), &archive(300, 9));
        let mut bad = good.clone();
        bad.queues.pop();
        let mut bad2 = good.clone();
        bad2.flows[0].5 = 4;
        let mut bad3 = good.clone();
        bad3.parse_errors.insert("no_such_reason".into(), 1);
        let mut bad4 = good.clone();
        bad4.untracked_sketch.push((1 << 20, 1));
        let mut bad5 = good.clone();
        bad5.queues[0].0 = u64::MAX;
        let mut bad6 = good.clone();
        bad6.flows[0].6 = u64::MAX - 1;
        let mut bad7 = good.clone();
        bad7.flows[0].4 = good.packets_read;
        let mut bad8 = good.clone();
        bad8.packets_read = u64::MAX;
        for b in [bad, bad2, bad3, bad4, bad5, bad6, bad7, bad8] {
            assert!(matches!(Merger::new(good.clone()).unwrap().push(b), Err(MergeError::Malformed(_))));
        }
    }
}
