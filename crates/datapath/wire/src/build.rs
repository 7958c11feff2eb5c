//! Packet builder for tests, capture generators and traffic generators.
//!
//! Everything here produces well-formed packets: correct IPv4 header
//! checksums and correct UDP / TCP checksums (over the IPv4 or IPv6 pseudo
//! header), Ethernet II with the fixed MACs [`SRC_MAC`] -> [`DST_MAC`].
//!
//! * [`FrameBuilder`] is the general form (pub fields, start from
//!   [`FrameBuilder::udp`], [`FrameBuilder::tcp`] or [`FrameBuilder::raw`]
//!   and override with struct update syntax): VLAN tags, IPv4 options, IPv6
//!   extension headers, TTL/TOS/DF...
//! * [`udp_frame`], [`tcp_frame`] and friends are shortcuts; the `write_*`
//!   forms append to a caller's `Vec` and allocate nothing once its capacity
//!   suffices (clear it between packets to reuse it).
//! * Tunnels wrap an inner IP packet ([`gre_frame`], [`ipip_frame`],
//!   [`pppoe_frame`]) or an inner Ethernet frame ([`vxlan_frame`],
//!   [`gre_teb_frame`]); [`with_vlans`] inserts VLAN tags into any frame;
//!   [`convert_link`] turns an Ethernet frame into the other link types.
//! * [`ipv4_fragments`] / [`ipv6_fragments`] fragment a UDP datagram.
//!
//! The builder does not panic. Lengths that do not fit their 16-bit fields
//! (a payload over ~64 KiB) are saturated, which yields a malformed packet.
//! Mixing an IPv4 and an IPv6 address builds IPv6 with the IPv4 one mapped
//! (`::ffff:a.b.c.d`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use crate::checksum::internet_checksum;
use crate::checksum::{fold, pseudo_header_sum, sum};
use crate::ethernet::{
    ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_PPPOE_SESSION, ETHERTYPE_QINQ, ETHERTYPE_TEB, ETHERTYPE_VLAN,
};
use crate::ipv6::{NH_AUTH, NH_DEST_OPTS, NH_FRAGMENT, NH_HOP_BY_HOP, NH_ROUTING};
use crate::limits::VXLAN_PORT;
use crate::proto;
use crate::types::LinkType;

/// Source MAC of built frames.
pub const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Destination MAC of built frames.
pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// Default TTL / hop limit.
pub const DEFAULT_TTL: u8 = 64;
/// Default TCP window.
pub const DEFAULT_WINDOW: u16 = 65535;

/// The IPv4 header checksum to store for `hdr` (the whole header, options
/// included); the checksum field (bytes 10..12) is treated as zero, so this
/// works on headers with or without a checksum filled in.
pub fn ipv4_header_checksum(hdr: &[u8]) -> u16 {
    let before = hdr.get(..10).unwrap_or(hdr);
    let after = hdr.get(12..).unwrap_or(&[]);
    fold(sum(after, sum(before, 0)))
}

/// One VLAN tag to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// TPID (0x8100, 0x88a8, 0x9100).
    pub tpid: u16,
    /// VLAN id (12 bits; higher bits are dropped).
    pub vid: u16,
    /// Priority code point (3 bits).
    pub pcp: u8,
}

impl VlanTag {
    /// An 802.1Q tag (TPID 0x8100).
    pub const fn dot1q(vid: u16) -> VlanTag {
        VlanTag { tpid: ETHERTYPE_VLAN, vid, pcp: 0 }
    }

    /// An 802.1ad service tag (TPID 0x88a8), the outer tag of QinQ.
    pub const fn dot1ad(vid: u16) -> VlanTag {
        VlanTag { tpid: ETHERTYPE_QINQ, vid, pcp: 0 }
    }

    fn tci(&self) -> u16 {
        (u16::from(self.pcp & 0x07) << 13) | (self.vid & 0x0fff)
    }
}

/// The transport header to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L4Spec {
    /// UDP header with a correct checksum.
    Udp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
    /// 20-byte TCP header (no options) with a correct checksum.
    Tcp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Sequence number.
        seq: u32,
        /// Acknowledgment number.
        ack: u32,
        /// Flag byte, see [`crate::tcp`].
        flags: u8,
        /// Window.
        window: u16,
    },
    /// No transport header: the payload is carried as is under this IP
    /// protocol number (ICMP, an inner IP packet, GRE...).
    Raw {
        /// IP protocol / next header.
        proto: u8,
    },
}

impl L4Spec {
    fn proto(&self) -> u8 {
        match self {
            L4Spec::Udp { .. } => proto::UDP,
            L4Spec::Tcp { .. } => proto::TCP,
            L4Spec::Raw { proto } => *proto,
        }
    }

    fn header_len(&self) -> usize {
        match self {
            L4Spec::Udp { .. } => 8,
            L4Spec::Tcp { .. } => 20,
            L4Spec::Raw { .. } => 0,
        }
    }
}

/// An IPv6 extension header to write (IPv6 packets only). Lengths are in
/// bytes, rounded up to a multiple of 8 (AH: of 4, at least 12) and capped
/// at 2048; content is padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ipv6Ext {
    /// Hop-by-Hop Options (PadN).
    HopByHop {
        /// Length in bytes.
        len: usize,
    },
    /// Routing header, type 0 with segments left 0.
    Routing {
        /// Length in bytes.
        len: usize,
    },
    /// Destination Options (PadN).
    DestOpts {
        /// Length in bytes.
        len: usize,
    },
    /// Fragment header.
    Fragment {
        /// Offset in bytes (multiple of 8).
        offset: u16,
        /// M flag.
        more: bool,
        /// Identification.
        id: u32,
    },
    /// Authentication header (SPI 0x100, sequence 1, zero ICV).
    Auth {
        /// Length in bytes.
        len: usize,
    },
}

impl Ipv6Ext {
    fn kind(&self) -> u8 {
        match self {
            Ipv6Ext::HopByHop { .. } => NH_HOP_BY_HOP,
            Ipv6Ext::Routing { .. } => NH_ROUTING,
            Ipv6Ext::DestOpts { .. } => NH_DEST_OPTS,
            Ipv6Ext::Fragment { .. } => NH_FRAGMENT,
            Ipv6Ext::Auth { .. } => NH_AUTH,
        }
    }

    fn len(&self) -> usize {
        let round8 = |l: usize| l.clamp(8, 2048).div_ceil(8).saturating_mul(8);
        match *self {
            Ipv6Ext::HopByHop { len } | Ipv6Ext::Routing { len } | Ipv6Ext::DestOpts { len } => round8(len),
            Ipv6Ext::Fragment { .. } => 8,
            Ipv6Ext::Auth { len } => len.clamp(12, 1024).div_ceil(4).saturating_mul(4),
        }
    }

    fn write(&self, buf: &mut Vec<u8>, next: u8) {
        let len = self.len();
        let start = buf.len();
        buf.push(next);
        match *self {
            Ipv6Ext::Fragment { offset, more, id } => {
                buf.push(0);
                buf.extend_from_slice(&((offset & 0xfff8) | u16::from(more)).to_be_bytes());
                buf.extend_from_slice(&id.to_be_bytes());
            }
            Ipv6Ext::Auth { .. } => {
                buf.push(u8::try_from((len / 4).saturating_sub(2)).unwrap_or(u8::MAX));
                buf.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
            }
            Ipv6Ext::HopByHop { .. } | Ipv6Ext::DestOpts { .. } => {
                buf.push(u8::try_from((len / 8).saturating_sub(1)).unwrap_or(u8::MAX));
                write_padding(buf, len.saturating_sub(2));
            }
            Ipv6Ext::Routing { .. } => {
                buf.push(u8::try_from((len / 8).saturating_sub(1)).unwrap_or(u8::MAX));
                buf.extend_from_slice(&[0, 0]);
            }
        }
        buf.resize(start.saturating_add(len), 0);
    }
}

/// Appends `n` bytes of Pad1 / PadN options.
fn write_padding(buf: &mut Vec<u8>, mut n: usize) {
    while n >= 2 {
        // A PadN covers 2..=257 bytes; never leave a single byte behind
        // unless it is the last one (Pad1).
        let mut chunk = n.min(257);
        if n.saturating_sub(chunk) == 1 {
            chunk = chunk.saturating_sub(1);
        }
        buf.push(1);
        buf.push(u8::try_from(chunk.saturating_sub(2)).unwrap_or(u8::MAX));
        buf.resize(buf.len().saturating_add(chunk.saturating_sub(2)), 0);
        n = n.saturating_sub(chunk);
    }
    if n == 1 {
        buf.push(0);
    }
}

/// A whole Ethernet frame (or with [`FrameBuilder::write_ip`] just its IP
/// packet) carrying one transport header and payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameBuilder<'a> {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// VLAN tags, outermost first.
    pub vlans: &'a [VlanTag],
    /// Source address (its family, with `dst`'s, picks IPv4 or IPv6).
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Transport header.
    pub l4: L4Spec,
    /// Transport payload.
    pub payload: &'a [u8],
    /// TTL / hop limit.
    pub ttl: u8,
    /// TOS / traffic class: `dscp << 2 | ecn`.
    pub tos: u8,
    /// IPv4 identification.
    pub ident: u16,
    /// IPv4 DF flag.
    pub dont_fragment: bool,
    /// IPv4 options (padded with zeros to a multiple of 4, at most 40 bytes).
    pub ipv4_options: &'a [u8],
    /// IPv6 extension headers, in order.
    pub ipv6_ext: &'a [Ipv6Ext],
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
}

impl<'a> FrameBuilder<'a> {
    /// A UDP datagram with defaults everywhere else.
    pub fn udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &'a [u8]) -> Self {
        Self::raw(src, dst, proto::UDP, payload).with_l4(L4Spec::Udp { sport, dport })
    }

    /// A TCP segment (ack 0, window 65535) with defaults everywhere else.
    pub fn tcp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, seq: u32, flags: u8, payload: &'a [u8]) -> Self {
        Self::raw(src, dst, proto::TCP, payload).with_l4(L4Spec::Tcp {
            sport,
            dport,
            seq,
            ack: 0,
            flags,
            window: DEFAULT_WINDOW,
        })
    }

    /// An IP packet carrying `payload` as is under protocol `proto`.
    pub fn raw(src: IpAddr, dst: IpAddr, proto: u8, payload: &'a [u8]) -> Self {
        FrameBuilder {
            src_mac: SRC_MAC,
            dst_mac: DST_MAC,
            vlans: &[],
            src,
            dst,
            l4: L4Spec::Raw { proto },
            payload,
            ttl: DEFAULT_TTL,
            tos: 0,
            ident: 0,
            dont_fragment: false,
            ipv4_options: &[],
            ipv6_ext: &[],
            flow_label: 0,
        }
    }

    fn with_l4(self, l4: L4Spec) -> Self {
        FrameBuilder { l4, ..self }
    }

    /// True when this builds an IPv6 packet.
    pub fn is_ipv6(&self) -> bool {
        !(self.src.is_ipv4() && self.dst.is_ipv4())
    }

    /// Appends the IP packet (no link layer).
    pub fn write_ip(&self, buf: &mut Vec<u8>) {
        write_ip_parts(buf, self, &[self.payload]);
    }

    /// The IP packet (no link layer).
    pub fn ip_packet(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(self.payload.len().saturating_add(128));
        self.write_ip(&mut buf);
        buf
    }

    /// Appends the whole Ethernet frame.
    pub fn write(&self, buf: &mut Vec<u8>) {
        let ethertype = if self.is_ipv6() { ETHERTYPE_IPV6 } else { ETHERTYPE_IPV4 };
        write_ethernet(buf, self.dst_mac, self.src_mac, self.vlans, ethertype);
        self.write_ip(buf);
    }

    /// The whole Ethernet frame.
    pub fn build(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(self.payload.len().saturating_add(160));
        self.write(&mut buf);
        buf
    }
}

fn len16(len: usize) -> u16 {
    u16::try_from(len).unwrap_or(u16::MAX)
}

fn put16(buf: &mut [u8], at: usize, v: u16) {
    if let Some([a, b]) = buf.get_mut(at..at.saturating_add(2)) {
        [*a, *b] = v.to_be_bytes();
    }
}

fn to_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// Appends an Ethernet II header with VLAN tags.
pub fn write_ethernet(buf: &mut Vec<u8>, dst_mac: [u8; 6], src_mac: [u8; 6], vlans: &[VlanTag], ethertype: u16) {
    buf.extend_from_slice(&dst_mac);
    buf.extend_from_slice(&src_mac);
    for v in vlans {
        buf.extend_from_slice(&v.tpid.to_be_bytes());
        buf.extend_from_slice(&v.tci().to_be_bytes());
    }
    buf.extend_from_slice(&ethertype.to_be_bytes());
}

/// Writes the IP header, the L4 header of `b.l4` and the payload `parts`
/// (concatenated), with all checksums.
fn write_ip_parts(buf: &mut Vec<u8>, b: &FrameBuilder<'_>, parts: &[&[u8]]) {
    let payload_len = parts.iter().fold(0usize, |n, p| n.saturating_add(p.len()));
    let upper_len = b.l4.header_len().saturating_add(payload_len);
    let proto = b.l4.proto();
    let (src, dst) = match (b.src, b.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            write_ipv4_header(buf, b, s, d, proto, upper_len);
            (b.src, b.dst)
        }
        (s, d) => {
            let (s, d) = (to_v6(s), to_v6(d));
            write_ipv6_header(buf, b, s, d, proto, upper_len);
            (IpAddr::V6(s), IpAddr::V6(d))
        }
    };
    let l4_start = buf.len();
    match b.l4 {
        L4Spec::Udp { sport, dport } => {
            buf.extend_from_slice(&sport.to_be_bytes());
            buf.extend_from_slice(&dport.to_be_bytes());
            buf.extend_from_slice(&len16(upper_len).to_be_bytes());
            buf.extend_from_slice(&[0, 0]);
        }
        L4Spec::Tcp { sport, dport, seq, ack, flags, window } => {
            buf.extend_from_slice(&sport.to_be_bytes());
            buf.extend_from_slice(&dport.to_be_bytes());
            buf.extend_from_slice(&seq.to_be_bytes());
            buf.extend_from_slice(&ack.to_be_bytes());
            buf.push(0x50);
            buf.push(flags);
            buf.extend_from_slice(&window.to_be_bytes());
            buf.extend_from_slice(&[0, 0, 0, 0]);
        }
        L4Spec::Raw { .. } => {}
    }
    for p in parts {
        buf.extend_from_slice(p);
    }
    let segment = buf.get(l4_start..).unwrap_or(&[]);
    let upper32 = u32::try_from(upper_len).unwrap_or(u32::MAX);
    match b.l4 {
        L4Spec::Udp { .. } => {
            let c = fold(sum(segment, pseudo_header_sum(src, dst, proto, upper32)));
            let c = if c == 0 { 0xffff } else { c };
            put16(buf, l4_start.saturating_add(6), c);
        }
        L4Spec::Tcp { .. } => {
            let c = fold(sum(segment, pseudo_header_sum(src, dst, proto, upper32)));
            put16(buf, l4_start.saturating_add(16), c);
        }
        L4Spec::Raw { .. } => {}
    }
}

fn write_ipv4_header(
    buf: &mut Vec<u8>,
    b: &FrameBuilder<'_>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    upper_len: usize,
) {
    let opts = b.ipv4_options.get(..40).unwrap_or(b.ipv4_options);
    let opt_len = opts.len().div_ceil(4).saturating_mul(4);
    let header_len = opt_len.saturating_add(20);
    let start = buf.len();
    // header_len <= 60, so header_len / 4 <= 15 fits the nibble.
    buf.push(0x40 | u8::try_from(header_len / 4).unwrap_or(15));
    buf.push(b.tos);
    buf.extend_from_slice(&len16(header_len.saturating_add(upper_len)).to_be_bytes());
    buf.extend_from_slice(&b.ident.to_be_bytes());
    let flags: u16 = if b.dont_fragment { 0x4000 } else { 0 };
    buf.extend_from_slice(&flags.to_be_bytes());
    buf.push(b.ttl);
    buf.push(proto);
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&src.octets());
    buf.extend_from_slice(&dst.octets());
    buf.extend_from_slice(opts);
    buf.resize(start.saturating_add(header_len), 0);
    fill_ipv4_checksum(buf, start);
}

/// Computes and stores the checksum of the IPv4 header starting at `start`.
fn fill_ipv4_checksum(buf: &mut [u8], start: usize) {
    let ihl = buf.get(start).map_or(20, |b| usize::from((b & 0x0f) << 2));
    let c = ipv4_header_checksum(buf.get(start..start.saturating_add(ihl)).unwrap_or(&[]));
    put16(buf, start.saturating_add(10), c);
}

fn write_ipv6_header(
    buf: &mut Vec<u8>,
    b: &FrameBuilder<'_>,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    proto: u8,
    upper_len: usize,
) {
    let ext_len = b.ipv6_ext.iter().fold(0usize, |n, e| n.saturating_add(e.len()));
    let vtf = (6u32 << 28) | (u32::from(b.tos) << 20) | (b.flow_label & 0x000f_ffff);
    buf.extend_from_slice(&vtf.to_be_bytes());
    buf.extend_from_slice(&len16(ext_len.saturating_add(upper_len)).to_be_bytes());
    buf.push(b.ipv6_ext.first().map_or(proto, Ipv6Ext::kind));
    buf.push(b.ttl);
    buf.extend_from_slice(&src.octets());
    buf.extend_from_slice(&dst.octets());
    let mut exts = b.ipv6_ext.iter().peekable();
    while let Some(e) = exts.next() {
        let next = exts.peek().map_or(proto, |n| n.kind());
        e.write(buf, next);
    }
}

/// Ethernet / IPv4-or-IPv6 / UDP frame.
pub fn udp_frame(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    FrameBuilder::udp(src, dst, sport, dport, payload).build()
}

/// Appends an Ethernet / IP / UDP frame to `buf` (clear it first to reuse it).
pub fn write_udp_frame(buf: &mut Vec<u8>, src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) {
    FrameBuilder::udp(src, dst, sport, dport, payload).write(buf);
}

/// Ethernet / IP / TCP frame (ack 0, window 65535, no options).
pub fn tcp_frame(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    FrameBuilder::tcp(src, dst, sport, dport, seq, flags, payload).build()
}

/// Appends an Ethernet / IP / TCP frame to `buf`.
#[allow(clippy::too_many_arguments)]
pub fn write_tcp_frame(
    buf: &mut Vec<u8>,
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    flags: u8,
    payload: &[u8],
) {
    FrameBuilder::tcp(src, dst, sport, dport, seq, flags, payload).write(buf);
}

/// IP / UDP packet without link layer.
pub fn udp_packet(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    FrameBuilder::udp(src, dst, sport, dport, payload).ip_packet()
}

/// IP / TCP packet without link layer.
pub fn tcp_packet(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    FrameBuilder::tcp(src, dst, sport, dport, seq, flags, payload).ip_packet()
}

/// IP packet carrying `payload` under protocol `proto`, without link layer.
pub fn ip_packet(src: IpAddr, dst: IpAddr, proto: u8, payload: &[u8]) -> Vec<u8> {
    FrameBuilder::raw(src, dst, proto, payload).ip_packet()
}

/// The ethertype for an IP packet, from its version nibble (IPv4 unless 6).
fn ethertype_of(ip: &[u8]) -> u16 {
    match ip.first().map(|b| b >> 4) {
        Some(6) => ETHERTYPE_IPV6,
        _ => ETHERTYPE_IPV4,
    }
}

/// Wraps an IP packet in Ethernet II (ethertype from the version nibble).
pub fn ip_frame(ip: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(ip.len().saturating_add(14));
    write_ip_frame(&mut buf, ip);
    buf
}

/// Appends an Ethernet II frame around the IP packet `ip`.
pub fn write_ip_frame(buf: &mut Vec<u8>, ip: &[u8]) {
    write_ethernet(buf, DST_MAC, SRC_MAC, &[], ethertype_of(ip));
    buf.extend_from_slice(ip);
}

/// Inserts VLAN tags (outermost first) after the MAC addresses of an
/// Ethernet frame (in front of any tags it already has). A frame shorter
/// than 12 bytes is returned unchanged.
pub fn with_vlans(frame: &[u8], tags: &[VlanTag]) -> Vec<u8> {
    let (Some(macs), Some(rest)) = (frame.get(..12), frame.get(12..)) else {
        return frame.to_vec();
    };
    let mut buf = Vec::with_capacity(frame.len().saturating_add(tags.len().saturating_mul(4)));
    buf.extend_from_slice(macs);
    for v in tags {
        buf.extend_from_slice(&v.tpid.to_be_bytes());
        buf.extend_from_slice(&v.tci().to_be_bytes());
    }
    buf.extend_from_slice(rest);
    buf
}

fn outer_builder<'a>(src: IpAddr, dst: IpAddr, l4: L4Spec) -> FrameBuilder<'a> {
    FrameBuilder::raw(src, dst, 0, &[]).with_l4(l4)
}

/// Appends Ethernet / IP / UDP(`sport` -> 4789) / VXLAN(`vni`, I flag) /
/// `inner_frame` (an Ethernet frame, possibly VLAN-tagged).
pub fn write_vxlan_frame(
    buf: &mut Vec<u8>,
    outer_src: IpAddr,
    outer_dst: IpAddr,
    sport: u16,
    vni: u32,
    inner_frame: &[u8],
) {
    let b = outer_builder(outer_src, outer_dst, L4Spec::Udp { sport, dport: VXLAN_PORT });
    let v = (vni & 0x00ff_ffff).to_be_bytes();
    let vxlan = [0x08, 0, 0, 0, v[1], v[2], v[3], 0];
    write_ethernet(buf, DST_MAC, SRC_MAC, &[], outer_ethertype(&b));
    write_ip_parts(buf, &b, &[&vxlan, inner_frame]);
}

/// VXLAN frame, see [`write_vxlan_frame`].
pub fn vxlan_frame(outer_src: IpAddr, outer_dst: IpAddr, sport: u16, vni: u32, inner_frame: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(inner_frame.len().saturating_add(80));
    write_vxlan_frame(&mut buf, outer_src, outer_dst, sport, vni, inner_frame);
    buf
}

/// Ethernet / IP / UDP(`sport` -> `dport`) / `header` / `inner`: the frame
/// of any UDP tunnel.
pub fn udp_tunnel_frame(
    outer_src: IpAddr,
    outer_dst: IpAddr,
    sport: u16,
    dport: u16,
    header: &[u8],
    inner: &[u8],
) -> Vec<u8> {
    let mut buf = Vec::with_capacity(inner.len().saturating_add(header.len()).saturating_add(80));
    let b = outer_builder(outer_src, outer_dst, L4Spec::Udp { sport, dport });
    write_ethernet(&mut buf, DST_MAC, SRC_MAC, &[], outer_ethertype(&b));
    write_ip_parts(&mut buf, &b, &[header, inner]);
    buf
}

/// A Geneve frame (UDP to 6081): version 0, `options` (padded to whole
/// words, at most 252 bytes used), protocol type `protocol` (0x6558
/// Ethernet, 0x0800 IPv4, 0x86DD IPv6), VNI `vni`, then `inner`.
pub fn geneve_frame(
    outer_src: IpAddr,
    outer_dst: IpAddr,
    sport: u16,
    vni: u32,
    protocol: u16,
    options: &[u8],
    inner: &[u8],
) -> Vec<u8> {
    let mut opts = options.get(..options.len().min(252)).unwrap_or(&[]).to_vec();
    opts.resize(opts.len().saturating_add(3) & !3, 0);
    let words = u8::try_from(opts.len() / 4).unwrap_or(63);
    let p = protocol.to_be_bytes();
    let v = (vni & 0x00ff_ffff).to_be_bytes();
    let mut header = vec![words, 0, p[0], p[1], v[1], v[2], v[3], 0];
    header.extend_from_slice(&opts);
    udp_tunnel_frame(outer_src, outer_dst, sport, crate::GENEVE_PORT, &header, inner)
}

/// A VXLAN-GPE frame (UDP to 4790): I and P flags, next protocol
/// `next_protocol` (1 IPv4, 2 IPv6, 3 Ethernet), VNI `vni`, then `inner`.
pub fn vxlan_gpe_frame(
    outer_src: IpAddr,
    outer_dst: IpAddr,
    sport: u16,
    vni: u32,
    next_protocol: u8,
    inner: &[u8],
) -> Vec<u8> {
    let v = (vni & 0x00ff_ffff).to_be_bytes();
    let header = [0x0c, 0, 0, next_protocol, v[1], v[2], v[3], 0];
    udp_tunnel_frame(outer_src, outer_dst, sport, crate::VXLAN_GPE_PORT, &header, inner)
}

/// A GTP-U G-PDU frame (UDP 2152 -> 2152) carrying `inner_ip` on tunnel
/// `teid`; with `pdu_session` a PDU session container extension header
/// (what 5G user planes send) sits between the header and the packet.
pub fn gtpu_frame(outer_src: IpAddr, outer_dst: IpAddr, teid: u32, pdu_session: bool, inner_ip: &[u8]) -> Vec<u8> {
    let t = teid.to_be_bytes();
    let flags = if pdu_session { 0x34 } else { 0x30 };
    let mut header = vec![flags, crate::gtpu::MSG_GPDU, 0, 0, t[0], t[1], t[2], t[3]];
    if pdu_session {
        // Sequence number, N-PDU number, next type 0x85; the container
        // (one word: length, PDU type / QFI, next type 0).
        header.extend_from_slice(&[0, 0, 0, 0x85, 1, 0x10, 0x09, 0]);
    }
    let len = u16::try_from(header.len().saturating_sub(8).saturating_add(inner_ip.len())).unwrap_or(u16::MAX);
    if let Some(l) = header.get_mut(2..4) {
        l.copy_from_slice(&len.to_be_bytes());
    }
    udp_tunnel_frame(outer_src, outer_dst, crate::GTPU_PORT, crate::GTPU_PORT, &header, inner_ip)
}

fn outer_ethertype(b: &FrameBuilder<'_>) -> u16 {
    if b.is_ipv6() {
        ETHERTYPE_IPV6
    } else {
        ETHERTYPE_IPV4
    }
}

/// Appends Ethernet / IP / GRE (version 0, K bit and key when `key` is
/// Some, protocol type `protocol`) / `inner`.
pub fn write_gre_frame(
    buf: &mut Vec<u8>,
    outer_src: IpAddr,
    outer_dst: IpAddr,
    key: Option<u32>,
    protocol: u16,
    inner: &[u8],
) {
    let b = outer_builder(outer_src, outer_dst, L4Spec::Raw { proto: proto::GRE });
    let p = protocol.to_be_bytes();
    let mut gre = [0u8; 8];
    let gre: &[u8] = match key {
        Some(k) => {
            let k = k.to_be_bytes();
            gre = [0x20, 0, p[0], p[1], k[0], k[1], k[2], k[3]];
            &gre
        }
        None => {
            gre[2] = p[0];
            gre[3] = p[1];
            gre.get(..4).unwrap_or(&[])
        }
    };
    write_ethernet(buf, DST_MAC, SRC_MAC, &[], outer_ethertype(&b));
    write_ip_parts(buf, &b, &[gre, inner]);
}

/// GRE frame carrying the IP packet `inner_ip` (protocol type 0x0800 or
/// 0x86DD from its version nibble).
pub fn gre_frame(outer_src: IpAddr, outer_dst: IpAddr, key: Option<u32>, inner_ip: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(inner_ip.len().saturating_add(80));
    write_gre_frame(&mut buf, outer_src, outer_dst, key, ethertype_of(inner_ip), inner_ip);
    buf
}

/// GRE frame carrying the Ethernet frame `inner_frame` (transparent
/// Ethernet bridging, protocol type 0x6558).
pub fn gre_teb_frame(outer_src: IpAddr, outer_dst: IpAddr, key: Option<u32>, inner_frame: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(inner_frame.len().saturating_add(80));
    write_gre_frame(&mut buf, outer_src, outer_dst, key, ETHERTYPE_TEB, inner_frame);
    buf
}

/// Appends Ethernet / IP(protocol 4 or 41 from the inner version nibble) /
/// `inner_ip`.
pub fn write_ipip_frame(buf: &mut Vec<u8>, outer_src: IpAddr, outer_dst: IpAddr, inner_ip: &[u8]) {
    let proto = if ethertype_of(inner_ip) == ETHERTYPE_IPV6 { proto::IPV6 } else { proto::IPIP };
    let b = outer_builder(outer_src, outer_dst, L4Spec::Raw { proto });
    write_ethernet(buf, DST_MAC, SRC_MAC, &[], outer_ethertype(&b));
    write_ip_parts(buf, &b, &[inner_ip]);
}

/// IP-in-IP frame, see [`write_ipip_frame`].
pub fn ipip_frame(outer_src: IpAddr, outer_dst: IpAddr, inner_ip: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(inner_ip.len().saturating_add(80));
    write_ipip_frame(&mut buf, outer_src, outer_dst, inner_ip);
    buf
}

/// Appends Ethernet / PPPoE session (`session`) / PPP (0x0021 or 0x0057
/// from the inner version nibble) / `inner_ip`.
pub fn write_pppoe_frame(buf: &mut Vec<u8>, session: u16, inner_ip: &[u8]) {
    let ppp: u16 =
        if ethertype_of(inner_ip) == ETHERTYPE_IPV6 { crate::pppoe::PPP_IPV6 } else { crate::pppoe::PPP_IPV4 };
    write_ethernet(buf, DST_MAC, SRC_MAC, &[], ETHERTYPE_PPPOE_SESSION);
    buf.extend_from_slice(&[0x11, 0x00]);
    buf.extend_from_slice(&session.to_be_bytes());
    buf.extend_from_slice(&len16(inner_ip.len().saturating_add(2)).to_be_bytes());
    buf.extend_from_slice(&ppp.to_be_bytes());
    buf.extend_from_slice(inner_ip);
}

/// PPPoE session frame, see [`write_pppoe_frame`].
pub fn pppoe_frame(session: u16, inner_ip: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(inner_ip.len().saturating_add(24));
    write_pppoe_frame(&mut buf, session, inner_ip);
    buf
}

/// The same packet as the Ethernet frame `eth_frame`, for another link type:
/// RawIp drops the Ethernet header and VLAN tags; LinuxSll / LinuxSll2
/// replace the Ethernet header (tags stay, behind a protocol field holding
/// the first TPID) with a cooked header (packet type "to us", ARPHRD_ETHER,
/// the source MAC); Null / Loop replace the Ethernet header and VLAN tags
/// with a BSD loopback header (family 2 for IPv4, 30 for IPv6, 0 for
/// anything else; little-endian for Null, network order for Loop). A frame
/// shorter than 14 bytes is returned unchanged.
pub fn convert_link(eth_frame: &[u8], link: LinkType) -> Vec<u8> {
    let (Some(src_mac), Some(&[t0, t1]), Some(rest)) =
        (eth_frame.get(6..12), eth_frame.get(12..14), eth_frame.get(14..))
    else {
        return eth_frame.to_vec();
    };
    let mut buf = Vec::with_capacity(eth_frame.len().saturating_add(8));
    match link {
        LinkType::Ethernet => buf.extend_from_slice(eth_frame),
        LinkType::RawIp => {
            let start = crate::ethernet::walk_vlans(eth_frame, u16::from_be_bytes([t0, t1]), 14)
                .map_or(14, |s| s.payload_offset);
            buf.extend_from_slice(eth_frame.get(start..).unwrap_or(&[]));
        }
        LinkType::LinuxSll => {
            buf.extend_from_slice(&[0, 0, 0, 1, 0, 6]);
            buf.extend_from_slice(src_mac);
            buf.extend_from_slice(&[0, 0, t0, t1]);
            buf.extend_from_slice(rest);
        }
        LinkType::Null | LinkType::Loop => {
            let stack = crate::ethernet::walk_vlans(eth_frame, u16::from_be_bytes([t0, t1]), 14).ok();
            let (ethertype, start) = stack.map_or((0, 14), |s| (s.ethertype, s.payload_offset));
            let family = match ethertype {
                crate::ethernet::ETHERTYPE_IPV4 => crate::loopback::AF_INET,
                // macOS's value.
                crate::ethernet::ETHERTYPE_IPV6 => 30,
                _ => 0,
            };
            // NULL as a little-endian machine writes it; LOOP in network order.
            if link == LinkType::Null {
                buf.extend_from_slice(&family.to_le_bytes());
            } else {
                buf.extend_from_slice(&family.to_be_bytes());
            }
            buf.extend_from_slice(eth_frame.get(start..).unwrap_or(&[]));
        }
        LinkType::LinuxSll2 => {
            buf.extend_from_slice(&[t0, t1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6]);
            buf.extend_from_slice(src_mac);
            buf.extend_from_slice(&[0, 0]);
            buf.extend_from_slice(rest);
        }
    }
    buf
}

/// Splits the UDP datagram `(sport, dport, payload)` into IPv4 fragments
/// (Ethernet frames), all with identification `id`. Fragment payloads are
/// `frag_payload_size` rounded down to a multiple of 8 (at least 8) except
/// the last. A datagram that fits in one fragment gives one unfragmented
/// packet.
pub fn ipv4_fragments(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    id: u16,
    payload: &[u8],
    frag_payload_size: usize,
) -> Vec<Vec<u8>> {
    let whole =
        FrameBuilder { ident: id, ..FrameBuilder::udp(src.into(), dst.into(), sport, dport, payload) }.ip_packet();
    let header = whole.get(..20).unwrap_or(&[]);
    let datagram = whole.get(20..).unwrap_or(&[]);
    let size = frag_size(frag_payload_size);
    let count = datagram.len().div_ceil(size).max(1);
    let mut frames = Vec::with_capacity(count);
    for (i, chunk) in datagram.chunks(size).enumerate() {
        let offset = i.saturating_mul(size);
        let more = offset.saturating_add(chunk.len()) < datagram.len();
        let mut f = Vec::with_capacity(chunk.len().saturating_add(34));
        write_ethernet(&mut f, DST_MAC, SRC_MAC, &[], ETHERTYPE_IPV4);
        let start = f.len();
        f.extend_from_slice(header);
        put16(&mut f, start.saturating_add(2), len16(chunk.len().saturating_add(20)));
        let fo = u16::try_from(offset / 8).unwrap_or(u16::MAX) & 0x1fff;
        put16(&mut f, start.saturating_add(6), fo | if more { 0x2000 } else { 0 });
        fill_ipv4_checksum(&mut f, start);
        f.extend_from_slice(chunk);
        frames.push(f);
    }
    frames
}

/// Splits the UDP datagram `(sport, dport, payload)` into IPv6 fragments
/// (Ethernet frames: IPv6 header, Fragment header with identification `id`,
/// fragment data). Sizes as for [`ipv4_fragments`]; a datagram that fits in
/// one fragment gives one unfragmented packet.
pub fn ipv6_fragments(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    sport: u16,
    dport: u16,
    id: u32,
    payload: &[u8],
    frag_payload_size: usize,
) -> Vec<Vec<u8>> {
    let whole = FrameBuilder::udp(src.into(), dst.into(), sport, dport, payload).ip_packet();
    let size = frag_size(frag_payload_size);
    let datagram = whole.get(40..).unwrap_or(&[]);
    if datagram.len() <= size {
        return vec![ip_frame(&whole)];
    }
    let mut frames = Vec::with_capacity(datagram.len().div_ceil(size));
    for (i, chunk) in datagram.chunks(size).enumerate() {
        let offset = i.saturating_mul(size);
        let more = offset.saturating_add(chunk.len()) < datagram.len();
        let ext = [Ipv6Ext::Fragment { offset: u16::try_from(offset).unwrap_or(u16::MAX), more, id }];
        let b = FrameBuilder { ipv6_ext: &ext, ..FrameBuilder::raw(src.into(), dst.into(), proto::UDP, chunk) };
        frames.push(b.build());
    }
    frames
}

fn frag_size(requested: usize) -> usize {
    (requested / 8).max(1).saturating_mul(8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::transport_checksum;
    use crate::ipv4::Ipv4Packet;

    fn a4(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn udp4_layout_and_checksums() {
        let f = udp_frame(a4("10.0.0.1"), a4("10.0.0.2"), 1000, 2000, b"abc");
        assert_eq!(f.len(), 14 + 20 + 8 + 3);
        assert_eq!(&f[..6], &DST_MAC);
        assert_eq!(&f[6..12], &SRC_MAC);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ipv4_header_checksum(ip.header()), ip.checksum());
        assert_eq!(ip.total_len(), 31);
        assert_eq!(ip.ttl(), 64);
        let udp = &f[34..];
        assert_eq!(udp[4..6], [0, 11]);
        assert_eq!(transport_checksum(a4("10.0.0.1"), a4("10.0.0.2"), 17, udp), 0);
    }

    #[test]
    fn udp6_and_tcp_checksums() {
        let (s, d) = (a4("2001:db8::1"), a4("2001:db8::2"));
        let f = udp_frame(s, d, 1, 2, b"hello!");
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(transport_checksum(s, d, 17, &f[54..]), 0);
        let f = tcp_frame(s, d, 1, 2, 99, 0x18, b"data");
        assert_eq!(transport_checksum(s, d, 6, &f[54..]), 0);
        let f = tcp_frame(a4("1.1.1.1"), a4("2.2.2.2"), 1, 2, 99, 0x18, b"data");
        assert_eq!(transport_checksum(a4("1.1.1.1"), a4("2.2.2.2"), 6, &f[34..]), 0);
    }

    #[test]
    fn write_appends_and_reuses() {
        let mut buf = Vec::with_capacity(256);
        write_udp_frame(&mut buf, a4("1.1.1.1"), a4("2.2.2.2"), 1, 2, b"x");
        let first = buf.clone();
        let cap = buf.capacity();
        buf.clear();
        write_udp_frame(&mut buf, a4("1.1.1.1"), a4("2.2.2.2"), 1, 2, b"x");
        assert_eq!(buf, first);
        assert_eq!(buf.capacity(), cap);
        write_tcp_frame(&mut buf, a4("1.1.1.1"), a4("2.2.2.2"), 1, 2, 0, 2, b"");
        assert_eq!(buf.len(), first.len() + 54);
    }

    #[test]
    fn ipv4_options_padded() {
        let f = FrameBuilder {
            ipv4_options: &[0x94, 0x04, 0, 0, 1],
            ..FrameBuilder::udp(a4("1.1.1.1"), a4("2.2.2.2"), 1, 2, b"")
        }
        .build();
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.header_len(), 28);
        assert_eq!(ip.options(), &[0x94, 4, 0, 0, 1, 0, 0, 0]);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn mixed_families_map_to_v6() {
        let f = udp_frame(a4("1.2.3.4"), a4("2001:db8::1"), 1, 2, b"");
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(&f[22..38], &"::ffff:1.2.3.4".parse::<Ipv6Addr>().unwrap().octets());
    }

    #[test]
    fn vlans_inserted() {
        let f = udp_frame(a4("1.1.1.1"), a4("2.2.2.2"), 1, 2, b"");
        let t = with_vlans(&f, &[VlanTag::dot1ad(100), VlanTag { pcp: 5, ..VlanTag::dot1q(200) }]);
        assert_eq!(t.len(), f.len() + 8);
        assert_eq!(&t[12..22], &[0x88, 0xa8, 0, 100, 0x81, 0, 0xa0, 200, 0x08, 0]);
        assert_eq!(with_vlans(&[1, 2, 3], &[VlanTag::dot1q(1)]), vec![1, 2, 3]);
    }

    #[test]
    fn ext_header_lengths() {
        assert_eq!(Ipv6Ext::HopByHop { len: 0 }.len(), 8);
        assert_eq!(Ipv6Ext::Routing { len: 9 }.len(), 16);
        assert_eq!(Ipv6Ext::DestOpts { len: 100_000 }.len(), 2048);
        assert_eq!(Ipv6Ext::Auth { len: 0 }.len(), 12);
        assert_eq!(Ipv6Ext::Auth { len: 13 }.len(), 16);
        for len in [8, 16, 256, 264, 2048] {
            let mut b = Vec::new();
            Ipv6Ext::DestOpts { len }.write(&mut b, 17);
            assert_eq!(b.len(), len);
            assert_eq!((b[0], usize::from(b[1])), (17, len / 8 - 1));
            // the options exactly fill the header
            let mut i = 2;
            while i < len {
                i += if b[i] == 0 { 1 } else { 2 + usize::from(b[i + 1]) };
            }
            assert_eq!(i, len);
        }
        let mut b = Vec::new();
        Ipv6Ext::Auth { len: 16 }.write(&mut b, 6);
        assert_eq!((b.len(), b[1]), (16, 2));
    }

    #[test]
    fn fragments_cover_datagram() {
        let payload: Vec<u8> = (0..100u8).collect();
        let frags = ipv4_fragments(Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2), 5, 6, 77, &payload, 30);
        // datagram 108 bytes, 24-byte fragments -> 5
        assert_eq!(frags.len(), 5);
        let mut data = Vec::new();
        for (i, f) in frags.iter().enumerate() {
            let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(ip.ident(), 77);
            assert_eq!(usize::from(ip.frag_offset()), i * 24);
            assert_eq!(ip.more_fragments(), i < 4);
            data.extend_from_slice(ip.payload());
        }
        assert_eq!(data.len(), 108);
        assert_eq!(&data[8..], &payload[..]);
        let one = ipv4_fragments(Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2), 5, 6, 1, b"x", 0);
        assert_eq!(one.len(), 2); // 9-byte datagram, 8-byte fragments
    }

    #[test]
    fn convert_link_types() {
        let f = with_vlans(&udp_frame(a4("1.1.1.1"), a4("2.2.2.2"), 1, 2, b"x"), &[VlanTag::dot1q(5)]);
        assert_eq!(convert_link(&f, LinkType::Ethernet), f);
        let raw = convert_link(&f, LinkType::RawIp);
        assert_eq!(raw, f[18..]);
        let sll = convert_link(&f, LinkType::LinuxSll);
        assert_eq!(sll.len(), f.len() + 2);
        assert_eq!(&sll[14..16], &[0x81, 0x00]);
        let sll2 = convert_link(&f, LinkType::LinuxSll2);
        assert_eq!(sll2.len(), f.len() + 6);
        assert_eq!(&sll2[..2], &[0x81, 0x00]);
        assert_eq!(convert_link(&[1, 2], LinkType::RawIp), vec![1, 2]);
        let null = convert_link(&f, LinkType::Null);
        assert_eq!((&null[..4], &null[4..]), (&[2, 0, 0, 0][..], &f[18..]));
        let lo = convert_link(&f, LinkType::Loop);
        assert_eq!((&lo[..4], &lo[4..]), (&[0, 0, 0, 2][..], &f[18..]));
    }
}
