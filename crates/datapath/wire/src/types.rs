//! What the parser reports: the tuple, the link type, the L3 view of a
//! frame and the options that steer the parse.

use crate::error::ParseError;
use crate::limits::{MAX_VLAN_DEPTH, VXLAN_PORT};
use std::net::IpAddr;

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
    /// BSD loopback, `LINKTYPE_NULL` (0): a 4-byte address family, see
    /// [`crate::loopback`].
    Null,
    /// OpenBSD loopback, `LINKTYPE_LOOP` (108): the same header as
    /// [`LinkType::Null`].
    Loop,
}

impl LinkType {
    /// Maps a pcap/pcapng `LINKTYPE_*` value: 1 Ethernet; 101, 12 and 14
    /// (raw IP as written by different systems), 228 (raw IPv4) and 229
    /// (raw IPv6) RawIp; 113 Linux SLL; 276 Linux SLL2; 0 NULL and 108
    /// LOOP (BSD loopback).
    pub fn from_pcap(linktype: u32) -> Option<LinkType> {
        match linktype {
            0 => Some(LinkType::Null),
            108 => Some(LinkType::Loop),
            1 => Some(LinkType::Ethernet),
            12 | 14 | 101 | 228 | 229 => Some(LinkType::RawIp),
            113 => Some(LinkType::LinuxSll),
            276 => Some(LinkType::LinuxSll2),
            _ => None,
        }
    }

    /// The canonical pcap `LINKTYPE_*` value (1, 101, 113, 276, 0, 108).
    pub fn to_pcap(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
            LinkType::Null => 0,
            LinkType::Loop => 108,
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
    /// Geneve (UDP to [`crate::GENEVE_PORT`], 6081), options skipped.
    Geneve {
        /// Virtual network identifier (24 bits).
        vni: u32,
    },
    /// VXLAN-GPE (UDP to [`crate::VXLAN_GPE_PORT`], 4790).
    VxlanGpe {
        /// VXLAN network identifier (24 bits).
        vni: u32,
    },
    /// GTP-U (UDP to [`crate::GTPU_PORT`], 2152), extension headers skipped.
    GtpU {
        /// Tunnel endpoint identifier.
        teid: u32,
    },
}

/// Why a recognised encapsulation's inner packet was not parsed (with
/// [`ParseOptions::inner`]): the packet is then hashed on its outer headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InnerMiss {
    /// The tunnel carries something other than IP (GTP-U signalling, GRE
    /// or Geneve with another protocol, an inner ARP frame, NSH, ...).
    NotIp,
    /// The tunnel header or the inner packet is truncated or malformed.
    Malformed,
}

/// Summary of one frame, see [`crate::parse_frame`]. `Default` is the empty result
/// (no VLANs, nothing found), handy for [`crate::parse_frame_into`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Parsed {
    /// VLAN tags seen (0..=MAX_VLAN_DEPTH).
    pub vlan_count: u8,
    /// VLAN ids, outermost first; unused slots are 0.
    pub vlan_ids: [u16; MAX_VLAN_DEPTH],
    /// Final ethertype after VLANs (0 for RawIp, NULL and LOOP; the SLL protocol field for
    /// Linux cooked captures; the length value for 802.3 LLC frames).
    pub ethertype: u16,
    /// The first IP header a NIC would find: not behind PPPoE. None for non-IP frames (ARP...) and for PPPoE.
    pub outer: Option<L3Info>,
    /// The encapsulation recognised behind the outer header (set whether or
    /// not [`ParseOptions::inner`] asks for the inner header).
    pub encap: Option<Encap>,
    /// The IP header inside VXLAN (UDP dst port == opts.vxlan_port, flags I bit set, inner Ethernet incl. its own VLANs), Geneve (UDP dst port 6081, version 0, protocol IPv4 / IPv6 / Ethernet, options skipped), VXLAN-GPE (UDP dst port 4790, next protocol IPv4 / IPv6 / Ethernet), GTP-U (UDP dst port 2152, G-PDU, extension headers skipped, the IP version from the packet), GRE (proto 47, versions 0 with C/K/S bits; protocol type 0x0800/0x86DD directly, or 0x6558 transparent Ethernet bridging), IP-in-IP (proto 4 / 41), or PPPoE session (ethertype 0x8864, PPP protocol 0x0021 IPv4 / 0x0057 IPv6).
    /// Only filled when opts.inner is true, except PPPoE which always fills inner (there is no outer IP). One level of encapsulation only. None when the outer packet is a non-first fragment.
    ///
    /// A tunnelled packet that is truncated or malformed does not fail the
    /// parse: `inner` is then None (with `outer` and `encap` still filled).
    /// PPPoE is the exception: with no outer IP header, the PPPoE header and
    /// the IP packet inside it are parsed like any first IP header and their
    /// errors are returned.
    pub inner: Option<L3Info>,
    /// With [`ParseOptions::inner`], why `inner` is `None` behind a
    /// recognised encapsulation (PPPoE excepted); `None` otherwise.
    pub inner_miss: Option<InnerMiss>,
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

/// Options of [`crate::parse_frame`].
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
