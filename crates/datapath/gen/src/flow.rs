//! Flow identities: the tuple and kind of flow `i`, a pure function of the
//! seed, the shares and `i`, so nothing per flow has to be stored to know it.
//!
//! Addresses: IPv4 flows come from 10.0.0.0/8 to 192.168.0.0/16, IPv6 flows
//! from fd00::/8 to 2001:db8::/32. The low 24 bits of the source address are
//! a seeded bijection of the flow id, so no two flows share a tuple (nor a
//! 2-tuple). Source ports are random in 1024..=65535; destination ports come
//! from a short list of well-known services (never the VXLAN port).
//!
//! The only PRNG is SplitMix64 from `flowsteer-prim` (with its finaliser
//! `mix64`), whose known-answer tests pin the stream, so the generated
//! traffic cannot change unnoticed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use flowsteer_prim::{mix64, SplitMix64};
use flowsteer_rss::{QueueId, RssConfig};
use flowsteer_wire::{proto, FlowTuple};

use crate::config::GenConfig;

/// A uniform draw in `[0, 1)` from the top 53 bits of `h`.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

const MASK24: u32 = 0x00ff_ffff;

/// Destination ports of UDP flows (DNS, NTP, QUIC, IKE, RADIUS, NAT-T, SIP, other).
const UDP_PORTS: [u16; 8] = [53, 123, 443, 500, 1812, 4500, 5060, 9000];
/// Destination ports of TCP flows.
const TCP_PORTS: [u16; 8] = [80, 443, 22, 25, 3306, 5432, 6379, 8080];

/// Flow kind bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kind(u8);

impl Kind {
    const V6: u8 = 1;
    const TCP: u8 = 2;
    const FRAG: u8 = 4;

    pub(crate) fn new(v6: bool, tcp: bool, frag: bool) -> Kind {
        Kind((u8::from(v6) * Self::V6) | (u8::from(tcp) * Self::TCP) | (u8::from(frag && !tcp) * Self::FRAG))
    }

    #[inline]
    pub(crate) fn is_v6(self) -> bool {
        self.0 & Self::V6 != 0
    }

    #[inline]
    pub(crate) fn is_tcp(self) -> bool {
        self.0 & Self::TCP != 0
    }

    /// A UDP flow whose datagrams are all sent as fragments.
    #[inline]
    pub(crate) fn is_frag(self) -> bool {
        self.0 & Self::FRAG != 0
    }
}

/// Everything that identifies one flow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FlowSpec {
    pub(crate) tuple: FlowTuple,
    pub(crate) kind: Kind,
    /// IPv6 flow label (20 bits).
    pub(crate) flow_label: u32,
    /// TCP acknowledgment number (constant per flow).
    pub(crate) tcp_ack: u32,
}

impl FlowSpec {
    /// The queue an RSS NIC delivers this flow's packets to: the 4-tuple
    /// placement (when the hash types include the protocol), or for
    /// fragmenting flows the 2-tuple one (a non-first fragment has no ports).
    pub(crate) fn queue(&self, config: &RssConfig) -> QueueId {
        if self.kind.is_frag() {
            let t = FlowTuple { ports: None, ..self.tuple };
            config.place(&t, true).queue
        } else {
            config.place(&self.tuple, false).queue
        }
    }
}

/// The configuration fields that define flows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FlowParams {
    seed: u64,
    ipv6_share: f64,
    tcp_share: f64,
    frag_share: f64,
}

impl FlowParams {
    pub(crate) fn new(cfg: &GenConfig) -> FlowParams {
        FlowParams { seed: cfg.seed, ipv6_share: cfg.ipv6_share, tcp_share: cfg.tcp_share, frag_share: cfg.frag_share }
    }

    /// Flow `id`'s identity. Defined for every `u32`; ids `>= MAX_FLOWS`
    /// alias lower ones in the source address.
    pub(crate) fn spec(&self, id: u32) -> FlowSpec {
        let mut r = SplitMix64(self.seed ^ mix64(u64::from(id) ^ 0xf10e_57ee_0000_0000));
        let h: [u64; 6] = std::array::from_fn(|_| r.next_u64());
        let v6 = unit(h[0]) < self.ipv6_share;
        let tcp = unit(h[1]) < self.tcp_share;
        let frag = !tcp && unit(h[2]) < self.frag_share;
        let kind = Kind::new(v6, tcp, frag);

        // Seeded bijection of the 24-bit id: odd multiplier, xor, odd multiplier.
        let s24 = (mix64(self.seed) as u32) & MASK24;
        let p = (id & MASK24).wrapping_mul(0x00a3_b195) & MASK24;
        let p = ((p ^ s24).wrapping_mul(0x0061_c88f)) & MASK24;

        let (src, dst) = if v6 {
            let src = (0xfd00u128 << 112) | (u128::from(h[3] >> 16) << 24) | u128::from(p);
            let dst = (0x2001_0db8u128 << 96) | (u128::from(h[4]) << 32) | u128::from(h[3] as u32);
            (IpAddr::V6(Ipv6Addr::from(src)), IpAddr::V6(Ipv6Addr::from(dst)))
        } else {
            let dst = 0xc0a8_0000 | (h[3] as u32 & 0xffff);
            (IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | p)), IpAddr::V4(Ipv4Addr::from(dst)))
        };
        let sport = 1024 + ((h[5] >> 32) % 64512) as u16;
        let table = if tcp { &TCP_PORTS } else { &UDP_PORTS };
        let dport = table[(h[5] & 7) as usize];
        FlowSpec {
            tuple: FlowTuple {
                src,
                dst,
                proto: if tcp { proto::TCP } else { proto::UDP },
                ports: Some((sport, dport)),
            },
            kind,
            flow_label: (h[4] >> 40) as u32 & 0x000f_ffff,
            tcp_ack: h[5] as u32 >> 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tuples_unique_and_shares_respected() {
        let cfg = GenConfig { ipv6_share: 0.3, tcp_share: 0.6, frag_share: 0.5, ..GenConfig::default() };
        let p = FlowParams::new(&cfg);
        let n = 20_000u32;
        let mut seen = HashSet::new();
        let (mut v6, mut tcp, mut frag, mut udp) = (0, 0, 0, 0);
        for id in 0..n {
            let s = p.spec(id);
            assert!(seen.insert((s.tuple.src, s.tuple.dst, s.tuple.ports)));
            assert_eq!(s.kind.is_v6(), s.tuple.is_ipv6());
            assert_ne!(s.tuple.ports.map(|p| p.1), Some(flowsteer_wire::VXLAN_PORT));
            v6 += usize::from(s.kind.is_v6());
            tcp += usize::from(s.kind.is_tcp());
            udp += usize::from(!s.kind.is_tcp());
            frag += usize::from(s.kind.is_frag());
        }
        let share = |a: usize, b: u32| a as f64 / f64::from(b);
        assert!((share(v6, n) - 0.3).abs() < 0.02);
        assert!((share(tcp, n) - 0.6).abs() < 0.02);
        assert!((frag as f64 / udp as f64 - 0.5).abs() < 0.03);
    }

    #[test]
    fn extreme_shares() {
        for (v6s, tcps) in [(0.0, 0.0), (1.0, 1.0)] {
            let p = FlowParams::new(&GenConfig {
                ipv6_share: v6s,
                tcp_share: tcps,
                frag_share: 1.0,
                ..GenConfig::default()
            });
            for id in 0..1000 {
                let k = p.spec(id).kind;
                assert_eq!(k.is_v6(), v6s == 1.0);
                assert_eq!(k.is_tcp(), tcps == 1.0);
                assert_eq!(k.is_frag(), tcps == 0.0);
            }
        }
    }
}
