//! Live tests in throw-away network namespaces joined by a veth pair: real
//! kernel traffic into TPACKET_V3 rings, fanout groups (including the
//! Toeplitz cBPF steering program), and transmit. Every test is bounded by
//! a packet count and a deadline of a few seconds.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flowsteer_afpacket::cbpf::udp_dst_port_filter;
use flowsteer_afpacket::{toeplitz_cbpf, Error, Fanout, FanoutMode, RxConfig, RxMeta, RxRing, TxConfig, TxSocket};
use flowsteer_netns::{skip_reason, Lab, LabConfig, Side};
use flowsteer_rss::reta::Reta;
use flowsteer_rss::{HashTypes, Mapping, RssConfig, RssKey};
use flowsteer_wire::build::{FrameBuilder, VlanTag};
use flowsteer_wire::{parse_frame, proto, FlowTuple, LinkType, ParseOptions};

const DEADLINE: Duration = Duration::from_secs(5);
/// `sll_pkttype` of frames addressed to this host.
const PACKET_HOST: u8 = 0;

macro_rules! need_root {
    () => {
        if let Some(why) = skip_reason() {
            println!("skipped: {why}");
            return;
        }
    };
}

fn open_ring(lab: &Lab, side: Side, cfg: RxConfig) -> RxRing {
    let dev = lab.dev(side).to_string();
    lab.run_in(side, move || RxRing::open(&dev, &cfg)).unwrap().unwrap()
}

/// A UDP socket in B on `port` (v4 and v6), so the stack does not answer
/// with port unreachable.
fn sinks(lab: &Lab, port: u16) -> (UdpSocket, UdpSocket) {
    let (peer4, peer6) = (lab.v4(Side::B), lab.v6(Side::B));
    lab.run_in(Side::B, move || {
        let s4 = UdpSocket::bind((peer4, port)).unwrap();
        let s6 = UdpSocket::bind((peer6, port)).unwrap();
        (s4, s6)
    })
    .unwrap()
}

/// Sends `count` datagrams of `len` bytes from each `(source, sport)` in A
/// to `(dst, port)`; returns how many were sent.
fn send_udp(lab: &Lab, flows: &[(IpAddr, u16)], dst: &[IpAddr], port: u16, count: usize, len: usize) -> usize {
    let flows = flows.to_vec();
    let dst = dst.to_vec();
    lab.run_in(Side::A, move || {
        let mut sent = 0;
        for (i, (src, sport)) in flows.iter().enumerate() {
            let s = UdpSocket::bind((*src, *sport)).unwrap();
            let to = dst.iter().find(|d| d.is_ipv4() == src.is_ipv4()).unwrap();
            for n in 0..count {
                let mut payload = vec![(i + n) as u8; len];
                payload[..4.min(len)].copy_from_slice(&(n as u32).to_be_bytes()[..4.min(len)]);
                sent += usize::from(s.send_to(&payload, (*to, port)).is_ok());
            }
        }
        sent
    })
    .unwrap()
}

/// One received frame of the test traffic.
#[derive(Clone, Debug)]
struct Got {
    tuple: FlowTuple,
    frame: Vec<u8>,
    meta: RxMeta,
}

/// Reads every ring until `want` UDP frames to `port` arrived (then 60 ms
/// more, to catch strays) or the deadline; returns them per ring.
fn collect(rings: &mut [RxRing], port: u16, want: usize) -> Vec<Vec<Got>> {
    let mut got: Vec<Vec<Got>> = vec![Vec::new(); rings.len()];
    let start = Instant::now();
    let mut settle: Option<Instant> = None;
    loop {
        let mut n = 0;
        for (i, ring) in rings.iter_mut().enumerate() {
            n += ring.poll_burst(256, &mut |data: &[u8], meta: &RxMeta| {
                let Ok(p) = parse_frame(data, LinkType::Ethernet, &ParseOptions::default()) else { return };
                let Some(l3) = p.outer else { return };
                if l3.tuple.proto == proto::UDP && l3.tuple.ports.is_some_and(|(_, d)| d == port) {
                    got[i].push(Got { tuple: l3.tuple, frame: data.to_vec(), meta: *meta });
                }
            });
        }
        let total: usize = got.iter().map(Vec::len).sum();
        if total >= want && settle.is_none() {
            settle = Some(Instant::now());
        }
        if settle.is_some_and(|t| t.elapsed() > Duration::from_millis(60)) || start.elapsed() > DEADLINE {
            return got;
        }
        if n == 0 {
            let _ = rings[0].wait(Duration::from_millis(2));
        }
    }
}

fn now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

#[test]
fn rx_ring_receives_every_udp_datagram() {
    need_root!();
    let lab = Lab::new("afrx", &LabConfig::default()).unwrap();
    let _sinks = sinks(&lab, 9000);
    // One ring filtered to the test port (exact kernel counters), one ring
    // that sees everything.
    let filtered = RxConfig { filter: udp_dst_port_filter(9000), ..RxConfig::default() };
    let mut rings = vec![open_ring(&lab, Side::B, filtered), open_ring(&lab, Side::B, RxConfig::default())];
    let a = IpAddr::V4(lab.v4(Side::A));
    let flows: Vec<(IpAddr, u16)> = (0..4).map(|i| (a, 20001 + i)).collect();
    let sent = send_udp(&lab, &flows, &[IpAddr::V4(lab.v4(Side::B))], 9000, 100, 32);
    assert_eq!(sent, 400);
    let got = collect(&mut rings, 9000, 800);
    let t = now();
    for (r, frames) in got.iter().enumerate() {
        assert_eq!(frames.len(), 400, "ring {r}");
        let mut per_flow: BTreeMap<u16, (usize, BTreeSet<u32>)> = BTreeMap::new();
        for g in frames {
            let m = &g.meta;
            assert_eq!((m.snap_len, m.wire_len), (14 + 20 + 8 + 32, 14 + 20 + 8 + 32));
            assert!(!m.is_truncated() && m.vlan.is_none());
            assert_eq!((m.packet_type, m.l3_offset), (PACKET_HOST, 14));
            assert!(t.saturating_sub(m.timestamp) < Duration::from_secs(30) && m.timestamp <= t, "{m:?}");
            let e = per_flow.entry(g.tuple.ports.unwrap().0).or_default();
            e.0 += 1;
            e.1.insert(m.rxhash);
        }
        assert_eq!(per_flow.len(), 4);
        for (sport, (n, hashes)) in &per_flow {
            assert_eq!(*n, 100, "flow {sport}");
            assert_eq!(hashes.len(), 1, "flow {sport}: one rxhash per flow, got {hashes:?}");
        }
    }
    let st = rings[0].stats().unwrap();
    assert_eq!((st.frames, st.kernel_packets, st.kernel_drops), (400, 400, 0), "{st:?}");
    assert_eq!((st.truncated, st.bad_frames, st.bytes), (0, 0, 400 * 74));
    assert!(st.blocks >= 1);
    let all = rings[1].stats().unwrap();
    assert_eq!(all.kernel_drops, 0);
    assert!(all.frames >= 400 && all.frames + all.bad_frames <= all.kernel_packets, "{all:?}");
    // Counters accumulate over reads (the kernel resets its own).
    let again = rings[0].stats().unwrap();
    assert_eq!(again.kernel_packets, 400);
}

#[test]
fn poll_burst_resumes_a_half_read_block() {
    need_root!();
    let lab = Lab::new("afpb", &LabConfig::default()).unwrap();
    let _sinks = sinks(&lab, 9006);
    // A long retire timeout: the burst lands in one block, handed over
    // when the timer fires (within a second).
    let cfg = RxConfig { retire_blk_tov_ms: 1000, filter: udp_dst_port_filter(9006), ..RxConfig::default() };
    let mut ring = open_ring(&lab, Side::B, cfg);
    let a = IpAddr::V4(lab.v4(Side::A));
    assert_eq!(send_udp(&lab, &[(a, 25000)], &[IpAddr::V4(lab.v4(Side::B))], 9006, 50, 8), 50);
    assert!(ring.wait(Duration::from_secs(3)).unwrap(), "no block within 3 s");
    let mut seqs = Vec::new();
    for k in 0..50 {
        let n = ring.poll_burst(1, &mut |data: &[u8], _: &RxMeta| {
            seqs.push(u32::from_be_bytes(data[42..46].try_into().unwrap()));
        });
        assert_eq!(n, 1, "call {k}");
        // The block goes back to the kernel with its last frame only.
        assert_eq!(ring.counters().blocks, u64::from(k == 49), "after frame {k}");
        assert!(ring.wait(Duration::ZERO).unwrap() || k == 49);
    }
    assert_eq!(seqs, (0..50).collect::<Vec<u32>>(), "frames out of order");
    assert_eq!(ring.poll_burst(0, &mut |_: &[u8], _: &RxMeta| {}), 0);
    assert_eq!(ring.poll_burst(8, &mut |_: &[u8], _: &RxMeta| {}), 0);
    let st = ring.stats().unwrap();
    assert_eq!((st.frames, st.kernel_packets, st.blocks), (50, 50, 1));
}

/// After `stop_receiving` the ring takes no frame in and the kernel counts
/// none; what it had taken is either read or `unread`, so
/// `kernel_packets = frames + unread` once the last block is handed over.
#[test]
fn stop_receiving_freezes_the_count_and_unread_places_the_rest() {
    need_root!();
    let lab = Lab::new("afst", &LabConfig::default()).unwrap();
    let _sinks = sinks(&lab, 9007);
    let cfg = RxConfig { retire_blk_tov_ms: 20, filter: udp_dst_port_filter(9007), ..RxConfig::default() };
    let mut ring = open_ring(&lab, Side::B, cfg);
    let (a, b) = (IpAddr::V4(lab.v4(Side::A)), IpAddr::V4(lab.v4(Side::B)));
    assert_eq!(send_udp(&lab, &[(a, 25001)], &[b], 9007, 30, 8), 30);
    assert!(ring.wait(Duration::from_secs(3)).unwrap(), "no block within 3 s");
    assert_eq!(ring.poll_burst(10, &mut |_: &[u8], _: &RxMeta| {}), 10);
    assert_eq!(send_udp(&lab, &[(a, 25002)], &[b], 9007, 7, 8), 7);
    ring.stop_receiving().unwrap();
    assert_eq!(send_udp(&lab, &[(a, 25003)], &[b], 9007, 11, 8), 11);
    std::thread::sleep(ring.retire_timeout() * 3);
    let st = ring.stats().unwrap();
    assert_eq!(st.kernel_packets, 37, "frames after stop_receiving were counted: {st:?}");
    assert_eq!((st.frames, ring.unread()), (10, 27));
    assert_eq!(st.kernel_packets, st.frames + st.bad_frames + st.kernel_drops + ring.unread());
}

#[test]
fn fanout_hash_never_splits_a_flow() {
    need_root!();
    let lab = Lab::new("afhs", &LabConfig::default()).unwrap();
    let _sinks = sinks(&lab, 9001);
    let cfg = RxConfig {
        filter: udp_dst_port_filter(9001),
        fanout: Some(Fanout::new(11, FanoutMode::Hash)),
        ..RxConfig::default()
    };
    let mut rings = vec![open_ring(&lab, Side::B, cfg.clone()), open_ring(&lab, Side::B, cfg)];
    let a = IpAddr::V4(lab.v4(Side::A));
    let flows: Vec<(IpAddr, u16)> = (0..8).map(|i| (a, 21000 + i)).collect();
    assert_eq!(send_udp(&lab, &flows, &[IpAddr::V4(lab.v4(Side::B))], 9001, 50, 16), 400);
    let got = collect(&mut rings, 9001, 400);
    let mut owner: BTreeMap<u16, BTreeSet<usize>> = BTreeMap::new();
    for (r, frames) in got.iter().enumerate() {
        for g in frames {
            owner.entry(g.tuple.ports.unwrap().0).or_default().insert(r);
        }
    }
    assert_eq!(got[0].len() + got[1].len(), 400);
    assert_eq!(owner.len(), 8);
    assert!(owner.values().all(|rs| rs.len() == 1), "a flow was split: {owner:?}");
    println!("hash fanout: {} / {} frames", got[0].len(), got[1].len());
    let kernel: u64 = rings.iter_mut().map(|r| r.stats().unwrap().kernel_packets).sum();
    assert_eq!(kernel, 400);
}

#[test]
fn fanout_modes_lb_cpu_qm_rollover_random_and_defrag() {
    need_root!();
    let lab = Lab::new("afmd", &LabConfig::default()).unwrap();
    let _sinks = sinks(&lab, 9002);
    let a = IpAddr::V4(lab.v4(Side::A));
    let b = [IpAddr::V4(lab.v4(Side::B))];
    let modes =
        [FanoutMode::LoadBalance, FanoutMode::Cpu, FanoutMode::QueueMapping, FanoutMode::Rollover, FanoutMode::Random];
    for (g, mode) in modes.into_iter().enumerate() {
        let lb = mode == FanoutMode::LoadBalance;
        let cfg = RxConfig {
            filter: udp_dst_port_filter(9002),
            fanout: Some(Fanout::new(20 + g as u16, mode.clone())),
            ..RxConfig::default()
        };
        let mut rings = vec![open_ring(&lab, Side::B, cfg.clone()), open_ring(&lab, Side::B, cfg)];
        let flows: Vec<(IpAddr, u16)> = (0..2).map(|i| (a, 22000 + i)).collect();
        assert_eq!(send_udp(&lab, &flows, &b, 9002, 100, 8), 200);
        let got = collect(&mut rings, 9002, 200);
        let (n0, n1) = (got[0].len(), got[1].len());
        assert_eq!(n0 + n1, 200, "{mode:?}");
        if lb {
            // Round robin over every frame of the group (a stray frame
            // shifts the alternation by one).
            assert!(n0.abs_diff(n1) <= 10, "lb: {n0} / {n1}");
        }
        println!("{mode:?}: {n0} / {n1}");
    }
    // DEFRAG: the kernel reassembles IPv4 before fanout, so 3000-byte
    // datagrams (3 fragments each on a 1500 MTU) arrive whole.
    let cfg = RxConfig {
        filter: udp_dst_port_filter(9002),
        fanout: Some(Fanout { defrag: true, ..Fanout::new(40, FanoutMode::Hash) }),
        ..RxConfig::default()
    };
    let mut rings = vec![open_ring(&lab, Side::B, cfg.clone()), open_ring(&lab, Side::B, cfg)];
    let flows: Vec<(IpAddr, u16)> = (0..4).map(|i| (a, 23000 + i)).collect();
    assert_eq!(send_udp(&lab, &flows, &b, 9002, 2, 3000), 8);
    let got = collect(&mut rings, 9002, 8);
    let all: Vec<&Got> = got.iter().flatten().collect();
    assert_eq!(all.len(), 8);
    for g in all {
        assert_eq!(g.meta.wire_len as usize, 14 + 20 + 8 + 3000, "not reassembled");
        assert_eq!(g.frame.len(), 3042);
    }
}

/// Source ports in A whose tuple `config` places on each queue, per family.
fn ports_for_queues(config: &RssConfig, src: IpAddr, dst: IpAddr, port: u16) -> Vec<u16> {
    (0..config.queue_count())
        .map(|q| {
            (10000u16..60000)
                .find(|&sp| {
                    let t = FlowTuple { src, dst, proto: proto::UDP, ports: Some((sp, port)) };
                    usize::from(config.place(&t, false).queue.0) == q
                })
                .unwrap()
        })
        .collect()
}

fn toeplitz_fanout_is_exact(lab: &Lab, config: &RssConfig, group: u16, port: u16) {
    let q = config.queue_count();
    let rx = RxConfig {
        filter: udp_dst_port_filter(port),
        fanout: Some(Fanout::toeplitz(group, config).unwrap()),
        ..RxConfig::default()
    };
    // Join in queue order: member i is queue i.
    let mut rings: Vec<RxRing> = (0..q).map(|_| open_ring(lab, Side::B, rx.clone())).collect();
    let (a4, peer4) = (IpAddr::V4(lab.v4(Side::A)), IpAddr::V4(lab.v4(Side::B)));
    let (a6, peer6) = (IpAddr::V6(lab.v6(Side::A)), IpAddr::V6(lab.v6(Side::B)));
    let mut flows = Vec::new();
    for (src, dst) in [(a4, peer4), (a6, peer6)] {
        for sp in ports_for_queues(config, src, dst, port) {
            flows.push((src, sp));
        }
    }
    assert_eq!(send_udp(lab, &flows, &[peer4, peer6], port, 32, 20), q * 2 * 32);
    let got = collect(&mut rings, port, q * 2 * 32);
    for (r, frames) in got.iter().enumerate() {
        assert_eq!(frames.len(), 64, "queue {r} of {q}: {} frames", frames.len());
        for g in frames {
            let placed = config.place(&g.tuple, false).queue.0;
            assert_eq!(usize::from(placed), r, "{:?} reached ring {r}, RSS says {placed}", g.tuple);
        }
    }
    for ring in &mut rings {
        let st = ring.stats().unwrap();
        assert_eq!((st.kernel_packets, st.kernel_drops, st.frames), (64, 0, 64));
    }
}

#[test]
fn toeplitz_cbpf_fanout_is_exact_per_queue() {
    need_root!();
    let lab = Lab::new("aftz", &LabConfig { queues: 1, mtu: 1500 }).unwrap();
    let _sinks = sinks(&lab, 9003);
    let all = HashTypes::parse("all").unwrap();
    let rr = |q| RssConfig::new(RssKey::microsoft(), all, Reta::round_robin(128, q).unwrap());
    toeplitz_fanout_is_exact(&lab, &rr(2), 31, 9003);
    toeplitz_fanout_is_exact(&lab, &rr(4), 32, 9003);
    // A hand-made RETA (jump tree) with a random key, and the RPS mapping.
    let entries: Vec<u32> = (0..128).map(|i| [2, 0, 3, 1, 1, 0][i % 6]).collect();
    let custom = RssConfig::new(RssKey::random(52).unwrap(), all, Reta::from_entries(&entries).unwrap());
    toeplitz_fanout_is_exact(&lab, &custom, 33, 9003);
    toeplitz_fanout_is_exact(&lab, &rr(3).with_mapping(Mapping::RpsScale), 34, 9003);
}

#[test]
fn kernel_accepts_every_toeplitz_program() {
    need_root!();
    let lab = Lab::new("afkp", &LabConfig::default()).unwrap();
    let mut loose = HashTypes::parse("all").unwrap();
    loose.fragments_on_2tuple = false;
    let random: Vec<u32> = (0..512u32).map(|i| i.wrapping_mul(2654435761) >> 29).collect();
    let configs = [
        RssConfig::default_for_queues(4).unwrap(),
        RssConfig::new(RssKey::microsoft(), loose, Reta::round_robin(128, 5).unwrap()),
        RssConfig::new(
            RssKey::symmetric(52).unwrap(),
            HashTypes::parse("l3").unwrap(),
            Reta::round_robin(64, 2).unwrap(),
        ),
        RssConfig::new(RssKey::random(40).unwrap(), loose, Reta::from_entries(&random).unwrap()),
        RssConfig::new(RssKey::microsoft(), HashTypes::parse("tcp6").unwrap(), Reta::round_robin(65536, 7).unwrap()),
        RssConfig::default_for_queues(6).unwrap().with_mapping(Mapping::RpsScale),
    ];
    for (i, cfg) in configs.iter().enumerate() {
        let prog = toeplitz_cbpf(cfg).unwrap();
        let rx = RxConfig { fanout: Some(Fanout::toeplitz(50 + i as u16, cfg).unwrap()), ..RxConfig::default() };
        let dev = lab.dev(Side::B).to_string();
        let opened = lab.run_in(Side::B, move || RxRing::open(&dev, &rx).map(|_| ())).unwrap();
        assert_eq!(opened, Ok(()), "config {i} ({} instructions)", prog.len());
    }
    // A program the kernel refuses is reported, not ignored.
    let bad = RxConfig {
        fanout: Some(Fanout::new(60, FanoutMode::Cbpf(vec![flowsteer_afpacket::SockFilter::stmt(0x06 | 0x08, 0)]))),
        ..RxConfig::default()
    };
    let dev = lab.dev(Side::B).to_string();
    let e = lab.run_in(Side::B, move || RxRing::open(&dev, &bad).map(|_| ())).unwrap().unwrap_err();
    assert!(e.to_string().contains("PACKET_FANOUT_DATA"), "{e}");
}

#[test]
fn tx_socket_frames_arrive_byte_exact() {
    need_root!();
    let lab = Lab::new("aftx", &LabConfig::default()).unwrap();
    let (a4, peer4) = (lab.v4(Side::A), lab.v4(Side::B));
    let (sink, _) = sinks(&lab, 9004);
    sink.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let rx = RxConfig { filter: udp_dst_port_filter(9004), ..RxConfig::default() };
    let mut rings = vec![open_ring(&lab, Side::B, rx)];
    let dev_a = lab.dev(Side::A).to_string();
    let mut tx = lab.run_in(Side::A, move || TxSocket::open(&dev_a, &TxConfig { batch: 16, ..TxConfig::default() }));
    let tx = tx.as_mut().unwrap().as_mut().unwrap();
    let payloads: Vec<Vec<u8>> = (0..64).map(|i| format!("frame {i:03} {}", "x".repeat(i)).into_bytes()).collect();
    let frame = |i: usize, vlans: &[VlanTag], payload: &[u8]| {
        FrameBuilder {
            src_mac: lab.mac(Side::A),
            dst_mac: lab.mac(Side::B),
            vlans,
            ..FrameBuilder::udp(a4.into(), peer4.into(), 30000 + (i % 4) as u16, 9004, payload)
        }
        .build()
    };
    let mut frames: Vec<Vec<u8>> = payloads.iter().enumerate().map(|(i, p)| frame(i, &[], p)).collect();
    let tag = [VlanTag::dot1q(100)];
    let tagged: Vec<Vec<u8>> = (0..4).map(|i| frame(i, &tag, &payloads[i])).collect();
    frames.extend(tagged.iter().cloned());
    frames.push(frame(0, &[], &[0u8; 2000])); // longer than the MTU
    assert_eq!(tx.send_batch(&frames), 68);
    let st = tx.stats();
    assert_eq!((st.attempted, st.sent, st.failed_total()), (69, 68, 1), "{st:?}");
    assert_eq!(st.failed_by_name(), vec![("EMSGSIZE".to_string(), 1)]);
    // The same through PACKET_QDISC_BYPASS.
    let dev_a = lab.dev(Side::A).to_string();
    let bypass = TxConfig { qdisc_bypass: true, ..TxConfig::default() };
    let mut direct = lab.run_in(Side::A, move || TxSocket::open(&dev_a, &bypass)).unwrap().unwrap();
    assert_eq!(direct.send_batch(&frames[..8]), 8);
    assert_eq!((direct.stats().sent, direct.stats().bytes), (8, frames[..8].iter().map(|f| f.len() as u64).sum()));
    // The kernel UDP socket gets the untagged payloads byte for byte.
    let mut received = BTreeSet::new();
    let mut buf = [0u8; 2048];
    let mut datagrams = 0;
    while datagrams < 72 {
        let (n, from) = sink.recv_from(&mut buf).expect("a datagram within 2 s");
        assert_eq!(from.ip(), IpAddr::V4(a4));
        assert!(matches!(from, SocketAddr::V4(_)));
        received.insert(buf[..n].to_vec());
        datagrams += 1;
    }
    assert_eq!(received, payloads.iter().cloned().collect::<BTreeSet<_>>());
    // The ring sees the whole frames; the tagged ones arrive with the tag
    // moved to metadata.
    let got = collect(&mut rings, 9004, 76);
    assert_eq!(got[0].len(), 76);
    let sent: BTreeSet<&Vec<u8>> = frames[..64].iter().collect();
    let mut tagged_seen = 0;
    for g in &got[0] {
        match g.meta.vlan {
            None => assert!(sent.contains(&g.frame), "a frame changed on the way"),
            Some(v) => {
                assert_eq!((v.vid(), v.tpid), (100, 0x8100));
                assert!(frames[..4].contains(&g.frame), "tagged frame not the untagged original");
                tagged_seen += 1;
            }
        }
    }
    assert_eq!(tagged_seen, 4);
}

#[test]
fn truncated_frames_are_counted() {
    need_root!();
    let lab = Lab::new("aftr", &LabConfig { queues: 1, mtu: 9000 }).unwrap();
    let _sinks = sinks(&lab, 9005);
    let rx = RxConfig {
        block_size: 4096,
        block_count: 8,
        frame_size: 2048,
        filter: udp_dst_port_filter(9005),
        ..RxConfig::default()
    };
    let mut rings = vec![open_ring(&lab, Side::B, rx)];
    let a = IpAddr::V4(lab.v4(Side::A));
    assert_eq!(send_udp(&lab, &[(a, 24000)], &[IpAddr::V4(lab.v4(Side::B))], 9005, 4, 6000), 4);
    let max = rings[0].max_frame_len();
    let got = collect(&mut rings, 9005, 4);
    assert_eq!(got[0].len(), 4);
    for g in &got[0] {
        assert!(g.meta.is_truncated());
        assert_eq!(g.meta.wire_len, 14 + 20 + 8 + 6000);
        assert!((g.meta.snap_len as usize) < max && g.frame.len() == g.meta.snap_len as usize);
    }
    let st = rings[0].stats().unwrap();
    assert_eq!((st.frames, st.truncated, st.kernel_packets, st.kernel_drops), (4, 4, 4, 0));
    assert_eq!(st.bytes, 4 * 6042);
}

#[test]
fn missing_interface_gives_an_error_naming_it() {
    // No root needed: the name is checked before any socket is made.
    let e = RxRing::open("afp-missing0", &RxConfig::default()).unwrap_err();
    assert_eq!(e, Error::NoSuchInterface("afp-missing0".into()));
    assert!(e.to_string().contains("afp-missing0"), "{e}");
    let e = TxSocket::open("afp-missing1", &TxConfig::default()).unwrap_err();
    assert!(e.to_string().contains("afp-missing1"), "{e}");
}

/// Without CAP_NET_RAW the error says so. As root, re-runs this test as
/// `nobody` through setpriv(1).
#[test]
fn permission_error_without_cap_net_raw() {
    if flowsteer_netns::is_root() {
        if std::env::var_os("AFP_CHILD").is_some() {
            panic!("setpriv did not drop root");
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
            .arg(&exe)
            .args(["--exact", "permission_error_without_cap_net_raw", "--nocapture", "--test-threads=1"])
            .env("AFP_CHILD", "1")
            .output();
        match out {
            Ok(o) => {
                let text = String::from_utf8_lossy(&o.stdout);
                assert!(
                    o.status.success() && text.contains("1 passed"),
                    "{text}{}",
                    String::from_utf8_lossy(&o.stderr)
                );
                assert!(text.contains("checked as non-root"), "{text}");
            }
            Err(e) => println!("skipped: setpriv unavailable: {e}"),
        }
        return;
    }
    let e = RxRing::open("lo", &RxConfig::default()).unwrap_err();
    assert_eq!(e, Error::Permission);
    assert_eq!(e.to_string(), "AF_PACKET needs root or CAP_NET_RAW");
    let e = TxSocket::open("lo", &TxConfig::default()).unwrap_err();
    assert_eq!(e, Error::Permission);
    println!("checked as non-root");
}

/// With `vnet_hdr` a ring hands over each frame's offload state: a UDP
/// datagram a host sent with its veth's default transmit checksum offload
/// arrives with a partial checksum, a TCP bulk write as GSO frames larger
/// than the MTU; a transmit socket with `vnet_hdr` sends a frame with a
/// partial checksum that the receiving host accepts (the kernel completes
/// it or lets the receiver trust it, as it does for a forwarded skb).
#[test]
fn vnet_hdr_reports_partial_checksums_and_gso_and_sends_them() {
    use flowsteer_afpacket::{GsoType, VnetHdr};
    use std::io::{Read, Write};
    need_root!();
    let lab = Lab::new("afvn", &LabConfig::default()).unwrap();
    let (a, b) = (lab.v4(Side::A), lab.v4(Side::B));
    let sink = lab.run_in(Side::B, move || UdpSocket::bind((b, 9011)).unwrap()).unwrap();
    let cfg = RxConfig { vnet_hdr: true, block_size: 256 << 10, block_count: 8, ..RxConfig::default() };
    let mut ring = open_ring(&lab, Side::B, cfg);
    // A TCP listener in B takes a bulk write from A.
    let listener = lab.run_in(Side::B, move || std::net::TcpListener::bind((b, 9012)).unwrap()).unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        all.len()
    });
    lab.run_in(Side::A, move || {
        let u = UdpSocket::bind((a, 0)).unwrap();
        u.send_to(&[7u8; 100], (b, 9011)).unwrap();
        let mut t = std::net::TcpStream::connect((b, 9012)).unwrap();
        t.write_all(&vec![1u8; 1 << 20]).unwrap();
    })
    .unwrap();
    assert_eq!(reader.join().unwrap(), 1 << 20);
    let deadline = Instant::now() + DEADLINE;
    let (mut udp, mut gso) = (None, None);
    while (udp.is_none() || gso.is_none()) && Instant::now() < deadline {
        ring.poll_burst(64, &mut |f: &[u8], m: &RxMeta| {
            let Some(v) = m.vnet else { return };
            if f.len() > 23 && f[23] == proto::UDP && udp.is_none() {
                udp = Some((v, m.csum_not_ready(), f.to_vec()));
            }
            if v.gso_type == GsoType::TcpV4 && gso.is_none() {
                gso = Some((v, f.len()));
            }
        });
    }
    let (v, not_ready, frame) = udp.expect("the UDP datagram reached the ring");
    assert!(v.needs_csum && not_ready, "{v:?}");
    assert_eq!((v.csum_start, v.csum_offset, v.gso_type), (34, 6, GsoType::None));
    let (g, len) = gso.expect("a TCP GSO frame reached the ring");
    assert!(g.gso_size > 0 && len > 1514 && g.needs_csum && g.hdr_len >= 54, "{g:?} {len}");

    // Sent back out of B as it came (addresses swapped, the partial
    // checksum kept: the pseudo-header sum does not change when the
    // addresses swap), A's socket receives it.
    let echo = lab.run_in(Side::A, move || UdpSocket::bind((a, 9013)).unwrap()).unwrap();
    echo.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut back = frame.clone();
    back[..6].copy_from_slice(&frame[6..12]);
    back[6..12].copy_from_slice(&frame[..6]);
    back[26..30].copy_from_slice(&frame[30..34]);
    back[30..34].copy_from_slice(&frame[26..30]);
    back[36..38].copy_from_slice(&9013u16.to_be_bytes());
    // The partial field holds the pseudo-header sum only (addresses,
    // protocol, length), which a swap of the addresses and a new port
    // leave as they are.
    let dev = lab.dev(Side::B).to_string();
    let sent = lab
        .run_in(Side::B, move || {
            let mut tx = TxSocket::open(&dev, &TxConfig { vnet_hdr: true, ..TxConfig::default() }).unwrap();
            let h = VnetHdr { needs_csum: true, csum_start: 34, csum_offset: 6, ..VnetHdr::PLAIN };
            let n = tx.send_batch_vnet(&[&back], &[h]);
            // Without headers for every frame nothing is sent.
            assert_eq!(tx.send_batch_vnet(&[&back], &[]), 0);
            (n, tx.stats().clone())
        })
        .unwrap();
    assert_eq!(sent.0, 1, "{:?}", sent.1);
    let mut buf = [0u8; 200];
    let (n, from) = echo.recv_from(&mut buf).expect("A accepted the frame sent with a partial checksum");
    assert_eq!((n, from.ip()), (100, IpAddr::V4(b)));
    drop(sink);
}
