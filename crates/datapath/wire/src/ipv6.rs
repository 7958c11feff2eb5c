//! IPv6 fixed header (RFC 8200) and the extension header chain.
//!
//! The chain walk ([`walk_ext_chain`]) follows Hop-by-Hop (0, only as the
//! first header), Routing (43), Destination Options (60), Fragment (44) and
//! Authentication (51, length `(n+2)*4`) headers, at most
//! [`crate::MAX_IPV6_EXT_HEADERS`] of them, and stops at anything else (ESP
//! 50, No Next Header 59, upper layers). The walk stops at the Fragment
//! header of a non-first fragment since nothing behind it is a header.
//! Jumbograms (payload length 0 + Jumbo option) are not supported.

use std::net::Ipv6Addr;

use crate::error::{Layer, ParseError};
use crate::limits::MAX_IPV6_EXT_HEADERS;

/// Hop-by-Hop Options header.
pub const NH_HOP_BY_HOP: u8 = 0;
/// Routing header.
pub const NH_ROUTING: u8 = 43;
/// Fragment header.
pub const NH_FRAGMENT: u8 = 44;
/// Encapsulating Security Payload (chain walk stops).
pub const NH_ESP: u8 = 50;
/// Authentication header.
pub const NH_AUTH: u8 = 51;
/// No Next Header.
pub const NH_NO_NEXT: u8 = 59;
/// Destination Options header.
pub const NH_DEST_OPTS: u8 = 60;

/// True for the next-header values the chain walk follows.
pub fn is_ext_header(next_header: u8) -> bool {
    matches!(next_header, NH_HOP_BY_HOP | NH_ROUTING | NH_FRAGMENT | NH_AUTH | NH_DEST_OPTS)
}

fn array16(src: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    for (d, s) in a.iter_mut().zip(src) {
        *d = *s;
    }
    a
}

/// A checked view of an IPv6 packet (40-byte fixed header and what follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Packet<'a> {
    hdr: &'a [u8; Ipv6Packet::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> Ipv6Packet<'a> {
    /// Length of the fixed header.
    pub const HEADER_LEN: usize = 40;

    /// Checks that the fixed header is present (`Truncated{Ipv6}`) and the
    /// version is 6 (`BadVersion`). A payload length larger than the buffer
    /// is allowed (see [`Ipv6Packet::is_truncated`]).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr: &[u8; 40] = buf.first_chunk().ok_or(ParseError::Truncated { layer: Layer::Ipv6 })?;
        if hdr[0] >> 4 != 6 {
            return Err(ParseError::BadVersion);
        }
        Ok(Ipv6Packet { hdr, buf })
    }

    /// Version (always 6).
    pub fn version(&self) -> u8 {
        self.hdr[0] >> 4
    }

    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        (self.hdr[0] << 4) | (self.hdr[1] >> 4)
    }

    /// DSCP (high 6 bits of the traffic class).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// ECN (low 2 bits of the traffic class).
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        u32::from_be_bytes([0, self.hdr[1] & 0x0f, self.hdr[2], self.hdr[3]])
    }

    /// Payload length field.
    pub fn payload_len(&self) -> u16 {
        u16::from_be_bytes([self.hdr[4], self.hdr[5]])
    }

    /// 40 + payload length.
    pub fn total_len(&self) -> usize {
        usize::from(self.payload_len()).saturating_add(Self::HEADER_LEN)
    }

    /// Next header of the fixed header.
    pub fn next_header(&self) -> u8 {
        self.hdr[6]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.hdr[7]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array16(self.hdr.get(8..24).unwrap_or(&[])))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array16(self.hdr.get(24..40).unwrap_or(&[])))
    }

    /// True when the buffer holds fewer bytes than 40 + payload length.
    pub fn is_truncated(&self) -> bool {
        self.total_len() > self.buf.len()
    }

    /// Offset (in the buffer) where the packet ends: min(total length, buffer).
    pub fn end(&self) -> usize {
        self.total_len().min(self.buf.len())
    }

    /// The bytes of the packet present in the buffer, padding excluded.
    pub fn packet(&self) -> &'a [u8] {
        self.buf.get(..self.end()).unwrap_or(&[])
    }

    /// Everything after the fixed header (extension headers included), up to
    /// the payload length.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..self.end()).unwrap_or(&[])
    }
}

/// A checked view of a generic extension header (next header, length byte).
///
/// The length is `(len + 1) * 8` bytes, except for AH: `(len + 2) * 4`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtHeader<'a> {
    kind: u8,
    hdr: &'a [u8; 2],
    buf: &'a [u8],
    len: usize,
}

impl<'a> ExtHeader<'a> {
    /// Checks that the whole extension header of type `kind` is in `buf`
    /// (`Truncated{Ipv6Ext}` otherwise). A Fragment header is always 8 bytes.
    pub fn new_checked(kind: u8, buf: &'a [u8]) -> Result<Self, ParseError> {
        let truncated = ParseError::Truncated { layer: Layer::Ipv6Ext };
        let hdr: &[u8; 2] = buf.first_chunk().ok_or(truncated)?;
        let units = usize::from(hdr[1]);
        let len = match kind {
            NH_FRAGMENT => 8,
            NH_AUTH => units.saturating_add(2).saturating_mul(4),
            _ => units.saturating_add(1).saturating_mul(8),
        };
        if len > buf.len() {
            return Err(truncated);
        }
        Ok(ExtHeader { kind, hdr, buf, len })
    }

    /// The header type (the next-header value that announced it).
    pub fn kind(&self) -> u8 {
        self.kind
    }

    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.hdr[0]
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true (an extension header has at least 8 bytes); for clippy's
    /// `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The header's bytes after next header and length.
    pub fn data(&self) -> &'a [u8] {
        self.buf.get(2..self.len).unwrap_or(&[])
    }

    /// Interprets this header as a Fragment header.
    pub fn as_fragment(&self) -> Option<FragmentHeader<'a>> {
        if self.kind == NH_FRAGMENT {
            FragmentHeader::new_checked(self.buf).ok()
        } else {
            None
        }
    }
}

/// A checked view of the 8-byte Fragment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentHeader<'a> {
    hdr: &'a [u8; FragmentHeader::HEADER_LEN],
}

impl<'a> FragmentHeader<'a> {
    /// Length of the Fragment header.
    pub const HEADER_LEN: usize = 8;

    /// Checks that the 8 bytes are present.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr = buf.first_chunk().ok_or(ParseError::Truncated { layer: Layer::Ipv6Ext })?;
        Ok(FragmentHeader { hdr })
    }

    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.hdr[0]
    }

    /// Fragment offset in bytes.
    pub fn offset(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]]) & 0xfff8
    }

    /// M flag.
    pub fn more_fragments(&self) -> bool {
        self.hdr[3] & 0x01 != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        u32::from_be_bytes([self.hdr[4], self.hdr[5], self.hdr[6], self.hdr[7]])
    }

    /// Offset 0 and M clear (RFC 6946).
    pub fn is_atomic(&self) -> bool {
        self.offset() == 0 && !self.more_fragments()
    }
}

/// The Fragment header found by [`walk_ext_chain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainFragment {
    /// Identification.
    pub id: u32,
    /// Offset in bytes.
    pub offset: u16,
    /// M flag.
    pub more: bool,
    /// Offset 0 and M clear.
    pub atomic: bool,
    /// Offset of the Fragment header from the start of the IPv6 header.
    pub header_offset: usize,
}

/// The result of [`walk_ext_chain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtChain {
    /// The final next header: the upper-layer protocol, or for a non-first
    /// fragment the Fragment header's next header.
    pub next_header: u8,
    /// Offset of the upper-layer header from the start of the IPv6 header;
    /// None for a non-first fragment.
    pub upper_offset: Option<usize>,
    /// Extension headers walked.
    pub count: usize,
    /// The Fragment header, if any (atomic or not).
    pub fragment: Option<ChainFragment>,
    /// 40 + extension headers up to and including the Fragment header, or
    /// the whole chain when there is no Fragment header.
    pub header_len: usize,
}

/// Walks the extension header chain of `pkt` (bounded by its payload length
/// and the buffer).
///
/// Errors: an extension header cut by the buffer: `Truncated{Ipv6Ext}`; one
/// extending past the payload length: `BadTotalLen`; more than
/// [`MAX_IPV6_EXT_HEADERS`]: `ExtChainTooLong`; Hop-by-Hop not first or a
/// second Fragment header: `BadExtHeader`.
pub fn walk_ext_chain(pkt: &Ipv6Packet<'_>) -> Result<ExtChain, ParseError> {
    let buf = pkt.buf;
    let total = pkt.total_len();
    let mut next = pkt.next_header();
    let mut pos = Ipv6Packet::HEADER_LEN;
    let mut count = 0usize;
    let mut fragment: Option<ChainFragment> = None;
    let mut header_len: Option<usize> = None;

    while is_ext_header(next) {
        if next == NH_HOP_BY_HOP && count != 0 {
            return Err(ParseError::BadExtHeader);
        }
        if next == NH_FRAGMENT && fragment.is_some() {
            return Err(ParseError::BadExtHeader);
        }
        if count >= MAX_IPV6_EXT_HEADERS {
            return Err(ParseError::ExtChainTooLong);
        }
        count = count.saturating_add(1);
        let ext = ExtHeader::new_checked(next, buf.get(pos..).unwrap_or(&[]))?;
        let end = pos.saturating_add(ext.len());
        if end > total {
            return Err(ParseError::BadTotalLen);
        }
        if let Some(f) = ext.as_fragment() {
            let info = ChainFragment {
                id: f.ident(),
                offset: f.offset(),
                more: f.more_fragments(),
                atomic: f.is_atomic(),
                header_offset: pos,
            };
            fragment = Some(info);
            header_len = Some(end);
            if info.offset != 0 {
                return Ok(ExtChain {
                    next_header: f.next_header(),
                    upper_offset: None,
                    count,
                    fragment,
                    header_len: end,
                });
            }
        }
        next = ext.next_header();
        pos = end;
    }
    Ok(ExtChain { next_header: next, upper_offset: Some(pos), count, fragment, header_len: header_len.unwrap_or(pos) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(next: u8, ext: &[u8], payload_len: Option<u16>) -> Vec<u8> {
        let mut b = vec![0x6a, 0xb1, 0x23, 0x45];
        let plen = payload_len.unwrap_or(ext.len() as u16);
        b.extend_from_slice(&plen.to_be_bytes());
        b.push(next);
        b.push(64);
        b.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        b.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        b.extend_from_slice(ext);
        b
    }

    #[test]
    fn fixed_header_fields() {
        let b = packet(17, &[0; 8], None);
        let p = Ipv6Packet::new_checked(&b).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xab);
        assert_eq!(p.dscp(), 0xab >> 2);
        assert_eq!(p.ecn(), 3);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), 17);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), Ipv6Addr::LOCALHOST);
        assert_eq!(p.dst_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert!(!p.is_truncated());
        assert_eq!(p.payload().len(), 8);
        assert_eq!(p.packet().len(), 48);
        for n in 0..40 {
            assert_eq!(Ipv6Packet::new_checked(&b[..n]), Err(ParseError::Truncated { layer: Layer::Ipv6 }));
        }
        let mut v4 = b.clone();
        v4[0] = 0x45;
        assert_eq!(Ipv6Packet::new_checked(&v4), Err(ParseError::BadVersion));
    }

    #[test]
    fn chain_walk() {
        // HBH(8) -> Routing(16) -> DestOpts(8) -> Fragment(8, first) -> AH(12) -> TCP
        let mut ext = vec![NH_ROUTING, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&[NH_DEST_OPTS, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        ext.extend_from_slice(&[NH_FRAGMENT, 0, 1, 4, 0, 0, 0, 0]);
        ext.extend_from_slice(&[NH_AUTH, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]);
        ext.extend_from_slice(&[6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let b = packet(NH_HOP_BY_HOP, &ext, None);
        let p = Ipv6Packet::new_checked(&b).unwrap();
        let c = walk_ext_chain(&p).unwrap();
        assert_eq!(c.next_header, 6);
        assert_eq!(c.count, 5);
        assert_eq!(c.upper_offset, Some(40 + 8 + 16 + 8 + 8 + 12));
        assert_eq!(c.header_len, 40 + 8 + 16 + 8 + 8);
        let f = c.fragment.unwrap();
        assert!(f.more && !f.atomic);
        assert_eq!((f.offset, f.id, f.header_offset), (0, 0xdeadbeef, 72));

        // every truncation of the chain is an error
        for n in 40..b.len() {
            let p = Ipv6Packet::new_checked(&b[..n]).unwrap();
            assert_eq!(walk_ext_chain(&p), Err(ParseError::Truncated { layer: Layer::Ipv6Ext }), "len {n}");
        }
        // payload length too small for the chain
        let b = packet(NH_HOP_BY_HOP, &ext, Some(20));
        let p = Ipv6Packet::new_checked(&b).unwrap();
        assert_eq!(walk_ext_chain(&p), Err(ParseError::BadTotalLen));
    }

    #[test]
    fn non_first_and_atomic_fragments() {
        let b = packet(NH_FRAGMENT, &[17, 0, 0x05, 0x01, 0, 0, 0, 9, 1, 2], None);
        let c = walk_ext_chain(&Ipv6Packet::new_checked(&b).unwrap()).unwrap();
        assert_eq!(c.next_header, 17);
        assert_eq!(c.upper_offset, None);
        assert_eq!(c.header_len, 48);
        let f = c.fragment.unwrap();
        assert_eq!((f.offset, f.more, f.id), (0x500, true, 9));

        let b = packet(NH_FRAGMENT, &[17, 0, 0, 0, 0, 0, 0, 9], None);
        let c = walk_ext_chain(&Ipv6Packet::new_checked(&b).unwrap()).unwrap();
        assert_eq!(c.upper_offset, Some(48));
        assert!(c.fragment.unwrap().atomic);
    }

    #[test]
    fn chain_limits() {
        let mut ext = Vec::new();
        for _ in 0..MAX_IPV6_EXT_HEADERS {
            ext.extend_from_slice(&[NH_DEST_OPTS, 0, 0, 0, 0, 0, 0, 0]);
        }
        let last = ext.len() - 8;
        ext[last] = 59;
        let b = packet(NH_DEST_OPTS, &ext, None);
        let c = walk_ext_chain(&Ipv6Packet::new_checked(&b).unwrap()).unwrap();
        assert_eq!(c.count, MAX_IPV6_EXT_HEADERS);
        assert_eq!(c.next_header, NH_NO_NEXT);

        ext[last] = NH_DEST_OPTS;
        ext.extend_from_slice(&[59, 0, 0, 0, 0, 0, 0, 0]);
        let b = packet(NH_DEST_OPTS, &ext, None);
        assert_eq!(walk_ext_chain(&Ipv6Packet::new_checked(&b).unwrap()), Err(ParseError::ExtChainTooLong));

        // HBH not first
        let b = packet(NH_DEST_OPTS, &[0, 0, 0, 0, 0, 0, 0, 0, 59, 0, 0, 0, 0, 0, 0, 0], None);
        assert_eq!(walk_ext_chain(&Ipv6Packet::new_checked(&b).unwrap()), Err(ParseError::BadExtHeader));
        // two fragment headers
        let b = packet(NH_FRAGMENT, &[44, 0, 0, 0, 0, 0, 0, 1, 17, 0, 0, 0, 0, 0, 0, 1], None);
        assert_eq!(walk_ext_chain(&Ipv6Packet::new_checked(&b).unwrap()), Err(ParseError::BadExtHeader));
        // ESP stops the walk
        let b = packet(NH_ESP, &[0; 16], None);
        let c = walk_ext_chain(&Ipv6Packet::new_checked(&b).unwrap()).unwrap();
        assert_eq!((c.next_header, c.count, c.upper_offset), (50, 0, Some(40)));
    }
}
