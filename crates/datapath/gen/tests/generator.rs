//! Behaviour of the generator seen from the receive side: every frame is
//! parsed with flowsteer-wire and checked against the generator's own claims.

use std::collections::HashMap;
use std::net::IpAddr;

use flowsteer_gen::{
    read_seq, Frame, GenConfig, GenError, Generator, SizeDist, Spread, FRAG_UDP_PAYLOAD, MAX_FLOWS, MAX_TEMPLATED_FLOWS,
};
use flowsteer_rss::{HashTypes, QueueId, RssConfig};
use flowsteer_wire::ipv4::Ipv4Packet;
use flowsteer_wire::{parse_frame, proto, L3Info, LinkType, ParseOptions};

fn frames(n: usize) -> Vec<Frame> {
    (0..n).map(|_| Frame::new()).collect()
}

fn outer(f: &Frame) -> L3Info {
    let p = parse_frame(f.bytes(), LinkType::Ethernet, &ParseOptions::default())
        .unwrap_or_else(|e| panic!("frame {f:?} does not parse: {e:?}"));
    p.outer.expect("an IP header")
}

fn rss(queues: u16) -> Spread {
    Spread::Rss { queues, config: RssConfig::default_for_queues(usize::from(queues)).unwrap() }
}

/// Independent one's complement sum (RFC 1071), not flowsteer-wire's.
fn ones_sum(data: &[u8], mut acc: u64) -> u64 {
    for c in data.chunks(2) {
        let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { u16::from_be_bytes([c[0], 0]) };
        acc += u64::from(w);
    }
    acc
}

fn folds_to_ffff(mut acc: u64) -> bool {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc == 0xffff
}

/// True when `segment` (a whole UDP datagram or TCP segment, checksum
/// included) verifies against the pseudo header of `src`/`dst`.
fn l4_checksum_ok(src: IpAddr, dst: IpAddr, protocol: u8, segment: &[u8]) -> bool {
    let mut acc = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => ones_sum(&d.octets(), ones_sum(&s.octets(), 0)),
        (IpAddr::V6(s), IpAddr::V6(d)) => ones_sum(&d.octets(), ones_sum(&s.octets(), 0)),
        _ => panic!("mixed families"),
    };
    acc += u64::from(protocol) + segment.len() as u64;
    if protocol == proto::UDP {
        assert_ne!(&segment[6..8], &[0, 0], "UDP checksum left zero");
    }
    folds_to_ffff(ones_sum(segment, acc))
}

/// The IP payload of a frame (behind the IP header and, for IPv6, the
/// Fragment header).
fn ip_payload<'a>(f: &'a Frame, l3: &L3Info) -> &'a [u8] {
    &f.bytes()[l3.l3_offset + l3.ip_header_len..l3.l3_offset + l3.ip_total_len]
}

fn mixed() -> GenConfig {
    GenConfig {
        flows: 500,
        ipv6_share: 0.5,
        tcp_share: 0.4,
        size: SizeDist::Imix,
        frag_share: 0.2,
        seed: 42,
        ..GenConfig::default()
    }
}

/// Checks one frame: parse, tuple, lengths, checksums, sequence header.
fn check_frame(g: &Generator, f: &Frame) -> L3Info {
    let l3 = outer(f);
    let want = g.flow_tuple(f.flow_id());
    assert!(f.flow_id() < g.flow_count());
    assert_eq!(l3.tuple.src, want.src);
    assert_eq!(l3.tuple.dst, want.dst);
    assert_eq!(l3.tuple.proto, want.proto);
    assert_eq!(l3.is_fragment(), f.is_fragment());
    assert!(!l3.truncated);
    assert_eq!(f.bytes().len(), l3.l3_offset + l3.ip_total_len, "no trailing bytes");
    if want.src.is_ipv4() {
        let ip = Ipv4Packet::new_checked(&f.bytes()[l3.l3_offset..]).unwrap();
        assert!(ip.verify_checksum(), "IPv4 header checksum of {f:?}");
    }
    let first = l3.frag.is_none_or(|fr| fr.is_first());
    if first {
        assert_eq!(l3.tuple.ports, want.ports);
        let l4 = l3.l4_offset.unwrap();
        let hdr = if want.proto == proto::TCP { 20 } else { 8 };
        let payload = &f.bytes()[l4 + hdr..];
        assert_eq!(read_seq(payload), Some((f.seq(), f.flow_id())));
    } else {
        assert_eq!(l3.tuple.ports, None);
    }
    if !f.is_fragment() {
        let segment = &f.bytes()[l3.l4_offset.unwrap()..];
        assert!(l4_checksum_ok(want.src, want.dst, want.proto, segment), "L4 checksum of {f:?}");
    }
    l3
}

#[test]
fn frames_parse_with_valid_checksums_and_land_on_their_rss_queue() {
    let cfg = mixed();
    let spread = rss(4);
    let Spread::Rss { config, .. } = &spread else { unreachable!() };
    let config = config.clone();
    let mut g = Generator::new(&cfg, spread).unwrap();
    assert_eq!(g.queues(), 4);
    let total: u32 = (0..4).map(|q| g.flows_on_queue(QueueId(q))).sum();
    assert_eq!(total, g.flow_count());
    let mut out = frames(32);
    let (mut whole, mut frags, mut v6, mut tcp) = (0, 0, 0, 0);
    for q in 0..4 {
        for _ in 0..60 {
            assert_eq!(g.next_burst(QueueId(q), &mut out), 32);
            for f in &out {
                let l3 = check_frame(&g, f);
                assert_eq!(config.place(&l3.tuple, f.is_fragment()).queue.0, q);
                let tuple = g.flow_tuple(f.flow_id());
                assert_eq!(config.place(&tuple, f.is_fragment()).queue.0, q);
                whole += usize::from(!f.is_fragment());
                frags += usize::from(f.is_fragment());
                v6 += usize::from(tuple.is_ipv6());
                tcp += usize::from(tuple.proto == proto::TCP);
            }
        }
    }
    assert!(whole > 1000 && frags > 100 && v6 > 1000 && tcp > 1000);
}

#[test]
fn udp_four_tuple_hashing_spreads_udp_flows() {
    let mut config = RssConfig::default_for_queues(8).unwrap();
    config.types = HashTypes::parse("all").unwrap();
    let cfg = GenConfig { tcp_share: 0.0, ..mixed() };
    let mut g = Generator::new(&cfg, Spread::Rss { queues: 8, config: config.clone() }).unwrap();
    let mut out = frames(16);
    for q in 0..8 {
        assert!(g.flows_on_queue(QueueId(q)) > 20, "queue {q} starved");
        for _ in 0..20 {
            g.next_burst(QueueId(q), &mut out);
            for f in &out {
                let l3 = check_frame(&g, f);
                assert_eq!(config.place(&l3.tuple, f.is_fragment()).queue.0, q);
            }
        }
    }
}

#[test]
fn per_flow_seqs_increase_by_one_and_fragments_are_consecutive() {
    for zipf in [None, Some(1.1)] {
        let cfg = GenConfig { zipf, ..mixed() };
        let mut g = Generator::new(&cfg, rss(3)).unwrap();
        // 7 is not a multiple of 3 fragments: datagrams straddle bursts.
        let mut out = frames(7);
        for q in 0..3 {
            let mut next: HashMap<u32, u64> = HashMap::new();
            // (flow, seq, next offset) of the datagram being fragmented.
            let mut open: Option<(u32, u64, usize)> = None;
            for _ in 0..300 {
                assert_eq!(g.next_burst(QueueId(q), &mut out), 7);
                for f in &out {
                    let l3 = outer(f);
                    let offset = l3.frag.map_or(0, |fr| usize::from(fr.offset));
                    if let Some((flow, seq, off)) = open {
                        assert_eq!((f.flow_id(), f.seq(), offset), (flow, seq, off));
                    } else {
                        assert_eq!(offset, 0);
                        let n = next.entry(f.flow_id()).or_insert(0);
                        assert_eq!(f.seq(), *n, "flow {} out of order", f.flow_id());
                        *n += 1;
                    }
                    open = match l3.frag {
                        Some(fr) if fr.more => Some((f.flow_id(), f.seq(), offset + ip_payload(f, &l3).len())),
                        _ => None,
                    };
                    if let Some(fr) = l3.frag {
                        let id = if l3.tuple.is_ipv6() { f.seq() as u32 } else { u32::from(f.seq() as u16) };
                        assert_eq!(fr.id, id, "fragment id follows the datagram");
                    }
                }
            }
        }
    }
}

/// (offset, data, more fragments)
type Fragment = (usize, Vec<u8>, bool);

#[test]
fn fragments_reassemble_to_the_full_datagram() {
    let cfg = GenConfig { tcp_share: 0.0, frag_share: 0.2, ..mixed() };
    let mut g = Generator::new(&cfg, Spread::Single).unwrap();
    let mut out = frames(64);
    // (flow, seq) -> fragments (offset, data, more)
    let mut parts: HashMap<(u32, u64), Vec<Fragment>> = HashMap::new();
    let mut whole = 0usize;
    for _ in 0..100 {
        g.next_burst(QueueId(0), &mut out);
        for f in &out {
            let l3 = check_frame(&g, f);
            match l3.frag {
                Some(fr) => parts.entry((f.flow_id(), f.seq())).or_default().push((
                    usize::from(fr.offset),
                    ip_payload(f, &l3).to_vec(),
                    fr.more,
                )),
                None => whole += 1,
            }
        }
    }
    let frag_frames: usize = parts.values().map(Vec::len).sum();
    assert!(frag_frames > 0 && whole > 0);
    let mut complete = 0;
    for ((flow, seq), mut frs) in parts {
        frs.sort_by_key(|p| p.0);
        if frs.last().is_some_and(|p| p.2) || frs[0].0 != 0 {
            continue; // cut off by the end of the run
        }
        let mut datagram = Vec::new();
        for (off, data, _) in &frs {
            assert_eq!(*off, datagram.len(), "hole or overlap");
            datagram.extend_from_slice(data);
        }
        let t = g.flow_tuple(flow);
        assert_eq!(datagram.len(), 8 + FRAG_UDP_PAYLOAD);
        assert!(frs.iter().all(|p| p.1.len() <= 1480));
        assert_eq!(u16::from_be_bytes([datagram[4], datagram[5]]) as usize, datagram.len());
        let (sport, dport) = t.ports.unwrap();
        assert_eq!(&datagram[..4], &[sport.to_be_bytes(), dport.to_be_bytes()].concat()[..]);
        assert!(l4_checksum_ok(t.src, t.dst, proto::UDP, &datagram));
        assert_eq!(read_seq(&datagram[8..]), Some((seq, flow)));
        complete += 1;
    }
    assert!(complete > 10);
}

#[test]
fn uniform_is_round_robin_and_zipf_skews_towards_low_ids() {
    let base = GenConfig { flows: 1000, ..GenConfig::default() };
    let count = |cfg: &GenConfig| {
        let mut g = Generator::new(cfg, Spread::Single).unwrap();
        let mut out = frames(50);
        let mut c = vec![0usize; 1000];
        for _ in 0..2000 {
            g.next_burst(QueueId(0), &mut out);
            for f in &out {
                c[f.flow_id() as usize] += 1;
            }
        }
        c
    };
    let uniform = count(&base);
    assert!(uniform.iter().all(|&n| n == 100));
    let zipf = count(&GenConfig { zipf: Some(1.1), ..base });
    let top = *zipf.iter().max().unwrap();
    assert_eq!(zipf[0], top, "flow 0 is the heaviest hitter");
    // Uniform share is 0.1%; Zipf(1.1) over 1000 flows gives flow 0 ~20%.
    assert!(top > 10_000, "top flow {top} of 100000");
    assert!(zipf[0] > zipf[1] && zipf[1] > zipf[10] && zipf[10] > zipf[500]);
}

#[test]
fn imix_sizes_follow_7_4_1() {
    let cfg = GenConfig { ipv6_share: 0.0, tcp_share: 0.0, size: SizeDist::Imix, ..GenConfig::default() };
    let mut g = Generator::new(&cfg, rss(2)).unwrap();
    let mut out = frames(100);
    let mut sizes: HashMap<usize, usize> = HashMap::new();
    for _ in 0..500 {
        for q in 0..2 {
            g.next_burst(QueueId(q), &mut out);
            for f in &out {
                *sizes.entry(f.bytes().len()).or_default() += 1;
            }
        }
    }
    assert_eq!(sizes.len(), 3, "{sizes:?}");
    let n = 100_000.0;
    for (len, share) in [(64, 7.0 / 12.0), (570, 4.0 / 12.0), (1518, 1.0 / 12.0)] {
        let got = sizes[&len] as f64 / n;
        assert!((got - share).abs() < 0.01, "{len}: {got} vs {share}");
    }
}

#[test]
fn fixed_sizes_and_minimum_lengths() {
    for (size, tcp, v6, want) in [
        (64, 0.0, 0.0, 64),
        (64, 1.0, 0.0, 66),
        (64, 0.0, 1.0, 74),
        (64, 1.0, 1.0, 86),
        (128, 1.0, 1.0, 128),
        (9000, 0.5, 0.5, 9000),
    ] {
        let cfg = GenConfig {
            flows: 64,
            ipv6_share: v6,
            tcp_share: tcp,
            size: SizeDist::Fixed(size),
            ..GenConfig::default()
        };
        let mut g = Generator::new(&cfg, Spread::Single).unwrap();
        let mut out = frames(16);
        for _ in 0..8 {
            g.next_burst(QueueId(0), &mut out);
            for f in &out {
                check_frame(&g, f);
                assert_eq!(f.bytes().len(), want);
            }
        }
    }
}

#[test]
fn frame_reuse_across_layouts_leaves_no_stale_bytes() {
    // A buffer that held a jumbo / TCP / IPv6 frame must later carry a
    // correct small frame; then the small one, grown again, must be zero-padded.
    let cfg = GenConfig {
        flows: 50,
        ipv6_share: 0.5,
        tcp_share: 0.5,
        size: SizeDist::Imix,
        frag_share: 0.5,
        ..GenConfig::default()
    };
    let mut g = Generator::new(&cfg, Spread::Single).unwrap();
    let mut out = frames(3);
    for _ in 0..3000 {
        g.next_burst(QueueId(0), &mut out);
        for f in &out {
            let l3 = check_frame(&g, f);
            let zeros_from = match l3.frag {
                Some(fr) if !fr.is_first() => l3.l3_offset + l3.ip_header_len,
                _ => l3.l4_offset.unwrap() + if l3.tuple.proto == proto::TCP { 32 } else { 20 },
            };
            assert!(f.bytes()[zeros_from..].iter().all(|&b| b == 0));
        }
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let run = |seed: u64, order: &[u16]| {
        let cfg = GenConfig { seed, zipf: Some(0.9), ..mixed() };
        let mut g = Generator::new(&cfg, rss(4)).unwrap();
        let mut out = frames(10);
        let mut per_queue: Vec<Vec<u8>> = vec![Vec::new(); 4];
        for _ in 0..30 {
            for &q in order {
                g.next_burst(QueueId(q), &mut out);
                for f in &out {
                    per_queue[usize::from(q)].extend_from_slice(f.bytes());
                }
            }
        }
        per_queue
    };
    let a = run(7, &[0, 1, 2, 3]);
    assert_eq!(a, run(7, &[0, 1, 2, 3]));
    // A queue's stream does not depend on how the others are polled.
    assert_eq!(a, run(7, &[3, 2, 1, 0]));
    let b = run(8, &[0, 1, 2, 3]);
    assert_ne!(a, b);
}

#[test]
fn stream_does_not_depend_on_burst_sizes() {
    let cfg = GenConfig { zipf: Some(1.2), ..mixed() };
    let run = |burst: usize| {
        let mut g = Generator::new(&cfg, rss(2)).unwrap();
        let mut out = frames(burst);
        let mut bytes = Vec::new();
        for _ in 0..(2 * 3 * 5 * 7 * 4 / burst) {
            assert_eq!(g.next_burst(QueueId(1), &mut out), burst);
            for f in &out {
                bytes.extend_from_slice(f.bytes());
                bytes.extend_from_slice(&f.seq().to_be_bytes());
            }
        }
        bytes
    };
    let one = run(1);
    for burst in [2, 3, 5, 7, 40, 105] {
        assert_eq!(one, run(burst), "burst {burst}");
    }
}

#[test]
fn bad_configs_are_errors() {
    let ok = GenConfig::default();
    let cases: Vec<(GenConfig, GenError)> = vec![
        (GenConfig { flows: 0, ..ok.clone() }, GenError::Flows(0)),
        (GenConfig { flows: MAX_FLOWS + 1, ..ok.clone() }, GenError::Flows(MAX_FLOWS + 1)),
        (GenConfig { ipv6_share: -0.1, ..ok.clone() }, GenError::Share { field: "ipv6_share", value: -0.1 }),
        (GenConfig { tcp_share: 1.5, ..ok.clone() }, GenError::Share { field: "tcp_share", value: 1.5 }),
        (GenConfig { size: SizeDist::Fixed(10), ..ok.clone() }, GenError::FrameSize(10)),
        (GenConfig { size: SizeDist::Fixed(9001), ..ok.clone() }, GenError::FrameSize(9001)),
        (GenConfig { zipf: Some(-1.0), ..ok.clone() }, GenError::Zipf(-1.0)),
    ];
    for (cfg, err) in cases {
        assert_eq!(Generator::new(&cfg, Spread::Single).unwrap_err(), err);
        assert!(!err.to_string().is_empty());
    }
    // NaN does not compare equal: match on the variant.
    for cfg in [
        GenConfig { frag_share: f64::NAN, ..ok.clone() },
        GenConfig { zipf: Some(f64::NAN), ..ok.clone() },
        GenConfig { zipf: Some(f64::INFINITY), ..ok.clone() },
    ] {
        assert!(matches!(Generator::new(&cfg, Spread::Single), Err(GenError::Share { .. } | GenError::Zipf(_))));
    }
    assert_eq!(
        Generator::new(&ok, Spread::Rss { queues: 0, config: RssConfig::default_for_queues(1).unwrap() }).unwrap_err(),
        GenError::NoQueues
    );
    assert!(matches!(
        Generator::new(&ok, Spread::Rss { queues: 2, config: RssConfig::default_for_queues(4).unwrap() }),
        Err(GenError::QueueOutOfRange { queues: 2, .. })
    ));
}

#[test]
fn empty_and_missing_queues_give_nothing() {
    let cfg = GenConfig { flows: 100, ..GenConfig::default() };
    // 8 queues, but the RETA only uses 2.
    let mut g =
        Generator::new(&cfg, Spread::Rss { queues: 8, config: RssConfig::default_for_queues(2).unwrap() }).unwrap();
    let mut out = frames(4);
    assert_eq!(g.flows_on_queue(QueueId(0)) + g.flows_on_queue(QueueId(1)), 100);
    for q in 2..8 {
        assert_eq!(g.flows_on_queue(QueueId(q)), 0);
        assert_eq!(g.next_burst(QueueId(q), &mut out), 0);
    }
    assert_eq!(g.next_burst(QueueId(8), &mut out), 0);
    assert_eq!(g.flows_on_queue(QueueId(u16::MAX)), 0);
    assert_eq!(g.next_burst(QueueId(0), &mut []), 0);
    assert_eq!(g.next_burst(QueueId(0), &mut out), 4);

    // One flow, every share extreme, a zipf of 0 (= uniform) and a huge one.
    for zipf in [Some(0.0), Some(1e9)] {
        let cfg =
            GenConfig { flows: 1, ipv6_share: 1.0, tcp_share: 0.0, frag_share: 1.0, zipf, ..GenConfig::default() };
        let mut g = Generator::new(&cfg, Spread::Single).unwrap();
        assert_eq!(g.next_burst(QueueId(0), &mut out), 4);
        assert!(out.iter().all(Frame::is_fragment));
    }
}

#[test]
fn flows_beyond_the_template_limit_are_built_on_the_fly() {
    let flows = MAX_TEMPLATED_FLOWS + 40;
    let cfg = GenConfig {
        flows,
        ipv6_share: 0.5,
        tcp_share: 0.5,
        frag_share: 0.3,
        size: SizeDist::Imix,
        ..GenConfig::default()
    };
    // Round robin in id order: the on-the-fly flows come after all the others.
    let mut g = Generator::new(&cfg, Spread::Single).unwrap();
    let mut seen_high = 0;
    let mut big = frames(4096);
    while seen_high < 40 {
        g.next_burst(QueueId(0), &mut big);
        for f in &big {
            if f.flow_id() >= MAX_TEMPLATED_FLOWS {
                check_frame(&g, f);
                if !f.is_fragment() || outer(f).frag.is_some_and(|fr| fr.is_first()) {
                    seen_high += 1;
                }
            }
        }
    }
}

#[test]
fn mixed_size_flows_send_one_datagram_in_n_as_fragments() {
    let cfg = GenConfig { flows: 4, tcp_share: 0.0, frag_share: 1.0, frag_every: 4, ..GenConfig::default() };
    let mut g = Generator::new(&cfg, Spread::Single).unwrap();
    let mut out = frames(16);
    let (mut whole, mut firsts, mut later) = (0, 0, 0);
    let mut next: HashMap<u32, u64> = HashMap::new();
    for _ in 0..50 {
        g.next_burst(QueueId(0), &mut out);
        for f in &out {
            let l3 = check_frame(&g, f);
            match l3.frag {
                None => {
                    whole += 1;
                    assert_ne!(f.seq() % 4, 0, "seq {} should be fragmented", f.seq());
                    assert_eq!(l3.tuple.ports, g.flow_tuple(f.flow_id()).ports);
                }
                Some(fr) if fr.offset == 0 => {
                    firsts += 1;
                    assert_eq!(f.seq() % 4, 0);
                }
                Some(_) => {
                    later += 1;
                    continue;
                }
            }
            let n = next.entry(f.flow_id()).or_insert(0);
            assert_eq!(f.seq(), *n, "flow {} skipped a datagram", f.flow_id());
            *n += 1;
        }
    }
    // One datagram in 4 is fragmented (3 fragments: a first and 2 later ones).
    let share = firsts as f64 / (whole + firsts) as f64;
    assert!(firsts > 0 && (share - 0.25).abs() < 0.02, "{whole} {firsts} {later}");
    assert!(later + 2 >= 2 * firsts && later <= 2 * firsts, "{whole} {firsts} {later}");
    assert_eq!(cfg.validate(), Ok(()));
    assert_eq!(GenConfig { frag_every: 0, ..cfg.clone() }.validate(), Err(GenError::FragEvery));
    let err = Generator::new(&cfg, rss(2)).unwrap_err();
    assert_eq!(err, GenError::MixedNeedsOneQueue(2));
    assert!(err.to_string().contains("one receive queue"));
}
