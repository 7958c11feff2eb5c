//! Transmit offloads done in software: completing partial checksums and
//! segmenting GSO super-frames.
//!
//! A Linux host with transmit offloads on leaves two jobs to its device. A
//! software bridge that copies frames out of the kernel (AF_XDP on a veth,
//! AF_PACKET) receives them undone and without the metadata that says so:
//!
//! * **Partial checksums** (`CHECKSUM_PARTIAL`). The TCP / UDP checksum
//!   field holds only the folded pseudo-header sum, not complemented
//!   (`th->check = ~csum_tcpudp_magic(saddr, daddr, len, proto, 0)`), and
//!   `csum_start` / `csum_offset` say where the device must complete it.
//!   [`complete_partial`] does what the device would, given that metadata;
//!   [`repair_partial`] applies a rule for frames that arrive without it.
//! * **GSO super-frames**: one set of headers in front of up to 64 KiB of
//!   payload, with `gso_size` (the MSS) and `gso_type` in the metadata.
//!   [`segment`] splits one into wire-sized frames as Linux's software GSO
//!   does (`tcp_gso_segment`, `inet_gso_segment`, `ipv6_gso_segment`,
//!   `__udp_gso_segment`).
//!
//! [`locate_l4`] is the walk both share: Ethernet II, at most
//! [`crate::MAX_VLAN_DEPTH`] VLAN tags, IPv4 (options included) or IPv6
//! (Hop-by-Hop, Routing and Destination Options headers, at most
//! [`crate::MAX_IPV6_EXT_HEADERS`]), then TCP or UDP directly. Lengths come
//! from the IP header (IPv4 total length, IPv6 payload length) and, for UDP,
//! its length field, never from the frame's length: bytes after them are
//! Ethernet padding and are neither summed nor copied.
//!
//! # The repair rule (frames without metadata)
//!
//! For a TCP or UDP packet over IPv4 / IPv6 that is not a fragment,
//! [`repair_partial`] decides, in this order:
//!
//! 1. IPv4 UDP with checksum 0: the sender sent none ([`Repair::NoChecksum`]).
//! 2. The field is not the folded pseudo-header sum (in ones'-complement
//!    arithmetic, where 0x0000 and 0xffff are the same value): the
//!    checksum is not partial ([`Repair::NotPartial`]), left as it is and
//!    not verified. This is the common case, and it costs the header walk
//!    and the pseudo-header sum only (about 40 bytes), not a pass over the
//!    payload.
//! 3. The checksum verifies: [`Repair::Valid`], left as it is.
//! 4. Otherwise the frame is a partial one and is completed
//!    ([`Repair::Completed`]).
//!
//! Why this is right:
//!
//! * A frame with a complete checksum is never modified: its field is not
//!   the pseudo-header sum (step 2), or it is and the checksum verifies
//!   (step 3).
//! * A partial frame holds exactly the pseudo-header sum, so it passes step
//!   2 and is completed in step 4, unless it verifies as it is: then the
//!   pseudo-header sum already is the complete checksum (the checksum that
//!   verifies is unique up to 0x0000 = 0xffff), and forwarding it as is is
//!   correct too.
//! * A frame that does not verify was corrupted (in memory, on a wire, or by
//!   its sender) and is forwarded untouched, for the receiver to drop,
//!   unless its field happens to equal its pseudo-header sum (for a field
//!   that is uniformly random after the damage: 1 corrupt frame in 65,536):
//!   step 4 then "completes" it and the receiver accepts corrupt data.
//!   A bridge with the kernel's per-frame metadata (`csum_start`, as
//!   AF_PACKET's `PACKET_VNET_HDR` delivers) should call
//!   [`complete_partial`] instead and not guess.
//!
//! The IPv4 header checksum is neither checked nor changed: Linux always
//! fills it in software.
//!
//! # Pseudo-header destination
//!
//! The pseudo header carries the *final* destination (RFC 9293 3.1, RFC 8200
//! 8.1), which differs from the IP header's destination while a source route
//! is under way. It is taken from an IPv4 LSRR / SSRR option with addresses
//! left (its last address), or from an IPv6 Routing header with segments
//! left: type 0 (its last address), type 2 (the home address) or type 4, SRH
//! (segment list\[0\]). Any other Routing type with segments left is
//! [`OffloadError::UnknownRoute`].
//!
//! # Limits
//!
//! * [`segment`] accepts `gso_size` >= [`MIN_GSO_SIZE`], yields at most
//!   [`MAX_GSO_SEGMENTS`] frames and copies at most [`MAX_GSO_HEADER_LEN`]
//!   bytes of headers into each, so one call appends at most
//!   `MAX_GSO_SEGMENTS * MAX_GSO_HEADER_LEN` bytes plus the payload (about
//!   1.1 MiB). Beyond a limit it returns an error and appends nothing.
//! * Packets whose IP length field is 0 (IPv6 jumbograms, BIG TCP) are
//!   [`OffloadError::Malformed`]: keep the sender's `gso_max_size` at its
//!   64 KiB default.
//! * Output frames are not padded to the Ethernet minimum; the transmitter
//!   pads.
//! * Tunnelled packets (an offloaded checksum of the inner packet, UDP
//!   tunnel GSO) are not handled: the walk stops at the outer L4 header.
//!
//! # Cost and thread safety
//!
//! Every function here is pure (no state, no allocation except growing the
//! caller's vectors in [`segment`]) and may be called from any thread.
//! [`repair_partial`] reads the L4 segment once to verify it and, for a
//! partial frame, once more to complete it; [`segment`] copies the frame and
//! sums each output segment once.
//!
//! # Example
//!
//! ```
//! use flowsteer_wire::{build, offload};
//!
//! let mut frame = build::udp_frame("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 1000, 53, b"query");
//! assert_eq!(offload::repair_partial(&mut frame), offload::Repair::NotPartial);
//!
//! // What a Linux sender with checksum offload hands over: the pseudo-header sum.
//! let loc = offload::locate_l4(&frame).unwrap();
//! let at = loc.checksum_at();
//! let full = [frame[at], frame[at + 1]];
//! frame[at..at + 2].copy_from_slice(&loc.partial_checksum().to_be_bytes());
//! assert_eq!(offload::repair_partial(&mut frame), offload::Repair::Completed);
//! assert_eq!([frame[at], frame[at + 1]], full);
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum::{fold, pseudo_header_sum, sum};
use crate::error::ParseError;
use crate::ethernet::{walk_vlans, EthernetFrame, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::ipv4::Ipv4Packet;
use crate::ipv6::{ExtHeader, Ipv6Packet, NH_DEST_OPTS, NH_FRAGMENT, NH_HOP_BY_HOP, NH_ROUTING};
use crate::limits::MAX_IPV6_EXT_HEADERS;
use crate::proto;
use crate::tcp::{TcpPacket, CWR, FIN, PSH};
use crate::udp::UdpPacket;

/// Smallest `gso_size` [`segment`] accepts: Linux's `TCP_MIN_GSO_SIZE`
/// (`TCP_MIN_SND_MSS` 48 less 40 bytes of TCP options). It bounds the work
/// per payload byte.
pub const MIN_GSO_SIZE: usize = 8;

/// Most frames [`segment`] makes of one super-frame. Linux's senders stay
/// below it: TCP's smallest MSS (48) splits 64 KiB into 1366 segments, and
/// UDP GSO allows at most 128 (`UDP_MAX_SEGMENTS`).
pub const MAX_GSO_SEGMENTS: usize = 2048;

/// Most header bytes (link, IP and L4 headers) [`segment`] copies into
/// every frame. The largest plain TCP header block is 22 + 60 + 60 = 142
/// bytes over IPv4; the rest leaves room for IPv6 extension headers.
pub const MAX_GSO_HEADER_LEN: usize = 512;

/// IPv4 total length field.
const IPV4_TOTAL_LEN: usize = 2;
/// IPv4 identification field.
const IPV4_IDENT: usize = 4;
/// IPv4 header checksum field.
const IPV4_CHECKSUM: usize = 10;
/// IPv6 payload length field.
const IPV6_PAYLOAD_LEN: usize = 4;
/// TCP sequence number.
const TCP_SEQ: usize = 4;
/// TCP flag byte.
const TCP_FLAGS: usize = 13;
/// TCP checksum field (Linux's `csum_offset` for TCP).
const TCP_CHECKSUM: usize = 16;
/// UDP length field.
const UDP_LEN: usize = 4;
/// UDP checksum field (Linux's `csum_offset` for UDP).
const UDP_CHECKSUM: usize = 6;

/// IPv4 option: end of option list.
const IPOPT_END: u8 = 0;
/// IPv4 option: no operation (one byte).
const IPOPT_NOOP: u8 = 1;
/// IPv4 option: loose source and record route.
const IPOPT_LSRR: u8 = 131;
/// IPv4 option: strict source and record route.
const IPOPT_SSRR: u8 = 137;
/// Offset of the pointer in a source route option.
const SRR_POINTER: usize = 2;
/// Smallest valid source route pointer (the first address, 1-based).
const SRR_MIN_POINTER: usize = 4;

/// Offset of the routing type in an IPv6 Routing header.
const RH_TYPE: usize = 2;
/// Offset of segments left in an IPv6 Routing header.
const RH_SEGMENTS_LEFT: usize = 3;
/// Offset of the first address in Routing headers of types 0, 2 and 4.
const RH_ADDRESSES: usize = 8;
/// Routing type 0 (deprecated source route, RFC 5095): final destination last.
const RH_TYPE_SOURCE_ROUTE: u8 = 0;
/// Routing type 2 (Mobile IPv6): the home address is the final destination.
const RH_TYPE_MOBILE: u8 = 2;
/// Routing type 4, Segment Routing Header (RFC 8754): segment list\[0\] is
/// the final destination.
const RH_TYPE_SRH: u8 = 4;

/// Why a frame could not be located, completed or segmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OffloadError {
    /// [`complete_partial`]: `csum_start` past the frame, or the checksum
    /// field not wholly inside it.
    OutOfFrame,
    /// The frame ends inside its link or IP headers, or before the length
    /// its IP header gives.
    Truncated,
    /// Inconsistent headers: IP version, IHL or length fields, an IPv6
    /// extension header past the payload length or out of order (more than
    /// [`crate::MAX_IPV6_EXT_HEADERS`], Hop-by-Hop not first), a TCP data
    /// offset below 5 or past the segment, a UDP length below 8 or past the
    /// IP payload, an IPv4 option running past the header.
    Malformed,
    /// Not TCP or UDP directly over IPv4 / IPv6: another ethertype (or more
    /// than [`crate::MAX_VLAN_DEPTH`] VLAN tags), another protocol, or an
    /// IPv6 header the walk does not follow (AH, ESP).
    NotL4,
    /// An IPv6 Routing header with segments left whose type does not say
    /// where the final destination, which the pseudo header uses, is.
    UnknownRoute,
    /// An IP fragment (IPv4 MF or offset, any IPv6 Fragment header): its L4
    /// checksum spans fragments.
    Fragment,
    /// [`segment`]: the frame is not what the [`GsoKind`] says (TCP over
    /// IPv4, TCP over IPv6, UDP).
    WrongKind,
    /// [`segment`]: `gso_size` below [`MIN_GSO_SIZE`] (0 included).
    GsoSizeTooSmall,
    /// [`segment`]: more than [`MAX_GSO_SEGMENTS`] frames would result.
    TooManySegments,
    /// [`segment`]: the headers exceed [`MAX_GSO_HEADER_LEN`].
    HeadersTooLong,
}

impl OffloadError {
    /// Number of errors: one counter slot each ([`OffloadError::index`]).
    pub const COUNT: usize = 10;

    /// Every error, in [`OffloadError::index`] order.
    pub const ALL: [OffloadError; OffloadError::COUNT] = [
        OffloadError::OutOfFrame,
        OffloadError::Truncated,
        OffloadError::Malformed,
        OffloadError::NotL4,
        OffloadError::UnknownRoute,
        OffloadError::Fragment,
        OffloadError::WrongKind,
        OffloadError::GsoSizeTooSmall,
        OffloadError::TooManySegments,
        OffloadError::HeadersTooLong,
    ];

    /// This error's counter slot, in `0..OffloadError::COUNT`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The stable counter name (`out_of_frame`, `truncated`, ...).
    pub const fn reason(self) -> &'static str {
        match self {
            OffloadError::OutOfFrame => "out_of_frame",
            OffloadError::Truncated => "truncated",
            OffloadError::Malformed => "malformed",
            OffloadError::NotL4 => "not_l4",
            OffloadError::UnknownRoute => "unknown_route",
            OffloadError::Fragment => "fragment",
            OffloadError::WrongKind => "wrong_kind",
            OffloadError::GsoSizeTooSmall => "gso_size_too_small",
            OffloadError::TooManySegments => "too_many_segments",
            OffloadError::HeadersTooLong => "headers_too_long",
        }
    }

    /// The error of a header view's checked constructor, for headers the
    /// frame must hold (link and IP headers).
    fn from_parse(e: ParseError) -> OffloadError {
        match e {
            ParseError::Truncated { .. } => OffloadError::Truncated,
            ParseError::TooManyVlans => OffloadError::NotL4,
            _ => OffloadError::Malformed,
        }
    }
}

impl fmt::Display for OffloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for OffloadError {}

/// What [`repair_partial`] found and did; see the module docs for the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Repair {
    /// The field is not the pseudo-header sum: a complete checksum (or a
    /// corrupt one, for the receiver to drop); untouched, not verified.
    NotPartial,
    /// The field is the pseudo-header sum and the checksum verifies as it
    /// is; untouched.
    Valid,
    /// The field held the pseudo-header sum; the checksum is now complete.
    Completed,
    /// IPv4 UDP with checksum 0 (none sent); untouched.
    NoChecksum,
    /// An IP fragment; untouched.
    Fragment,
    /// Not TCP or UDP over IPv4 / IPv6 that this rule checks (another
    /// ethertype or protocol, AH, ESP, more than two VLAN tags, a Routing
    /// header of unknown type); untouched.
    NotL4,
    /// Truncated or inconsistent headers ([`OffloadError::Truncated`],
    /// [`OffloadError::Malformed`]); untouched.
    Malformed,
}

impl Repair {
    /// Number of outcomes: one counter slot each ([`Repair::index`]).
    pub const COUNT: usize = 7;

    /// Every outcome, in [`Repair::index`] order.
    pub const ALL: [Repair; Repair::COUNT] = [
        Repair::NotPartial,
        Repair::Valid,
        Repair::Completed,
        Repair::NoChecksum,
        Repair::Fragment,
        Repair::NotL4,
        Repair::Malformed,
    ];

    /// This outcome's counter slot, in `0..Repair::COUNT`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The stable counter name (`valid`, `completed`, ...).
    pub const fn reason(self) -> &'static str {
        match self {
            Repair::NotPartial => "not_partial",
            Repair::Valid => "valid",
            Repair::Completed => "completed",
            Repair::NoChecksum => "no_checksum",
            Repair::Fragment => "fragment",
            Repair::NotL4 => "not_l4",
            Repair::Malformed => "malformed",
        }
    }

    fn from_error(e: OffloadError) -> Repair {
        match e {
            OffloadError::Fragment => Repair::Fragment,
            OffloadError::NotL4 | OffloadError::UnknownRoute => Repair::NotL4,
            _ => Repair::Malformed,
        }
    }
}

impl fmt::Display for Repair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// Where a TCP segment or UDP datagram sits in a frame ([`locate_l4`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L4Location {
    /// Offset of the IP header.
    pub l3_offset: usize,
    /// Offset of the TCP / UDP header (after any IPv6 extension headers).
    pub l4_offset: usize,
    /// TCP / UDP header length (UDP: 8, TCP: 20..=60).
    pub l4_header_len: usize,
    /// End of the segment (TCP: of the IP packet; UDP: of its length field).
    /// Bytes from here on are padding.
    pub l4_end: usize,
    /// [`proto::TCP`] or [`proto::UDP`].
    pub proto: u8,
    /// Source address of the pseudo header.
    pub src: IpAddr,
    /// Destination address of the pseudo header: the final destination,
    /// see the module docs.
    pub dst: IpAddr,
}

impl L4Location {
    /// True over IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.src.is_ipv6()
    }

    /// Length of the TCP segment / UDP datagram, header included.
    pub fn l4_len(&self) -> usize {
        self.l4_end.saturating_sub(self.l4_offset)
    }

    /// Offset of the payload (after the TCP / UDP header).
    pub fn payload_offset(&self) -> usize {
        self.l4_offset.saturating_add(self.l4_header_len)
    }

    /// Offset of the checksum field from the L4 header: Linux's
    /// `csum_offset` (TCP 16, UDP 6).
    pub fn csum_offset(&self) -> usize {
        if self.proto == proto::TCP {
            TCP_CHECKSUM
        } else {
            UDP_CHECKSUM
        }
    }

    /// Offset of the checksum field in the frame.
    pub fn checksum_at(&self) -> usize {
        self.l4_offset.saturating_add(self.csum_offset())
    }

    /// The unfolded pseudo-header sum of this segment.
    pub fn pseudo_header_sum(&self) -> u64 {
        let len = u32::try_from(self.l4_len()).unwrap_or(u32::MAX);
        pseudo_header_sum(self.src, self.dst, self.proto, len)
    }

    /// The value a Linux sender leaves in the checksum field under
    /// `CHECKSUM_PARTIAL`: the folded pseudo-header sum, not complemented.
    pub fn partial_checksum(&self) -> u16 {
        !fold(self.pseudo_header_sum())
    }
}

/// The kind of GSO super-frame ([`segment`]), Linux's `gso_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GsoKind {
    /// TCP over IPv4 (`SKB_GSO_TCPV4`).
    TcpV4,
    /// TCP over IPv6 (`SKB_GSO_TCPV6`).
    TcpV6,
    /// UDP over IPv4 or IPv6 (`SKB_GSO_UDP_L4`): a super-datagram split into
    /// `gso_size`-byte datagrams, each with its own UDP header.
    Udp,
}

impl GsoKind {
    fn matches(self, loc: &L4Location) -> bool {
        match self {
            GsoKind::TcpV4 => loc.proto == proto::TCP && !loc.is_ipv6(),
            GsoKind::TcpV6 => loc.proto == proto::TCP && loc.is_ipv6(),
            GsoKind::Udp => loc.proto == proto::UDP,
        }
    }
}

/// The IP layer found by the walk.
struct IpLayer {
    l3_offset: usize,
    l4_offset: usize,
    /// End of the IP packet (start of any padding).
    end: usize,
    proto: u8,
    src: IpAddr,
    dst: IpAddr,
}

/// Finds the TCP or UDP header of an Ethernet frame, see the module docs.
///
/// Errors: [`OffloadError::Truncated`], [`OffloadError::Malformed`],
/// [`OffloadError::NotL4`], [`OffloadError::UnknownRoute`],
/// [`OffloadError::Fragment`]. Never panics.
pub fn locate_l4(frame: &[u8]) -> Result<L4Location, OffloadError> {
    let eth = EthernetFrame::new_checked(frame).map_err(OffloadError::from_parse)?;
    let vlans = walk_vlans(frame, eth.ethertype(), EthernetFrame::HEADER_LEN).map_err(OffloadError::from_parse)?;
    let ip = match vlans.ethertype {
        ETHERTYPE_IPV4 => ipv4_layer(frame, vlans.payload_offset)?,
        ETHERTYPE_IPV6 => ipv6_layer(frame, vlans.payload_offset)?,
        _ => return Err(OffloadError::NotL4),
    };
    l4_layer(frame, &ip)
}

fn offset_add(a: usize, b: usize) -> Result<usize, OffloadError> {
    a.checked_add(b).ok_or(OffloadError::Malformed)
}

fn ipv4_layer(frame: &[u8], l3_offset: usize) -> Result<IpLayer, OffloadError> {
    let ip = Ipv4Packet::new_checked(frame.get(l3_offset..).unwrap_or(&[])).map_err(OffloadError::from_parse)?;
    if ip.is_truncated() {
        return Err(OffloadError::Truncated);
    }
    if ip.is_fragment() {
        return Err(OffloadError::Fragment);
    }
    Ok(IpLayer {
        l3_offset,
        l4_offset: offset_add(l3_offset, ip.header_len())?,
        end: offset_add(l3_offset, usize::from(ip.total_len()))?,
        proto: ip.protocol(),
        src: IpAddr::V4(ip.src_addr()),
        dst: IpAddr::V4(ipv4_final_destination(ip.options(), ip.dst_addr())?),
    })
}

/// The final destination of an IPv4 packet: the last address of a source
/// route option with addresses left, else the header's destination.
fn ipv4_final_destination(options: &[u8], header_dst: Ipv4Addr) -> Result<Ipv4Addr, OffloadError> {
    let mut rest = options;
    while let Some(&kind) = rest.first() {
        let len = match (kind, rest.get(1)) {
            (IPOPT_END, _) => break,
            (IPOPT_NOOP, _) => 1,
            (_, Some(&len)) if len >= 2 => usize::from(len),
            _ => return Err(OffloadError::Malformed),
        };
        let option = rest.get(..len).ok_or(OffloadError::Malformed)?;
        if matches!(kind, IPOPT_LSRR | IPOPT_SSRR) {
            if let Some(dst) = source_route_final(option) {
                return Ok(dst);
            }
        }
        rest = rest.get(len..).unwrap_or(&[]);
    }
    Ok(header_dst)
}

/// The last address of an LSRR / SSRR option, when its pointer says
/// addresses are left (otherwise the header's destination is final).
fn source_route_final(option: &[u8]) -> Option<Ipv4Addr> {
    let pointer = usize::from(*option.get(SRR_POINTER)?);
    if pointer < SRR_MIN_POINTER || pointer.saturating_add(3) > option.len() {
        return None;
    }
    let last = option.len().checked_sub(4)?;
    let octets: [u8; 4] = option.get(last..)?.try_into().ok()?;
    Some(Ipv4Addr::from(octets))
}

fn ipv6_layer(frame: &[u8], l3_offset: usize) -> Result<IpLayer, OffloadError> {
    let ip = Ipv6Packet::new_checked(frame.get(l3_offset..).unwrap_or(&[])).map_err(OffloadError::from_parse)?;
    if ip.is_truncated() {
        return Err(OffloadError::Truncated);
    }
    let packet = ip.packet();
    let mut next = ip.next_header();
    let mut pos = Ipv6Packet::HEADER_LEN;
    let mut dst = ip.dst_addr();
    let mut walked = 0usize;
    loop {
        match next {
            NH_FRAGMENT => return Err(OffloadError::Fragment),
            NH_HOP_BY_HOP if walked != 0 => return Err(OffloadError::Malformed),
            NH_HOP_BY_HOP | NH_ROUTING | NH_DEST_OPTS => {}
            _ => break,
        }
        if walked == MAX_IPV6_EXT_HEADERS {
            return Err(OffloadError::Malformed);
        }
        walked = walked.saturating_add(1);
        // Bounded by the payload length: an extension header past it is malformed.
        let ext =
            ExtHeader::new_checked(next, packet.get(pos..).unwrap_or(&[])).map_err(|_| OffloadError::Malformed)?;
        let end = offset_add(pos, ext.len())?;
        if next == NH_ROUTING {
            if let Some(final_dst) = routing_final_destination(packet.get(pos..end).unwrap_or(&[]))? {
                dst = final_dst;
            }
        }
        next = ext.next_header();
        pos = end;
    }
    Ok(IpLayer {
        l3_offset,
        l4_offset: offset_add(l3_offset, pos)?,
        end: offset_add(l3_offset, packet.len())?,
        proto: next,
        src: IpAddr::V6(ip.src_addr()),
        dst: IpAddr::V6(dst),
    })
}

/// The final destination a Routing header names while segments are left
/// (`None` when none are: the header's destination is final).
fn routing_final_destination(header: &[u8]) -> Result<Option<Ipv6Addr>, OffloadError> {
    let (Some(&kind), Some(&left)) = (header.get(RH_TYPE), header.get(RH_SEGMENTS_LEFT)) else {
        return Err(OffloadError::Malformed);
    };
    if left == 0 {
        return Ok(None);
    }
    let at = match kind {
        RH_TYPE_SOURCE_ROUTE => header.len().checked_sub(16).filter(|&at| at >= RH_ADDRESSES),
        RH_TYPE_MOBILE | RH_TYPE_SRH => Some(RH_ADDRESSES),
        _ => return Err(OffloadError::UnknownRoute),
    };
    let octets: Option<[u8; 16]> =
        at.and_then(|at| header.get(at..at.checked_add(16)?)).and_then(|a| a.try_into().ok());
    octets.map(|o| Some(Ipv6Addr::from(o))).ok_or(OffloadError::Malformed)
}

fn l4_layer(frame: &[u8], ip: &IpLayer) -> Result<L4Location, OffloadError> {
    // Headers that do not fit the IP length are malformed, not truncated:
    // the frame holds all of the IP packet.
    let segment = frame.get(ip.l4_offset..ip.end).ok_or(OffloadError::Malformed)?;
    let (l4_header_len, l4_len) = match ip.proto {
        proto::TCP => {
            let tcp = TcpPacket::new_checked(segment).map_err(|_| OffloadError::Malformed)?;
            (tcp.header_len(), segment.len())
        }
        proto::UDP => {
            let udp = UdpPacket::new_checked(segment).map_err(|_| OffloadError::Malformed)?;
            let len = usize::from(udp.len_field());
            if len < UdpPacket::HEADER_LEN || len > segment.len() {
                return Err(OffloadError::Malformed);
            }
            (UdpPacket::HEADER_LEN, len)
        }
        _ => return Err(OffloadError::NotL4),
    };
    Ok(L4Location {
        l3_offset: ip.l3_offset,
        l4_offset: ip.l4_offset,
        l4_header_len,
        l4_end: offset_add(ip.l4_offset, l4_len)?,
        proto: ip.proto,
        src: ip.src,
        dst: ip.dst,
    })
}

fn read_u16(buf: &[u8], at: usize) -> Option<u16> {
    let bytes: [u8; 2] = buf.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(u16::from_be_bytes(bytes))
}

fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

/// Stores `value` big-endian at `at`; a field outside `buf` is left alone
/// (callers check the offsets first).
fn write_bytes<const N: usize>(buf: &mut [u8], at: usize, value: [u8; N]) {
    if let Some(field) = at.checked_add(N).and_then(|end| buf.get_mut(at..end)) {
        field.copy_from_slice(&value);
    }
}

/// Equality of two 16-bit values in ones'-complement arithmetic, where
/// 0x0000 and 0xffff both stand for zero.
fn ones_complement_eq(a: u16, b: u16) -> bool {
    let normal = |x: u16| if x == 0xffff { 0 } else { x };
    normal(a) == normal(b)
}

/// Completes a partial checksum as a device would: the ones'-complement
/// sum of `frame[csum_start..]` (the checksum field and the pseudo-header
/// sum it holds included), folded and complemented, stored big-endian at
/// `csum_start + csum_offset`.
///
/// A result of 0 is stored as 0xffff, whatever the protocol, as Linux's
/// `skb_checksum_help` does (`csum_fold(csum) ?: CSUM_MANGLED_0`): UDP
/// requires it (0 means "no checksum"), and for TCP and every other
/// Internet checksum the two are the same ones'-complement value, so the
/// field verifies either way. The caller need not say which protocol it is.
///
/// `frame` must end where the segment ends: pass `&mut frame[..end]` when
/// the frame may carry Ethernet padding ([`L4Location::l4_end`]).
///
/// Errors: [`OffloadError::OutOfFrame`] when `csum_start` is past the frame
/// or the 2-byte field is not inside it; the frame is then untouched.
pub fn complete_partial(frame: &mut [u8], csum_start: usize, csum_offset: usize) -> Result<(), OffloadError> {
    let field = csum_start.checked_add(csum_offset).ok_or(OffloadError::OutOfFrame)?;
    let field_end = field.checked_add(2).ok_or(OffloadError::OutOfFrame)?;
    if field_end > frame.len() {
        return Err(OffloadError::OutOfFrame);
    }
    let covered = frame.get(csum_start..).ok_or(OffloadError::OutOfFrame)?;
    let checksum = match fold(sum(covered, 0)) {
        0 => 0xffff,
        c => c,
    };
    write_bytes(frame, field, checksum.to_be_bytes());
    Ok(())
}

/// Applies the repair rule (module docs) to a frame that arrived without
/// offload metadata: completes its TCP / UDP checksum when the field holds
/// the pseudo-header sum, and leaves the frame untouched otherwise.
///
/// Never panics; the returned [`Repair`] is meant to be counted.
pub fn repair_partial(frame: &mut [u8]) -> Repair {
    let loc = match locate_l4(frame) {
        Ok(loc) => loc,
        Err(e) => return Repair::from_error(e),
    };
    let Some(segment) = frame.get_mut(loc.l4_offset..loc.l4_end) else {
        return Repair::Malformed;
    };
    let Some(field) = read_u16(segment, loc.csum_offset()) else {
        return Repair::Malformed;
    };
    if field == 0 && loc.proto == proto::UDP && !loc.is_ipv6() {
        return Repair::NoChecksum;
    }
    if !ones_complement_eq(field, loc.partial_checksum()) {
        return Repair::NotPartial;
    }
    if fold(sum(segment, loc.pseudo_header_sum())) == 0 {
        return Repair::Valid;
    }
    match complete_partial(segment, 0, loc.csum_offset()) {
        Ok(()) => Repair::Completed,
        Err(_) => Repair::Malformed,
    }
}

/// Splits a GSO super-frame into frames of at most `gso_size` payload
/// bytes, as Linux's software GSO does.
///
/// Each frame is appended to `out`, back to back, and its length to `lens`;
/// the return value is their number. Every frame gets a copy of the link
/// (VLAN tags kept), IP and L4 headers and the next `gso_size` bytes of
/// payload (the last frame the rest), then:
///
/// * IPv4: total length; identification = the super-frame's plus the
///   frame's index (wrapping; also with DF set, as Linux without
///   `SKB_GSO_TCP_FIXEDID`); header checksum recomputed.
/// * IPv6: payload length (extension headers are copied into every frame).
/// * TCP: sequence number advanced by the payload offset; CWR kept on the
///   first frame only, FIN and PSH on the last only; other flags, options
///   and the urgent pointer copied; checksum computed in full.
/// * UDP: length and checksum computed in full (0 sent as 0xffff).
///
/// The super-frame's L4 checksum field is ignored (it may hold a partial
/// sum or anything). A payload of at most `gso_size` bytes yields one frame,
/// with its checksums completed; an empty payload yields headers only.
///
/// Errors, with `out` and `lens` untouched: [`OffloadError::GsoSizeTooSmall`],
/// [`OffloadError::WrongKind`], [`OffloadError::TooManySegments`],
/// [`OffloadError::HeadersTooLong`] and those of [`locate_l4`] (truncation,
/// fragments, ...). Never panics.
pub fn segment(
    frame: &[u8],
    kind: GsoKind,
    gso_size: usize,
    out: &mut Vec<u8>,
    lens: &mut Vec<usize>,
) -> Result<usize, OffloadError> {
    if gso_size < MIN_GSO_SIZE {
        return Err(OffloadError::GsoSizeTooSmall);
    }
    let loc = locate_l4(frame)?;
    if !kind.matches(&loc) {
        return Err(OffloadError::WrongKind);
    }
    let headers = frame.get(..loc.payload_offset()).ok_or(OffloadError::Malformed)?;
    if headers.len() > MAX_GSO_HEADER_LEN {
        return Err(OffloadError::HeadersTooLong);
    }
    let payload = frame.get(loc.payload_offset()..loc.l4_end).ok_or(OffloadError::Malformed)?;
    let count = payload.len().div_ceil(gso_size).max(1);
    if count > MAX_GSO_SEGMENTS {
        return Err(OffloadError::TooManySegments);
    }
    out.reserve(count.saturating_mul(headers.len()).saturating_add(payload.len()));
    lens.reserve(count);
    for index in 0..count {
        let offset = index.saturating_mul(gso_size);
        let chunk_end = offset.saturating_add(gso_size).min(payload.len());
        let chunk = payload.get(offset..chunk_end).unwrap_or(&[]);
        let at = SegmentAt { index, count, offset };
        lens.push(write_segment(out, headers, chunk, &loc, at));
    }
    Ok(count)
}

/// Which frame of a super-frame is being written.
#[derive(Clone, Copy)]
struct SegmentAt {
    /// 0-based index.
    index: usize,
    /// Number of frames.
    count: usize,
    /// Offset of its payload in the super-frame's payload.
    offset: usize,
}

impl SegmentAt {
    fn is_first(self) -> bool {
        self.index == 0
    }

    fn is_last(self) -> bool {
        self.index.saturating_add(1) == self.count
    }
}

/// Appends one frame (headers + chunk) to `out`, fixes its headers and
/// returns its length.
fn write_segment(out: &mut Vec<u8>, headers: &[u8], chunk: &[u8], loc: &L4Location, at: SegmentAt) -> usize {
    let start = out.len();
    out.extend_from_slice(headers);
    out.extend_from_slice(chunk);
    let Some(frame) = out.get_mut(start..) else {
        return 0;
    };
    if let Some(ip) = frame.get_mut(loc.l3_offset..) {
        if loc.is_ipv6() {
            fix_ipv6(ip);
        } else {
            fix_ipv4(ip, at);
        }
    }
    let l4_offset = loc.l4_offset;
    if let Some(l4) = frame.get_mut(l4_offset..) {
        if loc.proto == proto::TCP {
            fix_tcp(l4, at);
        } else {
            write_bytes(l4, UDP_LEN, len16(l4.len()).to_be_bytes());
        }
        fill_l4_checksum(l4, loc);
    }
    frame.len()
}

/// A segment's length for a 16-bit field. It never exceeds the
/// super-frame's own field, so the fallback is unreachable.
fn len16(len: usize) -> u16 {
    u16::try_from(len).unwrap_or(u16::MAX)
}

/// IPv4 header of one segment: total length, identification, checksum.
fn fix_ipv4(ip: &mut [u8], at: SegmentAt) {
    write_bytes(ip, IPV4_TOTAL_LEN, len16(ip.len()).to_be_bytes());
    // The id wraps, and so may the index: truncating it is intended.
    let ident = read_u16(ip, IPV4_IDENT).unwrap_or(0).wrapping_add(at.index as u16);
    write_bytes(ip, IPV4_IDENT, ident.to_be_bytes());
    write_bytes(ip, IPV4_CHECKSUM, [0, 0]);
    let header_len = ip.first().map_or(0, |b| usize::from(b & 0x0f).saturating_mul(4));
    let checksum = fold(sum(ip.get(..header_len).unwrap_or(&[]), 0));
    write_bytes(ip, IPV4_CHECKSUM, checksum.to_be_bytes());
}

/// IPv6 header of one segment: payload length.
fn fix_ipv6(ip: &mut [u8]) {
    let payload_len = ip.len().saturating_sub(Ipv6Packet::HEADER_LEN);
    write_bytes(ip, IPV6_PAYLOAD_LEN, len16(payload_len).to_be_bytes());
}

/// TCP header of one segment: sequence number and flags.
fn fix_tcp(tcp: &mut [u8], at: SegmentAt) {
    // The offset is below 64 KiB; sequence numbers wrap.
    let advance = u32::try_from(at.offset).unwrap_or(0);
    let seq = read_u32(tcp, TCP_SEQ).unwrap_or(0).wrapping_add(advance);
    write_bytes(tcp, TCP_SEQ, seq.to_be_bytes());
    if let Some(flags) = tcp.get_mut(TCP_FLAGS) {
        if !at.is_first() {
            *flags &= !CWR;
        }
        if !at.is_last() {
            *flags &= !(FIN | PSH);
        }
    }
}

/// Computes the L4 checksum of `l4` (one whole segment) in full and stores
/// it; a UDP 0 is sent as 0xffff.
fn fill_l4_checksum(l4: &mut [u8], loc: &L4Location) {
    let field = loc.csum_offset();
    write_bytes(l4, field, [0, 0]);
    let len = u32::try_from(l4.len()).unwrap_or(u32::MAX);
    let checksum = match fold(sum(l4, pseudo_header_sum(loc.src, loc.dst, loc.proto, len))) {
        0 if loc.proto == proto::UDP => 0xffff,
        c => c,
    };
    write_bytes(l4, field, checksum.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, FrameBuilder, Ipv6Ext, VlanTag};
    use crate::checksum::{internet_checksum, transport_checksum};
    use crate::tcp::{ACK, ECE, SYN, URG};
    use proptest::prelude::*;

    fn v4_pair() -> (IpAddr, IpAddr) {
        ("192.0.2.1".parse().unwrap(), "198.51.100.7".parse().unwrap())
    }

    fn v6_pair() -> (IpAddr, IpAddr) {
        ("2001:db8::1".parse().unwrap(), "2001:db8:1::2".parse().unwrap())
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i.wrapping_mul(7).wrapping_add(i >> 8) ^ 0x5a) as u8).collect()
    }

    fn tcp(src: IpAddr, dst: IpAddr, data: &[u8]) -> Vec<u8> {
        build::tcp_frame(src, dst, 40000, 443, 1_000_000, ACK | PSH, data)
    }

    fn udp(src: IpAddr, dst: IpAddr, data: &[u8]) -> Vec<u8> {
        build::udp_frame(src, dst, 5000, 53, data)
    }

    fn field(frame: &[u8]) -> u16 {
        let at = locate_l4(frame).unwrap().checksum_at();
        u16::from_be_bytes([frame[at], frame[at + 1]])
    }

    fn set_field(frame: &mut [u8], value: u16) {
        let at = locate_l4(frame).unwrap().checksum_at();
        frame[at..at + 2].copy_from_slice(&value.to_be_bytes());
    }

    /// What a Linux sender leaves under CHECKSUM_PARTIAL, computed from the
    /// given pseudo-header addresses (not from `locate_l4`'s).
    fn make_partial(frame: &mut [u8], src: IpAddr, dst: IpAddr) {
        let loc = locate_l4(frame).unwrap();
        let len = loc.l4_len() as u32;
        set_field(frame, !fold(pseudo_header_sum(src, dst, loc.proto, len)));
    }

    /// The full recompute: `transport_checksum` over the segment with a
    /// zeroed field (a UDP 0 sent as 0xffff).
    fn recomputed(frame: &[u8], src: IpAddr, dst: IpAddr) -> u16 {
        let loc = locate_l4(frame).unwrap();
        let mut seg = frame[loc.l4_offset..loc.l4_end].to_vec();
        seg[loc.csum_offset()..loc.csum_offset() + 2].fill(0);
        match transport_checksum(src, dst, loc.proto, &seg) {
            0 if loc.proto == proto::UDP => 0xffff,
            c => c,
        }
    }

    /// A complete checksum: not taken for a partial one, or verified.
    fn untouched(r: Repair) -> bool {
        matches!(r, Repair::NotPartial | Repair::Valid)
    }

    fn assert_valid(frame: &[u8]) {
        let mut f = frame.to_vec();
        assert!(untouched(repair_partial(&mut f)));
        assert_eq!(f, frame, "a valid frame is never touched");
    }

    /// Makes `complete` partial, repairs it and checks the result against
    /// the full recompute and the original frame.
    fn assert_completed(complete: &[u8], src: IpAddr, dst: IpAddr) {
        let mut f = complete.to_vec();
        make_partial(&mut f, src, dst);
        assert_ne!(f, complete, "test frame must differ once partial");
        assert_eq!(repair_partial(&mut f), Repair::Completed);
        assert!(ones_complement_eq(field(&f), recomputed(complete, src, dst)));
        let mut original = complete.to_vec();
        set_field(&mut original, field(&f));
        assert_eq!(f, original, "only the checksum field changes");
        assert_valid(&f);
    }

    // --- the eight checksum cases -------------------------------------

    #[test]
    fn ipv4_tcp_complete_is_valid() {
        let (s, d) = v4_pair();
        assert_valid(&tcp(s, d, &payload(100)));
    }

    #[test]
    fn ipv4_tcp_partial_is_completed() {
        let (s, d) = v4_pair();
        assert_completed(&tcp(s, d, &payload(100)), s, d);
    }

    #[test]
    fn ipv4_udp_complete_is_valid() {
        let (s, d) = v4_pair();
        assert_valid(&udp(s, d, &payload(33)));
    }

    #[test]
    fn ipv4_udp_partial_is_completed() {
        let (s, d) = v4_pair();
        assert_completed(&udp(s, d, &payload(33)), s, d);
    }

    #[test]
    fn ipv6_tcp_complete_is_valid() {
        let (s, d) = v6_pair();
        assert_valid(&tcp(s, d, &payload(1200)));
    }

    #[test]
    fn ipv6_tcp_partial_is_completed() {
        let (s, d) = v6_pair();
        assert_completed(&tcp(s, d, &payload(1200)), s, d);
    }

    #[test]
    fn ipv6_udp_complete_is_valid() {
        let (s, d) = v6_pair();
        assert_valid(&udp(s, d, &payload(7)));
    }

    #[test]
    fn ipv6_udp_partial_is_completed() {
        let (s, d) = v6_pair();
        assert_completed(&udp(s, d, &payload(7)), s, d);
    }

    // --- the other repair cases ---------------------------------------

    #[test]
    fn ipv4_udp_without_checksum_is_left_alone() {
        let (s, d) = v4_pair();
        let mut frame = udp(s, d, &payload(20));
        set_field(&mut frame, 0);
        let before = frame.clone();
        assert_eq!(repair_partial(&mut frame), Repair::NoChecksum);
        assert_eq!(frame, before);
    }

    #[test]
    fn vlan_tagged_frames() {
        let (s, d) = v4_pair();
        let data = payload(64);
        let tags = [VlanTag::dot1ad(100), VlanTag::dot1q(200)];
        let frame = FrameBuilder { vlans: &tags, ..FrameBuilder::tcp(s, d, 1, 2, 3, ACK, &data) }.build();
        assert_eq!(locate_l4(&frame).unwrap().l3_offset, 22);
        assert_valid(&frame);
        assert_completed(&frame, s, d);
        let one = FrameBuilder { vlans: &tags[1..], ..FrameBuilder::udp(s, d, 1, 2, &data) }.build();
        assert_completed(&one, s, d);
        // A third tag is beyond the walk.
        let three = build::with_vlans(&frame, &[VlanTag::dot1q(7)]);
        assert_eq!(repair_partial(&mut three.clone()), Repair::NotL4);
    }

    #[test]
    fn ipv6_extension_headers_are_skipped() {
        let (s, d) = v6_pair();
        let data = payload(300);
        let ext = [Ipv6Ext::HopByHop { len: 8 }, Ipv6Ext::Routing { len: 24 }, Ipv6Ext::DestOpts { len: 16 }];
        for b in [FrameBuilder::tcp(s, d, 1, 2, 3, ACK, &data), FrameBuilder::udp(s, d, 1, 2, &data)] {
            let frame = FrameBuilder { ipv6_ext: &ext, ..b }.build();
            assert_eq!(locate_l4(&frame).unwrap().l4_offset, 14 + 40 + 48);
            assert_valid(&frame);
            assert_completed(&frame, s, d);
        }
        // AH is not followed.
        let ah =
            FrameBuilder { ipv6_ext: &[Ipv6Ext::Auth { len: 12 }], ..FrameBuilder::tcp(s, d, 1, 2, 3, ACK, &data) };
        assert_eq!(repair_partial(&mut ah.build()), Repair::NotL4);
    }

    /// A frame routed through `hop` to `final_dst`: the IPv6 header names
    /// the hop, a type-`kind` Routing header with one segment left the final
    /// destination, and the checksum covers the final destination.
    fn routed_v6(kind: u8, final_dst: IpAddr) -> Vec<u8> {
        let (s, hop) = v6_pair();
        let data = payload(50);
        let ext = [Ipv6Ext::Routing { len: 24 }];
        let mut frame = FrameBuilder { ipv6_ext: &ext, ..FrameBuilder::tcp(s, hop, 1, 2, 3, ACK, &data) }.build();
        let rh = 14 + 40;
        frame[rh + RH_TYPE] = kind;
        frame[rh + RH_SEGMENTS_LEFT] = 1;
        let IpAddr::V6(f) = final_dst else { unreachable!() };
        frame[rh + 8..rh + 24].copy_from_slice(&f.octets());
        // By hand: locate_l4 refuses unknown types.
        let l4 = rh + 24;
        frame[l4 + TCP_CHECKSUM..l4 + TCP_CHECKSUM + 2].fill(0);
        let c = transport_checksum(s, final_dst, proto::TCP, &frame[l4..]);
        frame[l4 + TCP_CHECKSUM..l4 + TCP_CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
        frame
    }

    #[test]
    fn ipv6_routing_header_names_the_final_destination() {
        let (s, _) = v6_pair();
        let final_dst: IpAddr = "2001:db8:ffff::9".parse().unwrap();
        for kind in [RH_TYPE_SOURCE_ROUTE, RH_TYPE_MOBILE, RH_TYPE_SRH] {
            let frame = routed_v6(kind, final_dst);
            assert_eq!(locate_l4(&frame).unwrap().dst, final_dst, "type {kind}");
            assert_valid(&frame);
            assert_completed(&frame, s, final_dst);
        }
        // RPL (type 3) with segments left: the final destination is not derived.
        let frame = routed_v6(3, final_dst);
        assert_eq!(locate_l4(&frame), Err(OffloadError::UnknownRoute));
        assert_eq!(repair_partial(&mut frame.clone()), Repair::NotL4);
    }

    #[test]
    fn ipv4_source_route_names_the_final_destination() {
        let (s, hop) = v4_pair();
        let final_dst: IpAddr = "203.0.113.5".parse().unwrap();
        let data = payload(40);
        // LSRR, length 11, pointer 4: two addresses left, the final one last.
        let mut lsrr = vec![IPOPT_NOOP, IPOPT_LSRR, 11, 4, 10, 0, 0, 9];
        lsrr.extend_from_slice(&[203, 0, 113, 5]);
        let b = FrameBuilder { ipv4_options: &lsrr, ..FrameBuilder::udp(s, hop, 1, 2, &data) };
        let mut frame = b.build();
        let c = recomputed(&frame, s, final_dst);
        set_field(&mut frame, c);
        assert_eq!(locate_l4(&frame).unwrap().dst, final_dst);
        assert_valid(&frame);
        assert_completed(&frame, s, final_dst);

        // Route exhausted (pointer past the addresses): the header's
        // destination is final, and the builder's checksum is right.
        let mut exhausted = lsrr.clone();
        exhausted[3] = 12;
        let frame = FrameBuilder { ipv4_options: &exhausted, ..b }.build();
        assert_eq!(locate_l4(&frame).unwrap().dst, hop);
        assert_valid(&frame);

        // An option running past the header, and one too short to be one.
        let frame = FrameBuilder { ipv4_options: &[IPOPT_LSRR, 40, 4, 0], ..b }.build();
        assert_eq!(locate_l4(&frame), Err(OffloadError::Malformed));
        let frame = FrameBuilder { ipv4_options: &[IPOPT_NOOP, IPOPT_LSRR, 1, 0], ..b }.build();
        assert_eq!(locate_l4(&frame), Err(OffloadError::Malformed));
    }

    #[test]
    fn ethernet_padding_is_not_summed() {
        let (s, d) = v4_pair();
        let short = udp(s, d, b"hi");
        assert_eq!(short.len(), 44);
        let mut padded = short.clone();
        padded.resize(60, 0xa5);
        assert_valid(&padded);
        let mut f = padded.clone();
        make_partial(&mut f, s, d);
        assert_eq!(repair_partial(&mut f), Repair::Completed);
        assert_eq!(f[..44], short[..], "completed as without the padding");
        assert_eq!(f[44..], padded[44..], "padding untouched");
        // TCP too (its segment ends with the IP packet).
        let short = tcp(s, d, b"x");
        let mut padded = short.clone();
        padded.resize(64, 0x33);
        assert_completed(&padded, s, d);
    }

    #[test]
    fn corrupt_frame_is_untouched() {
        let (s, d) = v6_pair();
        let mut frame = tcp(s, d, &payload(500));
        let last = frame.len() - 1;
        frame[last] ^= 0x10;
        let before = frame.clone();
        assert_eq!(repair_partial(&mut frame), Repair::NotPartial);
        assert_eq!(frame, before);
    }

    #[test]
    fn corrupt_frame_holding_the_pseudo_sum_is_completed() {
        // The documented hazard: the rule cannot tell this from a partial frame.
        let (s, d) = v4_pair();
        let mut frame = udp(s, d, &payload(80));
        let last = frame.len() - 1;
        frame[last] ^= 0x01;
        make_partial(&mut frame, s, d);
        assert_eq!(repair_partial(&mut frame), Repair::Completed);
    }

    #[test]
    fn zero_field_matches_an_all_ones_pseudo_sum() {
        // Ones'-complement equality: a field of 0 equals a pseudo sum of 0xffff.
        assert!(ones_complement_eq(0, 0xffff));
        assert!(ones_complement_eq(0xffff, 0));
        assert!(!ones_complement_eq(0, 1));
        assert!(ones_complement_eq(0x1234, 0x1234));
    }

    #[test]
    fn fragments_are_skipped() {
        let (s, d) = v4_pair();
        for (byte6, byte7) in [(0x20, 0), (0, 1), (0x20, 0xb9)] {
            let mut frame = udp(s, d, &payload(64));
            frame[14 + 6] |= byte6;
            frame[14 + 7] |= byte7;
            let before = frame.clone();
            assert_eq!(repair_partial(&mut frame), Repair::Fragment);
            assert_eq!(frame, before);
        }
        let (s, d) = v6_pair();
        let data = payload(64);
        for more in [false, true] {
            let ext = [Ipv6Ext::DestOpts { len: 8 }, Ipv6Ext::Fragment { offset: 0, more, id: 7 }];
            let mut frame = FrameBuilder { ipv6_ext: &ext, ..FrameBuilder::udp(s, d, 1, 2, &data) }.build();
            assert_eq!(repair_partial(&mut frame), Repair::Fragment);
        }
    }

    #[test]
    fn not_l4_and_malformed() {
        let (s, d) = v4_pair();
        let mut arp = udp(s, d, b"abc");
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(repair_partial(&mut arp), Repair::NotL4);
        let mut icmp = FrameBuilder::raw(s, d, proto::ICMP, &[8, 0, 0, 0, 0, 1, 0, 1]).build();
        assert_eq!(repair_partial(&mut icmp), Repair::NotL4);

        let l4 = 14 + 20;
        let mut long_udp = udp(s, d, b"abc");
        long_udp[l4 + UDP_LEN + 1] += 1;
        assert_eq!(repair_partial(&mut long_udp), Repair::Malformed);
        let mut short_udp = udp(s, d, b"abc");
        short_udp[l4 + UDP_LEN..l4 + UDP_LEN + 2].copy_from_slice(&[0, 7]);
        assert_eq!(repair_partial(&mut short_udp), Repair::Malformed);
        let mut bad_offset = tcp(s, d, b"abc");
        bad_offset[l4 + 12] = 0x40;
        assert_eq!(repair_partial(&mut bad_offset), Repair::Malformed);
        let mut big_offset = tcp(s, d, b"abc");
        big_offset[l4 + 12] = 0x60; // 24-byte header in a 23-byte segment
        assert_eq!(repair_partial(&mut big_offset), Repair::Malformed);
        let mut bad_ihl = tcp(s, d, b"abc");
        bad_ihl[14] = 0x44;
        assert_eq!(repair_partial(&mut bad_ihl), Repair::Malformed);

        // A UDP length shorter than the IP payload: the datagram ends there
        // (Linux trims the rest), and so does the checksum.
        let mut trailer = udp(s, d, b"abcdef");
        let ip_len = trailer.len();
        trailer.extend_from_slice(b"zz");
        trailer[14 + 3] += 2; // IPv4 total length covers the trailer
        assert_eq!(locate_l4(&trailer).unwrap().l4_end, ip_len);
        assert_valid(&trailer);
    }

    #[test]
    fn truncated_frames_never_panic() {
        let (s4, d4) = v4_pair();
        let (s6, d6) = v6_pair();
        let data = payload(90);
        let ext = [Ipv6Ext::HopByHop { len: 8 }, Ipv6Ext::DestOpts { len: 8 }];
        let tags = [VlanTag::dot1q(5)];
        let frames = [
            tcp(s4, d4, &data),
            udp(s6, d6, &data),
            FrameBuilder { ipv6_ext: &ext, vlans: &tags, ..FrameBuilder::tcp(s6, d6, 1, 2, 3, ACK, &data) }.build(),
        ];
        for complete in frames {
            let mut partial = complete.clone();
            make_partial(&mut partial, locate_l4(&complete).unwrap().src, locate_l4(&complete).unwrap().dst);
            for n in 0..complete.len() {
                let mut cut = partial[..n].to_vec();
                assert_eq!(repair_partial(&mut cut), Repair::Malformed, "len {n}");
                assert_eq!(cut, partial[..n]);
                assert!(segment(&partial[..n], GsoKind::Udp, 64, &mut Vec::new(), &mut Vec::new()).is_err());
            }
        }
    }

    // --- complete_partial ---------------------------------------------

    #[test]
    fn complete_partial_with_kernel_metadata() {
        let (s, d) = v4_pair();
        let complete = tcp(s, d, &payload(77));
        let mut f = complete.clone();
        make_partial(&mut f, s, d);
        complete_partial(&mut f, 14 + 20, TCP_CHECKSUM).unwrap();
        assert!(ones_complement_eq(field(&f), recomputed(&complete, s, d)));
        assert_valid(&f);
    }

    #[test]
    fn complete_partial_stores_zero_as_all_ones() {
        let (s, d) = v4_pair();
        // A two-byte payload word that makes the sum all ones: the
        // complement of the checksum over a zero word.
        let zero_word = udp(s, d, &[0, 0]);
        let word = recomputed(&zero_word, s, d);
        let complete = udp(s, d, &word.to_be_bytes());
        let l4 = 14 + 20;
        let mut seg = complete[l4..].to_vec();
        seg[UDP_CHECKSUM..UDP_CHECKSUM + 2].fill(0);
        assert_eq!(transport_checksum(s, d, proto::UDP, &seg), 0, "the test datagram sums to zero");
        assert_eq!(field(&complete), 0xffff);
        let mut f = complete.clone();
        make_partial(&mut f, s, d);
        complete_partial(&mut f, l4, UDP_CHECKSUM).unwrap();
        assert_eq!(field(&f), 0xffff);
        assert!(untouched(repair_partial(&mut f)));

        // The same for TCP, where 0xffff verifies as well as 0.
        let zero_word = tcp(s, d, &[0, 0]);
        let word = recomputed(&zero_word, s, d);
        let mut f = tcp(s, d, &word.to_be_bytes());
        assert_eq!(field(&f), 0);
        make_partial(&mut f, s, d);
        complete_partial(&mut f, l4, TCP_CHECKSUM).unwrap();
        assert_eq!(field(&f), 0xffff);
        assert_valid(&f);
    }

    #[test]
    fn complete_partial_offsets_outside_the_frame() {
        let (s, d) = v4_pair();
        let frame = udp(s, d, b"abcd");
        let n = frame.len();
        for (start, offset) in [(n, 0), (n - 1, 0), (n - 2, 1), (n + 1, 0), (0, n), (usize::MAX, 0), (1, usize::MAX)] {
            let mut f = frame.clone();
            assert_eq!(complete_partial(&mut f, start, offset), Err(OffloadError::OutOfFrame), "{start} {offset}");
            assert_eq!(f, frame);
        }
        let mut f = frame.clone();
        assert_eq!(complete_partial(&mut f, n - 2, 0), Ok(()));
    }

    #[test]
    fn counter_slots() {
        for (i, r) in Repair::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert!(!r.reason().is_empty());
        }
        for (i, e) in OffloadError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert_eq!(e.to_string(), e.reason());
        }
    }

    // --- segment --------------------------------------------------------

    /// Segments `frame` and checks every frame; returns them.
    fn check_segments(frame: &[u8], kind: GsoKind, gso: usize, data: &[u8]) -> Vec<Vec<u8>> {
        let (mut out, mut lens) = (vec![0xee], vec![1]); // appended to, not cleared
        let n = segment(frame, kind, gso, &mut out, &mut lens).unwrap();
        assert_eq!(lens.len(), n + 1);
        assert_eq!(lens.iter().sum::<usize>(), out.len());
        assert_eq!(n, data.len().div_ceil(gso).max(1));
        let orig = locate_l4(frame).unwrap();
        let headers = orig.payload_offset();
        let mut segs = Vec::new();
        let mut at = 1;
        for &len in &lens[1..] {
            segs.push(out[at..at + len].to_vec());
            at += len;
        }
        let mut joined = Vec::new();
        for (i, seg) in segs.iter().enumerate() {
            assert!(seg.len() <= headers + gso);
            assert_eq!(seg[..orig.l3_offset], frame[..orig.l3_offset], "link header and tags kept");
            let loc = locate_l4(seg).unwrap();
            assert_eq!((loc.l4_end, loc.payload_offset()), (seg.len(), headers));
            assert_eq!((loc.src, loc.dst), (orig.src, orig.dst));
            assert_eq!(transport_checksum(loc.src, loc.dst, loc.proto, &seg[loc.l4_offset..]), 0, "L4 checksum");
            assert!(untouched(repair_partial(&mut seg.clone())));
            if !loc.is_ipv6() {
                let ip = &seg[loc.l3_offset..loc.l4_offset];
                assert_eq!(internet_checksum(ip), 0, "IPv4 header checksum");
                let ident = |f: &[u8]| u16::from_be_bytes([f[orig.l3_offset + 4], f[orig.l3_offset + 5]]);
                assert_eq!(ident(seg), ident(frame).wrapping_add(i as u16));
            }
            if loc.proto == proto::TCP {
                let seq = |f: &[u8]| u32::from_be_bytes(f[orig.l4_offset + 4..orig.l4_offset + 8].try_into().unwrap());
                assert_eq!(seq(seg), seq(frame).wrapping_add((i * gso) as u32));
                assert_eq!(seg[orig.l4_offset + 12], frame[orig.l4_offset + 12], "options kept");
            } else {
                assert_ne!(field(seg), 0);
            }
            joined.extend_from_slice(&seg[headers..]);
        }
        assert_eq!(joined, data, "payload reassembles");
        segs
    }

    fn flags_of(seg: &[u8]) -> u8 {
        seg[locate_l4(seg).unwrap().l4_offset + TCP_FLAGS]
    }

    #[test]
    fn tcp_v4_super_frames() {
        let (s, d) = v4_pair();
        for (len, gso) in [(0, 1448), (1, 1448), (1448, 1448), (1449, 1448), (3000, 1000), (65495, 1448), (500, 8)] {
            let data = payload(len);
            let b = FrameBuilder { ident: 0xfffe, ..FrameBuilder::tcp(s, d, 1, 2, u32::MAX - 5000, ACK, &data) };
            let mut frame = b.build();
            make_partial(&mut frame, s, d);
            check_segments(&frame, GsoKind::TcpV4, gso, &data);
        }
    }

    #[test]
    fn tcp_v6_super_frames_with_tags_and_extensions() {
        let (s, d) = v6_pair();
        let tags = [VlanTag::dot1ad(10), VlanTag::dot1q(20)];
        let ext = [Ipv6Ext::HopByHop { len: 8 }, Ipv6Ext::DestOpts { len: 24 }];
        for (len, gso) in [(10, 1440), (2880, 1440), (10000, 1220), (65000, 9000)] {
            let data = payload(len);
            let b = FrameBuilder { vlans: &tags, ipv6_ext: &ext, ..FrameBuilder::tcp(s, d, 9, 8, 7, ACK, &data) };
            let frame = b.build();
            check_segments(&frame, GsoKind::TcpV6, gso, &data);
        }
    }

    #[test]
    fn tcp_flags_are_split_like_linux() {
        let (s, d) = v4_pair();
        let data = payload(3000);
        let all = CWR | ECE | URG | ACK | PSH | FIN;
        let frame = build::tcp_frame(s, d, 1, 2, 0, all, &data);
        let segs = check_segments(&frame, GsoKind::TcpV4, 1000, &data);
        assert_eq!(flags_of(&segs[0]), all & !(FIN | PSH), "CWR on the first only");
        assert_eq!(flags_of(&segs[1]), all & !(FIN | PSH | CWR));
        assert_eq!(flags_of(&segs[2]), all & !CWR, "FIN and PSH on the last only");
        // One segment keeps every flag, and its checksum is completed.
        let mut frame = build::tcp_frame(s, d, 1, 2, 0, all | SYN, &data);
        make_partial(&mut frame, s, d);
        let segs = check_segments(&frame, GsoKind::TcpV4, 3000, &data);
        assert_eq!(flags_of(&segs[0]), all | SYN);
        let mut expected = frame.clone();
        set_field(&mut expected, recomputed(&frame, s, d));
        assert_eq!(segs[0], expected);
    }

    #[test]
    fn tcp_options_are_copied() {
        let (s, d) = v4_pair();
        // 12 bytes of options (NOP NOP timestamp) in front of the data.
        let mut body = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        let data = payload(2500);
        body.extend_from_slice(&data);
        let mut frame = build::tcp_frame(s, d, 1, 2, 0, ACK, &body);
        frame[14 + 20 + 12] = 0x80; // data offset 8
        let segs = check_segments(&frame, GsoKind::TcpV4, 1000, &data);
        for seg in segs {
            assert_eq!(seg[14 + 40..14 + 52], body[..12]);
        }
    }

    #[test]
    fn udp_super_frames() {
        for (s, d) in [v4_pair(), v6_pair()] {
            for (len, gso) in [(0, 1400), (100, 1400), (1400, 1400), (1401, 1400), (60000, 1472), (64, 8)] {
                let data = payload(len);
                let mut frame = udp(s, d, &data);
                make_partial(&mut frame, s, d);
                check_segments(&frame, GsoKind::Udp, gso, &data);
                // Any content in the field is ignored.
                set_field(&mut frame, 0x1234);
                check_segments(&frame, GsoKind::Udp, gso, &data);
            }
        }
    }

    #[test]
    fn segment_errors_append_nothing() {
        let (s4, d4) = v4_pair();
        let (s6, d6) = v6_pair();
        let tcp4 = tcp(s4, d4, &payload(3000));
        let tcp6 = tcp(s6, d6, &payload(3000));
        let udp4 = udp(s4, d4, &payload(3000));
        let mut frag = udp4.clone();
        frag[14 + 6] |= 0x20;
        let big_ext = [Ipv6Ext::DestOpts { len: 512 }];
        let long_headers = FrameBuilder { ipv6_ext: &big_ext, ..FrameBuilder::udp(s6, d6, 1, 2, b"abc") }.build();
        let cases: [(&[u8], GsoKind, usize, OffloadError); 10] = [
            (&tcp4, GsoKind::TcpV4, 0, OffloadError::GsoSizeTooSmall),
            (&tcp4, GsoKind::TcpV4, MIN_GSO_SIZE - 1, OffloadError::GsoSizeTooSmall),
            (&tcp4, GsoKind::TcpV6, 1000, OffloadError::WrongKind),
            (&tcp6, GsoKind::TcpV4, 1000, OffloadError::WrongKind),
            (&udp4, GsoKind::TcpV4, 1000, OffloadError::WrongKind),
            (&tcp4, GsoKind::Udp, 1000, OffloadError::WrongKind),
            (&frag, GsoKind::Udp, 1000, OffloadError::Fragment),
            (&tcp4[..tcp4.len() - 1], GsoKind::TcpV4, 1000, OffloadError::Truncated),
            (&long_headers, GsoKind::Udp, 1000, OffloadError::HeadersTooLong),
            (&udp(s4, d4, &payload(20000)), GsoKind::Udp, 8, OffloadError::TooManySegments),
        ];
        for (frame, kind, gso, err) in cases {
            let (mut out, mut lens) = (Vec::new(), Vec::new());
            assert_eq!(segment(frame, kind, gso, &mut out, &mut lens), Err(err));
            assert!(out.is_empty() && lens.is_empty());
        }
        // The most segments allowed.
        let data = payload(MAX_GSO_SEGMENTS * MIN_GSO_SIZE);
        let frame = udp(s4, d4, &data);
        assert_eq!(segment(&frame, GsoKind::Udp, MIN_GSO_SIZE, &mut Vec::new(), &mut Vec::new()), Ok(MAX_GSO_SEGMENTS));
    }

    #[test]
    fn segment_ignores_padding() {
        let (s, d) = v4_pair();
        let data = payload(20);
        let mut frame = tcp(s, d, &data);
        frame.resize(frame.len() + 16, 0xcc);
        check_segments(&frame, GsoKind::TcpV4, 8, &data);
    }

    fn super_frame(v6: bool, is_tcp: bool, data: &[u8]) -> (Vec<u8>, GsoKind) {
        let (s, d) = if v6 { v6_pair() } else { v4_pair() };
        match (is_tcp, v6) {
            (true, false) => (tcp(s, d, data), GsoKind::TcpV4),
            (true, true) => (tcp(s, d, data), GsoKind::TcpV6),
            (false, _) => (udp(s, d, data), GsoKind::Udp),
        }
    }

    proptest! {
        #[test]
        fn segment_reassembles_or_fails_cleanly(
            len in 0usize..6000,
            gso in prop_oneof![0usize..64, 0usize..3000],
            v6 in any::<bool>(),
            is_tcp in any::<bool>(),
            junk in any::<u16>(),
            cut in proptest::option::of(any::<prop::sample::Index>()),
        ) {
            let data = payload(len);
            let (mut frame, kind) = super_frame(v6, is_tcp, &data);
            set_field(&mut frame, junk);
            let whole = frame.len();
            let end = cut.map_or(whole, |c| c.index(whole + 1));
            let (mut out, mut lens) = (Vec::new(), Vec::new());
            match segment(&frame[..end], kind, gso, &mut out, &mut lens) {
                Ok(n) => {
                    prop_assert_eq!(end, whole);
                    prop_assert_eq!(n, lens.len());
                    prop_assert_eq!(lens.iter().sum::<usize>(), out.len());
                    let headers = locate_l4(&frame).unwrap().payload_offset();
                    let mut joined = Vec::new();
                    let mut at = 0;
                    for len in lens {
                        let seg = &out[at..at + len];
                        prop_assert!(untouched(repair_partial(&mut seg.to_vec())));
                        joined.extend_from_slice(&seg[headers..]);
                        at += len;
                    }
                    prop_assert_eq!(joined, data);
                }
                Err(e) => {
                    prop_assert!(out.is_empty() && lens.is_empty());
                    prop_assert!(gso < MIN_GSO_SIZE || end < whole, "{e:?}");
                }
            }
        }

        #[test]
        fn mutated_frames_never_panic(
            len in 0usize..300,
            v6 in any::<bool>(),
            is_tcp in any::<bool>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            gso in 0usize..200,
        ) {
            let (mut frame, kind) = super_frame(v6, is_tcp, &payload(len));
            for (at, v) in flips {
                let i = at.index(frame.len());
                frame[i] = v;
            }
            let mut copy = frame.clone();
            let r = repair_partial(&mut copy);
            if r != Repair::Completed {
                prop_assert_eq!(&copy, &frame);
            }
            let _ = segment(&frame, kind, gso, &mut Vec::new(), &mut Vec::new());
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), ethertype_v6 in any::<bool>()) {
            let mut frame = bytes;
            if frame.len() >= 14 {
                let t: u16 = if ethertype_v6 { 0x86dd } else { 0x0800 };
                frame[12..14].copy_from_slice(&t.to_be_bytes());
            }
            let _ = repair_partial(&mut frame);
            for kind in [GsoKind::TcpV4, GsoKind::TcpV6, GsoKind::Udp] {
                let _ = segment(&frame, kind, 8, &mut Vec::new(), &mut Vec::new());
            }
            let n = frame.len();
            let _ = complete_partial(&mut frame, n / 2, n / 3);
        }
    }
}
