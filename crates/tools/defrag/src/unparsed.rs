//! What can still be said of a frame the parser refused: whether it may
//! hold an IP fragment. Such a frame is never written, even with
//! `--keep-malformed`: a fragment defrag cannot check must not reach the
//! output any more than one the reassembler rejected.
//!
//! The walk is lenient where the parser is strict (no VLAN depth limit, no
//! length checks) and answers "may be a fragment" whenever the bytes that
//! would say are missing: a frame that announces an IP header (by
//! ethertype, PPP protocol or link type) but ends before its fragment
//! fields, or an IPv6 extension chain cut before its end.

use flowsteer_wire::ethernet::{is_vlan_tpid, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_PPPOE_SESSION};
use flowsteer_wire::ipv4::{FLAG_MF, FRAG_OFFSET_MASK};
use flowsteer_wire::ipv6::{is_ext_header, NH_AUTH, NH_FRAGMENT};
use flowsteer_wire::pppoe::{PPP_IPV4, PPP_IPV6};
use flowsteer_wire::LinkType;

/// True when `frame` holds, or cannot be shown not to hold, an IP fragment.
/// False for a frame that announces no IP header, ends before it, or whose
/// IP header shows it is not a fragment.
pub(crate) fn may_hold_fragment(frame: &[u8], link: LinkType) -> bool {
    match ip_start(frame, link) {
        Some(at) => ip_may_be_fragment(frame.get(at..).unwrap_or(&[])),
        None => false,
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([*s.first()?, *s.get(1)?]))
}

/// Where the IP header the frame announces starts (possibly past its end);
/// None when it announces none or ends inside the link-layer headers.
fn ip_start(frame: &[u8], link: LinkType) -> Option<usize> {
    let (mut ethertype, mut at) = match link {
        LinkType::RawIp => return Some(0),
        LinkType::Null | LinkType::Loop => {
            let header = flowsteer_wire::loopback::LoopbackHeader::new_checked(frame).ok()?;
            return match header.family() {
                flowsteer_wire::loopback::Family::Other(_) => None,
                _ => Some(flowsteer_wire::loopback::LoopbackHeader::HEADER_LEN),
            };
        }
        LinkType::Ethernet => (be16(frame, 12)?, 14usize),
        LinkType::LinuxSll => (be16(frame, 14)?, 16),
        LinkType::LinuxSll2 => (be16(frame, 0)?, 20),
    };
    while is_vlan_tpid(ethertype) {
        ethertype = be16(frame, at.checked_add(2)?)?;
        at = at.checked_add(4)?;
    }
    match ethertype {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Some(at),
        // PPPoE session header (6 bytes) and the PPP protocol (2).
        ETHERTYPE_PPPOE_SESSION => match be16(frame, at.checked_add(6)?)? {
            PPP_IPV4 | PPP_IPV6 => at.checked_add(8),
            _ => None,
        },
        _ => None,
    }
}

/// `ip`: the bytes from the IP header on. The version nibble decides which
/// header it is; no bytes at all hold no fragment.
fn ip_may_be_fragment(ip: &[u8]) -> bool {
    let Some(&first) = ip.first() else { return false };
    match first >> 4 {
        4 => be16(ip, 6).is_none_or(|f| f & (FLAG_MF | FRAG_OFFSET_MASK) != 0),
        6 => {
            let Some(&first_next) = ip.get(6) else { return true };
            let mut next = first_next;
            let mut at = 40usize;
            loop {
                if next == NH_FRAGMENT {
                    return true;
                }
                if !is_ext_header(next) {
                    return false;
                }
                let (Some(&n), Some(&len)) = (ip.get(at), ip.get(at.saturating_add(1))) else { return true };
                let len = usize::from(len);
                // Each header is at least 8 bytes: the walk ends at the buffer's end.
                at = at.saturating_add(if next == NH_AUTH { (len + 2) * 4 } else { (len + 1) * 8 });
                next = n;
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_wire::build::{ipv4_fragments, ipv6_fragments, pppoe_frame, udp_frame, with_vlans, VlanTag};
    use std::net::{Ipv4Addr, Ipv6Addr};

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn fragments_and_whole_packets() {
        let eth = LinkType::Ethernet;
        let whole4 = udp_frame(A.into(), B.into(), 1, 2, b"whole");
        let whole6 = udp_frame(v6("fd00::1").into(), v6("fd00::2").into(), 1, 2, b"whole");
        assert!(!may_hold_fragment(&whole4, eth));
        assert!(!may_hold_fragment(&whole6, eth));
        for f in ipv4_fragments(A, B, 1, 2, 7, &[1; 3000], 1000) {
            assert!(may_hold_fragment(&f, eth));
            assert!(may_hold_fragment(&f[14..], LinkType::RawIp));
            let tags = [VlanTag { tpid: 0x88a8, vid: 1, pcp: 0 }, VlanTag { tpid: 0x8100, vid: 2, pcp: 0 }];
            assert!(may_hold_fragment(&with_vlans(&f, &tags), eth));
            assert!(may_hold_fragment(&pppoe_frame(3, &f[14..]), eth));
        }
        for f in ipv6_fragments(v6("fd00::1"), v6("fd00::2"), 1, 2, 7, &[1; 3000], 1000) {
            assert!(may_hold_fragment(&f, eth));
        }
        assert!(!may_hold_fragment(&pppoe_frame(3, &whole4[14..]), eth));
    }

    #[test]
    fn cut_before_the_fragment_fields_counts_as_a_fragment() {
        let eth = LinkType::Ethernet;
        let whole4 = udp_frame(A.into(), B.into(), 1, 2, b"whole");
        // Ethernet header only, or cut inside it: no IP bytes, no fragment.
        assert!(!may_hold_fragment(&whole4[..14], eth));
        assert!(!may_hold_fragment(&whole4[..10], eth));
        // 1 to 7 bytes of IPv4: the flags are missing.
        for cut in 15..22 {
            assert!(may_hold_fragment(&whole4[..cut], eth), "{cut}");
        }
        assert!(!may_hold_fragment(&whole4[..22], eth));
        // IPv6 with a Hop-by-Hop header cut before its length byte.
        let mut v6 = udp_frame(v6("fd00::1").into(), v6("fd00::2").into(), 1, 2, b"x");
        v6[14 + 6] = 0; // next header: Hop-by-Hop
        assert!(may_hold_fragment(&v6[..14 + 40], eth));
        assert!(!may_hold_fragment(&[0u8; 3], LinkType::RawIp));
        assert!(!may_hold_fragment(&[0x50u8; 30], LinkType::RawIp), "version 5 is no IP header");
    }
}
