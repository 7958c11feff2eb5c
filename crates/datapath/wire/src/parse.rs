//! The frame walk: link layer -> VLAN tags -> IP -> L4 -> one level of
//! encapsulation.
//!
//! [`parse_frame`] models what a NIC's RSS engine sees:
//!
//! * `outer` is the first IP header (after Ethernet II + at most
//!   [`MAX_VLAN_DEPTH`] VLAN tags, a Linux cooked
//!   header, or nothing for raw IP). Non-IP ethertypes and 802.3 length
//!   fields give `Ok` with `outer: None`.
//! * L4 ports are read for TCP and UDP when the packet is not a fragment or
//!   is the offset-0 fragment. A truncated L4 header is an error for a
//!   whole packet, but only hides the ports of a first fragment (the
//!   tiny-fragment policy belongs to reassembly).
//! * Behind the outer header, VXLAN, Geneve (UDP 6081, options skipped),
//!   VXLAN-GPE (UDP 4790), GTP-U (UDP 2152, extension headers skipped),
//!   GRE (version 0, protocol IPv4 / IPv6 / transparent Ethernet bridging)
//!   and IP-in-IP are recognised (`encap`) and, with
//!   [`ParseOptions::inner`], the inner IP header is parsed (`inner`). A
//!   truncated or malformed tunnelled packet never fails the parse: `inner`
//!   is then `None` and `inner_miss` says why. Nothing behind a non-first fragment is
//!   looked at.
//! * PPPoE session frames have no outer IP header: the IP packet inside
//!   PPPoE is always parsed into `inner` and its errors are returned, like
//!   those of any first IP header.
//! * All lengths are bounded by the enclosing header: Ethernet padding
//!   after the IP total length, or after the PPPoE length, is ignored.
//!
//! Offsets in the result ([`L3Info::l3_offset`], [`L3Info::l4_offset`]) are
//! from the start of the frame, for inner headers too.

use std::net::IpAddr;

use crate::error::{Layer, ParseError};
use crate::ethernet::{
    walk_vlans, EthernetFrame, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_PPPOE_SESSION, ETHERTYPE_TEB,
};
use crate::geneve::GenevePacket;
use crate::gre::GrePacket;
use crate::gtpu::{GtpuPacket, MSG_GPDU};
use crate::ipv4::Ipv4Packet;
use crate::ipv6::{walk_ext_chain, Ipv6Packet};
use crate::limits::{GENEVE_PORT, GTPU_PORT, MAX_VLAN_DEPTH, VXLAN_GPE_PORT};
use crate::loopback::{Family, LoopbackHeader};
use crate::pppoe::{PppoeSession, PPP_IPV4, PPP_IPV6};
use crate::proto;
use crate::sll::{Sll2Header, SllHeader};
use crate::tcp::TcpPacket;
use crate::types::{Encap, FlowTuple, FragInfo, InnerMiss, L3Info, LinkType, ParseOptions, Parsed};
use crate::udp::UdpPacket;
use crate::vxlan::{GpeNext, VxlanGpePacket, VxlanPacket};

/// Parses one frame, see the [module docs](self).
///
/// Never panics and never allocates.
#[inline]
pub fn parse_frame(frame: &[u8], link: LinkType, opts: &ParseOptions) -> Result<Parsed, ParseError> {
    let mut parsed = Parsed {
        vlan_count: 0,
        vlan_ids: [0; MAX_VLAN_DEPTH],
        ethertype: 0,
        outer: None,
        encap: None,
        inner: None,
        inner_miss: None,
    };
    walk(frame, link, opts, &mut parsed)?;
    Ok(parsed)
}

/// [`parse_frame`] writing into a caller-owned [`Parsed`] (for hot loops:
/// it saves moving the ~200-byte result). `out` is fully overwritten on
/// success; on error its content is unspecified.
#[inline]
pub fn parse_frame_into(frame: &[u8], link: LinkType, opts: &ParseOptions, out: &mut Parsed) -> Result<(), ParseError> {
    out.vlan_count = 0;
    out.vlan_ids = [0; MAX_VLAN_DEPTH];
    out.ethertype = 0;
    out.outer = None;
    out.encap = None;
    out.inner = None;
    out.inner_miss = None;
    walk(frame, link, opts, out)
}

#[inline(never)]
fn walk(frame: &[u8], link: LinkType, opts: &ParseOptions, parsed: &mut Parsed) -> Result<(), ParseError> {
    let (ethertype, offset) = match link {
        LinkType::Ethernet => {
            let eth = EthernetFrame::new_checked(frame)?;
            (eth.ethertype(), EthernetFrame::HEADER_LEN)
        }
        LinkType::LinuxSll => {
            let sll = SllHeader::new_checked(frame)?;
            (sll.protocol(), SllHeader::HEADER_LEN)
        }
        LinkType::LinuxSll2 => {
            let sll = Sll2Header::new_checked(frame)?;
            (sll.protocol(), Sll2Header::HEADER_LEN)
        }
        LinkType::RawIp => return parse_outer(frame, 0, IpKind::Any, opts, parsed),
        LinkType::Null | LinkType::Loop => {
            let kind = match LoopbackHeader::new_checked(frame)?.family() {
                Family::Ipv4 => IpKind::V4,
                Family::Ipv6 => IpKind::V6,
                Family::Other(_) => return Ok(()),
            };
            return parse_outer(frame, LoopbackHeader::HEADER_LEN, kind, opts, parsed);
        }
    };
    let stack = walk_vlans(frame, ethertype, offset)?;
    parsed.vlan_count = stack.count;
    parsed.vlan_ids = stack.ids;
    parsed.ethertype = stack.ethertype;
    let offset = stack.payload_offset;
    match stack.ethertype {
        ETHERTYPE_IPV4 => parse_outer(frame, offset, IpKind::V4, opts, parsed),
        ETHERTYPE_IPV6 => parse_outer(frame, offset, IpKind::V6, opts, parsed),
        ETHERTYPE_PPPOE_SESSION => parse_pppoe(frame, offset, parsed),
        _ => Ok(()),
    }
}

/// Which IP version is expected at an offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IpKind {
    V4,
    V6,
    /// Decided by the version nibble (raw IP link type).
    Any,
}

/// One parsed IP header.
struct Ip {
    info: L3Info,
    /// Absolute offset where the IP packet ends in the buffer:
    /// min(IP length, bytes present).
    end: usize,
}

/// Where the packet inside a tunnel starts.
#[derive(Clone, Copy, Debug)]
enum InnerStart {
    Ip(usize, IpKind),
    Ethernet(usize),
    /// Recognised tunnel carrying something that is not IP.
    Nothing,
    /// Recognised tunnel whose own header is cut short or malformed.
    Broken,
}

#[inline(always)]
fn parse_outer(
    frame: &[u8],
    offset: usize,
    kind: IpKind,
    opts: &ParseOptions,
    parsed: &mut Parsed,
) -> Result<(), ParseError> {
    let ip = parse_ip(frame, offset, kind)?;
    parsed.outer = Some(ip.info);
    // Bound everything behind the outer header by its length (padding ignored).
    let buf = frame.get(..ip.end).unwrap_or(&[]);
    if let Some((encap, start, end)) = find_encap(buf, &ip.info, opts) {
        parsed.encap = Some(encap);
        if opts.inner {
            match parse_inner(buf.get(..end).unwrap_or(&[]), start) {
                Ok(inner) => parsed.inner = Some(inner),
                Err(miss) => parsed.inner_miss = Some(miss),
            }
        }
    }
    Ok(())
}

#[inline(always)]
fn parse_pppoe(frame: &[u8], offset: usize, parsed: &mut Parsed) -> Result<(), ParseError> {
    let pppoe = PppoeSession::new_checked(frame.get(offset..).unwrap_or(&[]))?;
    parsed.encap = Some(Encap::Pppoe { session: pppoe.session_id() });
    let kind = match pppoe.protocol() {
        PPP_IPV4 => IpKind::V4,
        PPP_IPV6 => IpKind::V6,
        _ => return Ok(()),
    };
    let end = offset.saturating_add(pppoe.end());
    let buf = frame.get(..end).unwrap_or(&[]);
    let ip_offset = offset.saturating_add(PppoeSession::HEADER_LEN);
    parsed.inner = Some(parse_ip(buf, ip_offset, kind)?.info);
    Ok(())
}

/// Recognises the encapsulation behind `outer`; returns it with where the
/// inner packet starts and the absolute offset where the tunnel payload ends.
#[inline(always)]
fn find_encap(buf: &[u8], outer: &L3Info, opts: &ParseOptions) -> Option<(Encap, InnerStart, usize)> {
    let l4 = outer.l4_offset?;
    let end = buf.len();
    let segment = buf.get(l4..)?;
    match outer.tuple.proto {
        proto::IPIP => Some((Encap::IpInIp, InnerStart::Ip(l4, IpKind::V4), end)),
        proto::IPV6 => Some((Encap::IpInIp, InnerStart::Ip(l4, IpKind::V6), end)),
        proto::GRE => {
            let gre = GrePacket::new_checked(segment).ok()?;
            let payload = l4.saturating_add(gre.header_len());
            let start = match gre.protocol() {
                ETHERTYPE_IPV4 => InnerStart::Ip(payload, IpKind::V4),
                ETHERTYPE_IPV6 => InnerStart::Ip(payload, IpKind::V6),
                ETHERTYPE_TEB => InnerStart::Ethernet(payload),
                _ => InnerStart::Nothing,
            };
            Some((Encap::Gre { key: gre.key() }, start, end))
        }
        proto::UDP => {
            let (_, dport) = outer.tuple.ports?;
            let is_vxlan = opts.vxlan_port != 0 && dport == opts.vxlan_port;
            if !is_vxlan && !matches!(dport, GENEVE_PORT | VXLAN_GPE_PORT | GTPU_PORT) {
                return None;
            }
            let udp = UdpPacket::new_checked(segment).ok()?;
            let udp_len = usize::from(udp.len_field());
            let udp_end = if udp_len >= UdpPacket::HEADER_LEN { l4.saturating_add(udp_len).min(end) } else { end };
            let at = l4.saturating_add(UdpPacket::HEADER_LEN);
            let payload = buf.get(at..udp_end)?;
            if is_vxlan {
                let vxlan = VxlanPacket::new_checked(payload).ok()?;
                if !vxlan.vni_valid() {
                    return None;
                }
                let inner = at.saturating_add(VxlanPacket::HEADER_LEN);
                return Some((Encap::Vxlan { vni: vxlan.vni() }, InnerStart::Ethernet(inner), udp_end));
            }
            Some(match dport {
                GENEVE_PORT => {
                    let g = GenevePacket::new_checked(payload).ok()?;
                    let inner = at.saturating_add(g.header_len());
                    let start = match g.protocol() {
                        ETHERTYPE_IPV4 => InnerStart::Ip(inner, IpKind::V4),
                        ETHERTYPE_IPV6 => InnerStart::Ip(inner, IpKind::V6),
                        ETHERTYPE_TEB => InnerStart::Ethernet(inner),
                        _ => InnerStart::Nothing,
                    };
                    (Encap::Geneve { vni: g.vni() }, start, udp_end)
                }
                VXLAN_GPE_PORT => {
                    let g = VxlanGpePacket::new_checked(payload).ok()?;
                    let inner = at.saturating_add(VxlanGpePacket::HEADER_LEN);
                    let start = match g.next() {
                        GpeNext::Ipv4 => InnerStart::Ip(inner, IpKind::V4),
                        GpeNext::Ipv6 => InnerStart::Ip(inner, IpKind::V6),
                        GpeNext::Ethernet => InnerStart::Ethernet(inner),
                        GpeNext::Other(_) => InnerStart::Nothing,
                    };
                    (Encap::VxlanGpe { vni: g.vni() }, start, udp_end)
                }
                _ => {
                    // GTP-U: the header's fixed part names the tunnel even
                    // when its extension chain is broken.
                    let teid = payload.get(4..8).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(u32::from_be_bytes);
                    match GtpuPacket::new_checked(payload) {
                        Ok(g) if g.message_type() == MSG_GPDU => (
                            Encap::GtpU { teid: g.teid() },
                            InnerStart::Ip(at.saturating_add(g.header_len()), IpKind::Any),
                            udp_end,
                        ),
                        Ok(g) => (Encap::GtpU { teid: g.teid() }, InnerStart::Nothing, udp_end),
                        Err(ParseError::BadVersion) => return None,
                        Err(_) => (Encap::GtpU { teid: teid? }, InnerStart::Broken, udp_end),
                    }
                }
            })
        }
        _ => None,
    }
}

/// Parses the tunnelled packet; says why when it cannot.
#[inline(always)]
fn parse_inner(buf: &[u8], start: InnerStart) -> Result<L3Info, InnerMiss> {
    let (offset, kind) = match start {
        InnerStart::Ip(offset, kind) => (offset, kind),
        InnerStart::Ethernet(offset) => {
            let eth = EthernetFrame::new_checked(buf.get(offset..).unwrap_or(&[])).map_err(|_| InnerMiss::Malformed)?;
            let after = offset.saturating_add(EthernetFrame::HEADER_LEN);
            let stack = walk_vlans(buf, eth.ethertype(), after).map_err(|_| InnerMiss::Malformed)?;
            let kind = match stack.ethertype {
                ETHERTYPE_IPV4 => IpKind::V4,
                ETHERTYPE_IPV6 => IpKind::V6,
                _ => return Err(InnerMiss::NotIp),
            };
            (stack.payload_offset, kind)
        }
        InnerStart::Nothing => return Err(InnerMiss::NotIp),
        InnerStart::Broken => return Err(InnerMiss::Malformed),
    };
    parse_ip(buf, offset, kind).map(|ip| ip.info).map_err(|_| InnerMiss::Malformed)
}

/// Parses the IP header at `offset` of `buf` (which ends where the enclosing
/// packet ends) and the L4 ports behind it.
#[inline(always)]
fn parse_ip(buf: &[u8], offset: usize, kind: IpKind) -> Result<Ip, ParseError> {
    let data = buf.get(offset..).unwrap_or(&[]);
    let kind = match kind {
        IpKind::Any => match data.first().map(|b| b >> 4) {
            None => return Err(ParseError::Truncated { layer: Layer::Ipv4 }),
            Some(4) => IpKind::V4,
            Some(6) => IpKind::V6,
            Some(_) => return Err(ParseError::BadVersion),
        },
        k => k,
    };
    if kind == IpKind::V6 {
        parse_ipv6(data, offset)
    } else {
        parse_ipv4(data, offset)
    }
}

#[inline(always)]
fn parse_ipv4(data: &[u8], offset: usize) -> Result<Ip, ParseError> {
    let p = Ipv4Packet::new_checked(data)?;
    let frag = p.is_fragment().then(|| FragInfo {
        id: u32::from(p.ident()),
        offset: p.frag_offset(),
        more: p.more_fragments(),
    });
    let header_len = p.header_len();
    let end = p.end();
    let l4 = (p.frag_offset() == 0).then_some(header_len);
    let ports = match l4 {
        Some(l4) => l4_ports(data.get(l4..end), p.protocol(), frag.is_some())?,
        None => None,
    };
    Ok(Ip {
        info: L3Info {
            tuple: FlowTuple {
                src: IpAddr::V4(p.src_addr()),
                dst: IpAddr::V4(p.dst_addr()),
                proto: p.protocol(),
                ports,
            },
            frag,
            atomic_frag: false,
            l3_offset: offset,
            l4_offset: l4.map(|l4| offset.saturating_add(l4)),
            ip_header_len: header_len,
            ip_total_len: usize::from(p.total_len()),
            truncated: p.is_truncated(),
            ecn: p.ecn(),
            ttl: p.ttl(),
            dscp: p.dscp(),
            dont_fragment: p.dont_fragment(),
        },
        end: offset.saturating_add(end),
    })
}

#[inline(always)]
fn parse_ipv6(data: &[u8], offset: usize) -> Result<Ip, ParseError> {
    let p = Ipv6Packet::new_checked(data)?;
    let chain = walk_ext_chain(&p)?;
    let (frag, atomic_frag) = match chain.fragment {
        Some(f) if f.atomic => (None, true),
        Some(f) => (Some(FragInfo { id: f.id, offset: f.offset, more: f.more }), false),
        None => (None, false),
    };
    let end = p.end();
    let ports = match chain.upper_offset {
        Some(l4) => l4_ports(data.get(l4..end), chain.next_header, frag.is_some())?,
        None => None,
    };
    Ok(Ip {
        info: L3Info {
            tuple: FlowTuple {
                src: IpAddr::V6(p.src_addr()),
                dst: IpAddr::V6(p.dst_addr()),
                proto: chain.next_header,
                ports,
            },
            frag,
            atomic_frag,
            l3_offset: offset,
            l4_offset: chain.upper_offset.map(|l4| offset.saturating_add(l4)),
            ip_header_len: chain.header_len,
            ip_total_len: p.total_len(),
            truncated: p.is_truncated(),
            ecn: p.ecn(),
            ttl: p.hop_limit(),
            dscp: p.dscp(),
            dont_fragment: false,
        },
        end: offset.saturating_add(end),
    })
}

/// Ports of a TCP / UDP header in `segment` (None for other protocols). In a
/// first fragment a header cut short only hides the ports.
#[inline(always)]
fn l4_ports(segment: Option<&[u8]>, proto: u8, in_fragment: bool) -> Result<Option<(u16, u16)>, ParseError> {
    let segment = segment.unwrap_or(&[]);
    let result = match proto {
        proto::UDP => UdpPacket::new_checked(segment).map(|u| (u.src_port(), u.dst_port())),
        proto::TCP => TcpPacket::new_checked(segment).map(|t| (t.src_port(), t.dst_port())),
        _ => return Ok(None),
    };
    match result {
        Ok(ports) => Ok(Some(ports)),
        Err(ParseError::Truncated { .. }) if in_fragment => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(s: &str) -> IpAddr {
        IpAddr::V4(s.parse::<Ipv4Addr>().unwrap())
    }

    fn v6(s: &str) -> IpAddr {
        IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
    }

    const OPTS: ParseOptions = ParseOptions::new();

    #[test]
    fn udp4() {
        let f = build::udp_frame(v4("10.0.0.1"), v4("10.0.0.2"), 1234, 53, b"hello");
        let p = parse_frame(&f, LinkType::Ethernet, &OPTS).unwrap();
        assert_eq!(p.ethertype, ETHERTYPE_IPV4);
        assert_eq!(p.vlan_count, 0);
        let o = p.outer.unwrap();
        assert_eq!(o.tuple.src, v4("10.0.0.1"));
        assert_eq!(o.tuple.dst, v4("10.0.0.2"));
        assert_eq!(o.tuple.proto, proto::UDP);
        assert_eq!(o.tuple.ports, Some((1234, 53)));
        assert_eq!(o.l3_offset, 14);
        assert_eq!(o.l4_offset, Some(34));
        assert_eq!(o.ip_header_len, 20);
        assert_eq!(o.ip_total_len, 20 + 8 + 5);
        assert!(!o.truncated);
        assert_eq!(o.frag, None);
        assert_eq!(p.encap, None);
        assert_eq!(p.innermost(), Some(&o));
    }

    #[test]
    fn tcp6() {
        let f = build::tcp_frame(v6("2001:db8::1"), v6("2001:db8::2"), 443, 50000, 7, 0x12, b"");
        let p = parse_frame(&f, LinkType::Ethernet, &OPTS).unwrap();
        let o = p.outer.unwrap();
        assert_eq!(o.tuple.proto, proto::TCP);
        assert_eq!(o.tuple.ports, Some((443, 50000)));
        assert_eq!(o.l4_offset, Some(54));
        assert_eq!(o.ip_header_len, 40);
        assert_eq!(o.ttl, 64);
    }

    #[test]
    fn raw_ip_both_versions() {
        let ip4 = build::udp_packet(v4("1.2.3.4"), v4("5.6.7.8"), 1, 2, b"x");
        let p = parse_frame(&ip4, LinkType::RawIp, &OPTS).unwrap();
        assert_eq!(p.ethertype, 0);
        assert_eq!(p.outer.unwrap().l3_offset, 0);
        let ip6 = build::udp_packet(v6("::1"), v6("::2"), 1, 2, b"x");
        let p = parse_frame(&ip6, LinkType::RawIp, &OPTS).unwrap();
        assert!(p.outer.unwrap().tuple.is_ipv6());
        assert_eq!(parse_frame(&[], LinkType::RawIp, &OPTS), Err(ParseError::Truncated { layer: Layer::Ipv4 }));
        assert_eq!(parse_frame(&[0x50; 40], LinkType::RawIp, &OPTS), Err(ParseError::BadVersion));
    }

    #[test]
    fn version_must_match_ethertype() {
        let mut f = build::udp_frame(v4("1.2.3.4"), v4("5.6.7.8"), 1, 2, b"x");
        f[14] = 0x65;
        assert_eq!(parse_frame(&f, LinkType::Ethernet, &OPTS), Err(ParseError::BadVersion));
    }

    #[test]
    fn non_ip_and_llc() {
        let mut f = build::udp_frame(v4("1.2.3.4"), v4("5.6.7.8"), 1, 2, b"x");
        f[12] = 0x08;
        f[13] = 0x06;
        let p = parse_frame(&f, LinkType::Ethernet, &OPTS).unwrap();
        assert_eq!((p.ethertype, p.outer, p.encap), (0x0806, None, None));
        f[12] = 0x00;
        f[13] = 0x26;
        let p = parse_frame(&f, LinkType::Ethernet, &OPTS).unwrap();
        assert_eq!((p.ethertype, p.outer), (0x26, None));
    }

    #[test]
    fn l4_ports_policy() {
        assert_eq!(l4_ports(Some(&[0; 7]), proto::UDP, true), Ok(None));
        assert_eq!(l4_ports(Some(&[0; 7]), proto::UDP, false), Err(ParseError::Truncated { layer: Layer::Udp }));
        assert_eq!(l4_ports(None, proto::TCP, true), Ok(None));
        let mut tcp = [0u8; 20];
        tcp[12] = 0x30;
        assert_eq!(l4_ports(Some(&tcp), proto::TCP, true), Err(ParseError::BadHeaderLen { layer: Layer::Tcp }));
        assert_eq!(l4_ports(Some(&[]), proto::ICMP, false), Ok(None));
    }
}
