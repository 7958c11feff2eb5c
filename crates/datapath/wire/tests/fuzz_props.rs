//! Property tests: the parser never panics on random or mutated input, and
//! builder -> parser round trips hold for random flows.

mod common;

use common::*;
use flowsteer_wire::build::{self, FrameBuilder, VlanTag};
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn link_type() -> impl Strategy<Value = LinkType> {
    prop_oneof![
        Just(LinkType::Ethernet),
        Just(LinkType::RawIp),
        Just(LinkType::LinuxSll),
        Just(LinkType::LinuxSll2),
        Just(LinkType::Null),
        Just(LinkType::Loop),
    ]
}

fn options() -> impl Strategy<Value = ParseOptions> {
    (any::<bool>(), prop_oneof![Just(4789u16), any::<u16>()])
        .prop_map(|(inner, vxlan_port)| ParseOptions { inner, vxlan_port })
}

fn check(frame: &[u8], link: LinkType, opts: &ParseOptions) {
    if let Ok(p) = parse_frame(frame, link, opts) {
        // whatever was found lies inside the frame
        for l3 in [p.outer, p.inner].into_iter().flatten() {
            assert!(l3.l3_offset < frame.len());
            if let Some(l4) = l3.l4_offset {
                assert!(l4 <= frame.len());
                assert!(l4 >= l3.l3_offset + 20);
            }
            if l3.tuple.ports.is_some() {
                assert!(l3.l4_offset.is_some());
            }
        }
        assert!(usize::from(p.vlan_count) <= flowsteer_wire::MAX_VLAN_DEPTH);
        if p.inner.is_some() {
            assert!(p.encap.is_some());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2000),
        link in link_type(),
        inner in any::<bool>(),
    ) {
        let opts = ParseOptions { inner, ..ParseOptions::default() };
        check(&bytes, link, &opts);
    }

    /// Random bytes behind a plausible header, so the walk gets deep.
    #[test]
    fn random_bytes_behind_valid_prefix_never_panic(
        which in any::<prop::sample::Index>(),
        keep in any::<prop::sample::Index>(),
        tail in proptest::collection::vec(any::<u8>(), 0..600),
        opts in options(),
    ) {
        let samples = samples();
        let s = which.get(&samples);
        let mut frame = s.frame[..keep.index(s.frame.len() + 1)].to_vec();
        frame.extend_from_slice(&tail);
        check(&frame, s.link, &opts);
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        which in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        opts in options(),
        link in prop_oneof![Just(None), link_type().prop_map(Some)],
    ) {
        let samples = samples();
        let s = which.get(&samples);
        let mut frame = s.frame.clone();
        for (at, v) in &flips {
            let i = at.index(frame.len());
            frame[i] = *v;
        }
        let link = link.unwrap_or(s.link);
        check(&frame, link, &opts);
        check(&frame[..cut.index(frame.len() + 1)], link, &opts);
    }

    #[test]
    fn builder_round_trip(
        v6 in any::<bool>(),
        src in any::<[u8; 16]>(),
        dst in any::<[u8; 16]>(),
        sport in any::<u16>(),
        dport in any::<u16>().prop_filter("not vxlan", |p| *p != 4789),
        tcp in any::<bool>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        vlans in proptest::collection::vec(0u16..4096, 0..=2),
    ) {
        let (src, dst): (IpAddr, IpAddr) = if v6 {
            (Ipv6Addr::from(src).into(), Ipv6Addr::from(dst).into())
        } else {
            let s4: [u8; 4] = src[..4].try_into().unwrap();
            let d4: [u8; 4] = dst[..4].try_into().unwrap();
            (Ipv4Addr::from(s4).into(), Ipv4Addr::from(d4).into())
        };
        let tags: Vec<VlanTag> = vlans.iter().map(|&v| VlanTag::dot1q(v)).collect();
        let b = if tcp {
            FrameBuilder::tcp(src, dst, sport, dport, 1, 0x18, &payload)
        } else {
            FrameBuilder::udp(src, dst, sport, dport, &payload)
        };
        let frame = FrameBuilder { vlans: &tags, ..b }.build();
        let p = parse_frame(&frame, LinkType::Ethernet, &INNER).unwrap();
        prop_assert_eq!(p.vlans(), &vlans[..]);
        let o = p.outer.unwrap();
        prop_assert_eq!(o.tuple.src, src);
        prop_assert_eq!(o.tuple.dst, dst);
        prop_assert_eq!(o.tuple.proto, if tcp { 6 } else { 17 });
        prop_assert_eq!(o.tuple.ports, Some((sport, dport)));
        prop_assert!(!o.truncated);
        prop_assert_eq!(o.ip_total_len + o.l3_offset, frame.len());

        // the same packet on every other link type
        let plain = FrameBuilder { vlans: &[], ..b }.build();
        for link in [LinkType::RawIp, LinkType::LinuxSll, LinkType::LinuxSll2] {
            let g = build::convert_link(&plain, link);
            let q = parse_frame(&g, link, &OUTER).unwrap();
            prop_assert_eq!(q.outer.unwrap().tuple, o.tuple);
        }
    }

    #[test]
    fn tunnel_round_trip(
        sport in any::<u16>(),
        dport in any::<u16>(),
        vni in 0u32..(1 << 24),
        key in proptest::option::of(any::<u32>()),
        kind in 0u8..5,
        inner_v6 in any::<bool>(),
        outer_v6 in any::<bool>(),
    ) {
        let inner_ip = if inner_v6 {
            build::udp_packet(v6("fd00::1"), v6("fd00::2"), sport, dport, b"in")
        } else {
            build::udp_packet(v4("192.168.0.1"), v4("192.168.0.2"), sport, dport, b"in")
        };
        let (os, od) = if outer_v6 {
            (v6("2001:db8::1"), v6("2001:db8::2"))
        } else {
            (v4("10.0.0.1"), v4("10.0.0.2"))
        };
        let frame = match kind {
            0 => build::vxlan_frame(os, od, 1, vni, &build::ip_frame(&inner_ip)),
            1 => build::gre_frame(os, od, key, &inner_ip),
            2 => build::gre_teb_frame(os, od, key, &build::ip_frame(&inner_ip)),
            3 => build::ipip_frame(os, od, &inner_ip),
            _ => build::pppoe_frame(7, &inner_ip),
        };
        let p = parse_frame(&frame, LinkType::Ethernet, &INNER).unwrap();
        prop_assert!(p.encap.is_some());
        let i = p.inner.unwrap();
        prop_assert_eq!(i.tuple.ports, Some((sport, dport)));
        prop_assert_eq!(i.tuple.is_ipv6(), inner_v6);
        prop_assert_eq!(i.l3_offset + i.ip_total_len, frame.len());
    }
}
