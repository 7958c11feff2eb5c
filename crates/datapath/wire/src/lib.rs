//! flowsteer-wire: zero-copy, never-panicking packet parsing.
//!
//! Stage 1 of the packet's path (source -> **parse** -> hash -> steer -> ...).
//! Every header is a borrowed view over `&[u8]` with a checked constructor; after
//! construction no accessor can panic. `parse_frame` walks a frame from the
//! Ethernet header down to L4 and returns a [`Parsed`] summary (the flow tuple,
//! fragment info, encapsulation) or a small typed [`ParseError`].
//!
//! See the module docs of each header for the bounds (VLAN depth, IPv6 extension
//! chain length) and the reason we write our own views instead of using a crate.
//!
//! # Why hand-written views and not a parsing crate
//!
//! * We need a precise model of *what a NIC sees*: which IP header is the
//!   "outer" one an RSS engine hashes, which one sits inside a tunnel, when the
//!   L4 ports are visible (not in non-first fragments), how far VLAN stacks and
//!   IPv6 extension chains are followed. Generic parsers either stop too early
//!   or decode far more than a NIC does.
//! * Every loop is bounded ([`MAX_VLAN_DEPTH`], [`MAX_IPV6_EXT_HEADERS`], one
//!   level of encapsulation), so the worst case cost per frame is fixed.
//! * Budget: ~20-50 ns per frame, no allocation on the parse path, zero
//!   runtime dependencies.
//!
//! # Example
//!
//! ```
//! use flowsteer_wire::{build, parse_frame, Encap, LinkType, ParseOptions};
//!
//! let inner = build::udp_packet("192.168.0.1".parse().unwrap(), "192.168.0.2".parse().unwrap(), 1000, 53, b"q");
//! let frame = build::gre_frame("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), Some(7), &inner);
//! let opts = ParseOptions::default().with_inner(true);
//! let p = parse_frame(&frame, LinkType::Ethernet, &opts).unwrap();
//! assert_eq!(p.encap, Some(Encap::Gre { key: Some(7) }));
//! assert_eq!(p.outer.unwrap().tuple.proto, flowsteer_wire::proto::GRE);
//! assert_eq!(p.innermost().unwrap().tuple.ports, Some((1000, 53)));
//! ```
//!
//! # Guarantees
//!
//! * `#![forbid(unsafe_code)]`; the library never prints and never panics on
//!   any input: there is no slice indexing that can go out of bounds (fixed
//!   headers are `&[u8; N]` obtained with `first_chunk`, variable parts are
//!   taken with `get`), no `unwrap` on input-derived data and no arithmetic
//!   that can overflow (checked or saturating operations). These are enforced
//!   by clippy lints (`indexing_slicing`, `unwrap_used`, `panic`,
//!   `arithmetic_side_effects`, ...) on the library target.
//! * [`parse_frame`] does not allocate.
//!
//! # Modules
//!
//! One module per protocol: [`ethernet`] (incl. VLAN tags), [`sll`] (Linux
//! cooked capture), [`ipv4`], [`ipv6`] (incl. the extension chain), [`udp`],
//! [`tcp`], [`gre`], [`vxlan`], [`pppoe`]; [`parse`] holds the frame walk and
//! [`build`] a packet builder for tests and traffic generators.
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::print_stdout,
        clippy::print_stderr,
        clippy::arithmetic_side_effects
    )
)]
#![warn(missing_docs)]

use std::net::IpAddr;

pub mod build;
pub mod checksum;
mod error;
pub mod ethernet;
pub mod gre;
pub mod ipv4;
pub mod ipv6;
pub mod parse;
pub mod pppoe;
pub mod sll;
pub mod tcp;
pub mod udp;
pub mod vxlan;

pub use error::{Layer, ParseError};
pub use parse::{parse_frame, parse_frame_into};

/// Protocol numbers used by the hash types.
pub mod proto {
    /// ICMP (IPv4).
    pub const ICMP: u8 = 1;
    /// IPv4 encapsulated in IP (IP-in-IP).
    pub const IPIP: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 encapsulated in IP (6in4 / IPv6-in-IPv6).
    pub const IPV6: u8 = 41;
    /// GRE.
    pub const GRE: u8 = 47;
    /// ESP (IPsec); the IPv6 extension walk stops here.
    pub const ESP: u8 = 50;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// SCTP.
    pub const SCTP: u8 = 132;
}

/// Most VLAN tags (802.1Q / 802.1ad QinQ) followed; a deeper stack is
/// [`ParseError::TooManyVlans`].
pub const MAX_VLAN_DEPTH: usize = 2;

/// Most IPv6 extension headers followed; a longer chain is
/// [`ParseError::ExtChainTooLong`].
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// Default VXLAN UDP destination port (IANA).
pub const VXLAN_PORT: u16 = 4789;

/// A flow's identifying tuple as it appears on the wire.
///
/// `ports` is `Some` only when the L4 header was present and parsed (TCP or UDP,
/// unfragmented or the offset-0 fragment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol / IPv6 upper-layer next header.
    pub proto: u8,
    /// `(source port, destination port)`.
    pub ports: Option<(u16, u16)>,
}

impl FlowTuple {
    /// The same flow seen from the other direction (addresses and ports swapped).
    pub fn reversed(&self) -> FlowTuple {
        FlowTuple { src: self.dst, dst: self.src, proto: self.proto, ports: self.ports.map(|(s, d)| (d, s)) }
    }

    /// True for an IPv6 tuple.
    pub fn is_ipv6(&self) -> bool {
        self.src.is_ipv6()
    }
}

/// The link layer a frame starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// Ethernet II (with optional VLAN tags).
    Ethernet,
    /// Raw IP; IPv4 or IPv6 chosen by the version nibble.
    RawIp,
    /// Linux "cooked" capture v1 (16-byte header).
    LinuxSll,
    /// Linux "cooked" capture v2 (20-byte header).
    LinuxSll2,
}

impl LinkType {
    /// Maps a pcap/pcapng `LINKTYPE_*` value: 1 Ethernet; 101, 12 and 14
    /// (raw IP as written by different systems), 228 (raw IPv4) and 229
    /// (raw IPv6) RawIp; 113 Linux SLL; 276 Linux SLL2.
    pub fn from_pcap(linktype: u32) -> Option<LinkType> {
        match linktype {
            1 => Some(LinkType::Ethernet),
            12 | 14 | 101 | 228 | 229 => Some(LinkType::RawIp),
            113 => Some(LinkType::LinuxSll),
            276 => Some(LinkType::LinuxSll2),
            _ => None,
        }
    }

    /// The canonical pcap `LINKTYPE_*` value (1, 101, 113, 276).
    pub fn to_pcap(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
        }
    }
}

impl TryFrom<u32> for LinkType {
    type Error = ParseError;

    /// [`LinkType::from_pcap`], with [`ParseError::UnsupportedLinkType`] for
    /// unknown values.
    fn try_from(linktype: u32) -> Result<Self, Self::Error> {
        LinkType::from_pcap(linktype).ok_or(ParseError::UnsupportedLinkType)
    }
}

/// Fragmentation details of an IP fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FragInfo {
    /// IPv4 identification (16 bits widened) or IPv6 Fragment header identification.
    pub id: u32,
    /// Fragment offset in BYTES (field * 8).
    pub offset: u16,
    /// MF / M flag: more fragments follow.
    pub more: bool,
}

impl FragInfo {
    /// The offset-0 fragment (the one that carries the L4 header).
    pub fn is_first(&self) -> bool {
        self.offset == 0
    }

    /// The fragment with the MF / M flag clear.
    pub fn is_last(&self) -> bool {
        !self.more
    }
}

/// What was learnt from one IP header (and the L4 header behind it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct L3Info {
    /// Addresses, protocol and (when visible) ports.
    pub tuple: FlowTuple,
    /// Some for IPv4 with MF set or offset != 0, and for IPv6 with a Fragment header that is not atomic.
    pub frag: Option<FragInfo>,
    /// IPv6 atomic fragment (Fragment header with offset 0 and M=0, RFC 6946): frag is None and this is true.
    pub atomic_frag: bool,
    /// Offset of the IP header in the frame.
    pub l3_offset: usize,
    /// Offset of the upper-layer header (after IPv4 options / IPv6 ext chain);
    /// None for non-first fragments.
    pub l4_offset: Option<usize>,
    /// IPv4: IHL*4; IPv6: 40 + extension headers up to and including the
    /// Fragment header (the unfragmentable part + frag header). An IPv6
    /// packet without a Fragment header counts its whole extension chain.
    pub ip_header_len: usize,
    /// IPv4 total length / IPv6 40 + payload length.
    pub ip_total_len: usize,
    /// The frame holds fewer bytes than the IP length says (snaplen); the
    /// headers themselves were complete.
    pub truncated: bool,
    /// ECN bits (low 2 bits of TOS / traffic class).
    pub ecn: u8,
    /// TTL / hop limit.
    pub ttl: u8,
    /// DSCP (high 6 bits of TOS / traffic class).
    pub dscp: u8,
    /// IPv4 DF (always false for IPv6).
    pub dont_fragment: bool,
}

impl L3Info {
    /// True when this packet is a (non-atomic) fragment.
    pub fn is_fragment(&self) -> bool {
        self.frag.is_some()
    }
}

/// The encapsulation found behind the outer header (or, for PPPoE, behind
/// the Ethernet header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encap {
    /// VXLAN (UDP to [`ParseOptions::vxlan_port`], I flag set) with its 24-bit VNI.
    Vxlan {
        /// VXLAN network identifier (24 bits).
        vni: u32,
    },
    /// GRE version 0 (IP protocol 47), with the key when the K bit is set.
    Gre {
        /// GRE key field.
        key: Option<u32>,
    },
    /// PPPoE session stage (ethertype 0x8864).
    Pppoe {
        /// PPPoE session id.
        session: u16,
    },
    /// IPv4 or IPv6 directly inside IP (protocol 4 / 41).
    IpInIp,
}

/// Summary of one frame, see [`parse_frame`]. `Default` is the empty result
/// (no VLANs, nothing found), handy for [`parse_frame_into`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Parsed {
    /// VLAN tags seen (0..=MAX_VLAN_DEPTH).
    pub vlan_count: u8,
    /// VLAN ids, outermost first; unused slots are 0.
    pub vlan_ids: [u16; MAX_VLAN_DEPTH],
    /// Final ethertype after VLANs (0 for RawIp; the SLL protocol field for
    /// Linux cooked captures; the length value for 802.3 LLC frames).
    pub ethertype: u16,
    /// The first IP header a NIC would find: not behind PPPoE. None for non-IP frames (ARP...) and for PPPoE.
    pub outer: Option<L3Info>,
    /// The encapsulation recognised behind the outer header (set whether or
    /// not [`ParseOptions::inner`] asks for the inner header).
    pub encap: Option<Encap>,
    /// The IP header inside VXLAN (UDP dst port == opts.vxlan_port, flags I bit set, inner Ethernet incl. its own VLANs), GRE (proto 47, versions 0 with C/K/S bits; protocol type 0x0800/0x86DD directly, or 0x6558 transparent Ethernet bridging), IP-in-IP (proto 4 / 41), or PPPoE session (ethertype 0x8864, PPP protocol 0x0021 IPv4 / 0x0057 IPv6).
    /// Only filled when opts.inner is true, except PPPoE which always fills inner (there is no outer IP). One level of encapsulation only. None when the outer packet is a non-first fragment.
    ///
    /// A tunnelled packet that is truncated or malformed does not fail the
    /// parse: `inner` is then None (with `outer` and `encap` still filled).
    /// PPPoE is the exception: with no outer IP header, the PPPoE header and
    /// the IP packet inside it are parsed like any first IP header and their
    /// errors are returned.
    pub inner: Option<L3Info>,
}

impl Parsed {
    /// inner if present, else outer.
    pub fn innermost(&self) -> Option<&L3Info> {
        self.inner.as_ref().or(self.outer.as_ref())
    }

    /// The VLAN ids actually seen, outermost first.
    pub fn vlans(&self) -> &[u16] {
        let n = usize::from(self.vlan_count).min(MAX_VLAN_DEPTH);
        self.vlan_ids.get(..n).unwrap_or(&[])
    }
}

/// Options of [`parse_frame`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParseOptions {
    /// Parse the IP header inside VXLAN / GRE / IP-in-IP (PPPoE always is).
    pub inner: bool,
    /// UDP destination port that marks VXLAN (default [`VXLAN_PORT`], 4789);
    /// 0 disables VXLAN recognition.
    pub vxlan_port: u16,
}

impl ParseOptions {
    /// `inner: false`, `vxlan_port: 4789`.
    pub const fn new() -> ParseOptions {
        ParseOptions { inner: false, vxlan_port: VXLAN_PORT }
    }

    /// The same options with `inner` set.
    pub const fn with_inner(self, inner: bool) -> ParseOptions {
        ParseOptions { inner, ..self }
    }
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linktype_mapping() {
        assert_eq!(LinkType::from_pcap(1), Some(LinkType::Ethernet));
        for raw in [12, 14, 101, 228, 229] {
            assert_eq!(LinkType::from_pcap(raw), Some(LinkType::RawIp));
        }
        assert_eq!(LinkType::from_pcap(113), Some(LinkType::LinuxSll));
        assert_eq!(LinkType::from_pcap(276), Some(LinkType::LinuxSll2));
        assert_eq!(LinkType::from_pcap(0), None);
        assert_eq!(LinkType::from_pcap(105), None);
        assert_eq!(LinkType::try_from(147), Err(ParseError::UnsupportedLinkType));
        for lt in [LinkType::Ethernet, LinkType::RawIp, LinkType::LinuxSll, LinkType::LinuxSll2] {
            assert_eq!(LinkType::from_pcap(lt.to_pcap()), Some(lt));
        }
    }

    #[test]
    fn options_default() {
        let o = ParseOptions::default();
        assert!(!o.inner);
        assert_eq!(o.vxlan_port, 4789);
        assert!(o.with_inner(true).inner);
    }

    #[test]
    fn frag_info() {
        let f = FragInfo { id: 1, offset: 0, more: true };
        assert!(f.is_first() && !f.is_last());
        let f = FragInfo { id: 1, offset: 8, more: false };
        assert!(!f.is_first() && f.is_last());
    }

    #[test]
    fn tuple_reversed() {
        let t = FlowTuple {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            proto: proto::UDP,
            ports: Some((1, 2)),
        };
        let r = t.reversed();
        assert_eq!(r.src, t.dst);
        assert_eq!(r.ports, Some((2, 1)));
        assert_eq!(r.reversed(), t);
        assert!(!t.is_ipv6());
    }
}
