//! Builder -> parser round trips for every frame kind and encapsulation.

mod common;

use common::*;
use flowsteer_wire::build::{self, FrameBuilder, Ipv6Ext, VlanTag};
use flowsteer_wire::{parse_frame, proto, Encap, FragInfo, InnerMiss, Layer, LinkType, ParseError, ParseOptions};
use std::net::Ipv4Addr;

fn parse(f: &[u8], opts: &ParseOptions) -> Result<flowsteer_wire::Parsed, ParseError> {
    parse_frame(f, LinkType::Ethernet, opts)
}

#[test]
fn udp4_fields() {
    let f = FrameBuilder {
        tos: (46 << 2) | 1,
        ttl: 17,
        dont_fragment: true,
        ..FrameBuilder::udp(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, b"x")
    }
    .build();
    let p = parse(&f, &OUTER).unwrap();
    let o = p.outer.unwrap();
    assert_eq!((o.dscp, o.ecn, o.ttl, o.dont_fragment), (46, 1, 17, true));
    assert_eq!(o.tuple.ports, Some((1, 2)));
    assert!(!o.atomic_frag && o.frag.is_none());
}

#[test]
fn ipv6_traffic_class() {
    let f = FrameBuilder { tos: (10 << 2) | 2, ttl: 3, ..FrameBuilder::udp(v6("::1"), v6("::2"), 1, 2, b"x") }.build();
    let o = parse(&f, &OUTER).unwrap().outer.unwrap();
    assert_eq!((o.dscp, o.ecn, o.ttl, o.dont_fragment), (10, 2, 3, false));
}

#[test]
fn overlong_padding_is_ignored() {
    let f = build::udp_frame(v4("1.1.1.1"), v4("2.2.2.2"), 1, 2, b"");
    assert_eq!(f.len(), 42);
    let mut padded = f.clone();
    padded.resize(60, 0xff);
    assert_eq!(parse(&padded, &INNER), parse(&f, &INNER));
    let o = parse(&padded, &OUTER).unwrap().outer.unwrap();
    assert_eq!(o.ip_total_len, 28);
    assert!(!o.truncated);

    // padding after a tunnel is not taken as inner data either
    let g = build::gre_frame(v4("1.1.1.1"), v4("2.2.2.2"), None, &inner_udp4());
    let mut padded = g.clone();
    padded.extend_from_slice(&[0x45; 30]);
    assert_eq!(parse(&padded, &INNER), parse(&g, &INNER));
}

#[test]
fn snaplen_truncation_sets_flag() {
    let f = build::udp_frame(v4("1.1.1.1"), v4("2.2.2.2"), 1, 2, &[0; 100]);
    let p = parse(&f[..50], &OUTER).unwrap();
    let o = p.outer.unwrap();
    assert!(o.truncated);
    assert_eq!(o.ip_total_len, 128);
    assert_eq!(o.tuple.ports, Some((1, 2)));
    let f6 = build::udp_frame(v6("::1"), v6("::2"), 1, 2, &[0; 100]);
    let o = parse(&f6[..70], &OUTER).unwrap().outer.unwrap();
    assert!(o.truncated);
    assert_eq!(o.ip_total_len, 148);
}

#[test]
fn truncated_l4_on_whole_packet_is_error() {
    let f = build::udp_frame(v4("1.1.1.1"), v4("2.2.2.2"), 1, 2, b"");
    assert_eq!(parse(&f[..40], &OUTER), Err(ParseError::Truncated { layer: Layer::Udp }));
    let t = build::tcp_frame(v6("::1"), v6("::2"), 1, 2, 0, 2, b"");
    assert_eq!(parse(&t[..70], &OUTER), Err(ParseError::Truncated { layer: Layer::Tcp }));
    // IP length too small for the UDP header
    let mut f = f.clone();
    f[17] = 24;
    assert_eq!(parse(&f, &OUTER), Err(ParseError::Truncated { layer: Layer::Udp }));
}

#[test]
fn bad_lengths() {
    let mut t = build::tcp_frame(v4("1.1.1.1"), v4("2.2.2.2"), 1, 2, 0, 2, b"");
    t[14 + 20 + 12] = 0x40;
    assert_eq!(parse(&t, &OUTER), Err(ParseError::BadHeaderLen { layer: Layer::Tcp }));
    let mut f = build::udp_frame(v4("1.1.1.1"), v4("2.2.2.2"), 1, 2, b"");
    f[16] = 0;
    f[17] = 10;
    assert_eq!(parse(&f, &OUTER), Err(ParseError::BadTotalLen));
    f[14] = 0x43;
    assert_eq!(parse(&f, &OUTER), Err(ParseError::BadHeaderLen { layer: Layer::Ipv4 }));
    assert_eq!(ParseError::BadHeaderLen { layer: Layer::Ipv4 }.reason(), "bad_header_len_ipv4");
}

#[test]
fn ipv4_options_are_skipped() {
    let f = FrameBuilder {
        ipv4_options: &[0x07, 0x07, 0x04, 0, 0, 0, 0], // record route, padded to 8
        ..FrameBuilder::tcp(v4("1.1.1.1"), v4("2.2.2.2"), 10, 20, 0, 2, b"")
    }
    .build();
    let o = parse(&f, &OUTER).unwrap().outer.unwrap();
    assert_eq!(o.ip_header_len, 28);
    assert_eq!(o.l4_offset, Some(14 + 28));
    assert_eq!(o.tuple.ports, Some((10, 20)));
}

#[test]
fn ipv6_full_chain_first_fragment() {
    let f = FrameBuilder {
        ipv6_ext: &[
            Ipv6Ext::HopByHop { len: 8 },
            Ipv6Ext::Routing { len: 24 },
            Ipv6Ext::DestOpts { len: 16 },
            Ipv6Ext::Fragment { offset: 0, more: true, id: 0xabcdef },
            Ipv6Ext::DestOpts { len: 8 },
        ],
        ..FrameBuilder::udp(v6("2001:db8::1"), v6("2001:db8::2"), 7, 8, b"data")
    }
    .build();
    let o = parse(&f, &OUTER).unwrap().outer.unwrap();
    assert_eq!(o.tuple.proto, proto::UDP);
    assert_eq!(o.tuple.ports, Some((7, 8)));
    assert_eq!(o.frag, Some(FragInfo { id: 0xabcdef, offset: 0, more: true }));
    assert!(!o.atomic_frag);
    assert_eq!(o.ip_header_len, 40 + 8 + 24 + 16 + 8);
    assert_eq!(o.l4_offset, Some(14 + 40 + 8 + 24 + 16 + 8 + 8));
    assert_eq!(o.ip_total_len, 40 + 64 + 12);
}

#[test]
fn ipv6_chain_without_fragment_counts_whole_chain() {
    let f = FrameBuilder {
        ipv6_ext: &[Ipv6Ext::HopByHop { len: 8 }, Ipv6Ext::Auth { len: 12 }],
        ..FrameBuilder::tcp(v6("::1"), v6("::2"), 7, 8, 0, 2, b"")
    }
    .build();
    let o = parse(&f, &OUTER).unwrap().outer.unwrap();
    assert_eq!(o.ip_header_len, 60);
    assert_eq!(o.l4_offset, Some(74));
    assert_eq!(o.tuple.ports, Some((7, 8)));
}

#[test]
fn ipv6_non_first_fragment_stops() {
    let f = FrameBuilder {
        ipv6_ext: &[Ipv6Ext::HopByHop { len: 8 }, Ipv6Ext::Fragment { offset: 1448, more: false, id: 5 }],
        ..FrameBuilder::raw(v6("::1"), v6("::2"), proto::TCP, &[0xff; 32])
    }
    .build();
    let o = parse(&f, &INNER).unwrap().outer.unwrap();
    assert_eq!(o.tuple.proto, proto::TCP);
    assert_eq!(o.tuple.ports, None);
    assert_eq!(o.l4_offset, None);
    assert_eq!(o.ip_header_len, 56);
    let fi = o.frag.unwrap();
    assert_eq!((fi.id, fi.offset, fi.more), (5, 1448, false));
    assert!(!fi.is_first() && fi.is_last());
}

#[test]
fn ipv6_atomic_fragment() {
    let f = FrameBuilder {
        ipv6_ext: &[Ipv6Ext::Fragment { offset: 0, more: false, id: 77 }],
        ..FrameBuilder::udp(v6("::1"), v6("::2"), 7, 8, b"z")
    }
    .build();
    let o = parse(&f, &OUTER).unwrap().outer.unwrap();
    assert!(o.atomic_frag);
    assert_eq!(o.frag, None);
    assert_eq!(o.tuple.ports, Some((7, 8)));
    assert_eq!(o.ip_header_len, 48);
    // atomic fragments are whole packets: a cut L4 header is an error
    assert_eq!(parse(&f[..14 + 48 + 4], &OUTER), Err(ParseError::Truncated { layer: Layer::Udp }));
}

#[test]
fn ipv6_chain_limits() {
    let eight = [Ipv6Ext::DestOpts { len: 8 }; 8];
    let f = FrameBuilder { ipv6_ext: &eight, ..FrameBuilder::udp(v6("::1"), v6("::2"), 7, 8, b"") }.build();
    assert!(parse(&f, &OUTER).unwrap().outer.unwrap().tuple.ports.is_some());
    let nine = [Ipv6Ext::DestOpts { len: 8 }; 9];
    let f = FrameBuilder { ipv6_ext: &nine, ..FrameBuilder::udp(v6("::1"), v6("::2"), 7, 8, b"") }.build();
    assert_eq!(parse(&f, &OUTER), Err(ParseError::ExtChainTooLong));
    assert_eq!(ParseError::ExtChainTooLong.reason(), "ext_chain_too_long");
    let f = FrameBuilder {
        ipv6_ext: &[Ipv6Ext::DestOpts { len: 8 }, Ipv6Ext::HopByHop { len: 8 }],
        ..FrameBuilder::udp(v6("::1"), v6("::2"), 7, 8, b"")
    }
    .build();
    assert_eq!(parse(&f, &OUTER), Err(ParseError::BadExtHeader));
    // ESP ends the walk with no ports
    let f = build::ip_frame(&build::ip_packet(v6("::1"), v6("::2"), proto::ESP, &[1; 24]));
    let o = parse(&f, &OUTER).unwrap().outer.unwrap();
    assert_eq!((o.tuple.proto, o.tuple.ports), (proto::ESP, None));
}

#[test]
fn ipv4_fragments_round_trip() {
    let frags = build::ipv4_fragments(
        Ipv4Addr::new(10, 1, 1, 1),
        Ipv4Addr::new(10, 2, 2, 2),
        1234,
        5678,
        0xbeef,
        &[1; 1000],
        256,
    );
    assert_eq!(frags.len(), 4); // 1008 bytes in 256-byte pieces
    for (i, f) in frags.iter().enumerate() {
        let o = parse(f, &INNER).unwrap().outer.unwrap();
        let fi = o.frag.unwrap();
        assert_eq!(fi.id, 0xbeef);
        assert_eq!(usize::from(fi.offset), i * 256);
        assert_eq!(fi.more, i < 3);
        assert_eq!(o.tuple.proto, proto::UDP);
        if i == 0 {
            assert_eq!(o.tuple.ports, Some((1234, 5678)));
            assert_eq!(o.l4_offset, Some(34));
        } else {
            assert_eq!(o.tuple.ports, None);
            assert_eq!(o.l4_offset, None);
        }
        assert!(!o.truncated);
    }
    // a first fragment too short for the UDP header: no ports, no error
    let tiny = build::ipv4_fragments(Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 2, 2, 2), 1, 2, 1, &[1; 8], 8);
    let mut first = tiny[0][..34].to_vec();
    first.extend_from_slice(&[0, 1, 0, 2]);
    first[17] = 24; // total length 24: 4 bytes of UDP
    let c = build::ipv4_header_checksum(&first[14..34]);
    first[24..26].copy_from_slice(&c.to_be_bytes());
    let o = parse(&first, &OUTER).unwrap().outer.unwrap();
    assert!(o.frag.unwrap().more);
    assert_eq!(o.tuple.ports, None);
    assert_eq!(o.l4_offset, Some(34));
}

#[test]
fn ipv6_fragments_round_trip() {
    let frags = build::ipv6_fragments(
        "fd00::1".parse().unwrap(),
        "fd00::2".parse().unwrap(),
        1234,
        5678,
        0x01020304,
        &[1; 100],
        48,
    );
    assert_eq!(frags.len(), 3); // 108 bytes in 48-byte pieces
    for (i, f) in frags.iter().enumerate() {
        let o = parse(f, &OUTER).unwrap().outer.unwrap();
        let fi = o.frag.unwrap();
        assert_eq!((fi.id, usize::from(fi.offset), fi.more), (0x01020304, i * 48, i < 2));
        assert_eq!(o.tuple.proto, proto::UDP);
        assert_eq!(o.ip_header_len, 48);
        assert_eq!(o.tuple.ports.is_some(), i == 0);
        assert_eq!(o.l4_offset.is_some(), i == 0);
    }
    let one = build::ipv6_fragments("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap(), 1, 2, 3, b"small", 1280);
    assert_eq!(one.len(), 1);
    assert_eq!(parse(&one[0], &OUTER).unwrap().outer.unwrap().frag, None);
}

#[test]
fn vlans_qinq_and_too_many() {
    let f = build::udp_frame(v4("1.1.1.1"), v4("2.2.2.2"), 1, 2, b"");
    let p = parse(&build::with_vlans(&f, &[VlanTag::dot1q(10)]), &OUTER).unwrap();
    assert_eq!((p.vlan_count, p.vlan_ids, p.vlans()), (1, [10, 0], &[10][..]));
    assert_eq!(p.outer.unwrap().l3_offset, 18);
    let q = build::with_vlans(&f, &[VlanTag::dot1ad(100), VlanTag::dot1q(4095)]);
    let p = parse(&q, &OUTER).unwrap();
    assert_eq!((p.vlan_count, p.vlan_ids), (2, [100, 4095]));
    assert_eq!(p.ethertype, 0x0800);
    assert_eq!(p.outer.unwrap().l3_offset, 22);
    let old = build::with_vlans(&f, &[VlanTag { tpid: 0x9100, vid: 5, pcp: 0 }, VlanTag::dot1q(6)]);
    assert_eq!(parse(&old, &OUTER).unwrap().vlan_ids, [5, 6]);
    let three = build::with_vlans(&f, &[VlanTag::dot1ad(1), VlanTag::dot1q(2), VlanTag::dot1q(3)]);
    assert_eq!(parse(&three, &OUTER), Err(ParseError::TooManyVlans));
    assert_eq!(ParseError::TooManyVlans.reason(), "too_many_vlans");
}

#[test]
fn non_ip_frames() {
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&build::SRC_MAC);
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(60, 0);
    let p = parse(&arp, &INNER).unwrap();
    assert_eq!(p.ethertype, 0x0806);
    assert_eq!((p.outer, p.encap, p.inner), (None, None, None));
    assert_eq!(p.innermost(), None);
    // 802.3 / LLC: length field
    let mut llc = arp.clone();
    llc[12] = 0;
    llc[13] = 46;
    let p = parse(&llc, &OUTER).unwrap();
    assert_eq!((p.ethertype, p.outer), (46, None));
    // VLAN-tagged ARP
    let p = parse(&build::with_vlans(&arp, &[VlanTag::dot1q(9)]), &OUTER).unwrap();
    assert_eq!((p.vlan_count, p.ethertype, p.outer), (1, 0x0806, None));
    // PPPoE discovery is not IP either
    let mut disc = arp.clone();
    disc[12] = 0x88;
    disc[13] = 0x63;
    assert_eq!(parse(&disc, &OUTER).unwrap().outer, None);
}

#[test]
fn vxlan_with_inner_vlan() {
    let inner = build::with_vlans(&build::ip_frame(&inner_udp4()), &[VlanTag::dot1q(42)]);
    let f = build::vxlan_frame(v4("10.0.0.1"), v4("10.0.0.2"), 49152, 0xabcdef, &inner);
    let p = parse(&f, &INNER).unwrap();
    let o = p.outer.unwrap();
    assert_eq!(o.tuple.ports, Some((49152, 4789)));
    assert_eq!(p.encap, Some(Encap::Vxlan { vni: 0xabcdef }));
    let i = p.inner.unwrap();
    assert_eq!(i.tuple.src, v4("192.168.1.1"));
    assert_eq!(i.tuple.dst, v4("192.168.1.2"));
    assert_eq!(i.tuple.ports, Some((1111, 2222)));
    assert_eq!(i.l3_offset, 14 + 20 + 8 + 8 + 18);
    assert_eq!(i.l4_offset, Some(14 + 20 + 8 + 8 + 18 + 20));
    assert_eq!(p.innermost(), Some(&i));
    // outer VLANs are the frame's, not the inner frame's
    assert_eq!(p.vlan_count, 0);

    // inner not requested: encap still reported
    let p = parse(&f, &OUTER).unwrap();
    assert_eq!(p.encap, Some(Encap::Vxlan { vni: 0xabcdef }));
    assert_eq!(p.inner, None);
    assert_eq!(p.innermost(), Some(&o));

    // another VXLAN port: plain UDP
    let opts = ParseOptions { vxlan_port: 8472, inner: true };
    let p = parse(&f, &opts).unwrap();
    assert_eq!((p.encap, p.inner), (None, None));
    let opts = ParseOptions { vxlan_port: 0, inner: true };
    assert_eq!(parse(&f, &opts).unwrap().encap, None);

    // I flag clear: not VXLAN
    let mut g = f.clone();
    g[42] = 0;
    let p = parse(&g, &INNER).unwrap();
    assert_eq!((p.encap, p.inner), (None, None));
}

#[test]
fn vxlan_ipv6_outer_and_inner() {
    let f = build::vxlan_frame(v6("2001:db8::1"), v6("2001:db8::2"), 5000, 1, &build::ip_frame(&inner_tcp6()));
    let p = parse(&f, &INNER).unwrap();
    assert_eq!(p.encap, Some(Encap::Vxlan { vni: 1 }));
    let i = p.inner.unwrap();
    assert_eq!(i.tuple.ports, Some((3333, 4444)));
    assert_eq!(i.tuple.proto, proto::TCP);
}

#[test]
fn vxlan_inner_problems_keep_outer() {
    let inner = build::ip_frame(&inner_udp4());
    let f = build::vxlan_frame(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, &inner);
    // inner cut in its IP header / in its UDP header
    for cut in [f.len() - inner.len() + 20, f.len() - 15] {
        let g = &f[..cut];
        let p = parse(g, &INNER).unwrap();
        assert!(p.outer.unwrap().truncated);
        assert_eq!(p.encap, Some(Encap::Vxlan { vni: 2 }));
        assert_eq!(p.inner, None, "cut {cut}");
    }
    // inner non-IP
    let mut arp = inner.clone();
    arp[12] = 0x08;
    arp[13] = 0x06;
    let f = build::vxlan_frame(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, &arp);
    let p = parse(&f, &INNER).unwrap();
    assert_eq!((p.encap, p.inner), (Some(Encap::Vxlan { vni: 2 }), None));
    // inner with 3 VLANs
    let deep = build::with_vlans(&inner, &[VlanTag::dot1ad(1), VlanTag::dot1q(2), VlanTag::dot1q(3)]);
    let f = build::vxlan_frame(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, &deep);
    assert_eq!(parse(&f, &INNER).unwrap().inner, None);
    // inner malformed IPv4 (bad version)
    let mut bad = inner.clone();
    bad[14] = 0x75;
    let f = build::vxlan_frame(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, &bad);
    let p = parse(&f, &INNER).unwrap();
    assert!(p.outer.is_some() && p.inner.is_none());
}

#[test]
fn gre_plain_and_keyed() {
    let f = build::gre_frame(v4("10.0.0.1"), v4("10.0.0.2"), None, &inner_udp4());
    let p = parse(&f, &INNER).unwrap();
    assert_eq!(p.outer.unwrap().tuple.proto, proto::GRE);
    assert_eq!(p.outer.unwrap().tuple.ports, None);
    assert_eq!(p.encap, Some(Encap::Gre { key: None }));
    let i = p.inner.unwrap();
    assert_eq!(i.l3_offset, 14 + 20 + 4);
    assert_eq!(i.tuple.ports, Some((1111, 2222)));

    let f = build::gre_frame(v6("2001:db8::1"), v6("2001:db8::2"), Some(0xdeadbeef), &inner_tcp6());
    let p = parse(&f, &INNER).unwrap();
    assert_eq!(p.encap, Some(Encap::Gre { key: Some(0xdeadbeef) }));
    let i = p.inner.unwrap();
    assert_eq!(i.l3_offset, 14 + 40 + 8);
    assert_eq!(i.tuple.ports, Some((3333, 4444)));
    assert_eq!(parse(&f, &OUTER).unwrap().inner, None);
}

#[test]
fn gre_teb_and_other_protocols() {
    let inner = build::with_vlans(&build::ip_frame(&inner_tcp6()), &[VlanTag::dot1q(8)]);
    let f = build::gre_teb_frame(v4("10.0.0.1"), v4("10.0.0.2"), Some(3), &inner);
    let p = parse(&f, &INNER).unwrap();
    assert_eq!(p.encap, Some(Encap::Gre { key: Some(3) }));
    assert_eq!(p.inner.unwrap().l3_offset, 14 + 20 + 8 + 18);

    // ERSPAN-like protocol type: recognised GRE, no inner
    let mut buf = Vec::new();
    build::write_gre_frame(&mut buf, v4("10.0.0.1"), v4("10.0.0.2"), None, 0x88be, &inner);
    let p = parse(&buf, &INNER).unwrap();
    assert_eq!((p.encap, p.inner), (Some(Encap::Gre { key: None }), None));

    // GRE version 1 (PPTP): not recognised
    let mut v1 = build::gre_frame(v4("10.0.0.1"), v4("10.0.0.2"), None, &inner_udp4());
    v1[35] = 0x01;
    let p = parse(&v1, &INNER).unwrap();
    assert_eq!((p.encap, p.inner), (None, None));
    assert!(p.outer.is_some());
    // GRE header cut: not recognised, no error
    let g = build::gre_frame(v4("10.0.0.1"), v4("10.0.0.2"), Some(1), &[]);
    let p = parse(&g[..g.len() - 2], &INNER).unwrap();
    assert_eq!(p.encap, None);
}

#[test]
fn ip_in_ip_all_combinations() {
    for outer in [(v4("10.0.0.1"), v4("10.0.0.2")), (v6("2001:db8::1"), v6("2001:db8::2"))] {
        for (inner, proto_no, ports) in
            [(inner_udp4(), proto::IPIP, (1111, 2222)), (inner_tcp6(), proto::IPV6, (3333, 4444))]
        {
            let f = build::ipip_frame(outer.0, outer.1, &inner);
            let p = parse(&f, &INNER).unwrap();
            let o = p.outer.unwrap();
            assert_eq!(o.tuple.proto, proto_no);
            assert_eq!(p.encap, Some(Encap::IpInIp));
            let i = p.inner.unwrap();
            assert_eq!(i.l3_offset, o.l4_offset.unwrap());
            assert_eq!(i.tuple.ports, Some(ports));
        }
    }
    // proto 4 carrying IPv6: bad inner version, inner None
    let mut f = build::ipip_frame(v4("10.0.0.1"), v4("10.0.0.2"), &inner_tcp6());
    f[23] = proto::IPIP;
    let c = build::ipv4_header_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let p = parse(&f, &INNER).unwrap();
    assert_eq!((p.encap, p.inner), (Some(Encap::IpInIp), None));
}

#[test]
fn tunnel_behind_non_first_fragment_is_ignored() {
    let payload = build::gre_frame(v4("10.0.0.1"), v4("10.0.0.2"), None, &inner_udp4());
    let f = FrameBuilder {
        ipv6_ext: &[Ipv6Ext::Fragment { offset: 64, more: false, id: 1 }],
        ..FrameBuilder::raw(v6("::1"), v6("::2"), proto::GRE, &payload[34..])
    }
    .build();
    let p = parse(&f, &INNER).unwrap();
    assert_eq!((p.encap, p.inner), (None, None));
}

#[test]
fn pppoe_both_versions() {
    for inner_only in [OUTER, INNER] {
        let f = build::pppoe_frame(0x1234, &inner_udp4());
        let p = parse(&f, &inner_only).unwrap();
        assert_eq!(p.ethertype, 0x8864);
        assert_eq!(p.outer, None);
        assert_eq!(p.encap, Some(Encap::Pppoe { session: 0x1234 }));
        let i = p.inner.unwrap();
        assert_eq!(i.l3_offset, 22);
        assert_eq!(i.tuple.ports, Some((1111, 2222)));
        assert_eq!(p.innermost(), Some(&i));

        let f = build::pppoe_frame(7, &inner_tcp6());
        let p = parse(&f, &inner_only).unwrap();
        let i = p.inner.unwrap();
        assert!(i.tuple.is_ipv6());
        assert_eq!(i.tuple.ports, Some((3333, 4444)));
    }
    // padding after the PPPoE payload is ignored
    let f = build::pppoe_frame(7, &build::ip_packet(v4("1.1.1.1"), v4("2.2.2.2"), 1, &[]));
    let mut padded = f.clone();
    padded.resize(60, 0x45);
    assert_eq!(parse(&padded, &OUTER), parse(&f, &OUTER));
    // LCP: PPPoE but no IP
    let mut lcp = f.clone();
    lcp[20] = 0xc0;
    lcp[21] = 0x21;
    let p = parse(&lcp, &OUTER).unwrap();
    assert_eq!((p.encap, p.inner), (Some(Encap::Pppoe { session: 7 }), None));
    // PPPoE's IP is the first IP header: its errors are returned
    let f = build::pppoe_frame(7, &inner_udp4());
    assert_eq!(parse(&f[..30], &OUTER), Err(ParseError::Truncated { layer: Layer::Ipv4 }));
    assert_eq!(parse(&f[..20], &OUTER), Err(ParseError::Truncated { layer: Layer::Pppoe }));
}

#[test]
fn other_link_types() {
    let f = build::udp_frame(v4("1.1.1.1"), v4("2.2.2.2"), 1, 2, b"abc");
    let reference = parse(&f, &OUTER).unwrap().outer.unwrap().tuple;
    for (link, off, ethertype) in
        [(LinkType::RawIp, 0, 0), (LinkType::LinuxSll, 16, 0x0800), (LinkType::LinuxSll2, 20, 0x0800)]
    {
        let g = build::convert_link(&f, link);
        let p = parse_frame(&g, link, &OUTER).unwrap();
        assert_eq!(p.ethertype, ethertype);
        let o = p.outer.unwrap();
        assert_eq!(o.tuple, reference);
        assert_eq!(o.l3_offset, off);
    }
    assert_eq!(
        parse_frame(&[0; 10], LinkType::LinuxSll, &OUTER),
        Err(ParseError::Truncated { layer: Layer::LinuxSll })
    );
    assert_eq!(parse_frame(&[0; 19], LinkType::LinuxSll2, &OUTER).unwrap_err().reason(), "truncated_linux_sll");
}

#[test]
fn bsd_loopback_link_types() {
    let f4 = build::udp_frame(v4("127.0.0.1"), v4("127.0.0.2"), 1, 2, b"abc");
    let f6 = build::tcp_frame(v6("::1"), v6("::2"), 3, 4, 0, 0x10, b"");
    for (frame, family_values) in [(f4, vec![2u32]), (f6, vec![24, 28, 30])] {
        let reference = parse(&frame, &OUTER).unwrap().outer.unwrap().tuple;
        let ip = &frame[14..];
        for family in family_values {
            for header in [family.to_le_bytes(), family.to_be_bytes()] {
                let mut g = header.to_vec();
                g.extend_from_slice(ip);
                for link in [LinkType::Null, LinkType::Loop] {
                    let p = parse_frame(&g, link, &OUTER).unwrap();
                    let o = p.outer.unwrap();
                    assert_eq!((o.tuple, o.l3_offset), (reference, 4), "{link:?} family {family} {header:?}");
                }
            }
        }
    }
    // Another family (AF_APPLETALK, 16) is not IP: parsed, nothing found.
    let mut other = 16u32.to_le_bytes().to_vec();
    other.extend_from_slice(&[0x45; 20]);
    assert_eq!(parse_frame(&other, LinkType::Null, &OUTER).unwrap().outer, None);
    // A version that contradicts the family is refused, as for Ethernet.
    let mut wrong = 30u32.to_le_bytes().to_vec();
    wrong.extend_from_slice(&[0x45; 40]);
    assert_eq!(parse_frame(&wrong, LinkType::Null, &OUTER), Err(ParseError::BadVersion));
    assert_eq!(parse_frame(&[2, 0], LinkType::Loop, &OUTER).unwrap_err().reason(), "truncated_loopback");
    assert_eq!(LinkType::from_pcap(0), Some(LinkType::Null));
    assert_eq!(LinkType::from_pcap(108), Some(LinkType::Loop));
}

#[test]
fn every_sample_round_trips() {
    for s in samples() {
        let p = parse_frame(&s.frame, s.link, &INNER).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        if let Some(o) = p.outer {
            assert!(!o.truncated, "{}", s.name);
            assert!(o.l3_offset < s.frame.len());
        }
        if p.encap.is_some() {
            // every sample tunnel carries IP
            assert!(p.inner.is_some(), "{}", s.name);
        }
        // the same frame parsed twice gives the same answer
        assert_eq!(parse_frame(&s.frame, s.link, &INNER), Ok(p));
    }
}

#[test]
fn geneve_with_options_each_protocol() {
    let (a, b) = (v4("10.0.0.1"), v4("10.0.0.2"));
    let options = [0x01, 0x02, 0x80, 0x01, 0xde, 0xad, 0xbe, 0xef]; // one 4-byte option
    for (protocol, inner) in [(0x6558, build::ip_frame(&inner_udp4())), (0x0800, inner_udp4()), (0x86dd, inner_tcp6())]
    {
        let f = build::geneve_frame(a, b, 40000, 0x123456, protocol, &options, &inner);
        let p = parse(&f, &INNER).unwrap();
        assert_eq!(p.outer.unwrap().tuple.ports, Some((40000, 6081)));
        assert_eq!(p.encap, Some(Encap::Geneve { vni: 0x123456 }));
        let i = p.inner.unwrap_or_else(|| panic!("protocol {protocol:#x}: {:?}", p.inner_miss));
        assert_eq!(p.inner_miss, None);
        let want = if protocol == 0x86dd { Some((3333, 4444)) } else { Some((1111, 2222)) };
        assert_eq!(i.tuple.ports, want);
        // Without --inner: recognised, not opened.
        let p = parse(&f, &OUTER).unwrap();
        assert_eq!((p.encap, p.inner, p.inner_miss), (Some(Encap::Geneve { vni: 0x123456 }), None, None));
    }
    // Another protocol (NSH, 0x894F): recognised, not IP.
    let f = build::geneve_frame(a, b, 1, 7, 0x894f, &[], &[0; 24]);
    let p = parse(&f, &INNER).unwrap();
    assert_eq!((p.encap, p.inner_miss), (Some(Encap::Geneve { vni: 7 }), Some(InnerMiss::NotIp)));
    // Options running past the datagram: not Geneve we can read.
    let f = build::geneve_frame(a, b, 1, 7, 0x0800, &[0; 252], &[]);
    let cut = &f[..f.len() - 100];
    assert_eq!(parse(cut, &INNER).unwrap().encap, None);
}

#[test]
fn vxlan_gpe_each_next_protocol() {
    let (a, b) = (v6("2001:db8::a"), v6("2001:db8::b"));
    for (next, inner) in [(1u8, inner_udp4()), (2, inner_tcp6()), (3, build::ip_frame(&inner_udp4()))] {
        let f = build::vxlan_gpe_frame(a, b, 5555, 99, next, &inner);
        let p = parse(&f, &INNER).unwrap();
        assert_eq!(p.encap, Some(Encap::VxlanGpe { vni: 99 }));
        assert!(p.inner.is_some(), "next {next}: {:?}", p.inner_miss);
    }
    let f = build::vxlan_gpe_frame(a, b, 5555, 99, 4, &[0; 16]);
    assert_eq!(parse(&f, &INNER).unwrap().inner_miss, Some(InnerMiss::NotIp));
    // Cut inside the inner IP header.
    let f = build::vxlan_gpe_frame(a, b, 5555, 99, 1, &inner_udp4());
    let p = parse(&f[..f.len() - 20], &INNER).unwrap();
    assert_eq!((p.encap, p.inner_miss), (Some(Encap::VxlanGpe { vni: 99 }), Some(InnerMiss::Malformed)));
}

#[test]
fn gtpu_with_and_without_extension_headers() {
    let (a, b) = (v4("10.1.0.1"), v4("10.2.0.1"));
    for ext in [false, true] {
        for inner in [inner_udp4(), inner_tcp6()] {
            let f = build::gtpu_frame(a, b, 0xdeadbeef, ext, &inner);
            let p = parse(&f, &INNER).unwrap();
            assert_eq!(p.encap, Some(Encap::GtpU { teid: 0xdeadbeef }));
            let i = p.inner.unwrap_or_else(|| panic!("ext {ext}: {:?}", p.inner_miss));
            assert!(i.tuple.ports.is_some());
            assert_eq!(i.l3_offset, 14 + 20 + 8 + if ext { 16 } else { 8 });
        }
    }
    // Echo request (type 1): GTP-U, no user packet.
    let mut f = build::gtpu_frame(a, b, 0, false, &[]);
    f[14 + 20 + 8 + 1] = 1;
    let p = parse(&f, &INNER).unwrap();
    assert_eq!((p.encap, p.inner_miss), (Some(Encap::GtpU { teid: 0 }), Some(InnerMiss::NotIp)));
    // A broken extension chain: GTP-U, malformed.
    let mut f = build::gtpu_frame(a, b, 5, true, &inner_udp4());
    f[14 + 20 + 8 + 12] = 0;
    let p = parse(&f, &INNER).unwrap();
    assert_eq!((p.encap, p.inner_miss), (Some(Encap::GtpU { teid: 5 }), Some(InnerMiss::Malformed)));
    // Version 2 (GTP-C) on the GTP-U port: not GTP-U.
    let mut f = build::gtpu_frame(a, b, 5, false, &inner_udp4());
    f[14 + 20 + 8] = 0x48;
    assert_eq!(parse(&f, &INNER).unwrap().encap, None);
}
