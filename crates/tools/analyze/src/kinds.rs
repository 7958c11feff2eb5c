//! The kinds the analyzer counts under their own names: encapsulations,
//! the reasons a packet was hashed on its outer headers, and the order
//! of tuples in reports. Shared by the analyzer and its mergeable state.

use flowsteer_wire::{proto, Encap, FlowTuple, InnerMiss, L3Info, Parsed};
use std::cmp::Ordering;

/// Encapsulations reported separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EncapKind {
    Vlan,
    Qinq,
    Vxlan,
    Gre,
    IpInIp,
    Pppoe,
    Geneve,
    VxlanGpe,
    GtpU,
}

impl EncapKind {
    pub(crate) const ALL: [EncapKind; 9] = [
        EncapKind::Vlan,
        EncapKind::Qinq,
        EncapKind::Vxlan,
        EncapKind::Gre,
        EncapKind::IpInIp,
        EncapKind::Pppoe,
        EncapKind::Geneve,
        EncapKind::VxlanGpe,
        EncapKind::GtpU,
    ];

    pub(crate) fn of(encap: Encap) -> EncapKind {
        match encap {
            Encap::Vxlan { .. } => EncapKind::Vxlan,
            Encap::Gre { .. } => EncapKind::Gre,
            Encap::Pppoe { .. } => EncapKind::Pppoe,
            Encap::IpInIp => EncapKind::IpInIp,
            Encap::Geneve { .. } => EncapKind::Geneve,
            Encap::VxlanGpe { .. } => EncapKind::VxlanGpe,
            Encap::GtpU { .. } => EncapKind::GtpU,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            EncapKind::Vlan => "vlan",
            EncapKind::Qinq => "qinq",
            EncapKind::Vxlan => "vxlan",
            EncapKind::Gre => "gre",
            EncapKind::IpInIp => "ipip",
            EncapKind::Pppoe => "pppoe",
            EncapKind::Geneve => "geneve",
            EncapKind::VxlanGpe => "vxlan_gpe",
            EncapKind::GtpU => "gtpu",
        }
    }

    pub(crate) fn nic(self) -> &'static str {
        match self {
            EncapKind::Vlan => "hashed on the IP header behind the tag",
            EncapKind::Qinq => {
                "hashed on the IP header behind both tags (a NIC that parses one tag only does not hash it)"
            }
            EncapKind::Vxlan => {
                "hashed on the outer headers: a tunnel between two endpoints lands on one queue unless UDP is hashed on the 4-tuple and source ports vary"
            }
            EncapKind::Gre => "hashed on the outer addresses: a tunnel between two endpoints lands on one queue",
            EncapKind::IpInIp => {
                "hashed on the outer addresses: a tunnel between two endpoints lands on one queue"
            }
            EncapKind::Pppoe => "not hashed (no outer IP header): everything lands on the queue of RETA entry 0",
            EncapKind::Geneve | EncapKind::VxlanGpe => {
                "hashed on the outer headers: a tunnel between two endpoints lands on one queue unless UDP is hashed on the 4-tuple and the encapsulating side varies the source port per inner flow"
            }
            EncapKind::GtpU => {
                "hashed on the outer headers: every user of a tunnel endpoint pair lands on one queue (port 2152 both ways, so the 4-tuple does not help)"
            }
        }
    }
}

/// Why a packet was hashed on its outer headers under `--inner`, one
/// fixed slot each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OuterReason {
    /// No encapsulation recognised or suspected.
    NotTunnelled,
    /// A recognised tunnel carrying something other than IP.
    TunnelNotIp,
    /// A recognised tunnel whose header or inner packet is cut or malformed.
    TunnelMalformed,
    /// Traffic that looks like a tunnel this parser does not open.
    UnknownTunnel,
    /// A non-first fragment of the outer packet: nothing behind it is visible.
    OuterFragment,
}

impl OuterReason {
    pub(crate) const ALL: [OuterReason; 5] = [
        OuterReason::NotTunnelled,
        OuterReason::TunnelNotIp,
        OuterReason::TunnelMalformed,
        OuterReason::UnknownTunnel,
        OuterReason::OuterFragment,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            OuterReason::NotTunnelled => "not_tunnelled",
            OuterReason::TunnelNotIp => "tunnel_not_ip",
            OuterReason::TunnelMalformed => "tunnel_malformed",
            OuterReason::UnknownTunnel => "unknown_tunnel",
            OuterReason::OuterFragment => "outer_fragment",
        }
    }

    /// Why a packet with no inner header was hashed on its outer one.
    pub(crate) fn of(parsed: &Parsed) -> OuterReason {
        match (parsed.inner_miss, parsed.encap, &parsed.outer) {
            (Some(InnerMiss::NotIp), _, _) => OuterReason::TunnelNotIp,
            (Some(InnerMiss::Malformed), _, _) => OuterReason::TunnelMalformed,
            // PPPoE carrying something else than IP (LCP, ...).
            (None, Some(Encap::Pppoe { .. }), _) => OuterReason::TunnelNotIp,
            (None, Some(_), _) => OuterReason::TunnelMalformed,
            (None, None, Some(l3)) if l3.frag.is_some_and(|f| !f.is_first()) => OuterReason::OuterFragment,
            (None, None, Some(l3)) if is_unknown_tunnel(l3) => OuterReason::UnknownTunnel,
            (None, None, _) => OuterReason::NotTunnelled,
        }
    }
}

/// Protocols and UDP ports of encapsulations this parser does not open:
/// GRE it could not read (version 1, PPTP), ESP (50, encrypted), L2TPv3
/// (115), MPLS in IP (137); UDP to L2TP (1701), Teredo (3544), IPsec NAT
/// traversal (4500), GRE in UDP (4754), MPLS in UDP (6635).
fn is_unknown_tunnel(l3: &L3Info) -> bool {
    const ESP: u8 = 50;
    const L2TPV3: u8 = 115;
    const MPLS_IN_IP: u8 = 137;
    match l3.tuple.proto {
        proto::GRE | ESP | L2TPV3 | MPLS_IN_IP => true,
        proto::UDP => l3.tuple.ports.is_some_and(|(_, d)| matches!(d, 1701 | 3544 | 4500 | 4754 | 6635)),
        _ => false,
    }
}

/// Every encapsulation kind: (name, what a NIC's RSS does with it).
pub(crate) fn encap_kinds() -> impl Iterator<Item = (&'static str, &'static str)> {
    EncapKind::ALL.iter().map(|k| (k.name(), k.nic()))
}

/// Every reason for hashing on the outer headers under `inner`, by name.
pub(crate) fn outer_reasons() -> [&'static str; OuterReason::ALL.len()] {
    OuterReason::ALL.map(OuterReason::name)
}

/// A total order on tuples (for stable reports and to visit each
/// connection once).
pub(crate) fn tuple_order(a: &FlowTuple, b: &FlowTuple) -> Ordering {
    (a.src, a.dst, a.proto, a.ports).cmp(&(b.src, b.dst, b.proto, b.ports))
}
