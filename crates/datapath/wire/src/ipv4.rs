//! IPv4 header (RFC 791).
//!
//! [`Ipv4Packet::new_checked`] accepts a buffer when the version is 4, IHL >=
//! 5, the whole header (options included) is present and the total length
//! covers the header. A total length larger than the buffer is allowed
//! (snaplen-truncated capture, see [`Ipv4Packet::is_truncated`]); bytes beyond
//! the total length (Ethernet padding) are ignored by [`Ipv4Packet::payload`].
//! The header checksum is not checked by `new_checked`; use
//! [`Ipv4Packet::verify_checksum`].

use std::net::Ipv4Addr;

use crate::error::{Layer, ParseError};

/// Don't Fragment flag bit (in the flags/offset word).
pub const FLAG_DF: u16 = 0x4000;
/// More Fragments flag bit.
pub const FLAG_MF: u16 = 0x2000;
/// Fragment offset mask (in 8-byte units).
pub const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A checked view of an IPv4 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Packet<'a> {
    hdr: &'a [u8; Ipv4Packet::MIN_HEADER_LEN],
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> Ipv4Packet<'a> {
    /// Header length without options.
    pub const MIN_HEADER_LEN: usize = 20;

    /// Validates the header, see the module docs.
    ///
    /// Errors: fewer than 20 bytes or fewer than IHL*4 bytes:
    /// `Truncated{Ipv4}`; version not 4: `BadVersion`; IHL < 5:
    /// `BadHeaderLen{Ipv4}`; total length < IHL*4: `BadTotalLen`.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let truncated = ParseError::Truncated { layer: Layer::Ipv4 };
        let hdr: &[u8; 20] = buf.first_chunk().ok_or(truncated)?;
        if hdr[0] >> 4 != 4 {
            return Err(ParseError::BadVersion);
        }
        let header_len = usize::from(hdr[0] & 0x0f) * 4;
        if header_len < Self::MIN_HEADER_LEN {
            return Err(ParseError::BadHeaderLen { layer: Layer::Ipv4 });
        }
        if header_len > buf.len() {
            return Err(truncated);
        }
        let total = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
        if total < header_len {
            return Err(ParseError::BadTotalLen);
        }
        Ok(Ipv4Packet { hdr, buf, header_len })
    }

    /// Version (always 4).
    pub fn version(&self) -> u8 {
        self.hdr[0] >> 4
    }

    /// Header length in bytes (IHL * 4, 20..=60).
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The TOS byte.
    pub fn tos(&self) -> u8 {
        self.hdr[1]
    }

    /// DSCP (high 6 bits of TOS).
    pub fn dscp(&self) -> u8 {
        self.hdr[1] >> 2
    }

    /// ECN (low 2 bits of TOS).
    pub fn ecn(&self) -> u8 {
        self.hdr[1] & 0x03
    }

    /// Total length field.
    pub fn total_len(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        u16::from_be_bytes([self.hdr[4], self.hdr[5]])
    }

    fn flags_offset(&self) -> u16 {
        u16::from_be_bytes([self.hdr[6], self.hdr[7]])
    }

    /// DF flag.
    pub fn dont_fragment(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }

    /// MF flag.
    pub fn more_fragments(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }

    /// Fragment offset in bytes (field * 8, at most 65528).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_offset() & FRAG_OFFSET_MASK) << 3
    }

    /// MF set or offset non-zero.
    pub fn is_fragment(&self) -> bool {
        self.more_fragments() || self.frag_offset() != 0
    }

    /// TTL.
    pub fn ttl(&self) -> u8 {
        self.hdr[8]
    }

    /// Protocol.
    pub fn protocol(&self) -> u8 {
        self.hdr[9]
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.hdr[10], self.hdr[11]])
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.hdr[12], self.hdr[13], self.hdr[14], self.hdr[15])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.hdr[16], self.hdr[17], self.hdr[18], self.hdr[19])
    }

    /// The whole header, options included.
    pub fn header(&self) -> &'a [u8] {
        self.buf.get(..self.header_len).unwrap_or(&[])
    }

    /// The options (possibly empty).
    pub fn options(&self) -> &'a [u8] {
        self.buf.get(Self::MIN_HEADER_LEN..self.header_len).unwrap_or(&[])
    }

    /// True when the buffer holds fewer bytes than the total length.
    pub fn is_truncated(&self) -> bool {
        usize::from(self.total_len()) > self.buf.len()
    }

    /// Offset (in the buffer) where the packet ends: min(total length, buffer).
    pub fn end(&self) -> usize {
        usize::from(self.total_len()).min(self.buf.len())
    }

    /// The payload present in the buffer: after the header, up to the total
    /// length (padding excluded), shorter when the buffer is truncated.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(self.header_len..self.end()).unwrap_or(&[])
    }

    /// True when the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        crate::checksum::internet_checksum(self.header()) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 192.168.0.1 -> 192.168.0.199, UDP, total 0x73, DF, TTL 64, checksum b861
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
        0x00, 0xc7,
    ];

    #[test]
    fn fields() {
        let mut b = HDR.to_vec();
        b.resize(0x73 + 6, 0xee); // 6 bytes of padding
        let p = Ipv4Packet::new_checked(&b).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert!(p.dont_fragment());
        assert!(!p.more_fragments());
        assert!(!p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), 17);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert!(p.verify_checksum());
        assert!(!p.is_truncated());
        assert_eq!(p.payload().len(), 0x73 - 20);
        assert!(p.options().is_empty());

        let mut bad = b.clone();
        bad[8] = 63;
        assert!(!Ipv4Packet::new_checked(&bad).unwrap().verify_checksum());
    }

    #[test]
    fn truncated_and_bad() {
        for n in 0..20 {
            assert_eq!(Ipv4Packet::new_checked(&HDR[..n]), Err(ParseError::Truncated { layer: Layer::Ipv4 }));
        }
        let p = Ipv4Packet::new_checked(&HDR).unwrap();
        assert!(p.is_truncated());
        assert!(p.payload().is_empty());

        let mut b = HDR;
        b[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&b), Err(ParseError::BadVersion));
        b[0] = 0x44;
        assert_eq!(Ipv4Packet::new_checked(&b), Err(ParseError::BadHeaderLen { layer: Layer::Ipv4 }));
        b[0] = 0x46; // 24-byte header, 20 present
        assert_eq!(Ipv4Packet::new_checked(&b), Err(ParseError::Truncated { layer: Layer::Ipv4 }));
        let mut b = HDR;
        b[2] = 0;
        b[3] = 19;
        assert_eq!(Ipv4Packet::new_checked(&b), Err(ParseError::BadTotalLen));
    }

    #[test]
    fn options_and_fragments() {
        let mut b = HDR.to_vec();
        b[0] = 0x47; // 28-byte header
        b[2] = 0;
        b[3] = 40;
        b[6] = 0x20 | 0x1f; // MF, offset high bits
        b[7] = 0xff;
        b.extend_from_slice(&[1, 1, 1, 1, 0x94, 4, 0, 0]);
        b.extend_from_slice(&[9; 12]);
        let p = Ipv4Packet::new_checked(&b).unwrap();
        assert_eq!(p.header_len(), 28);
        assert_eq!(p.options(), &[1, 1, 1, 1, 0x94, 4, 0, 0]);
        assert!(p.more_fragments());
        assert_eq!(p.frag_offset(), 0x1fff * 8);
        assert!(p.is_fragment());
        assert_eq!(p.payload(), &[9; 12]);
        assert_eq!(p.header().len(), 28);
    }
}
