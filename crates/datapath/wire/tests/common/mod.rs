//! Sample frames shared by the integration tests.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use flowsteer_wire::build::{self, FrameBuilder, Ipv6Ext, VlanTag};
use flowsteer_wire::{LinkType, ParseOptions};

pub fn v4(s: &str) -> IpAddr {
    IpAddr::V4(s.parse::<Ipv4Addr>().unwrap())
}

pub fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
}

pub const INNER: ParseOptions = ParseOptions::new().with_inner(true);
pub const OUTER: ParseOptions = ParseOptions::new();

/// A valid frame and the shortest prefix that parses Ok (the outer headers,
/// or for PPPoE the headers up to the inner L4).
pub struct Sample {
    pub name: &'static str,
    pub frame: Vec<u8>,
    pub link: LinkType,
    pub min_ok: usize,
}

fn s(name: &'static str, frame: Vec<u8>, min_ok: usize) -> Sample {
    Sample { name, frame, link: LinkType::Ethernet, min_ok }
}

pub fn inner_udp4() -> Vec<u8> {
    build::udp_packet(v4("192.168.1.1"), v4("192.168.1.2"), 1111, 2222, b"inner payload")
}

pub fn inner_tcp6() -> Vec<u8> {
    build::tcp_packet(v6("fd00::1"), v6("fd00::2"), 3333, 4444, 1, 0x02, b"inner6")
}

/// Every kind of frame the parser knows.
pub fn samples() -> Vec<Sample> {
    let a = v4("10.0.0.1");
    let b = v4("10.0.0.2");
    let a6 = v6("2001:db8::1");
    let peer6 = v6("2001:db8::2");
    let payload = b"0123456789abcdef";
    let mut out = vec![
        s("udp4", build::udp_frame(a, b, 1000, 53, payload), 42),
        s("tcp4", build::tcp_frame(a, b, 1000, 80, 5, 0x18, payload), 54),
        s("udp6", build::udp_frame(a6, peer6, 1000, 53, payload), 62),
        s("tcp6", build::tcp_frame(a6, peer6, 1000, 80, 5, 0x18, payload), 74),
        s("icmp4", build::ip_frame(&build::ip_packet(a, b, 1, &[8, 0, 0, 0, 0, 1, 0, 1])), 34),
        s("vlan_udp4", build::with_vlans(&build::udp_frame(a, b, 1, 2, payload), &[VlanTag::dot1q(7)]), 46),
        s(
            "qinq_tcp6",
            build::with_vlans(
                &build::tcp_frame(a6, peer6, 1, 2, 0, 0x10, payload),
                &[VlanTag::dot1ad(100), VlanTag::dot1q(200)],
            ),
            82,
        ),
        s(
            "ipv4_options",
            FrameBuilder {
                ipv4_options: &[0x94, 0x04, 0x00, 0x00, 0x01, 0x01, 0x01, 0x00],
                ..FrameBuilder::udp(a, b, 7, 8, payload)
            }
            .build(),
            14 + 28 + 8,
        ),
        s(
            "ipv6_ext_chain",
            FrameBuilder {
                ipv6_ext: &[
                    Ipv6Ext::HopByHop { len: 8 },
                    Ipv6Ext::Routing { len: 24 },
                    Ipv6Ext::DestOpts { len: 16 },
                    Ipv6Ext::Fragment { offset: 0, more: true, id: 0xabcdef },
                ],
                ..FrameBuilder::udp(a6, peer6, 7, 8, payload)
            }
            .build(),
            // first fragment: the L4 header may be missing
            14 + 40 + 8 + 24 + 16 + 8,
        ),
        s(
            "ipv6_atomic_frag",
            FrameBuilder {
                ipv6_ext: &[Ipv6Ext::Fragment { offset: 0, more: false, id: 9 }],
                ..FrameBuilder::tcp(a6, peer6, 7, 8, 0, 0x02, payload)
            }
            .build(),
            14 + 48 + 20,
        ),
        s(
            "ipv6_ah_esp",
            FrameBuilder { ipv6_ext: &[Ipv6Ext::Auth { len: 16 }], ..FrameBuilder::raw(a6, peer6, 50, payload) }
                .build(),
            14 + 40 + 16,
        ),
        s(
            "vxlan",
            build::vxlan_frame(
                a,
                b,
                49152,
                0x123456,
                &build::with_vlans(&build::ip_frame(&inner_udp4()), &[VlanTag::dot1q(42)]),
            ),
            42,
        ),
        s("vxlan6", build::vxlan_frame(a6, peer6, 49153, 7, &build::ip_frame(&inner_tcp6())), 62),
        s("gre", build::gre_frame(a, b, None, &inner_udp4()), 34),
        s("gre_key6", build::gre_frame(a6, peer6, Some(0xdeadbeef), &inner_tcp6()), 54),
        s("gre_teb", build::gre_teb_frame(a, b, Some(5), &build::ip_frame(&inner_tcp6())), 34),
        s("ipip", build::ipip_frame(a, b, &inner_udp4()), 34),
        s("6in4", build::ipip_frame(a, b, &inner_tcp6()), 34),
        s("6in6", build::ipip_frame(a6, peer6, &inner_tcp6()), 54),
        s("pppoe4", build::pppoe_frame(0x1234, &inner_udp4()), 14 + 8 + 20 + 8),
        s("pppoe6", build::pppoe_frame(0x4321, &inner_tcp6()), 14 + 8 + 40 + 20),
        s(
            "arp",
            {
                let mut f = build::udp_frame(a, b, 1, 2, b"");
                f[12] = 0x08;
                f[13] = 0x06;
                f
            },
            14,
        ),
    ];
    let frags4 = build::ipv4_fragments(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        5000,
        6000,
        0x4242,
        &[7u8; 100],
        40,
    );
    out.push(s("frag4_first", frags4[0].clone(), 34));
    out.push(s("frag4_middle", frags4[1].clone(), 34));
    out.push(s("frag4_last", frags4.last().unwrap().clone(), 34));
    let frags6 = build::ipv6_fragments(
        "2001:db8::1".parse().unwrap(),
        "2001:db8::2".parse().unwrap(),
        5000,
        6000,
        0x01020304,
        &[7u8; 100],
        40,
    );
    out.push(s("frag6_first", frags6[0].clone(), 62));
    out.push(s("frag6_last", frags6.last().unwrap().clone(), 62));

    // the same packets on the other link types
    let udp4 = build::udp_frame(a, b, 1000, 53, payload);
    let tcp6 = build::with_vlans(&build::tcp_frame(a6, peer6, 1, 2, 0, 0x10, payload), &[VlanTag::dot1q(3)]);
    for (link, name4, name6, hdr) in [
        (LinkType::RawIp, "raw_udp4", "raw_tcp6", 0usize),
        (LinkType::LinuxSll, "sll_udp4", "sll_vlan_tcp6", 16),
        (LinkType::LinuxSll2, "sll2_udp4", "sll2_vlan_tcp6", 20),
    ] {
        out.push(Sample { name: name4, frame: build::convert_link(&udp4, link), link, min_ok: hdr + 28 });
        let vlan = if link == LinkType::RawIp { 0 } else { 4 };
        out.push(Sample { name: name6, frame: build::convert_link(&tcp6, link), link, min_ok: hdr + vlan + 60 });
    }
    out
}
